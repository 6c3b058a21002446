"""The result of ``iodiag verify`` (schema ``iodiag.verify/1``): ``verify_result`` turns the interleaved runs
(jobs/verify.py) into medians, the speedup with its 95 % band and the run-to-run noise of each side, for the wall
time of the whole command, its CPU time, and the workload's own timed section when it reported one.
reports/verify.py only formats the dict.
"""

from __future__ import annotations

import shlex
from typing import Any, Sequence

from ..units import fmt_seconds
from .verify import PRELOAD_WHERE, applied_overrides, speedup_band

SCHEMA = "iodiag.verify/1"
METRICS = (("wall_s", "wall time of the command"), ("workload_s", "the workload's own timed section"),
           ("cpu_s", "CPU time of the process tree"))


def verify_result(runs, *, recommendation=None, sets: Sequence[str] = (), chosen: str | None = None) -> dict[str, Any]:
    """The result dict.  Settings applied inside the program (the preload) are listed where they fired; one that
    never fired is "not applied", and when nothing else changed no speedup is reported: the runs measured the
    same program twice."""
    plan = runs.plan
    fired, missing, preload_notes = applied_overrides(runs)
    rows = [r.to_dict() for r in runs.runs]
    side = {s: [r for r in runs.runs if r.side == s] for s in ("before", "after")}
    speed: dict[str, Any] = {}
    for key, label in METRICS:
        a = [getattr(r, key) for r in side["before"]]
        b = [getattr(r, key) for r in side["after"]]
        if all(x is not None and x > 0 for x in a + b) and len(a) >= 2:
            speed[key] = {"label": label, **speedup_band(a, b)}
    applied_nothing = bool(plan.overrides) and len(missing) == len(plan.overrides) and not plan.direct
    if applied_nothing:
        speed = {}
    notes = list(plan.notes)
    if chosen:
        notes.insert(0, chosen)
    notes += preload_notes
    if any(f["setting"] == "open_once" for f in fired):
        notes.append("open_once: the program's close() of a kept file only flushed it (netCDF4 sync, h5py flush) and "
                     "the real close came at exit, so the file holds what the program wrote; between its steps the "
                     "file stayed open (and HDF5-locked), as it would once the program opens it once")
    for m in missing:
        notes.append(f"not applied: {m} — the program never reached a call where it applies "
                     f"({_where(m)}); no speedup is reported for it")
    if runs.prepare_s:
        notes.insert(0, f"the changed data layout was prepared once before the timed runs ({fmt_seconds(sum(runs.prepare_s))}, "
                        "not included in the after runs' times); what it made is kept: it is the change to adopt")
    notes.append("runs without a collector (no Darshan, no Dask capture), before and after interleaved")
    if len(side["before"]) < 5:
        notes.append(f"only {len(side['before'])} runs per side: the band is wide; use --reps 5 or more")
    return {
        "schema": SCHEMA,
        "job": plan.job,
        "recommendation": recommendation.to_dict() if recommendation is not None else None,
        "settings_by_hand": list(sets),
        "before": {"command": shlex.join(plan.before)},
        "after": {"command": shlex.join(plan.after),
                  "env": {k: v for k, v in plan.env_after.items() if plan.env_before.get(k) != v}},
        "changed": list(plan.changed),
        "applied": [{k: v for k, v in f.items()} for f in fired],
        "not_applied": list(missing),
        "prepare": [{"command": c, "wall_s": round(t, 6)} for c, t in zip(plan.prepare, runs.prepare_s)],
        "reps": len(side["before"]),
        "order": "".join("A" if r.side == "before" else "B" for r in runs.runs),
        "runs": rows,
        "speedup": speed,
        "primary": "wall_s",
        "log": runs.log,
        "notes": notes,
    }


def _where(setting: str) -> str:
    return PRELOAD_WHERE.get(setting, setting)
