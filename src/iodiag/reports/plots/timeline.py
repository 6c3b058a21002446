"""I/O timeline per process, rasterised onto a fixed grid.

Source, best first: the ``ops`` table (DXT or an embedded trace: time each
process spends inside reads and writes), the ``heatmap`` table (bytes per
time bin), or the counters' first/last read and write timestamps (a window
per file, not busy time).  With more processes than ``max_rows`` the rows are
consecutive groups of processes (mean over the group), so drawing costs the
same for 10 or 100,000 processes: one image of ``max_rows x n_bins`` cells.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...profile import OP, OPS_MODULE, OPS_MODULES, JobProfile, Table
from . import margins, new_figure
from ._grid import spread

MAX_ROWS = 256
N_BINS = 400

UNITS = {
    "ops": "fraction of time in I/O calls",
    "heatmap": "bytes per second",
    "counters": "fraction of time inside first-to-last access window",
}


@dataclass
class Timeline:
    """Grid cells plus what a row and a bin mean."""

    cells: Table  # row, bin, read, write (non-zero cells only), in ``unit``
    source: str  # "ops" | "heatmap" | "counters" | "none"
    unit: str
    t0_s: float  # epoch seconds of bin 0 (job start)
    bin_s: float
    n_bins: int
    n_rows: int
    procs_per_row: int
    nprocs: int
    totals: dict  # what the grid sums up (for checks): read/write busy seconds or bytes

    def grid(self, column: str) -> np.ndarray:
        g = np.zeros((self.n_rows, self.n_bins))
        g[self.cells["row"], self.cells["bin"]] = self.cells[column]
        return g


def _job_span(profile: JobProfile) -> tuple[float, float]:
    t0 = profile.job.start_s
    t1 = profile.job.end_s
    if len(profile.processes):
        t0 = min(t0 if t0 is not None else np.inf, float(profile.processes["start_s"].min()))
        t1 = max(t1 if t1 is not None else -np.inf, float(profile.processes["end_s"].max()))
    for t in (profile.ops, profile.heatmap):
        if len(t):
            t0 = min(t0, float(t["start_s"].min()))
            t1 = max(t1, float(t["end_s"].max()))
    if t0 is None or not np.isfinite(t0):
        t0 = 0.0
    if t1 is None or not np.isfinite(t1) or t1 <= t0:
        t1 = t0 + 1.0
    return float(t0), float(t1)


def _log_starts(profile: JobProfile) -> np.ndarray:
    """Start (epoch s) of each log, indexed by the counters' ``log`` column."""
    p = profile.processes
    if not len(p):
        return np.zeros(1)
    starts = np.zeros(int(p["log"].max()) + 1)
    starts[p["log"]] = p["start_s"]
    return starts


