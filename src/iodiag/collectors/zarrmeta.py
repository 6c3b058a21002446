"""Shape, chunks, dtype and compressor of one Zarr array from its metadata documents (``.zarray``/``.zattrs`` of
format 2, ``zarr.json`` of format 3), as ``snapshot.zarr_docs`` reads them from a store or a job's snapshot keeps
them.  JSON only: no chunk is read and zarr is not imported.

Used at run time by the workloads (the read workload records its variable's metadata in its results record) and
afterwards by the readers (``analyzers/readers/arrays.py``: the arrays a job touched), so it sits with the
collector that reads the documents.
"""

from __future__ import annotations

import math
import os
from typing import Any, Mapping

from .snapshot import zarr_docs


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


def meta_of_docs(array_dir: str, docs: Mapping[str, Any] | None) -> dict | None:
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
        import numpy as np

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


def array_meta(array_dir: str, docs: Mapping[str, Mapping[str, Any]] | None = None) -> dict | None:
    """Metadata of one Zarr array folder (the store path joined with the variable), or None when unknown: from
    ``docs`` (a job's snapshot) when given, else read live."""
    array_dir = str(array_dir)
    return meta_of_docs(array_dir, docs.get(os.path.normpath(array_dir)) if docs is not None else zarr_docs(array_dir))
