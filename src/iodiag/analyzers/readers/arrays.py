"""Shapes, chunks and dtypes of the Zarr arrays a job touched, from their metadata files (JSON only).

A chunk recommendation ("``chunks={'time': 73}`` for ~100 MB chunks") needs the real array shape and dtype,
which no I/O counter holds.  A job recorded by ``iodiag run`` carries them in its snapshot
(``meta/snapshot.json``: the ``.zarray``/``.zattrs`` (v2) or ``zarr.json`` (v3) documents, read when the job
ended, see ``collectors/snapshot.py``); a job without one has them read live from its stores when they still
exist where the job wrote or read them (and says so: ``JobInfo.arrays_from``).  Nothing is imported and no
chunk is read.  Logs given directly get no array metadata.
"""

from __future__ import annotations

import math
import os
from typing import Any, Mapping

import numpy as np

from ...collectors.snapshot import zarr_docs

_MAX_ARRAYS = 64


def _v2_compressor(c) -> str:
    """'none', or the codec id ('zstd', 'zlib', 'blosc', ...) of a v2 ``compressor`` entry."""
    return str(c.get("id") or "unknown") if isinstance(c, dict) else "none"


def _v3_compressor(codecs) -> str:
    """'none', or the name of the first bytes-to-bytes codec of a v3 codec chain ('zstd', 'gzip', 'blosc')."""
    for c in codecs or []:
        name = c.get("name") if isinstance(c, dict) else None
        if name and name not in ("bytes", "transpose", "crc32c", "sharding_indexed", "endian"):
            return "zlib" if name == "gzip" else str(name)
    return "none"


def _meta(array_dir: str, docs: Mapping[str, Any] | None) -> dict | None:
    """One array's metadata from its documents (``collectors.snapshot.zarr_docs``: live or from a snapshot)."""
    if not docs:
        return None
    try:
        if "zarr.json" in docs:
            m = docs["zarr.json"]
            if m.get("node_type") != "array":
                return None
            grid = m.get("chunk_grid", {}).get("configuration", {}).get("chunk_shape")
            dtype, dims = m.get("data_type"), m.get("dimension_names")
            shape = m.get("shape")
            fmt, comp = 3, _v3_compressor(m.get("codecs"))
        elif ".zarray" in docs:
            m = docs[".zarray"]
            grid, dtype, shape = m.get("chunks"), m.get("dtype"), m.get("shape")
            fmt, comp = 2, _v2_compressor(m.get("compressor"))
            dims = (docs.get(".zattrs") or {}).get("_ARRAY_DIMENSIONS")
        else:
            return None
        itemsize = np.dtype(dtype if isinstance(dtype, str) else "f8").itemsize
    except (ValueError, TypeError, AttributeError):
        return None
    if not (isinstance(shape, list) and isinstance(grid, list) and len(shape) == len(grid) and shape):
        return None
    return {"path": array_dir, "shape": [int(x) for x in shape], "chunks": [int(x) for x in grid],
            "dtype": str(dtype), "itemsize": int(itemsize), "zarr_format": fmt, "compressor": comp,
            "dims": [str(d) for d in dims] if isinstance(dims, list) and len(dims) == len(shape) else None,
            "chunk_bytes": int(math.prod(grid) * itemsize), "nchunks": int(math.prod(
                math.ceil(s / max(c, 1)) for s, c in zip(shape, grid)))}


def array_dirs(paths) -> list[str]:
    """The Zarr array folders holding the given file paths (chunk files or metadata files), at most _MAX_ARRAYS."""
    from ..zarrpath import chunk_key

    dirs: dict[str, None] = {}
    for p in paths:
        p = str(p)
        if ".zarr" not in p:
            continue
        key = chunk_key(p)
        d = key[0] if key else (os.path.dirname(p) if os.path.basename(p) in (".zarray", "zarr.json") else None)
        if d and d not in dirs:
            dirs[d] = None
            if len(dirs) >= _MAX_ARRAYS:
                break
    return list(dirs)


def read_array_meta(paths, docs: Mapping[str, Mapping[str, Any]] | None = None) -> list[dict]:
    """Metadata of the Zarr arrays holding the given file paths, largest first: from ``docs`` (array folder ->
    documents, a job's snapshot) when given, else read live from the stores."""
    get = docs.get if docs is not None else zarr_docs
    out = [m for m in (_meta(d, get(d)) for d in array_dirs(paths)) if m is not None]
    return sorted(out, key=lambda m: -m["nchunks"])


def array_meta(array_dir: str, docs: Mapping[str, Mapping[str, Any]] | None = None) -> dict | None:
    """Metadata of one Zarr array folder (the store path joined with the variable), or None when unknown: from
    ``docs`` (a job's snapshot) when given, else read live."""
    array_dir = str(array_dir)
    return _meta(array_dir, docs.get(os.path.normpath(array_dir)) if docs is not None else zarr_docs(array_dir))


def job_arrays(paths, snapshot: Mapping[str, Any] | None) -> tuple[list[dict], str]:
    """(arrays, where from) of a job: its snapshot's Zarr documents when it has one ("snapshot"), else the
    stores as they are now ("live"; "" when none is readable)."""
    if snapshot is not None:
        return read_array_meta(paths, snapshot.get("zarr") or {}), "snapshot"
    arrays = read_array_meta(paths)
    return arrays, "live" if arrays else ""
