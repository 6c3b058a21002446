"""`iodiag report`: diagnose one job from its Darshan logs or its iodiag job record."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import List, Optional

import typer

from ..errors import AmbiguousInput, InputNotFound
from .app import app
from .common import atomic_write, fail, run_guarded


def build_profile_for(target: str, *, log_tree: str | None, pick: str | None, take_all: bool, config, progress: bool):
    """Resolve TARGET to logs or a stored job and load its profile. Returns (profile, where_to_write)."""
    from ..analyzers.load import load_job
    from ..analyzers.locate import resolve_target

    logset = resolve_target(target, log_tree=log_tree, pick=pick, take_all=take_all, config=config)
    if logset is None:
        try:
            from ..analyzers.job import load_job_record
            from ..jobs.store import find_job
        except ImportError:
            raise InputNotFound(
                f"{target}: no such file, folder or job",
                hint="give a Darshan log, a folder of logs, or a scheduler job id with --log-tree",
            ) from None
        record = find_job(target)
        return load_job_record(record, config=config), Path(record.path)
    cb = None
    bar = None
    if progress and len(logset.paths) > 20 and sys.stderr.isatty():
        from rich.progress import Progress

        bar = Progress(transient=True, console=_stderr_console())
        bar.start()
        task = bar.add_task("reading logs", total=len(logset.paths))
        cb = lambda n: bar.advance(task, n)  # noqa: E731
    try:
        prof = load_job(logset.paths, config=config, job_id=logset.job_id, progress=cb)
    finally:
        if bar is not None:
            bar.stop()
    first = Path(logset.paths[0])
    return prof, (first.parent if first.is_file() else first)


def _stderr_console():
    from rich.console import Console

    return Console(stderr=True)


def _print_choices(exc: AmbiguousInput) -> None:
    from datetime import datetime, timezone

    if exc.choices and isinstance(exc.choices[0], str):  # iodiag job ids (a prefix of several jobs)
        print(f"iodiag: {exc.message.split(': ')[0]}:", file=sys.stderr)
        for c in exc.choices[:50]:
            print(f"  {c}", file=sys.stderr)
        if len(exc.choices) > 50:
            print(f"  … {len(exc.choices) - 50} more (iodiag jobs)", file=sys.stderr)
        return
    print(f"iodiag: {exc.message}:", file=sys.stderr)
    print(f"  {'job id':<14} {'processes':>9}  {'start (UTC)':<20} executables", file=sys.stderr)
    for c in exc.choices:
        start = datetime.fromtimestamp(c.start_s, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S") if c.start_s else "?"
        bad = f"  ({len(c.unreadable)} unreadable)" if c.unreadable else ""
        print(f"  {c.job_id:<14} {c.processes:>9}  {start:<20} {', '.join(c.exes) or '?'}{bad}", file=sys.stderr)


@app.command(
    "report",
    help=(
        "Diagnose a job: why its I/O is slow and what to change.\n\n"
        "TARGET is a Darshan log, a folder of per-process logs, a scheduler job id found in a site\n"
        "archive (--log-tree or $IODIAG_LOG_TREE), or an iodiag job id / unique prefix / 'last'.\n\n"
        "Examples:\n\n"
        "  iodiag report run.darshan\n\n"
        "  iodiag report logs/ --all --json > report.json\n\n"
        "  iodiag report 4478544 --log-tree /global/darshan\n\n"
        "  iodiag report last --html"
    ),
)
def report_cmd(
    target: str = typer.Argument(..., help="Darshan log, folder of logs, scheduler job id, or iodiag job id ('last')."),
    json_out: bool = typer.Option(False, "--json", help="Print the JSON report (schema iodiag.report/1) on stdout."),
    json_file: Optional[Path] = typer.Option(None, "--json-file", help="Also write the JSON report to this file."),
    html: bool = typer.Option(False, "--html", help="Write a self-contained HTML report (into the job folder, next to the log, or the current folder)."),
    html_path: Optional[Path] = typer.Option(None, "--html-path", help="Write the HTML report to this path (implies --html)."),
    config_file: Optional[Path] = typer.Option(None, "--config", help="TOML file overriding detector thresholds."),
    mute: List[str] = typer.Option([], "--mute", help="Finding id to leave out (repeatable)."),
    log_tree: Optional[str] = typer.Option(None, "--log-tree", help="Site archive root laid out as YYYY/M/D/ (or $IODIAG_LOG_TREE)."),
    job: Optional[str] = typer.Option(None, "--job", help="When a folder holds several jobs: the job id to report."),
    take_all: bool = typer.Option(False, "--all", help="When a folder holds several jobs: report all its logs as one job."),
    obfuscate: bool = typer.Option(False, "--obfuscate", help="Replace paths, user and executable names with stable hashes."),
    color: Optional[bool] = typer.Option(None, "--color/--no-color", help="Colour the terminal report (default: when stdout is a terminal)."),
) -> None:
    run_guarded(lambda: _report(
        target=target, json_out=json_out, json_file=json_file, html=html or html_path is not None, html_path=html_path,
        config_file=config_file, mute=mute, log_tree=log_tree, job=job, take_all=take_all, obfuscate=obfuscate, color=color,
    ), on_ambiguous=_print_choices, json_errors=json_out)


def _report(*, target, json_out, json_file, html, html_path, config_file, mute, log_tree, job, take_all, obfuscate, color) -> None:
    import dataclasses

    from ..analyzers.detectors import diagnose
    from ..config import load_config
    from ..reports.json_report import build_report, render_json

    cfg = load_config(config_file)
    if mute:
        from ..findings import FINDING_IDS

        unknown = [m for m in mute if m not in FINDING_IDS]
        if unknown:
            fail(f"--mute {unknown[0]}: not a finding id", hint="known ids: " + ", ".join(FINDING_IDS), code=2)
        cfg = dataclasses.replace(cfg, report=dataclasses.replace(cfg.report, mute=tuple(cfg.report.mute) + tuple(mute)))
    prof, home = build_profile_for(target, log_tree=log_tree, pick=job, take_all=take_all, config=cfg, progress=not json_out)
    findings = diagnose(prof, cfg)
    report = build_report(prof, findings)
    if obfuscate:
        try:
            from ..reports.obfuscate import obfuscate_report
        except ImportError:
            fail("--obfuscate is not available in this build", hint="update iodiag", code=10)
        report = obfuscate_report(report)
    text = render_json(report)
    if json_file:
        atomic_write(json_file, text + "\n")
    if html:
        from .common import write_html

        out = write_html(prof, findings, report, html_path=html_path, home=home, obfuscate=obfuscate, config=cfg)
        print(f"iodiag: HTML report written to {out}", file=sys.stderr)
    if json_out:
        sys.stdout.write(text + "\n")
        return
    from ..reports.terminal import render_terminal

    use_color = sys.stdout.isatty() if color is None else color
    import shutil

    width = max(60, min(shutil.get_terminal_size((100, 24)).columns, 160))  # the terminal's width ($COLUMNS honoured)
    sys.stdout.write(render_terminal(report, color=use_color, width=width))
