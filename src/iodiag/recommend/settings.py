"""The concrete settings a finding's fix proposes, as ``Recommendation``s with changes to paste (``recommend.fixes``
chooses among them per finding id; ``recommend.rules`` words the same choices in a finding's advice text): the I/O
layer a change must name, MPI-IO hints (a ROMIO hints file, PNETCDF_HINTS), buffering, alignment, striping and
chunk shapes.  Imports neither rules nor fixes, so both can use it.
"""

from __future__ import annotations

import math
from pathlib import PurePosixPath
from typing import Any, Mapping

from ..analyzers.detectors.layers import READ_MODIFY_WRITE
from ..config import Config
from ..findings import Finding
from ..units import fmt_bytes
from .chunks import merge_plan, rechunk_plan
from .recommendation import Change, Recommendation


# ------------------------------------------------------------------------------------------------ changes
def hints_changes(layer: str | None, hints: Mapping[str, Any]) -> tuple[Change, ...]:
    """MPI-IO hints as changes to paste: PnetCDF passes them through PNETCDF_HINTS; every other program gets a
    ROMIO hints file (one ``key value`` a line) named by ``ROMIO_HINTS``, and the same hints for Cray MPICH in
    ``MPICH_MPIIO_HINTS`` (``*:key=value:...``, all files).  No code change."""
    if layer == "PnetCDF":
        kv = ";".join(f"{k}={v}" for k, v in hints.items())
        return (Change("env", f'export PNETCDF_HINTS="$PNETCDF_HINTS;{kv}"', "PNETCDF_HINTS", kv),)
    lines = " ".join(f"'{k} {v}'" for k, v in hints.items())
    cray = ":".join(f"{k}={v}" for k, v in hints.items() if ":" not in str(v))  # ':' separates Cray's hints
    return (Change("shell", f"printf '%s\\n' {lines} >> romio-hints", "romio-hints", dict(hints)),
            Change("env", "export ROMIO_HINTS=$PWD/romio-hints", "ROMIO_HINTS", "$PWD/romio-hints"),
            Change("env", f"export MPICH_MPIIO_HINTS='*:{cray}'  # Cray MPICH", "MPICH_MPIIO_HINTS", f"*:{cray}"))


def setstripe(folder: str, count: int, size: str = "4M") -> Change:
    return Change("shell", f"lfs setstripe -c {count} -S {size} {folder}  # new files in it; existing ones keep "
                           "their layout (copy them to restripe)", "lfs setstripe", {"count": count, "size": size})


# ---------------------------------------------------------------------------------------------- I/O layers
_HDF5_NAMES = (".h5", ".hdf5", ".he5")


def _interface(f: Finding) -> tuple[str | None, str]:
    """The layer a change to ``f``'s files must name: the top-most one the program calls (HDF5 or PnetCDF above
    MPI-IO above POSIX/STDIO) among those its detector saw on the files (``facts["layers"]``).  A file named like
    HDF5 counts as HDF5 when no HDF5 or PnetCDF module recorded it (Darshan before 3.2 has no HDF5 module); the
    second item then says so.  (None, "") when the finding does not carry its layers."""
    layers = f.facts.get("layers")
    if layers is None:
        return None, ""
    for name in ("HDF5", "PnetCDF"):
        if name in layers:
            return name, ""
    named = next((p for p in f.files if p.lower().endswith(_HDF5_NAMES)), None)
    if named:
        return "HDF5", f"{named.rsplit('/', 1)[-1]} by its name, as the log has no HDF5 module"
    return next((x for x in ("MPI-IO", "POSIX", "STDIO") if x in layers), "POSIX"), ""


def _collective_call(f: Finding, rw: str) -> str:
    return _COLLECTIVE_CALL.get(_interface(f)[0] or "", _COLLECTIVE_CALL["MPI-IO"])[rw]


def _small_direction(f: Finding) -> tuple[str, int]:
    """("read" or "write", how many): the direction most small ops go."""
    r, w = int(f.evidence["small_reads"]), int(f.evidence["small_writes"])
    return ("read", r) if r >= w else ("write", w)


