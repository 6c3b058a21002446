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


JOBS_SCHEMA = "iodiag.jobs/1"


@app.command(
    "jobs",
    help=(
        "List the jobs in the job store, newest first.\n\n"
        "Examples:\n\n"
        "  iodiag jobs\n\n"
        "  iodiag jobs --json | jq '.jobs[0].id'\n\n"
        "  iodiag jobs --store /scratch/me/iodiag"
    ),
)
def jobs_command(
    as_json: bool = typer.Option(False, "--json", help=f"Print a JSON object (schema {JOBS_SCHEMA}): jobs, one object per job."),
    store: Optional[str] = typer.Option(None, "--store", help="Job store folder (default: $IODIAG_HOME, else $XDG_DATA_HOME/iodiag)."),
    limit: int = typer.Option(0, "--limit", "-n", help="Show only the newest N jobs (0: all)."),
    color: Optional[bool] = typer.Option(None, "--color/--no-color", help="Colour the table (default: on a terminal, unless $NO_COLOR is set)."),
) -> None:
    def body() -> None:
        from ..jobs.store import jobs_dir, list_jobs
        from .common import check_positive, terminal_width, use_color

        check_positive(limit, "--limit", zero=True)
        damaged: list = []
        jobs = list_jobs(store, damaged=damaged)
        if limit > 0:
            jobs = jobs[:limit]
        rows = [_row(r) for r in jobs]
        bad = [{"path": str(folder), "cause": str(exc)} for folder, exc in damaged]
        if as_json:
            print(json.dumps({"schema": JOBS_SCHEMA, "store": str(jobs_dir(store)), "jobs": rows, "damaged": bad}, indent=2))
            return
        for b in bad:
            print(f"iodiag: note: skipped a damaged job record: {b['cause']}", file=sys.stderr)
        if not rows:
            print(f"iodiag: no jobs in {jobs_dir(store)} (run one: iodiag run script.py)", file=sys.stderr)
            return
        print(render_jobs(rows, width=terminal_width(), color=use_color(color)), end="")

    run_guarded(body, json_errors=JOBS_SCHEMA if as_json else False)


def _short_command(command: str) -> str:
    """The command as the table shows it: the program and a Python script by their names (their folders are in
    ``--json``), the arguments as given."""
    words = command.split(" ")
    if words and "/" in words[0]:
        words[0] = words[0].rsplit("/", 1)[-1]
    if len(words) > 1 and words[0].startswith("python") and words[1].endswith(".py"):
        words[1] = words[1].rsplit("/", 1)[-1]
    return " ".join(words)


def render_jobs(rows: list[dict], *, width: int, color: bool) -> str:
    """The job table, fitted to ``width``: the id and status always; the command cut at its end; the logs, Dask
    tasks, collector and exit columns left out, in that order, when the line is short.  (The id carries the
    date: the start column gives the time of day, the date only for jobs of another day than the id's.)"""
    from ..reports.textout import Col, Lines

    out = Lines(width=width, color=color)
    cells = []
    for r in rows:
        start = "?"
        if r["start_s"]:
            day = time.strftime("%Y-%m-%d", time.localtime(r["start_s"]))
            start = time.strftime("%H:%M" if r["id"].startswith(day) else "%Y-%m-%d %H:%M", time.localtime(r["start_s"]))
        wall = fmt_seconds(r["wall_s"])
        ex = r["signal"] or ("-" if r["exit_code"] is None else str(r["exit_code"]))
        cells.append([r["id"], r["status"], start, wall, ex, r["collector"] or "-", str(r["logs"]), str(r["dask_tasks"]),
                      _short_command(r["command"]) or "-"])
    cols = [("job id", "left"), ("status", "left"), ("started", "left", Col(3)), ("wall", "right", Col(2)),
            ("exit", "right", Col(4)), ("collector", "left", Col(6)), ("logs", "right", Col(5)),
            ("tasks", "right", Col(7)), ("command", "left", Col(cut="middle", min=20))]
    out.table(None, cols, cells)
    return out.text()
