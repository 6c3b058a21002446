"""Dask jobs: a task-stream Gantt per worker thread with the worker's I/O
underneath, and task durations per task prefix with stragglers marked.

Tasks come from the profile's ``tasks`` table (Dask's task stream); I/O from
the ``ops`` table of the process whose pid is the worker's pid.  A straggler
is a task whose duration is far above its prefix's median: robust z-score
(0.6745 * (d - median) / MAD) above ``Stragglers.mad_factor`` and at least
``Stragglers.min_excess_s`` slower than the median - the same rule and the
same ``Config`` values the straggler detector uses.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...config import Stragglers
from ...profile import OP, JobProfile, Table
from . import READ, STRAGGLER, WRITE, margins, new_figure, shorten

# task prefixes: no blue or orange, which mean read and write in the I/O rows
PALETTE = ["#54a24b", "#b279a2", "#72b7b2", "#9d755d", "#e45756", "#eeca3b", "#637939", "#ff9da6", "#8c6d31", "#bab0ac"]
MAX_IO_SEGMENTS = 4000  # per worker, after merging: bounds drawing cost


@dataclass
class TaskStream:
    tasks: Table  # lane, worker, thread, key, prefix, phase, start_s, end_s (seconds since t0)
    lanes: list  # lane label per lane index: (worker, thread)
    io: Table  # worker_index, op, start_s, end_s: merged I/O intervals of each worker process
    workers: list  # worker addresses, in lane order
    t0_s: float


def _merge(start: np.ndarray, end: np.ndarray, gap: float) -> tuple[np.ndarray, np.ndarray]:
    """Union of intervals, joining those closer than ``gap``."""
    if len(start) == 0:
        return start, end
    order = np.argsort(start, kind="stable")
    s, e = start[order], np.maximum.accumulate(end[order])
    new = np.empty(len(s), bool)
    new[0] = True
    new[1:] = s[1:] > e[:-1] + gap
    idx = np.flatnonzero(new)
    return s[idx], np.maximum.reduceat(e, idx)


def task_stream(profile: JobProfile) -> TaskStream:
    t = profile.tasks
    if not len(t):
        empty = Table({k: np.zeros(0) for k in ("lane", "start_s", "end_s")})
        return TaskStream(tasks=empty, lanes=[], io=Table({k: np.zeros(0) for k in ("worker_index", "op", "start_s", "end_s")}), workers=[], t0_s=0.0)
    t0 = float(t["start_s"].min())
    if profile.job.start_s is not None:
        t0 = min(t0, float(profile.job.start_s))
    workers = sorted(set(t["worker"].tolist()))
    pairs = sorted(set(zip(t["worker"].tolist(), t["thread"].tolist())), key=lambda p: (workers.index(p[0]), p[1]))
    lane_of = {p: i for i, p in enumerate(pairs)}
    lanes = np.asarray([lane_of[p] for p in zip(t["worker"].tolist(), t["thread"].tolist())], dtype="i8")
    tasks = t.with_columns(lane=lanes, start_s=t["start_s"] - t0, end_s=t["end_s"] - t0)
    # I/O of each worker process, found by pid
    pid_of_worker = {}
    for w, pid in zip(t["worker"].tolist(), t["pid"].tolist()):
        if pid > 0:
            pid_of_worker[w] = pid
    proc_of_pid = {}
    if len(profile.processes):
        for proc, pid in zip(profile.processes["proc"].tolist(), profile.processes["pid"].tolist()):
            if pid > 0:
                proc_of_pid.setdefault(pid, []).append(proc)
    span = float(tasks["end_s"].max()) if len(tasks) else 1.0
    gap = max(span, 1e-9) / MAX_IO_SEGMENTS
    io_cols = {"worker_index": [], "op": [], "start_s": [], "end_s": []}
    ops = profile.ops
    if len(ops):
        for wi, w in enumerate(workers):
            procs = proc_of_pid.get(pid_of_worker.get(w, -1), [])
            if not procs:
                continue
            mine = np.isin(ops["proc"], procs)
            for op in ("read", "write"):
                sel = mine & (ops["op"] == OP[op])
                s, e = _merge(ops["start_s"][sel] - t0, ops["end_s"][sel] - t0, gap)
                io_cols["worker_index"].append(np.full(len(s), wi))
                io_cols["op"].append(np.full(len(s), op, dtype=object))
                io_cols["start_s"].append(s)
                io_cols["end_s"].append(e)
    io = Table({k: (np.concatenate(v) if v else np.zeros(0)) for k, v in io_cols.items()})
    return TaskStream(tasks=tasks, lanes=pairs, io=io, workers=workers, t0_s=t0)


def _prefix_colors(prefixes) -> dict:
    uniq = sorted(set(prefixes))
    return {p: PALETTE[i % len(PALETTE)] for i, p in enumerate(uniq)}


def draw_task_stream(ts: TaskStream):
    """Gantt: one row per worker thread (tasks by prefix), one I/O row under each worker."""
    from matplotlib.patches import Patch

    # row layout: for each worker, its thread lanes, then an I/O row
    rows = []  # (kind, index)
    lane_row, io_row = {}, {}
    for wi, w in enumerate(ts.workers):
        for li, (lw, _th) in enumerate(ts.lanes):
            if lw == w:
                lane_row[li] = len(rows)
                rows.append(("lane", li))
        io_row[wi] = len(rows)
        rows.append(("io", wi))
    fig = new_figure(9.0, 1.2 + 0.32 * max(len(rows), 1))
    margins(fig, left_in=2.3, right_in=1.6)
    ax = fig.subplots()
    colors = _prefix_colors(ts.tasks["prefix"].tolist()) if len(ts.tasks) else {}
    if len(ts.tasks):
        lanes = ts.tasks["lane"]
        for prefix, color in colors.items():
            sel = ts.tasks["prefix"] == prefix
            for li in np.unique(lanes[sel]).tolist():
                s2 = sel & (lanes == li)
                xr = list(zip(ts.tasks["start_s"][s2].tolist(), (ts.tasks["end_s"][s2] - ts.tasks["start_s"][s2]).tolist()))
                ax.broken_barh(xr, (lane_row[li] - 0.4, 0.8), facecolors=color, edgecolor="white", linewidth=0.3)
    for wi, r in io_row.items():
        for op, color, off in (("read", READ, -0.35), ("write", WRITE, 0.0)):
            sel = (ts.io["worker_index"] == wi) & (ts.io["op"] == op) if len(ts.io) else np.zeros(0, bool)
            if sel.any():
                xr = list(zip(ts.io["start_s"][sel].tolist(), np.maximum(ts.io["end_s"][sel] - ts.io["start_s"][sel], 1e-4).tolist()))
                ax.broken_barh(xr, (r + off, 0.35), facecolors=color, linewidth=0)
    labels = []
    for kind, idx in rows:
        if kind == "lane":
            w, th = ts.lanes[idx]
            labels.append(f"{shorten(str(w), 26)} t{idx}")
        else:
            labels.append("  I/O (read/write)")
    ax.set_yticks(np.arange(len(rows)), labels, fontsize=7)
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_xlabel("seconds since job start")
    ax.grid(axis="x", alpha=0.3)
    handles = [Patch(color=c, label=shorten(p, 24)) for p, c in list(colors.items())[:10]]
    handles += [Patch(color=READ, label="read"), Patch(color=WRITE, label="write")]
    ax.legend(handles=handles, fontsize=7, frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return fig


def robust_z(values: np.ndarray) -> tuple[np.ndarray, float, float]:
    """(z-scores, median, MAD) with the 0.6745 consistency factor; MAD 0 falls back to the mean deviation."""
    med = float(np.median(values))
    dev = np.abs(values - med)
    mad = float(np.median(dev))
    scale = mad / 0.6745 if mad > 0 else float(dev.mean()) * 1.2533
    if scale <= 0:
        return np.zeros(len(values)), med, mad
    return (values - med) / scale, med, mad


def task_durations(profile: JobProfile, stragglers: Stragglers | None = None) -> Table:
    """One row per compute task: prefix, duration, its prefix's median, robust z, straggler flag."""
    cfg = stragglers or Stragglers()
    t = profile.tasks
    if len(t) and "phase" in t and (t["phase"] == "compute").any():
        t = t.filter(t["phase"] == "compute")
    dur = (t["end_s"] - t["start_s"]) if len(t) else np.zeros(0)
    z = np.zeros(len(t))
    med = np.zeros(len(t))
    strag = np.zeros(len(t), bool)
    prefixes = t["prefix"] if len(t) else np.zeros(0, dtype=object)
    for p in sorted(set(prefixes.tolist())):
        sel = prefixes == p
        zz, m, _mad = robust_z(dur[sel])
        z[sel] = zz
        med[sel] = m
        if sel.sum() >= cfg.min_processes:
            strag[sel] = (zz > cfg.mad_factor) & (dur[sel] - m >= cfg.min_excess_s)
    return Table({
        "key": t["key"] if len(t) else np.zeros(0, dtype=object), "prefix": prefixes,
        "worker": t["worker"] if len(t) else np.zeros(0, dtype=object),
        "duration_s": dur, "prefix_median_s": med, "robust_z": z, "straggler": strag,
    })


