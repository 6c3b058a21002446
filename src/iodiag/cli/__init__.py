"""Command line: thin typer commands over keyword-only functions.

This package is the only place that prints, exits or reads argv.  Each
command module registers itself on ``app``; heavy imports happen inside the
command functions so that ``iodiag --help`` and ``iodiag report`` start fast,
and ``iodiag report`` with its usual options skips typer altogether
(``cli/fast.py``).
"""

from __future__ import annotations

import sys

from ..errors import IodiagError

_COMMAND_MODULES = ("report", "run", "jobs", "workload", "sweep", "compare", "site", "recommend", "verify")


def build_app():
    """The typer application with every command registered (each command module registers on ``app``)."""
    import importlib

    from .app import app

    for name in _COMMAND_MODULES:
        importlib.import_module(f"{__name__}.{name}")
    return app


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
    from .fast import dispatch

    fast = dispatch(argv)
    if fast is not None:  # `report` with options it can parse: no typer (see cli/fast.py)
        global _FAST_DONE
        fast()
        _FAST_DONE = True
        return
    app = build_app()
    try:
        app(args=argv, standalone_mode=True)
    except IodiagError as exc:  # pragma: no cover - typer handles most exits itself
        print(f"iodiag: error: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)


_FAST_DONE = False  # the last main() ran a fast-path command to its end


def entry() -> None:
    """The ``iodiag`` console script: ``main()``; after a fast-path ``report`` (which starts no thread, child or
    temporary it would need to clean up), the process leaves as soon as its output is flushed, without the
    interpreter's teardown (~15 ms of CPU freeing modules and arrays).  Every other command exits normally."""
    main()
    if not _FAST_DONE:
        return
    import os

    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BrokenPipeError:  # the reader of stdout went away (e.g. `| head`): not an error of ours
        pass
    os._exit(0)

