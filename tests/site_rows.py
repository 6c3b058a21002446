"""A site dataset's tables as canonical text, to compare ingests exactly (tests and benchmarks).

Every job, program, error and log-state row becomes one JSON line in a stable order, floats
written with ``repr`` (exact: the same text means the same float64), absolute paths under
the archive written relative to it.  Columns that depend on when or where the ingest ran
(``run``, a log's ``mtime_ns``) are left out.
"""

from __future__ import annotations

import json
import math
import os
from typing import Any

from iodiag.site import load_site

TABLE_KEYS = {"jobs": ("job_key",), "programs": ("job_key", "program"), "errors": ("path", "kind", "cause"),
              "logs": ("dir", "name")}
SKIP = {"run", "mtime_ns"}


def _value(v: Any, root: str) -> Any:
    if isinstance(v, float):
        return "nan" if math.isnan(v) else repr(v)
    if isinstance(v, str):
        return v.replace(root, "<archive>")
    if hasattr(v, "tolist"):  # numpy scalars and arrays (list columns)
        return _value(v.tolist(), root)
    if isinstance(v, (list, tuple)):
        return [_value(x, root) for x in v]
    return v


def site_rows(dataset: str | os.PathLike, archive: str | os.PathLike) -> dict[str, list[str]]:
    """table -> sorted JSON lines of its newest rows."""
    root = os.path.abspath(os.fspath(archive))
    data = load_site(dataset, tables=("jobs", "programs", "errors"))
    out: dict[str, list[str]] = {}
    for table in TABLE_KEYS:
        frame = data[table]
        cols = [c for c in frame.columns if c not in SKIP]
        lines = []
        for rec in frame[cols].to_dict("records"):
            lines.append(json.dumps({c: _value(rec[c], root) for c in cols}, sort_keys=True))
        out[table] = sorted(lines)
    return out


def diff_rows(a: dict[str, list[str]], b: dict[str, list[str]], limit: int = 5) -> list[str]:
    """Human-readable differences (empty when the tables are equal)."""
    msgs = []
    for table in TABLE_KEYS:
        x, y = a.get(table, []), b.get(table, [])
        if x == y:
            continue
        sx, sy = set(x), set(y)
        msgs.append(f"{table}: {len(x)} vs {len(y)} rows, {len(sx - sy)} only in the first, {len(sy - sx)} only in the second")
        for line in sorted(sx - sy)[:limit]:
            first = json.loads(line)
            keys = TABLE_KEYS[table]
            other = next((json.loads(l) for l in sy - sx if all(json.loads(l).get(k) == first.get(k) for k in keys)), None)
            if other is None:
                msgs.append(f"  missing in the second: {[first.get(k) for k in keys]}")
            else:
                cols = sorted(c for c in first if first[c] != other.get(c))
                msgs.append(f"  {[first.get(k) for k in keys]}: " + ", ".join(f"{c} {first[c]!r} != {other.get(c)!r}" for c in cols[:8]))
    return msgs


def row_digests(rows: dict[str, list[str]]) -> dict[str, dict[str, str]]:
    """table -> row key -> a short digest of the whole row (a compact snapshot of ``site_rows``)."""
    import hashlib

    out: dict[str, dict[str, str]] = {}
    for table, lines in rows.items():
        keys = TABLE_KEYS[table]
        d: dict[str, str] = {}
        for line in lines:
            rec = json.loads(line)
            key = " | ".join(str(rec.get(k)) for k in keys)
            d[key] = hashlib.sha256(line.encode()).hexdigest()[:16]
        out[table] = dict(sorted(d.items()))
    return out
