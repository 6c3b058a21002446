"""Pieces shared by the workload modules: parameter declarations, the results
record, timing, byte counters, and Dask cluster set-up (local or dask-jobqueue).

Workload modules are plain scripts as far as a batch system or ``iodiag run``
is concerned (``python -m iodiag.workloads.convert ...``).  Their parameters are
declared once (``PARAMS``) and used three ways: to build the script's argparse
parser, to validate sweep specs, and to render a run's command line.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import socket
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from ..errors import UsageError

SCHEMA = "iodiag.workload-result/1"
RESULTS_ENV = "IODIAG_RESULTS"  # explicit path for the results record
JOB_DIR_ENV = "IODIAG_JOB_DIR"  # set by `iodiag run` (when it does): record goes into the job folder


@dataclass(frozen=True)
class Param:
    """One workload parameter: name (python identifier), type, default, help."""

    name: str
    type: type
    default: Any
    help: str
    choices: tuple | None = None
    required: bool = False
    instead_of: tuple[str, ...] = ()  # parameters this one replaces (the workload takes one of them, not both)

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    def coerce(self, value: Any, *, where: str = "") -> Any:
        """Check/convert a value from a TOML spec; raise UsageError on mismatch."""
        if value is None:
            return None
        ok = True
        if self.type is bool:
            ok = isinstance(value, bool)
        elif self.type is int:
            ok = isinstance(value, int) and not isinstance(value, bool)
        elif self.type is float:
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
            value = float(value) if ok else value
        elif self.type is str:
            ok = isinstance(value, (str, int, float)) and not isinstance(value, bool)
            value = str(value) if ok else value
        if not ok:
            raise UsageError(
                f"{where}parameter {self.name!r} = {value!r} is not a {self.type.__name__}",
                hint=f"{self.name}: {self.help}",
            )
        if self.choices is not None and value not in self.choices:
            raise UsageError(
                f"{where}parameter {self.name!r} = {value!r} is not one of {list(self.choices)}",
                hint=f"{self.name}: {self.help}",
            )
        return value

    def to_argv(self, value: Any) -> list[str]:
        if value is None:
            return []
        if self.type is bool:
            return [self.flag if value else "--no-" + self.flag[2:]]
        return [self.flag, str(value)]


def build_parser(prog: str, description: str, params: Sequence[Param], examples: str = "") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description=description,
                                     epilog=("examples:\n" + examples) if examples else None,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    for p in params:
        if p.type is bool:
            parser.add_argument(p.flag, dest=p.name, action=argparse.BooleanOptionalAction,
                                default=p.default, help=p.help)
        else:
            parser.add_argument(p.flag, dest=p.name, type=p.type, default=p.default,
                                choices=p.choices, required=p.required, help=p.help)
    return parser


def params_to_argv(params: Sequence[Param], values: dict[str, Any]) -> list[str]:
    by_name = {p.name: p for p in params}
    argv: list[str] = []
    for name, value in values.items():
        argv += by_name[name].to_argv(value)
    return argv


# ---------------------------------------------------------------- results record


def results_path(explicit: str | os.PathLike | None, default_next_to: Path) -> Path:
    """Where a workload writes its record: --results, $IODIAG_RESULTS,
    $IODIAG_JOB_DIR/results.json (inside an iodiag job), else next to the output."""
    if explicit:
        return Path(explicit)
    if os.environ.get(RESULTS_ENV):
        return Path(os.environ[RESULTS_ENV])
    if os.environ.get(JOB_DIR_ENV):
        return Path(os.environ[JOB_DIR_ENV]) / "results.json"
    return default_next_to


def _versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for mod in ("numpy", "xarray", "zarr", "dask", "distributed", "netCDF4", "h5py", "numcodecs"):
        m = sys.modules.get(mod)
        if m is not None:
            out[mod] = str(getattr(m, "__version__", "?"))
    return out


def write_record(path: Path, record: dict[str, Any]) -> Path:
    """Atomically write the results record (tmp file + rename).

    Under ``iodiag run`` (``$IODIAG_JOB_DIR`` set) a copy also goes into the job
    folder when the record itself was sent elsewhere (a sweep's run folder), and
    the record names the job (``iodiag_job``) so sweeps can link runs to jobs."""
    full = {
        "schema": SCHEMA,
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "versions": _versions(),
        "iodiag_job": os.environ.get("IODIAG_JOB_ID"),
        **record,
    }
    text = json.dumps(full, indent=2, sort_keys=True, default=_json_default) + "\n"
    path = Path(path)
    targets = [path]
    job_dir = os.environ.get(JOB_DIR_ENV)
    if job_dir and Path(job_dir, "results.json").resolve() != path.resolve():
        targets.append(Path(job_dir) / "results.json")
    for target in targets:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        tmp.write_text(text)
        os.replace(tmp, target)
    return path


def _json_default(obj: Any) -> Any:
    if hasattr(obj, "item"):
        return obj.item()
    if isinstance(obj, (Path,)):
        return str(obj)
    if isinstance(obj, tuple):
        return list(obj)
    raise TypeError(f"not JSON serialisable: {type(obj)}")


# ---------------------------------------------------------------- measuring


def proc_io() -> dict[str, int]:
    """This process's I/O counters from /proc/self/io (rchar/wchar count bytes
    passed through read/write syscalls, cache hits included; read_bytes /
    write_bytes are what reached the block layer).  Empty where unavailable."""
    try:
        text = Path("/proc/self/io").read_text()
    except OSError:
        return {}
    out = {}
    for line in text.splitlines():
        k, _, v = line.partition(":")
        out[k.strip()] = int(v)
    return out


def io_delta(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {k: after[k] - before.get(k, 0) for k in after if k in ("rchar", "wchar", "syscr", "syscw",
                                                                  "read_bytes", "write_bytes")}


@contextlib.contextmanager
def timed(store: dict[str, float], key: str) -> Iterator[None]:
    t0 = time.perf_counter()
    try:
        yield
    finally:
        store[key] = time.perf_counter() - t0


def tree_bytes(path: Path) -> tuple[int, int]:
    """(bytes, files) under a path (a file or a directory store)."""
    path = Path(path)
    if path.is_file():
        return path.stat().st_size, 1
    total = n = 0
    for root, _dirs, files in os.walk(path):
        for f in files:
            with contextlib.suppress(OSError):
                total += os.stat(os.path.join(root, f)).st_size
                n += 1
    return total, n


def evict_from_cache(path: Path) -> int:
    """Ask the kernel to drop a file's (or a store's files') pages from the page
    cache with posix_fadvise(DONTNEED) — per file, so other users' caches are
    untouched.  Returns the number of files advised.  Dirty pages are flushed first."""
    path = Path(path)
    files = [path] if path.is_file() else [Path(r) / f for r, _d, fs in os.walk(path) for f in fs]
    n = 0
    for f in files:
        try:
            fd = os.open(f, os.O_RDONLY)
        except OSError:
            continue
        try:
            with contextlib.suppress(OSError):
                os.fsync(fd)
            if hasattr(os, "posix_fadvise"):
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                n += 1
        finally:
            os.close(fd)
    return n


# ---------------------------------------------------------------- chunks & codecs


def parse_shape(text: str | None, *, what: str) -> tuple[int, ...] | None:
    if text in (None, "", "auto"):
        return None
    try:
        dims = tuple(int(x) for x in str(text).replace("x", ",").split(",") if x.strip())
    except ValueError:
        raise UsageError(f"{what} {text!r} is not a comma-separated list of integers",
                         hint="e.g. 1,19,181,360") from None
    if not dims or any(d <= 0 for d in dims):
        raise UsageError(f"{what} {text!r} must have positive sizes", hint="e.g. 1,19,181,360")
    return dims


def chunks_for_target(shape: Sequence[int], itemsize: int, target_mb: float) -> tuple[int, ...]:
    """Chunk shape of about target_mb MB: keep the trailing (spatial) dims whole and
    cut the leading dims first, the way climate data is usually chunked."""
    target = max(1, int(target_mb * 1e6 / itemsize))
    chunks = list(int(s) for s in shape)
    for i in range(len(chunks)):
        total = 1
        for c in chunks:
            total *= c
        if total <= target:
            break
        inner = total // chunks[i]
        chunks[i] = max(1, min(chunks[i], target // inner)) if inner <= target else 1
    return tuple(chunks)


COMPRESSORS = ("none", "zlib", "zstd", "blosc")


def zarr_compressor(name: str, zarr_format: int, level: int | None = None):
    """Compressor object for Zarr format 2 (numcodecs) or 3 (zarr.codecs)."""
    if name == "none":
        return None
    if zarr_format == 2:
        import numcodecs

        if name == "zlib":
            return numcodecs.Zlib(level=level if level is not None else 1)
        if name == "zstd":
            return numcodecs.Zstd(level=level if level is not None else 1)
        return numcodecs.Blosc(cname="lz4", clevel=level if level is not None else 5,
                               shuffle=numcodecs.Blosc.SHUFFLE)
    import zarr.codecs as zc

    if name == "zlib":
        return zc.GzipCodec(level=level if level is not None else 1)
    if name == "zstd":
        return zc.ZstdCodec(level=level if level is not None else 1)
    return zc.BloscCodec(cname="lz4", clevel=level if level is not None else 5, shuffle="shuffle")


def zarr_encoding(name: str, zarr_format: int, chunks: tuple[int, ...] | None) -> dict[str, Any]:
    enc: dict[str, Any] = {}
    comp = zarr_compressor(name, zarr_format)
    # zarr-python 3 (and xarray over it) takes `compressors` for both formats;
    # format 2 allows at most one.
    enc["compressors"] = (comp,) if comp is not None else None
    if chunks is not None:
        enc["chunks"] = chunks
    return enc


# ---------------------------------------------------------------- Dask clusters

CLUSTERS = ("local", "threads", "sync", "slurm", "lsf", "pbs")


@contextlib.contextmanager
def dask_client(*, cluster: str, workers: int, threads: int, memory: str = "2GiB",
                walltime: str = "00:30:00", queue: str | None = None, account: str | None = None,
                log_directory: str | None = None, info: dict[str, Any] | None = None) -> Iterator[Any]:
    """A distributed Client on a LocalCluster (processes), a threads-only local
    cluster, no cluster at all (``sync``: the synchronous scheduler), or batch
    jobs through dask-jobqueue (``slurm``/``lsf``/``pbs``: one job per worker)."""
    info = info if info is not None else {}
    info.update(cluster=cluster, workers=workers, threads=threads)
    if cluster == "sync":
        import dask

        with dask.config.set(scheduler="synchronous"):
            yield None
        return
    from distributed import Client, LocalCluster

    if cluster in ("local", "threads"):
        cl = LocalCluster(n_workers=workers, threads_per_worker=threads,
                          processes=(cluster == "local"), memory_limit=memory,
                          dashboard_address=None)
    else:
        from ..jobqueue import jobqueue_kwargs, start_jobqueue_cluster

        cl = start_jobqueue_cluster(cluster, jobs=workers, **jobqueue_kwargs(
            cores=threads, memory=memory, walltime=walltime, queue=queue, account=account, log_directory=log_directory))
        info["jobqueue_script"] = cl.job_script()
    try:
        with Client(cl) as client:
            if cluster not in ("local", "threads"):
                client.wait_for_workers(workers, timeout=600)
            info["worker_pids"] = sorted(client.run(os.getpid).values())
            yield client
    finally:
        cl.close()


def run_main(main: Callable[[list[str] | None], int]) -> None:
    """Script entry: UsageError -> one line on stderr and exit 2, like the CLI."""
    from ..errors import IodiagError

    try:
        code = main(None)
    except IodiagError as exc:
        print(f"{Path(sys.argv[0]).name}: error: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
    sys.exit(code or 0)
