"""Plots for the HTML report: each plot is one function that computes a table
from a JobProfile (tested on its numbers) and one that draws it.

Compute functions return a ``Table`` (``.to_pandas()`` gives the DataFrame);
pandas is not imported on the report path because its import alone costs more
than reading most logs.  Draw functions take that table and return a
matplotlib ``Figure`` built without pyplot (no global state, Agg only);
``figure_png`` turns a figure into PNG bytes for embedding.

Drawing cost is bounded by construction: per-process timelines are
rasterised onto a fixed grid (``timeline.MAX_ROWS`` x ``timeline.N_BINS``)
whatever the number of processes or operations.
"""

from __future__ import annotations

import io
from typing import Any

# one palette for every plot: read / write / metadata
READ = "#2b6cb0"
WRITE = "#dd6b20"
META = "#718096"
STRAGGLER = "#c53030"


def new_figure(width_in: float, height_in: float):
    """A pyplot-free Agg figure (importing matplotlib here keeps `iodiag --help` fast).

    No layout engine: constrained layout draws every figure twice; draw
    functions set fixed margins with ``margins`` instead.
    """
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width_in, height_in))
    FigureCanvasAgg(fig)
    return fig


def margins(fig, *, left_in: float = 0.8, right_in: float = 0.25, top_in: float = 0.35, bottom_in: float = 0.55,
            wspace: float = 0.08, hspace: float = 0.35) -> None:
    """Fixed margins in inches (so labels fit whatever the figure size)."""
    w, h = fig.get_size_inches()
    fig.subplots_adjust(left=left_in / w, right=1 - right_in / w, top=1 - top_in / h, bottom=bottom_in / h,
                        wspace=wspace, hspace=hspace)


def figure_png(fig: Any, *, dpi: int = 96) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, metadata={"Software": None}, pil_kwargs={"compress_level": 2})
    return buf.getvalue()


def human_bytes(n: float) -> str:
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if abs(n) < 1024 or unit == "PiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} PiB"


def bytes_axis(ax, axis: str = "x") -> None:
    """Format an axis in binary units."""
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    target = ax.xaxis if axis == "x" else ax.yaxis
    target.set_major_locator(MaxNLocator(nbins=4, steps=[1, 2, 4, 5, 8, 10]))
    target.set_major_formatter(FuncFormatter(lambda v, _pos: human_bytes(v)))


def human_count(v: float) -> str:
    v = float(v)
    for unit, div in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(v) >= div:
            return f"{v / div:.3g}{unit}"
    return f"{v:.3g}"


def count_axis(ax, axis: str = "x", *, log: bool = True) -> None:
    """Logarithmic count axis with plain labels, decades only (mathtext labels and minor ticks are costly)."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullLocator

    target = ax.xaxis if axis == "x" else ax.yaxis
    if log:
        (ax.set_xscale if axis == "x" else ax.set_yscale)("log", nonpositive="clip")
        target.set_major_locator(LogLocator(base=10, numticks=7))
        target.set_minor_locator(NullLocator())
        lo, hi = (ax.get_xlim() if axis == "x" else ax.get_ylim())
        (ax.set_xlim if axis == "x" else ax.set_ylim)(0.7, max(hi, 10) * 1.5)
    target.set_major_formatter(FuncFormatter(lambda v, _pos: human_count(v)))


def shorten(text: str, width: int = 48) -> str:
    """Middle-ellipsis for long labels (paths keep their start and their file name)."""
    if len(text) <= width:
        return text
    keep = width - 1
    return text[: keep // 3] + "\u2026" + text[-(keep - keep // 3):]
