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
    """array -> {grid, chunks, bytes} from chunk-file paths and the bytes written/read per path."""
    out: dict[str, dict] = {}
    for path, b in zip(paths, nbytes):
        path = str(path)
        if ".zarr" not in path:  # both patterns need it (removing a .partial suffix cannot make one)
            continue
        key = chunk_key(path)
        if key is None:
            continue
        arr, idx = key
        a = out.setdefault(arr, {"keys": {}, "grid": [0] * len(idx)})
        if len(idx) != len(a["grid"]):
            continue
        a["keys"][idx] = max(a["keys"].get(idx, 0.0), float(b))  # temp .partial and final name are one chunk
        a["grid"] = [max(g, i + 1) for g, i in zip(a["grid"], idx)]
    for a in out.values():
        sizes = [v for v in a["keys"].values() if v > 0]
        a["chunks"] = len(a["keys"])
        a["mean_chunk_bytes"] = sum(sizes) / len(sizes) if sizes else 0.0
        del a["keys"]
    return out
