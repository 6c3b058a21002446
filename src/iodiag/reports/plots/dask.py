"""Dask jobs: a task-stream Gantt per worker thread with the worker's I/O
underneath, and task durations per task prefix with stragglers marked.

Tasks come from the profile's ``tasks`` table (Dask's task stream); I/O from
the ``ops`` table of the process whose pid is the worker's pid.  A straggler
is a task whose duration is far above its prefix's median: robust z-score
(0.6745 * (d - median) / MAD) above ``Stragglers.mad_factor`` and at least
``max(Stragglers.task_min_excess_s, min_excess_share x median)`` slower than the median, in a prefix of at
least ``task_min_tasks`` tasks - the straggler-task detector's rule (``tasktime.task_stragglers``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...analyzers.nputil import unique
from ...analyzers.batches import is_source
from ...analyzers.tasktime import task_stragglers
from ...config import Stragglers
from ...profile import OP, JobProfile, Table
from .. import svg
from . import READ, STRAGGLER, WRITE, shorten
from ._grid import spread

# task prefixes: no blue or orange, which mean read and write in the I/O rows
PALETTE = ["#54a24b", "#b279a2", "#72b7b2", "#9d755d", "#e45756", "#eeca3b", "#637939", "#ff9da6", "#8c6d31", "#bab0ac"]
MAX_IO_SEGMENTS = 4000  # per worker, after merging: bounds drawing cost
MAX_TASK_BARS = 3000  # more tasks than this: the Gantt is one raster image (bounded page size)


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
            # an OpsSource gives just these processes' operations (in their order in the table)
            o = ops.table(("proc", "op", "start_s", "end_s"), procs=procs) if is_source(ops) else ops
            mine = np.isin(o["proc"], procs)
            for op in ("read", "write"):
                sel = mine & (o["op"] == OP[op])
                s, e = _merge(o["start_s"][sel] - t0, o["end_s"][sel] - t0, gap)
                io_cols["worker_index"].append(np.full(len(s), wi))
                io_cols["op"].append(np.full(len(s), op, dtype=object))
                io_cols["start_s"].append(s)
                io_cols["end_s"].append(e)
    io = Table({k: (np.concatenate(v) if v else np.zeros(0)) for k, v in io_cols.items()})
    return TaskStream(tasks=tasks, lanes=pairs, io=io, workers=workers, t0_s=t0)


def _prefix_colors(prefixes) -> dict:
    uniq = sorted(set(prefixes))
    return {p: PALETTE[i % len(PALETTE)] for i, p in enumerate(uniq)}


def _px_merge(start: np.ndarray, end: np.ndarray, px_s: float) -> tuple[np.ndarray, np.ndarray]:
    """Bars closer than a pixel become one (at most one bar per pixel column: bounded page size)."""
    return _merge(np.asarray(start, float), np.asarray(end, float), px_s)


def _bar_gantt(fig, ax, ts: TaskStream, lane_row: dict, io_row: dict, colors: dict, band: float, px_s: float) -> None:
    """One bar per task (tasks closer than a pixel merged), one tooltip per prefix; I/O bars under each worker."""
    top = ax.top
    if len(ts.tasks):
        lanes = ts.tasks["lane"]
        for prefix, color in colors.items():
            sel = ts.tasks["prefix"] == prefix
            xs, ys, ws = [], [], []
            for li in unique(lanes[sel]).tolist():
                s2 = sel & (lanes == li)
                st, en = _px_merge(ts.tasks["start_s"][s2], ts.tasks["end_s"][s2], px_s)
                x0 = ax.sx(st)
                w = ax.sx(en) - x0
                xs.append(x0)
                ws.append(np.where(w > 3.0, w - 1.0, np.maximum(w, 1.5)))  # a 1 px gap between long neighbours
                ys.append(np.full(len(st), top + lane_row[li] * band + 0.12 * band))
            n_tasks = int(sel.sum())
            fig.rects(np.concatenate(xs), np.concatenate(ys), np.concatenate(ws), 0.76 * band, color,
                      group_title=f"{prefix}: {n_tasks:,} task{'s' if n_tasks != 1 else ''}")
    for wi, r in io_row.items():
        for op, color, off in (("read", READ, 0.1), ("write", WRITE, 0.5)):
            sel = (ts.io["worker_index"] == wi) & (ts.io["op"] == op) if len(ts.io) else np.zeros(0, bool)
            if sel.any():
                st, en = _px_merge(ts.io["start_s"][sel], ts.io["end_s"][sel], px_s)
                x0 = ax.sx(st)
                fig.rects(x0, np.full(len(st), top + r * band + off * band), np.maximum(ax.sx(en) - x0, 1.0), 0.4 * band, color,
                          group_title=f"{ts.workers[wi]} {op}s")


def _shade(rgb: np.ndarray, frac: np.ndarray) -> np.ndarray:
    """Colours towards white as a pixel column is less busy (any activity keeps at least 40 % of the colour)."""
    k = (0.4 + 0.6 * np.clip(frac, 0.0, 1.0))[..., None]
    return (255.0 - (255.0 - rgb) * k).round().astype(np.uint8)


def _raster_gantt(fig, ax, ts: TaskStream, rows: list, lane_row: dict, io_row: dict, colors: dict, lo: float, px_s: float) -> None:
    """Many tasks: one PNG with a pixel column per ``px_s`` seconds and two pixel rows per Gantt row.

    A thread row's pixel shows the prefix colour that covers most of that
    column's time, lighter when the thread was idle part of it; an I/O row
    shows reads (upper half) and writes (lower half) the same way.  The page
    then holds one small image whatever the number of tasks.
    """
    ncols = max(int(round(ax.w)), 1)
    nrows = len(rows)
    img = np.full((2 * nrows, ncols, 3), 255, dtype=np.uint8)
    shades = sorted(set(colors.values()), key=list(colors.values()).index)
    shade_of = {c: i for i, c in enumerate(shades)}
    pal = np.array([svg._rgb(c) for c in shades], dtype=np.float64)
    t = ts.tasks
    row = np.array([lane_row[int(li)] for li in t["lane"].tolist()], dtype=np.int64)
    ci = np.array([shade_of[colors[p]] for p in t["prefix"].tolist()], dtype=np.int64)
    dur = np.maximum(t["end_s"] - t["start_s"], 1e-9)  # an instant task still marks its column
    cov = spread(row * len(shades) + ci, t["start_s"], t["start_s"] + dur, dur, lo, px_s, nrows * len(shades), ncols)
    cov = cov.reshape(nrows, len(shades), ncols)
    busy = cov.sum(axis=1)
    has = busy > 0
    rgb = _shade(pal[cov.argmax(axis=1)], busy / px_s)
    for sub in (0, 1):
        img[sub::2][has] = rgb[has]
    if len(ts.io):
        for op, color, sub in (("read", READ, 0), ("write", WRITE, 1)):
            sel = ts.io["op"] == op
            if not sel.any():
                continue
            r = np.array([io_row[int(w)] for w in ts.io["worker_index"][sel].tolist()], dtype=np.int64)
            st = ts.io["start_s"][sel]
            d = np.maximum(ts.io["end_s"][sel] - st, 1e-9)
            g = spread(r, st, st + d, d, lo, px_s, nrows, ncols)
            hit = g > 0
            colour = np.broadcast_to(np.array(svg._rgb(color), dtype=np.float64), g.shape + (3,))
            img[sub::2][hit] = _shade(colour, g / px_s)[hit]
    fig.image(ax.left, ax.top, ax.w, ax.h, svg.png_rgb(img),
              title=f"{len(t):,} tasks drawn as one image: colour = prefix covering most of each pixel column, lighter = idle part of it")
    # thin separators between workers
    for wi, r in io_row.items():
        y = ax.top + (r + 1) * ax.h / max(nrows, 1)
        if wi < len(io_row) - 1:
            fig.line(ax.left, y, ax.right, y, color="#cbd5e0", width=1)


def draw_task_stream(ts: TaskStream, *, width: float = 900) -> svg.Figure:
    """Gantt: one row per worker thread (tasks coloured by prefix), one I/O row under each worker."""
    rows = []  # (kind, index)
    lane_row, io_row = {}, {}
    for wi, w in enumerate(ts.workers):
        for li, (lw, _th) in enumerate(ts.lanes):
            if lw == w:
                lane_row[li] = len(rows)
                rows.append(("lane", li))
        io_row[wi] = len(rows)
        rows.append(("io", wi))
    labels = []
    for kind, idx in rows:
        if kind == "lane":
            w, _th = ts.lanes[idx]
            labels.append(f"{shorten(str(w), 30)} t{idx}")
        else:
            labels.append("I/O (read / write)")
    colors = _prefix_colors(ts.tasks["prefix"].tolist()) if len(ts.tasks) else {}
    legend = [(shorten(p, 28), c) for p, c in list(colors.items())[:10]] + [("read", READ), ("write", WRITE)]
    legend_w = max(svg.text_width(lab, 11) for lab, _c in legend) + 34
    left = 12 + max([svg.text_width(lab, 11) for lab in labels] + [40.0]) + 10
    band = 22.0 if len(rows) <= 60 else max(6.0, 1320.0 / len(rows))
    top = 12.0
    ph = band * max(len(rows), 1)
    fig = svg.Figure(width, top + max(ph, 18.0 * len(legend)) + 62, label="Task stream per worker thread")
    ax = fig.panel(left, top, width - left - legend_w - 16, ph)
    lo = 0.0
    if len(ts.tasks):
        lo = float(ts.tasks["start_s"].min())
        if len(ts.io):
            lo = min(lo, float(ts.io["start_s"].min()))
    hi = max([lo + 1e-3] + ([float(ts.tasks["end_s"].max())] if len(ts.tasks) else []) + ([float(ts.io["end_s"].max())] if len(ts.io) else []))
    pad = 0.02 * (hi - lo)
    lo, hi = max(0.0, lo - pad), hi + pad
    ax.x(lo, hi).y(0, max(len(rows), 1))
    xt = svg.nice_ticks(lo, hi, 8)
    step = xt[1] - xt[0] if len(xt) > 1 else 1.0
    ax.grid("x", xt)
    px_s = (hi - lo) / ax.w
    for kind, idx in rows:
        if kind == "io":
            fig.rect(ax.left, top + io_row[idx] * band, ax.w, band, "#f7fafc", mark=False)
    if len(ts.tasks) > MAX_TASK_BARS:
        _raster_gantt(fig, ax, ts, rows, lane_row, io_row, colors, lo, px_s)
    else:
        _bar_gantt(fig, ax, ts, lane_row, io_row, colors, band, px_s)
    ax.frame()
    ax.yticks([], labels, at=[top + (i + 0.5) * band for i in range(len(rows))], size=11 if band >= 14 else max(6.0, band - 2))
    ax.xticks(xt, [svg.fmt_tick(t, step) for t in xt])
    ax.xlabel("seconds since job start")
    y = top
    for lab, c in legend:
        y += fig.legend([(lab, c)], ax.right + 12, y)
    return fig


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
        zz, m, mask = task_stragglers(dur[sel], cfg)  # the detector's own rule and thresholds
        z[sel] = zz
        med[sel] = m
        strag[sel] = mask
    return Table({
        "key": t["key"] if len(t) else np.zeros(0, dtype=object), "prefix": prefixes,
        "worker": t["worker"] if len(t) else np.zeros(0, dtype=object),
        "duration_s": dur, "prefix_median_s": med, "robust_z": z, "straggler": strag,
    })


MAX_DOTS = 1000  # per prefix: beyond this, an even sample of the sorted durations (stragglers always drawn)


def _box_stats(d: np.ndarray) -> tuple[float, float, float, float, float]:
    """(low whisker, q1, median, q3, high whisker): whiskers at the furthest durations within 1.5 IQR."""
    q1, med, q3 = (float(x) for x in np.percentile(d, [25, 50, 75]))
    iqr = q3 - q1
    inside = d[(d >= q1 - 1.5 * iqr) & (d <= q3 + 1.5 * iqr)]
    return float(inside.min()), q1, med, q3, float(inside.max())


def draw_task_durations(table: Table, *, max_prefixes: int = 12, width: float = 900) -> svg.Figure:
    """Per prefix (largest total time first): a box of durations, every task as a dot, stragglers as red crosses."""
    prefixes = sorted(set(table["prefix"].tolist()), key=lambda p: -float(table["duration_s"][table["prefix"] == p].sum()))[:max_prefixes]
    labels = [f"{shorten(p, 34)} ({int((table['prefix'] == p).sum()):,})" for p in prefixes]
    left = 12 + max([svg.text_width(lab, 11) for lab in labels] + [40.0]) + 10
    band = 34.0
    top = 12.0
    ph = band * max(len(prefixes), 1)
    fig = svg.Figure(width, top + ph + 86, label="Task durations per prefix")
    ax = fig.panel(left, top, width - left - 16, ph)
    dmax = float(table["duration_s"].max()) if len(table) else 1.0
    hi = svg.nice_max(max(dmax, 1e-6) * 1.02, 8)
    ax.x(0.0, hi).y(0, max(len(prefixes), 1))
    xt = svg.nice_ticks(0.0, hi, 8)
    step = xt[1] - xt[0] if len(xt) > 1 else 1.0
    ax.grid("x", xt)
    rng = np.random.default_rng(0)  # fixed jitter: the same input draws the same picture
    for i, p in enumerate(prefixes):
        sel = table["prefix"] == p
        d = table["duration_s"][sel].astype(float)
        s = table["straggler"][sel].astype(bool)
        yc = top + (i + 0.5) * band
        lo_w, q1, med, q3, hi_w = _box_stats(d)
        bh = 0.6 * band
        wx = ax.sx(np.array([lo_w, q1, med, q3, hi_w]))
        fig.path(f"M{svg.num(wx[0])},{svg.num(yc)}H{svg.num(wx[1])}M{svg.num(wx[3])},{svg.num(yc)}H{svg.num(wx[4])}"
                 f"M{svg.num(wx[0])},{svg.num(yc - bh / 4)}v{svg.num(bh / 2)}M{svg.num(wx[4])},{svg.num(yc - bh / 4)}v{svg.num(bh / 2)}",
                 stroke="#4a5568", width=1, mark=False)
        fig.rect(wx[1], yc - bh / 2, max(wx[3] - wx[1], 1.0), bh, "#e2e8f0", stroke="#4a5568",
                 title=f"{p}: median {med:.4g} s, quartiles {q1:.4g} to {q3:.4g} s, {len(d):,} tasks")
        fig.line(wx[2], yc - bh / 2, wx[2], yc + bh / 2, color=svg.INK, width=2)
        calm = np.sort(d[~s])
        if len(calm) > MAX_DOTS:
            calm = calm[np.linspace(0, len(calm) - 1, MAX_DOTS).round().astype(int)]
        jitter = rng.uniform(-0.22, 0.22, len(calm)) * band
        xs = ax.sx(calm)
        dots = "".join(f'<circle cx="{svg.num(x)}" cy="{svg.num(yc + j)}" r="2"/>' for x, j in zip(np.atleast_1d(xs).tolist(), jitter.tolist()))
        if dots:
            fig.parts.append(f'<g class="mark" fill="#4c78a8" fill-opacity="0.55">{dots}</g>')
            fig.marks += len(calm)
        for x, key in zip(np.atleast_1d(ax.sx(d[s])).tolist(), table["key"][sel][s].tolist()):
            fig.path(f"M{svg.num(x - 5)},{svg.num(yc - 5)}L{svg.num(x + 5)},{svg.num(yc + 5)}M{svg.num(x - 5)},{svg.num(yc + 5)}L{svg.num(x + 5)},{svg.num(yc - 5)}",
                     stroke=STRAGGLER, width=2, title=f"straggler {key}")
    ax.frame()
    ax.yticks([], labels, at=[top + (i + 0.5) * band for i in range(len(prefixes))])
    ax.xticks(xt, [svg.fmt_tick(t, step) for t in xt])
    ax.xlabel("task duration (s)")
    items = [("task", "#4c78a8")] + ([("straggler", STRAGGLER)] if len(table) and table["straggler"].any() else [])
    fig.legend(items, ax.left, ax.bottom + 46, marker={"task": "dot", "straggler": "x"})
    return fig
