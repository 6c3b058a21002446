"""One job's rows, computed where its logs are read.

``job_rows`` runs inside the long-lived reader process (``readers/isolate.py:
ReaderServer``): it gets the LogResults of one job's logs, builds the profile
(``build_profile``), diagnoses it (``diagnose``) and returns the job's rows
(one job row, one row per program, its error rows and one state row per
log) as plain dicts.  Only those rows cross the pipe to the Dask worker,
never the decoded arrays.  It never raises for a job that cannot be built or
diagnosed: that job becomes ``ingest-failed`` errors.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

from ..analyzers.detectors import diagnose
from ..analyzers.load import build_profile
from ..analyzers.readers.isolate import LogResult
from ..config import Config
from .features import ERROR_COLUMNS, JOB_COLUMNS, LOG_COLUMNS, PROGRAM_COLUMNS, exe_name, extract_features, finding_columns, job_meta
from .walk import Unit
from .worker import error_row, log_rows, row_values


def _day_from_start(start_s: float) -> str | None:
    import datetime as dt

    if start_s is None or not math.isfinite(start_s) or start_s <= 0:
        return None
    return dt.datetime.fromtimestamp(start_s, dt.timezone.utc).strftime("%Y-%m-%d")


def _row(unit: Unit, profile, findings, *, n_failed: int, run: int) -> dict[str, Any]:
    job = profile.job
    row: dict[str, Any] = job_meta(profile)
    row.update(extract_features(profile))
    row.update(finding_columns(findings))
    day = unit.day or _day_from_start(row["start_s"])
    # the user in the log name; else the uid in the header (obfuscated or renamed logs)
    user = unit.user or job.user or (str(job.uid) if job.uid is not None else "")
    progs = [exe_name(p.exe) for p in job.programs]
    main = max(job.programs, key=lambda p: p.nprocs) if job.programs else None
    row.update({
        "job_key": unit.job_key, "dir": unit.dir, "day": day, "month": day[:7] if day else None,
        "job_id": unit.job_id or str(job.job_id), "user": user,
        "exe": exe_name(main.exe) if main else "", "exes": " + ".join(progs),
        "n_programs": len(job.programs), "n_logs_failed": n_failed,
        "n_logs": len(job.logs) - n_failed, "run": run,
    })
    ch = row["core_hours"]
    row["io_time_share"] = row["io_time_s"] / (ch * 3600.0) if ch > 0 else math.nan
    return row


def job_rows(unit: Unit, results: Sequence[LogResult], cfg: Config, run: int) -> dict[str, list[tuple]]:
    """The rows of one job from its logs' LogResults (in ``unit.paths`` order), as tuples in column order."""
    jobs: list[dict[str, Any]] = []
    programs: list[dict[str, Any]] = []
    errors: list[dict[str, Any]] = []
    statuses = []
    ok_paths = set()
    cut = False
    for r, size in zip(results, unit.sizes):
        statuses.append("ok" if r.data is not None else "error")
        if r.data is None:
            errors.append(error_row(unit, r.path, r.error_kind or "unreadable", r.error or "unknown cause", False, run))
            continue
        ok_paths.add(r.path)
        for mod, cause in r.data.get("losses", ()):
            errors.append(error_row(unit, r.path, "truncated", f"{mod}: {cause}", True, run))
        mapped = sum(int(m.get("len", 0)) for m in r.data["header"]["modules"].values())
        if 0 <= size < mapped:
            # darshan-util's own module map says more data than the file holds
            cut = True
            errors.append(error_row(
                unit, r.path, "truncated",
                f"the file holds {size} bytes but its header maps {mapped} bytes of module data: the log was cut short; "
                "modules not read for the site table may be missing", True, run))
    n_failed = len(results) - len(ok_paths)
    if ok_paths:
        try:
            profile = build_profile(results)
            findings = diagnose(profile, cfg)
            jrow = _row(unit, profile, findings, n_failed=n_failed, run=run)
            if cut:
                jrow["partial"] = True
                jrow["partial_modules"] = ",".join(filter(None, [jrow["partial_modules"], "FILE-TRUNCATED"]))
            jobs.append(jrow)
            if len(profile.job.programs) <= 1:
                prow = dict(jrow)
                prow["program"] = jrow["exe"]
                programs.append(prow)
            else:
                for prog in profile.job.programs:
                    mine = set(prog.logs)
                    pprof = build_profile([r for r in results if r.path in mine])
                    prow = _row(unit, pprof, diagnose(pprof, cfg), n_failed=0, run=run)
                    prow["program"] = exe_name(prog.exe)
                    prow["exes"] = jrow["exes"]
                    programs.append(prow)
        except Exception as exc:  # noqa: BLE001 - one odd job must not stop a site-wide ingest
            jobs, programs = [], []
            for p in sorted(ok_paths):
                errors.append(error_row(unit, p, "ingest-failed", f"{type(exc).__name__}: {exc}", False, run))
            statuses = ["error"] * len(statuses)
    # tuples in column order: a fraction of the pickling and of the Arrow conversion of dicts
    return {"jobs": row_values(jobs, JOB_COLUMNS), "programs": row_values(programs, PROGRAM_COLUMNS),
            "errors": row_values(errors, ERROR_COLUMNS), "logs": row_values(log_rows(unit, statuses, run), LOG_COLUMNS)}
