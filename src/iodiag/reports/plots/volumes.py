"""Volumes and operation counts per module (POSIX, MPI-IO, STDIO, HDF5, PnetCDF, DAOS).

Numbers come from the Darshan counters (complete even when a DXT trace is
partial).  Layers are shown side by side, never summed: an MPI-IO write is
also counted by POSIX underneath it.
"""

from __future__ import annotations


import numpy as np

from ...analyzers.nputil import unique
from ...analyzers.summary import MODULE_SPEC
from ...profile import JobProfile, Table
from .. import svg
from ...units import fmt_bytes, fmt_compact
from . import META, READ, WRITE

SIZE_BINS = ("0_100", "100_1K", "1K_10K", "10K_100K", "100K_1M", "1M_4M", "4M_10M", "10M_100M", "100M_1G", "1G_PLUS")
SIZE_LABELS = ("0-100", "100-1K", "1K-10K", "10K-100K", "100K-1M", "1M-4M", "4M-10M", "10M-100M", "100M-1G", "1G+")
# upper bounds (inclusive) of the first nine bins, as darshan-runtime buckets sizes
SIZE_UPPER = np.array([100, 1024, 10 * 1024, 100 * 1024, 1024 ** 2, 4 * 1024 ** 2, 10 * 1024 ** 2, 100 * 1024 ** 2, 1024 ** 3], dtype=np.int64)


def size_bin(lengths: np.ndarray) -> np.ndarray:
    """Darshan's size-histogram bin of each access length (0..9)."""
    return np.searchsorted(SIZE_UPPER, lengths, side="left")


def _count_range(values) -> tuple[float, float]:
    """Log axis range for counts: from below 1 to a little above the largest count."""
    hi = max([float(v) for v in values] + [10.0])
    return 0.7, hi * 1.6


def draw_module_volumes(table: Table, *, width: float = 900) -> svg.Figure:
    """Bytes (left panel) and operation counts (right, logarithmic) per module: reads, writes, metadata."""
    mods = [str(m) for m in table["module"]] if len(table) else []
    n = max(len(mods), 1)
    band = 40.0
    label_w = max([svg.text_width(m, 11) for m in mods] + [30.0])
    left = 12 + label_w + 10
    top, gap = 34.0, 50.0
    pw = (width - left - gap - 20) / 2
    ph = band * n
    fig = svg.Figure(width, top + ph + 70, label="Bytes and operations per module")
    ax_b = fig.panel(left, top, pw, ph)
    ax_o = fig.panel(left + pw + gap, top, pw, ph)
    hi_b, ticks_b, labels_b = svg.byte_ticks(max([float(table[c].max()) for c in ("bytes_read", "bytes_written")] + [1.0]) if len(table) else 1.0)
    ax_b.x(0, hi_b).y(0, n)
    lo_o, hi_o = _count_range(table["reads"].tolist() + table["writes"].tolist() + table["meta_ops"].tolist() if len(table) else [])
    ax_o.x(lo_o, hi_o, log=True).y(0, n)
    ticks_o = svg.log_ticks(lo_o, hi_o)
    ax_b.grid("x", ticks_b)
    ax_o.grid("x", ticks_o)
    for i, mod in enumerate(mods):
        y0 = top + i * band
        for j, (col, colour, what) in enumerate((("bytes_read", READ, "read"), ("bytes_written", WRITE, "written"))):
            v = float(table[col][i])
            fig.rect(left, y0 + 4 + j * 16, ax_b.sx(v) - left, 15, colour, title=f"{mod} {what}: {fmt_bytes(v)} ({int(v):,} B)")
        for j, (col, colour, what) in enumerate((("reads", READ, "reads"), ("writes", WRITE, "writes"), ("meta_ops", META, "metadata operations"))):
            v = float(table[col][i])
            if v > 0:
                x0 = ax_o.left
                fig.rect(x0, y0 + 4 + j * 11, ax_o.sx(v) - x0, 10, colour, title=f"{mod} {what}: {int(v):,}")
    centres = [top + (i + 0.5) * band for i in range(len(mods))]
    ax_b.yticks([], mods, at=centres)
    ax_b.frame()
    ax_o.frame()
    ax_b.xticks(ticks_b, labels_b)
    ax_o.xticks(ticks_o, [fmt_compact(t) for t in ticks_o])
    ax_b.title("Bytes per module")
    ax_o.title("Operations per module (log scale)")
    fig.legend([("read", READ), ("written", WRITE)], ax_b.left, ax_b.bottom + 30)
    fig.legend([("reads", READ), ("writes", WRITE), ("metadata ops", META)], ax_o.left, ax_o.bottom + 30)
    return fig


