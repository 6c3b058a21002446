"""What to change, per finding id: the one place that turns a finding into a concrete change (``FIXES``).

Every finding id with a known fix has one function here, ``(finding, JobFacts, FixContext) -> Recommendation |
NoSetting | None``, that chooses the change from the job's own counters: the layer the program calls (HDF5 or
PnetCDF above MPI-IO above POSIX/STDIO, Dask/xarray/Zarr), whether it reads or writes, its access sizes, file
counts and process count.  The change is something to paste or pass: a flag of the workload (``arg``), an
environment variable (``env``), code (``snippet``, C and Python forms), a shell line (``shell``: ``lfs
setstripe``, a ROMIO hints file).  ``NoSetting`` says why no setting can help (a slow node or storage target, the
program's own data decomposition): the report shows that instead of a change.  ``None``: nothing known (the
finding's own text still says what to look at).

Rules the functions keep (tests/test_recommend_corpus.py checks them on every corpus log):
- a change never proposes the job's current setting (chunks, stripe count, aggregators are compared with what
  the job used);
- a job that only writes gets no read advice, and the reverse;
- a change never contradicts another finding's (the chunking of a Dask job is grown, never split, when the tasks
  are too short).

Gains: how much a change can give is recommend/gains.py's (a bound for a change inside the I/O calls, else
unknown until measured or predicted).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping, Sequence

from ..units import fmt_bytes, fmt_pct
from ..analyzers.detectors.access import MISALIGNED, RANDOM_ACCESS, REDUNDANT_READ
from ..analyzers.detectors.coverage import NO_IO, PARTIAL_LOG, STDIO_HEAVY
from ..analyzers.detectors.layers import READ_MODIFY_WRITE
from ..analyzers.detectors.metadata import MANY_SMALL_FILES, METADATA_STORM
from ..analyzers.detectors.mpi import NO_COLLECTIVE_IO, SHARED_FILE_CONTENTION
from ..analyzers.detectors.parallel import INACTIVE_RANKS, RANK_IMBALANCE, STRAGGLER_PROCESS
from ..analyzers.detectors.scaling import WEAK_SCALING_LOSS
from ..analyzers.detectors.smallio import SMALL_IO
from ..analyzers.detectors.sync import FSYNC_PER_WRITE
from ..analyzers.detectors.tasks import STRAGGLER_TASK, TASK_OVERHEAD
from ..config import Config
from ..findings import Finding
from .gains import _nothing_to_gain, _with_gain, io_bound
from .open_once import open_once_rec as _open_once, probe_dominant
from .jobfacts import IO_ONLY, RESHAPES, Fix, FixContext, JobFacts, NoSetting, job_facts
from .recommendation import Change, Recommendation
from .settings import (_alignment_rec, _chunks_from_files, _chunks_from_tasks, _python_buffering, _rmw_setting,
                       _small_io_setting, _striping, hints_changes, setstripe)


def _folder(path: str | None) -> str:
    return (path or "").rsplit("/", 1)[0] or "<output dir>"


_COLLECTIVE_CALL = {
    "HDF5": {"read": "H5Pset_dxpl_mpio(dxpl, H5FD_MPIO_COLLECTIVE);  /* H5Dread's */",
             "write": "H5Pset_dxpl_mpio(dxpl, H5FD_MPIO_COLLECTIVE);  /* H5Dwrite's */"},
    "PnetCDF": {"read": "ncmpi_get_vara_<type>_all(...);  /* not ncmpi_get_vara_<type> */",
                "write": "ncmpi_put_vara_<type>_all(...);  /* not ncmpi_put_vara_<type> */"},
    "MPI-IO": {"read": "MPI_File_read_at_all(fh, off, buf, n, type, &st);",
               "write": "MPI_File_write_at_all(fh, off, buf, n, type, &st);"},
}


def _rw(j: JobFacts, reads: float, writes: float) -> str | None:
    """The direction to advise on: the one the counts say, never one the job did not do."""
    if not j.writes or (reads > writes and j.reads):
        return "read" if j.reads else None
    return "write"


def _collective(f: Finding, j: JobFacts, rw: str, extra: Mapping[str, Any] | None = None,
                already: bool = False) -> Recommendation:
    layer = j.top if j.top in _COLLECTIVE_CALL else "MPI-IO"
    hints = {f"romio_cb_{rw}": "enable", **(extra or {})}
    code = () if already else (Change("snippet", _COLLECTIVE_CALL[layer][rw]),)
    what = "aggregate them" if already else "make them collective"
    return Recommendation(id="collective-io", title=f"Collective {rw}s with collective buffering ({layer}): {what}",
                          settings={**hints, **({} if already else {"collective_calls": True})},
                          changes=code + hints_changes(layer, hints), gain=IO_ONLY)


# ------------------------------------------------------------------------------------------------ per finding
def _fix_task_overhead(f: Finding, j: JobFacts, c: FixContext):
    if f.facts.get("array"):
        return _chunks_from_tasks(f, c.cfg, c.params)
    mb = int(c.cfg.tasks.target_chunk_bytes // 2**20)
    return Recommendation(id="chunking", title=f"Fewer, larger Dask chunks (~{mb} MiB each)",
                          settings={"chunk_size": f"{mb}MiB"}, gain=RESHAPES,
                          changes=(Change("snippet", f'dask.config.set({{"array.chunk-size": "{mb}MiB"}})\n'
                                                     'ds = xr.open_dataset(path, chunks="auto")'),))


def _opens_of(profile, mod: str) -> float:
    t = profile.module(mod) if profile is not None else None
    return float(t[f"{mod}_OPENS"].clip(0).sum()) if t is not None and f"{mod}_OPENS" in t else 0.0


def _fix_many_small_files(f: Finding, j: JobFacts, c: FixContext):
    if f.facts.get("zarr_grids"):
        return _chunks_from_files(c.profile, f, c.params)
    n, after = int(f.facts.get("small_files", 0)), int(f.facts.get("files_after", 1))
    top = f.facts.get("top_directory") or "<dir>"
    if j.writes:  # the job writes them: write fewer
        if "HDF5" in j.layers and j.nprocs > 1:
            return Recommendation(
                id="shared-file", title=f"Write one shared HDF5 file instead of {n:,} small files", gain=IO_ONLY,
                settings={"files": 1}, changes=(
                    Change("snippet", "H5Pset_fapl_mpio(fapl, MPI_COMM_WORLD, MPI_INFO_NULL);"),
                    Change("snippet", 'f = h5py.File(path, "w", driver="mpio", comm=MPI.COMM_WORLD)  # h5py')))
        if j.python:
            code = ("with h5py.File(out, 'a') as h5:  # one container\n"
                    "    h5[name] = data  # one dataset per former file")
        elif j.mpi and j.nprocs > 1:  # a C/Fortran MPI program: one shared file, each former file at its offset
            code = ("/* once: one shared file; each former file at its own offset */\n"
                    "MPI_File_open(MPI_COMM_WORLD, out, MPI_MODE_CREATE | MPI_MODE_WRONLY,\n"
                    "              MPI_INFO_NULL, &fh);\n"
                    "MPI_File_write_at_all(fh, offset, buf, n, MPI_BYTE, &st);")
        elif _opens_of(c.profile, "STDIO") > _opens_of(c.profile, "POSIX"):  # fopen'ed files; lines of ≤ 72 columns
            code = ('FILE *fp = fopen(out, "wb");  /* once: one file */\n'
                    "fwrite(buf, 1, n, fp);  /* each former file in turn; keep an index */")
        else:
            code = ("int fd = open(out, O_CREAT | O_WRONLY, 0644);  /* once: one file */\n"
                    "pwrite(fd, buf, n, offset);  /* each former file at its offset */")
        return Recommendation(id="pack-files", title=f"Write {after:,} file(s) instead of {n:,} small ones",
                              settings={"files": after}, gain=IO_ONLY, changes=(Change("snippet", code),))
    return Recommendation(id="pack-files", title=f"Pack {n:,} small input files into {after:,} file(s) once",
                          settings={"files": after}, gain=RESHAPES, changes=(
                              Change("shell", f"tar cf {top}.tar -C {top} .  # once; read members from the "
                                              "archive (tarfile) instead of opening each file"),))


def _fix_metadata_storm(f: Finding, j: JobFacts, c: FixContext):
    x = f.facts
    kinds = {k["kind"]: k for k in x.get("kinds", ())}
    many = x.get("many", {})
    if many.get("fsyncs") and int(f.evidence.get("fsyncs_count", 0)) > int(f.evidence.get("opens_count", 0)):
        # more syncs than opens: the files are synced while they are written, not once at the end
        return _fsync_rec(f, j)
    if x.get("reopened") or "netcdf-hdf5" in kinds:
        return _open_once(f, j, (x.get("reopened") or {}).get("path"), c.profile)
    if "zarr-chunk" in kinds:
        return None  # the chunking recommendation (many-small-files / task-overhead) addresses it
    if "python-import" in kinds and kinds["python-import"]["share"] >= 0.5:
        return NoSetting(f"{fmt_pct(kinds['python-import']['share'])} of the metadata time is Python importing modules "
                         f"from {kinds['python-import']['fs'] or 'the file system'}: where the environment lives is "
                         "a site choice (node-local disk, a container or squashfs image), not a setting of the job")
    opens, opened = int(f.evidence.get("opens_count", 0)), x.get("opened_files")
    if opened is None and j.files and opens >= 10 * j.files * j.nprocs:  # every process re-opens its files
        opened = j.files
    h5 = "HDF5" in j.layers or any(p.lower().endswith((".h5", ".hdf5", ".he5")) for p in f.files)
    if opened is not None and opened * 10 <= opens and j.nprocs > 1 and opens < 10 * opened * j.nprocs:
        # every process opens the same few files about once: metadata each rank reads for itself
        if h5 and j.mpi:
            return Recommendation(
                id="collective-metadata", title="Collective HDF5 metadata: one process reads, all share",
                settings={"all_coll_metadata_ops": 1, "coll_metadata_write": 1}, gain=IO_ONLY,
                changes=(Change("snippet", "H5Pset_all_coll_metadata_ops(fapl, 1);\nH5Pset_coll_metadata_write(fapl, 1);"),))
        opened = None  # an open per rank is what MPI-IO does: no change here
    elif opened is not None and opened * 10 <= opens:
        return _open_once(f, j, None, c.profile)
    if opened is not None and opened * 10 > opens:  # about one open per file: the files are too many
        msf = c.has(MANY_SMALL_FILES.id)
        return _fix_many_small_files(msf or replace(f, facts={"small_files": opened, "files_after": max(1, opened // 100)}),
                                     j, c)
    if c.has(MANY_SMALL_FILES.id):  # the opens are those of the many small files: fewer files is the change
        return _fix_many_small_files(c.has(MANY_SMALL_FILES.id), j, c)
    if many.get("stats") or many.get("seeks"):
        return _stat_seek_rec(f, j)
    return None


def _stat_seek_rec(f: Finding, j: JobFacts) -> Recommendation:
    ev = f.evidence
    code = []
    if int(ev.get("seeks_count", 0)):
        code.append("pread(fd, buf, n, offset);  /* instead of lseek + read */" if not j.python else
                    "os.pread(fd, n, offset)  # instead of f.seek(offset); f.read(n)")
    if int(ev.get("stats_count", 0)):
        code.append("size = st.st_size;  /* stat each file once and keep it */" if not j.python else
                    "size = os.fstat(f.fileno()).st_size  # once per open file, kept")
    what = " and ".join(f"{int(ev.get(f'{k}s_count', 0)):,} {k}s" for k in ("stat", "seek") if int(ev.get(f"{k}s_count", 0)))
    return Recommendation(id="fewer-metadata-calls", title=f"Drop {what or 'stats and seeks'}", settings={"pread": True}, gain=IO_ONLY,
                          changes=tuple(Change("snippet", s) for s in code))


def _fsync_rec(f: Finding, j: JobFacts) -> Recommendation:
    n = int(f.evidence.get("syncs") or f.evidence.get("fsyncs_count") or f.evidence.get("fsyncs") or 0)
    if j.python:
        code = "f.flush(); os.fsync(f.fileno())  # once, after the last write"
    elif "HDF5" in j.layers:
        code = "H5Fflush(fid, H5F_SCOPE_LOCAL);  /* once, at the end */"
    else:
        code = "fsync(fd);  /* once, before close: not after each write */"
    return Recommendation(id="fsync-policy", title=f"Sync once per file, not {n:,} times" if n else
                          "Sync once per file, not after every write", settings={"fsync": "at-close"},
                          changes=(Change("snippet", code),), gain=IO_ONLY)


def _fix_fsync_per_write(f: Finding, j: JobFacts, c: FixContext):
    return _fsync_rec(f, j)


def _fix_small_io(f: Finding, j: JobFacts, c: FixContext):
    if f.facts.get("stdio"):  # small fread/fwrite calls: the stream's own buffer, or the file whole
        return _stdio_small(f, j, c)
    if f.facts.get("python"):
        ev = f.evidence
        n = max(ev["small_reads"] + ev["small_writes"], 1)
        if ev.get("strided_ops_counter", 0) >= 0.2 * n and ev.get("array_file") and j.reads and \
                ev["small_reads"] >= ev["small_writes"]:
            return Recommendation(id="read-many-steps", title="Request many time steps per read (larger Dask chunks "
                                  "along time)", settings={"chunks": {"time": 24}}, gain=RESHAPES,
                                  changes=(Change("snippet", f'ds = xr.open_dataset("{ev["array_file"]}", '
                                                             'chunks={"time": 24})'),))
        if _hdf5_name(ev.get("array_file")) and j.reads and ev["small_reads"] >= ev["small_writes"]:
            return _hdf5_sieve(ev["array_file"], int(f.facts.get("buffer_bytes", c.cfg.small_io.buffer_bytes)))
        return _python_buffering(f, c.cfg)
    rec = _small_io_setting(f, c.cfg)
    ev = f.evidence
    n = max(ev["small_reads"] + ev["small_writes"], 1)
    if rec is not None and rec.id == "buffering" and c.has(RANDOM_ACCESS.id) and \
            ev.get("consecutive_ops_counter", 0) + ev.get("strided_ops_counter", 0) < 0.2 * n:
        return None  # scattered small ops: a 4 MiB request per small one reads mostly unwanted bytes; random-access's change (the file whole, in order) covers them
    return rec


def _hdf5_name(path: str | None) -> bool:
    return bool(path) and path.lower().endswith((".h5", ".hdf5", ".he5"))


def _hdf5_sieve(path: str, buf: int) -> Recommendation:
    """Small consecutive reads of an HDF5 file by a Python program: the HDF5 library makes them (its 64 KiB
    sieve buffer on a contiguous dataset), so Python's open(buffering=...) cannot reach them; h5py's low-level
    file access list can.  HDF5's own copying changes too: no I/O-only bound."""
    code = ("fapl = h5py.h5p.create(h5py.h5p.FILE_ACCESS)\n"
            f"fapl.set_sieve_buf_size({buf})  # HDF5 reads {fmt_bytes(buf)} per request, not 64 KiB\n"
            f'f = h5py.File(h5py.h5f.open(b"{path}", h5py.h5f.ACC_RDONLY, fapl))')
    return Recommendation(id="buffering", title=f"Let HDF5 read {fmt_bytes(buf)} per request (its sieve buffer)",
                          settings={"buffering": buf}, changes=(Change("snippet", code),), gain=RESHAPES)


