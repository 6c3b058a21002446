"""Weak scaling, the loss decomposed: where the extra seconds of a larger run went.

Under weak scaling every worker keeps the same work, so the run time T should stay flat.  For each scale p
against the smallest one p0 the loss is ``loss_s = T(p) - T(p0)``, T being the job's wall time as its own
time model has it (``DaskTime.run_s``: the ``iodiag run`` record's start to end).  Each job's time is split
(``tasktime``) into the seconds of an average worker thread, which add up to T:

============================  ====================================================================
component                     from the job's split (per worker thread)
============================  ====================================================================
``io``                        I/O inside tasks (``task_io``; 0 when the I/O was not traced: then it
                              is inside ``compute``, and ``io_traced`` is false)
``compute``                   the rest of the tasks' time (``task_compute``)
``task_overhead``             idle inside compute calls (``between_tasks``) less ``transfer_spill``
``transfer_spill``            data moving between workers or spilled to disk: the wall seconds of the
                              task stream's transfer and disk-read/write phases, at most the idle time
                              inside compute calls (a thread that waits for its input is idle)
``startup_shutdown``          ``cluster_startup`` + ``shutdown``
``graph_submit``              graph building and submission
``iodiag_capture``            iodiag's own capture (labelled, so it is never taken for the workload's)
============================  ====================================================================

For each scale the run of median wall time stands for it (the lower of the two middle runs for an even
count), so ``loss_s`` is the difference of the median run times and its parts are the differences of those
two runs' components: parts of one run add up to its run time, where medians taken component by component
would not (on 3 + 3 runs here they left 27 % of the loss unexplained by arithmetic alone).  Each component's
band is the range over every repetition (``[min(p) - max(p0), max(p) - min(p0)]``).  What the named
components leave of the loss (the script's ``other`` time) is ``unexplained_s``, reported, never dropped.
Pure: profiles in, dicts out.
"""

from __future__ import annotations

from typing import Sequence

from ..profile import JobProfile
from .tasktime import dask_time_of

COMPONENTS = ("io", "compute", "task_overhead", "transfer_spill", "startup_shutdown", "graph_submit",
              "iodiag_capture")
WORDS = {"io": "I/O in tasks", "compute": "compute in tasks", "task_overhead": "task overhead",
         "transfer_spill": "transfer/spill", "startup_shutdown": "start-up and shutdown",
         "graph_submit": "graph building/submission", "iodiag_capture": "iodiag's capture",
         "unexplained": "unexplained"}


def workers_of(p: JobProfile) -> int:
    """Worker processes of a Dask job (those the run recorded, whether or not they got tasks); 0 otherwise."""
    if not len(p.tasks):
        return 0
    pr = p.processes
    by_role = int((pr["role"] == "worker").sum()) if "role" in pr and len(pr) else 0
    dt = dask_time_of(p)
    return max(by_role, dt.workers if dt is not None else 0)


def components_of(p: JobProfile) -> dict[str, float] | None:
    """The job's run time in named seconds of an average worker thread (adds up to ``run_s`` with ``other``)."""
    dt = dask_time_of(p) if len(p.tasks) else None
    if dt is None:
        return None
    s = dt.per_thread_s()
    between = s["between_tasks"]
    moved = min(dt.transfer_s + dt.spill_s, between)
    return {"run_s": dt.run_s, "io": s["task_io"], "compute": s["task_compute"], "task_overhead": between - moved,
            "transfer_spill": moved, "startup_shutdown": s["cluster_startup"] + s["shutdown"],
            "graph_submit": s["graph_submit"], "iodiag_capture": s["iodiag_capture"], "other": s["other"],
            "io_traced": dt.io_traced}


def weak_loss(profiles: Sequence[JobProfile]) -> list[dict]:
    """Per scale above the smallest: the loss and its named components (see the module docstring); [] when
    fewer than two scales have a Dask time split."""
    by_p: dict[int, list[dict]] = {}
    for prof in profiles:
        n = workers_of(prof)
        c = components_of(prof)
        if n and c is not None:
            by_p.setdefault(n, []).append(c | {"job": prof.job.job_id})
    if len(by_p) < 2:
        return []
    ps = sorted(by_p)
    p0, base = ps[0], by_p[ps[0]]

    def mid(rows):  # the run of median wall time
        return sorted(rows, key=lambda r: r["run_s"])[(len(rows) - 1) // 2]

    m0 = mid(base)
    out = []
    for p in ps[1:]:
        rows = by_p[p]
        m = mid(rows)
        comp = {k: m[k] - m0[k] for k in COMPONENTS}
        band = {k: [min(r[k] for r in rows) - max(r[k] for r in base), max(r[k] for r in rows) - min(r[k] for r in base)]
                for k in (*COMPONENTS, "run_s")}
        t, t0 = m["run_s"], m0["run_s"]
        loss = t - t0
        named = sum(comp.values())
        unexplained = loss - named
        largest = max(COMPONENTS, key=lambda k: comp[k])
        out.append({
            "p": p, "p0": p0, "runs": len(rows), "base_runs": len(base), "T_s": t, "T0_s": t0,
            "loss_s": loss, "loss_band_s": band["run_s"], "efficiency": t0 / t if t > 0 else None,
            "components_s": comp, "bands_s": {k: band[k] for k in COMPONENTS},
            "unexplained_s": unexplained,
            # within 25 %: the named components account for the loss (|unexplained| <= 25 % of |loss|)
            "adds_up": abs(unexplained) <= 0.25 * abs(loss) if loss else abs(unexplained) < 1e-9,
            "largest": largest, "io_traced": all(r["io_traced"] for r in rows + base),
            "jobs": [r["job"] for r in rows], "base_jobs": [r["job"] for r in base],
            "median_job": m["job"], "base_median_job": m0["job"],
            "spread_s": {"T": [min(r["run_s"] for r in rows), max(r["run_s"] for r in rows)],
                         "T0": [min(r["run_s"] for r in base), max(r["run_s"] for r in base)]},
            "basis": "job wall time (iodiag run) split per worker thread; the run of median wall time at each scale",
        })
    return out