def _rmw_fix(f: Finding) -> tuple[str, dict[str, str]] | None:
    """The ROMIO hint that turns off the reads of a read-modify-write, by how the finding's files are written
    (``facts["mpiio"]``: MPI-IO ``writes`` and ``collective_writes`` on them; ``facts["lustre"]``): ROMIO's data
    sieving hints (romio_ds_write) apply to independent writes only; the read step of collective buffering is
    turned off by romio_lustre_ds_in_coll, on Lustre only (ROMIO users guide, hints for Lustre).  (The advice,
    the hints); None when no hint does it (collective writes off Lustre).  The small-io and read-modify-write
    findings both carry these facts."""
    mp = f.facts["mpiio"]
    if mp["collective_writes"] >= 0.5 * mp["writes"]:
        if not f.facts.get("lustre"):
            return None
        return ("the writes are collective, and collective buffering reads each aggregator's range to fill the holes "
                "between the processes' pieces (read-modify-write): on Lustre the hint romio_lustre_ds_in_coll=disable "
                "turns that off (romio_ds_write covers independent writes only)", {"romio_lustre_ds_in_coll": "disable"})
    return ("the writes are independent, and ROMIO's data sieving reads each range before writing it: set the hint "
            "romio_ds_write=disable", {"romio_ds_write": "disable"})


# the calls that make one layer's reads/writes collective
_COLLECTIVE_CALL = {
    "HDF5": {"read": "H5Pset_dxpl_mpio(dxpl, H5FD_MPIO_COLLECTIVE); H5Pset_all_coll_metadata_ops(fapl, 1)",
             "write": "H5Pset_dxpl_mpio(dxpl, H5FD_MPIO_COLLECTIVE); H5Pset_coll_metadata_write(fapl, 1)"},
    "PnetCDF": {"read": "ncmpi_get_vara_<type>_all instead of ncmpi_get_vara_<type>",
                "write": "ncmpi_put_vara_<type>_all instead of ncmpi_put_vara_<type>"},
    "MPI-IO": {"read": "MPI_File_read_at_all instead of MPI_File_read_at",
               "write": "MPI_File_write_at_all instead of MPI_File_write_at"},
}


def _pnetcdf_env(hints: str) -> Change:
    """PNETCDF_HINTS with ``hints`` ("k=v;k=v") added to the hints already in it, so that two recommendations'
    lines pasted one after the other both apply (PnetCDF skips the empty entry a leading ";" makes)."""
    return Change("env", f'export PNETCDF_HINTS="$PNETCDF_HINTS;{hints}"', "PNETCDF_HINTS", hints)


def _size_range(x: Mapping[str, Any]) -> str:
    lo, hi = x["small_size"]
    return f"mostly {fmt_bytes(lo) if lo else '0'}–{fmt_bytes(hi)}"