def _stdio_small(f: Finding, j: JobFacts, c: FixContext) -> Recommendation:
    x, ev = f.facts["stdio"], f.evidence
    buf = int(f.facts.get("buffer_bytes", c.cfg.small_io.buffer_bytes))
    rw = "read" if ev["small_reads"] >= ev["small_writes"] else "write"
    n = int(ev[f"small_{rw}s"])
    if j.python:
        code = (f"open(path, '{'rb' if rw == 'read' else 'wb'}', buffering={buf})",)
    elif rw == "read" and x.get("top_file_bytes") and x["top_file_bytes"] <= 1 << 30:
        code = (f"fread(buf, 1, {int(x['top_file_bytes'])}, fp);  /* the whole file once */",
                f"setvbuf(fp, NULL, _IOFBF, {buf});  /* or at least, after fopen */")
    else:
        code = (f"setvbuf(fp, NULL, _IOFBF, {buf});  /* after fopen */",)
    return Recommendation(id="buffering", title=f"Fewer, larger f{rw} calls instead of {n:,} small ones",
                          settings={"buffering": buf}, changes=tuple(Change("snippet", t) for t in code), gain=IO_ONLY)


def _fix_stdio_heavy(f: Finding, j: JobFacts, c: FixContext):
    small = c.has(SMALL_IO.id)
    if small is not None and small.facts.get("stdio"):  # the same small calls: the same change
        return _stdio_small(small, j, c)
    if f.facts.get("large_requests"):
        return NoSetting("the STDIO requests are already large: the stream buffer is not what costs here")
    if 0 < float(f.facts.get("calls_per_open") or 0) <= 2.0:  # a 1 KiB file written in one fwrite: no call to merge
        return NoSetting("each STDIO stream moves its file in about one call: a larger buffer saves no call")
    buf = int(c.cfg.small_io.buffer_bytes)
    code = (f"open(path, 'rb', buffering={buf})  # or 'wb'" if j.python else
            f"setvbuf(fp, NULL, _IOFBF, {buf});  /* after fopen */")
    return Recommendation(id="buffering", title=f"Give each STDIO stream a {fmt_bytes(buf)} buffer",
                          settings={"buffering": buf}, changes=(Change("snippet", code),), gain=IO_ONLY)


