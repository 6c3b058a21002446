"""Plots for the HTML report: each plot is one function that computes a table
from a JobProfile (tested on its numbers) and one that draws it.

Compute functions return a ``Table`` (``.to_pandas()`` gives the DataFrame);
pandas is not imported on the report path because its import alone costs more
than reading most logs.  Draw functions take that table and return an
``svg.Figure`` (the project's own SVG writer, ``reports/svg.py``); its
``svg()`` markup is inlined in the page.  Neither imports matplotlib.

Drawing cost and page size are bounded by construction: per-process timelines
are rasterised onto a fixed grid (``timeline.MAX_ROWS`` x ``timeline.N_BINS``,
one embedded PNG) whatever the number of processes or operations; Gantt bars
closer than a pixel are merged, and dots are sampled past a fixed count.
"""

from __future__ import annotations

# one palette for every plot: read / write / metadata
READ = "#2b6cb0"
WRITE = "#dd6b20"
META = "#718096"
STRAGGLER = "#c53030"


def shorten(text: str, width: int = 48) -> str:
    """Middle-ellipsis for long labels (paths keep their start and their file name)."""
    if len(text) <= width:
        return text
    keep = width - 1
    return text[: keep // 3] + "\u2026" + text[-(keep - keep // 3):]