def _small_io_setting(f: Finding, cfg: Config) -> Recommendation | None:
    """The change for a HIGH small-io finding of a program that is not Python (Python's is a buffered open): at
    the layer the program calls, from what the counters show.  MPI-IO under the files: reads the MPI-IO layer
    issues itself are turned off (a hint), and independent calls of processes sharing a file become collective
    (the layer's collective call, romio_cb_read/write).  Otherwise the requests grow to ``buffer_bytes``: an HDF5
    chunk cache, a stdio buffer (setvbuf), or the program's own buffer.  None when nothing concrete applies."""
    x = f.facts
    if x.get("python") or "layers" not in x:
        return None
    layer = _interface(f)[0]
    rw, many = _small_direction(f)
    seen = _size_range(x)
    buf = int(x.get("buffer_bytes", cfg.small_io.buffer_bytes))
    B = fmt_bytes(buf)
    mp = x.get("mpiio")
    n = int(f.evidence["small_reads"] + f.evidence["small_writes"])
    if mp and x.get("unasked_small_reads", 0) >= 0.5 * n:
        fix = _rmw_fix(f)
        if fix is None:
            return None
        return Recommendation(id=READ_MODIFY_WRITE.id, gain="io-only", settings=dict(fix[1]), changes=hints_changes(layer, fix[1]),
                              title=f"Stop MPI-IO reading what it writes ({x['unasked_small_reads']:,} reads, {seen})")
    if mp and x.get("max_ranks_per_file", 0) >= 2 and mp[f"{rw}s"]:
        hints = {f"romio_cb_{rw}": "enable"}
        calls = mp[f"collective_{rw}s"] < 0.5 * mp[f"{rw}s"]  # independent calls: no collective buffering yet
        changes = ((Change("snippet", _collective_call(f, rw)),) if calls else ()) + \
            hints_changes(layer, hints)
        return Recommendation(id="collective-io", gain="io-only", settings={**hints, **({"collective_calls": True} if calls else {})},
                              changes=changes, title=f"Merge {many:,} small {rw}s ({seen}) across processes with "
                                                     f"collective MPI-IO" + (f" ({layer})" if layer else ""))
    if layer == "HDF5":
        return Recommendation(id="chunk-cache", gain="io-only", settings={"chunk_cache_bytes": buf},
                              title=f"Cache HDF5 chunks in {B} for {many:,} small {rw}s ({seen})",
                              changes=(Change("snippet", f"H5Pset_chunk_cache(dapl, H5D_CHUNK_CACHE_NSLOTS_DEFAULT, {buf}, "
                                                         "H5D_CHUNK_CACHE_W0_DEFAULT)"),))
    if x.get("stdio_ops", 0) >= x.get("posix_ops", 1):  # these files are mostly read/written with fread/fwrite
        code = f"setvbuf(fp, NULL, _IOFBF, {buf});  /* after fopen */"
    elif layer == "MPI-IO" and mp and mp[f"{rw}s"]:  # the program {rw}s these files through MPI-IO
        code = f"MPI_File_{rw}_at(fh, offset, buf, {buf}, MPI_BYTE, &st);"
    elif rw == "read":
        code = f"pread(fd, buf, {buf}, offset);  /* then slice buf */"
    else:
        code = f"write(fd, buf, {buf});  /* pieces gathered in buf */"
    return Recommendation(id="buffering", gain="io-only", settings={"buffering": buf}, changes=(Change("snippet", code),),
                          title=f"Issue {B} requests instead of {many:,} small {rw}s ({seen})")


def _rmw_setting(f: Finding) -> Recommendation | None:
    """The hint _read_modify_write names, as a change at the program's layer; None when no hint applies."""
    fix = _rmw_fix(f)
    if fix is None:
        return None
    ev = f.evidence
    return Recommendation(id=READ_MODIFY_WRITE.id, gain="io-only", settings=dict(fix[1]), changes=hints_changes(_interface(f)[0], fix[1]),
                          title=f"Stop MPI-IO reading what it writes ({int(ev['posix_reads']):,} reads, "
                                f"{fmt_bytes(ev['posix_bytes_read'])} in all)")


def _h5repack(f: Finding, a: int) -> str:
    """An aligned copy of the finding's top file (h5repack's -t/-a are H5Pset_alignment's threshold and alignment)."""
    src = PurePosixPath(f.files[0] if f.files else "IN.h5")
    return f"h5repack -t {a} -a {a} {src} {src.with_name(src.stem + '.aligned' + src.suffix)}"


def _alignment_changes(f: Finding) -> tuple[Change, ...]:
    """The change _misaligned describes, for the layer it names."""
    a = int(f.evidence["alignment_bytes"])
    layer, _ = _interface(f)
    if layer == "HDF5":
        return (Change("snippet", f"H5Pset_alignment(fapl, {a}, {a});"),) + (
            () if f.facts.get("written", True) or not f.files else (Change("shell", _h5repack(f, a)),))
    if layer == "PnetCDF":
        return (_pnetcdf_env(f"nc_var_align_size={a};nc_record_align_size={a}"),
                Change("snippet", f'MPI_Info_set(info, "nc_var_align_size", "{a}");\n'
                                  f'MPI_Info_set(info, "nc_record_align_size", "{a}");'))
    if layer == "MPI-IO":
        return (Change("config", f"striping_unit={a}", "striping_unit", a),)
    if layer in ("POSIX", "STDIO"):
        return (Change("snippet", f"n = (n + {a - 1}) / {a} * {a};  /* each request's size (and offset) in whole "
                                  f"{fmt_bytes(a)} blocks */"),)
    return (Change("snippet", f"H5Pset_alignment(fapl, {a}, {a});"), Change("config", f"striping_unit={a}", "striping_unit", a))


