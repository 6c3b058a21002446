"""The job profile: one typed object holding every table a job produced.

Tables are columnar (a dict of equal-length NumPy arrays) so that loading and
diagnosing a log never needs pandas, whose import alone costs more than
reading most logs.  ``Table.to_pandas()`` gives a DataFrame to code that
wants one (plots, site ingest).

Table contracts (one row per thing, one column per measure, units in names):

``processes``  proc, log, rank, pid, host, exe, log_path, start_s, end_s, partial
``files``      file_id, path, mount, fs_type
``counters``   dict module -> Table with proc, rank, file_id and the counters
               as Darshan names them (POSIX_READS, POSIX_F_READ_TIME, ...)
``ops``        proc, thread, file_id, module, op, offset, length, start_s, end_s
               (epoch seconds, one clock across every log of a job)
``heatmap``    proc, module, bin, start_s, end_s, read_bytes, write_bytes
``tasks``      key, prefix, worker, pid, thread, phase, start_s, end_s, tid (the OS thread id of ``thread``,
               -1 when the capture did not see it)
``issues_seen`` list of LoadIssue: what could not be read or is partial.

``proc`` is the job-wide process index (row of ``processes``); ``rank`` is the
rank inside its own log.  ``module`` and ``op`` columns hold small integer
codes; their names are in ``OP_NAMES`` and ``OPS_MODULES``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

import numpy as np

# Operation codes used in the ``ops`` table.
OP_NAMES: tuple[str, ...] = (
    "read",
    "write",
    "open",
    "close",
    "stat",
    "seek",
    "fsync",
    "readdir",
    "mkdir",
    "rename",
    "unlink",
    "other",
)
OP = {name: i for i, name in enumerate(OP_NAMES)}

# Module codes used in the ``ops`` and ``heatmap`` tables.
OPS_MODULES: tuple[str, ...] = ("POSIX", "MPIIO", "STDIO")
OPS_MODULE = {name: i for i, name in enumerate(OPS_MODULES)}


class Table:
    """A small columnar table: named, equal-length NumPy arrays."""

    __slots__ = ("_cols", "_blocks")

    def __init__(self, columns: Mapping[str, Any] | None = None) -> None:
        cols: dict[str, np.ndarray] = {}
        n = None
        for name, values in (columns or {}).items():
            arr = values if isinstance(values, np.ndarray) else np.asarray(values)
            if arr.ndim != 1:
                raise ValueError(f"column {name!r} must be one-dimensional")
            if n is None:
                n = len(arr)
            elif len(arr) != n:
                raise ValueError(f"column {name!r} has {len(arr)} rows, expected {n}")
            cols[name] = arr
        self._cols = cols
        self._blocks = None

    @classmethod
    def _trusted(cls, cols: dict[str, np.ndarray]) -> "Table":
        """A table over columns already known to be equal-length 1-D arrays (no checks, no copy)."""
        t = cls.__new__(cls)
        t._cols = cols
        t._blocks = None
        return t

    def blocks(self) -> tuple | None:
        """((names, 2-D array), ...) when some columns are exactly the columns of such arrays, as the
        loader builds them (lets a consumer reduce many columns in one call); None otherwise."""
        return self._blocks

    # -- access ---------------------------------------------------------
    @property
    def columns(self) -> list[str]:
        return list(self._cols)

    def __len__(self) -> int:
        for arr in self._cols.values():
            return len(arr)
        return 0

    def __contains__(self, name: object) -> bool:
        return name in self._cols

    def __getitem__(self, name: str) -> np.ndarray:
        return self._cols[name]

    def get(self, name: str, default: Any = None) -> Any:
        return self._cols.get(name, default)

    def items(self):
        return self._cols.items()

    def __repr__(self) -> str:
        return f"Table({len(self)} rows: {', '.join(self.columns)})"

    # -- derivation -----------------------------------------------------
    def filter(self, mask: np.ndarray) -> "Table":
        mask = np.asarray(mask)
        if mask.ndim != 1:
            raise ValueError("a filter mask must be one-dimensional")
        return Table._trusted({k: v[mask] for k, v in self._cols.items()})

    def take(self, index: np.ndarray) -> "Table":
        index = np.asarray(index)
        if index.ndim != 1:
            raise ValueError("a take index must be one-dimensional")
        return Table._trusted({k: v[index] for k, v in self._cols.items()})

    def with_columns(self, **columns: Any) -> "Table":
        merged = dict(self._cols)
        merged.update(columns)
        return Table(merged)

    def select(self, names: Iterable[str]) -> "Table":
        return Table({k: self._cols[k] for k in names})

    def rows(self) -> list[dict[str, Any]]:
        names = self.columns
        return [dict(zip(names, (c[i].item() if hasattr(c[i], "item") else c[i] for c in self._cols.values()))) for i in range(len(self))]

    def to_pandas(self):
        import pandas as pd

        return pd.DataFrame(self._cols)

    @staticmethod
    def concat(tables: Iterable["Table"]) -> "Table":
        tables = [t for t in tables if t is not None and t._cols]
        if not tables:
            return Table()
        if len(tables) == 1:
            return Table._trusted(dict(tables[0]._cols))
        first = tables[0]._cols
        if all(t._cols.keys() == first.keys() for t in tables[1:]):  # same columns everywhere: no filling
            return Table._trusted({name: np.concatenate([t._cols[name] for t in tables]) for name in first})
        names: dict[str, None] = {}
        for t in tables:
            names.update(dict.fromkeys(t._cols))
        out = {}
        for name in names:
            parts = []
            for t in tables:
                if name in t:
                    parts.append(t[name])
                else:
                    ref = next(tt[name] for tt in tables if name in tt)
                    fill = np.nan if ref.dtype.kind == "f" else (0 if ref.dtype.kind in "iub" else "")
                    parts.append(np.full(len(t), fill, dtype=ref.dtype if ref.dtype.kind != "U" else object))
            out[name] = np.concatenate(parts) if len(parts) > 1 else parts[0]
        return Table(out)


@dataclass(frozen=True)
class LoadIssue:
    """Something that could not be read, or was only partly captured."""

    path: str
    kind: str  # "unreadable", "crashed", "timeout", "truncated", "partial-module", "missing-log", ...
    cause: str
    module: str | None = None
    next_step: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v is not None}


@dataclass
class ProgramInfo:
    """One executable that ran as part of a job (a job may hold several)."""

    exe: str
    args: str
    nprocs: int
    logs: list[str]


@dataclass
class JobInfo:
    """Job-level metadata, merged over every log of the job."""

    job_id: str
    uid: int | None = None
    user: str | None = None
    exe: str = ""
    args: str = ""
    nprocs: int = 0
    start_s: float | None = None
    end_s: float | None = None
    runtime_s: float | None = None
    runtime_derived: bool = False  # True when taken from records, not from the header
    darshan_version: str | None = None
    log_format: str | None = None
    collector: str = "darshan"
    collector_version: str | None = None
    modules: list[str] = field(default_factory=list)
    partial_modules: list[str] = field(default_factory=list)
    mounts: list[tuple[str, str]] = field(default_factory=list)
    metadata: dict[str, str] = field(default_factory=dict)
    programs: list[ProgramInfo] = field(default_factory=list)
    logs: list[str] = field(default_factory=list)
    blind_spots: list[str] = field(default_factory=list)  # what the collector cannot see
    arrays: list[dict] = field(default_factory=list)  # Zarr arrays the job touched (readers/arrays.py), when readable
    # where ``arrays`` came from: "snapshot" (recorded with the job: meta/snapshot.json), "live" (read from the
    # stores at report time: a job without a snapshot), "" (not looked for)
    arrays_from: str = ""
    folder: str | None = None  # the iodiag job folder the profile was loaded from (None: logs given directly)
    snapshot: dict | None = None  # the job's meta/snapshot.json (None: the job has none)
    # the workload's end as ``iodiag run`` recorded it (None for a bare Darshan log: no exit status is kept there)
    exit_status: int | None = None  # the shell's view: exit code, or 128 + signal
    exit_signal: str | None = None  # e.g. "SIGINT" when a signal ended it
    partial_reasons: list[str] = field(default_factory=list)  # why ``iodiag run`` marked the job partial
    # per Dask client of an ``iodiag run`` job, the timeline its capture recorded (collectors/dask_capture.py:
    # scheduler start, client start, compute calls, graph submissions, final capture), as saved
    dask_timelines: list[dict] = field(default_factory=list)


def _empty(columns: Mapping[str, str]) -> Table:
    return Table({name: np.zeros(0, dtype=dtype) for name, dtype in columns.items()})


PROCESS_COLUMNS = {
    "proc": "i8", "log": "i8", "rank": "i8", "pid": "i8", "host": object, "exe": object,
    "log_path": object, "start_s": "f8", "end_s": "f8", "partial": "?",
}
FILE_COLUMNS = {"file_id": "u8", "path": object, "mount": object, "fs_type": object}
OPS_COLUMNS = {
    "proc": "i8", "thread": "i8", "file_id": "u8", "module": "i1", "op": "i1",
    "offset": "i8", "length": "i8", "start_s": "f8", "end_s": "f8",
}
HEATMAP_COLUMNS = {
    "proc": "i8", "module": "i1", "bin": "i8", "start_s": "f8", "end_s": "f8",
    "read_bytes": "i8", "write_bytes": "i8",
}
TASK_COLUMNS = {
    "key": object, "prefix": object, "worker": object, "pid": "i8", "thread": "i8",
    "phase": object, "start_s": "f8", "end_s": "f8", "tid": "i8",
}


_EMPTY: dict[str, dict[str, np.ndarray]] = {}


def empty_table(kind: str) -> Table:
    # every profile without DXT, heatmap or tasks gets three of these: the zero-length
    # columns are made once (they hold nothing to change); each call gets its own Table
    cols = _EMPTY.get(kind)
    if cols is None:
        cols = _EMPTY[kind] = _empty({
            "processes": PROCESS_COLUMNS, "files": FILE_COLUMNS, "ops": OPS_COLUMNS,
            "heatmap": HEATMAP_COLUMNS, "tasks": TASK_COLUMNS,
        }[kind])._cols
    return Table._trusted(dict(cols))


@dataclass
class JobProfile:
    job: JobInfo
    processes: Table = field(default_factory=lambda: empty_table("processes"))
    files: Table = field(default_factory=lambda: empty_table("files"))
    counters: dict[str, Table] = field(default_factory=dict)
    ops: Table = field(default_factory=lambda: empty_table("ops"))
    heatmap: Table = field(default_factory=lambda: empty_table("heatmap"))
    tasks: Table = field(default_factory=lambda: empty_table("tasks"))
    issues_seen: list[LoadIssue] = field(default_factory=list)

    @property
    def has_dxt(self) -> bool:
        known = getattr(self.ops, "has_rw", None)  # a source of ops (analyzers.batches.OpsSource) knows it
        if known is not None:
            return len(self.ops) > 0 and known
        return len(self.ops) > 0 and bool(np.any(self.ops["op"] <= OP["write"]))

    def module(self, name: str) -> Table | None:
        """The counters table of one module, or None when the job has none."""
        t = self.counters.get(name)
        return t if t is not None and len(t) else None

    def __setattr__(self, name: str, value: Any) -> None:
        # what analyzers derived from the tables (metrics.memo, path_of) must not outlive a replaced table
        d = self.__dict__
        if "_derived" in d or "_path_of" in d:
            d.pop("_derived", None)
            d.pop("_path_of", None)
        object.__setattr__(self, name, value)

    def path_of(self) -> dict[int, str]:
        """file_id -> path (built once per files table; treat it as read-only)."""
        cached = self.__dict__.get("_path_of")
        if cached is not None and cached[0] is self.files:
            return cached[1]
        paths = dict(zip(self.files["file_id"].tolist(), self.files["path"].tolist()))
        self.__dict__["_path_of"] = (self.files, paths)
        return paths
