"""Shapes, chunks and dtypes of the Zarr arrays a job touched, from their metadata files (JSON only).

A chunk recommendation ("``chunks={'time': 73}`` for ~100 MB chunks") needs the real array shape and dtype,
which no I/O counter holds.  A job recorded by ``iodiag run`` carries them in its snapshot
(``meta/snapshot.json``: the ``.zarray``/``.zattrs`` (v2) or ``zarr.json`` (v3) documents, read when the job
ended, see ``collectors/snapshot.py``); a job without one has them read live from its stores when they still
exist where the job wrote or read them (and says so: ``JobInfo.arrays_from``).  Nothing is imported and no
chunk is read.  Logs given directly get no array metadata.
"""

from __future__ import annotations

import os
from typing import Any, Mapping

from ...collectors.snapshot import zarr_docs
from ...collectors.zarrmeta import array_meta, meta_of_docs

__all__ = ["array_dirs", "array_meta", "job_arrays", "read_array_meta"]

_MAX_ARRAYS = 64


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
    out = [m for m in (meta_of_docs(d, get(d)) for d in array_dirs(paths)) if m is not None]
    return sorted(out, key=lambda m: -m["nchunks"])


def job_arrays(paths, snapshot: Mapping[str, Any] | None) -> tuple[list[dict], str]:
    """(arrays, where from) of a job: its snapshot's Zarr documents when it has one ("snapshot"), else the
    stores as they are now ("live"; "" when none is readable)."""
    if snapshot is not None:
        return read_array_meta(paths, snapshot.get("zarr") or {}), "snapshot"
    arrays = read_array_meta(paths)
    return arrays, "live" if arrays else ""
