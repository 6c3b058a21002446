"""What one Dask task does: read a batch of jobs' logs, diagnose, return rows.

A task gets a list of ``Unit`` (every log of one job in one directory).  All
logs of the batch stream through one forked darshan-util reader
(``read_logs``), so a damaged log becomes an error row and never takes the
worker down; each job is built (``build_profile``), diagnosed (``diagnose``)
and turned into one job row plus one row per program as soon as its logs
are read, so a task holds at most one job's decoded data at a time.

The result is four small Arrow tables (jobs, programs, errors, logs).
"""

from __future__ import annotations

import gc
import math
import os
from typing import Any, Sequence

from ..config import Config
from .features import (
    ERROR_COLUMNS,
    JOB_COLUMNS,
    LOG_COLUMNS,
    PROGRAM_COLUMNS,
    exe_name,
    extract_features,
    finding_columns,
    job_meta,
)
from .walk import Unit

_DAMAGE_KINDS = ("truncated",)


def _arrow_type(t: str):
    import pyarrow as pa

    return {
        "str": pa.string(), "f8": pa.float64(), "i8": pa.int64(), "bool": pa.bool_(),
        "list<str>": pa.list_(pa.string()), "list<f8>": pa.list_(pa.float64()),
    }[t]


def schema(columns: dict[str, str]):
    import pyarrow as pa

    return pa.schema([(n, _arrow_type(t)) for n, t in columns.items()])


def to_table(rows: list[dict[str, Any]], columns: dict[str, str]):
    import pyarrow as pa

    data = {name: [r.get(name) for r in rows] for name in columns}
    return pa.Table.from_pydict(data, schema=schema(columns))


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


def process_units(units: Sequence[Unit], *, config: Config, run: int) -> dict[str, Any]:
    """Read, diagnose and featurize every job of the batch; never raises for a bad log."""
    # In a Dask worker the heap is large (distributed, tornado, pandas...):
    # freezing moves today's objects out of the garbage collector's sight, so
    # the collections that the many small per-log objects trigger stay cheap.
    gc.freeze()
    restore = _roomy_malloc()
    try:
        return _process(units, config, run)
    finally:
        restore()
        gc.unfreeze()


# glibc mallopt parameters
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3


def _roomy_malloc():
    """For the length of a task, let glibc keep freed memory instead of mapping and unmapping it.

    Dask's nanny starts workers with MALLOC_TRIM_THRESHOLD_=65536 (so that freed memory
    goes back to the OS).  That also fixes glibc's mmap threshold at 128 KiB: every
    decoded log larger than that (the corpus mean is ~160 KiB) is mapped, page-faulted
    in and unmapped again (~170 faults per log, measured).  During a task both
    thresholds are raised; afterwards they return to the values the environment set,
    so memory is trimmed as Dask intends once the task is done.  Without that
    environment variable (glibc's adaptive defaults) nothing is changed.
    """
    trim = os.environ.get("MALLOC_TRIM_THRESHOLD_")
    if not trim or not trim.isdigit():
        return lambda: None
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return lambda: None
    mmap_default = int(os.environ.get("MALLOC_MMAP_THRESHOLD_", "131072") or 131072)
    if not (mallopt(_M_TRIM_THRESHOLD, 256 << 20) and mallopt(_M_MMAP_THRESHOLD, 32 << 20)):
        mallopt(_M_TRIM_THRESHOLD, int(trim))
        mallopt(_M_MMAP_THRESHOLD, mmap_default)
        return lambda: None

    def restore() -> None:
        mallopt(_M_MMAP_THRESHOLD, mmap_default)
        mallopt(_M_TRIM_THRESHOLD, int(trim))

    return restore


def _process(units: Sequence[Unit], cfg: Config, run: int) -> dict[str, Any]:
    from ..analyzers.detectors import diagnose
    from ..analyzers.load import build_profile
    from ..analyzers.readers.isolate import read_logs_served
    from ..errors import NoUsableData

    paths = [p for u in units for p in u.paths]
    jobs: list[dict[str, Any]] = []
    programs: list[dict[str, Any]] = []
    errors: list[dict[str, Any]] = []
    logs: list[dict[str, Any]] = []
    # one long-lived reader process per worker thread (exec'd, not forked from this large process)
    stream = read_logs_served(paths, cfg.site.modules, names=True, timeout_s=cfg.reader.timeout_s, isolate=cfg.reader.isolate)

    def error(unit: Unit, path: str, kind: str, cause: str, loaded: bool) -> None:
        errors.append({"job_key": unit.job_key, "dir": unit.dir, "day": unit.day, "path": path,
                       "name": os.path.basename(path), "kind": kind, "cause": cause, "loaded": loaded, "run": run})

    for unit in units:
        results = [next(stream) for _ in unit.paths]
        ok_paths = set()
        cut = False
        for r, name, size, mtime in zip(results, unit.names, unit.sizes, unit.mtimes_ns):
            status = "ok" if r.data is not None else "error"
            logs.append({"dir": unit.dir, "name": name, "size": size, "mtime_ns": mtime,
                         "status": status, "job_key": unit.job_key, "run": run})
            if r.data is None:
                error(unit, r.path, r.error_kind or "unreadable", r.error or "unknown cause", False)
            else:
                ok_paths.add(r.path)
                for mod, cause in r.data.get("losses", ()):
                    error(unit, r.path, "truncated", f"{mod}: {cause}", True)
                mapped = sum(int(m.get("len", 0)) for m in r.data["header"]["modules"].values())
                if 0 <= size < mapped:
                    # darshan-util's own module map says more data than the file holds
                    cut = True
                    error(unit, r.path, "truncated",
                          f"the file holds {size} bytes but its header maps {mapped} bytes of module data: the log was cut short; "
                          "modules not read for the site table may be missing", True)
        n_failed = len(results) - len(ok_paths)
        if not ok_paths:
            continue
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
                    sub = [r for r in results if r.path in set(prog.logs)]
                    pprof = build_profile(sub)
                    prow = _row(unit, pprof, diagnose(pprof, cfg), n_failed=0, run=run)
                    prow["program"] = exe_name(prog.exe)
                    prow["exes"] = jrow["exes"]
                    programs.append(prow)
        except NoUsableData as exc:  # every log failed after all
            for p in unit.paths:
                error(unit, p, "unreadable", str(exc), False)
        except Exception as exc:  # noqa: BLE001 - one odd job must not stop a site-wide ingest
            for p in sorted(ok_paths):
                error(unit, p, "ingest-failed", f"{type(exc).__name__}: {exc}", False)
            for lg in logs:
                if lg["job_key"] == unit.job_key:
                    lg["status"] = "error"
        del results
    return {
        "jobs": to_table(jobs, JOB_COLUMNS),
        "programs": to_table(programs, PROGRAM_COLUMNS),
        "errors": to_table(errors, ERROR_COLUMNS),
        "logs": to_table(logs, LOG_COLUMNS),
        "n_logs": len(paths),
    }
