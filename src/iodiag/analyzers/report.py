"""The report model (schema ``iodiag.report/1``): one dict per job, built once from the analyzers' results.

``build_report`` assembles the job, volumes, time split, modules, top files, process spread, findings (with
their advice), recommendations and errors from the profile's summary (``summary.py``), its time model
(``timemodel.py``) and Dask time split (``tasktime.py``).  It computes no number of its own; reports/ formats the
dict (``reports/json_report.render_json``, ``reports/terminal.py``; the HTML report takes its findings and
recommendations from it).
"""

from __future__ import annotations

import math
from datetime import datetime, timezone
from typing import Any, Sequence

from ..findings import Finding
from ..profile import JobProfile
from .summary import Summary, as_dict, summarize
from .tasktime import dask_time_of
from .timemodel import time_summary

SCHEMA = "iodiag.report/1"


def iso(ts: float | None) -> str | None:
    if ts is None or not math.isfinite(ts) or ts <= 0:
        return None
    return datetime.fromtimestamp(ts, tz=timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


def program_name(exe: str, args: str) -> str:
    """What the user ran: for a Python interpreter the script or ``-m module`` it ran, else the executable."""
    import os

    exe = (exe or "").split(" + ")[0]  # several programs: the first one's
    base = os.path.basename(exe)
    words = (args or "").split()
    if base.startswith(("python", "pypy")) and words:
        i = 0
        while i < len(words) and words[i].startswith("-") and words[i] not in ("-m", "-c", "-", "--"):
            i += 2 if words[i] in ("-W", "-X", "--check-hash-based-pycs") else 1  # python -W ignore script.py
        words = words[i:] or words[-1:]
        if words[0] == "-m" and len(words) > 1:
            return f"python -m {words[1]}"
        if words[0] == "-c":
            return "python -c …"
        return words[0]
    return exe or "?"


def job_dict(profile: JobProfile) -> dict[str, Any]:
    j = profile.job
    out = {
        "id": j.job_id,
        "exe": j.exe,
        "program": program_name(j.exe, j.args),
        "args": j.args,
        "user": j.user,
        "uid": j.uid,
        "nprocs": j.nprocs,
        "start": iso(j.start_s),
        "end": iso(j.end_s),
        "start_epoch": j.start_s,
        "end_epoch": j.end_s,
        "runtime_s": None if j.runtime_s is None else round(j.runtime_s, 6),
        "runtime_derived": j.runtime_derived,
        "collector": j.collector,
        "collector_version": j.collector_version,
        "darshan_version": j.darshan_version,
        "log_format": j.log_format,
        "modules": list(j.modules),
        "partial_modules": list(j.partial_modules),
        "programs": [{"exe": p.exe, "args": p.args, "nprocs": p.nprocs, "logs": len(p.logs)} for p in j.programs],
        "logs": list(j.logs),
        "mounts": [{"path": m, "fs_type": t} for m, t in j.mounts],
        "blind_spots": list(j.blind_spots),
        "processes": processes_list(profile),
    }
    if j.metadata.get("iodiag_job"):  # recorded by `iodiag run`: how the workload ended (a Darshan log keeps none)
        out.update(exit_code=j.exit_status, exit_signal=j.exit_signal,
                   partial=bool(j.partial_reasons), partial_reasons=list(j.partial_reasons))
    return out


def processes_list(profile: JobProfile, limit: int = 64) -> list[dict[str, Any]]:
    """The job's processes by index, pid and role (the first ``limit``; roles from ``iodiag run``'s record, or
    rank of an MPI log)."""
    pr = profile.processes
    if not len(pr):
        return []
    n = min(len(pr), limit)
    roles = pr["role"][:n].tolist() if "role" in pr else ["rank" if profile.job.nprocs > 1 else "process"] * n
    return [{"proc": int(pr["proc"][i]), "pid": int(pr["pid"][i]), "rank": int(pr["rank"][i]), "role": str(roles[i])}
            for i in range(n)]


def build_report(profile: JobProfile, findings: Sequence[Finding], *, summary: Summary | None = None,
                 recommendations: Sequence[Any] | None = None) -> dict[str, Any]:
    """The report dict; ``recommendations`` (recommend.Recommendation, best first) go under the additive key
    ``recommendations`` when given."""
    s = summary or summarize(profile)
    out = {
        "schema": SCHEMA,
        "job": job_dict(profile),
        "volumes": s.volumes,
        "io_time_s": round(s.io_time_s, 6),
        "time": _time(profile, findings),
        "modules": [as_dict(m) for m in s.modules],
        "top_files": [as_dict(f) for f in s.top_files],
        "process_spread": as_dict(s.spread) if s.spread else None,
        "findings": [f.to_dict() for f in findings],
        "errors": [i.to_dict() for i in profile.issues_seen],
    }
    if recommendations is not None:
        out["recommendations"] = [r.to_dict() for r in recommendations]
    return out


def _time(profile: JobProfile, findings: Sequence[Finding]) -> dict[str, Any]:
    from .detectors import SPEC_BY_ID

    t = time_summary(profile, [(f.est_cost_s, f.id in SPEC_BY_ID and SPEC_BY_ID[f.id].outside_io) for f in findings])
    dt = dask_time_of(profile) if len(profile.tasks) else None
    if dt is not None:
        t["dask"] = dt.to_dict()
    return t