def draw_task_durations(table: Table, *, max_prefixes: int = 12):
    """Per prefix (largest total time first): a box of durations, every task as a dot, stragglers as red crosses."""
    prefixes = sorted(set(table["prefix"].tolist()), key=lambda p: -float(table["duration_s"][table["prefix"] == p].sum()))[:max_prefixes]
    fig = new_figure(9.0, 0.9 + 0.38 * max(len(prefixes), 1))
    margins(fig, left_in=2.6)
    ax = fig.subplots()
    rng = np.random.default_rng(0)  # fixed jitter: the same input draws the same picture
    data = [table["duration_s"][table["prefix"] == p] for p in prefixes]
    if prefixes:
        ax.boxplot(data, orientation="horizontal", positions=np.arange(len(prefixes)), widths=0.6, showfliers=False,
                   medianprops={"color": "black"}, boxprops={"color": "#4a5568"}, whiskerprops={"color": "#4a5568"})
        for i, p in enumerate(prefixes):
            sel = table["prefix"] == p
            d = table["duration_s"][sel]
            s = table["straggler"][sel]
            y = i + rng.uniform(-0.22, 0.22, len(d))
            ax.scatter(d[~s], y[~s], s=6, color="#4c78a8", alpha=0.5, linewidths=0)
            if s.any():
                ax.scatter(d[s], y[s], s=36, color=STRAGGLER, marker="x", label="straggler" if i == 0 or not ax.get_legend_handles_labels()[1] else None)
        ax.set_yticks(np.arange(len(prefixes)), [f"{shorten(p, 30)} ({int((table['prefix'] == p).sum())})" for p in prefixes], fontsize=7)
    ax.set_ylim(len(prefixes) - 0.5, -0.5)
    ax.set_xlabel("task duration (s)")
    ax.grid(axis="x", alpha=0.3)
    if table["straggler"].any() if len(table) else False:
        ax.legend(fontsize=8, frameon=False, loc="lower right")
    return fig
