"""`iodiag report TARGET [options]` without building the typer application.

Importing typer and click and registering every command costs ~40 ms of CPU, a tenth of a report on a large
log and more than decoding a small one.  The common invocations of ``report`` are parsed here from the same
option table as the typer command (a test checks the two against each other, option by option, and that both
paths hand ``_report`` the same arguments).  Anything this parser is not sure about — ``--help``, an unknown
or repeated option, a missing value, ``--``, shell completion — returns ``None`` and goes through typer, which
then gives its usual answer or error.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable

# option -> (keyword of _report, kind); kind: "flag" (True), "noflag" (False), "str", "path", "list"
REPORT_OPTIONS: dict[str, tuple[str, str]] = {
    "--json": ("json_out", "flag"),
    "--json-file": ("json_file", "path"),
    "--html": ("html", "flag"),
    "--html-path": ("html_path", "path"),
    "--config": ("config_file", "path"),
    "--site-config": ("site_config", "path"),
    "--mute": ("mute", "list"),
    "--log-tree": ("log_tree", "str"),
    "--job": ("job", "str"),
    "--all": ("take_all", "flag"),
    "--obfuscate": ("obfuscate", "flag"),
    "--color": ("color", "flag"),
    "--no-color": ("color", "noflag"),
}

REPORT_DEFAULTS: dict[str, Any] = {
    "json_out": False, "json_file": None, "html": False, "html_path": None, "config_file": None,
    "site_config": None, "mute": [], "log_tree": None, "job": None, "take_all": False, "obfuscate": False,
    "color": None,
}


def parse_report(args: list[str]) -> dict[str, Any] | None:
    """The typer command's arguments for ``report`` ``args`` (after the word 'report'), or None to use typer."""
    kw: dict[str, Any] = dict(REPORT_DEFAULTS, mute=[])
    seen: set[str] = set()
    target = None
    i = 0
    while i < len(args):
        a = args[i]
        i += 1
        if not a.startswith("-"):
            if target is not None:
                return None  # a second positional: typer's error
            target = a
            continue
        name, eq, value = a.partition("=")
        spec = REPORT_OPTIONS.get(name)
        if spec is None:
            return None  # --help, short options, "--", unknown options
        key, kind = spec
        if kind != "list" and key in seen:
            return None  # repeated (or --color with --no-color): typer decides
        seen.add(key)
        if kind in ("flag", "noflag"):
            if eq:
                return None
            kw[key] = kind == "flag"
            continue
        if not eq:
            if i >= len(args):
                return None
            value = args[i]
            i += 1
        if not value or value.startswith("-"):
            return None
        if kind == "list":
            kw[key].append(value)
        else:
            kw[key] = Path(value) if kind == "path" else value
    if target is None:
        return None
    kw["target"] = target
    return kw


def dispatch(argv: list[str]) -> Callable[[], None] | None:
    """A function running the command ``argv`` names, when the fast path can parse it; else None."""
    if not argv or argv[0] != "report" or any(k.endswith("_COMPLETE") for k in os.environ):
        return None
    kw = parse_report(argv[1:])
    if kw is None:
        return None

    def run() -> None:
        from .common import _print_choices, run_guarded
        from .report_run import _report

        html = kw.pop("html") or kw["html_path"] is not None
        run_guarded(lambda: _report(html=html, **kw), on_ambiguous=_print_choices, json_errors=kw["json_out"])

    return run
