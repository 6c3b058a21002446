"""Files ranked by the time processes spent in I/O calls on them.

Times are summed over processes (a file that 1,024 ranks each read for 0.2 s
costs 205 s).  POSIX and STDIO are the layers that reach the file system; a
file seen only through MPI-IO (or only through HDF5/PnetCDF) is counted at
that layer instead, so no file is counted twice.
"""

from __future__ import annotations

import numpy as np

from ...analyzers.summary import file_times
from ...profile import JobProfile, Table
from .. import svg
from ...units import fmt_bytes
from . import META, READ, WRITE

__all__ = ["file_times", "top_files", "draw_top_files"]


def top_files(profile: JobProfile, n: int = 10) -> Table:
    t = file_times(profile)
    return t.take(np.arange(min(n, len(t))))


def draw_top_files(table: Table, *, width: float = 900) -> svg.Figure:
    """Stacked horizontal bars per file: read, write and metadata seconds (file names in monospace, full name on hover)."""
    n = len(table)
    paths = [str(p) for p in table["path"]] if n else []
    label_max = 0.45 * width
    labels = [svg.fit_text(p, 11, label_max, mono=True) for p in paths]
    left = 12 + max([svg.text_width(lab, 11, mono=True) for lab in labels] + [40.0]) + 10
    band = 26.0
    top = 10.0
    ph = band * max(n, 1)
    fig = svg.Figure(width, top + ph + 84, label="Top files by I/O time")
    ax = fig.panel(left, top, width - left - 16, ph)
    total = (table["read_time_s"] + table["write_time_s"] + table["meta_time_s"]) if n else np.zeros(0)
    hi = svg.nice_max(float(total.max()) if n and total.max() > 0 else 1.0, 6)
    xt = svg.nice_ticks(0.0, hi, 6)
    step = xt[1] - xt[0] if len(xt) > 1 else 1.0
    ax.x(0.0, hi).y(0, max(n, 1))
    ax.grid("x", xt)
    for i in range(n):
        acc = 0.0
        y = top + i * band + 4
        for col, colour, what in (("read_time_s", READ, "read"), ("write_time_s", WRITE, "write"), ("meta_time_s", META, "metadata")):
            v = float(table[col][i])
            if v > 0:
                x0, x1 = ax.sx(acc), ax.sx(acc + v)
                fig.rect(x0, y, max(x1 - x0, 0.5), band - 8, colour,
                         title=f"{paths[i]}\n{what}: {v:,.4g} s (bytes read {fmt_bytes(table['bytes_read'][i])}, written {fmt_bytes(table['bytes_written'][i])})")
            acc += v
    ax.frame()
    ax.yticks([], labels, at=[top + (i + 0.5) * band for i in range(n)], mono=True, titles=paths)
    ax.xticks(xt, [svg.fmt_tick(t, step) for t in xt])
    ax.xlabel("seconds in I/O calls, summed over processes")
    items = [("read", READ), ("write", WRITE), ("metadata", META)]
    lw = sum(14 + 4 + svg.text_width(k, 11) + 14 for k, _c in items)
    fig.legend(items, (ax.left + ax.right - lw) / 2, ax.bottom + 46)
    return fig
