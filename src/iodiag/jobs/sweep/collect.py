"""Gather every run's parameters, status and results record into one table
(``results.csv`` and ``results.parquet`` in the sweep folder).

One row per run for gen/convert; one row per (run, read pattern) for read.
Columns: ``run``, ``kind``, ``workload``, ``rep``, ``status``, ``exit_code``,
the grid parameters under their own names, then measures with units in their
names (``t_write_s``, ``bytes_logical``, ``throughput_MBps``, ...).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ...errors import InputNotFound, InputUnreadable


def _load(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise InputUnreadable(f"{path} cannot be read as JSON: {exc}",
                              hint="delete it and re-run that run") from None


def succeeded_runs(sweep_dir: str | Path):
    """The sweep's description and, for each run that succeeded, ``(name, run folder, run.json, results.json)``
    (records missing as None), in the order the sweep lists them.  A folder without ``sweep.json`` is refused."""
    d = Path(sweep_dir)
    meta = _load(d / "sweep.json")
    if meta is None:
        raise InputNotFound(f"{d} is not a sweep folder (no sweep.json)",
                            hint="give folders made by `iodiag sweep run` or `iodiag sweep submit`")
    runs = []
    for name in meta.get("runs", []):
        rdir = d / "runs" / name
        if (rdir / "SUCCESS").exists():
            runs.append((name, rdir, _load(rdir / "run.json"), _load(rdir / "results.json")))
    return meta, runs


def _status(run_dir: Path) -> tuple[str, int | None]:
    if (run_dir / "SUCCESS").exists():
        return "succeeded", 0
    if (run_dir / "FAILED").exists():
        try:
            return "failed", int((run_dir / "FAILED").read_text().strip())
        except ValueError:
            return "failed", None
    if (run_dir / "submit.json").exists():
        return "submitted", None
    return "new", None


def _measures(rec: dict[str, Any]) -> list[dict[str, Any]]:
    """Flatten one results record into one or more rows of measures."""
    if rec.get("workload") == "read":
        rows = []
        for pat, v in rec.get("patterns", {}).items():
            rows.append({"pattern": pat, "format": rec.get("format"),
                         "chunks": "x".join(map(str, rec["chunks"])) if rec.get("chunks") else "contiguous",
                         "t_total_s": v["total_s"], "t_open_s": v["open_s"], "t_read_s": v["read_s"],
                         "t_total_min_s": v["total_s_min"], "bytes_requested": v["requested_bytes"],
                         "bytes_stored_touched": v["stored_bytes_touched"], "chunks_touched": v["chunks_touched"],
                         "bytes_rchar": v["rchar_bytes"],
                         "t_first_access_s": rec.get("first_access", {}).get("open_s", 0.0)
                         + rec.get("first_access", {}).get("read_s", 0.0)})
        return rows
    row: dict[str, Any] = {}
    for k, v in rec.get("timings_s", {}).items():
        row[f"t_{k}_s"] = v
    b = rec.get("bytes", {})
    for k in ("logical", "stored", "files"):
        if k in b:
            row[f"bytes_{k}" if k != "files" else "n_files"] = b[k]
    for k, v in rec.get("metrics", {}).items():
        row[k] = v
    if "chunks" in rec and rec["chunks"]:
        row["chunks"] = "x".join(map(str, rec["chunks"]))
    if rec.get("chunk_MB") is not None:  # bytes per chunk: the size of each write (site defaults maps jobs by it)
        row["chunk_bytes"] = float(rec["chunk_MB"]) * 1e6
    if "n_tasks" in rec:
        row["n_tasks"] = rec["n_tasks"]
    return [row]


def collect_rows(sweep_dir: str | Path, *, include_prepare: bool = False) -> list[dict[str, Any]]:
    sweep_dir = Path(sweep_dir)
    meta = _load(sweep_dir / "sweep.json")
    if meta is None:
        raise InputNotFound(f"{sweep_dir} is not a sweep folder (no sweep.json)",
                            hint="give the --dir used with `iodiag sweep run` or `submit`")
    names = [("run", n) for n in meta.get("runs", [])]
    if include_prepare:
        names = [("prepare", n) for n in meta.get("prepare", [])] + names
    rows: list[dict[str, Any]] = []
    for kind, name in names:
        rdir = sweep_dir / ("runs" if kind == "run" else "prepare") / name
        run = _load(rdir / "run.json") or {}
        st, code = _status(rdir)
        base = {"run": name, "kind": kind, "workload": run.get("workload"), "rep": run.get("rep"),
                "status": st, "exit_code": code, **run.get("grid", {})}
        submit = _load(rdir / "submit.json")
        if submit:
            base["scheduler_job_id"] = submit.get("job_id")
        rec = _load(rdir / "results.json") if st == "succeeded" else None
        if rec is None:
            rows.append(base)
            continue
        if rec.get("iodiag_job"):
            base["iodiag_job"] = rec["iodiag_job"]  # `iodiag report <this>` diagnoses the run
        for m in _measures(rec):
            rows.append({**base, **m})
    return rows


def collect(sweep_dir: str | Path, *, include_prepare: bool = False) -> tuple[Any, dict[str, Path]]:
    """Write results.csv and results.parquet; return (DataFrame, written paths)."""
    import pandas as pd

    sweep_dir = Path(sweep_dir)
    df = pd.DataFrame(collect_rows(sweep_dir, include_prepare=include_prepare))
    written = {"csv": sweep_dir / "results.csv"}
    df.to_csv(written["csv"], index=False)
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        pass
    else:
        written["parquet"] = sweep_dir / "results.parquet"
        df.to_parquet(written["parquet"], index=False)
    return df, written