def _array_file(f: Finding) -> str | None:
    """The finding's one NetCDF/HDF5 file, when all its files are that one."""
    fs = set(f.files)
    if len(fs) == 1 and next(iter(fs)).lower().endswith((".nc", ".nc4", ".h5", ".hdf5", ".he5")):
        return next(iter(fs))
    return None


def _fix_random_access(f: Finding, j: JobFacts, c: FixContext):
    ev = f.evidence
    reads, writes = float(ev.get("non_sequential_reads", 1)), float(ev.get("non_sequential_writes", 0))
    rw = _rw(j, reads, writes)
    if rw is None:
        return None
    if "MPI-IO" in j.layers:
        if rw == "read":
            return Recommendation(id="data-sieving", title="Let ROMIO read whole regions (data sieving) for "
                                  "scattered reads", settings={"romio_ds_read": "enable", "ind_rd_buffer_size": 4194304},
                                  changes=hints_changes(j.top, {"romio_ds_read": "enable",
                                                                "ind_rd_buffer_size": 4194304}), gain=IO_ONLY)
        return _collective(f, j, "write")
    if "HDF5" in j.layers:
        return Recommendation(id="chunk-cache", title="Cache HDF5 chunks (64 MiB) so scattered accesses hit memory",
                              settings={"chunk_cache_bytes": 64 * 2**20}, gain=IO_ONLY, changes=(
                                  Change("snippet", "H5Pset_chunk_cache(dapl, 12421, 67108864, 0.75);"),
                                  Change("snippet", 'f = h5py.File(path, "r", rdcc_nbytes=64 * 2**20)  # h5py')))
    if rw == "read" and j.python and _array_file(f):
        return Recommendation(id="read-whole", title="Load the variable once and index it in memory",
                              settings={"read_whole": True}, gain=RESHAPES, changes=(
                                  Change("snippet", f'ds = xr.open_dataset("{_array_file(f)}").load()  # once'),))
    if rw == "read":
        code = ("data = open(path, 'rb').read()  # once; then slice data" if j.python
                else "pread(fd, buf, file_size, 0);  /* once; then index buf */")
        return Recommendation(id="read-whole", title="Read the file once, in order, and index it in memory",
                              settings={"read_whole": True}, changes=(Change("snippet", code),), gain=IO_ONLY)
    code = ("buf[offset:offset + n] = piece  # then one f.write(buf)" if j.python else
            "memcpy(buf + offset, piece, n);  /* then one write(fd, buf, size) */")
    return Recommendation(id="write-in-order", title="Gather scattered writes in memory and write them in order",
                          settings={"write_in_order": True}, changes=(Change("snippet", code),), gain=IO_ONLY)