def _mount_points(profile) -> set[str]:
    """The mount points of the job's files (without a trailing slash)."""
    files = getattr(profile, "files", None)
    if files is None or "mount" not in files:
        return set()
    return {str(m).rstrip("/") for m in files["mount"].tolist() if m}


def _python_buffering(f: Finding, cfg: Config) -> Recommendation | None:
    """A buffered open for a Python program whose small requests run consecutively (Darshan's CONSEC counters
    say which direction; by count only when they do not tell).  None when the small ops are not consecutive."""
    ev = f.evidence
    if ev.get("consecutive_ops_counter", 0) < 0.2 * max(ev["small_reads"] + ev["small_writes"], 1):
        return None
    buf = int(f.facts.get("buffer_bytes", cfg.small_io.buffer_bytes))
    cr, cw = f.facts.get("consecutive_reads", 0), f.facts.get("consecutive_writes", 0)
    writes = cw > cr if cr != cw else ev["small_writes"] > ev["small_reads"]
    mode = "wb" if writes else "rb"
    return Recommendation(id="buffering", title=f"Buffer small sequential requests in {fmt_bytes(buf)}",
                          settings={"buffering": buf}, changes=(Change("snippet", f"open(path, '{mode}', buffering={buf})"),),
                          gain="io-only")


def _alignment_rec(f: Finding) -> Recommendation:
    a = int(f.evidence["alignment_bytes"])
    layer = _interface(f)[0]
    return Recommendation(id="alignment", title=f"Align requests to {fmt_bytes(a)}" + (f" ({layer})" if layer else ""),
                          settings={"alignment": a}, changes=_alignment_changes(f), gain="io-only")


def _striping(profile, f: Finding) -> Recommendation:
    """Stripe the rank-imbalance's top file (on fewer than 8 OSTs) over 8."""
    top = f.facts["top_file"]
    folder = top.rsplit("/", 1)[0] or "."
    if folder.rstrip("/") in _mount_points(profile):
        # the file sits at the root of its file system (anonymized logs drop the folders): a default
        # layout there would apply to everyone's new files, so the change is made on the file itself
        cmd = f"lfs setstripe -c 8 -S 4M {top}.striped  # empty file over 8 OSTs: cp the original into it, then mv"
    else:
        cmd = f"lfs setstripe -c 8 -S 4M {folder}  # new files in it; copy {top} to restripe it"
    return Recommendation(id="striping", title=f"Stripe the shared files over 8 OSTs (today "
                          f"{int(f.evidence['top_file_stripe_count'])})", settings={"stripe_count": 8},
                          changes=(Change("shell", cmd),), gain="io-only")


def _arg_change(params: Mapping[str, Any] | None, name: str, value: Any) -> tuple[Change, ...]:
    """The command-line change when the workload takes ``name`` (as ``--name``), else nothing."""
    if not params or name not in params:
        return ()
    flag = "--" + name.replace("_", "-")
    return (Change("arg", f"{flag} {value}", flag, value),)