def io_timeline(profile: JobProfile, *, max_rows: int = MAX_ROWS, n_bins: int = N_BINS) -> Timeline:
    nprocs = max(len(profile.processes), 1)
    per_row = max(1, -(-nprocs // max_rows))
    n_rows = -(-nprocs // per_row)
    t0, t1 = _job_span(profile)
    bin_s = (t1 - t0) / n_bins
    read = write = None
    ops = profile.ops
    rw = (ops["op"] <= OP["write"]) & (ops["proc"] >= 0) if len(ops) else None
    if rw is not None and rw.any():
        source = "ops"
        # one layer only: an MPI-IO call and the POSIX calls under it are the same time (POSIX first)
        layers = np.unique(ops["module"][rw]).tolist()
        layer = OPS_MODULE["POSIX"] if OPS_MODULE["POSIX"] in layers else layers[0]
        o = ops.filter(rw & (ops["module"] == layer))
        row = o["proc"] // per_row
        dur = np.maximum(o["end_s"] - o["start_s"], 0.0)
        is_r = o["op"] == OP["read"]
        read = spread(row[is_r], o["start_s"][is_r], o["end_s"][is_r], dur[is_r], t0, bin_s, n_rows, n_bins)
        write = spread(row[~is_r], o["start_s"][~is_r], o["end_s"][~is_r], dur[~is_r], t0, bin_s, n_rows, n_bins)
        totals = {"read_s": float(read.sum()), "write_s": float(write.sum()), "module": OPS_MODULES[layer]}
        norm = bin_s * np.bincount(np.arange(nprocs) // per_row, minlength=n_rows)[:, None]
        read, write = read / norm, write / norm
    elif len(profile.heatmap):
        source = "heatmap"
        h = profile.heatmap.filter(profile.heatmap["proc"] >= 0)
        row = h["proc"] // per_row
        read = spread(row, h["start_s"], h["end_s"], h["read_bytes"], t0, bin_s, n_rows, n_bins)
        write = spread(row, h["start_s"], h["end_s"], h["write_bytes"], t0, bin_s, n_rows, n_bins)
        totals = {"read_bytes": float(read.sum()), "write_bytes": float(write.sum())}
        norm = bin_s * np.bincount(np.arange(nprocs) // per_row, minlength=n_rows)[:, None]
        read, write = read / norm, write / norm
    else:
        source = "counters"
        starts = _log_starts(profile)
        parts = {"read": ([], [], []), "write": ([], [], [])}
        for mod, pre in (("POSIX", "POSIX"), ("STDIO", "STDIO"), ("MPI-IO", "MPIIO")):
            t = profile.module(mod)
            if t is None or f"{pre}_F_READ_START_TIMESTAMP" not in t:
                continue
            for direction, word in (("read", "READ"), ("write", "WRITE")):
                s = t[f"{pre}_F_{word}_START_TIMESTAMP"]
                e = t[f"{pre}_F_{word}_END_TIMESTAMP"]
                ok = (e > 0) & (e >= s)
                base = starts[t["log"][ok]]
                procs = t["proc"][ok]
                # a shared-file record (rank -1) stands for every process of its log
                shared = procs < 0
                if shared.any():
                    logs = t["log"][ok][shared]
                    pl = profile.processes
                    for lg, ss, ee, bb in zip(logs.tolist(), s[ok][shared].tolist(), e[ok][shared].tolist(), base[shared].tolist()):
                        members = pl["proc"][pl["log"] == lg]
                        parts[direction][0].append(members)
                        parts[direction][1].append(np.full(len(members), bb + ss))
                        parts[direction][2].append(np.full(len(members), bb + ee))
                parts[direction][0].append(procs[~shared])
                parts[direction][1].append(base[~shared] + s[ok][~shared])
                parts[direction][2].append(base[~shared] + e[ok][~shared])
        grids = {}
        for direction, (p, s, e) in parts.items():
            if p:
                p, s, e = np.concatenate(p), np.concatenate(s), np.concatenate(e)
                # windows may overlap on one process (several files): clip the fraction at 1 below
                grids[direction] = spread(p // per_row, s, e, e - s, t0, bin_s, n_rows, n_bins)
            else:
                grids[direction] = np.zeros((n_rows, n_bins))
        read, write = grids["read"], grids["write"]
        totals = {"read_window_s": float(read.sum()), "write_window_s": float(write.sum())}
        norm = bin_s * np.bincount(np.arange(nprocs) // per_row, minlength=n_rows)[:, None]
        read, write = np.minimum(read / norm, 1.0), np.minimum(write / norm, 1.0)
        if not (read.any() or write.any()):
            source = "none"
    # drop the round-off the difference arrays leave in empty cells
    for g in (read, write):
        g[np.abs(g) < 1e-9 * max(float(np.abs(g).max()), 1e-300)] = 0.0
    nz = (read > 0) | (write > 0)
    rows, bins = np.nonzero(nz)
    cells = Table({"row": rows.astype("i8"), "bin": bins.astype("i8"), "read": read[nz], "write": write[nz]})
    return Timeline(cells=cells, source=source, unit=UNITS.get(source, ""), t0_s=t0, bin_s=bin_s, n_bins=n_bins,
                    n_rows=n_rows, procs_per_row=per_row, nprocs=nprocs, totals=totals)


def draw_io_timeline(tl: Timeline):
    """Two stacked raster panels (reads, writes): process rows x time."""
    from matplotlib.colors import LogNorm

    fig = new_figure(9.0, 4.6)
    margins(fig, left_in=0.9, right_in=0.3 if tl.source != "heatmap" else 0.75, hspace=0.3)
    axes = fig.subplots(2, 1, sharex=True)
    extent = (0.0, tl.n_bins * tl.bin_s, tl.nprocs - 0.5, -0.5)
    for ax, column, cmap, title in ((axes[0], "read", "Blues", "reads"), (axes[1], "write", "Oranges", "writes")):
        g = tl.grid(column)
        vmax = float(g.max()) if g.size else 0.0
        if tl.source == "heatmap" and vmax > 0:
            positive = g[g > 0]
            norm = LogNorm(vmin=max(float(positive.min()), vmax * 1e-6), vmax=vmax)
            g = np.where(g > 0, g, np.nan)
        else:
            from matplotlib.colors import Normalize

            norm = Normalize(vmin=0.0, vmax=max(vmax, 1e-12) if tl.source == "heatmap" else 1.0)
            g = np.where(g > 0, g, np.nan)
        from matplotlib import colormaps

        im = ax.imshow(g, aspect="auto", interpolation="nearest", cmap=colormaps[cmap].with_extremes(bad="#f7fafc"),
                       norm=norm, extent=extent)
        cb = fig.colorbar(im, ax=ax, pad=0.01, fraction=0.03)
        cb.ax.tick_params(labelsize=7)
        if tl.source == "heatmap":
            # plain "12.3 MiB/s" labels, decades only (mathtext labels overflow the figure)
            from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter, NullLocator

            from . import human_bytes

            cb.ax.yaxis.set_major_locator(LogLocator(base=10, numticks=5))
            cb.ax.yaxis.set_minor_locator(NullLocator())
            cb.ax.yaxis.set_minor_formatter(NullFormatter())
            cb.ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _p: human_bytes(v) + "/s"))
        label = "process" if tl.procs_per_row == 1 else f"process (rows of {tl.procs_per_row})"
        ax.set_ylabel(label, fontsize=8)
        ax.set_title(f"{title}: {tl.unit}", fontsize=9, loc="left")
    axes[1].set_xlabel("seconds since job start")
    return fig
