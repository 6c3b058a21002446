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
        files=int(len(np.unique(t["file_id"]))),
        reads=_sum(t, f"{p}_READS") + (_sum(t, f"{p}_INDEP_READS") + _sum(t, f"{p}_COLL_READS") + _sum(t, f"{p}_NB_READS") if mod == "MPI-IO" else 0),
        writes=_sum(t, f"{p}_WRITES") + (_sum(t, f"{p}_INDEP_WRITES") + _sum(t, f"{p}_COLL_WRITES") + _sum(t, f"{p}_NB_WRITES") if mod == "MPI-IO" else 0),
        bytes_read=_sum(t, f"{p}_BYTES_READ"),
        bytes_written=_sum(t, f"{p}_BYTES_WRITTEN"),
        opens=_sum(t, f"{p}_OPENS") + _sum(t, f"{p}_INDEP_OPENS") + _sum(t, f"{p}_COLL_OPENS"),
        read_time_s=_fsum(t, f"{p}_F_READ_TIME"),
        write_time_s=_fsum(t, f"{p}_F_WRITE_TIME"),
        meta_time_s=_fsum(t, f"{p}_F_META_TIME"),
    )


def volumes(profile: JobProfile) -> dict[str, int]:
    posix, stdio = profile.module("POSIX"), profile.module("STDIO")
    ids: set[int] = set()
    for mod in ("POSIX", "STDIO", "MPI-IO", "DFS", "DAOS"):
        t = profile.module(mod)
        if t is not None:
            ids.update(np.unique(t["file_id"]).tolist())
    out = {
        "bytes_read": sum(_sum(profile.module(m), f"{PREFIX[m]}_BYTES_READ") for m in BYTE_MODULES),
        "bytes_written": sum(_sum(profile.module(m), f"{PREFIX[m]}_BYTES_WRITTEN") for m in BYTE_MODULES),
        "reads": sum(_sum(profile.module(m), f"{PREFIX[m]}_READS") for m in BYTE_MODULES),
        "writes": sum(_sum(profile.module(m), f"{PREFIX[m]}_WRITES") for m in BYTE_MODULES),
        "opens": _sum(posix, "POSIX_OPENS") + _sum(stdio, "STDIO_OPENS") + _sum(profile.module("DFS"), "DFS_OPENS") + _sum(profile.module("DAOS"), "DAOS_OBJ_OPENS"),
        "stats": _sum(posix, "POSIX_STATS"),
        "seeks": _sum(posix, "POSIX_SEEKS") + _sum(stdio, "STDIO_SEEKS"),
        "fsyncs": _sum(posix, "POSIX_FSYNCS") + _sum(posix, "POSIX_FDSYNCS"),
        "files": len(ids),
    }
    return out


def _io_time(t: Table, p: str) -> np.ndarray:
    tot = np.zeros(len(t))
    for c in (f"{p}_F_READ_TIME", f"{p}_F_WRITE_TIME", f"{p}_F_META_TIME"):
        if c in t:
            tot += np.clip(t[c], 0, None)
    return tot


def top_files(profile: JobProfile, n: int = 5) -> list[FileTotals]:
    paths = profile.path_of()
    rows: list[FileTotals] = []
    for mod in ("POSIX", "STDIO", "MPI-IO"):
        t = profile.module(mod)
        if t is None:
            continue
        p = PREFIX[mod]
        fid = t["file_id"]
        uniq, inv = np.unique(fid, return_inverse=True)
        tm = np.bincount(inv, weights=_io_time(t, p), minlength=len(uniq))
        br = np.bincount(inv, weights=np.clip(t.get(f"{p}_BYTES_READ", np.zeros(len(t))), 0, None), minlength=len(uniq))
        bw = np.bincount(inv, weights=np.clip(t.get(f"{p}_BYTES_WRITTEN", np.zeros(len(t))), 0, None), minlength=len(uniq))
        shared = np.bincount(inv, weights=(t["rank"] < 0).astype(float), minlength=len(uniq))
        nproc = np.bincount(inv, minlength=len(uniq))
        order = np.argsort(-tm)[:n]
        for i in order:
            if tm[i] <= 0 and br[i] + bw[i] <= 0:
                continue
            rows.append(FileTotals(
                path=paths.get(int(uniq[i]), f"<unnamed {int(uniq[i]):016x}>"), module=mod, io_time_s=float(tm[i]),
                bytes_read=int(br[i]), bytes_written=int(bw[i]),
                processes=-1 if shared[i] else int(nproc[i]),
            ))
    rows.sort(key=lambda r: -r.io_time_s)
    return rows[:n]


def process_io_time(profile: JobProfile) -> np.ndarray:
    """I/O seconds per process (index = proc): the detectors' own numbers (``metrics.proc_io_s``).

    POSIX-level time only (MPI-IO time includes the POSIX time beneath it); a shared
    record's time goes to its slowest rank, the rest spread evenly over the other ranks
    of its log, so jobs that only write shared files still show who waited.
    """
    from .metrics import metrics_of

    return metrics_of(profile).proc_io_s[: len(profile.processes)]


def spread(profile: JobProfile, n_slowest: int = 5) -> Spread | None:
    per = process_io_time(profile)
    if not len(per):
        return None
    active = per > 0
    vals = per[active] if active.any() else per
    order = np.argsort(-per, kind="stable")[:n_slowest]
    return Spread(
        processes=len(per), active=int(active.sum()), min_s=float(vals.min()), median_s=float(np.median(vals)),
        max_s=float(vals.max()), slowest=[int(i) for i in order if per[i] > 0],
    )


def summarize(profile: JobProfile, *, top: int = 5) -> Summary:
    mods = [m for m in (module_totals(profile, x) for x in ("POSIX", "MPI-IO", "STDIO", "DFS", "DAOS")) if m is not None]
    return Summary(
        volumes=volumes(profile),
        modules=mods,
        top_files=top_files(profile, top),
        spread=spread(profile),
        io_time_s=float(sum(m.read_time_s + m.write_time_s + m.meta_time_s for m in mods if m.module != "MPI-IO")),
    )


def as_dict(obj: Any) -> Any:
    import dataclasses

    return dataclasses.asdict(obj) if dataclasses.is_dataclass(obj) else obj
