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

from ...analyzers.nputil import unique
from ...profile import OP, OPS_MODULE, OPS_MODULES, JobProfile, Table
from ...units import fmt_bytes
from .. import svg
from ...analyzers.batches import chunks, is_source, table_batches
from ._grid import GridSum, spread

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
    ops = profile.ops
    if is_source(ops) and len(ops):  # its first start and last end are known without reading it
        t0, t1 = min(t0, float(ops.t_min)), max(t1, float(ops.end_max))
    for t in (() if is_source(ops) else (ops,)) + (profile.heatmap,):
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
    r = _Raster(t0=t0, bin_s=(t1 - t0) / n_bins, n_rows=n_rows, n_bins=n_bins, per_row=per_row, nprocs=nprocs)
    ops = profile.ops
    # an OpsSource is read one process at a time when a raster row is one process (each cell then sums one
    # process's operations, batch by batch as over the table); with grouped rows it is read whole
    by_proc = is_source(ops) and per_row == 1
    if by_proc:
        layers = sorted(ops.rw_modules) if len(ops) else []
    else:
        rw = (ops["op"] <= OP["write"]) & (ops["proc"] >= 0) if len(ops) else None
        layers = unique(ops["module"][rw]).tolist() if rw is not None and rw.any() else []
        del rw
    if layers:
        source = "ops"
        read, write, totals = _ops_grids(ops, layers, by_proc, r)
    elif len(profile.heatmap):
        source = "heatmap"
        read, write, totals = _heatmap_grids(profile, r)
    else:
        source = "counters"
        read, write, totals = _counter_grids(profile, r)
        if not (read.any() or write.any()):
            source = "none"
    # drop the round-off the difference arrays leave in empty cells
    for g in (read, write):
        g[np.abs(g) < 1e-9 * max(float(np.abs(g).max()), 1e-300)] = 0.0
    nz = (read > 0) | (write > 0)
    rows, bins = np.nonzero(nz)
    cells = Table({"row": rows.astype("i8"), "bin": bins.astype("i8"), "read": read[nz], "write": write[nz]})
    return Timeline(cells=cells, source=source, unit=UNITS.get(source, ""), t0_s=t0, bin_s=r.bin_s, n_bins=n_bins,
                    n_rows=n_rows, procs_per_row=per_row, nprocs=nprocs, totals=totals)


