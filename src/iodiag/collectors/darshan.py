"""Finding a Darshan runtime and setting it up for one run.

Discovery (:func:`find_runtime`) looks where HPC users and admins put Darshan,
in this order, and remembers every place it tried so that the error can list
them:

1. ``--darshan-lib PATH`` (a ``libdarshan.so`` or a folder holding one);
2. ``$IODIAG_DARSHAN_LIB``, then a libdarshan.so named in ``$DARSHAN_PRELOAD``
   or ``$LD_PRELOAD`` (a site module or the user already preloading it);
3. ``darshan-config --libdir`` of the ``darshan-config`` found on ``PATH``
   (what ``module load darshan`` or ``spack load darshan-runtime`` provides);
4. install-root variables set by modules and package managers
   (``$DARSHAN_ROOT``, ``$DARSHAN_RUNTIME_ROOT`` (spack), ``$EBROOTDARSHAN``
   (EasyBuild), ``$DARSHAN_HOME``, ``$DARSHAN_PREFIX``, ``$DARSHAN_BASE_DIR``,
   ``$DARSHAN_INSTALL``);
5. the folders of ``$LD_LIBRARY_PATH``;
6. standard prefixes (``/opt/darshan*``, ``/usr/local``, ``/usr``, ``~/.local``).

A ``libdarshan-util.so`` (what PyDarshan ships, for *reading* logs) is never
taken for the runtime.

Per-run set-up (:func:`darshan_environment`) follows darshan-runtime's
documentation (darshan-runtime/doc/darshan-runtime.rst, "Configuring Darshan
library at runtime"):

- ``LD_PRELOAD`` = libdarshan.so (prepended to any existing preload) and
  ``DARSHAN_ENABLE_NONMPI=1`` (Python and other non-MPI programs);
- logs go into the job folder: ``DARSHAN_LOGPATH`` (plus every variable named
  by ``darshan-config --log-path-by-env``, which take precedence inside
  Darshan).  Builds without ``--with-log-path-by-env`` write to
  ``LOGPATH/<year>/<month>/<day>/`` and need those folders to exist, so they
  are created for today and tomorrow.  ``DARSHAN_LOGFILE`` is removed: it names
  one file, which every process of a multi-process run would overwrite;
- ``DARSHAN_MMAP_LOGPATH`` = ``logs/mmap``: a process killed before it can
  write its log leaves its mmap log there, which iodiag recovers;
- one job id for every process: ``DARSHAN_JOBID`` names the variable that holds
  the id (``IODIAG_DARSHAN_JOBID``, a number, since Darshan parses it with
  ``%d``), so that all per-process logs of the run carry the same ``id<N>``;
- ``DARSHAN_CONFIG_PATH`` = a generated ``darshan.conf`` in the job folder
  (starting from the site's config file when one was set) raising
  ``MAX_RECORDS`` for POSIX/STDIO/HDF5 (default 1,024 per process cuts a Zarr
  store of thousands of chunk files), ``MODMEM``/``NAMEMEM`` to hold them,
  ``NAME_EXCLUDE`` for the interpreter's own library folders (imports would
  otherwise drown the workload's files), ``APP_EXCLUDE`` for helper programs
  (``uname`` spawned by ``platform``), and with DXT on, ``MOD_ENABLE
  DXT_POSIX,DXT_MPIIO`` with ``MAX_RECORDS`` of the DXT modules raised (DXT
  memory = records x 1 KiB, 2 MiB by default).
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

from ..errors import CollectorError

LIB_NAME = "libdarshan.so"
JOBID_VAR = "IODIAG_DARSHAN_JOBID"
ROOT_VARS = ("DARSHAN_ROOT", "DARSHAN_RUNTIME_ROOT", "EBROOTDARSHAN", "DARSHAN_HOME", "DARSHAN_PREFIX",
             "DARSHAN_BASE_DIR", "DARSHAN_INSTALL", "DARSHAN_RUNTIME_DIR")
STANDARD_PREFIXES = ("/opt/darshan", "/opt/darshan-runtime", "/opt/darshan*", "/usr/local", "/usr",
                     "~/.local", "~/darshan", "~/darshan*")
LIB_SUBDIRS = ("lib", "lib64", "lib/x86_64-linux-gnu", "lib/aarch64-linux-gnu", "lib/powerpc64le-linux-gnu")


@dataclass(frozen=True)
class DarshanSettings:
    """Per-run Darshan settings written to the generated config file."""

    max_records: int = 16384  # per process for POSIX, STDIO, H5F, H5D, MPI-IO (Darshan: 1024)
    modmem_mib: int = 64  # all modules together (Darshan: 4 MiB)
    namemem_mib: int = 16  # record names (Darshan: 1 MiB)
    dxt_mib: int = 64  # trace memory per DXT module (Darshan: 2 MiB)
    exclude_interpreter: bool = True
    app_exclude: tuple[str, ...] = ("^uname$",)


@dataclass
class DarshanRuntime:
    lib: Path
    version: str | None = None
    config_tool: Path | None = None
    log_path_by_env: tuple[str, ...] = ()
    mmap_logs: bool | None = None  # None: unknown (no darshan-config)
    found_by: str = ""
    tried: list[str] = field(default_factory=list)

    @property
    def prefix(self) -> Path:
        return self.lib.parent.parent

    def to_dict(self) -> dict:
        return {"lib": str(self.lib), "version": self.version, "config_tool": str(self.config_tool) if self.config_tool else None,
                "log_path_by_env": list(self.log_path_by_env), "mmap_logs": self.mmap_logs, "found_by": self.found_by}


_RUNTIME_SYMBOL = b"darshan_core_register_module"  # defined by darshan-runtime's core, not by darshan-util
_UTIL_SYMBOL = b"darshan_log_open"  # darshan-util's log reader (pydarshan ships it as libdarshan-util.so)


def _lib_kind(path: Path) -> str | None:
    """"runtime" for a darshan-runtime library, "util" for darshan-util's, "elf" for another ELF file, None
    when not a readable ELF file (by the symbol names in the file, read in blocks)."""
    try:
        if not path.is_file():
            return None
        with open(path, "rb") as fh:
            if fh.read(4) != b"\x7fELF":
                return None
            fh.seek(0)
            util, tail = False, b""
            while block := fh.read(1 << 20):
                buf = tail + block
                if _RUNTIME_SYMBOL in buf:
                    return "runtime"
                util = util or _UTIL_SYMBOL in buf
                tail = buf[-64:]
        return "util" if util else "elf"
    except OSError:
        return None


def _is_runtime_lib(path: Path) -> bool:
    return _lib_kind(path) in ("runtime", "elf")  # "elf": a stripped or unusual build still gets its chance


def _lib_in(folder: Path) -> Path | None:
    cand = folder / LIB_NAME
    return cand if _is_runtime_lib(cand) else None


def _lib_under_prefix(prefix: Path) -> Path | None:
    for sub in LIB_SUBDIRS:
        lib = _lib_in(prefix / sub)
        if lib:
            return lib
    return None


def _run_config(tool: Path, *args: str) -> str | None:
    try:
        out = subprocess.run([str(tool), *args], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    return out.stdout.strip()


def _describe(lib: Path, found_by: str, tried: list[str], env: Mapping[str, str]) -> DarshanRuntime:
    tool = None
    for cand in (lib.parent.parent / "bin" / "darshan-config", lib.parent / ".." / "bin" / "darshan-config"):
        if cand.is_file() and os.access(cand, os.X_OK):
            tool = cand.resolve()
            break
    if tool is None:
        which = shutil.which("darshan-config", path=env.get("PATH"))
        if which:
            libdir = _run_config(Path(which), "--libdir")
            if libdir and Path(libdir).resolve() == lib.parent.resolve():
                tool = Path(which)
    version = by_env = mmap = None
    if tool is not None:
        v = _run_config(tool, "--version")
        if v:
            m = re.search(r"(\d+\.\d+\.\d+\S*)", v)
            version = m.group(1) if m else v
        by_env = _run_config(tool, "--log-path-by-env")
        mm = _run_config(tool, "--mmap-logs")
        mmap = None if mm is None else mm.strip().lower() == "yes"
    if version is None:
        pc = lib.parent / "pkgconfig" / "darshan-runtime.pc"
        try:
            m = re.search(r"^Version:\s*(\S+)", pc.read_text(), re.M)
            version = m.group(1) if m else None
        except OSError:
            pass
    names = tuple(n for n in (by_env or "").split(",") if n and n.lower() not in ("no", "none"))
    return DarshanRuntime(lib=lib, version=version, config_tool=tool, log_path_by_env=names, mmap_logs=mmap,
                          found_by=found_by, tried=tried)


def find_runtime(lib: str | os.PathLike | None = None, *, env: Mapping[str, str] | None = None,
                 prefixes: Sequence[str] = STANDARD_PREFIXES) -> DarshanRuntime:
    """Locate ``libdarshan.so`` the way HPC users expect (see module docstring).

    ``env`` defaults to ``os.environ``; ``prefixes`` are the standard install
    prefixes searched last (glob patterns, ``~`` expanded).

    Raises ``CollectorError`` listing every place tried and how to fix it.
    """
    env = os.environ if env is None else env
    tried: list[str] = []

    if lib:
        p = Path(lib).expanduser()
        if not p.is_dir() and _lib_kind(p) == "util":
            raise CollectorError(f"--darshan-lib {p}: this is darshan-util (the library that reads logs), not the "
                                 "Darshan runtime that records them",
                                 hint="give libdarshan.so from darshan-runtime (darshan-config --pre-ld-flags names "
                                      "it), or run without --darshan-lib to use the embedded collector")
        found = _lib_in(p) if p.is_dir() else (p if _is_runtime_lib(p) else None)
        if found:
            return _describe(found.resolve(), "--darshan-lib", tried, env)
        raise CollectorError(f"--darshan-lib {p}: no {LIB_NAME} there",
                             hint="give the path of libdarshan.so or of the folder holding it")

    val = env.get("IODIAG_DARSHAN_LIB")
    if val:
        p = Path(val).expanduser()
        found = _lib_in(p) if p.is_dir() else (p if _is_runtime_lib(p) else None)
        tried.append(f"$IODIAG_DARSHAN_LIB={val}")
        if found:
            return _describe(found.resolve(), "$IODIAG_DARSHAN_LIB", tried, env)

    # a library already named by the environment: $DARSHAN_PRELOAD (set by some site modules) or LD_PRELOAD
    for var in ("DARSHAN_PRELOAD", "LD_PRELOAD"):
        for item in re.split(r"[: ]", env.get(var, "")):
            if os.path.basename(item).startswith(LIB_NAME):
                tried.append(f"${var} entry {item}")
                if _is_runtime_lib(Path(item)):
                    return _describe(Path(item).resolve(), f"${var}", tried, env)

    tool = shutil.which("darshan-config", path=env.get("PATH"))
    if tool:
        libdir = _run_config(Path(tool), "--libdir")
        tried.append(f"{tool} --libdir -> {libdir}")
        if libdir:
            found = _lib_in(Path(libdir))
            if found:
                return _describe(found.resolve(), "darshan-config on PATH", tried, env)
    else:
        tried.append("darshan-config on PATH (not found)")

    for var in ROOT_VARS:
        val = env.get(var)
        if val:
            tried.append(f"${var}={val}")
            found = _lib_under_prefix(Path(val).expanduser())
            if found:
                return _describe(found.resolve(), f"${var}", tried, env)

    ld = env.get("LD_LIBRARY_PATH", "")
    for folder in [f for f in ld.split(":") if f]:
        found = _lib_in(Path(folder))
        if found:
            return _describe(found.resolve(), "LD_LIBRARY_PATH", tried + [f"LD_LIBRARY_PATH entry {folder}"], env)
    tried.append("LD_LIBRARY_PATH" + (f" ({len(ld.split(':'))} folders)" if ld else " (unset)"))

    for pattern in prefixes:
        for prefix in sorted(glob.glob(os.path.expanduser(pattern)), reverse=True):
            found = _lib_under_prefix(Path(prefix))
            if found:
                return _describe(found.resolve(), f"standard prefix {prefix}", tried, env)
    tried.append("standard prefixes " + (", ".join(prefixes) or "(none)"))

    raise CollectorError(
        f"no Darshan runtime ({LIB_NAME}) found; tried: " + "; ".join(tried),
        hint="`module load darshan` or `spack load darshan-runtime`, or pass --darshan-lib PATH "
             "(or set $IODIAG_DARSHAN_LIB); without Darshan use --collector embedded (or auto)",
    )


def interpreter_dirs() -> list[str]:
    """Folders holding the Python interpreter's own code (stdlib, site-packages)."""
    dirs: set[str] = set()
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        try:
            d = sysconfig.get_paths().get(key)
        except Exception:  # pragma: no cover
            d = None
        if d:
            dirs.add(os.path.realpath(d))
    for p in sys.path:
        if p and ("site-packages" in p or "dist-packages" in p) and os.path.isdir(p):
            dirs.add(os.path.realpath(p))
    for prefix in {sys.prefix, sys.base_prefix, sys.exec_prefix}:
        lib = os.path.join(prefix, "lib", f"python{sys.version_info.major}.{sys.version_info.minor}")
        if os.path.isdir(lib):
            dirs.add(os.path.realpath(lib))
    # keep the outermost folders only
    out: list[str] = []
    for d in sorted(dirs, key=len):
        if not any(d == o or d.startswith(o.rstrip("/") + "/") for o in out):
            out.append(d)
    return out


