"""`iodiag report`: diagnose one job from its Darshan logs or its iodiag job record."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from .app import app
from .common import _print_choices, run_guarded
from .report_run import _report


@app.command(
    "report",
    help=(
        "Diagnose a job: why its I/O is slow and what to change.\n\n"
        "TARGET is a Darshan log, a folder of per-process logs, a scheduler job id found in a site\n"
        "archive (--log-tree or $IODIAG_LOG_TREE), or an iodiag job: its folder, its id / unique prefix /\n"
        "name, or 'last'.\n\n"
        "Examples:\n\n"
        "  iodiag report run.darshan\n\n"
        "  iodiag report logs/ --all --json > report.json\n\n"
        "  iodiag report 4478544 --log-tree /global/darshan\n\n"
        "  iodiag report last --html"
    ),
)
def report_cmd(
    target: str = typer.Argument(..., help="Darshan log, folder of logs, scheduler job id, or iodiag job folder / job id ('last')."),
    json_out: bool = typer.Option(False, "--json", help="Print the JSON report (schema iodiag.report/1) on stdout."),
    json_file: Optional[Path] = typer.Option(None, "--json-file", help="Also write the JSON report to this file."),
    html: bool = typer.Option(False, "--html", help="--html [PATH]: write a self-contained HTML report to PATH (default: into the job folder, next to the log, or the current folder)."),
    html_path: Optional[Path] = typer.Option(None, "--html-path", help="Write the HTML report to this path (implies --html)."),
    config_file: Optional[Path] = typer.Option(None, "--config", help="TOML file overriding detector thresholds."),
    site_config: Optional[Path] = typer.Option(None, "--site-config", help="Site config (written by `iodiag site defaults`; default $IODIAG_SITE_CONFIG, else /etc/iodiag/site.toml if present): site thresholds and advice; --config overrides it."),
    mute: List[str] = typer.Option([], "--mute", help="Finding id to leave out (repeatable)."),
    log_tree: Optional[str] = typer.Option(None, "--log-tree", help="Site archive root laid out as YYYY/M/D/ (or $IODIAG_LOG_TREE)."),
    job: Optional[str] = typer.Option(None, "--job", help="When a folder holds several jobs: the job id to report."),
    take_all: bool = typer.Option(False, "--all", help="When a folder holds several jobs: report all its logs as one job."),
    obfuscate: bool = typer.Option(False, "--obfuscate", help="Replace paths, user and executable names with stable hashes."),
    color: Optional[bool] = typer.Option(None, "--color/--no-color", help="Colour the terminal report (default: when stdout is a terminal and $NO_COLOR is not set)."),
) -> None:
    run_guarded(lambda: _report(
        target=target, json_out=json_out, json_file=json_file, html=html or html_path is not None, html_path=html_path,
        config_file=config_file, site_config=site_config, mute=mute, log_tree=log_tree, job=job, take_all=take_all, obfuscate=obfuscate, color=color,
    ), on_ambiguous=_print_choices, json_errors=json_out)
