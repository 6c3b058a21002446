"""Read patterns of the Summit thesis' table 3.1 on Zarr, NetCDF4 and HDF5.

Patterns (on the leading "time" dimension of a (time, ...) variable):

* ``slice``: one time step, every other index (the "5 MB slice" on a 1° grid);
* ``slices_same_chunk``: ``--nslices`` consecutive time steps starting at 0
  (they share a chunk when the store's time chunk is ≥ nslices);
* ``slices_across_chunks``: ``--nslices`` time steps spread over the whole
  time axis (each in a different chunk unless chunks are huge);
* ``point``: a single value in the middle of the array;
* ``timeseries``: every time step at one grid point (the case (1,·,·,·)
  chunks make expensive);
* ``whole``: the whole variable.

Each pattern is repeated ``--repeat`` times; every repetition opens the
dataset afresh (open time and read time are reported apart), optionally after
evicting the files from the page cache (``--cache cold``, posix_fadvise per
file, so other users' caches stay).  Reported per pattern: seconds (median,
min, all), bytes requested, chunks touched, stored bytes in those chunks, and
bytes that went through read syscalls (``/proc/self/io`` rchar).

APIs: ``xarray`` (open_dataset without Dask, ``.values``), ``xarray-dask``
(open_dataset with the store's chunks, then ``.compute()``), ``native``
(netCDF4.Dataset / h5py / zarr.open_array).
"""

from __future__ import annotations

import statistics
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InputNotFound, InputUnreadable, UsageError
from ._common import Param, build_parser, evict_from_cache, io_delta, proc_io, results_path, run_main, write_record

PATTERNS = ("slice", "slices_same_chunk", "slices_across_chunks", "point", "timeseries", "whole")
APIS = ("xarray", "xarray-dask", "native")

PARAMS = (
    Param("path", str, None, "dataset to read: a .zarr store, a NetCDF4 or HDF5 file", required=True),
    Param("variable", str, None, "variable (default: the first data variable with ≥ 2 dims)"),
    Param("patterns", str, ",".join(PATTERNS), "comma-separated patterns: " + ", ".join(PATTERNS)),
    Param("nslices", int, 2, "time steps read by the slices_* patterns"),
    Param("repeat", int, 3, "repetitions of each pattern (median reported)"),
    Param("api", str, "xarray", "xarray, xarray-dask or native", choices=APIS),
    Param("cache", str, "warm", "warm (as found) or cold (evict the files before each repetition)",
          choices=("warm", "cold")),
    Param("label", str, None, "free label stored in the record (e.g. 'zarr-large-chunks')"),
    Param("results", str, None, "results record path (default: $IODIAG_JOB_DIR/results.json or <path>.read.json)"),
)


def detect_format(path: Path) -> str:
    if path.is_dir():
        if (path / "zarr.json").exists():
            return "zarr3"
        if (path / ".zgroup").exists() or (path / ".zarray").exists():
            return "zarr2"
        raise InputUnreadable(f"{path} is a directory but not a Zarr store (no zarr.json or .zgroup)",
                              hint="give a Zarr store, a NetCDF4 or HDF5 file")
    with open(path, "rb") as f:
        magic = f.read(8)
    if magic == b"\x89HDF\r\n\x1a\n":
        # NetCDF4 files are HDF5 files; netCDF4 writes _NCProperties, h5py files lack it
        import h5py

        with h5py.File(path, "r") as h:
            return "netcdf4" if "_NCProperties" in h.attrs else "hdf5"
    raise InputUnreadable(f"{path} is neither HDF5/NetCDF4 nor a Zarr store (magic {magic[:4]!r})",
                          hint="NetCDF3 files are not supported; convert with nccopy -k nc4")


