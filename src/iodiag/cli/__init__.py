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


def main(argv: list[str] | None = None) -> None:
    try:
        app(args=argv, standalone_mode=True)
    except IodiagError as exc:  # pragma: no cover - typer handles most exits itself
        print(f"iodiag: error: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