_SHARE = {"dask": ("persist", "ds = ds.persist()  # load once into the workers; tasks reuse it"),
          "mpi": ("broadcast", "MPI_Bcast(buf, n, MPI_BYTE, 0, MPI_COMM_WORLD);  /* rank 0 reads */")}


def _fix_redundant_read(f: Finding, j: JobFacts, c: FixContext):
    kind = f.facts.get("kind", "")
    if j.python and probe_dominant(f):  # netCDF-C reads up to 4 MiB at each open: fewer opens, not a data cache
        rec = _open_once(f, j, f.files[0] if f.files else None, c.profile)  # the costliest file, by name
        return replace(rec, title=f"Open each NetCDF file once per process ({int(f.facts['probe_opens']):,} opens "
                                  f"read {fmt_bytes(f.facts['probe_bytes'])} to probe the format)")
    if kind == "mpi" and int(f.evidence.get("worst_file_readers", 2)) <= 1:
        kind = ""  # one process reads the file again and again: nothing to broadcast, it keeps what it read
    if kind in _SHARE:
        rid, code = _SHARE[kind]
    elif j.python and _hdf5_name(_array_file(f)):  # an HDF5 file: h5py's way (xarray reads NetCDF-4 files)
        rid, code = "read-once", f'data = h5py.File("{_array_file(f)}", "r")["var"][()]  # once; index data in memory'
    elif j.python and _array_file(f):
        rid, code = "read-once", f'ds = xr.open_dataset("{_array_file(f)}").load()  # once; index ds in memory'
    elif j.python:
        rid, code = "read-once", "data = open(path, 'rb').read()  # once; reuse data"
    else:
        rid, code = "read-once", "pread(fd, buf, size, 0);  /* once; keep buf for every later use */"
    amp = float(f.evidence.get("worst_file_amplification", 0))
    return Recommendation(id=rid, title=f"Read each file once (today up to {amp:.1f} times)", settings={rid: True},
                          changes=(Change("snippet", code),),
                          gain=RESHAPES if j.python and _array_file(f) else IO_ONLY)  # xarray decodes on load


