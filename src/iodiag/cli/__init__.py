"""Command line: thin typer commands over keyword-only functions.

This package is the only place that prints, exits or reads argv.  Each
command module registers itself on ``app``; heavy imports happen inside the
command functions so that ``iodiag --help`` and ``iodiag report`` start fast.
"""

from __future__ import annotations

import sys

from ..errors import IodiagError
from .app import app
from . import report as _report  # noqa: F401  (registers commands)
from . import run as _run, jobs as _jobs  # noqa: F401,E401  (registers `iodiag run` and `iodiag jobs`)
from . import workload as _workload, sweep as _sweep  # noqa: F401,E401  (registers commands)
from . import compare as _compare  # noqa: F401
from . import site as _site  # noqa: F401  (registers `iodiag site`)
from . import recommend as _recommend, verify as _verify  # noqa: F401,E401  (`iodiag recommend JOB|train|evaluate`, `iodiag verify`)


# `--html [PATH]` is one grammar everywhere: alone it writes the page to a default place, with a path it writes
# it there.  report's default place is the job's folder (its --html flag); compare and site report get a file
# name in the current folder.  (Click options take a value or none, not an optional one: normalised here.)
_HTML_DEFAULT = {"compare": "iodiag-compare.html", "site": "iodiag-site-report.html"}


def normalize_html(argv: list[str]) -> list[str]:
    out = list(argv)
    cmd = next((a for a in out if not a.startswith("-")), None)
    for i, a in enumerate(out):
        if a == "--":
            break
        if a != "--html":
            continue
        nxt = out[i + 1] if i + 1 < len(out) else None
        has_path = nxt is not None and not nxt.startswith("-") and nxt.endswith((".html", ".htm"))
        if cmd == "report" and has_path:
            out[i:i + 2] = [f"--html-path={nxt}"]
        elif cmd in _HTML_DEFAULT and not has_path:
            out[i] = f"--html={_HTML_DEFAULT[cmd]}"
        break
    return out


def main(argv: list[str] | None = None) -> None:
    argv = normalize_html(sys.argv[1:] if argv is None else argv)
    try:
        app(args=argv, standalone_mode=True)
    except IodiagError as exc:  # pragma: no cover - typer handles most exits itself
        print(f"iodiag: error: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
