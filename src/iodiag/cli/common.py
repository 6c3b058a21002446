"""Helpers shared by the CLI commands: error handling, atomic writes, HTML output."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Callable, NoReturn

from ..errors import AmbiguousInput, IodiagError, Interrupted


def warm_allocator() -> None:
    """Let glibc's malloc keep freed NumPy buffers of up to 32 MB for reuse instead of unmapping them.

    glibc serves allocations above its mmap threshold (128 KiB at start) with fresh mappings, and raises the
    threshold only once such a block is freed.  A report makes hundreds of temporary arrays of 0.1-30 MB; each
    fresh mapping costs a page fault per 4 KiB touched (~13,000 faults, ~20 ms of CPU on the 1024-process
    DXT log).  Freeing one untouched 32 MB array raises the threshold to its glibc maximum (32 MB) at once,
    which is what the first large free of a long run does anyway.  Larger arrays stay mappings, so the peak
    memory of very large traces is unchanged.  Elsewhere than glibc this does nothing harmful.
    """
    try:
        if not os.confstr("CS_GNU_LIBC_VERSION"):
            return
    except (ValueError, OSError, AttributeError):
        return
    import numpy as np

    block = np.empty((32 << 20) - (64 << 10), dtype="u1")  # below glibc's DEFAULT_MMAP_THRESHOLD_MAX; never touched
    del block


def terminal_columns(default: int = 100) -> int:
    """The terminal's width: $COLUMNS when set, else the terminal of stdout, stderr or stdin (in that order), else
    ``default`` (``shutil.get_terminal_size`` without importing shutil, and looking past a piped stdout)."""
    try:
        cols = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        cols = 0
    if cols > 0:
        return cols
    # stdout's terminal, else stderr's or stdin's: `iodiag ... | less` is read in the terminal stderr still shows
    for stream in (sys.__stdout__, sys.__stderr__, sys.__stdin__):
        try:
            cols = os.get_terminal_size(stream.fileno()).columns
        except (AttributeError, ValueError, OSError):
            cols = 0
        if cols > 0:
            return cols
    return default


def terminal_width() -> int:
    """The width every command's text is laid out for: the terminal's (or $COLUMNS), 60 to 160 cells."""
    return max(60, min(terminal_columns(), 160))


def use_color(flag: bool | None = None, stream=None) -> bool:
    """Colour or not: --color/--no-color when given, else only on a terminal, without $NO_COLOR (no-color.org)
    and not on a dumb terminal."""
    if flag is not None:
        return bool(flag)
    stream = stream or sys.stdout
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):
        tty = False
    return tty and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"


def rich_console(*, stderr: bool = False, color: bool | None = None):
    """A rich Console that keeps to the same rules: $NO_COLOR, --no-color, and the width of ``terminal_width``."""
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    on = use_color(color, stream)
    return Console(stderr=stderr, highlight=False, no_color=not on, color_system="auto" if on else None,
                   width=terminal_width() if not stream.isatty() else None)


def check_output(path, what: str, *, option: str | None = None) -> Path:
    """Refuse, before any work starts, an output path that cannot be written: a folder where a file goes, a file
    where a folder should be, a folder without write permission.  Returns the path.  (The folders it needs may
    not exist yet: the nearest existing one must be a writable folder.)"""
    from ..errors import UsageError

    path = Path(path)
    name = f"{option} {path}" if option else str(path)
    if path.is_dir():
        raise UsageError(f"{name}: is a folder, not a file for the {what}", hint="give a file name (e.g. inside that folder)")
    _check_writable_ancestor(path.parent, name, what, "written")
    return path


def check_folder(path, what: str, *, option: str | None = None) -> Path:
    """Refuse, before any work starts, a folder to create or fill that cannot be one: an existing file, a path
    under a file, no write permission where it would be made.  Returns the path."""
    from ..errors import UsageError

    path = Path(path)
    name = f"{option} {path}" if option else str(path)
    if path.exists() and not path.is_dir():
        raise UsageError(f"{name}: is a file, not a folder for the {what}", hint="choose another path")
    _check_writable_ancestor(path, name, what, "made")
    return path


def _check_writable_ancestor(start: Path, name: str, what: str, verb: str) -> None:
    """The nearest existing folder at or above ``start`` must be a folder this user can write into."""
    from ..errors import UsageError

    anc = start
    while not anc.exists() and anc != anc.parent:
        anc = anc.parent
    if anc.exists() and not anc.is_dir():
        raise UsageError(f"{name}: {anc} is a file, not a folder, so the {what} cannot be {verb} under it",
                         hint="choose a path whose folders are folders")
    if not os.access(anc, os.W_OK | os.X_OK):
        raise UsageError(f"{name}: cannot write the {what} into {anc} (permission denied)",
                         hint="choose a folder you can write to")


def check_positive(value, option: str, *, zero: bool = False) -> None:
    """A count given on the command line must be at least 1 (or 0 when ``zero``)."""
    from ..errors import UsageError

    if value is not None and value < (0 if zero else 1):
        raise UsageError(f"{option} {value}: must be {'0 or more' if zero else 'at least 1'}",
                         hint=f"give {option} a {'non-negative' if zero else 'positive'} whole number")


def fail(message: str, *, hint: str | None = None, code: int = 1) -> NoReturn:
    print(f"iodiag: error: {message}" + (f" — {hint}" if hint else ""), file=sys.stderr)
    raise SystemExit(code)


_JSON_ERRORS: str | None = None  # the schema a failing --json command prints its errors object under


def _json_error(code: int, message: str, hint: str | None) -> None:
    """With --json, a failure still prints one object on stdout (its command's schema, an ``errors`` list)."""
    import json

    err = {"kind": "error", "cause": message, "exit_code": code}
    if hint:
        err["next_step"] = hint
    obj = {"schema": _JSON_ERRORS, "errors": [err]}
    if _JSON_ERRORS == "iodiag.report/1":
        obj = {"schema": _JSON_ERRORS, "job": None, "volumes": None, "findings": [], "errors": [err]}
    sys.stdout.write(json.dumps(obj, indent=2) + "\n")


def run_guarded(fn: Callable[[], None], *, on_ambiguous: Callable[[AmbiguousInput], None] | None = None,
                json_errors: bool | str = False) -> None:
    """Run a command body; turn any failure into one line on stderr and an exit code, never a traceback.

    ``IodiagError`` carries its own code and next step; anything else is a bug of ours: one line naming it and
    how to see the traceback (``IODIAG_DEBUG=1``), exit 1.  With ``json_errors`` (a --json command) the error is
    also printed on stdout as an object (schema ``json_errors`` when a string, else iodiag.report/1), so a
    script reading stdout gets an ``errors`` list.
    """
    global _JSON_ERRORS
    _JSON_ERRORS = json_errors if isinstance(json_errors, str) else "iodiag.report/1"
    try:
        fn()
    except AmbiguousInput as exc:
        if on_ambiguous:
            on_ambiguous(exc)
            if exc.hint:
                print(f"iodiag: {exc.hint}", file=sys.stderr)
        else:
            print(f"iodiag: error: {exc}", file=sys.stderr)
        if json_errors:
            _json_error(exc.exit_code, exc.message, exc.hint)
        raise SystemExit(exc.exit_code) from None
    except Interrupted as exc:  # Ctrl-C, after the command kept what it could: one line, what was kept
        print(f"iodiag: {exc}", file=sys.stderr)
        raise SystemExit(exc.exit_code) from None
    except IodiagError as exc:
        print(f"iodiag: error: {exc}", file=sys.stderr)
        if json_errors:
            _json_error(exc.exit_code, exc.message, exc.hint)
        raise SystemExit(exc.exit_code) from None
    except KeyboardInterrupt:
        print("iodiag: interrupted (nothing was kept)", file=sys.stderr)
        raise SystemExit(130) from None
    except BrokenPipeError:
        # stdout closed early (e.g. piped into head): not an error of ours
        try:
            sys.stdout.close()
        except Exception:  # noqa: BLE001
            pass
        os._exit(0)
    except SystemExit:
        raise
    except ModuleNotFoundError as exc:  # an optional dependency this command needs is not installed
        extra = _EXTRA_OF.get((exc.name or "").split(".")[0], "all")
        msg, hint = f"this command needs the Python package {exc.name!r}", f"pip install 'iodiag[{extra}]'"
        print(f"iodiag: error: {msg} — {hint}", file=sys.stderr)
        if json_errors:
            _json_error(10, msg, hint)
        raise SystemExit(10) from None
    except Exception as exc:  # noqa: BLE001 - the CLI is the one place that turns every failure into a line
        import click

        if os.environ.get("IODIAG_DEBUG") or isinstance(exc, (click.exceptions.Exit, click.exceptions.Abort,
                                                                click.exceptions.ClickException)):
            raise  # typer.Exit and usage errors are the command line's own way out
        msg = f"unexpected {type(exc).__name__}: {exc}"
        hint = "this is a bug in iodiag: rerun with IODIAG_DEBUG=1 to see where, and report it with that output"
        print(f"iodiag: error: {msg} — {hint}", file=sys.stderr)
        if json_errors:
            _json_error(1, msg, hint)
        raise SystemExit(1) from None


def guarded(fn=None, *, schema: str | None = None):
    """A typer command whose body runs under ``run_guarded``; with ``json_out=True`` or ``as_json=True`` in its
    arguments its errors are also printed as JSON, under ``schema`` (``@guarded(schema="iodiag.sweep/1")``;
    plain ``@guarded``: iodiag.report/1)."""
    import functools

    def wrap(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            as_json = bool(kwargs.get("json_out") or kwargs.get("as_json"))
            run_guarded(lambda: fn(*args, **kwargs), json_errors=(schema or True) if as_json else False)

        return wrapper

    return wrap(fn) if fn is not None else wrap


# optional dependency -> the extra of pyproject.toml that installs it
_EXTRA_OF = {"pyarrow": "site", "pandas": "site", "scipy": "sweep", "matplotlib": "sweep", "sklearn": "ml",
             "jinja2": "html", "dask": "dask", "distributed": "dask", "xarray": "dask", "zarr": "dask",
             "netCDF4": "dask", "h5py": "dask", "bokeh": "dask", "dask_jobqueue": "jobqueue"}


def atomic_write(path: Path, data: str | bytes) -> None:
    """Write via a temporary file in the same folder and rename: never a half-written file."""
    path = Path(path)
    try:
        if path.is_dir():
            raise IsADirectoryError(21, "is a folder, not a file")
        anc = path.parent
        while not anc.exists() and anc != anc.parent:
            anc = anc.parent
        if anc.exists() and not anc.is_dir():
            raise NotADirectoryError(20, f"{anc} is a file, not a folder")
        path.parent.mkdir(parents=True, exist_ok=True)
        import tempfile  # (only when writing: ~3 ms of imports a report to stdout does without)

        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise IodiagError(f"{path}: cannot write ({exc.strerror})", hint="choose a writable location") from None
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data.encode() if isinstance(data, str) else data)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp creates 0600; a report is as shareable as any file
        os.replace(tmp, path)
    except OSError as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise IodiagError(f"{path}: cannot write ({exc.strerror})", hint="choose a writable location") from None


def write_html(profile, findings, report, *, html_path: Path | None, home: Path, obfuscate: bool, config=None) -> Path:
    try:
        from ..reports.html import render_html
    except ImportError as exc:
        raise IodiagError(f"the HTML report needs jinja2 ({exc})", hint="pip install 'iodiag[html]'") from None
    home = Path(home)
    if html_path is None:
        name = f"iodiag-report-{report['job']['id']}.html".replace("/", "_")
        target_dir = home if home.is_dir() and os.access(home, os.W_OK) else Path.cwd()
        html_path = target_dir / name
    html_path = Path(html_path).absolute()
    # a job recorded by `iodiag run` keeps Dask's own performance report: link it from the page
    perf = sorted((home / "dask").glob("performance-report*.html")) if home.is_dir() else []
    href = os.path.relpath(perf[0], html_path.parent) if perf else None
    page = render_html(profile, findings, report=report, obfuscate=obfuscate, dask_report_href=href, config=config)
    atomic_write(html_path, page)
    return html_path


def build_profile_for(target: str, *, log_tree: str | None, pick: str | None, take_all: bool, config, progress: bool,
                      while_reading=None, prefetched=None):
    """Resolve TARGET through the service layer, with a progress bar on a terminal. Returns (profile, home)."""
    from ..service import load_target

    bar: list = []

    def on_logs(n: int) -> None:
        if progress and n > 20 and sys.stderr.isatty():
            from rich.progress import Progress

            b = Progress(transient=True, console=_stderr_console())
            b.start()
            bar.extend([b, b.add_task("reading logs", total=n)])

    try:
        got = load_target(target=target, log_tree=log_tree, pick=pick, take_all=take_all, config=config,
                          on_logs=on_logs, progress=lambda n: bar and bar[0].advance(bar[1], n),
                          while_reading=while_reading, prefetched=prefetched)
    finally:
        if bar:
            bar[0].stop()
    return got.profile, got.home


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
    from ..reports.textout import Col, plain_table, wrap_plain

    for line in wrap_plain(f"iodiag: {exc.message}:", terminal_width(), hang=2):
        print(line, file=sys.stderr)
    rows = []
    for c in exc.choices:
        start = datetime.fromtimestamp(c.start_s, tz=timezone.utc).strftime("%Y-%m-%d %H:%M") if c.start_s else "?"
        exes = ", ".join(e.rsplit("/", 1)[-1] for e in c.exes) or "?"  # program names: the paths are in the report
        rows.append([c.job_id, str(c.processes), start, exes, str(len(c.unreadable)) if c.unreadable else "-"])
    for line in plain_table(["job id", "processes", "start (UTC)", "programs", "unreadable"], rows,
                            width=terminal_width(), right=[False, True, False, False, True],
                            specs=[Col(), Col(2), Col(3), Col(1, cut="middle", min=16), Col(4)], indent=2):
        print(line, file=sys.stderr)
