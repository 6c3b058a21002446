"""Job-level numbers every report shows: volumes, per-module totals, top files, process spread.

Pure functions over the JobProfile's counters (every collector fills them:
the embedded collector derives them from its operations).  MPI-IO bytes are layered on POSIX, so
job volumes add POSIX, STDIO and the object-store modules (DFS, DAOS) but not
MPI-IO; MPI-IO totals stay visible per module.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..profile import JobProfile, Table
from .nputil import median, unique

# module -> (prefix used in its counter names)
PREFIX = {"POSIX": "POSIX", "STDIO": "STDIO", "MPI-IO": "MPIIO", "DFS": "DFS", "DAOS": "DAOS"}
BYTE_MODULES = ("POSIX", "STDIO", "DFS", "DAOS")


def _sum(t: Table | None, col: str) -> int:
    if t is None or col not in t:
        return 0
    v = t[col]
    return int(v[v > 0].sum())


def _fsum(t: Table | None, col: str) -> float:
    if t is None or col not in t:
        return 0.0
    v = t[col]
    return float(v[v > 0].sum())


# module -> (prefix, read-op counters, write-op counters, metadata-op counters): the counter names every per-module
# total reads (job_totals, module_totals, module_volumes)
MODULE_SPEC: dict[str, tuple[str, tuple[str, ...], tuple[str, ...], tuple[str, ...]]] = {
    "POSIX": ("POSIX", ("POSIX_READS",), ("POSIX_WRITES",),
              ("POSIX_OPENS", "POSIX_STATS", "POSIX_SEEKS", "POSIX_FSYNCS", "POSIX_FDSYNCS", "POSIX_RENAME_SOURCES", "POSIX_FILENOS", "POSIX_DUPS", "POSIX_MMAPS")),
    "MPI-IO": ("MPIIO", ("MPIIO_INDEP_READS", "MPIIO_COLL_READS", "MPIIO_SPLIT_READS", "MPIIO_NB_READS"),
               ("MPIIO_INDEP_WRITES", "MPIIO_COLL_WRITES", "MPIIO_SPLIT_WRITES", "MPIIO_NB_WRITES"),
               ("MPIIO_INDEP_OPENS", "MPIIO_COLL_OPENS", "MPIIO_SYNCS", "MPIIO_VIEWS", "MPIIO_HINTS")),
    "STDIO": ("STDIO", ("STDIO_READS",), ("STDIO_WRITES",), ("STDIO_OPENS", "STDIO_FDOPENS", "STDIO_SEEKS", "STDIO_FLUSHES")),
    "H5F": ("H5F", (), (), ("H5F_OPENS", "H5F_FLUSHES")),
    "H5D": ("H5D", ("H5D_READS",), ("H5D_WRITES",), ("H5D_OPENS", "H5D_FLUSHES")),
    "PNETCDF_FILE": ("PNETCDF_FILE", (), (), ("PNETCDF_FILE_CREATES", "PNETCDF_FILE_OPENS", "PNETCDF_FILE_REDEFS", "PNETCDF_FILE_SYNCS")),
    "PNETCDF_VAR": ("PNETCDF_VAR", ("PNETCDF_VAR_INDEP_READS", "PNETCDF_VAR_COLL_READS", "PNETCDF_VAR_NB_READS"),
                    ("PNETCDF_VAR_INDEP_WRITES", "PNETCDF_VAR_COLL_WRITES", "PNETCDF_VAR_NB_WRITES"), ("PNETCDF_VAR_OPENS",)),
    "DFS": ("DFS", ("DFS_READS", "DFS_READXS", "DFS_NB_READS"), ("DFS_WRITES", "DFS_WRITEXS", "DFS_NB_WRITES"),
            ("DFS_OPENS", "DFS_GLOBAL_OPENS", "DFS_LOOKUPS", "DFS_STATS", "DFS_GET_SIZES", "DFS_REMOVES", "DFS_PUNCHES")),
    "DAOS": ("DAOS", ("DAOS_OBJ_FETCHES", "DAOS_ARRAY_READS", "DAOS_KV_GETS"), ("DAOS_OBJ_UPDATES", "DAOS_ARRAY_WRITES", "DAOS_KV_PUTS"),
             ("DAOS_OBJ_OPENS", "DAOS_ARRAY_OPENS", "DAOS_KV_OPENS", "DAOS_ARRAY_STATS", "DAOS_ARRAY_GET_SIZES")),
}


def _sum_cols(t: Table | None, names) -> int:
    """The counters ``names`` of a module added up (negative values, Darshan's "not recorded", as 0)."""
    return sum(_sum(t, n) for n in names)


def module_volumes(profile: JobProfile) -> Table:
    """One row per module that has records: bytes, op counts and summed op times (layers side by side, never
    summed: an MPI-IO write is also counted by POSIX beneath it).  The HTML volumes plot and compare read it."""
    cols: dict[str, list] = {k: [] for k in (
        "module", "records", "bytes_read", "bytes_written", "reads", "writes", "meta_ops",
        "read_time_s", "write_time_s", "meta_time_s")}
    for mod, (pre, rd, wr, meta) in MODULE_SPEC.items():
        t = profile.module(mod)
        if t is None:
            continue
        cols["module"].append(mod)
        cols["records"].append(len(t))
        cols["bytes_read"].append(_sum(t, f"{pre}_BYTES_READ"))
        cols["bytes_written"].append(_sum(t, f"{pre}_BYTES_WRITTEN"))
        cols["reads"].append(_sum_cols(t, rd))
        cols["writes"].append(_sum_cols(t, wr))
        cols["meta_ops"].append(_sum_cols(t, meta))
        cols["read_time_s"].append(_fsum(t, f"{pre}_F_READ_TIME"))
        cols["write_time_s"].append(_fsum(t, f"{pre}_F_WRITE_TIME"))
        cols["meta_time_s"].append(_fsum(t, f"{pre}_F_META_TIME"))
    return Table({
        k: np.asarray(v, dtype=object if k == "module" else ("f8" if k.endswith("_s") else "i8"))
        for k, v in cols.items()
    })


@dataclass
class ModuleTotals:
    module: str
    files: int
    reads: int
    writes: int
    bytes_read: int
    bytes_written: int
    opens: int
    read_time_s: float
    write_time_s: float
    meta_time_s: float


@dataclass
class FileTotals:
    path: str
    module: str
    io_time_s: float
    bytes_read: int
    bytes_written: int
    processes: int


@dataclass
class Spread:
    """Distribution of per-process I/O time (seconds)."""

    processes: int
    active: int
    min_s: float
    median_s: float
    max_s: float
    slowest: list[int] = field(default_factory=list)


@dataclass
class Summary:
    volumes: dict[str, int]
    modules: list[ModuleTotals]
    top_files: list[FileTotals]
    spread: Spread | None
    io_time_s: float


def module_totals(profile: JobProfile, mod: str) -> ModuleTotals | None:
    t = profile.module(mod)
    if t is None:
        return None
    p = PREFIX[mod]
    return ModuleTotals(
        module=mod,
        files=int(len(unique(t["file_id"]))),
        reads=_sum_cols(t, MODULE_SPEC[mod][1]),
        writes=_sum_cols(t, MODULE_SPEC[mod][2]),
        bytes_read=_sum(t, f"{p}_BYTES_READ"),
        bytes_written=_sum(t, f"{p}_BYTES_WRITTEN"),
        opens=_sum(t, f"{p}_OPENS") + _sum(t, f"{p}_INDEP_OPENS") + _sum(t, f"{p}_COLL_OPENS"),
        read_time_s=_fsum(t, f"{p}_F_READ_TIME"),
        write_time_s=_fsum(t, f"{p}_F_WRITE_TIME"),
        meta_time_s=_fsum(t, f"{p}_F_META_TIME"),
    )


def byte_modules(profile: JobProfile) -> tuple[str, ...]:
    """The modules whose bytes add up to the job's volume, each byte once: POSIX, STDIO, DFS and DAOS, but not
    DAOS when DFS is present (DFS is a file system over DAOS: its bytes are DAOS's bytes again), and MPI-IO only
    when no module beneath it (POSIX, DFS, DAOS) recorded anything (a log with POSIX disabled)."""
    below = any(profile.module(m) is not None for m in ("POSIX", "DFS", "DAOS"))
    mods = tuple(m for m in BYTE_MODULES if not (m == "DAOS" and profile.module("DFS") is not None))
    return mods if below or profile.module("MPI-IO") is None else mods + ("MPI-IO",)


@dataclass(frozen=True)
class JobTotals:
    """The job's totals, computed once per profile (``job_totals``) and read by every output that shows them:
    the report's ``volumes``, compare, the HTML summary, site features and the recommender's measured features.

    ``files``: distinct files with a record at a file layer (POSIX, STDIO, MPI-IO, H5F, PNETCDF_FILE, DFS, DAOS;
    not HDF5 datasets or PnetCDF variables, which are parts of files, nor LUSTRE striping records, which name
    files whose I/O the log did not record); ``data_files``: those of them that are not std streams or unnamed
    (``<STDOUT>``, ``<unnamed …>``).  Bytes and reads/writes add the ``byte_modules`` (each byte once)."""

    files: int
    data_files: int
    bytes_read: int
    bytes_written: int
    reads: int
    writes: int
    opens: int
    stats: int
    seeks: int
    fsyncs: int


FILE_MODULES = ("POSIX", "STDIO", "MPI-IO", "H5F", "PNETCDF_FILE", "DFS", "DAOS")


def job_totals(profile: JobProfile) -> JobTotals:
    from .counters import memo
    from .metrics import angle_file_ids

    d = memo(profile)
    if "job_totals" in d:
        return d["job_totals"]
    posix, stdio = profile.module("POSIX"), profile.module("STDIO")
    mods = byte_modules(profile)
    found = [unique(t["file_id"]) for t in (profile.module(m) for m in FILE_MODULES) if t is not None]
    ids = unique(np.concatenate(found)) if found else np.zeros(0, "u8")
    special = angle_file_ids(profile)
    tot = JobTotals(
        files=int(len(ids)),
        data_files=int(len(ids) - np.isin(ids, special).sum()) if len(special) else int(len(ids)),
        bytes_read=sum(_sum(profile.module(m), f"{PREFIX[m]}_BYTES_READ") for m in mods),
        bytes_written=sum(_sum(profile.module(m), f"{PREFIX[m]}_BYTES_WRITTEN") for m in mods),
        reads=sum(_sum_cols(profile.module(m), MODULE_SPEC[m][1]) for m in mods),
        writes=sum(_sum_cols(profile.module(m), MODULE_SPEC[m][2]) for m in mods),
        opens=_sum(posix, "POSIX_OPENS") + _sum(stdio, "STDIO_OPENS") + _sum(profile.module("DFS"), "DFS_OPENS") + _sum(profile.module("DAOS"), "DAOS_OBJ_OPENS"),
        stats=_sum(posix, "POSIX_STATS"),
        seeks=_sum(posix, "POSIX_SEEKS") + _sum(stdio, "STDIO_SEEKS"),
        fsyncs=_sum(posix, "POSIX_FSYNCS") + _sum(posix, "POSIX_FDSYNCS"),
    )
    d["job_totals"] = tot
    return tot


def volumes(profile: JobProfile) -> dict[str, int]:
    """The report's ``volumes`` object (the job's totals)."""
    t = job_totals(profile)
    return {"bytes_read": t.bytes_read, "bytes_written": t.bytes_written, "reads": t.reads, "writes": t.writes,
            "opens": t.opens, "stats": t.stats, "seeks": t.seeks, "fsyncs": t.fsyncs, "files": t.files}


# the layers that reach the file system, and the layers above them; a file seen only at a higher layer is
# counted there (MPI-IO time includes the POSIX time beneath it, so a file is never counted at two layers)
LOW_LAYERS = (("POSIX", "POSIX"), ("STDIO", "STDIO"))
# (HDF5 datasets and PnetCDF variables are parts of files, not files: H5F/PNETCDF_FILE stand for their file)
HIGH_LAYERS = (("MPI-IO", "MPIIO"), ("H5F", "H5F"), ("PNETCDF_FILE", "PNETCDF_FILE"), ("DAOS", "DAOS"), ("DFS", "DFS"))
_FILE_COLS = (("read_time_s", "_F_READ_TIME"), ("write_time_s", "_F_WRITE_TIME"), ("meta_time_s", "_F_META_TIME"),
              ("bytes_read", "_BYTES_READ"), ("bytes_written", "_BYTES_WRITTEN"))


def _accumulate(profile: JobProfile, layers, acc: dict, log_size: np.ndarray, skip: set | None = None,
                stack: bool = False) -> None:
    """Add the layers' records to ``acc`` (file id -> sums), leaving out files in ``skip``.  With ``stack`` the
    layers are one stack, lowest first: a file already counted at a layer below keeps that layer's bytes (DAOS
    beneath DFS: a DFS file's bytes once), takes the larger read, write and metadata seconds of the two, and
    this layer's name with the names it has (a file MPI-IO wrote through POSIX is "MPI-IO+POSIX")."""
    skip = set(skip or ())
    for mod, pre in layers:
        t = profile.module(mod)
        if t is None:
            continue
        fid = t["file_id"]
        keep = np.ones(len(fid), bool) if not skip else ~np.isin(fid, np.fromiter(skip, dtype=fid.dtype, count=len(skip)))
        if stack and not keep.all():
            # a file counted at a layer beneath: its seconds are the larger of the two layers' (a layer's time
            # includes the time of the layer beneath it: never their sum), its bytes those of the layer beneath
            # (MPI-IO waiting in a collective call for the aggregators shows at MPI-IO only)
            under = fid[~keep]
            uq, inv = np.unique(under, return_inverse=True)
            for col, suffix in _FILE_COLS[:3]:
                name = pre + suffix
                if name not in t:
                    continue
                sums = np.bincount(inv, weights=np.maximum(t[name][~keep], 0).astype(np.float64), minlength=len(uq))
                for f, v in zip(uq.tolist(), sums.tolist()):
                    d = acc.get(f)
                    if d is not None:
                        d[col] = max(d.get(col, 0.0), v)
            for f in uq.tolist():
                if f in acc:
                    acc[f].setdefault("_layers", set()).add(mod)
        if not keep.any():
            continue
        uniq, inv = np.unique(fid[keep], return_inverse=True)
        for col, suffix in _FILE_COLS:
            name = pre + suffix
            if name not in t:
                continue
            sums = np.bincount(inv, weights=np.maximum(t[name][keep], 0).astype(np.float64), minlength=len(uniq))
            for f, v in zip(uniq.tolist(), sums.tolist()):
                acc.setdefault(f, {}).setdefault(col, 0.0)
                acc[f][col] += v
        procs = t["proc"][keep]
        logs = t["log"][keep] if "log" in t else np.zeros(len(procs), "i8")
        for f, pr, lg in zip(fid[keep].tolist(), procs.tolist(), logs.tolist()):
            d = acc.setdefault(f, {})
            if pr >= 0:
                d.setdefault("_procs", set()).add(pr)
            else:  # a record shared by every process of its log
                d.setdefault("_shared", set()).add(lg)
            d.setdefault("_layers", set()).add(mod)
        if stack:
            skip |= set(fid[keep].tolist())


def file_times(profile: JobProfile) -> Table:
    """Every file once, with its I/O time (read, write, metadata; process-seconds), bytes and the number of
    distinct processes that touched it (a record shared by all ranks of a log counts them all), ranked by time."""
    acc: dict[int, dict] = {}
    pr = profile.processes
    log_size = np.bincount(pr["log"]) if len(pr) else np.zeros(1, "i8")
    _accumulate(profile, LOW_LAYERS, acc, log_size)
    low = set(acc)
    # the layers above: a file the POSIX level saw keeps its name and bytes there and takes the larger seconds
    _accumulate(profile, HIGH_LAYERS, acc, log_size, skip=low, stack=True)
    paths = profile.path_of()
    fids = list(acc)

    def col(name):
        return np.asarray([acc[f].get(name, 0.0) for f in fids], dtype="f8")

    def nprocs(d):
        shared = d.get("_shared", ())
        return len(d.get("_procs", ())) + sum(int(log_size[lg]) if 0 <= lg < len(log_size) else 1 for lg in shared)

    t = Table({
        "file_id": np.asarray(fids, dtype="u8"),
        "path": np.asarray([paths.get(f, f"<unnamed {f:016x}>") for f in fids], dtype=object),
        "layers": np.asarray(["+".join(sorted(acc[f].get("_layers", ()))) for f in fids], dtype=object),
        "read_time_s": col("read_time_s"), "write_time_s": col("write_time_s"), "meta_time_s": col("meta_time_s"),
        "bytes_read": col("bytes_read").astype("i8"), "bytes_written": col("bytes_written").astype("i8"),
        "processes": np.asarray([nprocs(acc[f]) for f in fids], dtype="i8"),
    })
    t = _fold_temp_names(t)
    from .metrics import tool_file

    tools = np.array([tool_file(str(p)) for p in t["path"].tolist()], dtype=bool)
    if tools.any():  # Dask's scratch files are not the workload's
        t = t.filter(~tools)
    total = t["read_time_s"] + t["write_time_s"] + t["meta_time_s"]
    t = t.with_columns(io_time_s=total)
    order = np.lexsort((t["path"].astype(str), -total)) if len(t) else np.zeros(0, int)
    return t.take(order)


def _fold_temp_names(t: Table) -> Table:
    """Rows of a writer's temp file (``<chunk>.<uuid>.partial``) added to the row of the file it became."""
    from .metrics import final_name

    paths = t["path"].tolist()
    final = [final_name(p) for p in paths]
    if final == paths:
        return t
    keys, first, inv = np.unique(np.asarray(final, dtype=object), return_index=True, return_inverse=True)
    cols = {"file_id": t["file_id"][first], "path": keys, "layers": t["layers"][first]}
    for c in ("read_time_s", "write_time_s", "meta_time_s"):
        cols[c] = np.bincount(inv, weights=t[c], minlength=len(keys))
    for c in ("bytes_read", "bytes_written"):
        cols[c] = np.bincount(inv, weights=t[c].astype("f8"), minlength=len(keys)).astype("i8")
    procs = np.zeros(len(keys), "i8")
    np.maximum.at(procs, inv, t["processes"])
    cols["processes"] = procs
    return Table(cols)


def top_files(profile: JobProfile, n: int = 5) -> list[FileTotals]:
    """The n files with the most I/O time, each named once (see ``file_times``)."""
    t = file_times(profile)
    rows = []
    for i in range(len(t)):
        if len(rows) >= n:
            break
        if t["io_time_s"][i] <= 0 and t["bytes_read"][i] + t["bytes_written"][i] <= 0:
            continue
        rows.append(FileTotals(path=str(t["path"][i]), module=str(t["layers"][i]), io_time_s=float(t["io_time_s"][i]),
                               bytes_read=int(t["bytes_read"][i]), bytes_written=int(t["bytes_written"][i]),
                               processes=int(t["processes"][i])))
    return rows


def process_io_time(profile: JobProfile) -> np.ndarray:
    """I/O seconds per process (index = proc): the time model's process-seconds over every layer
    (``TimeModel.proc_layer_s``: the POSIX level, MPI-IO time beyond the POSIX time beneath it, HDF5, PnetCDF
    and DFS).  A shared record's time goes to its slowest rank, the rest spread evenly over the other ranks
    of its log, so jobs that only write shared files still show who waited.
    """
    from .timemodel import time_model_of

    return time_model_of(profile).proc_layer_s[: len(profile.processes)]


def spread(profile: JobProfile, n_slowest: int = 5) -> Spread | None:
    per = process_io_time(profile)
    if not len(per):
        return None
    active = per > 0
    vals = per[active] if active.any() else per
    order = np.argsort(-per, kind="stable")[:n_slowest]
    return Spread(
        processes=len(per), active=int(active.sum()), min_s=float(vals.min()), median_s=median(vals),
        max_s=float(vals.max()), slowest=[int(i) for i in order if per[i] > 0],
    )


def io_process_s(profile: JobProfile) -> float:
    """Summed I/O seconds of every process (the report's ``io_time_s``, compare's too): the time model's
    ``io_process_s`` (the detectors' POSIX + STDIO total; a job on an object store counts DFS, or DAOS)."""
    from .timemodel import time_model_of

    return float(time_model_of(profile).io_process_s)


def summarize(profile: JobProfile, *, top: int = 5) -> Summary:
    mods = [m for m in (module_totals(profile, x) for x in ("POSIX", "MPI-IO", "STDIO", "DFS", "DAOS")) if m is not None]
    return Summary(
        volumes=volumes(profile),
        modules=mods,
        top_files=top_files(profile, top),
        spread=spread(profile),
        io_time_s=io_process_s(profile),
    )


def as_dict(obj: Any) -> Any:
    import dataclasses

    return dataclasses.asdict(obj) if dataclasses.is_dataclass(obj) else obj
