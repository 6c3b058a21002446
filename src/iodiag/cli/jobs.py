"""`iodiag jobs`: list the jobs of the job store."""

from __future__ import annotations

import json
import sys
import time
from typing import Optional

import typer

from ..units import fmt_seconds
from .app import app
from .common import run_guarded


def _row(rec) -> dict:
    d = rec.data
    return {
        "id": rec.id,
        "name": d.get("name"),
        "status": rec.status,
        "partial": rec.partial,
        "collector": d.get("collector"),
        "start_s": d.get("start_s"),
        "wall_s": d.get("wall_s"),
        "exit_code": d.get("exit_code"),
        "signal": d.get("signal_name"),
        "logs": len((d.get("artefacts") or {}).get("logs", [])),
        "dask_tasks": sum(int(c.get("tasks") or 0) for c in d.get("dask_clients") or []),
        "command": " ".join(d.get("command") or []),
        "path": str(rec.folder),
    }


@app.command(
    "jobs",
    help=(
        "List the jobs in the job store, newest first.\n\n"
        "Examples:\n\n"
        "  iodiag jobs\n\n"
        "  iodiag jobs --json | jq '.[0].id'\n\n"
        "  iodiag jobs --store /scratch/me/iodiag"
    ),
)
def jobs_command(
    as_json: bool = typer.Option(False, "--json", help="Print a JSON list (one object per job)."),
    store: Optional[str] = typer.Option(None, "--store", help="Job store folder (default: $IODIAG_HOME, else $XDG_DATA_HOME/iodiag)."),
    limit: int = typer.Option(0, "--limit", "-n", help="Show only the newest N jobs (0: all)."),
) -> None:
    def body() -> None:
        from ..jobs.store import jobs_dir, list_jobs

        jobs = list_jobs(store)
        if limit > 0:
            jobs = jobs[:limit]
        rows = [_row(r) for r in jobs]
        if as_json:
            print(json.dumps(rows, indent=2))
            return
        if not rows:
            print(f"iodiag: no jobs in {jobs_dir(store)} (run one: iodiag run script.py)", file=sys.stderr)
            return
        print(f"{'job id':<36} {'status':<9} {'collector':<9} {'started':<16} {'wall':>8} {'exit':>7} {'logs':>5} {'tasks':>6}  command")
        for r in rows:
            start = time.strftime("%Y-%m-%d %H:%M", time.localtime(r["start_s"])) if r["start_s"] else "?"
            wall = fmt_seconds(r['wall_s'])
            ex = r["signal"] or ("-" if r["exit_code"] is None else str(r["exit_code"]))
            cmd = r["command"]
            if len(cmd) > 60:
                cmd = cmd[:57] + "..."
            print(f"{r['id']:<36} {r['status']:<9} {r['collector'] or '-':<9} {start:<16} {wall:>8} {ex:>7} {r['logs']:>5} {r['dask_tasks']:>6}  {cmd}")

    run_guarded(body)
