"""weak-scaling-loss: compare runs of one workload at several process counts.

Not a per-profile detector (it needs a set of profiles), so it is not in
``DETECTORS``; sweeps call ``compare_scaling(profiles)``.  Under weak scaling
each process keeps the same work, so its I/O bandwidth (bytes per process /
mean per-process I/O seconds) should stay flat.  Efficiency of a run is its
per-process bandwidth over that of the smallest run; below
``stragglers.scaling_efficiency`` it is a loss.  Runs whose bytes per process
differ by more than 25 % are still compared by bandwidth, and the evidence
says the sweep was not strictly weak.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ...config import Config
from ...findings import Finding, FindingSpec
from ...profile import JobProfile
from ...units import fmt_pct, fmt_seconds
from ..metrics import metrics_of
from ..tasktime import dask_time_of
from ..weakloss import WORDS, weak_loss, workers_of
from ._common import finding


def compare_scaling(profiles: Sequence[JobProfile], cfg: Config | None = None) -> list[Finding]:
    cfg = cfg or Config()
    if profiles and all(len(p.tasks) for p in profiles):
        return _dask_loss(profiles, cfg)
    rows = []
    for p in profiles:
        m = metrics_of(p)
        if m.total_io_s <= 0:
            continue
        n = _workers(p) or m.nprocs  # a Dask job scales by its workers, not by its client and nannies
        per_b = float(m.proc_bytes.sum()) / n
        per_t = m.total_io_s / n
        rows.append((n, per_b, per_t, per_b / per_t, p.job.job_id, p))
    if len({r[0] for r in rows}) < 2:
        return []
    # repetitions of one scale: the run of median bandwidth stands for it (run-to-run noise is not scaling)
    by_n: dict[int, list] = {}
    for r in rows:
        by_n.setdefault(r[0], []).append(r)
    rows = [sorted(rs, key=lambda r: r[3])[(len(rs) - 1) // 2] for rs in by_n.values()]
    rows.sort(key=lambda r: (r[0], -r[3]))
    base = rows[0]
    eff = np.array([r[3] / base[3] for r in rows])
    worst = int(np.argmin(eff))
    if eff[worst] >= cfg.stragglers.scaling_efficiency:
        return []
    w = rows[worst]
    weak = all(abs(r[1] / base[1] - 1) <= 0.25 for r in rows)
    ev = {"runs": len(rows), "processes": [r[0] for r in rows], "bytes_per_process": [r[1] for r in rows],
          "io_s_per_process": [r[2] for r in rows], "efficiency": [float(e) for e in eff],
          "strictly_weak": weak, "jobs": [r[4] for r in rows]}
    # what the worst run lost: its per-process I/O time beyond what the base bandwidth would need
    lost = w[2] - w[1] / base[3]
    why = _grown_component(base[5], w[5], ev)
    # each process of the worst run waits ``lost`` seconds more than the base bandwidth needs: wall seconds of it
    return [finding(cfg, w[5], WEAK_SCALING_LOSS.id, f"per-process I/O bandwidth falls to {fmt_pct(eff[worst])} from "
                    f"{base[0]} to {w[0]} " + ("workers" if len(w[5].tasks) else "processes"), wall_s=lost, process_s=lost * w[0], evidence=ev,
                    facts={"why": why, "unit": "workers" if len(w[5].tasks) else "processes",
                           "worst_bandwidth": w[3], "base_bandwidth": base[3]})]


_workers = workers_of


def _dask_loss(profiles: Sequence[JobProfile], cfg: Config) -> list[Finding]:
    """weak-scaling-loss of Dask runs: the scale of lowest wall-time efficiency, its loss by component."""
    loss = weak_loss(profiles)
    if not loss:
        return []
    w = min(loss, key=lambda x: x["efficiency"] or 1.0)
    if (w["efficiency"] or 1.0) >= cfg.stragglers.scaling_efficiency:
        return []
    by_job = {p.job.job_id: p for p in profiles}
    worst, base = by_job[w["median_job"]], by_job[w["base_median_job"]]  # the runs of median wall time
    big = w["largest"]
    comp = w["components_s"]
    ev = {"workers": [w["p0"], *[x["p"] for x in loss]], "efficiency": [1.0, *[x["efficiency"] for x in loss]],
          "run_s": [w["T0_s"], *[x["T_s"] for x in loss]], "loss_s": w["loss_s"], "loss_band_s": w["loss_band_s"],
          "components_s": comp, "bands_s": w["bands_s"], "unexplained_s": w["unexplained_s"], "largest": big,
          "largest_s": comp[big], "io_traced": w["io_traced"], "jobs": w["jobs"], "base_jobs": w["base_jobs"],
          "basis": w["basis"]}
    why = _grown_component(base, worst, ev) if big in ("io", "compute") else ""
    return [finding(cfg, worst, WEAK_SCALING_LOSS.id,
                    f"weak scaling {fmt_pct(w['efficiency'])}: the run takes {fmt_seconds(w['T_s'])} at {w['p']} workers against "
                    f"{fmt_seconds(w['T0_s'])} at {w['p0']}; largest part of the +{fmt_seconds(w['loss_s'])}: {WORDS[big]} "
                    f"(+{fmt_seconds(comp[big])})", wall_s=max(w["loss_s"], 0.0), evidence=ev,
                    facts={"why": why, "largest": big, "io_traced": w["io_traced"], "p": w["p"], "p0": w["p0"]})]


def _grown_component(base: JobProfile, worst: JobProfile, ev: dict) -> str:
    """What grew from the base run to the worst one, for Dask runs (tasks joined to their I/O): the task prefix
    whose median duration grew most, and whether its I/O seconds per operation grew (contention on the storage)
    while its operations per task stayed equal, or its compute did (not I/O)."""
    a, b = dask_time_of(base), dask_time_of(worst)
    if a is None or b is None:
        return ""
    pa = {p["prefix"]: p for p in a.prefixes if p["tasks"] >= 2}
    pb = {p["prefix"]: p for p in b.prefixes if p["tasks"] >= 2}
    common = [k for k in pb if k in pa and pa[k]["median_s"] > 0]
    if not common:
        return ""
    k = max(common, key=lambda x: pb[x]["median_s"] / pa[x]["median_s"])
    x, y = pa[k], pb[k]
    slow = y["median_s"] / x["median_s"]
    per_op = lambda p: p["io_s"] / p["ops"] if p["ops"] else 0.0  # noqa: E731
    ops_task = lambda p: p["ops"] / p["tasks"]  # noqa: E731
    io_x, io_y = per_op(x), per_op(y)
    ev.update(grown_prefix=k, grown_prefix_slowdown=slow, io_s_per_op_base=io_x, io_s_per_op_worst=io_y,
              ops_per_task_base=ops_task(x), ops_per_task_worst=ops_task(y))
    text = f"'{k}' tasks are {slow:.1f}x slower at {_workers(worst)} workers than at {_workers(base)}; "
    if not x["ops"] and not y["ops"]:
        return text + ("no operation was joined to them (no DXT trace): re-run with --dxt or the embedded "
                       "collector to tell storage contention from compute; ")
    if io_x > 0 and io_y / io_x >= 1.5 and ops_task(y) <= 1.25 * max(ops_task(x), 1e-9):
        return text + (f"time per I/O operation x{io_y / io_x:.1f} while operations per task stay equal: contention "
                       "on the storage, not Dask overhead; ")
    if ops_task(x) > 0 and ops_task(y) / ops_task(x) >= 1.5:
        return text + f"each task issues {ops_task(y) / ops_task(x):.1f}x the operations: the work per task grew; "
    return text + "their I/O per operation did not grow: compute or scheduling, not the storage; "


WEAK_SCALING_LOSS = FindingSpec(
    id="weak-scaling-loss", seq=15, detect=None, runs_over="compare_scaling(profiles)",
    outside_io=True,
    fires="per-process bandwidth vs the smallest run < `scaling_efficiency`; Dask runs (a task stream in every "
          "job): wall-time weak efficiency T(p0)/T(p) < `scaling_efficiency`, the loss split into components "
          "(`analyzers/weakloss.py`), the largest named with what to change",
    cost="lost process-seconds of the worst run; Dask: the loss T(p) − T(p0) of the runs of median wall time",
    config_keys=("stragglers.scaling_efficiency",),
    admin_action="Help these users check how their I/O scales with ranks (shared-file striping, aggregators).",
)
SPECS = (WEAK_SCALING_LOSS,)
