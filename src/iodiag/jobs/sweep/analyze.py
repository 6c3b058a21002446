"""Sweep analysis: pure functions from the collected table to summary tables.

* ``summarize``: per configuration (every grid parameter but the repetition),
  n, mean, standard deviation and the 95 % confidence half-width
  (Student t, n-1 degrees of freedom) of a time, the spread of the
  repetitions (min, max, (max - min) / median), and the throughput
  (bytes / time) with the same statistics;
* ``scaling``: along one axis (e.g. ``workers``), speedup and parallel
  efficiency — strong (same total work): S = T(p0)/T(p), E = S/(p/p0); weak
  (work per worker constant): scaled speedup (p/p0)·T(p0)/T(p), E = T(p0)/T(p);
  ideal E = 1 in both;
* ``means``: arithmetic and harmonic means of throughput across
  configurations (the harmonic mean is the one that matches "same bytes
  moved by each configuration", the arithmetic one "same time spent").

Plots live in ``plots.py`` (compute here, draw there).
"""

from __future__ import annotations

import math
from typing import Any, Sequence

from ...errors import UsageError

META = {"run", "kind", "workload", "rep", "status", "exit_code", "scheduler_job_id", "iodiag_job"}


def t_quantile_975(dof: int) -> float:
    if dof < 1:
        return float("nan")
    from scipy import stats

    return float(stats.t.ppf(0.975, dof))


def config_columns(df, *, grid: Sequence[str] | None = None) -> list[str]:
    """Columns that tell configurations apart: the sweep's grid parameters (from
    sweep.json) plus, for the read workload, the pattern; without a grid list,
    every column that is neither metadata nor a measure."""
    if grid is not None:
        cols = [c for c in grid if c in df.columns]
        return cols + [c for c in ("pattern",) if c in df.columns and c not in cols]
    cols = []
    for c in df.columns:
        if c in META or c in ("chunks", "format"):
            continue
        if c.startswith(("t_", "bytes_", "n_")) or c.endswith(("MBps", "ratio")) or c == "chunks_touched":
            continue
        cols.append(c)
    return cols


def default_time_column(df) -> str:
    for c in ("t_write_s", "t_total_s"):
        if c in df.columns:
            return c
    raise UsageError("no time column (t_write_s or t_total_s) in the collected results",
                     hint="did any run succeed? check `iodiag sweep collect`")


def default_bytes_column(df) -> str | None:
    for c in ("bytes_logical", "bytes_requested"):
        if c in df.columns:
            return c
    return None


def summarize(df, *, time_col: str | None = None, bytes_col: str | None = None,
              by: Sequence[str] | None = None, grid: Sequence[str] | None = None):
    """One row per configuration with mean ± 95 % CI of time and throughput."""
    import numpy as np
    import pandas as pd

    ok = df[df["status"] == "succeeded"].copy()
    if ok.empty:
        raise UsageError("no succeeded runs to analyze", hint="run or resubmit the sweep first")
    time_col = time_col or default_time_column(ok)
    if time_col not in ok.columns:
        raise UsageError(f"no column {time_col!r} in the results", hint=f"columns: {', '.join(ok.columns)}")
    bytes_col = bytes_col if bytes_col is not None else default_bytes_column(ok)
    by = list(by) if by is not None else config_columns(ok, grid=grid)
    if bytes_col:
        ok["throughput_MBps_run"] = ok[bytes_col] / 1e6 / ok[time_col]
    rows = []
    groups = ok.groupby(by, dropna=False, sort=True) if by else [((), ok)]
    for key, g in groups:
        key = key if isinstance(key, tuple) else (key,)
        row: dict[str, Any] = dict(zip(by, key))
        t = g[time_col].to_numpy(dtype=float)
        row.update(_stats(t, "time_s"))
        if bytes_col:
            row["bytes"] = float(g[bytes_col].mean())
            row.update(_stats(g["throughput_MBps_run"].to_numpy(dtype=float), "throughput_MBps"))
        rows.append(row)
    return pd.DataFrame(rows)