def _selection(pattern: str, shape: tuple[int, ...], nslices: int) -> tuple:
    nt = shape[0]
    mid = tuple(s // 2 for s in shape)
    full = tuple(slice(None) for _ in shape[1:])
    if pattern == "slice":
        return (0, *full)
    if pattern == "slices_same_chunk":
        return (slice(0, min(nslices, nt)), *full)
    if pattern == "slices_across_chunks":
        idx = np.unique(np.linspace(0, nt - 1, num=min(nslices, nt)).round().astype(int))
        return (idx, *full)
    if pattern == "point":
        return mid
    if pattern == "timeseries":
        return (slice(None), *mid[1:])
    if pattern == "whole":
        return tuple(slice(None) for _ in shape)
    raise UsageError(f"unknown read pattern {pattern!r}", hint="patterns: " + ", ".join(PATTERNS))


def _indices(sel, n: int) -> np.ndarray:
    if isinstance(sel, slice):
        return np.arange(n)[sel]
    return np.atleast_1d(np.asarray(sel))


def _chunks_touched(sel: tuple, shape, chunks) -> list[tuple[int, ...]]:
    per_dim = [np.unique(_indices(s, n) // c) for s, n, c in zip(sel, shape, chunks)]
    grids = np.meshgrid(*per_dim, indexing="ij")
    return [tuple(int(x) for x in row) for row in np.stack([g.ravel() for g in grids], axis=1)]


class _Store:
    """Geometry of the variable: shape, chunk shape (None = contiguous), stored chunk sizes."""

    def __init__(self, path: Path, fmt: str, variable: str | None):
        self.path, self.fmt = path, fmt
        if fmt.startswith("zarr"):
            import zarr

            g = zarr.open_group(str(path), mode="r")
            names = [n for n, a in g.arrays() if a.ndim >= 2]
            self.variable = variable or (names[0] if names else None)
            if self.variable not in names:
                raise UsageError(f"{path}: no variable {variable!r} with ≥ 2 dims", hint=f"arrays: {names}")
            a = g[self.variable]
            self.shape, self.chunks, self.itemsize = tuple(a.shape), tuple(a.chunks), a.dtype.itemsize
            self.zarr_format = a.metadata.zarr_format
        else:
            import h5py

            with h5py.File(path, "r") as h:
                names = [n for n, d in h.items() if isinstance(d, h5py.Dataset) and d.ndim >= 2]
                self.variable = variable or (names[0] if names else None)
                if self.variable not in names:
                    raise UsageError(f"{path}: no variable {variable!r} with ≥ 2 dims", hint=f"variables: {names}")
                d = h[self.variable]
                self.shape, self.chunks, self.itemsize = tuple(d.shape), d.chunks, d.dtype.itemsize
                self.n_stored = d.id.get_num_chunks() if d.chunks else None
                self.stored_total = d.id.get_storage_size()

    def stored_bytes(self, touched: list[tuple[int, ...]]) -> int:
        """Bytes of the stored chunks a selection touches (files on disk for Zarr,
        HDF5 chunk index for NetCDF4/HDF5; the requested bytes for contiguous data)."""
        if self.fmt.startswith("zarr"):
            total = 0
            for idx in touched:
                if self.zarr_format == 2:
                    f = self.path / self.variable / ".".join(map(str, idx))
                else:
                    f = self.path / self.variable / "c" / Path(*map(str, idx))
                total += f.stat().st_size if f.exists() else 0
            return total
        if self.chunks is None:
            return -1
        import h5py

        with h5py.File(self.path, "r") as h:
            dsid = h[self.variable].id
            total = 0
            for idx in touched:
                info = dsid.get_chunk_info_by_coord(tuple(i * c for i, c in zip(idx, self.chunks)))
                total += int(info.size or 0)
            return total


def _open_and_read(store: _Store, sel: tuple, api: str) -> tuple[float, float, np.ndarray]:
    t0 = time.perf_counter()
    if api == "native":
        if store.fmt.startswith("zarr"):
            import zarr

            arr = zarr.open_array(str(store.path / store.variable), mode="r")
            t1 = time.perf_counter()
            data = _native_index(arr, sel)
            closer = None
        elif store.fmt == "netcdf4":
            import netCDF4

            ds = netCDF4.Dataset(store.path, "r")
            var = ds[store.variable]
            var.set_auto_mask(False)
            t1 = time.perf_counter()
            data = np.asarray(var[sel])
            closer = ds.close
        else:
            import h5py

            h = h5py.File(store.path, "r")
            var = h[store.variable]
            t1 = time.perf_counter()
            data = _native_index(var, sel)
            closer = h.close
        t2 = time.perf_counter()
        if closer:
            closer()
        return t1 - t0, t2 - t1, data
    import xarray as xr

    if store.fmt == "hdf5":
        raise UsageError(f"{store.path} is plain HDF5 without NetCDF dimensions; xarray cannot open it",
                         hint="use --api native")
    engine = "zarr" if store.fmt.startswith("zarr") else "netcdf4"
    kw: dict[str, Any] = {"chunks": {} if api == "xarray-dask" else None}
    if engine == "zarr":
        kw["consolidated"] = None
    ds = xr.open_dataset(store.path, engine=engine, mask_and_scale=False, **kw)
    t1 = time.perf_counter()
    var = ds[store.variable]
    isel = {}
    for dim, s in zip(var.dims, sel):
        isel[dim] = s
    sub = var.isel(isel)
    data = sub.compute().values if api == "xarray-dask" else sub.values
    t2 = time.perf_counter()
    ds.close()
    return t1 - t0, t2 - t1, data


def _native_index(arr, sel: tuple) -> np.ndarray:
    """Fancy index on the first dim only (zarr/h5py accept an int array there as orthogonal)."""
    if isinstance(sel[0], np.ndarray):
        return np.stack([np.asarray(arr[(int(i), *sel[1:])]) for i in sel[0]])
    return np.asarray(arr[sel])


def read_patterns(*, path: str | Path, variable: str | None = None, patterns: str | list[str] = ",".join(PATTERNS),
                  nslices: int = 2, repeat: int = 3, api: str = "xarray", cache: str = "warm",
                  label: str | None = None, results: str | Path | None = None) -> dict[str, Any]:
    """Time each read pattern on one dataset; return (and write) the results record."""
    path = Path(path)
    if not path.exists():
        raise InputNotFound(f"dataset {path} does not exist", hint="create one with `iodiag workload gen`")
    if repeat < 1 or nslices < 1:
        raise UsageError(f"--repeat ({repeat}) and --nslices ({nslices}) must be at least 1")
    if api not in APIS:
        raise UsageError(f"api {api!r} is not one of {list(APIS)}")
    names = [p.strip() for p in patterns.split(",")] if isinstance(patterns, str) else list(patterns)
    for n in names:
        if n not in PATTERNS:
            raise UsageError(f"unknown read pattern {n!r}", hint="patterns: " + ", ".join(PATTERNS))
    fmt = detect_format(path)
    store = _Store(path, fmt, variable)
    out: dict[str, Any] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # the first open in a process pays for lazy imports and backend set-up;
        # it is measured once apart so that it does not land on the first pattern
        io0 = proc_io()
        first_open, first_read, _ = _open_and_read(store, _selection("point", store.shape, 1), api)
        first = {"open_s": first_open, "read_s": first_read, "rchar_bytes": io_delta(io0, proc_io()).get("rchar", -1)}
        for name in names:
            sel = _selection(name, store.shape, nslices)
            requested = int(np.prod([len(_indices(s, n)) for s, n in zip(sel, store.shape)])) * store.itemsize
            if store.chunks is not None:
                touched = _chunks_touched(sel, store.shape, store.chunks)
                stored = store.stored_bytes(touched)
            else:
                touched, stored = [], requested
            opens, reads, rchars = [], [], []
            checksum = None
            for _ in range(repeat):
                if cache == "cold":
                    evict_from_cache(path)
                io0 = proc_io()
                o, r, data = _open_and_read(store, sel, api)
                rchars.append(io_delta(io0, proc_io()).get("rchar", -1))
                opens.append(o)
                reads.append(r)
                checksum = float(np.nansum(data, dtype="f8"))
            totals = [a + b for a, b in zip(opens, reads)]
            out[name] = {
                "selection": _describe(sel),
                "requested_bytes": requested,
                "chunks_touched": len(touched) if store.chunks is not None else None,
                "stored_bytes_touched": stored,
                "read_amplification": stored / requested if requested and stored >= 0 else None,
                "open_s": statistics.median(opens),
                "read_s": statistics.median(reads),
                "total_s": statistics.median(totals),
                "total_s_min": min(totals),
                "total_s_all": totals,
                "rchar_bytes": int(statistics.median(rchars)),
                "checksum": checksum,
            }
    record = {
        "workload": "read",
        "params": dict(path=str(path), variable=store.variable, patterns=",".join(names), nslices=nslices,
                       repeat=repeat, api=api, cache=cache, label=label),
        "format": fmt,
        "shape": list(store.shape),
        "chunks": list(store.chunks) if store.chunks else None,
        "array": _array_record(path, fmt, store.variable),
        "first_access": first,
        "patterns": out,
        "timings_s": {n: v["total_s"] for n, v in out.items()},
        "bytes": {n: v["requested_bytes"] for n, v in out.items()},
    }
    record["results_path"] = str(write_record(results_path(results, path.with_name(path.name + ".read.json")),
                                              record))
    return record


def _array_record(path: Path, fmt: str, variable: str | None) -> dict[str, Any] | None:
    """The variable's Zarr metadata as readers parse it (compressor, format, dtype, dimensions), kept in the
    results record so that features and training tables never need the store again; None for NetCDF/HDF5."""
    if not fmt.startswith("zarr") or not variable:
        return None
    from ..collectors.zarrmeta import array_meta

    m = array_meta(str(path / variable))
    return {k: m[k] for k in ("compressor", "zarr_format", "dtype", "itemsize", "dims")} if m else None


def _describe(sel: tuple) -> list[str]:
    out = []
    for s in sel:
        if isinstance(s, slice):
            out.append(":" if s.start is None and s.stop is None else f"{s.start or 0}:{s.stop}")
        elif isinstance(s, np.ndarray):
            out.append("[" + ",".join(map(str, s.tolist())) + "]")
        else:
            out.append(str(int(s)))
    return out


EXAMPLES = """\
  %(prog)s --path data/ta.zarr
  %(prog)s --path data/ta.nc --patterns slice,point,timeseries --cache cold --repeat 5
  %(prog)s --path data/ta.zarr --api native --label zarr-small-chunks
"""


def main(argv: list[str] | None = None) -> int:
    args = build_parser("python -m iodiag.workloads.read", __doc__.split("\n\n")[0], PARAMS,
                        EXAMPLES).parse_args(argv)
    rec = read_patterns(**vars(args))
    print(f"read: {rec['params']['path']} [{rec['format']}, chunks {rec['chunks'] or 'contiguous'}, "
          f"api {rec['params']['api']}, cache {rec['params']['cache']}]")
    for name, v in rec["patterns"].items():
        print(f"  {name:22s} {v['total_s']:9.4f} s (open {v['open_s']:.4f}, read {v['read_s']:.4f})  "
              f"requested {v['requested_bytes']:>10d} B  chunks {v['chunks_touched']}  "
              f"stored touched {v['stored_bytes_touched']:>10d} B")
    fa = rec["first_access"]
    print(f"  (first open+point read in this process: {fa['open_s'] + fa['read_s']:.4f} s, not in the figures above)")
    print(f"  record {rec['results_path']}")
    return 0


if __name__ == "__main__":
    run_main(main)
