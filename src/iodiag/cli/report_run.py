"""The body of `iodiag report`, without typer: the command's fast path (``cli/fast.py``) calls it directly."""

from __future__ import annotations

import sys

from .common import atomic_write, build_profile_for, terminal_columns, warm_allocator


def _report(*, target, json_out, json_file, html, html_path, config_file, site_config, mute, log_tree, job, take_all, obfuscate, color) -> None:
    _check_args(job=job, take_all=take_all, json_file=json_file, html_path=html_path)
    pre = _prefetch(target, job=job, take_all=take_all)
    warm_allocator()  # (imports NumPy, while the reader child decodes)
    try:
        _report_body(target=target, json_out=json_out, json_file=json_file, html=html, html_path=html_path,
                     config_file=config_file, site_config=site_config, mute=mute, log_tree=log_tree, job=job,
                     take_all=take_all, obfuscate=obfuscate, color=color, prefetched=pre)
    finally:
        if pre is not None:
            pre.close()


def _check_args(*, job, take_all, json_file, html_path) -> None:
    """What the command line alone shows is impossible, refused before the first log is read."""
    if job and take_all:
        from ..errors import UsageError

        raise UsageError(f"--job {job} and --all contradict each other (one job of the folder, or all its logs as one)",
                         hint="give one of them")
    if json_file is not None or html_path is not None:
        from .common import check_output

        if json_file is not None:
            check_output(json_file, "JSON report", option="--json-file")
        if html_path is not None:
            check_output(html_path, "HTML report", option="--html")


def _prefetch(target: str, *, job, take_all: bool):
    """When TARGET is a log file, start its reader child now, before NumPy, the configuration and the rest of the
    command are even imported (~60 ms of start-up; the child decodes without NumPy): the reading then overlaps
    them.  The read is adopted only if TARGET resolves to that very log with the default reader settings;
    otherwise it is stopped."""
    import os

    if job or take_all or not os.path.isfile(target) or not os.access(target, os.R_OK) or target.endswith("job.json"):
        return None
    from ..analyzers.readers.isolate import prefetch  # (no NumPy: the child decodes into plain buffers)

    return prefetch([target])


def _report_body(*, target, json_out, json_file, html, html_path, config_file, site_config, mute, log_tree, job, take_all,
                 obfuscate, color, prefetched) -> None:
    from ..config import load_config
    from ..service import diagnose_report, with_mutes

    cfg = with_mutes(load_config(config_file, site_config=site_config), mute)
    prof, home = build_profile_for(target, log_tree=log_tree, pick=job, take_all=take_all, config=cfg, progress=not json_out,
                                   while_reading=lambda: _imports_for_later(terminal=not json_out), prefetched=prefetched)
    findings, report = diagnose_report(profile=prof, config=cfg, obfuscate=obfuscate, home=home)
    from ..reports.json_report import render_json

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

    if color is None:  # colour on a terminal, unless $NO_COLOR is set (no-color.org) or the terminal is dumb
        import os

        color = sys.stdout.isatty() and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"
    use_color = bool(color)
    width = max(60, min(terminal_columns(), 160))
    sys.stdout.write(render_terminal(report, color=use_color, width=width))


def _imports_for_later(*, terminal: bool) -> None:
    """The modules diagnosing and rendering will import, imported while the reader child decodes the log
    (~20 ms of imports that would otherwise follow the read)."""
    from ..recommend import engine, rules  # noqa: F401  (rules imports every detector)
    from ..reports import json_report  # noqa: F401  (and the summary it computes)
    from ..recommend import features, model  # noqa: F401

    if terminal:
        from ..reports import advice, terminal  # noqa: F401

