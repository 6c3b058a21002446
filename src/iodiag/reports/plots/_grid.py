"""Spreading weighted intervals onto a fixed time grid (vectorised, exact overlap, bounded memory)."""

from __future__ import annotations

import numpy as np

from ...analyzers import batches  # CHUNK_OPS: intervals spread at a time (bounds the temporaries)


class GridSum:
    """A (n_rows, n_bins) grid that intervals are added to in batches (see ``spread``): a raster of any number of
    operations in memory of the grid plus one batch."""

    def __init__(self, t0: float, bin_s: float, n_rows: int, n_bins: int) -> None:
        self.t0, self.bin_s, self.n_rows, self.n_bins = float(t0), float(bin_s), int(n_rows), int(n_bins)
        self._grid = np.zeros(self.n_rows * (self.n_bins + 1))
        self._diff = None  # difference array of the full bins, made on the first interval spanning bins

    def add(self, row: np.ndarray, start: np.ndarray, end: np.ndarray, weight: np.ndarray) -> None:
        step = batches.CHUNK_OPS
        for lo in range(0, len(start), step):
            sl = slice(lo, lo + step)
            self._add(row[sl], start[sl], end[sl], weight[sl])

    def _add(self, row, start, end, weight) -> None:
        if not len(start):
            return
        n_bins, bin_s, width = self.n_bins, self.bin_s, self.n_bins + 1
        # work in seconds since t0: edge - start differences of epoch floats would lose ~0.2 us each
        t_end = n_bins * bin_s
        s = np.clip(np.asarray(start, dtype=np.float64) - self.t0, 0.0, t_end)
        e = np.clip(np.maximum(np.asarray(end, dtype=np.float64) - self.t0, s), 0.0, t_end)
        w = np.asarray(weight, dtype=np.float64)
        base = np.asarray(row, dtype=np.int64) * width
        dur = e - s
        i = np.clip((s / bin_s).astype(np.int64), 0, n_bins - 1)
        j = np.clip(np.ceil(e / bin_s).astype(np.int64) - 1, 0, n_bins - 1)
        np.maximum(j, i, out=j)
        single = (i == j) | (dur <= 0)
        size = len(self._grid)
        self._grid += np.bincount(base[single] + i[single], weights=w[single], minlength=size)
        m = ~single
        if m.any():
            bm, im, jm, sm, em = base[m], i[m], j[m], s[m], e[m]
            rate = w[m] / dur[m]
            self._grid += np.bincount(bm + im, weights=((im + 1) * bin_s - sm) * rate, minlength=size)
            self._grid += np.bincount(bm + jm, weights=(em - jm * bin_s) * rate, minlength=size)
            # full bins i+1 .. j-1 get rate * bin_s each: a difference array along the bins
            full = rate * bin_s
            if self._diff is None:
                self._diff = np.zeros(size)
            self._diff += np.bincount(bm + im + 1, weights=full, minlength=size)
            self._diff -= np.bincount(bm + jm, weights=full, minlength=size)

    def result(self) -> np.ndarray:
        grid = self._grid.reshape(self.n_rows, self.n_bins + 1)
        if self._diff is not None:
            grid += np.cumsum(self._diff.reshape(self.n_rows, self.n_bins + 1), axis=1)
            # the running sum leaves round-off (1e-16 relative) in bins no interval covers
            scale = float(np.abs(grid).max())
            grid[np.abs(grid) <= 1e-12 * scale] = 0.0
        return grid[:, :self.n_bins]


def spread(row: np.ndarray, start: np.ndarray, end: np.ndarray, weight: np.ndarray,
           t0: float, bin_s: float, n_rows: int, n_bins: int) -> np.ndarray:
    """Sum ``weight`` of each interval into a (n_rows, n_bins) grid, split by time overlap.

    An interval [start, end) on row ``row`` contributes ``weight * overlap / (end - start)``
    to every bin it overlaps; a zero-length interval puts all its weight in the bin
    holding ``start``.  Intervals outside [t0, t0 + n_bins * bin_s) are clipped.
    Cost is O(n_intervals + n_rows * n_bins) whatever the interval lengths; memory is the grid plus
    one batch of ``CHUNK_OPS`` intervals.
    """
    g = GridSum(t0, bin_s, n_rows, n_bins)
    g.add(np.asarray(row), np.asarray(start), np.asarray(end), np.asarray(weight))
    return g.result()
