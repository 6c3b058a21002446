"""Path rules: Zarr chunk keys (which array a chunk file belongs to, its index in the chunk grid) and the kind of a
file (a Python import, a Zarr chunk, a NetCDF/HDF5 file).

Shared by the readers (which array folders a job touched), the detectors (each array's chunk grid) and recommend
(``path_kind``: what kind of file a path is), so it lives below all of them.  Zarr v3 stores chunk (i, j, k) of array A at ``A/c/i/j/k`` (v2: ``A/i.j.k`` or ``A/i/j/k``);
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