@dataclass(frozen=True)
class _Raster:
    """The grid: ``n_rows`` rows of ``per_row`` consecutive processes, ``n_bins`` bins of ``bin_s`` from ``t0``."""

    t0: float
    bin_s: float
    n_rows: int
    n_bins: int
    per_row: int
    nprocs: int

    def norm(self) -> np.ndarray:
        """Seconds each cell covers: the bin times the processes of its row (a column to divide by)."""
        return self.bin_s * np.bincount(np.arange(self.nprocs) // self.per_row, minlength=self.n_rows)[:, None]


def _ops_grids(ops, layers: list, by_proc: bool, r: _Raster) -> tuple[np.ndarray, np.ndarray, dict]:
    """Share of each cell spent inside read and write calls of one layer (POSIX first: an MPI-IO call and the POSIX
    calls under it are the same time), summed over batches of operations: memory of the grid plus one batch."""
    t0, bin_s, n_rows, n_bins, per_row = r.t0, r.bin_s, r.n_rows, r.n_bins, r.per_row
    layer = OPS_MODULE["POSIX"] if OPS_MODULE["POSIX"] in layers else layers[0]
    grids = {OP["read"]: GridSum(t0, bin_s, n_rows, n_bins), OP["write"]: GridSum(t0, bin_s, n_rows, n_bins)}
    n_ops = 0
    cols = ("op", "module", "proc", "start_s", "end_s")
    parts = ((t, slice(None)) for _, t in table_batches(ops, cols)) if by_proc else \
        ((ops, sl) for sl in chunks(len(ops)))
    for tb, sl in parts:
        op, mod, proc = tb["op"][sl], tb["module"][sl], tb["proc"][sl]
        keep = (op <= OP["write"]) & (proc >= 0) & (mod == layer)
        st, en = tb["start_s"][sl], tb["end_s"][sl]
        for code, g in grids.items():
            sel = keep & ((op == OP["read"]) if code == OP["read"] else (op != OP["read"]))
            if sel.any():
                s, e = st[sel], en[sel]
                g.add(proc[sel] // per_row, s, e, np.maximum(e - s, 0.0))
                n_ops += len(s)
    read, write = grids[OP["read"]].result(), grids[OP["write"]].result()
    totals = {"read_s": float(read.sum()), "write_s": float(write.sum()), "module": OPS_MODULES[layer], "ops": n_ops}
    norm = r.norm()
    return read / norm, write / norm, totals


def _heatmap_grids(profile: JobProfile, r: _Raster) -> tuple[np.ndarray, np.ndarray, dict]:
    """Bytes per second of each cell from Darshan's heatmap module."""
    h = profile.heatmap.filter(profile.heatmap["proc"] >= 0)
    row = h["proc"] // r.per_row
    read = spread(row, h["start_s"], h["end_s"], h["read_bytes"], r.t0, r.bin_s, r.n_rows, r.n_bins)
    write = spread(row, h["start_s"], h["end_s"], h["write_bytes"], r.t0, r.bin_s, r.n_rows, r.n_bins)
    totals = {"read_bytes": float(read.sum()), "write_bytes": float(write.sum())}
    norm = r.norm()
    return read / norm, write / norm, totals


def _counter_grids(profile: JobProfile, r: _Raster) -> tuple[np.ndarray, np.ndarray, dict]:
    """Share of each cell inside a file's first-to-last read (write) window, from the counters' timestamps
    (windows of several files on one process may overlap: clipped at 1)."""
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
            grids[direction] = spread(p // r.per_row, s, e, e - s, r.t0, r.bin_s, r.n_rows, r.n_bins)
        else:
            grids[direction] = np.zeros((r.n_rows, r.n_bins))
    read, write = grids["read"], grids["write"]
    totals = {"read_window_s": float(read.sum()), "write_window_s": float(write.sum())}
    norm = r.norm()
    return np.minimum(read / norm, 1.0), np.minimum(write / norm, 1.0), totals


def _colour_scale(tl: Timeline, g: np.ndarray) -> tuple[float, float, bool, list[float], list[str]]:
    """(vmin, vmax, log, ticks, labels) of one panel's colour bar."""
    vmax = float(g.max()) if g.size else 0.0
    if tl.source == "heatmap":
        if vmax <= 0:
            return 0.0, 1.0, False, [0.0, 1.0], ["0", "1 B/s"]
        vmin = max(float(g[g > 0].min()), vmax * 1e-6)
        if vmin >= vmax:
            vmin = vmax / 10
        ticks = svg.log2_ticks(vmin, vmax, max_ticks=5) or [vmin, vmax]
        return vmin, vmax, True, ticks, [fmt_bytes(t, sig=True) + "/s" for t in ticks]
    ticks = [0.0, 0.25, 0.5, 0.75, 1.0]
    return 0.0, 1.0, False, ticks, ["0", "0.25", "0.5", "0.75", "1"]


def draw_io_timeline(tl: Timeline, *, width: float = 900) -> svg.Figure:
    """Two stacked raster panels (reads, writes): process rows x time bins, one PNG cell grid each.

    Each panel is at least as tall as it has rows (up to ``MAX_ROWS`` px), so
    no row is dropped by scaling; bins are stretched with hard edges.
    """
    ph = float(min(max(tl.n_rows, 110), MAX_ROWS))
    t_end = tl.n_bins * tl.bin_s
    xt = svg.nice_ticks(0.0, t_end, 8)
    procs_shown = tl.n_rows * tl.procs_per_row
    yt = [v for v in svg.int_ticks(0.0, tl.nprocs, 4) if v < tl.nprocs]
    ylabels = [f"{int(v):,}" for v in yt]
    # one process per row: a tick names the row's centre; grouped rows: the first process of the group at its top
    ypos = [v + 0.5 if tl.procs_per_row == 1 else v for v in yt]
    cb_labels_w = 0.0
    scales = {}
    for column in ("read", "write"):
        g = tl.grid(column)
        scales[column] = (g, _colour_scale(tl, g))
        cb_labels_w = max([cb_labels_w] + [svg.text_width(lab, 10) for lab in scales[column][1][4]])
    left = 30 + max([svg.text_width(lab, 11) for lab in ylabels] + [10]) + 10
    pw = width - left - 12 - 12 - 8 - cb_labels_w - 8
    top = 30.0
    gap = 44.0
    fig = svg.Figure(width, top + 2 * ph + gap + 62, label="I/O timeline per process")
    step = xt[1] - xt[0] if len(xt) > 1 else 1.0
    ylabel = "process" if tl.procs_per_row == 1 else f"process (rows of {tl.procs_per_row})"
    for k, (column, ramp, title) in enumerate((("read", "blues", "reads"), ("write", "oranges", "writes"))):
        g, (vmin, vmax, log, cticks, clabels) = scales[column]
        ax = fig.panel(left, top + k * (ph + gap), pw, ph)
        ax.x(0.0, t_end).y(0.0, procs_shown, down=True)
        lut = svg.ramp_lut(ramp)
        img = svg.colourise(g, lut, vmin=vmin, vmax=vmax, log=log)
        fig.image(ax.left, ax.top, ax.w, ax.h, svg.png_rgb(img))
        ax.frame()
        ax.yticks(ypos, ylabels)
        ax.xticks(xt, [svg.fmt_tick(t, step) for t in xt] if k == 1 else [""] * len(xt))
        ax.title(f"{title}: {tl.unit}", size=12, align="start")
        ax.ylabel(ylabel, offset=left - 16)
        ax.colorbar(lut, lo=vmin, hi=vmax, log=log, ticks=cticks, labels=clabels)
        if k == 1:
            ax.xlabel("seconds since job start")
    return fig
