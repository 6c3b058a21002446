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
        "A and B are what `iodiag report` takes: a Darshan log, a folder of logs (with --job-a, --job-b or\n"
        "--all when it holds several jobs), a scheduler job id with --log-tree, or an iodiag job (folder or id).\n\n"
        "Examples:\n\n"
        "  iodiag compare before.darshan after.darshan\n\n"
        "  iodiag compare logs/run1/ logs/run2/ --json > delta.json\n\n"
        "  iodiag compare before.darshan after.darshan --html delta.html --obfuscate\n\n"
        "  iodiag compare logs/ logs/ --job-a 26138 --job-b 26154   (a folder holding several jobs)\n\n"
        "  iodiag compare run1/ run2/ --all   (every log of each folder as one job)"
    ),
)
def compare_cmd(
    a: str = typer.Argument(..., help="The job before: Darshan log, folder of logs, scheduler job id or iodiag job id."),
    b: str = typer.Argument(..., help="The job after (same kinds as A)."),
    json_out: bool = typer.Option(False, "--json", help="Print the comparison as JSON (schema iodiag.compare/1)."),
    html: Optional[Path] = typer.Option(None, "--html", help="--html [PATH]: also write a self-contained HTML page (default: iodiag-compare.html here)."),
    obfuscate: bool = typer.Option(False, "--obfuscate", help="Replace paths, user, executable and host names with stable hashes in every output."),
    config_file: Optional[Path] = typer.Option(None, "--config", help="TOML file overriding detector thresholds."),
    log_tree: Optional[str] = typer.Option(None, "--log-tree", help="Site archive root for scheduler job ids (or $IODIAG_LOG_TREE)."),
    job_a: Optional[str] = typer.Option(None, "--job-a", help="When folder A holds several jobs: the job id to take from it."),
    job_b: Optional[str] = typer.Option(None, "--job-b", help="When folder B holds several jobs: the job id to take from it."),
    take_all: bool = typer.Option(False, "--all", help="Take every log of a folder (A, B or both; not one picked with --job-a/--job-b) as one job."),
) -> None:
    from .common import _print_choices

    run_guarded(lambda: _compare(a=a, b=b, json_out=json_out, html=html, obfuscate=obfuscate,
                                 config_file=config_file, log_tree=log_tree, job_a=job_a, job_b=job_b, take_all=take_all),
                on_ambiguous=_print_choices, json_errors="iodiag.compare/1" if json_out else False)


def _side(target: str, *, side: str, pick: str | None, take_all: bool, log_tree, cfg, progress: bool):
    """Load one side; a folder of several jobs names this side's option in its hint."""
    from ..errors import AmbiguousInput, InputNotFound
    from .common import build_profile_for

    is_dir = Path(target).is_dir()
    try:
        return build_profile_for(target, log_tree=log_tree, pick=pick, take_all=take_all and pick is None and is_dir,
                                 config=cfg, progress=progress)
    except AmbiguousInput as exc:
        raise AmbiguousInput(f"{side.upper()}: {exc.message}", choices=exc.choices,
                             hint=f"pick one with --job-{side} ID, or take every log as one job with --all") from None
    except InputNotFound as exc:
        if pick is not None and "no job with id" in exc.message:
            raise InputNotFound(exc.message, hint=f"run without --job-{side} to list the jobs it holds") from None
        raise


def _compare(*, a, b, json_out, html, obfuscate, config_file, log_tree, job_a=None, job_b=None, take_all=False) -> None:
    from ..recommend.rules import diagnose_with_advice as diagnose
    from ..config import load_config
    from ..reports.compare import compare_jobs, render_compare_html, render_compare_text, summarize_job

    from ..errors import UsageError

    for target, side, pick in ((a, "a", job_a), (b, "b", job_b)):  # usage errors before any slow reading
        if pick is not None and not Path(target).is_dir():
            raise UsageError(f"--job-{side} {pick}: {side.upper()} ({target}) is not a folder of logs",
                             hint=f"--job-{side} picks a job inside a folder holding several jobs")
    if html is not None:
        from .common import check_output

        check_output(html, "HTML comparison", option="--html")
    cfg = load_config(config_file)
    profs = []
    for target, side, pick in ((a, "a", job_a), (b, "b", job_b)):
        prof, _home = _side(target, side=side, pick=pick, take_all=take_all, log_tree=log_tree, cfg=cfg, progress=not json_out)
        found = diagnose(prof, cfg)
        # without obfuscation (which learns names from both jobs) a side is summarized at once, so that the
        # first job's tables are gone before the second is read: memory of one job, not two
        profs.append((prof if obfuscate else summarize_job(prof), found))
        del prof
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
        from .common import terminal_width

        sys.stdout.write(render_compare_text(result, width=terminal_width()))
