"""Small NumPy helpers used on the report path."""

from __future__ import annotations

import numpy as np


def unique(a) -> np.ndarray:
    """The sorted distinct values of a 1-D array (``np.unique`` without its options).

    NumPy 2's ``np.unique`` imports ``numpy.ma`` on first use (~10 ms of a report's start-up) and its hash path
    is slower than a sort on integer columns; this is sort + compare.  NaNs count as one value, as in
    ``np.unique``.
    """
    s = np.sort(np.asarray(a).ravel(), kind="stable")
    if len(s) < 2:
        return s
    keep = np.empty(len(s), dtype=bool)
    keep[0] = True
    np.not_equal(s[1:], s[:-1], out=keep[1:])
    if s.dtype.kind in "fc":
        nan = np.isnan(s)
        if nan.any():  # sorted last; NaN != NaN would keep each of them
            keep[1:] &= ~(nan[1:] & nan[:-1])
    return s[keep]


def percentile(a, q: float) -> float:
    """``float(np.percentile(a, q))`` (its default 'linear' method) of a non-empty 1-D array, without the
    ``numpy.ma`` import ``np.percentile`` and ``np.median`` make; same arithmetic, so the same float."""
    s = np.sort(np.asarray(a).ravel())
    if s.dtype.kind in "fc" and np.isnan(s[-1]):
        return float("nan")
    v = (len(s) - 1) * (q / 100)
    lo = int(np.floor(v))
    hi = min(lo + 1, len(s) - 1)
    t = v - lo
    a_, b_ = s[lo], s[hi]
    diff = np.subtract(b_, a_)
    return float(b_ - diff * (1 - t)) if t >= 0.5 else float(a_ + diff * t)


def median(x: np.ndarray) -> float:
    """``float(np.median(x))`` of a non-empty 1-D array by one sort (np.median makes ~10 NumPy calls,
    which dominate on the few values per job): the middle value, or the mean of the two middle ones."""
    s = np.sort(x)
    n = len(s)
    if s.dtype.kind in "fc" and np.isnan(s[-1]):
        return float("nan")
    k = n // 2
    return float(s[k]) if n % 2 else (float(s[k - 1]) + float(s[k])) / 2


def stable_argsort_small(keys: np.ndarray) -> np.ndarray:
    """``np.argsort(keys, kind="stable")`` of non-negative integer keys; keys below 65,536 (process numbers of
    most jobs) are sorted as 16-bit integers, which NumPy sorts by radix: ~8x faster than its timsort of int64."""
    if len(keys) and keys.dtype.kind in "iu":
        lo, hi = int(keys.min()), int(keys.max())
        if lo >= 0 and hi < 65536:
            return np.argsort(keys.astype(np.uint16), kind="stable")
    return np.argsort(keys, kind="stable")


def stable_argsort_times(t: np.ndarray) -> np.ndarray:
    """``np.argsort(t, kind="stable")`` of a float column (times), ~2.5x faster on large ones.

    NumPy sorts float64 stably by timsort, but 16-bit integers by radix.  The times are mapped onto 32-bit
    buckets (a non-decreasing map: equal times share a bucket), the buckets are radix-sorted as two 16-bit passes
    (stable: ties keep their order), and the result is kept only when the times come out in order; it is then
    exactly the stable sort (equal times are in one bucket, in their first order).  Two different times in one
    bucket in the wrong order, the rare case, fall back to the full sort, as do NaNs, a single time and columns
    too small or too large (the passes need ~30 bytes per value at once) for it to pay."""
    n = len(t)
    if n < 4096 or n > (1 << 23) or t.dtype.kind != "f":
        return np.argsort(t, kind="stable")
    lo, hi = float(t.min()), float(t.max())
    if not (np.isfinite(lo) and np.isfinite(hi) and hi > lo):
        return np.argsort(t, kind="stable")
    q = ((t - lo) * ((2**32 - 2) / (hi - lo))).astype(np.uint32)
    order = np.argsort(q.astype(np.uint16), kind="stable")  # the low 16 bits (the cast wraps)
    high = (q >> 16).astype(np.uint16)
    del q
    order = order[np.argsort(high[order], kind="stable")]
    del high
    s = t[order]
    if bool(np.all(s[1:] >= s[:-1])):
        return order
    return np.argsort(t, kind="stable")


def isin(a: np.ndarray, values: np.ndarray) -> np.ndarray:
    """``np.isin(a, values)``; for a handful of values, by comparisons (no sort of a large ``a``)."""
    values = np.asarray(values)
    if values.ndim == 1 and len(values) <= 8 and a.dtype.kind in "iu" and values.dtype == a.dtype:
        out = np.zeros(len(a), bool)
        for v in values.tolist():
            out |= a == v
        return out
    return np.isin(a, values)
