"""Site sweeps as (scenario, setting, time) tables, and which of the site's jobs each scenario stands for.

A *sweep table* is what ``iodiag sweep collect`` writes (``results.parquet``/``results.csv``, or the sweep
folder itself), or any table with ``scenario``, ``setting`` and ``time_s`` columns (the recommender's training
tables).  Three kinds are recognised:

* **read-pattern** (a ``read`` sweep: a ``pattern`` column): scenario = the read pattern of the thesis' table 3.1,
  setting = the store's layout (format and chunk shape), time = ``t_total_s`` (open + read).
* **write-size** (a ``convert`` sweep over chunk shapes: ``chunks`` and ``chunk_bytes`` columns): scenario = the
  chunk shape written (each write is one chunk of ``chunk_bytes``), setting = the other grid column that varies
  (e.g. ``compressor``), time = ``t_total_s``.
* **descriptors** (any other table): scenario, setting and time columns as given; every other column that is a
  numeric job feature of the site dataset (``max_file_bytes``, ``nprocs``, ``posix_mean_write_bytes``, ...)
  *describes* its scenario, e.g. a Lustre site's stripe-count sweep with ``max_file_bytes`` and ``nprocs``.

``map_jobs`` assigns the site's jobs to scenarios from their counters (never from names), with the rules of
docs/site-defaults.md; jobs that fit no scenario are counted by reason.  Each mapped job carries its weight (by
default the core-hours its processes spent in the I/O the tunable affects: read time for read-pattern, write time
for write-size, all I/O time for descriptors).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ..errors import InputNotFound, InputUnreadable, UsageError
from ..units import fmt_bytes

KIB, MIB = 1024.0, 1024.0 ** 2
WEIGHTS = ("io", "core-hours", "jobs")
# read-pattern mapping (docs/site-defaults.md): thresholds on a job's own counters
READ_SMALL_REQUEST_BYTES = 100 * KIB  # a request below this reads points, not slices (Darshan's 100K bucket edge)
READ_FEW_REQUESTS_PER_FILE = 4  # ... and at most this many per file: single points, more: a time series
READ_WHOLE_COVERAGE = 0.5  # a job reading at least this share of its files reads them whole
READ_ONE_REQUEST_PER_FILE = 1.5  # large requests, about one per file: one slice; more: several slices
READ_PATTERN_FEATURES = ("read_request_bytes", "read_requests_per_file", "read_file_coverage")
WRITE_SIZE_FEATURES = ("write_request_bytes",)
_NOT_GRID = {"run", "kind", "workload", "rep", "status", "exit_code", "scheduler_job_id", "iodiag_job", "label",
             "chunks", "chunk_bytes", "n_files", "n_tasks", "dst", "src", "path", "pattern", "format"}


@dataclass
class SweepTable:
    """One tunable's measurements: rows of (scenario, setting, time_s) plus descriptor columns."""

    tunable: str
    kind: str  # "read-pattern" | "write-size" | "descriptors"
    sources: list[str]
    frame: Any  # pandas DataFrame: scenario, setting, time_s, descriptors...
    descriptors: list[str] = field(default_factory=list)
    io: str = "any"  # the I/O the setting affects: "read", "write" or "any"
    features: tuple[str, ...] = ()  # job features the mapping uses (the tree's inputs)

    @property
    def settings(self) -> list[str]:
        return sorted(set(self.frame["setting"].astype(str)))

    @property
    def scenarios(self) -> list[str]:
        return sorted(set(self.frame["scenario"].astype(str)))


def _read_table(path: Path):
    import pandas as pd

    if path.is_dir():
        for name in ("results.parquet", "results.csv"):
            if (path / name).is_file():
                return _read_table(path / name)
        if (path / "sweep.json").is_file():
            from ..jobs.sweep.collect import collect_rows

            return pd.DataFrame(collect_rows(path))
        raise InputUnreadable(f"{path}: not a sweep folder or results table (no results.parquet, results.csv or sweep.json)",
                              hint="give a folder of `iodiag sweep run`, or the table `iodiag sweep collect` wrote")
    if not path.exists():
        raise InputNotFound(f"{path}: no such sweep table", hint="give a sweep folder or a results.csv / results.parquet")
    try:
        if path.suffix == ".parquet":
            return pd.read_parquet(path)
        return pd.read_csv(path)
    except Exception as exc:  # pandas raises many types for a bad file
        raise InputUnreadable(f"{path}: cannot be read as a table: {type(exc).__name__}: {exc}",
                              hint="give results.parquet or results.csv from `iodiag sweep collect`") from None