def _stats(x, name: str) -> dict[str, float]:
    import numpy as np

    n = int(len(x))
    mean = float(np.mean(x))
    std = float(np.std(x, ddof=1)) if n > 1 else float("nan")
    half = t_quantile_975(n - 1) * std / math.sqrt(n) if n > 1 else float("nan")
    return {f"{name}_n": n, f"{name}_mean": mean, f"{name}_std": std, f"{name}_ci95": half,
            f"{name}_lo": mean - half if n > 1 else float("nan"), f"{name}_hi": mean + half if n > 1 else float("nan"),
            # the spread of the repetitions themselves: range, and range over the median (how far apart runs of
            # the same point landed)
            f"{name}_min": float(np.min(x)), f"{name}_max": float(np.max(x)),
            f"{name}_spread": float((np.max(x) - np.min(x)) / np.median(x)) if n > 1 and np.median(x) else float("nan")}


def scaling(summary, *, axis: str = "workers", mode: str = "strong"):
    """Speedup and efficiency along `axis`, within each group of the other grid columns."""
    import pandas as pd

    if axis not in summary.columns:
        raise UsageError(f"no grid parameter {axis!r} to scale along",
                         hint=f"grid columns: {', '.join(c for c in summary.columns if not c.startswith(('time_', 'throughput_', 'bytes')))}")
    if mode not in ("strong", "weak"):
        raise UsageError(f"scaling mode {mode!r} is not strong or weak")
    others = [c for c in summary.columns
              if c != axis and not c.startswith(("time_s", "throughput_MBps", "bytes"))]
    out = []
    groups = summary.groupby(others, dropna=False, sort=True) if others else [((), summary)]
    for _key, g in groups:
        g = g.sort_values(axis)
        base = g.iloc[0]
        p0, t0 = float(base[axis]), float(base["time_s_mean"])
        for _, r in g.iterrows():
            p, t = float(r[axis]), float(r["time_s_mean"])
            row = r.to_dict()
            if mode == "strong":  # same total work: S = T(p0)/T(p), E = S / (p/p0)
                row["speedup"] = t0 / t
                row["efficiency"] = (t0 / t) / (p / p0)
            else:  # work grows with p: scaled speedup (p/p0)·T(p0)/T(p), E = T(p0)/T(p)
                row["speedup"] = (p / p0) * t0 / t
                row["efficiency"] = t0 / t
            row["ideal_time_s"] = t0 * p0 / p if mode == "strong" else t0
            out.append(row)
    return pd.DataFrame(out)


def means(summary) -> dict[str, float]:
    """Arithmetic and harmonic means of the per-configuration mean throughput."""
    import numpy as np

    if "throughput_MBps_mean" not in summary.columns:
        return {}
    x = summary["throughput_MBps_mean"].to_numpy(dtype=float)
    x = x[np.isfinite(x) & (x > 0)]
    if not len(x):
        return {}
    return {"configurations": int(len(x)), "arithmetic_mean_MBps": float(np.mean(x)),
            "harmonic_mean_MBps": float(len(x) / np.sum(1.0 / x))}


def analyze(df, *, axis: str | None = "workers", mode: str = "strong", time_col: str | None = None,
            bytes_col: str | None = None, grid: Sequence[str] | None = None) -> dict[str, Any]:
    """Everything `iodiag sweep analyze` shows: summary, scaling (when the axis varies), means."""
    summary = summarize(df, time_col=time_col, bytes_col=bytes_col, grid=grid)
    result: dict[str, Any] = {"summary": summary, "means": means(summary), "mode": mode, "axis": axis,
                              "time_col": time_col or default_time_column(df[df["status"] == "succeeded"])}
    result["notes"] = []
    if axis and axis in summary.columns and summary[axis].nunique() > 1:
        import pandas as pd

        if pd.api.types.is_numeric_dtype(summary[axis]):
            result["scaling"] = scaling(summary, axis=axis, mode=mode)
        else:
            result["notes"].append(f"{axis} is not numeric: no speedup or efficiency along it")
    n_failed = int((df["status"] != "succeeded").sum())
    result["runs"] = {"total": int(df["run"].nunique()), "not_succeeded_rows": n_failed}
    return result
