"""The job's snapshot: what a later report reads from outside the trace, kept in the job folder.

At the end of ``iodiag run`` (after ``finalize_job``), :func:`write_snapshot` names the paths the job touched
— from the job's own artefacts: the embedded collector's ``.names`` files, or the Darshan logs' name records
through ``log_names`` (the CLI passes darshan-util's reader; this layer does not import the analyzers) — plus the
array a workload results record names, and stores ``collectors.snapshot.take_snapshot`` of them as
``meta/snapshot.json``.  ``job.json`` lists it under ``artefacts.snapshot``.

A snapshot never fails a run: an error is recorded in ``job.json`` (``snapshot_error`` and a run note) and the
job is reported as one without a snapshot.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from ..collectors.snapshot import take_snapshot
from .store import JobRecord, atomic_write_json

SNAPSHOT_FILE = "meta/snapshot.json"
LogNames = Callable[[Sequence[str]], Iterable[str]]


def _embedded_names(folder: Path) -> list[str]:
    from ..collectors.embedded.format import read_names

    out: dict[str, None] = {}
    for p in sorted((folder / "traces").glob("*.names")):
        out.update(dict.fromkeys(read_names(p).values()))
    return list(out)


def touched_paths(record: JobRecord, log_names: LogNames | None = None) -> tuple[list[str], str]:
    """(paths the job touched, where they were read from)."""
    folder = Path(record.folder)
    collector = record.data.get("collector")
    if collector == "embedded":
        return _embedded_names(folder), "the embedded collector's name tables (traces/*.names)"
    if collector == "darshan":
        logs = [str(folder / p) for p in (record.data.get("artefacts") or {}).get("logs") or []]
        if log_names is None:
            return [], "none: no reader of Darshan name records was given"
        return list(log_names(logs)), "the Darshan logs' name records"
    return [], "none: no file-level collector ran"


def _results_arrays(record: JobRecord) -> list[str]:
    """The array a workload results record in the job folder names (a read workload's store and variable)."""
    try:
        rec = json.loads((Path(record.folder) / "results.json").read_text())
    except (OSError, ValueError):
        return []
    params = rec.get("params") if isinstance(rec, dict) else None
    if not isinstance(params, dict) or not params.get("path") or not params.get("variable"):
        return []
    return [os.path.join(str(record.data.get("cwd") or ""), str(params["path"]), str(params["variable"]))]


def write_snapshot(record: JobRecord, *, log_names: LogNames | None = None) -> dict[str, Any] | None:
    """Take and store the job's snapshot (see module docstring); the snapshot, or None when it failed."""
    try:
        paths, source = touched_paths(record, log_names)
        snap = take_snapshot(paths, extra_arrays=_results_arrays(record))
        snap["paths_from"] = source
        target = Path(record.folder) / SNAPSHOT_FILE
        target.parent.mkdir(exist_ok=True)
        atomic_write_json(target, snap)
    except Exception as exc:  # noqa: BLE001 - a snapshot never fails the run: the job says what went wrong
        record.data["snapshot_error"] = f"{type(exc).__name__}: {exc}"
        record.data.setdefault("run_notes", []).append(
            f"no metadata snapshot ({exc}): reports of this job read array metadata live, where it still exists")
        _save(record)
        return None
    record.data.setdefault("artefacts", {})["snapshot"] = SNAPSHOT_FILE
    for err in snap.get("errors") or []:
        record.data.setdefault("run_notes", []).append(f"metadata snapshot: {err}")
    _save(record)
    return snap


def _save(record: JobRecord) -> None:
    try:
        record.save()
    except Exception:  # noqa: BLE001 - job.json was saved by finalize_job; the snapshot file stands alone
        pass


__all__ = ["SNAPSHOT_FILE", "touched_paths", "write_snapshot"]
