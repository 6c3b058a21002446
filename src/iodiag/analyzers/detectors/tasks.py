"""straggler-task: Dask tasks far slower than the other tasks of their prefix.

Works on the ``tasks`` table (key, prefix, worker, pid, thread, phase,
start_s, end_s; one row per task phase).  A task's duration is its
``compute`` phase when the table has phases, else the whole row span.  Peers
are the tasks with the same prefix (same function), judged with median/MAD.
The cost is the straggler's excess over the median; its share is taken of the
task stream's makespan, since that is the wall time the graph waits.

task-overhead: many short tasks, whose worker threads wait between tasks for a large share of their time
(analyzers/tasktime.py); recommend/rules.py turns the arrays' own metadata into a chunk shape of ~100 MB.
"""

from __future__ import annotations

import numpy as np

from ..metrics import median
from ..nputil import unique

from ...config import Config
from ...findings import Finding, FindingSpec
from ...profile import JobProfile
from ...units import fmt_pct
from ..tasktime import dask_time_of, task_stragglers
from ._common import finding


def _cause(dt, key: str, peers, dur: float, ev: dict) -> str | None:
    """The straggler's own numbers against its peers: I/O seconds and bytes joined to it (tasktime.py)."""
    if dt is None or dt.io_in_tasks_s + dt.io_outside_tasks_s <= 0:
        return None  # no operation of a worker was recorded: nothing to tell I/O from compute
    io = float(dt.task_io_s.get(key, 0.0))
    b = float(dt.task_bytes.get(key, 0.0))
    pio = np.array([dt.task_io_s.get(k, 0.0) for k in peers.tolist()])
    pb = np.array([dt.task_bytes.get(k, 0.0) for k in peers.tolist()])
    mio, mb = median(pio), median(pb)
    ev.update(slowest_task_io_s=io, slowest_task_bytes=b, peers_median_io_s=mio, peers_median_bytes=mb)
    if io >= 0.5 * dur:
        more = f", {b / mb:.1f}x the bytes of a typical peer" if mb > 0 and b > 1.5 * mb else ""
        return f"I/O-bound: {io:.2f} s of its {dur:.2f} s in I/O against {mio:.3f} s for a typical peer{more}"
    return f"not I/O-bound: {io:.3f} s of its {dur:.2f} s in I/O (peers {mio:.3f} s), so compute or waiting made it slow"


def detect_straggler_task(profile: JobProfile, cfg: Config) -> list[Finding]:
    t, c = profile.tasks, cfg.stragglers
    if not len(t):
        return []
    dt = dask_time_of(profile) if len(profile.ops) else None
    phase = t["phase"].astype(str)
    rows = phase == "compute" if (phase == "compute").any() else np.ones(len(t), bool)
    keys, fi, kidx = np.unique(t["key"][rows].astype(str), return_index=True, return_inverse=True)
    dur = np.bincount(kidx, weights=(t["end_s"] - t["start_s"])[rows])
    first = np.flatnonzero(rows)[fi]  # one representative row per key
    prefix = t["prefix"][first].astype(str)
    makespan = float(t["end_s"].max() - t["start_s"].min())
    out = []
    for p in unique(prefix):
        sel = np.flatnonzero(prefix == p)
        if len(sel) < c.task_min_tasks:
            continue
        z, med, slow = task_stragglers(dur[sel], c)
        mad = median(np.abs(dur[sel] - med))
        if not slow.any():
            continue
        idx = sel[slow][np.argsort(-dur[sel][slow])]
        worst = int(idx[0])
        workers, wc = np.unique(t["worker"][first[idx]].astype(str), return_counts=True)
        ev = {"prefix": p, "tasks": int(len(sel)), "stragglers": int(len(idx)), "median_task_s": med,
              "mad_task_s": mad, "slowest_task_s": float(dur[worst]), "slowest_key": str(keys[worst]),
              "slowest_worker": str(t["worker"][first[worst]]), "workers_of_stragglers": int(len(workers)),
              "makespan_s": makespan}
        cause = _cause(dt, keys[worst], keys[sel], dur[worst], ev)
        out.append(finding(
            cfg, profile, STRAGGLER_TASK.id, f"{len(idx)} '{p}' task(s) run far longer than their {len(sel)} peers "
            f"(slowest {dur[worst]:.2f} s vs median {med:.2f} s)", wall_s=float(dur[worst] - med),
            evidence=ev, processes=sorted({int(x) for x in t["pid"][first[idx]] if int(x) >= 0})[: cfg.report.top_processes],
            facts={"cause": cause, "one_worker": workers[0] if len(workers) == 1 and len(idx) > 1 else None}))
    return out