def _fix_shared_file_contention(f: Finding, j: JobFacts, c: FixContext):
    if "MPI-IO" in j.layers:
        return _collective(f, j, "write")
    writers = int(f.facts.get("worst_writers", 2))
    if j.python:
        code = 'f = open(f"{out}.{rank}", "wb")  # one file per process'
    elif _opens_of(c.profile, "STDIO") > _opens_of(c.profile, "POSIX"):  # the program fopen's its files
        code = 'fp = fopen(name, "w");  /* name: "out.<rank>", one per process */'
    else:  # open/write (pwrite) calls: the same calls on a file of its own
        code = 'fd = open(name, O_CREAT | O_WRONLY, 0644);  /* name: "out.<rank>" */'

    return Recommendation(id="file-per-process", title=f"One file per writer instead of {writers} processes on one "
                          "file", settings={"file_per_process": True}, changes=(Change("snippet", code),), gain=IO_ONLY)


def _fix_no_collective_io(f: Finding, j: JobFacts, c: FixContext):
    ev = f.evidence
    x = {**ev, **f.facts}  # the detector's counts of independent reads and writes (facts)
    rw = _rw(j, float(x.get("independent_reads", 0)), float(x.get("independent_writes", 1)))
    return _collective(f, j, rw or "write")


def _fix_rank_imbalance(f: Finding, j: JobFacts, c: FixContext):
    ev, x = f.evidence, f.facts
    sc = ev.get("top_file_stripe_count")
    if x.get("top_file") and sc is not None and int(sc) < 8:
        return _striping(c.profile, f)
    heavy = int(ev.get("heavy_processes", 1))
    if x.get("collective") and heavy < j.nprocs:
        # the heavy processes are the collective-buffering aggregators: more of them spread the bytes (one
        # aggregator is ROMIO's default on one node: cb_config_list *:* lets several ranks of a node aggregate)
        n = min(max(2 * heavy, 4), j.nprocs)
        rw = x.get("collective_rw") or ("write" if j.writes else "read")
        rec = _collective(f, j, rw, {"cb_nodes": n, **({"cb_config_list": "*:*"} if heavy == 1 else {})},
                          already=True)
        changes = rec.changes
        stripe = None
        if j.lustre and x.get("top_file") and sc is not None and int(sc) < n:
            # as many OSTs as aggregators where the job's own records show that many, else all of them (-1)
            stripe = n if _osts_seen(c.profile) >= n else -1
            changes += (setstripe(_folder(x["top_file"]), stripe),)
        over = "" if stripe is None else f" and the output striped over {n if stripe > 0 else 'all'} OSTs"
        return replace(rec, id="aggregators", title=f"{n} collective-buffering aggregators instead of {heavy}" + over,
                       settings={"cb_nodes": n, **({"stripe_count": stripe} if stripe is not None else {})},
                       changes=changes)
    if "MPI-IO" in j.layers and not x.get("collective"):
        return _collective(f, j, x.get("mpiio_rw") or ("write" if j.writes else "read"))
    return NoSetting(f"{heavy} process(es) carry {fmt_pct(float(ev.get('share_of_bytes_on_heavy', 0)))} of the bytes because "
                     "the program gives them that share: no I/O setting changes how it divides the data")


