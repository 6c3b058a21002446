"""Metadata operations over time.

From the ``ops`` table when it holds metadata operations (the embedded
collector records open/stat/...); otherwise estimated from the Darshan
counters: each record's opens are spread evenly over its first-to-last open
window and its other metadata calls (stat, seek, fsync, ...) over its
first-open-to-last-close window.  Darshan keeps counts and first/last
timestamps, not when each call happened, so the estimate shows *where* in the
run metadata work falls, not its fine structure; the ``source`` column says
which one a plot shows.
"""

from __future__ import annotations

import numpy as np

from ...analyzers.batches import process_batches
from ...profile import OP, OP_NAMES, JobProfile, Table
from .. import svg
from ._grid import spread
from .timeline import _job_span, _log_starts

N_BINS = 120
KINDS = ("open", "stat", "seek", "sync", "other")

# counters -> kind, and which window spreads them
_COUNTER_KINDS = {
    "POSIX": ("POSIX", {"open": ("POSIX_OPENS", "POSIX_FILENOS", "POSIX_DUPS"), "stat": ("POSIX_STATS",), "seek": ("POSIX_SEEKS",),
                        "sync": ("POSIX_FSYNCS", "POSIX_FDSYNCS"), "other": ("POSIX_RENAME_SOURCES", "POSIX_MMAPS")}),
    "STDIO": ("STDIO", {"open": ("STDIO_OPENS", "STDIO_FDOPENS"), "seek": ("STDIO_SEEKS",), "sync": ("STDIO_FLUSHES",)}),
}
_OP_KIND = {"open": "open", "close": "other", "stat": "stat", "seek": "seek", "fsync": "sync", "readdir": "other",
            "mkdir": "other", "rename": "other", "unlink": "other", "other": "other"}


def metadata_over_time(profile: JobProfile, *, n_bins: int = N_BINS) -> Table:
    """One row per time bin: metadata operations of each kind started in it."""
    t0, t1 = _job_span(profile)
    bin_s = (t1 - t0) / n_bins
    counts = {k: np.zeros(n_bins) for k in KINDS}
    source = None
    # bounded batches (an OpsSource is never read whole): the counts are sums of ones, exact in any order
    for part in (b for parts in process_batches(profile.ops, ("op", "start_s")) for b in parts):
        meta = part["op"] >= OP["open"]
        if not meta.any():
            continue
        source = "ops"
        o = part.filter(meta)
        names = np.asarray(OP_NAMES, dtype=object)[o["op"]]
        for kind in KINDS:
            sel = np.isin(names, [n for n, k in _OP_KIND.items() if k == kind])
            if sel.any():
                counts[kind] += spread(np.zeros(int(sel.sum()), "i8"), o["start_s"][sel], o["start_s"][sel],
                                       np.ones(int(sel.sum())), t0, bin_s, 1, n_bins)[0]
    if source is None:
        source = "counters"
        starts = _log_starts(profile)
        for mod, (pre, kinds) in _COUNTER_KINDS.items():
            t = profile.module(mod)
            if t is None:
                continue
            base = starts[t["log"]]
            # timestamps are seconds since the log's start (0 = at start, e.g. stdout opened before main)
            o_s = np.maximum(t[f"{pre}_F_OPEN_START_TIMESTAMP"], 0.0)
            o_e = np.maximum(t[f"{pre}_F_OPEN_END_TIMESTAMP"], 0.0)
            # the last thing the record saw (a stream like stdout is never closed: use its last read/write)
            last = np.maximum.reduce([np.maximum(t[f"{pre}_F_{w}_END_TIMESTAMP"], 0.0) for w in ("CLOSE", "READ", "WRITE", "OPEN")])
            end_any = np.maximum(last, o_s)
            for kind, names in kinds.items():
                n = sum(np.maximum(t[c], 0) for c in names if c in t)
                if not isinstance(n, np.ndarray):
                    continue
                sel = n > 0
                if not sel.any():
                    continue
                lo = base[sel] + o_s[sel]
                hi = base[sel] + (np.maximum(o_e[sel], o_s[sel]) if kind == "open" else end_any[sel])
                counts[kind] += spread(np.zeros(int(sel.sum()), "i8"), lo, hi, n[sel].astype("f8"), t0, bin_s, 1, n_bins)[0]
    edges = t0 + bin_s * np.arange(n_bins + 1)
    cols = {"bin": np.arange(n_bins), "start_s": edges[:-1] - t0, "end_s": edges[1:] - t0}
    cols.update({k: counts[k] for k in KINDS})
    cols["source"] = np.full(n_bins, source, dtype=object)
    return Table(cols)


