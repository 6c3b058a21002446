"""What a report needs from outside the trace, read once on the machine that ran the job.

A report must not change when the job's output is deleted, moved or read on another node.  The traces hold
the I/O; the arrays' own metadata (Zarr ``zarr.json`` / ``.zarray`` / ``.zattrs``, NetCDF/HDF5 headers), the
file systems the data lives on, its Lustre layout and the C library (which decides what Darshan's stat wrappers
see) are on the machine.  :func:`take_snapshot` reads them for
the paths a job touched, right after it ran, into one JSON-able dict (``iodiag run`` stores it as
``meta/snapshot.json``, see ``jobs/snapshot.py``); readers use that instead of the live files.

Bounded: at most ``MAX_ARRAYS`` Zarr arrays and ``MAX_FILES`` NetCDF/HDF5 files, headers only (never a chunk),
a time budget for the whole snapshot, and no error escapes: what could not be read is listed under ``errors``.
:func:`zarr_docs` is also what ``analyzers/readers/arrays.py`` reads live for a job without a snapshot, so both
paths see the same documents.
"""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import subprocess
import time
from typing import Any, Iterable

SCHEMA = "iodiag.job-snapshot/1"
MAX_ARRAYS = 64  # Zarr arrays recorded (as analyzers/readers/arrays.py reads at most)
MAX_CANDIDATES = 512  # folders looked at for Zarr metadata
MAX_FILES = 16  # NetCDF/HDF5 files whose headers are read
MAX_VARIABLES = 128  # variables per NetCDF/HDF5 file
MAX_LUSTRE = 16  # paths given to `lfs getstripe`
BUDGET_S = 20.0  # the whole snapshot; what is left when it runs out is named in ``errors``
META_DOC_BYTES = 1 << 20  # a Zarr metadata file larger than this is not a metadata file we read

# what a reader takes from a Zarr metadata document (attributes are the user's and can be large)
_V3_KEYS = ("zarr_format", "node_type", "shape", "data_type", "chunk_grid", "chunk_key_encoding", "codecs",
            "dimension_names", "fill_value", "storage_transformers")
_ARRAY_EXT = (".nc", ".nc4", ".h5", ".hdf5", ".he5", ".hdf")
_STORE = re.compile(r"^(?P<root>.*?\.zarr)(?:/|$)", re.I)
_PARTIAL = re.compile(r"\.[0-9a-f]{16,}\.partial$")


# ----------------------------------------------------------------------------------------------- Zarr
def _load_json(path: str) -> Any:
    with open(path, "rb") as fh:
        data = fh.read(META_DOC_BYTES + 1)
    if len(data) > META_DOC_BYTES:
        raise ValueError(f"{path}: more than {META_DOC_BYTES} bytes")
    return json.loads(data)


def zarr_docs(array_dir: str) -> dict[str, Any] | None:
    """The metadata documents of one Zarr array folder as a reader needs them, or None when it holds none:
    ``{"zarr.json": {...}}`` (v3, the array keys only) or ``{".zarray": {...}, ".zattrs": {"_ARRAY_DIMENSIONS":
    [...]}}`` (v2).  A group's or an unreadable document is None too."""
    try:
        v3 = os.path.join(array_dir, "zarr.json")
        if os.path.isfile(v3):
            m = _load_json(v3)
            if not isinstance(m, dict) or m.get("node_type") != "array":
                return None
            return {"zarr.json": {k: m[k] for k in _V3_KEYS if k in m}}
        v2 = os.path.join(array_dir, ".zarray")
        if os.path.isfile(v2):
            m = _load_json(v2)
            if not isinstance(m, dict):
                return None
            out: dict[str, Any] = {".zarray": m}
            try:
                attrs = _load_json(os.path.join(array_dir, ".zattrs"))
                if isinstance(attrs, dict) and "_ARRAY_DIMENSIONS" in attrs:
                    out[".zattrs"] = {"_ARRAY_DIMENSIONS": attrs["_ARRAY_DIMENSIONS"]}
            except (OSError, ValueError):
                pass
            return out
    except (OSError, ValueError):
        return None
    return None


