"""The embedded collector: an LD_PRELOAD library of iodiag's own.

For machines without a Darshan runtime.  ``prepare(trace_dir)`` builds the
interposition library from its C source (once, into a cache keyed by the
source hash) with the system C compiler and returns the environment a
workload needs to be traced; ``iodiag.analyzers.readers.embedded`` reads the
traces back into the same ``JobProfile`` tables Darshan logs produce.

The C source ships with the package (``iodiag_preload.c``); no binary is ever
committed or shipped.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from ...cache import cache_root
from ...errors import CollectorError
from .format import DEFAULT_MAX_RECORDS, FORMAT_VERSION

__all__ = ["prepare", "version", "build", "library_path", "default_excludes", "SOURCE"]

SOURCE = Path(__file__).with_name("iodiag_preload.c")
LIB_NAME = "libiodiag_preload.so"
COLLECTOR_VERSION = "1.0"
CFLAGS = ("-O2", "-fPIC", "-shared", "-fvisibility=hidden", "-fno-delete-null-pointer-checks",
          "-U_FORTIFY_SOURCE", "-D_GNU_SOURCE", "-Wall")
LIBS = ("-ldl", "-lpthread")

# Like Darshan's default exclusions: system trees and pseudo file systems.
SYSTEM_EXCLUDES = ("/proc/", "/sys/", "/dev/", "/etc/", "/usr/", "/lib/", "/lib64/", "/bin/", "/sbin/",
                   "/boot/", "/run/", "/var/run/", "/snap/", "/opt/conda/pkgs/")


def _source_hash() -> str:
    return hashlib.sha256(SOURCE.read_bytes() + " ".join(CFLAGS + LIBS).encode()).hexdigest()[:16]


def version() -> str:
    """Collector name-independent version: format, library release and source hash."""
    return f"{COLLECTOR_VERSION}+fmt{FORMAT_VERSION}.{_source_hash()[:8]}"


def library_path() -> Path:
    """Where the library for the current source lives (built or not)."""
    return cache_root() / "embedded" / _source_hash() / LIB_NAME


def _find_compiler() -> str | None:
    for cand in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if cand:
            found = shutil.which(cand.split()[0])
            if found:
                return found
    return None


def build(*, force: bool = False) -> Path:
    """Compile the interposition library if the cache lacks it; return its path.

    Safe to call from several processes at once: each compiles into a private
    temporary file and renames it into place.
    """
    lib = library_path()
    if lib.is_file() and not force:
        return lib
    cc = _find_compiler()
    if cc is None:
        raise CollectorError(
            f"the embedded collector needs a C compiler to build {SOURCE.name}, and none was found (tried $CC, cc, gcc, clang)",
            hint="install one (Debian/Ubuntu: apt-get install gcc; RHEL: dnf install gcc) or set CC=/path/to/cc",
        )
    try:
        lib.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CollectorError(f"cannot create the collector cache {lib.parent}: {exc.strerror}",
                             hint="set IODIAG_CACHE_DIR to a writable directory") from exc
    fd, tmp = tempfile.mkstemp(prefix=".build-", suffix=".so", dir=lib.parent)
    os.close(fd)
    cmd = [cc, *CFLAGS, "-o", tmp, str(SOURCE), *LIBS]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            first = (proc.stderr.strip().splitlines() or ["no output"])[0]
            raise CollectorError(
                f"building the embedded collector with {cc} failed: {first}",
                hint=f"run by hand to see every message: {' '.join(cmd)}",
            )
        os.replace(tmp, lib)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return lib


def default_excludes() -> list[str]:
    """Path prefixes never traced: system trees, this Python's installation, the collector's cache.

    Python's startup and imports stat and open thousands of files under
    ``sys.prefix``; like Darshan's default exclusions they are not the
    workload's I/O.
    """
    out = list(SYSTEM_EXCLUDES)
    out.append(str(cache_root() / "embedded") + "/")  # the loader reading this library is not the workload's I/O
    for p in {sys.prefix, sys.base_prefix, sys.exec_prefix}:
        real = os.path.realpath(p)
        for q in {p, real}:
            q = q.rstrip("/") + "/"
            if q != "/" and q not in out:
                out.append(q)
    return out


def prepare(trace_dir: Path, *, max_records: int | None = None, exclude: list[str] | None = None) -> dict[str, str]:
    """Build the library if needed and return the variables to add to a workload's environment.

    ``trace_dir`` receives one trace per process.  ``max_records`` caps each
    process's trace (records past it are counted as dropped and the job is
    marked partial).  ``exclude`` replaces the default path prefixes that are
    never traced.
    """
    trace_dir = Path(trace_dir).resolve()
    if max_records is not None and max_records <= 0:
        raise CollectorError(f"max_records must be positive, got {max_records}", hint="pass a record cap above 0, or None for the default")
    try:
        trace_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CollectorError(f"cannot create the trace folder {trace_dir}: {exc.strerror}",
                             hint="choose a writable job folder") from exc
    if any(ch in str(library_path()) for ch in " :"):
        raise CollectorError(f"the collector library path {library_path()} contains a space or ':', which LD_PRELOAD cannot carry",
                             hint="set IODIAG_CACHE_DIR to a folder whose path has neither")
    lib = build()
    excludes = list(exclude) if exclude is not None else default_excludes()
    if any(":" in e for e in excludes):
        raise CollectorError("an excluded path prefix contains ':'", hint="rename the folder or drop it from the exclusions")
    cap = int(max_records or DEFAULT_MAX_RECORDS)
    meta = {
        "collector": "embedded", "collector_version": version(), "library": str(lib),
        "max_records": cap, "exclude": excludes,
    }
    (trace_dir / "collector.json").write_text(json.dumps(meta, indent=1))
    try:  # mount table, so that the reader can name file systems
        shutil.copyfile("/proc/self/mounts", trace_dir / "mounts.txt")
    except OSError:
        pass
    preload = str(lib)
    existing = os.environ.get("LD_PRELOAD", "").strip()
    if existing and preload not in existing.replace(":", " ").split():
        preload = f"{preload} {existing}"
    return {
        "LD_PRELOAD": preload,
        "IODIAG_TRACE_DIR": str(trace_dir),
        "IODIAG_MAX_RECORDS": str(cap),
        "IODIAG_EXCLUDE": ":".join(excludes),
    }