def _regex_path(path: str) -> str:
    return "^" + re.sub(r"([][.^$*+?(){}|\\])", r"\\\1", path.rstrip("/")) + "/"


def render_config(settings: DarshanSettings, *, dxt: bool, exclude_dirs: Sequence[str] = (),
                  base: str | None = None) -> str:
    """The text of the generated DARSHAN_CONFIG_PATH file."""
    lines = []
    if base:
        lines += ["# --- site configuration (copied from the original DARSHAN_CONFIG_PATH) ---", base.rstrip(), ""]
    lines += [
        "# --- written by iodiag run (darshan-runtime docs: 'Darshan library config settings') ---",
        "# record caps: Darshan keeps 1,024 records per module and process by default",
        f"MAX_RECORDS {settings.max_records} POSIX,STDIO,MPI-IO,H5F,H5D,PNETCDF_FILE,PNETCDF_VAR",
        f"MODMEM {settings.modmem_mib}",
        f"NAMEMEM {settings.namemem_mib}",
    ]
    if settings.app_exclude:
        lines.append("APP_EXCLUDE " + ",".join(settings.app_exclude))
    usable = [d for d in exclude_dirs if "," not in d and not any(c.isspace() for c in d)]
    if usable:
        lines.append("# the interpreter's own library folders (imports, not workload I/O)")
        lines.append("NAME_EXCLUDE " + ",".join(_regex_path(d) for d in usable) + " *")
    if dxt:
        dxt_records = max(1, settings.dxt_mib * 1024)  # DXT memory = records x 1 KiB
        lines += ["# DXT tracing on request (iodiag run --dxt)", "MOD_ENABLE DXT_POSIX,DXT_MPIIO",
                  f"MAX_RECORDS {dxt_records} DXT_POSIX,DXT_MPIIO"]
    return "\n".join(lines) + "\n"


