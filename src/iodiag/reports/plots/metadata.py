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

from ...profile import OP, OP_NAMES, JobProfile, Table
from . import margins, new_figure
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
    ops = profile.ops
    meta = ops["op"] >= OP["open"] if len(ops) else np.zeros(0, bool)
    if meta.any():
        source = "ops"
        o = ops.filter(meta)
        names = np.asarray(OP_NAMES, dtype=object)[o["op"]]
        for kind in KINDS:
            sel = np.isin(names, [n for n, k in _OP_KIND.items() if k == kind])
            if sel.any():
                counts[kind] += spread(np.zeros(int(sel.sum()), "i8"), o["start_s"][sel], o["start_s"][sel],
                                       np.ones(int(sel.sum())), t0, bin_s, 1, n_bins)[0]
    else:
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


def draw_metadata_over_time(table: Table):
    fig = new_figure(9.0, 2.8)
    margins(fig, left_in=0.8)
    ax = fig.subplots()
    width = float(table["end_s"][0] - table["start_s"][0]) if len(table) else 1.0
    edges = np.append(table["start_s"], table["end_s"][-1:]) if len(table) else np.zeros(1)
    bottom = np.zeros(len(table))
    palette = {"open": "#2f855a", "stat": "#805ad5", "seek": "#718096", "sync": "#c53030", "other": "#d69e2e"}
    for kind in KINDS:
        v = table[kind] / width
        if v.any():
            # one step artist per kind (not one patch per bin): constant drawing cost
            ax.stairs(bottom + v, edges, baseline=bottom.copy(), fill=True, color=palette[kind], label=kind, linewidth=0)
            bottom = bottom + v
    if len(table):
        ax.set_xlim(edges[0], edges[-1])
        ax.set_ylim(0, max(float(bottom.max()) * 1.1, 1e-9))
    ax.set_ylabel("operations / s")
    ax.set_xlabel("seconds since job start")
    ax.grid(axis="y", alpha=0.3)
    if bottom.any():
        ax.legend(fontsize=8, frameon=False, ncol=5, loc="lower right", bbox_to_anchor=(1.0, 1.0), borderaxespad=0.2)
    return fig
