"""Shapes, chunks and dtypes of the Zarr arrays a job touched, from their metadata files (JSON only).

A chunk recommendation ("``chunks={'time': 73}`` for ~100 MB chunks") needs the real array shape and dtype,
which no I/O counter holds.  When the job's Zarr stores still exist where the job wrote or read them (a job
recorded by ``iodiag run`` on this machine), their ``.zarray``/``.zattrs`` (v2) or ``zarr.json`` (v3) are read;
nothing is imported and no chunk is read.  Logs from elsewhere simply get no array metadata.
"""

from __future__ import annotations

import json
import math
import os

import numpy as np

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


def _meta(array_dir: str) -> dict | None:
    try:
        if os.path.isfile(os.path.join(array_dir, "zarr.json")):
            with open(os.path.join(array_dir, "zarr.json")) as fh:
                m = json.load(fh)
            if m.get("node_type") != "array":
                return None
            grid = m.get("chunk_grid", {}).get("configuration", {}).get("chunk_shape")
            dtype, dims = m.get("data_type"), m.get("dimension_names")
            shape = m.get("shape")
            fmt, comp = 3, _v3_compressor(m.get("codecs"))
        elif os.path.isfile(os.path.join(array_dir, ".zarray")):
            with open(os.path.join(array_dir, ".zarray")) as fh:
                m = json.load(fh)
            grid, dtype, shape = m.get("chunks"), m.get("dtype"), m.get("shape")
            fmt, comp = 2, _v2_compressor(m.get("compressor"))
            dims = None
            try:
                with open(os.path.join(array_dir, ".zattrs")) as fh:
                    dims = json.load(fh).get("_ARRAY_DIMENSIONS")
            except (OSError, ValueError):
                pass
        else:
            return None
        itemsize = np.dtype(dtype if isinstance(dtype, str) else "f8").itemsize
    except (OSError, ValueError, TypeError, AttributeError):
        return None
    if not (isinstance(shape, list) and isinstance(grid, list) and len(shape) == len(grid) and shape):
        return None
    return {"path": array_dir, "shape": [int(x) for x in shape], "chunks": [int(x) for x in grid],
            "dtype": str(dtype), "itemsize": int(itemsize), "zarr_format": fmt, "compressor": comp,
            "dims": [str(d) for d in dims] if isinstance(dims, list) and len(dims) == len(shape) else None,
            "chunk_bytes": int(math.prod(grid) * itemsize), "nchunks": int(math.prod(
                math.ceil(s / max(c, 1)) for s, c in zip(shape, grid)))}


def read_array_meta(paths) -> list[dict]:
    """Metadata of the Zarr arrays holding the given file paths (chunk files or metadata files), largest first."""
    from ..detectors._zarr import chunk_key

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
    out = [m for m in (_meta(d) for d in dirs) if m is not None]
    return sorted(out, key=lambda m: -m["nchunks"])


def array_meta(array_dir: str) -> dict | None:
    """Metadata of one Zarr array folder (the store path joined with the variable), or None when unreadable."""
    return _meta(str(array_dir))
