"""Chunk shapes to recommend: pure arithmetic on an array's shape, its chunks and its chunk grid.

``merge_plan`` says how many of today's chunk files to merge along which dimension to reach a target size
(from the chunk grid Darshan's file names give, analyzers/detectors/_zarr.py); ``rechunk_plan`` grows a chunk
shape to a target size in C order (from the array metadata a job's Zarr stores give, analyzers/readers/arrays.py).
"""

from __future__ import annotations

import math


def merge_plan(grid: list[int], mean_bytes: float, target: float) -> tuple[list[int], float, int]:
    """Merge factors per dimension (largest grid first) to reach ~target bytes per chunk."""
    want = max(math.ceil(target / max(mean_bytes, 1.0)), 1)
    factors = [1] * len(grid)
    for d in sorted(range(len(grid)), key=lambda i: -grid[i]):
        if want <= 1:
            break
        f = min(want, grid[d])
        factors[d] = f
        want = math.ceil(want / f)
    k = math.prod(factors)
    files = math.prod(math.ceil(g / f) for g, f in zip(grid, factors))
    return factors, mean_bytes * k, files


def rechunk_plan(shape: list[int], chunks: list[int], itemsize: int, target: float) -> list[int]:
    """Chunks of about ``target`` bytes: grow the innermost dimensions to their full extent first (C order keeps
    each chunk contiguous), then the next one outwards by the factor still missing, rounded to an even split."""
    new = list(chunks)
    for d in range(len(shape) - 1, -1, -1):
        size = math.prod(new) * itemsize
        if size >= target:
            break
        want = max(int(target // max(math.prod(new[:d] + new[d + 1:]) * itemsize, 1)), 1)
        if want >= shape[d]:
            new[d] = shape[d]
        else:
            parts = math.ceil(shape[d] / max(want, 1))
            new[d] = max(math.ceil(shape[d] / parts), chunks[d])
            break
    return new