def zarr_candidates(paths: Iterable[str], limit: int = MAX_CANDIDATES) -> list[str]:
    """Folders that may be Zarr arrays, from the paths a job touched (no listing: only what the job's own paths
    name): first each store (the path up to a component ending in ``.zarr``), the folders right below it and the
    folder of every metadata file (``zarr.json``, ``.zarray``, ``.zattrs``: any array the job opened or wrote);
    then, up to ``limit``, the folders two and three levels below a store on the way to a touched file, never
    inside a v3 chunk folder (``c/``), so that a store's many chunk folders cannot crowd out other arrays."""
    first: dict[str, None] = {}
    deeper: dict[str, None] = {}
    for p in paths:
        p = _PARTIAL.sub("", str(p))
        m = _STORE.match(p)
        if not m:
            continue
        root = m["root"]
        first.setdefault(root, None)
        parts = p[len(root):].strip("/").split("/")
        if parts[-1] in ("zarr.json", ".zarray", ".zattrs"):
            first.setdefault(os.path.dirname(p), None)
        folders = parts[:-1]  # the last part is the file itself
        if "c" in folders:
            folders = folders[:folders.index("c")]
        if folders:
            first.setdefault(root + "/" + folders[0], None)
        for depth in range(2, min(len(folders), 3) + 1):
            if len(deeper) < limit:
                deeper.setdefault(root + "/" + "/".join(folders[:depth]), None)
    return list(dict.fromkeys([*first, *deeper]))[:limit]


def _zarr_section(paths: list[str], deadline: float, errors: list[str]) -> dict[str, Any]:
    arrays: dict[str, Any] = {}
    cands = zarr_candidates(paths)
    for i, d in enumerate(cands):
        if time.monotonic() > deadline:
            errors.append(f"zarr: time budget spent after {i} of {len(cands)} folders")
            break
        docs = zarr_docs(d)
        if docs is not None:
            arrays[d] = docs
            if len(arrays) >= MAX_ARRAYS:
                errors.append(f"zarr: stopped at {MAX_ARRAYS} arrays")
                break
    return arrays


# ----------------------------------------------------------------------------------------------- NetCDF / HDF5
def _magic(path: str) -> str | None:
    with open(path, "rb") as fh:
        head = fh.read(8)
    if head.startswith(b"\x89HDF\r\n\x1a\n"):
        return "hdf5"
    if head[:3] == b"CDF" and len(head) >= 4:
        return {1: "netcdf3-classic", 2: "netcdf3-64bit-offset", 5: "netcdf3-64bit-data"}.get(head[3], "netcdf3")
    return None


def _hdf5_vars(path: str, deadline: float) -> list[dict[str, Any]]:
    import h5py  # optional: the caller records its absence

    out: list[dict[str, Any]] = []
    try:
        fh = h5py.File(path, "r", locking=False)
    except TypeError:  # h5py < 3.5 has no locking argument
        fh = h5py.File(path, "r")
    with fh:
        def visit(name, obj):
            if len(out) >= MAX_VARIABLES or time.monotonic() > deadline:
                return True
            if isinstance(obj, h5py.Dataset):
                out.append({"name": name, "shape": [int(s) for s in obj.shape], "dtype": str(obj.dtype),
                            "chunks": [int(c) for c in obj.chunks] if obj.chunks else None,
                            "compression": obj.compression, "compression_opts": _plain(obj.compression_opts),
                            "shuffle": bool(obj.shuffle)})
            return None

        fh.visititems(visit)
    return out


def _netcdf3_vars(path: str) -> list[dict[str, Any]]:
    import netCDF4  # optional: the caller records its absence

    with netCDF4.Dataset(path, "r") as ds:
        return [{"name": n, "shape": [int(s) for s in v.shape], "dtype": str(v.dtype), "dims": list(v.dimensions),
                 "chunks": None, "compression": None}
                for n, v in list(ds.variables.items())[:MAX_VARIABLES]]


def _plain(v: Any) -> Any:
    return v if v is None or isinstance(v, (int, float, str, bool)) else str(v)


def _files_section(paths: list[str], deadline: float, errors: list[str]) -> dict[str, Any]:
    files: dict[str, Any] = {}
    seen = [p for p in dict.fromkeys(str(p) for p in paths) if p.lower().endswith(_ARRAY_EXT)]
    for p in seen:
        if len(files) >= MAX_FILES:
            errors.append(f"netcdf/hdf5: stopped at {MAX_FILES} files ({len(seen)} touched)")
            break
        if time.monotonic() > deadline:
            errors.append("netcdf/hdf5: time budget spent")
            break
        try:
            if not os.path.isfile(p):
                continue
            fmt = _magic(p)
            entry: dict[str, Any] = {"format": fmt, "bytes": os.path.getsize(p)}
            if fmt == "hdf5":
                entry["variables"] = _hdf5_vars(p, deadline)
            elif fmt is not None:
                entry["variables"] = _netcdf3_vars(p)
            files[p] = entry
        except ImportError as exc:
            files[p] = {"format": fmt, "error": f"headers not read: {exc}"}
        except Exception as exc:  # noqa: BLE001 - a header we cannot read is recorded, never raised
            errors.append(f"{p}: {type(exc).__name__}: {exc}")
    return files


