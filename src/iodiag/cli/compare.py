"""`iodiag compare A B`: what changed between two jobs (before/after a change)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

import typer

from .app import app
from .common import atomic_write, run_guarded


@app.command(
    "compare",
    help=(
        "Show what changed between two jobs: wall time, bytes, operations, metadata operations,\n"
        "findings appeared/resolved (e.g. before and after applying a recommendation).\n\n"
        "A and B are what `iodiag report` takes: a Darshan log, a folder of one job's logs, a scheduler\n"
        "job id with --log-tree, or an iodiag job id.\n\n"
        "Examples:\n\n"
        "  iodiag compare before.darshan after.darshan\n\n"
        "  iodiag compare logs/run1/ logs/run2/ --json > delta.json\n\n"
        "  iodiag compare before.darshan after.darshan --html delta.html --obfuscate"
    ),
)
def compare_cmd(
    a: str = typer.Argument(..., help="The job before: Darshan log, folder of logs, scheduler job id or iodiag job id."),
    b: str = typer.Argument(..., help="The job after (same kinds as A)."),
    json_out: bool = typer.Option(False, "--json", help="Print the comparison as JSON (schema iodiag.compare/1)."),
    html: Optional[Path] = typer.Option(None, "--html", help="Also write a self-contained HTML page to this path."),
    obfuscate: bool = typer.Option(False, "--obfuscate", help="Replace paths, user, executable and host names with stable hashes in every output."),
    config_file: Optional[Path] = typer.Option(None, "--config", help="TOML file overriding detector thresholds."),
    log_tree: Optional[str] = typer.Option(None, "--log-tree", help="Site archive root for scheduler job ids (or $IODIAG_LOG_TREE)."),
) -> None:
    run_guarded(lambda: _compare(a=a, b=b, json_out=json_out, html=html, obfuscate=obfuscate,
                                 config_file=config_file, log_tree=log_tree))


def _compare(*, a, b, json_out, html, obfuscate, config_file, log_tree) -> None:
    from ..analyzers.detectors import diagnose
    from ..config import load_config
    from ..reports.compare import compare_jobs, render_compare_html, render_compare_text
    from .report import build_profile_for

    cfg = load_config(config_file)
    profs = []
    for target in (a, b):
        prof, _home = build_profile_for(target, log_tree=log_tree, pick=None, take_all=False, config=cfg, progress=not json_out)
        profs.append((prof, diagnose(prof, cfg)))
    (prof_a, find_a), (prof_b, find_b) = profs
    if obfuscate:
        from ..reports.obfuscate import Obfuscator, obfuscate_findings, obfuscate_profile

        obf = Obfuscator()
        obf.learn(prof_a)
        obf.learn(prof_b)
        prof_a, prof_b = obfuscate_profile(prof_a, obf), obfuscate_profile(prof_b, obf)
        find_a, find_b = obfuscate_findings(find_a, obf), obfuscate_findings(find_b, obf)
    result = compare_jobs(prof_a, prof_b, find_a, find_b)
    if html is not None:
        atomic_write(html, render_compare_html(result, obfuscated=obfuscate))
        print(f"iodiag: HTML comparison written to {html}", file=sys.stderr)
    if json_out:
        sys.stdout.write(json.dumps(result, indent=2, default=str) + "\n")
    else:
        sys.stdout.write(render_compare_text(result))