def _osts_seen(profile) -> int:
    """How many distinct Lustre OSTs the job's LUSTRE records name (0 without them)."""
    t = profile.module("LUSTRE")
    if t is None or "osts" not in t:
        return 0
    return len({o for s in set(t["osts"].tolist()) if s for o in str(s).split(",")})


def _fix_straggler_process(f: Finding, j: JobFacts, c: FixContext):
    ev = f.evidence
    if "suspect_ost" in ev:
        return NoSetting(f"the slow processes' files sit on Lustre OST {ev['suspect_ost']}: a slow storage target "
                         "(hardware or load) — report it to the site; no setting of the job helps")
    if "stragglers_host" in ev:
        return NoSetting(f"the slow processes ran on {ev['stragglers_host']}: a slow node — report it; no setting "
                         "of the job helps")
    return NoSetting("the slow process moves no more data than its peers: where it ran (node, storage target) is "
                     "slower, which no setting of the job changes")


def _fix_inactive_ranks(f: Finding, j: JobFacts, c: FixContext):
    return NoSetting("which ranks read or write is the program's decomposition: no I/O setting gives the idle "
                     "ranks work (collective I/O already lets aggregators act for them)")


def _fix_partial_log(f: Finding, j: JobFacts, c: FixContext):
    x = f.facts
    if x.get("lost"):
        return NoSetting(f"{f.evidence.get('logs_lost', 1)} log(s) are damaged or truncated: the numbers are lower "
                         "bounds; only a re-run whose processes exit normally gives a whole log")
    if not x.get("config_lines"):
        return None
    lines = list(x["config_lines"]) + [f"MODMEM {x['modmem_mib']}", f"NAMEMEM {x['namemem_mib']}"]
    quoted = " ".join(f"'{s}'" for s in lines)
    return Recommendation(id="darshan-records", title="Re-run with room for every record in the Darshan log",
                          settings={"darshan_config": lines}, gain=None, changes=(
                              Change("shell", f"printf '%s\\n' {quoted} > darshan.conf", "darshan.conf", lines),
                              Change("env", "export DARSHAN_CONFIG_PATH=$PWD/darshan.conf", "DARSHAN_CONFIG_PATH",
                                     "$PWD/darshan.conf")),
                          notes=("a measurement change, not a speed-up: the next log holds every record",))


