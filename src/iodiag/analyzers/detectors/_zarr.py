"""Zarr chunk grids recovered from the chunk-file paths Darshan recorded.

Zarr v3 stores chunk (i, j, k) of array A at ``A/c/i/j/k`` (v2: ``A/i.j.k`` or
``A/i/j/k``); zarr-python writes each chunk to ``<key>.<uuid>.partial`` and
renames it.  From the set of keys we get each array's chunk grid (largest
index + 1 per dimension) and the bytes per chunk, which is enough for
recommend/chunks.py to say how many chunks to merge along which dimension.
"""

from __future__ import annotations


from ..zarrpath import chunk_key  # the chunk key of one path: shared with the readers


def chunk_grids(paths, nbytes) -> dict[str, dict]:
    """array -> {grid, chunks, bytes} from chunk-file paths and the bytes written/read per path.

    zarr-python 3 names a chunk's temporary file with ``Path.with_suffix``, which on a v2 key (``36.1.0.0``)
    replaces its last index: ``36.1.0.<uuid>.partial``.  Such a file (one index short of its array's keys) cannot
    be told apart from its neighbours along the last dimension, so it counts for the bytes per chunk only."""
    seen: list[tuple[str, tuple[int, ...], float, bool]] = []
    dims: dict[str, int] = {}
    for path, b in zip(paths, nbytes):
        path = str(path)
        if ".zarr" not in path:  # both patterns need it (removing a .partial suffix cannot make one)
            continue
        key = chunk_key(path)
        if key is None:
            continue
        arr, idx = key
        partial = path.endswith(".partial")
        seen.append((arr, idx, float(b), partial))
        if not partial:  # the array's keys have as many indices as its final chunk names
            dims[arr] = max(dims.get(arr, 0), len(idx))
    for arr, idx, _, _ in seen:
        dims.setdefault(arr, len(idx))  # only temp names seen (a run killed before its renames)
    out: dict[str, dict] = {}
    short: dict[str, list[float]] = {}  # bytes of temp files that lost their last index
    for arr, idx, b, partial in seen:
        a = out.setdefault(arr, {"keys": {}, "grid": [0] * dims[arr]})
        if len(idx) != dims[arr]:
            if partial and len(idx) == dims[arr] - 1 and b > 0:
                short.setdefault(arr, []).append(b)
            continue
        a["keys"][idx] = max(a["keys"].get(idx, 0.0), b)  # temp .partial and final name are one chunk
        a["grid"] = [max(g, i + 1) for g, i in zip(a["grid"], idx)]
    for arr, a in list(out.items()):
        if not a["keys"]:  # only temp files one index short: no grid to tell
            del out[arr]
            continue
        sizes = [v for v in a["keys"].values() if v > 0] + short.get(arr, [])
        a["chunks"] = len(a["keys"])
        a["mean_chunk_bytes"] = sum(sizes) / len(sizes) if sizes else 0.0
        del a["keys"]
    return out