def _layout(fmt: Any, chunks: Any, chunk_bytes: float | None) -> str:
    fmt = str(fmt) if fmt is not None and fmt == fmt else "?"
    ch = str(chunks) if chunks is not None and chunks == chunks else "?"
    if ch == "contiguous":
        return f"{fmt} contiguous"
    size = f" ({fmt_bytes(chunk_bytes, si=True, sig=True)} chunks)" if chunk_bytes and chunk_bytes == chunk_bytes else ""
    return f"{fmt} chunks {ch}{size}"


def job_numeric_columns() -> set[str]:
    from .features import FEATURE_COLUMNS, META_COLUMNS

    return {c for c, t in {**META_COLUMNS, **FEATURE_COLUMNS}.items() if t in ("i8", "f8")}


def load_sweeps(paths: Sequence[str | os.PathLike], *, scenario: str | None = None, setting: str | None = None,
                time: str | None = None, tunable: str | None = None) -> list[SweepTable]:
    """Read sweep tables; tables of the same tunable (e.g. three repetition folders) are concatenated."""
    import pandas as pd

    if not paths:
        raise UsageError("no sweep given", hint="pass --sweep DIR (a folder of `iodiag sweep run`) or --sweep results.csv")
    tables: dict[str, SweepTable] = {}
    for p in paths:
        t = _one_table(Path(p), scenario=scenario, setting=setting, time=time, tunable=tunable)
        if t.tunable in tables:
            old = tables[t.tunable]
            if old.kind != t.kind:
                raise UsageError(f"{p}: tunable {t.tunable!r} is also given by {old.sources[0]} as a {old.kind} sweep",
                                 hint="name the tunables apart with --tunable, or give tables of the same kind")
            old.frame = pd.concat([old.frame, t.frame], ignore_index=True)
            old.sources += t.sources
        else:
            tables[t.tunable] = t
    for t in tables.values():
        if len(t.settings) < 2:
            only = t.settings[0] if t.settings else "none"
            raise UsageError(f"{', '.join(t.sources)}: the sweep covers {len(t.settings)} setting of {t.tunable} ({only}); "
                             "a default is chosen among at least two",
                             hint="sweep at least two settings of the tunable (the [grid] of the sweep spec)")
    return list(tables.values())


def _one_table(path: Path, *, scenario, setting, time, tunable) -> SweepTable:
    import pandas as pd

    df = _read_table(path)
    src = os.fspath(path)
    if "status" in df:
        df = df[df["status"] == "succeeded"]
    if not len(df):
        raise UsageError(f"{src}: no successful run in the sweep table", hint="run the sweep first (iodiag sweep run / submit)")
    cols = set(df.columns)
    numeric = job_numeric_columns()
    if scenario or setting or time or not ({"pattern", "chunks"} & cols) or {"scenario", "setting"} <= cols:
        sc, st = scenario or "scenario", setting or "setting"
        tm = time or next((c for c in ("time_s", "t_total_s") if c in cols), "time_s")
        missing = [c for c in (sc, st, tm) if c not in cols]
        if missing:
            raise UsageError(f"{src}: no column {', '.join(repr(m) for m in missing)} (columns: {', '.join(sorted(map(str, cols)))})",
                             hint="a sweep table needs scenario, setting and time columns: give --scenario/--setting/--time, "
                                  "or a table from `iodiag sweep collect`")
        desc = [c for c in df.columns if c in numeric and c not in (sc, st, tm)]
        out = df.assign(scenario=df[sc].astype(str), setting=df[st].astype(str), time_s=df[tm].astype(float))
        name = tunable or (str(df["tunable"].iloc[0]) if "tunable" in cols else st)
        return SweepTable(name, "descriptors", [src], out[["scenario", "setting", "time_s", *desc]], desc, "any", tuple(desc))
    if "pattern" in cols:
        need = ["t_total_s", "chunks"]
        miss = [c for c in need if c not in cols]
        if miss:
            raise UsageError(f"{src}: a read sweep without column(s) {', '.join(miss)}", hint="re-collect it with `iodiag sweep collect`")
        per_chunk = (df["bytes_stored_touched"] / df["chunks_touched"]).where(df["chunks_touched"] > 0) if "chunks_touched" in cols else None
        cb = per_chunk.groupby([df["format"].astype(str), df["chunks"].astype(str)]).transform("max") if per_chunk is not None else None
        lay = [_layout(f, c, b) for f, c, b in zip(df.get("format", ["?"] * len(df)), df["chunks"],
                                                  cb if cb is not None else [None] * len(df))]
        out = df.assign(scenario=df["pattern"].astype(str), setting=lay, time_s=df["t_total_s"].astype(float))
        return SweepTable(tunable or "read_layout", "read-pattern", [src], out[["scenario", "setting", "time_s"]], [], "read",
                          READ_PATTERN_FEATURES)
    # a conversion sweep over chunk shapes: the other varying grid column is the setting
    if "chunk_bytes" not in cols:
        raise UsageError(f"{src}: a sweep over chunk shapes without a chunk_bytes column",
                         hint="re-collect it with this version: `iodiag sweep collect DIR`")
    varying = [c for c in df.columns if c not in _NOT_GRID and not str(c).startswith(("t_", "bytes_")) and not pd.api.types.is_numeric_dtype(df[c]) and df[c].nunique() > 1]
    st = setting or (varying[0] if len(varying) == 1 else None)
    if st is None or st not in cols:
        raise UsageError(f"{src}: cannot tell which column is the setting (candidates: {', '.join(varying) or 'none'})",
                         hint="give --setting COLUMN")
    tm = time or "t_total_s"
    out = df.assign(scenario=df["chunks"].astype(str), setting=df[st].astype(str), time_s=df[tm].astype(float),
                    write_request_bytes=df["chunk_bytes"].astype(float))
    return SweepTable(tunable or f"write_{st}", "write-size", [src], out[["scenario", "setting", "time_s", "write_request_bytes"]],
                      ["write_request_bytes"], "write", WRITE_SIZE_FEATURES)