def _fix_read_modify_write(f: Finding, j: JobFacts, c: FixContext):
    rec = _rmw_setting(f)
    return rec if rec is not None else NoSetting(
        "the writes are collective and off Lustre no ROMIO hint turns off collective buffering's read of the holes; "
        "only the program's layout removes it (pieces that cover each aggregator's range)")


def _fix_misaligned(f: Finding, j: JobFacts, c: FixContext):
    return _alignment_rec(f)


def _fix_straggler_task(f: Finding, j: JobFacts, c: FixContext):
    if c.has(TASK_OVERHEAD.id) or c.has(MANY_SMALL_FILES.id):
        return None  # the chunking recommendation (even, larger chunks) is the change; see the finding's text
    return NoSetting("one task's input or its worker is slow: no setting picks out that task (split its input "
                     "into smaller chunks only when the tasks are otherwise long)")


def _fix_weak_scaling_loss(f: Finding, j: JobFacts, c: FixContext):
    return None


def _fix_no_io(f: Finding, j: JobFacts, c: FixContext):
    return NoSetting("the log holds no reads or writes")


FIXES: dict[str, Fix] = {
    TASK_OVERHEAD.id: _fix_task_overhead,
    MANY_SMALL_FILES.id: _fix_many_small_files,
    METADATA_STORM.id: _fix_metadata_storm,
    SMALL_IO.id: _fix_small_io,
    STDIO_HEAVY.id: _fix_stdio_heavy,
    RANDOM_ACCESS.id: _fix_random_access,
    REDUNDANT_READ.id: _fix_redundant_read,
    SHARED_FILE_CONTENTION.id: _fix_shared_file_contention,
    NO_COLLECTIVE_IO.id: _fix_no_collective_io,
    RANK_IMBALANCE.id: _fix_rank_imbalance,
    STRAGGLER_PROCESS.id: _fix_straggler_process,
    INACTIVE_RANKS.id: _fix_inactive_ranks,
    PARTIAL_LOG.id: _fix_partial_log,
    READ_MODIFY_WRITE.id: _fix_read_modify_write,
    MISALIGNED.id: _fix_misaligned,
    STRAGGLER_TASK.id: _fix_straggler_task,
    WEAK_SCALING_LOSS.id: _fix_weak_scaling_loss,
    NO_IO.id: _fix_no_io,
    FSYNC_PER_WRITE.id: _fix_fsync_per_write,
}




def _current_same(rec: Recommendation, j: JobFacts, c: FixContext) -> bool:
    """Whether the change is what the job already does (never propose it)."""
    ch = rec.settings.get("chunks")
    if isinstance(ch, str) and j.arrays:
        now = {",".join(str(v) for v in a["chunks"]) for a in j.arrays}
        if ch in now and rec.id == "chunking":
            return True
    if c.params:
        for k, v in rec.settings.items():
            if k in c.params and str(c.params[k]) == str(v):
                return True
    return False


