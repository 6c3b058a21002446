"""Helpers shared by the CLI commands: error handling, atomic writes, HTML output."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Callable, NoReturn

from ..errors import AmbiguousInput, IodiagError


def fail(message: str, *, hint: str | None = None, code: int = 1) -> NoReturn:
    print(f"iodiag: error: {message}" + (f" — {hint}" if hint else ""), file=sys.stderr)
    raise SystemExit(code)


def run_guarded(fn: Callable[[], None], *, on_ambiguous: Callable[[AmbiguousInput], None] | None = None) -> None:
    """Run a command body; turn IodiagError into one line on stderr and its exit code."""
    try:
        fn()
    except AmbiguousInput as exc:
        if on_ambiguous:
            on_ambiguous(exc)
            if exc.hint:
                print(f"iodiag: {exc.hint}", file=sys.stderr)
        else:
            print(f"iodiag: error: {exc}", file=sys.stderr)
        raise SystemExit(exc.exit_code) from None
    except IodiagError as exc:
        print(f"iodiag: error: {exc}", file=sys.stderr)
        raise SystemExit(exc.exit_code) from None
    except KeyboardInterrupt:
        print("iodiag: interrupted", file=sys.stderr)
        raise SystemExit(130) from None
    except BrokenPipeError:
        # stdout closed early (e.g. piped into head): not an error of ours
        try:
            sys.stdout.close()
        except Exception:  # noqa: BLE001
            pass
        os._exit(0)


def atomic_write(path: Path, data: str | bytes) -> None:
    """Write via a temporary file in the same folder and rename: never a half-written file."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
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


def write_html(profile, findings, report, *, html_path: Path | None, home: Path, obfuscate: bool) -> Path:
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
    page = render_html(profile, findings, report=report, obfuscate=obfuscate, dask_report_href=href)
    atomic_write(html_path, page)
    return html_path
