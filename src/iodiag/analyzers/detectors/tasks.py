"""straggler-task: Dask tasks far slower than the other tasks of their prefix.

Works on the ``tasks`` table (key, prefix, worker, pid, thread, phase,
start_s, end_s; one row per task phase).  A task's duration is its
``compute`` phase when the table has phases, else the whole row span.  Peers
are the tasks with the same prefix (same function), judged with median/MAD.
The cost is the straggler's excess over the median; its share is taken of the
task stream's makespan, since that is the wall time the graph waits.
"""

from __future__ import annotations

import numpy as np

from ...config import Config
from ...findings import Finding
from ...profile import JobProfile
from ..metrics import robust_z
from ._common import finding


def detect_straggler_task(profile: JobProfile, cfg: Config) -> list[Finding]:
    t, c = profile.tasks, cfg.stragglers
    if not len(t):
        return []
    phase = t["phase"].astype(str)
    rows = phase == "compute" if (phase == "compute").any() else np.ones(len(t), bool)
    keys, fi, kidx = np.unique(t["key"][rows].astype(str), return_index=True, return_inverse=True)
    dur = np.bincount(kidx, weights=(t["end_s"] - t["start_s"])[rows])
    first = np.flatnonzero(rows)[fi]  # one representative row per key
    prefix = t["prefix"][first].astype(str)
    makespan = float(t["end_s"].max() - t["start_s"].min())
    out = []
    for p in np.unique(prefix):
        sel = np.flatnonzero(prefix == p)
        if len(sel) < c.task_min_tasks:
            continue
        z, med, mad = robust_z(dur[sel])
        excess = dur[sel] - med
        slow = (z > c.mad_factor) & (excess >= max(c.task_min_excess_s, c.min_excess_share * med))
        if not slow.any():
            continue
        idx = sel[slow][np.argsort(-dur[sel][slow])]
        worst = int(idx[0])
        workers, wc = np.unique(t["worker"][first[idx]].astype(str), return_counts=True)
        ev = {"prefix": p, "tasks": int(len(sel)), "stragglers": int(len(idx)), "median_task_s": med,
              "mad_task_s": mad, "slowest_task_s": float(dur[worst]), "slowest_key": str(keys[worst]),
              "slowest_worker": str(t["worker"][first[worst]]), "workers_of_stragglers": int(len(workers)),
              "makespan_s": makespan}
        where = (f"all {len(idx)} on worker {workers[0]}: check that worker's host/disk/memory (spilling)"
                 if len(workers) == 1 and len(idx) > 1 else
                 "spread over workers, so the data is the likely cause: look for an oversized or remote chunk")
        out.append(finding(
            cfg, profile, "straggler-task", f"{len(idx)} '{p}' task(s) run far longer than their {len(sel)} peers "
            f"(slowest {dur[worst]:.2f} s vs median {med:.2f} s)", wall_s=float(dur[worst] - med),
            evidence=ev, processes=sorted({int(x) for x in t["pid"][first[idx]] if int(x) >= 0})[: cfg.report.top_processes],
            recommendation=f"task {keys[worst]} took {dur[worst]:.2f} s against a median of {med:.2f} s ({where}); "
            "split its input into smaller chunks so no single task dominates, and let work stealing rebalance"))
    return out