# -- mapping the site's jobs onto scenarios -----------------------------------------------------------------

def _col(jobs, name: str) -> np.ndarray:
    return jobs[name].to_numpy(dtype="f8") if name in jobs else np.full(len(jobs), np.nan)


def job_inputs(jobs) -> dict[str, np.ndarray]:
    """The derived per-job features the built-in mappings use (see the module docstring)."""
    h5r, h5w = np.nan_to_num(_col(jobs, "h5d_reads")), np.nan_to_num(_col(jobs, "h5d_writes"))
    pr, pw = np.nan_to_num(_col(jobs, "posix_reads")), np.nan_to_num(_col(jobs, "posix_writes"))
    with np.errstate(invalid="ignore", divide="ignore"):
        # HDF5 dataset counters give the request as the program made it; else POSIX's op size
        req_r = np.where(h5r > 0, _col(jobs, "h5d_bytes_read") / h5r, _col(jobs, "posix_bytes_read") / pr)
        req_w = np.where(h5w > 0, _col(jobs, "h5d_bytes_written") / h5w, _col(jobs, "posix_bytes_written") / pw)
        nreq = np.where(h5r > 0, h5r, pr)
        files_r = np.maximum(np.nan_to_num(_col(jobs, "n_files_read")), 1.0)
        per_file = np.nan_to_num(_col(jobs, "posix_bytes_read")) / files_r
        cover = np.clip(per_file / _col(jobs, "max_file_bytes"), 0.0, 1.0)
    return {"read_request_bytes": req_r, "read_requests_per_file": nreq / files_r, "read_file_coverage": cover,
            "write_request_bytes": req_w, "reads": pr, "writes": pw}


def job_weights(jobs, io: str, weight: str) -> np.ndarray:
    if weight not in WEIGHTS:
        raise UsageError(f"unknown weight {weight!r}; use one of {', '.join(WEIGHTS)}")
    if weight == "jobs":
        return np.ones(len(jobs))
    if weight == "core-hours":
        return np.nan_to_num(_col(jobs, "core_hours"))
    t = {"read": "read_time_s", "write": "write_time_s"}.get(io, "io_time_s")
    return np.nan_to_num(_col(jobs, t)) / 3600.0  # process-seconds in that I/O = core-hours spent on it


@dataclass
class JobMix:
    """Site jobs spread over the sweep's scenarios."""

    rows: Any  # DataFrame: job_key, scenario, weight, + the tunable's features (one row per job and scenario)
    jobs_total: int
    jobs_mapped: int
    unmapped: dict[str, int]  # reason -> jobs
    weight_unmapped: float