def task_chunk_plan(array: Mapping[str, Any], threads: int, target_chunk_bytes: float) -> dict[str, Any]:
    """The chunks to recommend for an array a Dask job cut too fine: ~``target_chunk_bytes`` per chunk, but at
    least two chunks per worker thread so every thread keeps working."""
    total = math.prod(array["shape"]) * array["itemsize"]
    target = min(target_chunk_bytes, max(total / (2 * max(threads, 1)), array["chunk_bytes"]))
    new = rechunk_plan(array["shape"], array["chunks"], array["itemsize"], target)
    dims = array["dims"] or [f"dim_{i}" for i in range(len(new))]
    return {"chunks": new, "dims": list(dims), "change": {d: n for d, n, o in zip(dims, new, array["chunks"]) if n != o},
            "chunk_bytes": math.prod(new) * array["itemsize"],
            "tasks": math.prod(-(-s // n) for s, n in zip(array["shape"], new))}


def _chunks_from_tasks(f: Finding, cfg: Config, params) -> Recommendation:
    a = f.facts["array"]
    plan = task_chunk_plan(a, int(f.evidence["worker_threads"]), cfg.tasks.target_chunk_bytes)
    text = ",".join(str(c) for c in plan["chunks"])
    return Recommendation(
        id="chunking", gain="reshapes-work", title=f"Use chunks of {tuple(plan['chunks'])} ≈ {fmt_bytes(plan['chunk_bytes'])} "
                             f"(~{plan['tasks']:,} tasks instead of {int(f.evidence['tasks']):,})",
        settings={"chunks": text},
        changes=_arg_change(params, "chunks", text) + (
            Change("snippet", f"ds = xr.open_dataset(src, chunks={plan['change']})"),
            Change("snippet", f"ds = ds.chunk({plan['change']})  # before to_zarr")))


def _array_of(profile, name: str) -> dict | None:
    for a in profile.job.arrays:
        if a["path"].rstrip("/") == name.rstrip("/") or a["path"].endswith("/" + name.rsplit("/", 1)[-1]):
            return a
    return None


def _chunks_from_files(profile, f: Finding, params) -> Recommendation | None:
    grids = f.facts["zarr_grids"]
    name = max(grids, key=lambda n: grids[n]["chunks"])
    g = grids[name]
    a = _array_of(profile, name)
    grid = g["grid"]
    if a is not None:  # the array's own chunk grid (file names of temporary chunk copies can lose a dimension)
        grid = [-(-s // c) for s, c in zip(a["shape"], a["chunks"])]
    factors, new_bytes, files = merge_plan(grid, g["mean_chunk_bytes"], f.facts["target_chunk_bytes"])
    if a is None:
        dims = ", ".join(f"x{k} along dimension {d}" for d, k in enumerate(factors) if k > 1)
        return Recommendation(id="chunking", gain="reshapes-work", title=f"Merge chunks of {name.rsplit('/', 1)[-1]}: {dims or 'none'} "
                                                   f"(≈ {fmt_bytes(new_bytes)} per chunk file)",
                              settings={"chunk_merge": list(factors)})
    new = [min(c * k, s) for c, k, s in zip(a["chunks"], factors, a["shape"])]
    text = ",".join(str(c) for c in new)
    dims = a["dims"] or [f"dim_{i}" for i in range(len(new))]
    change = {d: n for d, n, o in zip(dims, new, a["chunks"]) if n != o}
    title = (f"Use chunks of {tuple(new)} ≈ {fmt_bytes(math.prod(new) * a['itemsize'])} "
             f"({files:,} chunk files instead of {g['chunks']:,})")
    if f.facts.get("wrote", True):
        return Recommendation(id="chunking", gain="reshapes-work", title=title, settings={"chunks": text},
                              changes=_arg_change(params, "chunks", text) + (
                                  Change("snippet", f"ds = ds.chunk({change})  # before to_zarr"),))
    # the job only read these chunks: the fix is the store's layout, made once (a rechunked copy)
    store = a["path"].split(".zarr", 1)[0] + ".zarr"
    copy = store[: -len(".zarr")] + ".rechunked.zarr"
    changes = (Change("shell", f"iodiag workload convert --src {store} --dst {copy} --chunks {text} --cluster sync",
                      "rechunk",
                      {"src": store, "dst": copy, "chunks": text}),)
    if params and "path" in params:
        changes += (Change("arg", f"--path {copy}", "--path", copy),)
    return Recommendation(id="layout", gain="reshapes-work", title="Rechunk the store once: " + title, settings={"store_chunks": text},
                          changes=changes, notes=("a data-layout change: the rechunked copy is made once, then every "
                                                  "read uses it",))
