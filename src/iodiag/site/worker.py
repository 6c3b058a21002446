"""What one Dask task does: have a batch of jobs read and diagnosed, return rows.

A task gets a list of ``Unit`` (every log of one job in one directory) and
hands them to this thread's long-lived reader process
(``readers/isolate.py: ReaderServer``), which reads each job's logs, builds
and diagnoses the job and featurizes it there (``job.py: job_rows``) and
sends back only the job's rows.  A log that crashes or hangs darshan-util
costs that log (an error row); a job that cannot be built or diagnosed
becomes ``ingest-failed`` errors; neither takes the worker down.  The reader
holds one job's decoded data at a time.

The result is four small Arrow tables (jobs, programs, errors, logs).
"""

from __future__ import annotations

import operator
import os
from typing import Any, Sequence

from ..config import Config
from .features import ERROR_COLUMNS, JOB_COLUMNS, LOG_COLUMNS, PROGRAM_COLUMNS
from .walk import Unit

TABLE_COLUMNS = {"jobs": JOB_COLUMNS, "programs": PROGRAM_COLUMNS, "errors": ERROR_COLUMNS, "logs": LOG_COLUMNS}
JOB_FN = "iodiag.site.job:job_rows"  # run in the reader process for each job


def _arrow_type(t: str):
    import pyarrow as pa

    return {
        "str": pa.string(), "f8": pa.float64(), "i8": pa.int64(), "bool": pa.bool_(),
        "list<str>": pa.list_(pa.string()), "list<f8>": pa.list_(pa.float64()),
    }[t]


_SCHEMAS: dict[tuple, Any] = {}


def schema(columns: dict[str, str]):
    key = tuple(columns.items())
    out = _SCHEMAS.get(key)
    if out is None:
        import pyarrow as pa

        out = _SCHEMAS[key] = pa.schema([(n, _arrow_type(t)) for n, t in columns.items()])
    return out


_GETTERS: dict[tuple, Any] = {}


def row_values(rows: Sequence[dict[str, Any]], columns: dict[str, str]) -> list[tuple]:
    """Rows as tuples in column order (missing keys: None), the shape ``to_table`` and the pipe want.

    One C-level ``itemgetter`` call per row instead of a dict look-up per cell; a tuple pickles
    without its 145 column names.
    """
    names = tuple(columns)
    get = _GETTERS.get(names)
    if get is None:
        get = _GETTERS[names] = operator.itemgetter(*names)
    out = []
    for r in rows:
        try:
            out.append(get(r))
        except KeyError:
            out.append(get({**dict.fromkeys(names), **r}))
    return out


def to_table(rows: Sequence[dict[str, Any] | tuple], columns: dict[str, str]):
    """An Arrow table of rows given as dicts or as tuples in column order."""
    import pyarrow as pa

    if len(columns) < 2:
        raise ValueError("to_table needs two columns or more")
    if rows and isinstance(rows[0], dict):
        rows = row_values(rows, columns)
    cols = list(zip(*rows)) if rows else [()] * len(columns)
    return pa.Table.from_pydict(dict(zip(columns, cols)), schema=schema(columns))


def error_row(unit: Unit, path: str, kind: str, cause: str, loaded: bool, run: int) -> dict[str, Any]:
    return {"job_key": unit.job_key, "dir": unit.dir, "day": unit.day, "path": path,
            "name": os.path.basename(path), "kind": kind, "cause": cause, "loaded": loaded, "run": run}


def log_rows(unit: Unit, statuses: Sequence[str], run: int) -> list[dict[str, Any]]:
    """The ingest-state row of each log of the unit."""
    return [{"dir": unit.dir, "name": name, "size": size, "mtime_ns": mtime, "status": status, "job_key": unit.job_key, "run": run}
            for name, size, mtime, status in zip(unit.names, unit.sizes, unit.mtimes_ns, statuses)]


def failed_job_rows(unit: Unit, kind: str, cause: str, run: int) -> dict[str, list[dict[str, Any]]]:
    """Rows of a job that gave none: every log an error of ``kind``."""
    return {"jobs": [], "programs": [], "errors": [error_row(unit, p, kind, cause, False, run) for p in unit.paths],
            "logs": log_rows(unit, ["error"] * len(unit.paths), run)}


def process_units(units: Sequence[Unit], *, config: Config, run: int, job_fn: str = JOB_FN,
                  in_reader: bool = True) -> dict[str, Any]:
    """Read, diagnose and featurize every job of the batch; never raises for a bad log or job.

    ``job_fn`` ("package.module:function", called as ``job_fn(unit, results, config, run)``)
    makes one job's rows; it runs in the reader process, or in this one with ``in_reader=False``
    (the decoded logs then cross the pipe).
    """
    from ..analyzers.readers.isolate import run_jobs_served

    cfg = config
    rows: dict[str, list[dict[str, Any]]] = {"jobs": [], "programs": [], "errors": [], "logs": []}
    for out in run_jobs_served([(u, u.paths) for u in units], job_fn, (cfg, run), modules=cfg.site.modules, names=True,
                               timeout_s=cfg.reader.timeout_s, job_timeout_s=cfg.site.job_timeout_s,
                               isolate=cfg.reader.isolate, in_reader=in_reader):
        if out.error is None:  # rows as tuples in column order (job_rows)
            part = out.value
        else:
            part = {k: row_values(v, TABLE_COLUMNS[k]) for k, v in failed_job_rows(out.spec, "ingest-failed", out.error, run).items()}
        for k, v in part.items():
            rows[k].extend(v)
    res: dict[str, Any] = {k: to_table(v, TABLE_COLUMNS[k]) for k, v in rows.items()}
    res["n_logs"] = sum(len(u.paths) for u in units)
    return res


def pack_units(units: Sequence[Unit]) -> bytes:
    """A task's jobs as one compressed pickle: what a Dask task is submitted with.

    The scheduler (in the driver) keeps a finished task's arguments; sent as Unit objects
    they cost the driver ~1.3 kB per log for the rest of the run (18 Python objects each),
    as one compressed byte string ~60 bytes."""
    import pickle
    import zlib

    return zlib.compress(pickle.dumps(list(units), protocol=pickle.HIGHEST_PROTOCOL), 1)


def process_packed(packed: bytes, *, config: Config, run: int) -> dict[str, Any]:
    """``process_units`` of the jobs ``pack_units`` packed."""
    import pickle
    import zlib

    return process_units(pickle.loads(zlib.decompress(packed)), config=config, run=run)
