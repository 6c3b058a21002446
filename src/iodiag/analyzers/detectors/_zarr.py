"""Zarr chunk grids recovered from the chunk-file paths Darshan recorded.

Zarr v3 stores chunk (i, j, k) of array A at ``A/c/i/j/k`` (v2: ``A/i.j.k`` or
``A/i/j/k``); zarr-python writes each chunk to ``<key>.<uuid>.partial`` and
renames it.  From the set of keys we get each array's chunk grid (largest
index + 1 per dimension) and the bytes per chunk, which is enough for
recommend/chunks.py to say how many chunks to merge along which dimension.
"""

from __future__ import annotations

import re

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


_PY = re.compile(r"(\.pyc?|\.so(\.[\d.]+)?|/site-packages/.*|/lib/python[\d.]+/.*)$")
_LIB_PY = re.compile(r"/lib/python[\d.]+/")
_SO = re.compile(r"\.so(\.[\d.]+)?$")
_ARRAY_FILE = re.compile(r"\.(nc|nc4|h5|hdf5|he5|hdf)$", re.I)
_ARRAY_EXT = (".nc", ".nc4", ".h5", ".hdf5", ".he5", ".hdf")


def _is_python(path: str) -> bool:
    """``_PY.search(path)``; without a newline in the path (`$` is then its end, `.*` the rest of it), each
    alternative of the pattern by a cheaper test instead of a search from every position."""
    if "\n" in path:
        return _PY.search(path) is not None
    return (path.endswith((".py", ".pyc")) or "/site-packages/" in path
            or ("/lib/python" in path and _LIB_PY.search(path) is not None)
            or (".so" in path and _SO.search(path) is not None))


def path_kind(path: str) -> str:
    """python-import | zarr-chunk | netcdf-hdf5 | other."""
    # substring tests first: each pattern needs its literal (".py", ".so", "/site-packages/", "/lib/python"; ".zarr")
    if (".py" in path or ".so" in path or "/site-packages/" in path or "/lib/python" in path) and _is_python(path):
        return "python-import"
    if ".zarr" in path and chunk_key(path) is not None:
        return "zarr-chunk"
    if path[-1:] == "\n":  # `$` also matches before a final newline: let the pattern decide
        return "netcdf-hdf5" if _ARRAY_FILE.search(path) else "other"
    # the pattern's test on the last 5 characters (its longest suffix, ".hdf5"); none of its letters has a
    # non-ASCII case variant, so lower() compares as re.I does
    return "netcdf-hdf5" if path[-5:].lower().endswith(_ARRAY_EXT) else "other"
