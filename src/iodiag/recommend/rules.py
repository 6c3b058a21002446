"""What to change, from findings and measured features: the advice text every finding's ``recommendation`` holds.

Detectors say what is wrong, with numbers (``Finding.evidence``, plus ``Finding.facts`` for what the advice needs
and the evidence does not show: a path, the kind of program, an array's chunk metadata).  This module alone says
what to change: ``advise`` fills each finding's ``recommendation`` string (the JSON report keeps that field), and
``rule_recommendations`` turns the findings whose fix is a concrete setting (a chunk shape, a buffer size, a
stripe count) into ``Recommendation`` objects that reports list under "What to change" and ``iodiag verify``
can apply.  The trained tree (recommend/engine.py) overrides a rule's setting where both apply.

Everything here is pure: findings and a Config in, strings and dataclasses out.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable, Mapping, Sequence

from ..analyzers.detectors import SPEC_BY_ID
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
from ..units import fmt_bytes, fmt_pct, fmt_seconds
from .recommendation import Recommendation
from .rules_metadata import _many_small_files, _metadata_storm
from .settings import _collective_call, _h5repack, _interface, _rmw_fix, _small_direction, task_chunk_plan


# ---------------------------------------------------------------------------------------------- small-io
_PATTERN_KEYS = ("dxt_small_ops", "consecutive_ops", "strided_ops", "stride_bytes", "same_offset_ops", "random_ops",
                 "ops_in_consecutive_runs", "requests_after_buffering", "dxt_complete")


def _small_io(f: Finding, cfg: Config) -> str:
    """Advice per pattern; from the DXT trace when there is one, and from the counters for what a partial
    trace did not see (e.g. reads issued after the trace buffer filled)."""
    if f.facts.get("stdio"):
        return _small_stdio(f, cfg)
    ev = {**f.evidence, "_python": bool(f.facts.get("python")),
          "_stdio": f.facts.get("stdio_ops", 0) >= f.facts.get("posix_ops", 1),  # fread/fwrite on these files
          "_writes": f.evidence["small_writes"] > f.evidence["small_reads"], "_array": _interface(f)[0] in ("HDF5", "PnetCDF")
          or bool(f.evidence.get("array_file"))}
    pat = {k: ev[k] for k in _PATTERN_KEYS if k in ev} if "dxt_small_ops" in ev else {}
    n_small = int(ev["small_reads"] + ev["small_writes"])
    buf = int(f.facts.get("buffer_bytes", cfg.small_io.buffer_bytes))
    counters = dict(base=n_small, consec=ev["consecutive_ops_counter"], strided=ev["strided_ops_counter"],
                    stride=ev["top_stride_gap_bytes"], what="gap between accesses",
                    unasked=int(f.facts.get("unasked_small_reads", 0)),  # not the program's: not random either
                    reopens=int(f.facts.get("reopens", 0)))
    parts: dict[str, str] = {}
    if pat:
        trace = dict(base=pat["dxt_small_ops"], consec=pat["consecutive_ops"], strided=pat["strided_ops"],
                     stride=pat["stride_bytes"], what="offset step", same=pat["same_offset_ops"],
                     before=pat["ops_in_consecutive_runs"], after=pat["requests_after_buffering"])
        _small_parts(trace, ev, buf, parts)
    if not pat or not pat.get("dxt_complete", True):
        _small_parts(counters, ev, buf, parts, random=not pat)  # counters cannot tell re-reads from random ones
    lead = (f"(DXT kept {pat['dxt_small_ops']:,} of {n_small:,} small ops; the rest is from counters) "
            if pat and not pat.get("dxt_complete", True) else "")
    parts = {**_small_io_layer_parts(f, n_small), **parts}
    if not parts:
        parts["random"] = f"{n_small:,} small ops show no sequential or strided pattern: aggregate them (MPI-IO " \
                          f"collective buffering, {'a write buffer' if ev['_writes'] else 'a read cache'}, or larger " \
                          "chunks)"
    return lead + "; ".join(parts.values())


def _small_stdio(f: Finding, cfg: Config) -> str:
    """Small fread/fwrite calls: fewer, larger calls (the whole file at once when it fits in memory) and a bigger
    stream buffer."""
    x, ev = f.facts["stdio"], f.evidence
    buf = int(f.facts.get("buffer_bytes", cfg.small_io.buffer_bytes))
    rw = "read" if ev["small_reads"] >= ev["small_writes"] else "write"
    mean = ev[f"stdio_mean_{rw}_bytes"]
    name = x.get("top_file") or "the file"
    out = [f"{int(ev['small_' + rw + 's']):,} f{rw} calls of {fmt_bytes(mean)} on average: "
           + (f"read {name} ({fmt_bytes(x['top_file_bytes'])}) whole with one fread into memory (or mmap it) and parse "
              f"it there" if rw == "read" else f"gather the output in memory and fwrite it in calls of {fmt_bytes(buf)}")
           + f"; at least give the stream a {fmt_bytes(buf)} buffer: setvbuf(fp, NULL, _IOFBF, {buf}) right after fopen, "
             f"and {rw} records in blocks instead of a few bytes per call"]
    if int(ev.get("stdio_seeks", 0)) >= cfg.small_io.min_ops:
        out.append(f"{int(ev['stdio_seeks']):,} fseek/ftell calls position the stream around them: drop them (keep the "
                   "position in a variable) once the data is read in blocks")
    return "; ".join(out)


def _small_parts(n: dict, ev: dict, buf: int, parts: dict, random: bool = True) -> None:
    base = max(n["base"], 1)
    if n["consec"] >= 0.2 * base and "consec" not in parts:
        gain = (f"; expected small requests {n['before']:,} -> {n['after']:,} ({fmt_pct(1 - n['after'] / max(n['before'], 1))} "
                "fewer)" if n.get("after") else "")
        how = (f"open(..., buffering={buf})" if ev.get("_python") else f"a {fmt_bytes(buf)} buffer (setvbuf, or "
               "gather the pieces in memory)" if ev.get("_stdio") else f"gather the pieces in a {fmt_bytes(buf)} "
               "buffer in memory")
        parts["consec"] = (f"{n['consec']:,} small ops continue the previous offset: buffer them ({how}, or write "
                           f"whole {fmt_bytes(buf)} chunks / a larger Zarr/HDF5 chunk){gain}")
        if ev.get("_python") and str(ev.get("array_file") or "").lower().endswith((".h5", ".hdf5", ".he5")):
            parts["consec"] = (f"{n['consec']:,} small ops continue the previous offset: the HDF5 library makes them, "
                               f"so Python's open() cannot buffer them: read many elements per call (a block, or the "
                               f"whole dataset), or give HDF5 a {fmt_bytes(buf)} sieve buffer (h5py: "
                               f"fapl.set_sieve_buf_size({buf})){gain}")
    if n["strided"] >= 0.2 * base and "strided" not in parts:
        whole = ("gather the strided pieces in memory and write the whole region in large blocks"
                 if ev.get("_writes") else "read the whole strided region in large blocks and slice in memory")
        parts["strided"] = (f"{n['strided']:,} small ops step through the file at a constant {n['what']} of {n['stride']:,} B "
                            f"(strided, not random): {whole}, "
                            f"or rechunk/relayout so the fields {'written' if ev.get('_writes') else 'read'} together "
                            f"are contiguous; each {n['stride']:,} B step now costs one request")
        if ev.get("array_file"):
            how = ("request many steps at once (larger Dask chunks along that dimension, e.g. "
                   "open_dataset(chunks={'time': 24}))" if ev.get("_python") else
                   "read or write many steps per call (a larger hyperslab / start-count along that dimension)")
            parts["strided"] += (f"; {ev['array_file']} is NetCDF/HDF5: a {n['stride']:,} B step is one record/slab of the "
                                 f"variable, so each step is a separate request; {how} or rechunk the file "
                                 "(nccopy -c / h5repack -l)")
    if n.get("same", 0) >= 0.2 * base and "same" not in parts:
        if ev.get("_array"):
            parts["same"] = (f"{n['same']:,} small ops re-access the offset of the previous op (the same bytes again, "
                             "typical of HDF5/NetCDF metadata lookups): cache them (larger HDF5 metadata cache, "
                             "H5Pset_meta_block_size, or open the file once per process)")
        else:  # no HDF5/NetCDF on these files: the program itself reads the same bytes again
            parts["same"] = (f"{n['same']:,} small ops re-access the offset of the previous op (the same bytes again): "
                             "read them once and keep them in memory, or seek less (one read of the whole record "
                             "instead of a read per field)")
    rnd = n["base"] - n["consec"] - n["strided"] - n.get("same", 0) - n.get("unasked", 0)
    reopened = min(n.get("reopens", 0), max(rnd, 0))
    if random and reopened >= 0.5 * base and "reopen" not in parts:
        # Darshan restarts a record's offset at each open: ops one per open show no pattern, whatever their order
        rw = "write" if ev.get("_writes") else "read"
        parts["reopen"] = (f"{reopened:,} small ops each follow a re-open of their file (an open around every "
                           f"access; Darshan's offsets restart at each open, so no sequential pattern can show): open "
                           f"each file once and {rw} through that handle in blocks of {fmt_bytes(buf)}")
        rnd -= reopened
    if random and rnd >= 0.2 * base and "random" not in parts:
        parts["random"] = (f"{rnd:,} small ops have no sequential or strided pattern: aggregate them (MPI-IO "
                           f"collective buffering, {'a write buffer' if ev.get('_writes') else 'a read cache'}, or "
                           "larger chunks)")


def _small_io_layer_parts(f: Finding, n_small: int) -> dict[str, str]:
    """What the counters of the layers above POSIX say about the small ops (the same change _small_io_setting
    makes): reads the MPI-IO layer issues itself, or independent MPI-IO calls of processes sharing a file."""
    x = f.facts
    mp = x.get("mpiio")
    if not mp:
        return {}
    u = int(x.get("unasked_small_reads", 0))
    if u >= 0.2 * max(n_small, 1):
        fix = _rmw_fix(f)
        return {"unasked": f"{u:,} of the small ops are reads of files the program only writes through MPI-IO (it reads nothing "
                           "from them through MPI-IO), so the MPI-IO layer issues them itself: " + (fix[0] if fix else
                           "the writes are collective and the aggregators read the holes between the processes' pieces "
                           "(read-modify-write): make the pieces of each collective write cover its range without holes")}
    rw, many = _small_direction(f)
    if x.get("max_ranks_per_file", 0) < 2 or not mp[f"{rw}s"]:
        return {}
    total, coll = mp[f"{rw}s"], mp[f"collective_{rw}s"]
    if coll >= 0.5 * total:
        return {"collective": f"{coll:,} of the {total:,} MPI-IO {rw}s on these files are collective already: enable "
                              f"collective buffering for all of them (romio_cb_{rw}=enable) so the aggregators merge the "
                              "processes' small pieces into large requests"}
    return {"collective": f"{total - coll:,} of the {total:,} MPI-IO {rw}s on these files are independent calls of up to "
                          f"{x['max_ranks_per_file']:,} processes sharing a file: make them collective "
                          f"({_collective_call(f, rw).replace('; ', ' and ')}) so MPI-IO merges the processes' small "
                          f"pieces into large requests (romio_cb_{rw}=enable)"}


_NO_RMW_HINT = ("the writes are collective, and collective buffering reads each aggregator's range to fill the holes "
                "between the processes' pieces; off Lustre no ROMIO hint turns that read off (romio_ds_write covers "
                "independent writes only): make the pieces of each collective write cover its range without holes "
                "(each process's region adjacent to the next and aligned to the file-system block)")


# ---------------------------------------------------------------------------------------------- access
def _random_access(f: Finding, cfg: Config) -> str:
    return (f"{int(f.facts['backward_ops']):,} accesses land before the previous one: sort requests by offset, "
            "read whole chunks in file order, or enable MPI-IO data sieving/collective buffering; for array "
            "data choose chunks that match the read pattern")


def _misaligned(f: Finding, cfg: Config) -> str:
    a = int(f.evidence["alignment_bytes"])
    A = fmt_bytes(a)
    layer, via = _interface(f)
    coll = f.facts.get("collective")  # MPI-IO collective calls on these files already
    head = f"align request offsets and sizes to {A}"
    if layer == "HDF5":
        what = (f"call H5Pset_alignment(fapl, {a}, {a}) on the file access property list (every object of {A} or "
                f"more then starts on a {A} boundary); choose dataset chunks whose size is a multiple of {A}")
        if f.facts.get("written", True):
            return f"{head}: the files are HDF5{' (' + via + ')' if via else ''}: {what}"
        return (f"{head}: the files are HDF5{' (' + via + ')' if via else ''} and this job only reads them: in the "
                f"program that writes them, {what}; or rewrite a copy once: {_h5repack(f, a)}")
    if layer == "PnetCDF":
        return (f"{head}: the files are written through PnetCDF: set its hints nc_var_align_size={a} and "
                f"nc_record_align_size={a} (PNETCDF_HINTS, or the MPI_Info given to ncmpi_create) so the sections of "
                f"fixed-size and of record variables start on {A} boundaries (PnetCDF does not align each record"
                + ("" if coll else ": write records with the collective *_all calls so MPI-IO aggregates them into "
                                   "whole blocks") + ")")
    if layer == "MPI-IO":
        lustre = " (on Lustre it also sets the stripe size of files it creates)" if f.evidence.get("lustre_stripe_bytes") else ""
        calls = ("the collective calls' aggregators then access whole blocks" if coll else
                 f"use collective calls (MPI_File_read_all/write_all) so the aggregators access whole {A} blocks")
        return (f"{head}: the program does its I/O through MPI-IO: pass the hint striping_unit={a} in the MPI_Info "
                f"of MPI_File_open{lustre}; {calls}; or pad records to a multiple of {A}")
    if layer in ("POSIX", "STDIO"):
        return (f"{head}: the program issues these requests itself ({layer}, no I/O library above it): make each "
                f"request's size and file offset a multiple of {A} (a {A} buffer written whole, records padded to a "
                f"multiple of {A})")
    return (f"{head} (HDF5: H5Pset_alignment(fapl, {a}, {a}); MPI-IO: striping_unit={a} and cb_buffer_size a "
            "multiple of it; or pad records)")


_SHARE_ADVICE = {"dask": "load it once and share it (client.scatter, or .persist() the loaded array) instead of "
                         "re-reading it in every task",
                 "mpi": "read it on one rank and MPI_Bcast it, or cache it in memory instead of re-reading"}


def _redundant_read(f: Finding, cfg: Config) -> str:
    ev = f.evidence
    readers = int(ev["worst_file_readers"])
    who = f"by {readers} processes" if readers > 1 else "by one process"
    kind = f.facts.get("kind", "") if readers > 1 or f.facts.get("kind") != "mpi" else ""  # one reader: no broadcast
    share = _SHARE_ADVICE.get(kind, "read it once and keep it in memory (a cache) instead of re-reading it")
    from .open_once import probe_dominant

    if probe_dominant(f):  # the re-reads come with the opens, not with the program's reads: caching data won't help
        share = (f"{fmt_bytes(f.facts['probe_bytes'])} of the bytes are netCDF-C's format probe ({f.facts['probe_opens']:,} "
                 "opens, each reading up to 4 MiB of the file in one fread, whatever the program asks): open each "
                 "file fewer times (once per process, and reuse the open Dataset)")
    return f"the worst file is read {ev['worst_file_amplification']:.1f} times over {who}: " + share


def _read_modify_write(f: Finding, cfg: Config) -> str:
    """The hint by how the files are written, collectively or not, and where (``_rmw_fix``)."""
    fix = _rmw_fix(f)
    if fix is None:
        return f"the MPI-IO layer reads regions before writing them back (read-modify-write): {_NO_RMW_HINT}"
    where = ("PNETCDF_HINTS (PnetCDF hands it on to MPI-IO)" if _interface(f)[0] == "PnetCDF" else
             "the MPI_Info given to the file's open, or a ROMIO_HINTS file")
    return f"the MPI-IO layer reads regions before writing them back: {fix[0]}; pass the hint in {where}"


# ---------------------------------------------------------------------------------------------- coverage
def _partial_log(f: Finding, cfg: Config) -> str:
    facts, rec = f.facts, []
    if facts.get("config_lines"):
        modmem, names = facts["modmem_mib"], facts["namemem_mib"]
        conf = list(facts["config_lines"]) + [f"MODMEM {modmem}", f"NAMEMEM {names}"]
        rec.append("re-run with export DARSHAN_CONFIG_PATH=$PWD/darshan.conf, a file holding the lines: "
                   + "; ".join(conf) + " (MAX_RECORDS has no environment variable; DARSHAN_MODMEM="
                   + f"{modmem} DARSHAN_NAMEMEM={names} alone would not lift the record cap; iodiag run --darshan "
                   "writes such a file itself)")
    if facts.get("lost"):
        # the next step that fits the cause the reader found (an empty log: a process killed before Darshan's
        # shutdown; a crash: a damaged file; a Darshan 2 log: darshan-util 2.x)
        step = facts["lost"].get("next_step") or ("let processes exit normally (Dask: close the client/cluster; no "
                                                  "SIGKILL) or recover mmap logs with darshan-convert")
        rec.append(f"{f.evidence['logs_lost']} log(s) could not be read ({facts['lost']['path']}: {facts['lost']['cause']}); "
                   + step)
    if facts.get("module_losses"):
        rec.append("; ".join(facts["module_losses"][:3]))
    if facts.get("other_issues"):
        rec.append("; ".join(facts["other_issues"][:3]))
    return "; ".join(rec) or "no action needed"


def _no_io(f: Finding, cfg: Config) -> str:
    return ("nothing to diagnose: the log holds no reads or writes (modules present: "
            f"{f.evidence['modules']}); if the program did I/O, check that Darshan was preloaded and the files were not excluded")


def _stdio_heavy(f: Finding, cfg: Config) -> str:
    ev = f.evidence
    return (f"{fmt_pct(ev['stdio_share_of_bytes'])} of the bytes go through fopen/fread/fwrite (mean request "
            f"{fmt_bytes(ev['mean_stdio_request_bytes'])}): " + (
                "requests are already large, so STDIO costs little here; switch to POSIX or MPI-IO only if several "
                "processes share these files" if f.facts.get("large_requests") else
                f"each stream moves its file in about one call ({f.facts['calls_per_open']:.1f} per open), so a larger "
                "buffer saves no call: the number of small files is what costs (fewer, larger files)"
                if _one_call_per_open(f) else
                "use POSIX read/write with large buffers or MPI-IO/HDF5; at least raise the stream buffer (setvbuf)"))


def _one_call_per_open(f: Finding) -> bool:
    """Whether each STDIO stream of the finding made at most ~2 fread/fwrite calls: a buffer cannot merge them."""
    return 0 < float(f.facts.get("calls_per_open") or 0) <= 2.0


def _fsync_per_write(f: Finding, cfg: Config) -> str:
    ev = f.evidence
    return (f"{int(ev['syncs']):,} syncs for {int(ev['writes']):,} writes of {fmt_bytes(ev['mean_write_bytes'])} on "
            f"average: every write waits for the storage device. Sync once at the end of the file or per checkpoint "
            f"(write(fd, buf, n) in the loop, then one fsync(fd) before close(fd)); where the data must be durable "
            f"write by write, fdatasync(fd) skips the metadata update. The syncs are inside the {fmt_seconds(ev['write_s_bound'])} "
            f"(process-seconds) of write time on these files (Darshan counts fsync time as write time)"
            + (f", so they cost the run at most {fmt_seconds(f.est_cost_s)} (the slowest process's write time)"
               if f.est_cost_s is not None and f.est_cost_s < 0.995 * float(ev["write_s_bound"]) else ""))


# ---------------------------------------------------------------------------------------------- MPI / parallel
def _shared_file_contention(f: Finding, cfg: Config) -> str:
    x = f.facts
    return (f"{x['worst_writers']} processes write {fmt_bytes(x['worst_bytes_written'])} to one file in "
            f"{x['worst_writes']:,} uncoordinated writes (mean {fmt_bytes(f.evidence['mean_write_bytes'])}): use MPI-IO "
            "collective writes (MPI_File_write_all / HDF5 H5FD_MPIO_COLLECTIVE), give each writer stripe-aligned "
            "disjoint regions, or write one file per process/node")


def _no_collective_io(f: Finding, cfg: Config) -> str:
    return ("switch to collective calls (MPI_File_read_all/write_all; HDF5 "
            "H5Pset_dxpl_mpio(H5FD_MPIO_COLLECTIVE); PnetCDF *_all) so ROMIO aggregates the "
            f"{int(f.evidence['independent_ops']):,} requests into large contiguous ones (tune cb_nodes/cb_buffer_size)")


def _straggler_process(f: Finding, cfg: Config) -> str:
    ev, x = f.evidence, f.facts
    mpiio = str(x["what"]).startswith("MPI-IO")
    return (f"process {x['worst']} spends most of its time in {x['what']} on {x['file'] or 'its files'}"
            + ("; in collective MPI-IO calls that is time waiting for the other ranks to arrive or for the "
               "aggregators, so compare when the ranks enter those calls (work done before them)" if mpiio else "")
            + "; it moves no more data than its peers, so look at where it runs: "
            + (f"{ev['suspect_ost_straggler_files']} of the stragglers' files sit on Lustre OST {ev['suspect_ost']} "
               f"(vs {ev['suspect_ost_other_files']} of the other files): check that OST's health/load or restripe "
               "away from it (lfs setstripe -o); " if "suspect_ost" in ev else
               f"all stragglers ran on {ev['stragglers_host']}: check that node; " if "stragglers_host" in ev else
               "check its node and storage target; ")
            + (f"the stragglers' last read/write ended at {ev['stragglers_last_data_op_end_s']:.1f} s into the job vs "
               f"{ev['median_last_data_op_end_s']:.1f} s for the median process; " if "median_last_data_op_end_s" in ev else "")
            + f"the job waits ~{ev['slowest_excess_s']:.1f} s for it")


def _rank_imbalance(f: Finding, cfg: Config) -> str:
    ev, x = f.evidence, f.facts
    note = ""
    if x.get("collective"):
        note = (" MPI-IO collective calls are present, so POSIX traffic concentrates on the collective-buffering "
                f"aggregators: raise their number (cb_nodes / romio_cb_{x.get('collective_rw', 'write')}, one per "
                + ("OST or node) and stripe the file over more OSTs;" if x.get("lustre", True) else "node);"))
    if x.get("top_file") and "top_file_stripe_count" in ev:
        sc = int(ev["top_file_stripe_count"])
        if sc < 8:
            note += f" {x['top_file']} has a Lustre stripe count of {sc}: stripe it wider (lfs setstripe -c 8 or more);"
        else:  # already wide: striping is not what concentrates the bytes
            note += f" {x['top_file']} is already striped over {sc} OSTs, so the imbalance is in how the data is divided;"
    return (f"spread the I/O:{note} give every process a similar share of the data "
            f"(today {int(ev['heavy_processes'])} process(es) carry {fmt_pct(ev['share_of_bytes_on_heavy'])})")


def _inactive_ranks(f: Finding, cfg: Config) -> str:
    ev = f.evidence
    n, idle = int(ev["processes"]), int(ev["inactive_processes"])
    active = n - idle
    return (f"only {active} of {n} processes move data at the {ev['level']} level: distribute "
            f"the data over all ranks (or run with {active} process{'es' if active != 1 else ''} and save {idle} idle "
            f"one{'s' if idle != 1 else ''})")


# what to change when a component of a Dask run's weak-scaling loss is the largest (analyzers/weakloss.py)
WEAK_LOSS_CHANGE = {
    "io": "the I/O inside tasks grows with the workers: they contend for the same storage (one disk, or too few "
          "OSTs/targets); write fewer, larger chunks, spread the store over more targets (Lustre: lfs setstripe "
          "-c on the Zarr folder), or stop adding workers at the last efficient scale",
    "compute": "the tasks' compute grows per worker: the cores are oversubscribed (workers x threads above the "
               "cores, or BLAS/OpenMP threads inside tasks: set OMP_NUM_THREADS=1); give each worker its own cores",
    "task_overhead": "workers wait between tasks longer: the scheduler's per-task cost grows with the number of "
                     "tasks; use fewer, larger chunks (tens to hundreds of MB) so each task does more work",
    "transfer_spill": "data moves between workers or spills to disk: align the chunks of the input with the "
                      "output so each task reads its own data (no rechunk), and give workers more memory",
    "startup_shutdown": "starting and stopping the cluster grows with the workers (more processes to spawn, "
                        "import and register); it does not grow with the data, so start the cluster once and "
                        "reuse it across steps (on a batch system: workers started with the job, e.g. "
                        "dask-jobqueue or dask-mpi), or give each run more data so it amortises",
    "graph_submit": "building and sending the graph grows with the data: fewer, larger chunks make a smaller "
                    "graph; build it once (one to_zarr/compute over the whole dataset instead of one per step)",
    "iodiag_capture": "iodiag's own capture grew (its cost is labelled apart): leave --dask-report off",
}


def _weak_scaling_loss(f: Finding, cfg: Config) -> str:
    ev, x = f.evidence, f.facts
    if "largest" in x:  # Dask runs: the loss split into components
        big = x["largest"]
        text = WEAK_LOSS_CHANGE.get(big, "")
        if big == "compute" and not x.get("io_traced"):
            text += " (the tasks' I/O was not traced, so it is inside compute: re-run with the embedded collector "                     "or --dxt to split it)"
        return x.get("why", "") + text
    i = ev["efficiency"].index(min(ev["efficiency"]))
    n, base_n = ev["processes"][i], ev["processes"][0]
    return (x.get("why", "") + f"at {n} {x['unit']} each moves {fmt_bytes(ev['bytes_per_process'][i])} at "
            f"{fmt_bytes(x['worst_bandwidth'])}/s against {fmt_bytes(x['base_bandwidth'])}/s at {base_n}: the shared "
            "storage saturates or the processes contend; aggregate (fewer writers: collective I/O, one writer per node), "
            "stripe wider, or cap the process count near the last efficient run")


# ---------------------------------------------------------------------------------------------- Dask tasks
def _straggler_task(f: Finding, cfg: Config) -> str:
    ev, x = f.evidence, f.facts
    where = x.get("cause") or (
        f"all {int(ev['stragglers'])} on worker {x['one_worker']}: check that worker's host/disk/memory (spilling)"
        if x.get("one_worker") else
        "spread over workers, so the data is the likely cause: look for an oversized or remote chunk")
    return (f"task {ev['slowest_key']} took {ev['slowest_task_s']:.2f} s against a median of {ev['median_task_s']:.2f} s "
            f"({where}); split its input into smaller chunks so no single task dominates, and let work stealing rebalance")


def _task_overhead(f: Finding, cfg: Config) -> str:
    ev, a = f.evidence, f.facts.get("array")
    if a is None:
        return (f"{int(ev['tasks']):,} tasks of median {ev['task_median_s'] * 1000:.1f} ms: use fewer, larger chunks "
                f"(~{fmt_bytes(cfg.tasks.target_chunk_bytes)} each) so each task does enough work to outweigh its scheduling")
    plan = task_chunk_plan(a, int(ev["worker_threads"]), cfg.tasks.target_chunk_bytes)
    change = plan["change"]
    return (f"{a['path'].rsplit('/', 1)[-1]} {tuple(a['shape'])} is cut into {a['nchunks']:,} chunks of "
            f"{fmt_bytes(a['chunk_bytes'])}: use chunks of ~{fmt_bytes(plan['chunk_bytes'])}, e.g. chunks={change} "
            f"(xarray: ds.chunk({change}) before to_zarr, or open_dataset(..., chunks={change})), "
            f"~{plan['tasks']:,} tasks instead of {int(ev['tasks']):,}")


def _task_overhead_evidence(f: Finding, cfg: Config) -> dict[str, Any]:
    a = f.facts.get("array")
    if a is None:
        return {}
    plan = task_chunk_plan(a, int(f.evidence["worker_threads"]), cfg.tasks.target_chunk_bytes)
    return {"chunks_recommended": plan["chunks"], "chunk_bytes_recommended": plan["chunk_bytes"]}


ADVICE: dict[str, Callable[[Finding, Config], str]] = {
    SMALL_IO.id: _small_io,
    FSYNC_PER_WRITE.id: _fsync_per_write,
    METADATA_STORM.id: _metadata_storm,
    MANY_SMALL_FILES.id: _many_small_files,
    RANDOM_ACCESS.id: _random_access,
    MISALIGNED.id: _misaligned,
    REDUNDANT_READ.id: _redundant_read,
    READ_MODIFY_WRITE.id: _read_modify_write,
    PARTIAL_LOG.id: _partial_log,
    NO_IO.id: _no_io,
    STDIO_HEAVY.id: _stdio_heavy,
    SHARED_FILE_CONTENTION.id: _shared_file_contention,
    NO_COLLECTIVE_IO.id: _no_collective_io,
    STRAGGLER_PROCESS.id: _straggler_process,
    RANK_IMBALANCE.id: _rank_imbalance,
    INACTIVE_RANKS.id: _inactive_ranks,
    WEAK_SCALING_LOSS.id: _weak_scaling_loss,
    STRAGGLER_TASK.id: _straggler_task,
    TASK_OVERHEAD.id: _task_overhead,
}
# the planned setting a rule adds to a finding's evidence (the report shows it next to what is measured)
PLANNED_EVIDENCE: dict[str, Callable[[Finding, Config], dict[str, Any]]] = {TASK_OVERHEAD.id: _task_overhead_evidence}


def advise(findings: Sequence[Finding], config: Config | None = None) -> list[Finding]:
    """The findings with their ``recommendation`` filled from the rules (new objects; a finding that already
    carries advice, e.g. built by hand, keeps it).  Every finding id of a spec has its rule (``ADVICE``; a missing
    one is a KeyError here and fails tests/test_finding_specs.py, never an empty recommendation)."""
    cfg = config or Config()
    out = []
    for f in findings:
        if f.recommendation or f.id not in SPEC_BY_ID:
            out.append(f)
            continue
        ev = f.evidence
        extra = PLANNED_EVIDENCE.get(f.id)
        if extra is not None:
            ev = {**ev, **extra(f, cfg)}
        text = ADVICE[f.id](replace(f, evidence=ev), cfg)
        if f.id == STRAGGLER_TASK.id and any(g.id in (TASK_OVERHEAD.id, MANY_SMALL_FILES.id) for g in findings):
            # the tasks are too short or the chunks too small: the fix grows the chunks (evenly), never splits them
            text = text.split("; split its input", 1)[0] + ("; the tasks are otherwise short (see task-overhead / "
                                                            "many-small-files): keep the chunks even-sized as they "
                                                            "grow (What to change) so no single task dominates")
        out.append(replace(f, evidence=ev, recommendation=text))
    return out


def diagnose_with_advice(profile, config: Config | None = None) -> list[Finding]:
    """Detectors, then the rules' advice: the findings a report shows."""
    from ..analyzers.detectors import diagnose

    cfg = config or Config()
    return advise(diagnose(profile, cfg), cfg)


# ---------------------------------------------------------------------------------------------- settings (recommend/settings.py builds them)


def rule_recommendations(profile, findings: Sequence[Finding], config: Config | None = None,
                         params: Mapping[str, Any] | None = None) -> list[Recommendation]:
    """The findings' concrete changes as Recommendations (most costly finding first), and for the findings no
    setting can help, why (``abstain``): one registry keyed by finding id, ``recommend.fixes.FIXES``.

    ``params`` are the workload's parameters as its command line gave them (``{"chunks": "1,1,90,180", "path":
    "a.zarr"}``; None when unknown, e.g. a Darshan log from elsewhere): a setting the command exposes becomes an
    ``arg`` change that ``iodiag verify`` can apply; otherwise the change is a snippet or a shell line to paste."""
    from .fixes import recommendations_for

    return recommendations_for(profile, findings, config, params)