def darshan_environment(runtime: DarshanRuntime, *, job_dir: Path, darshan_jobid: int, dxt: bool,
                        settings: DarshanSettings | None = None,
                        env: Mapping[str, str] | None = None, when: float | None = None,
                        extra_exclude: Sequence[str] = (), mmap_dir: Path | None = None) -> dict[str, str]:
    """Create logs/ and darshan.conf in ``job_dir`` and the folder of Darshan's mmap logs (``mmap_dir``, default
    ``logs/mmap``; ``iodiag run`` gives a node-local one, as Darshan's own default /tmp is, so the job store on
    Lustre or NFS never holds the sparse file every process maps while it runs); return the variables to set.

    The returned mapping holds values to set; a value of ``None`` is never
    returned, variables to remove are listed in ``REMOVE_VARS``.
    """
    settings = settings or DarshanSettings()
    env = os.environ if env is None else env
    logs = job_dir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    mmap_dir = mmap_dir or logs / "mmap"
    mmap_dir.mkdir(parents=True, exist_ok=True)
    if "DARSHAN_LOGPATH" not in runtime.log_path_by_env:
        # date-formatted log tree: LOGPATH/<year>/<month>/<day>/ must exist
        now = time.time() if when is None else when
        for t in (now, now + 86400):
            tm = time.localtime(t)
            (logs / str(tm.tm_year) / str(tm.tm_mon) / str(tm.tm_mday)).mkdir(parents=True, exist_ok=True)
    base = None
    site_conf = env.get("DARSHAN_CONFIG_PATH")
    if site_conf:
        try:
            base = Path(site_conf).read_text()
        except OSError:
            base = None
    conf = job_dir / "darshan.conf"
    excluded = list(interpreter_dirs()) if settings.exclude_interpreter else []
    # iodiag's own files: the job folder (Dask capture writes there) and the preload's folder
    excluded += [os.path.realpath(job_dir)] + [os.path.realpath(d) for d in extra_exclude]
    conf.write_text(render_config(settings, dxt=dxt, exclude_dirs=excluded, base=base))
    preload = str(runtime.lib)
    old = env.get("LD_PRELOAD", "")
    if old:
        parts = [p for p in re.split(r"[: ]", old) if p and not os.path.basename(p).startswith(LIB_NAME)]
        preload = ":".join([preload] + parts)
    out = {
        "LD_PRELOAD": preload,
        "DARSHAN_ENABLE_NONMPI": "1",
        "DARSHAN_LOGPATH": str(logs),
        "DARSHAN_MMAP_LOGPATH": str(mmap_dir),
        "DARSHAN_JOBID": JOBID_VAR,
        JOBID_VAR: str(darshan_jobid),
        "DARSHAN_CONFIG_PATH": str(conf),
    }
    for name in runtime.log_path_by_env:
        out[name] = str(logs)
    if dxt:
        out["DXT_ENABLE_IO_TRACE"] = "1"  # deprecated but honoured by older runtimes; MOD_ENABLE covers 3.4+
    return out


