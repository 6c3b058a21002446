"""Spreading weighted intervals onto a fixed time grid (vectorised, exact overlap)."""

from __future__ import annotations

import numpy as np


def spread(row: np.ndarray, start: np.ndarray, end: np.ndarray, weight: np.ndarray,
           t0: float, bin_s: float, n_rows: int, n_bins: int) -> np.ndarray:
    """Sum ``weight`` of each interval into a (n_rows, n_bins) grid, split by time overlap.

    An interval [start, end) on row ``row`` contributes ``weight * overlap / (end - start)``
    to every bin it overlaps; a zero-length interval puts all its weight in the bin
    holding ``start``.  Intervals outside [t0, t0 + n_bins * bin_s) are clipped.
    Cost is O(n_intervals + n_rows * n_bins) whatever the interval lengths.
    """
    grid = np.zeros((n_rows, n_bins + 1), dtype=np.float64)
    if len(start) == 0:
        return grid[:, :n_bins]
    # work in seconds since t0: edge - start differences of epoch floats would lose ~0.2 us each
    t_end = n_bins * bin_s
    s = np.clip(np.asarray(start, dtype=np.float64) - t0, 0.0, t_end)
    e = np.clip(np.maximum(np.asarray(end, dtype=np.float64) - t0, s), 0.0, t_end)
    t0 = 0.0
    w = np.asarray(weight, dtype=np.float64)
    row = np.asarray(row, dtype=np.int64)
    dur = e - s
    i = np.clip(((s - t0) / bin_s).astype(np.int64), 0, n_bins - 1)
    j = np.clip(np.ceil((e - t0) / bin_s).astype(np.int64) - 1, 0, n_bins - 1)
    j = np.maximum(j, i)
    single = (i == j) | (dur <= 0)
    np.add.at(grid, (row[single], i[single]), w[single])
    m = ~single
    if m.any():
        rm, im, jm, sm, em, wm, dm = row[m], i[m], j[m], s[m], e[m], w[m], dur[m]
        rate = wm / dm
        first = (t0 + (im + 1) * bin_s - sm) * rate
        last = (em - (t0 + jm * bin_s)) * rate
        np.add.at(grid, (rm, im), first)
        np.add.at(grid, (rm, jm), last)
        # full bins i+1 .. j-1 get rate * bin_s each: a difference array along the bins
        full = rate * bin_s
        diff = np.zeros_like(grid)
        np.add.at(diff, (rm, im + 1), full)
        np.add.at(diff, (rm, jm), -full)
        grid += np.cumsum(diff, axis=1)
        # the running sum leaves round-off (1e-16 relative) in bins no interval covers
        scale = float(np.abs(grid).max())
        grid[np.abs(grid) <= 1e-12 * scale] = 0.0
    return grid[:, :n_bins]