def map_jobs(jobs, table: SweepTable, *, weight: str = "io") -> JobMix:
    import pandas as pd

    n = len(jobs)
    w = job_weights(jobs, table.io, weight)
    scen = set(table.scenarios)
    inp = job_inputs(jobs)
    assign: list[list[tuple[str, float]]] = [[] for _ in range(n)]
    reason: list[str | None] = [None] * n
    feats: dict[str, np.ndarray] = {}
    if table.kind == "read-pattern":
        feats = {k: inp[k] for k in READ_PATTERN_FEATURES}
        req, per, cov = (inp[k] for k in READ_PATTERN_FEATURES)
        for i in range(n):
            if not inp["reads"][i] > 0:
                reason[i] = "reads nothing through POSIX"
                continue
            if not (math.isfinite(req[i]) and math.isfinite(cov[i])):
                reason[i] = "no read size or file size in the counters"
                continue
            if cov[i] >= READ_WHOLE_COVERAGE:
                pick = [("whole", 1.0)]
            elif req[i] < READ_SMALL_REQUEST_BYTES:
                pick = [("point", 1.0)] if per[i] <= READ_FEW_REQUESTS_PER_FILE else [("timeseries", 1.0)]
            elif per[i] <= READ_ONE_REQUEST_PER_FILE:
                pick = [("slice", 1.0)]
            else:  # several slices: whether they share a chunk depends on where its boundaries fall
                pick = [("slices_same_chunk", 0.5), ("slices_across_chunks", 0.5)]
            pick = [(s, f) for s, f in pick if s in scen]
            if not pick:
                reason[i] = "its read pattern was not measured by the sweep"
                continue
            tot = sum(f for _, f in pick)
            assign[i] = [(s, f / tot) for s, f in pick]
    else:
        desc = table.descriptors
        if not desc:
            raise UsageError(f"{table.sources[0]}: the sweep table does not say which jobs its scenarios stand for",
                             hint="add columns named after job features (e.g. max_file_bytes, nprocs) with each scenario's "
                                  "values, or pass --uniform to weigh every scenario the same")
        means = table.frame.groupby("scenario")[desc].mean()
        names = list(means.index)
        centre = np.log10(1.0 + np.abs(means.to_numpy(dtype="f8")))
        if table.kind == "write-size":
            X = inp["write_request_bytes"][:, None]
            feats = {"write_request_bytes": inp["write_request_bytes"]}
            active = inp["writes"] > 0
            idle = "writes nothing through POSIX"
        else:
            X = np.column_stack([_col(jobs, c) for c in desc]) if n else np.zeros((0, len(desc)))
            feats = {c: X[:, j] for j, c in enumerate(desc)}
            active = np.ones(n, bool)
            idle = ""
        lx = np.log10(1.0 + np.abs(X))
        for i in range(n):
            if not active[i]:
                reason[i] = idle
                continue
            if not np.all(np.isfinite(lx[i])):
                reason[i] = f"no value for {', '.join(c for c, v in zip(desc, lx[i]) if not np.isfinite(v))}"
                continue
            d = np.sqrt(((centre - lx[i]) ** 2).sum(axis=1))
            assign[i] = [(names[int(np.argmin(d))], 1.0)]
    rows = []
    keys = jobs["job_key"].tolist() if "job_key" in jobs else list(range(n))
    unmapped: dict[str, int] = {}
    w_un = 0.0
    for i in range(n):
        if not assign[i]:
            r = reason[i] or "unknown"
            unmapped[r] = unmapped.get(r, 0) + 1
            w_un += float(w[i])
            continue
        for s, f in assign[i]:
            rows.append((keys[i], s, float(w[i]) * f, *(float(feats[k][i]) for k in feats)))
    frame = pd.DataFrame(rows, columns=["job_key", "scenario", "weight", *feats])
    return JobMix(frame, n, n - sum(unmapped.values()), unmapped, w_un)


SCOPE_TEXT = {"serial-read": "those reading files through POSIX, without MPI-IO",
              "serial-write": "those writing files through POSIX, without MPI-IO"}


def scope_mask(jobs, scope: str | None) -> np.ndarray:
    """Which of ``jobs`` a site advice of ``scope`` is for (``[site.advice_scope]``, written by ``site defaults``):
    serial-read, the jobs a read sweep stands for (they read through POSIX, without MPI-IO, with a read size and
    file size the read-pattern mapping can use); serial-write, jobs writing through POSIX without MPI-IO.  No scope
    (advice written by hand): every job."""
    n = len(jobs)
    if not scope:
        return np.ones(n, bool)
    inp = job_inputs(jobs)
    mpiio = jobs["uses_mpiio"].fillna(False).to_numpy(dtype=bool) if "uses_mpiio" in jobs else np.zeros(n, bool)
    if scope == "serial-read":
        return (inp["reads"] > 0) & ~mpiio & np.isfinite(inp["read_request_bytes"]) & np.isfinite(inp["read_file_coverage"])
    if scope == "serial-write":
        return (inp["writes"] > 0) & ~mpiio
    return np.ones(n, bool)