def recommendations_for(profile, findings: Sequence[Finding], config: Config | None = None,
                        params: Mapping[str, Any] | None = None) -> list[Recommendation]:
    """The findings' changes, most costly finding first; a change several findings call for is listed once and
    addresses them all; ``NoSetting`` answers become recommendations with ``abstain`` (why no setting helps) and
    ``source`` "rules", listed after the changes."""
    from .features import BASED_ON_MEASURED, BASED_ON_PARAMS, live_note, live_stores

    cfg = config or Config()
    j = job_facts(profile)
    ctx = FixContext(profile, cfg, params, tuple(findings))
    based = BASED_ON_PARAMS if params else BASED_ON_MEASURED.split(" (")[0]
    bound = io_bound(j)
    recs: dict[str, Recommendation] = {}
    why: list[Recommendation] = []
    live: str | None = None
    for f in sorted(findings, key=lambda f: -(f.est_cost_s or 0.0)):
        fix = FIXES.get(f.id)
        if fix is None:
            continue
        out = fix(f, j, ctx)
        if isinstance(out, NoSetting) and f.severity == "info":
            continue  # an info finding costs too little to explain why nothing helps
        if isinstance(out, NoSetting):
            why.append(Recommendation(id=f"no-setting:{f.id}", title=f"{f.id}: no setting helps", settings={},
                                      source="rules", abstain=out.why, addresses=(f.id,), based_on=based))
            continue
        if out is None or not out.changes or _current_same(out, j, ctx):
            continue
        if out.id in recs:
            have = recs[out.id]
            recs[out.id] = replace(have, addresses=tuple(dict.fromkeys(have.addresses + (f.id,))))
            continue
        addresses = [f.id]
        if out.id in ("chunking", "layout"):  # the chunk files' opens and renames are the metadata storm's
            addresses += [g.id for g in findings if g.id == METADATA_STORM.id
                          and any(k["kind"] == "zarr-chunk" for k in g.facts.get("kinds", ()))]
            # even, larger chunks are also the change for a straggling task among too-short ones (its text says so)
            addresses += [g.id for g in findings if g.id == STRAGGLER_TASK.id and out.id == "chunking"]
        if out.id in ("chunking", "layout") and live is None:
            stores = live_stores(profile)  # chunk advice plans from the arrays' metadata: say when it was not the job's
            live = live_note(stores) if stores else ""
        recs[out.id] = replace(out, addresses=tuple(dict.fromkeys(addresses)),
                               based_on=based + ((live or "") if out.id in ("chunking", "layout") else ""))
    out = _merge_into_chunking(_merge_into_open_once(list(recs.values()), findings), findings, j)
    gained = [_with_gain(r, profile, j, bound, findings) for r in out]
    return [r for r in gained if not _nothing_to_gain(r, findings)] + why


# findings that a file re-opened for every step shows as well: its header and index are read again each time
_REOPEN_SYMPTOMS = (REDUNDANT_READ.id, RANDOM_ACCESS.id, SMALL_IO.id, STDIO_HEAVY.id)


def _merge_into_chunking(recs: list[Recommendation], findings: Sequence[Finding], j: JobFacts) -> list[Recommendation]:
    """In a Dask job cut into too many chunks, each task opens the source again and reads its header and index
    (redundant-read), jumps back to them (random-access) in small requests (small-io): at low or info severity
    those are symptoms the chunking change removes, not changes of their own (reading the whole variable into
    memory would contradict chunked processing)."""
    ch = next((r for r in recs if r.id == "chunking"), None)
    if ch is None or not j.dask:
        return recs
    minor = {f.id for f in findings if f.id in _REOPEN_SYMPTOMS and f.severity in ("low", "info")}
    out, extra = [], []
    for r in recs:
        if r is not ch and r.addresses and set(r.addresses) <= minor:
            extra += list(r.addresses)
            continue
        out.append(r)
    done = {a for r in out for a in r.addresses}
    extra += [i for i in minor if i not in done and i not in extra]
    if not extra:
        return recs
    merged = replace(ch, addresses=tuple(dict.fromkeys(ch.addresses + tuple(sorted(extra)))))
    return [merged if r is ch else r for r in out]


def _merge_into_open_once(recs: list[Recommendation], findings: Sequence[Finding]) -> list[Recommendation]:
    """A file opened again for every step is also read again (redundant-read), out of order (random-access) and
    in small pieces (small-io): when those findings are about that file alone, opening it once is their change
    too; their own recommendations fold into it, and it goes first (it addresses the most)."""
    once = next((r for r in recs if r.id == "open-once" and isinstance(r.settings.get("open_once"), str)), None)
    if once is None:
        return recs
    path = once.settings["open_once"]
    by_id = {f.id: f for f in findings}
    out, extra = [], []
    for r in recs:
        fs = [by_id[a] for a in r.addresses if a in by_id]
        if r is not once and fs and all(f.id in _REOPEN_SYMPTOMS and set(f.files) == {path} for f in fs):
            extra += [a for a in r.addresses]
            continue
        out.append(r)
    done = {a for r in out for a in r.addresses}
    extra += [f.id for f in findings if f.id in _REOPEN_SYMPTOMS and f.id not in done and set(f.files) == {path}]
    if not extra:
        return recs
    merged = replace(once, addresses=tuple(dict.fromkeys(once.addresses + tuple(extra))))
    return [merged] + [r for r in out if r is not once]


