"""The job-time model: how many seconds of the job's *wall time* I/O takes, and what a problem costs in them.

Darshan's counters (and the counters derived from an embedded trace) give I/O time as *process-seconds*: the
sum over every process (and every thread) of the time spent in I/O calls.  A 65,536-rank job whose ranks each
spend 0.5 s opening one shared file has ~35,000 process-seconds of metadata but loses ~0.5 s of its run to it.
Findings are therefore costed here in the job's own seconds:

* **per process I/O seconds** (``proc_io_s``): every layer, none added to the layer beneath it
  (``LayerTimes``): the POSIX level (POSIX + STDIO), plus the MPI-IO seconds beyond the process's POSIX seconds
  on the MPI-IO files (MPI-IO time includes the POSIX time beneath it; a rank waiting in a collective call while
  the aggregators write has MPI-IO time and no POSIX time), at least the HDF5 and the PnetCDF seconds (layers
  above those), plus the DFS seconds (DAOS where no DFS sits over it: a stack beside POSIX).  A shared record
  (rank -1) of any layer gives its slowest rank its own seconds and the other ranks an even part of the rest.
  When the job has an operation trace (DXT or the embedded collector's ``ops``) with every read and write, the
  traced levels are the union of the process's I/O intervals — overlapping calls of several threads count once
  — plus the metadata seconds the trace does not hold, and the untraced layers are added from their counters.
  Either is capped by the process's lifetime and the run time.
* **I/O on the critical path** (``io_wall_s``): the largest per-process I/O time.  Processes of a parallel job
  run side by side, so the job cannot finish before its busiest process's I/O is done, and removing all other
  I/O would not shorten it; for a serial job it is simply its I/O time.  (A job whose processes ran one after
  the other would be under-estimated; iodiag sees no dependency between processes.)
* **a problem's wall cost** (``wall_cost_of_files``): the process-seconds a detector attributes to files are
  spread over the processes that did that I/O, in proportion to their I/O time on each file (a record shared by
  all ranks of a log gives its slowest rank its own share and the others an even share), scaled by each
  process's ratio of wall to summed I/O time, and the largest per-process amount is the job seconds the problem
  adds.  It never exceeds the critical path's I/O, nor the run time.

Severity then follows the cost's share of the **run time** (``Config.severity``); the process-seconds stay in a
finding's evidence, labelled as such.  The model is computed once per profile (``time_model_of``) and read-only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from ..profile import OP, JobProfile
from . import batches
from .batches import chunks
from .metrics import group_sum, memo, metrics_of, pcol
from .nputil import stable_argsort_small


@dataclass(frozen=True)
class TimeModel:
    runtime_s: float | None  # the job's run time (None when no log says it)
    proc_io_s: np.ndarray  # wall seconds each process spent in I/O (index = proc)
    proc_scale: np.ndarray  # per process: wall I/O seconds per summed (process-) I/O second, <= 1
    io_wall_s: float  # I/O on the critical path: the busiest process's I/O seconds (<= runtime)
    io_process_s: float  # summed I/O seconds over every process (process-seconds)
    basis: str  # "ops" (interval union from a complete trace) or "counters" (summed call times)
    # per process, process-seconds over every layer (POSIX level, MPI-IO beyond it, HDF5, PnetCDF, DFS): the
    # layers' times merged, a layer never added to the layer beneath it (see ``LayerTimes``)
    proc_layer_s: np.ndarray = field(default_factory=lambda: np.zeros(0))
    proc_mpiio_s: np.ndarray = field(default_factory=lambda: np.zeros(0))  # MPI-IO seconds per process
    proc_mpiio_wait_s: np.ndarray = field(default_factory=lambda: np.zeros(0))  # MPI-IO seconds beyond its POSIX

    @property
    def io_share(self) -> float | None:
        return self.share(self.io_wall_s)

    def share(self, wall_s: float | None) -> float | None:
        """Share of the run time; None when the run time is unknown."""
        if wall_s is None or not self.runtime_s or self.runtime_s <= 0:
            return None
        return float(min(max(wall_s, 0.0) / self.runtime_s, 1.0))

    def cap(self, wall_s: float) -> float:
        """A wall-clock cost bounded by the run time (when known)."""
        w = max(float(wall_s), 0.0)
        return min(w, self.runtime_s) if self.runtime_s and self.runtime_s > 0 else w


def _union_per_proc(proc: np.ndarray, start: np.ndarray, end: np.ndarray, n: int, *, t0: float | None = None,
                    span: float | None = None, group_base: int = 0) -> np.ndarray:
    """Per process, the total length of the union of its [start, end] intervals.

    Processes are taken in batches of whole processes of about ``CHUNK_OPS`` operations (one stable sort of the
    process column, 8 bytes per operation), each batch with one vectorized pass: the temporaries are bounded by
    the batch instead of being several copies of every operation.  ``proc`` holds values in 0..n-1.

    When the operations are only part of the job (whole processes of an ``OpsSource``), ``t0`` (the job's first
    start), ``span`` (the job's largest time from ``t0``, plus 1) and ``group_base`` (how many processes with
    operations come before these) are the job's: the result is then exactly these processes' part of the
    result over the whole job."""
    if not len(proc) or n <= 0:
        return np.zeros(max(n, 0))
    if t0 is None:
        t0 = float(start.min())
        span = -np.inf
        for sl in chunks(len(start)):
            s = start[sl] - t0
            span = max(span, float(np.maximum(end[sl] - t0, s).max()))
        span += 1.0
    by_proc = None if bool(np.all(proc[1:] >= proc[:-1])) else stable_argsort_small(proc)
    # rows in time order (the ops table's own order) sorted stably by process are in (process, time) order
    in_time_order = by_proc is not None and bool(np.all(start[1:] >= start[:-1]))
    counts = np.bincount(proc)
    bounds = np.cumsum(counts)
    out = np.zeros(n)
    lo = 0
    present = np.flatnonzero(counts)
    k = 0
    while k < len(present):
        # whole processes, at least one, up to CHUNK_OPS operations
        j = k + 1
        while j < len(present) and bounds[present[j]] - lo <= batches.CHUNK_OPS:
            j += 1
        hi = int(bounds[present[j - 1]])
        idx = slice(lo, hi) if by_proc is None else by_proc[lo:hi]
        p = proc[idx]
        s = start[idx] - t0
        e = np.maximum(end[idx] - t0, s)
        if not in_time_order and not (bool(np.all(s[1:] >= s[:-1])) if j - k == 1 else _sorted_by(p, s)):
            order = np.lexsort((s, p))
            p, s, e = p[order], s[order], e[order]
            del order
        first = np.ones(len(p), bool)
        first[1:] = p[1:] != p[:-1]
        # a running maximum of the end times that restarts with each process: shift each process's times by
        # its group number (over the whole job) times the whole span, so maxima never carry over between processes
        off = (group_base + np.cumsum(first) - 1) * span
        cm = np.maximum.accumulate(e + off) - off
        del off, e
        prev = np.empty_like(cm)
        prev[0] = -1.0
        prev[1:] = cm[:-1]
        new_run = first | (s > prev)
        del prev
        # each run's end: the largest running maximum inside it (cm >= 0: every time is measured from t0)
        run_end = np.maximum.reduceat(cm, np.flatnonzero(new_run))
        lengths = run_end - s[new_run]
        out += np.bincount(np.clip(p[new_run], 0, n - 1), weights=lengths, minlength=n)[:n]
        group_base += j - k
        lo, k = hi, j
    return out


def _union_of_source(ops: "batches.OpsSource", n: int) -> np.ndarray:
    """``_union_per_proc`` over an ``OpsSource``, one process at a time, with the job's t0, span and group numbers
    (the same numbers as over the whole table)."""
    out = np.zeros(max(n, 0))
    if not len(ops) or n <= 0:
        return out
    t0 = float(ops.t_min)
    span = float(ops.t_max - t0) + 1.0
    procs = [p for p, k in ops.counts() if k]
    clip = min(procs) < 0 or max(procs) > max(n - 1, 0)
    if clip and len(set(np.clip(procs, 0, max(n - 1, 0)).tolist())) != len(procs):
        return _union_per_proc(np.clip(ops["proc"], 0, max(n - 1, 0)), ops["start_s"], ops["end_s"], n)  # merged processes
    for g, parts in enumerate(batches.process_batches(ops, ("proc", "start_s", "end_s"))):
        fold, p0 = None, 0
        for t in parts:
            if fold is None:
                p0, fold = int(t["proc"][0]), _UnionFold(t0, span, g)
            fold.add(t["start_s"], t["end_s"])
        if fold is not None:
            pc = int(np.clip(p0, 0, max(n - 1, 0))) if clip else p0
            if 0 <= pc < n:
                part = np.zeros(n)
                part[pc] = fold.finish()
                out += part
    return out


class _UnionFold:
    """``_union_per_proc`` of one process whose operations come in batches in time order (the table's order), with
    the job's ``t0``, ``span`` and the process's group number ``g``: the same floats, batch by batch.  It carries the
    running maximum of the shifted end times, the open run's start and the running sum of the closed runs'
    lengths (added one by one, in order, as ``np.bincount`` adds them)."""

    def __init__(self, t0: float, span: float, g: int) -> None:
        self.t0, self.off = t0, np.asarray([g], "i8") * span  # (group_base + cumsum(first) - 1) * span
        self.off = float(self.off[0])
        self.acc = -np.inf  # running maximum of e + off
        self.prev_cm: float | None = None  # cm of the previous operation (None: none yet)
        self.run_start = 0.0  # start (s) of the open run
        self.total = 0.0

    def add(self, start: np.ndarray, end: np.ndarray) -> None:
        if not len(start):
            return
        s = start - self.t0
        e = np.maximum(end - self.t0, s)
        cmx = np.maximum.accumulate(e + self.off)
        if self.acc > cmx[0]:
            np.maximum(cmx, self.acc, out=cmx)
        self.acc = float(cmx[-1])
        cm = cmx - self.off
        del cmx, e
        prev = np.empty_like(cm)
        prev[0] = -1.0 if self.prev_cm is None else self.prev_cm
        prev[1:] = cm[:-1]
        new_run = s > prev
        if self.prev_cm is None:
            new_run[0] = True
        del prev
        starts = np.flatnonzero(new_run)
        # a run ends where the next one starts; cm is non-decreasing, so a run's largest cm is its last row's
        lengths = [cm[starts[1:] - 1] - s[starts[:-1]]]
        if self.prev_cm is not None and len(starts):
            # the open run ended with the previous batch, or continues into this one up to its first new run
            end = self.prev_cm if starts[0] == 0 else float(cm[starts[0] - 1])
            lengths.insert(0, np.asarray([end - self.run_start]))
        if len(starts):
            self.run_start = float(s[starts[-1]])
        ls = np.concatenate(lengths)
        if len(ls):
            self.total = float(np.cumsum(np.r_[self.total, ls])[-1])
        self.prev_cm = float(cm[-1])

    def finish(self) -> float:
        """The union's length: the closed runs and the open one."""
        if self.prev_cm is None:
            return 0.0
        return float(np.cumsum(np.r_[self.total, self.prev_cm - self.run_start])[-1])


def _sorted_by(g: np.ndarray, t: np.ndarray) -> bool:
    """Whether rows already run in (g, t) order (a stable lexsort by (g, t) would move nothing)."""
    if len(g) < 2:
        return True
    if np.any(g[1:] < g[:-1]):
        return False
    same = g[1:] == g[:-1]
    return not bool(np.any(t[1:][same] < t[:-1][same]))


def _compute(profile: JobProfile) -> TimeModel:
    m = metrics_of(profile)
    n = m.nprocs
    rt = profile.job.runtime_s
    runtime = float(rt) if rt is not None and np.isfinite(rt) and rt > 0 else None
    summed = np.asarray(m.proc_io_s, "f8")[:n]
    if len(summed) < n:
        summed = np.concatenate([summed, np.zeros(n - len(summed))])
    lay = layer_times(profile, n)
    # process-seconds per process over every layer, none summed with the layer beneath it
    merged = lay.merged(summed)
    io_process = float(m.total_io_s) + float((merged - summed).sum())
    wall = merged.copy()
    basis = "counters"
    ops = profile.ops
    if len(ops) and m.dxt_complete:
        if batches.is_source(ops):
            all_rw = ops.all_rw
            u = _union_of_source(ops, n)
        else:
            all_rw = bool((ops["op"] <= OP["write"]).all())
            proc = ops["proc"]
            if len(proc) and (int(proc.min()) < 0 or int(proc.max()) > max(n - 1, 0)):  # (a copy only when needed)
                proc = np.clip(proc, 0, max(n - 1, 0))
            u = _union_per_proc(proc, ops["start_s"], ops["end_s"], n)
        # the trace's union covers the POSIX level, and the MPI-IO calls when DXT_MPIIO intervals are in it
        base = summed + lay.mpiio_extra if lay.mpiio_traced else summed
        if all_rw:  # a DXT trace: reads and writes only; metadata seconds come from the counters
            lv = m.level
            own = lv["proc"] >= 0
            meta = group_sum(lv["proc"][own], lv["meta_s"][own], n)[:n] if len(lv) else np.zeros(n)
            traced = np.minimum(base, u + meta) if len(lv) else u
        else:  # every call traced (embedded collector): the union is the I/O time
            traced = np.minimum(base, u) if base.any() else u
        wall = traced + np.maximum(merged - base, 0.0)  # layers the trace does not hold, from their counters
        basis = "ops"
    pr = profile.processes
    if len(pr):
        life = np.full(n, np.inf)
        ok = (pr["end_s"] > pr["start_s"]) & (pr["proc"] < n)
        life[pr["proc"][ok]] = (pr["end_s"] - pr["start_s"])[ok]
        wall = np.minimum(wall, life)
    if runtime is not None:
        wall = np.minimum(wall, runtime)
    wall = np.maximum(wall, 0.0)
    scale = np.divide(wall, summed, out=np.ones(n), where=summed > 0)
    io_wall = float(wall.max()) if n else 0.0
    for a in (wall, scale, merged, lay.mpiio_s, lay.mpiio_extra):
        a.flags.writeable = False
    return TimeModel(runtime_s=runtime, proc_io_s=wall, proc_scale=np.minimum(scale, 1.0), io_wall_s=io_wall,
                     io_process_s=io_process, basis=basis, proc_layer_s=merged, proc_mpiio_s=lay.mpiio_s,
                     proc_mpiio_wait_s=lay.mpiio_extra)


@dataclass(frozen=True)
class LayerTimes:
    """Per-process seconds (process-seconds: a shared record spread as ``spread_rows`` does) of the layers above
    the POSIX level, and how they combine with it.

    * ``mpiio_s``: MPI-IO read + write + metadata seconds (independent and collective calls; a collective call
      includes the time a rank waits for the aggregators); ``mpiio_extra``: the part of it that is not the same
      process's POSIX-level time on the MPI-IO files (MPI-IO time includes the POSIX time beneath it):
      ``max(0, MPI-IO - POSIX on those files)``.  For a rank that only waits in a collective call while one
      aggregator writes, that is all of its MPI-IO time.
    * ``hdf5_s``, ``pnetcdf_s``: H5F + H5D and PNETCDF_FILE + PNETCDF_VAR seconds; they sit above MPI-IO or POSIX,
      so a process's time is at least each of them (max, not a sum).
    * ``object_s``: DFS seconds (DAOS where no DFS sits over it): a stack beside POSIX, added.
    """

    mpiio_s: np.ndarray
    mpiio_extra: np.ndarray
    hdf5_s: np.ndarray
    pnetcdf_s: np.ndarray
    object_s: np.ndarray
    mpiio_traced: bool  # DXT_MPIIO intervals are in the ops table (complete)

    def merged(self, posix_s: np.ndarray) -> np.ndarray:
        stacked = posix_s + self.mpiio_extra
        return np.maximum(np.maximum(stacked, self.hdf5_s), self.pnetcdf_s) + self.object_s


# (module, counter prefix, time counters) of the layers above the POSIX level
_UPPER = {
    "MPI-IO": ("MPIIO", ("MPIIO_F_READ_TIME", "MPIIO_F_WRITE_TIME", "MPIIO_F_META_TIME")),
    "H5F": ("H5F", ("H5F_F_META_TIME",)),
    "H5D": ("H5D", ("H5D_F_READ_TIME", "H5D_F_WRITE_TIME", "H5D_F_META_TIME")),
    "PNETCDF_FILE": ("PNETCDF_FILE", ("PNETCDF_FILE_F_META_TIME", "PNETCDF_FILE_F_WAIT_TIME")),
    "PNETCDF_VAR": ("PNETCDF_VAR", ("PNETCDF_VAR_F_READ_TIME", "PNETCDF_VAR_F_WRITE_TIME", "PNETCDF_VAR_F_META_TIME")),
    "DFS": ("DFS", ("DFS_F_READ_TIME", "DFS_F_WRITE_TIME", "DFS_F_META_TIME")),
    "DAOS": ("DAOS", ("DAOS_F_READ_TIME", "DAOS_F_WRITE_TIME", "DAOS_F_META_TIME")),
}


def _pos(t, name: str) -> np.ndarray:
    if name not in t:
        return np.zeros(len(t))
    a = np.asarray(t[name], "f8")
    return np.where(a > 0, a, 0.0)


def module_row_times(profile: JobProfile, mod: str) -> np.ndarray:
    """Read + write + metadata seconds of each row of an upper-layer module (zeros for a module without times)."""
    t = profile.module(mod)
    if t is None:
        return np.zeros(0)
    out = np.zeros(len(t))
    for c in _UPPER[mod][1]:
        out += _pos(t, c)
    return out


def spread_rows(profile: JobProfile, proc: np.ndarray, log: np.ndarray, slow_rank: np.ndarray, slow_s: np.ndarray,
                secs: np.ndarray, n: int) -> np.ndarray:
    """Per-process seconds of counter rows: a row of one process goes to it; a shared row (proc -1) gives its
    slowest rank (``slow_rank``, ``slow_s``) its own seconds and the other processes of its log an even part of
    the rest (the rule ``metrics`` applies to POSIX-level records); evenly over the log when the slowest rank
    is not known."""
    out = np.zeros(n)
    if not len(secs) or n <= 0:
        return out
    secs = np.asarray(secs, "f8")
    own = proc >= 0
    if own.any():
        out += np.bincount(np.clip(proc[own], 0, n - 1), weights=secs[own], minlength=n)[:n]
    idx = np.flatnonzero(~own & (secs > 0))
    if not len(idx):
        return out
    proc_log, size, first = _proc_log(profile, n)
    if not len(profile.processes):  # no process table: one log of n processes
        size, first = np.array([n]), np.array([0])
    lg = np.clip(np.asarray(log)[idx], 0, len(size) - 1)
    k = size[lg]
    sl = np.asarray(slow_rank)[idx]
    frac = np.clip(np.divide(np.asarray(slow_s, "f8")[idx], secs[idx], out=np.zeros(len(idx)), where=secs[idx] > 0), 0, 1)
    valid = (k > 1) & (sl >= 0) & (sl < k)
    frac = np.where(valid, frac, 1.0 / np.maximum(k, 1))
    rest = np.where(k > 1, secs[idx] * (1 - frac) / np.maximum(k - 1, 1), 0.0)
    out += np.bincount(lg, weights=rest, minlength=len(size))[proc_log]
    target = np.where(valid, first[lg] + sl, first[lg])
    np.add.at(out, np.clip(target, 0, n - 1), secs[idx] * frac - rest)
    return np.maximum(out, 0.0)


def _module_proc_s(profile: JobProfile, mod: str, n: int, rows: np.ndarray | None = None) -> np.ndarray:
    t = profile.module(mod)
    if t is None:
        return np.zeros(n)
    pre = _UPPER[mod][0]
    secs = module_row_times(profile, mod)
    if rows is not None:
        secs = np.where(rows, secs, 0.0)
    log = t["log"] if "log" in t else np.zeros(len(t), "i8")
    slow = np.asarray(t[f"{pre}_SLOWEST_RANK"], "i8") if f"{pre}_SLOWEST_RANK" in t else np.full(len(t), -1, "i8")
    return spread_rows(profile, t["proc"], log, slow, _pos(t, f"{pre}_F_SLOWEST_RANK_TIME"), secs, n)


def layer_times(profile: JobProfile, n: int) -> LayerTimes:
    z = np.zeros(n)
    mp = profile.module("MPI-IO")
    mpiio, extra = z, z
    if mp is not None:
        mpiio = _module_proc_s(profile, "MPI-IO", n)
        if mpiio.any():
            m = metrics_of(profile)
            lv = m.level
            on = np.isin(lv["file_id"], mp["file_id"]) if len(lv) else np.zeros(0, bool)
            posix_on = z
            if on.any():
                t_row = np.where(on, lv["read_s"] + lv["write_s"] + lv["meta_s"], 0.0)
                posix_on = spread_rows(profile, lv["proc"], lv["log"], lv["slow_rank"], lv["slow_s"], t_row, n)
            extra = np.maximum(mpiio - posix_on, 0.0)
    h5 = _module_proc_s(profile, "H5F", n) + _module_proc_s(profile, "H5D", n)
    pnc = _module_proc_s(profile, "PNETCDF_FILE", n) + _module_proc_s(profile, "PNETCDF_VAR", n)
    obj = _module_proc_s(profile, "DFS", n)
    if not obj.any():
        obj = _module_proc_s(profile, "DAOS", n)
    partial = set(profile.job.partial_modules)
    traced = "DXT_MPIIO" in set(profile.job.modules) and "DXT_MPIIO" not in partial and bool(len(profile.ops))
    return LayerTimes(mpiio_s=mpiio, mpiio_extra=extra, hdf5_s=h5, pnetcdf_s=pnc, object_s=obj, mpiio_traced=traced)


def time_model_of(profile: JobProfile) -> TimeModel:
    """The profile's time model, computed once (kept in the profile's memo with its Metrics)."""
    d = memo(profile)
    tm = d.get("timemodel")
    if tm is None:
        tm = d["timemodel"] = _compute(profile)
    return tm


def _proc_log(profile: JobProfile, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    pr = profile.processes
    if not len(pr):
        return np.zeros(n, "i8"), np.zeros(1, "i8"), np.zeros(1, "i8")
    nlog = int(pr["log"].max()) + 1
    proc_log = np.zeros(n, "i8")
    keep = pr["proc"] < n
    proc_log[pr["proc"][keep]] = pr["log"][keep]
    size = np.bincount(pr["log"], minlength=nlog)
    first = np.full(nlog, np.iinfo("i8").max, "i8")
    np.minimum.at(first, pr["log"], pr["proc"])
    return proc_log, size, first


def meta_span_rows(profile: JobProfile) -> np.ndarray:
    """Per POSIX-level row (``metrics.level``): the wall seconds its metadata can take in any one process, from
    the record's open timestamps: OPEN_END - OPEN_START.  A shared record holds the first start and the last end
    over every rank, so each rank's opens lie inside that span however many ranks opened the file (65,536 opens
    in 0.66 s cost 0.66 s, not the ranks' summed seconds); inf where a record has no open timestamps."""
    d = memo(profile)
    if "meta_span_rows" not in d:
        parts = []
        for mod in ("POSIX", "STDIO"):  # level_rows' order
            t = profile.module(mod)
            if t is None:
                continue
            o0 = pcol(profile, mod, f"{mod}_F_OPEN_START_TIMESTAMP", "f8")
            o1 = pcol(profile, mod, f"{mod}_F_OPEN_END_TIMESTAMP", "f8")
            parts.append(np.where(o1 > 0, np.maximum(o1 - o0, 0.0), np.inf))
        a = np.concatenate(parts) if parts else np.zeros(0)
        a.flags.writeable = False
        d["meta_span_rows"] = a
    return d["meta_span_rows"]


def proc_cost_of_rows(profile: JobProfile, row_cost: np.ndarray, shared_cap: np.ndarray | None = None) -> np.ndarray:
    """Spread process-seconds given per POSIX-level row (``metrics.level``) over processes, in wall seconds.

    A row of one process goes to that process; a shared row (rank -1) gives its slowest rank the share of time
    that rank spent and every other rank of its log an even part of the rest.  Each process's amount is then
    scaled by its wall-to-summed I/O ratio (calls of threads that overlap in time count once).  ``shared_cap``
    (per row) bounds what one process gets from a shared row (e.g. ``meta_span_rows``: the wall span of the
    record's opens).
    """
    m = metrics_of(profile)
    tm = time_model_of(profile)
    n = m.nprocs
    lv = m.level
    out = np.zeros(n)
    if not len(lv):
        return out
    row_cost = np.asarray(row_cost, "f8")
    own = lv["proc"] >= 0
    if own.any():
        out += np.bincount(np.clip(lv["proc"][own], 0, n - 1), weights=row_cost[own], minlength=n)[:n]
    idx = np.flatnonzero(~own & (row_cost > 0))
    if len(idx):
        t_row = lv["read_s"] + lv["write_s"] + lv["meta_s"]
        proc_log, size, first = _proc_log(profile, n)
        log = np.clip(lv["log"][idx], 0, len(size) - 1)
        k = size[log]
        slow = lv["slow_rank"][idx]
        frac = np.clip(np.divide(lv["slow_s"][idx], t_row[idx], out=np.zeros(len(idx)), where=t_row[idx] > 0), 0, 1)
        valid = (k > 1) & (slow >= 0) & (slow < k)
        frac = np.where(valid, frac, 1.0 / np.maximum(k, 1))
        rest = np.where(k > 1, row_cost[idx] * (1 - frac) / np.maximum(k - 1, 1), 0.0)
        mine = row_cost[idx] * frac
        if shared_cap is not None:
            cap = np.asarray(shared_cap, "f8")[idx]
            rest, mine = np.minimum(rest, cap), np.minimum(mine, cap)
        # every process of the log gets the even part; the slowest rank gets its own share instead
        out += np.bincount(log, weights=rest, minlength=len(size))[proc_log]
        target = np.where(valid, first[log] + slow, first[log])
        np.add.at(out, np.clip(target, 0, n - 1), mine - rest)
    return np.maximum(out, 0.0) * tm.proc_scale


def proc_cost_of_files(profile: JobProfile, fids: np.ndarray, cost_f: np.ndarray,
                       shared_cap: np.ndarray | None = None) -> np.ndarray:
    """Per-file process-seconds (``cost_f`` aligned with the file ids ``fids``) spread over processes in wall
    seconds: each file's cost goes to its POSIX-level rows in proportion to their I/O time (evenly when the file
    took no time), then as ``proc_cost_of_rows``.  Cost on files without POSIX-level rows (an MPI-IO file whose
    POSIX records are missing) is spread evenly over all processes."""
    m = metrics_of(profile)
    n = m.nprocs
    lv = m.level
    cost_f = np.asarray(cost_f, "f8")
    fids = np.asarray(fids)
    if not len(cost_f):
        return np.zeros(n)
    lf = m.file_ids
    pos = np.searchsorted(lf, fids) if len(lf) else np.zeros(len(fids), "i8")
    known = (pos < len(lf)) & (lf[np.minimum(pos, max(len(lf) - 1, 0))] == fids) if len(lf) else np.zeros(len(fids), bool)
    per_file = np.zeros(len(lf))
    np.add.at(per_file, pos[known], cost_f[known])
    out = np.zeros(n)
    if len(lv):
        t_row = lv["read_s"] + lv["write_s"] + lv["meta_s"]
        fidx = m.file_idx
        ft = np.bincount(fidx, weights=t_row, minlength=len(lf))
        nrow = np.bincount(fidx, minlength=len(lf)).astype("f8")
        w = np.where(ft[fidx] > 0, np.divide(t_row, ft[fidx], out=np.zeros(len(lv)), where=ft[fidx] > 0),
                     1.0 / np.maximum(nrow[fidx], 1))
        out = proc_cost_of_rows(profile, per_file[fidx] * w, shared_cap)
    lost = float(cost_f[~known].sum())
    if lost > 0:
        out = out + lost / max(n, 1) * time_model_of(profile).proc_scale
    return out


def _wall(tm: TimeModel, per_proc: np.ndarray) -> float:
    w = float(per_proc.max()) if len(per_proc) else 0.0
    return tm.cap(min(w, tm.io_wall_s) if tm.io_wall_s > 0 else w)


def wall_cost_of_files(profile: JobProfile, fids: np.ndarray, cost_f: np.ndarray,
                       shared_cap: np.ndarray | None = None) -> float:
    """Job wall seconds that per-file process-seconds add: the busiest process's part of them (a process's part
    of a shared record at most ``shared_cap`` of that row, when given)."""
    return _wall(time_model_of(profile), proc_cost_of_files(profile, fids, cost_f, shared_cap))


def wall_cost_of_rows(profile: JobProfile, row_cost: np.ndarray) -> float:
    """Job wall seconds that per-row (``metrics.level``) process-seconds add."""
    return _wall(time_model_of(profile), proc_cost_of_rows(profile, row_cost))


def wall_cost_of_procs(profile: JobProfile, cost_p: np.ndarray) -> float:
    """Job wall seconds that per-process process-seconds ``cost_p`` add (scaled like the I/O time)."""
    tm = time_model_of(profile)
    c = np.asarray(cost_p, "f8")[: len(tm.proc_scale)]
    return _wall(tm, c * tm.proc_scale[: len(c)])


def explained_union(tm: TimeModel, costs: Sequence[tuple[float | None, bool]]) -> dict[str, float]:
    """The part of the run the findings explain, overlaps counted once.

    Findings about I/O all cost part of the I/O on the critical path (``io_wall_s``: the busiest process's I/O,
    which every finding's cost is a part of, see ``_wall``): several of them can name the same seconds (small
    requests that are also a metadata storm on the same ranks), so together they explain no more than that I/O.
    Findings whose cost lies outside the I/O calls (``costs``: (job seconds, outside the I/O calls) pairs, the
    flag from the finding's spec, ``FindingSpec.outside_io``) add the time they name, and the total never exceeds
    the run time.  ``io_s``: the I/O findings' union (at most the critical-path I/O), ``other_s``: the
    non-I/O time named, ``sum_s``: the plain sum (what double counting would have said)."""
    io = [float(c) for c, out in costs if c is not None and c > 0 and not out]
    other = [float(c) for c, out in costs if c is not None and c > 0 and out]
    io_s = min(sum(io), max(tm.io_wall_s, max(io, default=0.0))) if io else 0.0
    other_s = tm.cap(sum(other)) if other else 0.0
    return {"io_s": io_s, "other_s": other_s, "total_s": tm.cap(io_s + other_s), "sum_s": sum(io) + sum(other)}


def time_summary(profile: JobProfile, costs_s: Sequence[tuple[float | None, bool]] | Sequence[float | None]) -> dict:
    """The report's ``time`` object: run time, I/O on the critical path, process-seconds of I/O, and how much of
    the run the findings explain: ``explained_s`` is the union of the findings' costs (``explained_union``: the
    I/O findings together at most the critical-path I/O, plus the non-I/O time findings name, at most the run
    time), with its two parts.  ``costs_s`` are (job seconds, outside the I/O calls) pairs (bare numbers count as
    I/O)."""
    tm = time_model_of(profile)
    pairs = [c if isinstance(c, tuple) else (c, False) for c in costs_s]
    u = explained_union(tm, pairs)
    r = lambda x: None if x is None else round(float(x), 6)  # noqa: E731
    return {"runtime_s": r(tm.runtime_s), "io_wall_s": r(tm.io_wall_s), "io_share": r(tm.io_share),
            "io_process_s": r(tm.io_process_s), "explained_s": r(u["total_s"]),
            "explained_share": r(tm.share(u["total_s"])), "explained_io_s": r(u["io_s"]),
            "explained_other_s": r(u["other_s"]), "basis": tm.basis}