REMOVE_VARS = ("DARSHAN_LOGFILE", "DARSHAN_DISABLE")


# --- after the run -----------------------------------------------------------------

MMAP_RE = re.compile(r"^(?P<user>.+?)_(?P<exe>.+)_id(?P<jobid>-?\d+)_mmap-log-(?P<hash>\d+)-(?P<rank>\d+)\.darshan$")


def find_logs(logs_dir: Path, mmap_dir: Path | None = None) -> dict[str, list[Path]]:
    """Sort what Darshan left in ``logs_dir``: final logs, ``.darshan_partial`` files, and the mmap remnants in
    ``mmap_dir`` (when it is outside ``logs_dir``: node-local storage) or in ``logs_dir/mmap``."""
    out: dict[str, list[Path]] = {"logs": [], "partial": [], "mmap": []}
    if mmap_dir is not None and mmap_dir.is_dir() and logs_dir not in mmap_dir.parents and mmap_dir != logs_dir / "mmap":
        out["mmap"] = sorted(p for p in mmap_dir.iterdir() if p.is_file() and MMAP_RE.match(p.name))
    if not logs_dir.is_dir():
        return out
    for path in sorted(logs_dir.rglob("*")):
        if not path.is_file():
            continue
        name = path.name
        if path.parent.name == ".keep":
            continue
        if MMAP_RE.match(name) and path.parent.name == "mmap":
            out["mmap"].append(path)
        elif name.endswith(".darshan_partial"):
            out["partial"].append(path)
        elif name.endswith(".darshan"):
            out["logs"].append(path)
    return out