PALETTE = {"open": "#2f855a", "stat": "#805ad5", "seek": "#718096", "sync": "#c53030", "other": "#d69e2e"}


def _steps(edges: np.ndarray, top: np.ndarray, base: np.ndarray, sx, sy) -> str:
    """Path of a filled step band between ``base`` and ``top`` (one polygon, constant cost per bin)."""
    xs = sx(edges)
    up = sy(top)
    down = sy(base)
    pts = []
    for i in range(len(top)):
        pts.append(f"{svg.num(xs[i])},{svg.num(up[i])}")
        pts.append(f"{svg.num(xs[i + 1])},{svg.num(up[i])}")
    for i in range(len(base) - 1, -1, -1):
        pts.append(f"{svg.num(xs[i + 1])},{svg.num(down[i])}")
        pts.append(f"{svg.num(xs[i])},{svg.num(down[i])}")
    return "M" + "L".join(pts) + "Z"


def draw_metadata_over_time(table: Table, *, width: float = 900) -> svg.Figure:
    """Stacked step areas: metadata operations per second of each kind, per time bin."""
    width_s = float(table["end_s"][0] - table["start_s"][0]) if len(table) else 1.0
    edges = np.append(table["start_s"], table["end_s"][-1:]) if len(table) else np.zeros(2)
    bottom = np.zeros(len(table))
    layers = []
    for kind in KINDS:
        v = table[kind] / width_s if len(table) else np.zeros(0)
        if v.any():
            layers.append((kind, bottom.copy(), bottom + v))
            bottom = bottom + v
    hi = svg.nice_max(float(bottom.max()) * 1.02 if len(bottom) and bottom.any() else 1.0)
    yt = svg.nice_ticks(0.0, hi, 5)
    ystep = yt[1] - yt[0] if len(yt) > 1 else 1.0
    ylabels = [svg.fmt_tick(t, ystep) for t in yt]
    left = 30 + max(svg.text_width(lab, 11) for lab in ylabels) + 10
    fig = svg.Figure(width, 34 + 200 + 50, label="Metadata operations over time")
    top = 34.0
    ax = fig.panel(left, top, width - left - 16, 200)
    ax.x(float(edges[0]), float(edges[-1])).y(0.0, hi)
    xt = svg.nice_ticks(float(edges[0]), float(edges[-1]), 8)
    xstep = xt[1] - xt[0] if len(xt) > 1 else 1.0
    ax.grid("y", yt)
    for kind, base, upper in layers:
        fig.path(_steps(edges, upper, base, ax.sx, ax.sy), fill=PALETTE[kind], title=f"{kind}: {float(table[kind].sum()):,.0f} operations")
    ax.frame()
    ax.yticks(yt, ylabels)
    ax.xticks(xt, [svg.fmt_tick(t, xstep) for t in xt])
    ax.ylabel("operations / s", offset=left - 16)
    ax.xlabel("seconds since job start")
    if layers:
        items = [(kind, PALETTE[kind]) for kind, _b, _u in layers]
        lw = sum(14 + 4 + svg.text_width(k, 11) + 14 for k, _c in items)
        fig.legend(items, max(ax.left, ax.right - lw), 6)
    return fig