# ----------------------------------------------------------------------------------------------- mounts, Lustre
def read_mounts(path: str = "/proc/self/mounts") -> list[list[str]]:
    """[[mount point, file-system type, device], ...] of the mount table."""
    out = []
    try:
        with open(path) as fh:
            for line in fh:
                parts = line.split()
                if len(parts) >= 3:
                    out.append([parts[1].replace("\\040", " "), parts[2], parts[0]])
    except OSError:
        return []
    return out


def fs_of(path: str, mounts: list[list[str]]) -> tuple[str, str]:
    """(mount point, file-system type) holding ``path``: the longest mount point that is a prefix of it."""
    best, kind = "", ""
    for mp, ft, *_ in mounts:
        if (path == mp or path.startswith(mp.rstrip("/") + "/")) and len(mp) >= len(best):
            best, kind = mp, ft
    return best, kind


def _data_roots(paths: list[str], zarr: dict[str, Any], files: dict[str, Any]) -> list[str]:
    """Where the job's data lives: its Zarr stores and its NetCDF/HDF5 files (the paths advice is about)."""
    roots = {m["root"]: None for p in zarr if (m := _STORE.match(p))}
    roots.update({p: None for p in files})
    return list(roots)


def _lustre_section(roots: list[str], where: dict[str, str], deadline: float) -> dict[str, Any]:
    on_lustre = [r for r in roots if where.get(r) == "lustre"]
    if not on_lustre:
        return {"status": "no Lustre file system holds the job's data"}
    lfs = shutil.which("lfs")
    if lfs is None:
        return {"status": "lfs not found on PATH: layouts not recorded"}
    layouts: dict[str, Any] = {}
    for r in on_lustre[:MAX_LUSTRE]:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        argv = [lfs, "getstripe", "-d", r] if os.path.isdir(r) else [lfs, "getstripe", r]
        try:
            res = subprocess.run(argv, capture_output=True, text=True, timeout=min(5.0, left))
            layouts[r] = {"argv": argv[1:], "exit": res.returncode, "out": res.stdout[:4096],
                          "err": res.stderr[:512]}
        except (OSError, subprocess.TimeoutExpired) as exc:
            layouts[r] = {"argv": argv[1:], "error": str(exc)}
    return {"status": "recorded", "layouts": layouts}


# ----------------------------------------------------------------------------------------------- the snapshot
def take_snapshot(paths: Iterable[str], *, budget_s: float = BUDGET_S,
                  extra_arrays: Iterable[str] = ()) -> dict[str, Any]:
    """The snapshot of the paths a job touched (see module docstring).  ``extra_arrays``: array folders named
    elsewhere (a workload's results record) looked at too.  Never raises."""
    t0 = time.monotonic()
    deadline = t0 + budget_s
    errors: list[str] = []
    snap: dict[str, Any] = {"schema": SCHEMA, "taken_s": time.time()}
    try:
        paths = [str(p) for p in paths if p]
        snap["paths_seen"] = len(paths)
        zarr = _zarr_section(paths + [os.path.join(os.path.normpath(d), "zarr.json") for d in extra_arrays],
                             deadline, errors)
        files = _files_section(paths, deadline, errors)
        mounts = read_mounts()
        roots = _data_roots(paths, zarr, files)
        where = {r: fs_of(r, mounts)[1] for r in roots}
        snap.update(zarr=zarr, files=files, mounts=mounts, fs_of_data=where,
                    lustre=_lustre_section(roots, where, deadline), libc=list(platform.libc_ver()))
    except Exception as exc:  # noqa: BLE001 - a snapshot never fails the run: the error is recorded
        errors.append(f"snapshot stopped: {type(exc).__name__}: {exc}")
    snap["errors"] = errors
    snap["took_s"] = round(time.monotonic() - t0, 3)
    return snap


__all__ = ["SCHEMA", "take_snapshot", "zarr_docs", "zarr_candidates", "read_mounts", "fs_of"]
