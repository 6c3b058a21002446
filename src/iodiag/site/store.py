"""The site dataset on disk: a directory of parquet parts plus a small state file.

::

    site.parquet/
      _site.json           archive root, format version, one entry per ingest run
      jobs/run-00001-part-00000.parquet       one row per job (features + findings)
      programs/...         one row per (job, executable)
      errors/...           one row per damaged or unreadable log (path, kind, cause)
      logs/...             ingest state: one row per log read (dir, name, size, mtime)
      days/...             one row per directory finished in a run (its signature)

Parts are only ever added (written to a temporary name, then renamed), so an
interrupted run leaves a readable dataset, and the next run carries on from
the logs it recorded.  When a job gains logs later, its row is written again
by a later run; readers keep the newest row of each job (``load_site``).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, Iterable

from ..errors import InputNotFound, InputUnreadable, UsageError
from .features import DAY_COLUMNS, ERROR_COLUMNS, FORMAT_VERSION, JOB_COLUMNS, LOG_COLUMNS, PROGRAM_COLUMNS

TABLES = {"jobs": JOB_COLUMNS, "programs": PROGRAM_COLUMNS, "errors": ERROR_COLUMNS, "logs": LOG_COLUMNS, "days": DAY_COLUMNS}
STATE = "_site.json"


def _dataset(path: Path, table: str):
    import pyarrow.dataset as ds

    from .worker import schema

    d = path / table
    files = sorted(str(p) for p in d.glob("*.parquet")) if d.is_dir() else []
    return ds.dataset(files, format="parquet", schema=schema(TABLES[table]))


class SiteStore:
    """Append-only writer of one site dataset."""

    def __init__(self, out: str | os.PathLike, archive: str) -> None:
        self.path = Path(out)
        self.archive = os.path.abspath(archive)
        if self.path.exists():
            if not (self.path / STATE).is_file():
                raise UsageError(
                    f"{self.path} exists and is not a site dataset (no {STATE} inside)",
                    hint="choose a new --out path, or remove the existing one",
                )
            self.state = _read_state(self.path)
            if self.state.get("archive") != self.archive:
                raise UsageError(
                    f"{self.path} holds an ingest of {self.state.get('archive')}, not of {self.archive}",
                    hint="use one --out per archive",
                )
        else:
            try:
                for t in TABLES:
                    (self.path / t).mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise InputUnreadable(f"{self.path}: cannot create the site dataset: {exc.strerror}", hint="check the path and permissions") from None
            self.state = {"format": FORMAT_VERSION, "archive": self.archive, "runs": []}
            self._write_state()
        self.run = 1 + max((r["run"] for r in self.state["runs"]), default=0)
        self._parts = 0

    # -- incremental state ---------------------------------------------------
    def dir_signatures(self) -> dict[str, str]:
        t = _dataset(self.path, "days").to_table(columns=["dir", "signature", "run"])
        out: dict[str, tuple[int, str]] = {}
        for d, s, r in zip(t["dir"].to_pylist(), t["signature"].to_pylist(), t["run"].to_pylist()):
            if d not in out or r >= out[d][0]:
                out[d] = (r, s)
        return {d: s for d, (_, s) in out.items()}

    def known_logs(self, dirs: Iterable[str]) -> dict[str, dict[str, tuple[int, int]]]:
        """dir -> name -> (size, mtime_ns) of every log already read in those directories."""
        import pyarrow.dataset as ds

        dirs = sorted(set(dirs))
        if not dirs:
            return {}
        t = _dataset(self.path, "logs").to_table(columns=["dir", "name", "size", "mtime_ns"], filter=ds.field("dir").isin(dirs))
        out: dict[str, dict[str, tuple[int, int]]] = {}
        for d, n, s, m in zip(*(t[c].to_pylist() for c in ("dir", "name", "size", "mtime_ns"))):
            out.setdefault(d, {})[n] = (s, m)
        return out

    # -- writing -------------------------------------------------------------
    def write_part(self, tables: dict[str, Any]) -> None:
        import pyarrow.parquet as pq

        for name, table in tables.items():
            if table is None or table.num_rows == 0:
                continue
            final = self._next_part(name)
            tmp = final.with_suffix(".tmp")
            pq.write_table(table, tmp, compression="zstd")
            os.replace(tmp, final)
        self._parts += 1

    def part_writer(self) -> "PartWriter":
        """A part written a row group at a time (see PartWriter)."""
        return PartWriter(self)

    def _next_part(self, name: str) -> Path:
        return self.path / name / f"run-{self.run:05d}-part-{self._parts:05d}.parquet"

    def finish(self, summary: dict[str, Any]) -> None:
        self.state["runs"].append({"run": self.run, "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), **summary})
        self._write_state()

    def _write_state(self) -> None:
        tmp = self.path / (STATE + ".tmp")
        tmp.write_text(json.dumps(self.state, indent=1))
        os.replace(tmp, self.path / STATE)


class PartWriter:
    """One part of every table, written a row group at a time, so that the rows of a part never sit
    in memory together.  Each table goes to a temporary file; ``close`` renames them into the
    dataset, the ``logs`` table last (a run cut short before that re-reads those logs next time)."""

    def __init__(self, store: SiteStore) -> None:
        self.store = store
        self.files: dict[str, tuple[Any, Path, Path]] = {}
        self.rows = 0  # job and error rows written to this part

    def write(self, tables: dict[str, Any]) -> None:
        import pyarrow.parquet as pq

        from .worker import schema

        for name, table in tables.items():
            if table is None or table.num_rows == 0:
                continue
            f = self.files.get(name)
            if f is None:
                final = self.store._next_part(name)
                tmp = final.with_suffix(".tmp")
                f = self.files[name] = (pq.ParquetWriter(tmp, schema(TABLES[name]), compression="zstd"), tmp, final)
            f[0].write_table(table)

    def close(self) -> None:
        if not self.files:
            return
        for name in sorted(self.files, key=lambda n: n == "logs"):
            writer, tmp, final = self.files[name]
            writer.close()
            os.replace(tmp, final)
        self.files = {}
        self.rows = 0
        self.store._parts += 1


def _read_state(path: Path) -> dict[str, Any]:
    try:
        state = json.loads((path / STATE).read_text())
    except (OSError, ValueError) as exc:
        raise InputUnreadable(f"{path / STATE} cannot be read: {exc}", hint="the site dataset is damaged; re-run the ingest into a new --out") from None
    if state.get("format") != FORMAT_VERSION:
        raise InputUnreadable(f"{path} was written by another iodiag version (format {state.get('format')})",
                              hint=f"re-run iodiag site ingest into a new --out (this version writes format {FORMAT_VERSION})")
    return state


def load_site(path: str | os.PathLike, *, tables: Iterable[str] = ("jobs", "programs", "errors")) -> dict[str, Any]:
    """DataFrames of a site dataset, newest row per job / program / log."""
    p = Path(path)
    if not p.exists():
        raise InputNotFound(f"{p}: no such site dataset", hint="create it with: iodiag site ingest ARCHIVE --out " + str(p))
    if not (p / STATE).is_file():
        raise InputUnreadable(f"{p} is not a site dataset (no {STATE} inside)", hint="point at the --out directory of iodiag site ingest")
    state = _read_state(p)
    out: dict[str, Any] = {"state": state}
    want = set(tables) | {"logs"}
    # programs are kept only for the newest row of their job, so jobs are always read with them
    frames = {t: _dataset(p, t).to_table().to_pandas() for t in want | ({"jobs"} if "programs" in want else set())}
    jobs = frames.get("jobs")
    if jobs is not None and len(jobs):
        jobs = jobs.sort_values("run", kind="stable").drop_duplicates("job_key", keep="last")
        latest = dict(zip(jobs["job_key"], jobs["run"]))
        jobs = jobs.reset_index(drop=True)
    else:
        latest = {}
    if "jobs" in want:
        out["jobs"] = jobs
    if "programs" in want:
        pr = frames["programs"]
        if len(pr):
            pr = pr[pr["run"].to_numpy() == pr["job_key"].map(latest).to_numpy()].reset_index(drop=True)
        out["programs"] = pr
    logs = frames["logs"]
    if len(logs):
        logs = logs.sort_values("run", kind="stable").drop_duplicates(["dir", "name"], keep="last").reset_index(drop=True)
    out["logs"] = logs
    if "errors" in want:
        er = frames["errors"]
        if len(er) and len(logs):
            last = {(d, n): r for d, n, r in zip(logs["dir"], logs["name"], logs["run"])}
            keep = [last.get((d, n)) == r for d, n, r in zip(er["dir"], er["name"], er["run"])]
            er = er[keep].drop_duplicates(["path", "kind", "cause"]).reset_index(drop=True)
        out["errors"] = er
    return out


def feature_matrix(path: str | os.PathLike, *, level: str = "programs") -> dict[str, Any]:
    """The site table as a learning problem, for the recommender.

    Returns ``keys`` (who/what/when), ``X`` (numeric features, units in the
    names; booleans as 0/1) and ``Y`` (for every finding id of the vocabulary,
    the estimated seconds it cost the job: 0 when absent, NaN when found
    without an estimate), row-aligned.  ``level`` is "programs" (one row per
    executable of a job, the natural unit for per-application defaults) or "jobs".
    """
    from .features import FEATURE_COLUMNS, KEY_COLUMNS, META_COLUMNS

    if level not in ("programs", "jobs"):
        raise UsageError(f"level {level!r}: expected 'programs' or 'jobs'")
    frame = load_site(path, tables=(level,))[level]
    keys = [c for c in (*KEY_COLUMNS, "program") if c in frame]
    numeric_meta = [c for c, t in META_COLUMNS.items() if t in ("i8", "f8", "bool")]
    xcols = numeric_meta + list(FEATURE_COLUMNS)
    X = frame[xcols].astype("float64")
    Y = frame[[c for c in frame.columns if c.startswith("finding_") and c.endswith("_cost_s")]].astype("float64")
    Y.columns = [c[len("finding_"):-len("_cost_s")].replace("_", "-") for c in Y.columns]
    return {"keys": frame[keys].reset_index(drop=True), "X": X.reset_index(drop=True), "Y": Y.reset_index(drop=True)}
