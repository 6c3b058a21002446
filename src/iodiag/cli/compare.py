"""`iodiag compare A B`: what changed between two jobs (before/after a change)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

import typer

from ..errors import InputNotFound, IodiagError
from .app import app

LOG_SUFFIXES = (".darshan",)


def resolve_logs(arg: str) -> list[str]:
    """A Darshan log path, or a folder holding the logs of one job (searched recursively).

    The lead's shared resolver (job ids, scheduler ids) replaces this when it lands.
    """
    p = Path(arg)
    if p.is_file():
        return [str(p)]
    if p.is_dir():
        logs = sorted(str(x) for x in p.rglob("*") if x.is_file() and x.name.endswith(LOG_SUFFIXES))
        if not logs:
            raise InputNotFound(f"{p}: folder holds no Darshan log (*.darshan)",
                                hint="point at a .darshan file or at the folder of one job's logs")
        return logs
    raise InputNotFound(f"{arg}: no such file or folder", hint="give a Darshan log (.darshan) or a folder of one job's logs")


def _load(arg: str, cfg):
    from ..analyzers.detectors import diagnose
    from ..analyzers.load import load_job

    prof = load_job(resolve_logs(arg), config=cfg)
    return prof, diagnose(prof, cfg)


@app.command("compare")
def compare_cmd(
    a: str = typer.Argument(..., help="the job before: a Darshan log or a folder of one job's logs"),
    b: str = typer.Argument(..., help="the job after: a Darshan log or a folder of one job's logs"),
    json_out: bool = typer.Option(False, "--json", help="print the comparison as JSON (schema iodiag.compare/1)"),
    html: Optional[Path] = typer.Option(None, "--html", help="also write a self-contained HTML page to this path"),
    obfuscate: bool = typer.Option(False, "--obfuscate", help="replace paths, user, executable and host names with stable hashes in every output"),
    config: Optional[Path] = typer.Option(None, "--config", help="TOML file overriding thresholds"),
) -> None:
    """Show what changed between two jobs: wall time, bytes, operations, metadata operations, findings appeared/resolved.

    Examples:

      iodiag compare before.darshan after.darshan

      iodiag compare logs/run1/ logs/run2/ --json > delta.json

      iodiag compare before.darshan after.darshan --html delta.html --obfuscate
    """
    try:
        from ..config import load_config
        from ..reports.compare import compare_jobs, render_compare_html, render_compare_text

        cfg = load_config(config)
        prof_a, find_a = _load(a, cfg)
        prof_b, find_b = _load(b, cfg)
        if obfuscate:
            from ..reports.obfuscate import Obfuscator, obfuscate_findings, obfuscate_profile

            obf = Obfuscator()
            obf.learn(prof_a)
            obf.learn(prof_b)
            prof_a, prof_b = obfuscate_profile(prof_a, obf), obfuscate_profile(prof_b, obf)
            find_a, find_b = obfuscate_findings(find_a, obf), obfuscate_findings(find_b, obf)
        result = compare_jobs(prof_a, prof_b, find_a, find_b)
        if html is not None:
            try:
                html.write_text(render_compare_html(result, obfuscated=obfuscate), encoding="utf-8")
            except OSError as exc:
                raise InputNotFound(f"{html}: cannot write the HTML page: {exc.strerror}",
                                    hint="choose a writable path for --html") from None
        if json_out:
            sys.stdout.write(json.dumps(result, indent=2, default=str) + "\n")
        else:
            sys.stdout.write(render_compare_text(result))
            if html is not None:
                sys.stdout.write(f"HTML written to {html}\n")
    except IodiagError as exc:
        typer.echo(f"iodiag: error: {exc}", err=True)
        raise typer.Exit(exc.exit_code)
