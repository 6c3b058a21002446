"""Zarr chunk keys from file paths: which array a chunk file belongs to and its index in the chunk grid.

Shared by the readers (which array folders a job touched) and the detectors (each array's chunk grid), so it
lives below both.  Zarr v3 stores chunk (i, j, k) of array A at ``A/c/i/j/k`` (v2: ``A/i.j.k`` or ``A/i/j/k``);
zarr-python writes each chunk to ``<key>.<uuid>.partial`` and renames it.
"""

from __future__ import annotations

import re

_PARTIAL = re.compile(r"\.[0-9a-f]{16,}\.partial$")
_V3 = re.compile(r"^(?P<array>.+\.zarr(?:/.+?)?)/c/(?P<idx>\d+(?:/\d+)*)$")
_V2 = re.compile(r"^(?P<array>.+\.zarr(?:/[^/]+?)?)/(?P<idx>\d+(?:[./]\d+)*)$")


def chunk_key(path: str) -> tuple[str, tuple[int, ...]] | None:
    p = _PARTIAL.sub("", path)
    m = _V3.match(p) or _V2.match(p)
    if not m:
        return None
    return m["array"], tuple(int(x) for x in re.split(r"[./]", m["idx"]))
