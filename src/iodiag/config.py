"""One typed configuration object: every threshold, defaults in code, TOML overrides.

A TOML file mirrors the dataclass tree::

    [small_io]
    size_bytes = 65536

    [report]
    mute = ["stdio-heavy"]

Unknown sections or keys and values of the wrong type are errors (exit code of
``ConfigError``), never silently ignored.

Two files are layered over the defaults: the *site config* an admin deploys
(``$IODIAG_SITE_CONFIG``, else ``/etc/iodiag/site.toml`` when present; ``iodiag
site defaults`` writes one), then the *user config* (``--config`` or
``$IODIAG_CONFIG``).  Keys the user sets win; tables such as ``[site.advice]``
are merged key by key.  Detectors receive the ``Config``
as a parameter; nothing mutates it after loading.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, get_type_hints

from .errors import ConfigError


@dataclass(frozen=True)
class SmallIO:
    # an op below this is "small"; counters count Darshan size buckets wholly below it (100 KiB = a bucket edge)
    size_bytes: int = 100 * 1024
    min_share: float = 0.5  # fraction of a file's reads+writes that must be small
    min_ops: int = 1000  # small ops a file needs before it is reported
    buffer_bytes: int = 4 * 1024 * 1024  # buffer size assumed when estimating merged requests


@dataclass(frozen=True)
class Metadata:
    min_ops: int = 1000  # opens+stats+seeks+fsyncs before a storm is considered
    time_share: float = 0.3  # metadata time / (metadata + read + write time)
    rate_per_s: float = 500.0  # sustained metadata ops per second (peak 1 s bin, or average)
    reopen_count: int = 10  # opens of one file by one process
    opens_per_data_op: float = 0.5  # opens per read/write: a file opened for (almost) every access


@dataclass(frozen=True)
class Sync:
    min_per_write: float = 0.5  # fsync + fdatasync calls per write on a file: about one per write is "fsync per write"
    min_syncs: int = 100  # ... once the file has at least this many of them


@dataclass(frozen=True)
class SmallFiles:
    count: int = 1000  # at least this many files ...
    size_bytes: int = 4 * 1024 * 1024  # ... each smaller than this
    target_chunk_bytes: int = 64 * 1024 * 1024  # recommended size of a packed file
    zarr_chunk_bytes: int = 16 * 1024 * 1024  # recommended bytes per Zarr chunk file (compressed, as stored)


@dataclass(frozen=True)
class Stragglers:
    mad_factor: float = 3.5  # robust z-score above which a process straggles
    min_processes: int = 4
    min_excess_s: float = 1.0  # ignore stragglers slower by less than this
    min_excess_share: float = 0.2  # ... or by less than this share of the median
    task_min_tasks: int = 5  # Dask tasks of one prefix needed before stragglers are judged
    task_min_excess_s: float = 0.5
    scaling_efficiency: float = 0.7  # weak scaling: per-process I/O time ratio below this is a loss


@dataclass(frozen=True)
class Access:
    random_share: float = 0.2  # non-sequential (backward) share of a file's ops to call access random
    min_ops: int = 1000
    redundant_factor: float = 2.0  # bytes read / file size
    stdio_share: float = 0.1  # STDIO bytes share of all bytes
    imbalance_ratio: float = 2.0  # max/median bytes per rank
    alignment_share: float = 0.5  # misaligned share of ops
    shared_min_ranks: int = 4
    redundant_min_bytes: int = 1024 * 1024  # ignore re-reads of files smaller than this
    # read-modify-write: POSIX reads of a file the layer above (MPI-IO) writes but reads at most this share of
    rmw_upper_read_share: float = 0.01
    rmw_min_bytes: int = 1024 * 1024  # ... once the file system was asked for at least this many bytes,
    rmw_min_reads: int = 1000  # ... or for this many reads (reads past the end of a file being written return 0 B)
    rmw_min_read_s: float = 1.0  # ... taking at least this many process-seconds
    parallel_fs: tuple[str, ...] = ("lustre", "gpfs", "dvs", "beegfs", "panfs", "nfs", "cephfs", "wekafs")


@dataclass(frozen=True)
class Severity:
    # share of the job's run time a problem costs (est_cost_s / runtime_s; see analyzers/timemodel.py)
    high: float = 0.2
    medium: float = 0.05
    low: float = 0.01
    min_cost_s: float = 0.05  # a problem costing less than this many job seconds is at most "low", whatever its share


@dataclass(frozen=True)
class Tasks:
    min_tasks: int = 200  # task-overhead: tasks of a job before their overhead is judged ...
    short_task_s: float = 0.1  # ... with a median task shorter than this ...
    between_share: float = 0.2  # ... and worker threads idle between tasks this share of their first-to-last-task span
    target_chunk_bytes: int = 100 * 1024 * 1024  # recommended bytes per chunk (Dask's guidance: ~100 MB)


@dataclass(frozen=True)
class Report:
    mute: tuple[str, ...] = ()
    top_files: int = 5
    top_processes: int = 5
    log_tree: str | None = None  # site archive root, also IODIAG_LOG_TREE


@dataclass(frozen=True)
class Reader:
    timeout_s: float = 120.0  # per log; a hung reader is killed after this
    isolate: bool = True  # read logs in a forked child so a crash cannot take us down


@dataclass(frozen=True)
class Site:
    batch_logs: int = 1024  # most logs per Dask task (bounds what one task result holds)
    tasks_per_worker: int = 8  # an archive is cut into about this many tasks per worker (load balance)
    min_batch_logs: int = 32  # small archives: about tasks_per_worker tasks per worker, but no task under this
    in_flight_per_worker: int = 3  # tasks queued per worker; bounds driver memory
    part_rows: int = 20000  # job rows per parquet part (file)
    row_group_rows: int = 4096  # job rows the driver buffers before writing them (a parquet row group): bounds its memory
    jobqueue_wait_s: float = 600.0  # --cluster slurm/lsf/pbs: how long to wait for the worker jobs to start
    job_timeout_s: float = 600.0  # building, diagnosing and featurizing one job's logs (each log's decoding: [reader] timeout_s)
    # modules decoded for site features (no DXT/HEATMAP: counters are enough and 10x cheaper)
    modules: tuple[str, ...] = ("POSIX", "MPI-IO", "STDIO", "H5F", "H5D", "PNETCDF_FILE", "PNETCDF_VAR", "DFS", "DAOS", "LUSTRE")
    # what a site config (iodiag site defaults) tells every user's report
    name: str | None = None  # the site's name, shown with its advice
    defaults: dict[str, str] = field(default_factory=dict)  # tunable -> the site-wide default setting
    advice: dict[str, str] = field(default_factory=dict)  # finding id -> site-specific advice appended to its recommendation
    advice_scope: dict[str, str] = field(default_factory=dict)  # finding id -> the jobs its advice is for (serial-read, serial-write)
    rules: tuple[str, ...] = ()  # rules for users that beat the default ("if ...: setting")


@dataclass(frozen=True)
class Sweep:
    max_runs: int = 64  # a grid with more runs needs --yes
    submit_timeout_s: float = 60.0  # per sbatch/bsub/qsub call


@dataclass(frozen=True)
class Config:
    small_io: SmallIO = field(default_factory=SmallIO)
    metadata: Metadata = field(default_factory=Metadata)
    sync: Sync = field(default_factory=Sync)
    small_files: SmallFiles = field(default_factory=SmallFiles)
    stragglers: Stragglers = field(default_factory=Stragglers)
    access: Access = field(default_factory=Access)
    severity: Severity = field(default_factory=Severity)
    tasks: Tasks = field(default_factory=Tasks)
    report: Report = field(default_factory=Report)
    reader: Reader = field(default_factory=Reader)
    site: Site = field(default_factory=Site)
    sweep: Sweep = field(default_factory=Sweep)


def _coerce(section: str, key: str, typ: Any, value: Any, source: str = "config") -> Any:
    origin = getattr(typ, "__origin__", None)
    text = str(typ)
    if typ is bool:
        if isinstance(value, bool):
            return value
    elif typ is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif typ is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    elif origin is dict or text.startswith("dict"):
        if isinstance(value, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
            return dict(value)
    elif origin is tuple or text.startswith("tuple"):
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return tuple(value)
    elif "str" in text:
        if value is None or isinstance(value, str):
            return value
    expected = "a table of strings (key = \"text\")" if text.startswith("dict") else getattr(typ, "__name__", text)
    where = "config" if source == "config" else source
    raise ConfigError(f"{where}: [{section}] {key} = {value!r} has the wrong type", hint=f"expected {expected}")


def config_from_dict(data: dict[str, Any], *, source: str = "config") -> Config:
    base = Config()
    hints = get_type_hints(Config)
    sections = {}
    for name, value in data.items():
        if name not in hints:
            known = ", ".join(sorted(hints))
            raise ConfigError(f"{source}: unknown section [{name}]", hint=f"known sections: {known}")
        if not isinstance(value, dict):
            raise ConfigError(f"{source}: [{name}] must be a table")
        cls = hints[name]
        fhints = get_type_hints(cls)
        kwargs = {}
        for key, v in value.items():
            if key not in fhints:
                known = ", ".join(sorted(fhints))
                raise ConfigError(f"{source}: unknown key {key!r} in [{name}]", hint=f"known keys: {known}")
            kwargs[key] = _coerce(name, key, fhints[key], v, source)
        sections[name] = dataclasses.replace(getattr(base, name), **kwargs)
    return dataclasses.replace(base, **sections)


SITE_CONFIG_PATH = "/etc/iodiag/site.toml"


def _read_toml(p: Path, what: str) -> dict[str, Any]:
    from . import tomlread

    if not p.is_file():
        raise ConfigError(f"{what} file {p} not found", hint=f"check the path given to {'--site-config or $IODIAG_SITE_CONFIG' if what == 'site config' else '--config or $IODIAG_CONFIG'}")
    try:
        data = tomlread.loads(p.read_text())
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{what} file {p} cannot be read: {exc}") from None
    except tomlread.TOMLDecodeError as exc:
        raise ConfigError(f"{what} file {p} is not valid TOML: {exc}", hint="fix the syntax") from None
    config_from_dict(data, source=str(p))  # each file must be valid on its own, so an error names the right file
    return data


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def site_config_path(site_config: str | os.PathLike | None = None) -> Path | None:
    """The site config in use: the one given, else $IODIAG_SITE_CONFIG, else /etc/iodiag/site.toml if present."""
    if site_config:
        return Path(site_config)
    env = os.environ.get("IODIAG_SITE_CONFIG")
    if env:
        return Path(env)
    p = Path(SITE_CONFIG_PATH)
    return p if p.is_file() else None


def load_config(path: str | os.PathLike | None = None, *, site_config: str | os.PathLike | None = None) -> Config:
    """Defaults, overridden by the site config (see ``site_config_path``), then by the user's TOML file
    (``path`` or $IODIAG_CONFIG)."""
    data: dict[str, Any] = {}
    sources = []
    sp = site_config_path(site_config)
    if sp is not None:
        data = _merge(data, _read_toml(sp, "site config"))
        sources.append(str(sp))
    path = path or os.environ.get("IODIAG_CONFIG")
    if path:
        data = _merge(data, _read_toml(Path(path), "config"))
        sources.append(str(path))
    if not data:
        return Config()
    return config_from_dict(data, source=" + ".join(sources))


def config_to_dict(cfg: Config) -> dict[str, Any]:
    return dataclasses.asdict(cfg)