def recover_mmap_log(path: Path, *, dest_dir: Path, pid: int | None) -> Path | None:
    """Keep the mmap log of a killed process as a readable log of the job.

    Darshan's mmap log is an uncompressed log that PyDarshan reads as is (its
    header has no end time).  It is moved next to the other logs under a name
    that carries the pid (``<user>_<exe>_id<jobid>-<pid>_mmap-recovered-...``)
    so that the loader can tie it to its process.  Returns the new path, or
    None when the file is empty (the process died before Darshan wrote it).
    """
    m = MMAP_RE.match(path.name)
    if not m:
        return None
    try:
        if path.stat().st_size == 0:
            return None
    except OSError:
        return None
    pid_part = f"-{pid}" if pid else ""
    name = f"{m['user']}_{m['exe']}_id{m['jobid']}{pid_part}_mmap-recovered-{m['hash']}-{m['rank']}.darshan"
    dest = dest_dir / name
    try:
        os.replace(path, dest)
    except OSError:  # another file system (a node-local mmap folder): copy it, then let the original go
        import shutil

        try:
            shutil.copyfile(path, dest)
            path.unlink()
        except OSError:
            return None
    return dest


def pids_with_mapping(folder: Path, pids: Sequence[int]) -> dict[str, int]:
    """mmap-log file name -> pid, for the given processes that map a file of ``folder``."""
    out: dict[str, int] = {}
    prefix = str(folder.resolve()).rstrip("/") + "/"
    for pid in pids:
        try:
            with open(f"/proc/{pid}/maps", "r", errors="replace") as fh:
                for line in fh:
                    i = line.find(prefix)
                    if i >= 0:
                        out.setdefault(os.path.basename(line[i:].strip()), pid)
        except OSError:
            continue
    return out