def detect_task_overhead(profile: JobProfile, cfg: Config) -> list[Finding]:
    """Many short tasks: the worker threads spend more time between tasks than in them."""
    c = cfg.tasks
    dt = dask_time_of(profile) if len(profile.tasks) else None
    if dt is None or dt.tasks < c.min_tasks or dt.task_median_s >= c.short_task_s:
        return []
    between = dt.between_share_of_span  # from the first to the last task: start-up does not grow with tasks
    if between < c.between_share:
        return []
    wall = dt.split_s["between_tasks"] / max(dt.threads, 1)  # what an average thread waited between tasks
    ev = {"tasks": dt.tasks, "task_median_s": dt.task_median_s, "worker_threads": dt.threads,
          "between_tasks_share_of_task_span": between, "between_tasks_share_of_run": dt.share("between_tasks"), "task_compute_share": dt.share("task_compute"),
          "task_io_share": dt.share("task_io"), "between_tasks_thread_s": dt.split_s["between_tasks"]}
    arrays = [a for a in profile.job.arrays if a["nchunks"] > 1]
    if arrays:  # the array the tasks cut: recommend/ plans its chunks from this metadata
        a = arrays[0]
        ev.update(array=a["path"], array_shape=a["shape"], chunks_now=a["chunks"], chunk_bytes_now=a["chunk_bytes"])
    return [finding(cfg, profile, TASK_OVERHEAD.id, f"{dt.tasks:,} short tasks (median {dt.task_median_s * 1000:.1f} ms):"
                    f" worker threads wait between tasks {fmt_pct(between)} of the time tasks run", wall_s=wall,
                    evidence=ev, facts={"array": arrays[0] if arrays else None})]


STRAGGLER_TASK = FindingSpec(
    id="straggler-task", seq=10, detect=detect_straggler_task,
    outside_io=True,
    fires="Dask `tasks` table: per prefix (≥ `task_min_tasks`), compute-phase duration robust z > `mad_factor` and "
          "excess ≥ `task_min_excess_s`; with a trace, says whether the slowest task was I/O-bound (I/O seconds and "
          "bytes joined to it vs its peers' medians) or not; else whether stragglers share one worker",
    cost="excess over the median",
    config_keys=("stragglers.task_min_tasks", "stragglers.mad_factor", "stragglers.task_min_excess_s"),
    admin_action="Help these users rebalance Dask tasks (chunk sizes, partitioning) so one task does not hold the "
                 "job.",
)
TASK_OVERHEAD = FindingSpec(
    id="task-overhead", seq=18, detect=detect_task_overhead,
    outside_io=True,
    fires="Dask job with ≥ `min_tasks` tasks, median task < `short_task_s`, worker threads idle between tasks ≥ "
          "`between_share` of the span from their first to their last task (start-up and shutdown left out; "
          "`analyzers/tasktime.py`); advice: chunks of ~`target_chunk_bytes` (at least two per worker thread) "
          "computed from the Zarr arrays' own metadata (`.zarray`/`zarr.json`) when the stores are readable, e.g. "
          "`chunks={'time': 73, 'plev': 10}`",
    cost="the time an average worker thread waited between tasks",
    config_keys=("tasks.min_tasks", "tasks.short_task_s", "tasks.between_share", "tasks.target_chunk_bytes"),
    admin_action="Recommend larger Dask chunks (around 100 MB) so task overhead does not dominate.",
)
SPECS = (STRAGGLER_TASK, TASK_OVERHEAD)