def access_sizes(profile: JobProfile) -> Table:
    """Access-size histogram: one row per (module, direction, size bin) with an op count.

    From the counters' SIZE_* histograms (POSIX, DFS, DAOS: per call; MPI-IO,
    HDF5, PnetCDF: per aggregate request).  A profile without counters but with
    an ops table (an embedded trace) is binned from the ops on the same edges.
    """
    mods, dirs, bins, counts, source = [], [], [], [], []
    for mod, (pre, *_rest) in MODULE_SPEC.items():
        t = profile.module(mod)
        if t is None:
            continue
        for direction, word in (("read", "READ"), ("write", "WRITE")):
            names = [f"{pre}_SIZE_{word}_{b}" for b in SIZE_BINS]
            if names[0] not in t:
                names = [f"{pre}_SIZE_{word}_AGG_{b}" for b in SIZE_BINS]
            if names[0] not in t:
                continue
            for label, name in zip(SIZE_LABELS, names):
                mods.append(mod)
                dirs.append(direction)
                bins.append(label)
                counts.append(int(np.maximum(t[name], 0).sum()))
                source.append("counters")
    if not mods and len(profile.ops):
        from ...analyzers.batches import process_batches
        from ...profile import OP, OPS_MODULES

        hists: dict[tuple[int, str], np.ndarray] = {}  # counts, summed one process at a time (exact)
        for ops in (b for parts in process_batches(profile.ops, ("module", "op", "length")) for b in parts):
            for code in unique(ops["module"]).tolist():
                for direction in ("read", "write"):
                    sel = (ops["module"] == code) & (ops["op"] == OP[direction])
                    h = np.bincount(size_bin(ops["length"][sel]), minlength=len(SIZE_LABELS))
                    hists[(code, direction)] = hists.get((code, direction), 0) + h
        for code, direction in sorted(hists, key=lambda k: (k[0], k[1] != "read")):  # modules, then read, write
            for label, c in zip(SIZE_LABELS, hists[(code, direction)].tolist()):
                mods.append(OPS_MODULES[code])
                dirs.append(direction)
                bins.append(label)
                counts.append(int(c))
                source.append("ops")
    return Table({
        "module": np.asarray(mods, dtype=object), "direction": np.asarray(dirs, dtype=object),
        "size_bin": np.asarray(bins, dtype=object), "count": np.asarray(counts, dtype="i8"),
        "source": np.asarray(source, dtype=object),
    })


PALETTE = ("#2b6cb0", "#dd6b20", "#38a169", "#805ad5", "#d53f8c", "#319795", "#b7791f", "#4a5568", "#e53e3e")


def draw_access_sizes(table: Table, *, width: float = 900) -> svg.Figure:
    """Two panels (reads, writes); one bar group per size bin, one bar per module; logarithmic count axis."""
    mods = list(dict.fromkeys(table["module"].tolist()))
    colours = {m: PALETTE[i % len(PALETTE)] for i, m in enumerate(mods)}
    fig = svg.Figure(width, 330, label="Access-size histograms")
    leg_h = fig.legend([(m, colours[m]) for m in mods], 70, 6, max_width=width - 80) if mods else 0.0
    top = 30 + leg_h
    lo, hi = _count_range(table["count"].tolist() if len(table) else [])
    ticks = svg.log_ticks(lo, hi)
    tick_labels = [fmt_compact(t) for t in ticks]
    left = 22 + max(svg.text_width(t, 11) for t in tick_labels) + 10 if ticks else 50
    gap = left + 10
    pw = (width - left - gap - 12) / 2
    ph = 190.0
    fig.height = top + ph + 64
    nb = len(SIZE_LABELS)
    slot = pw / nb
    bw = 0.8 * slot / max(len(mods), 1)
    for k, direction in enumerate(("read", "write")):
        ax = fig.panel(left + k * (pw + gap), top, pw, ph)
        ax.x(0, nb).y(lo, hi, log=True)
        ax.grid("y", ticks)
        for i, mod in enumerate(mods):
            sel = (table["module"] == mod) & (table["direction"] == direction)
            if not sel.any():
                continue
            counts = dict(zip(table["size_bin"][sel].tolist(), table["count"][sel].tolist()))
            for b, lab in enumerate(SIZE_LABELS):
                c = counts.get(lab, 0)
                if c > 0:
                    x = ax.left + b * slot + 0.1 * slot + i * bw
                    y = ax.sy(c)
                    fig.rect(x, y, bw, ax.bottom - y, colours[mod], title=f"{mod} {direction}s of {lab} bytes: {int(c):,}")
        ax.frame()
        ax.yticks(ticks, tick_labels)
        ax.xticks([], list(SIZE_LABELS), at=[ax.left + (b + 0.5) * slot for b in range(nb)], rotate=-40, size=10)
        ax.title(f"{direction.capitalize()} sizes (bytes per call)")
        ax.ylabel("operations", offset=left - 14)
    return fig
