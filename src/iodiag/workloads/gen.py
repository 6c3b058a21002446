"""Synthetic climate-like datasets for the conversion and read workloads.

Two kinds:

* ``climate``: one 4-D float32 variable ``ta`` (time, plev, lat, lon) with
  coordinates, at a chosen resolution.  The default 1° grid with 19 pressure
  levels makes one time step 19·181·360·4 B = 4.95 MB — the "5 MB slice" of
  the Summit thesis.
* ``cube``: the weak-scaling cube ``data`` (z, y, x) with x = nx, y = ny and
  z = nz_per_worker · workers (the thesis used 1024 × 1024 × 256·workers;
  defaults here are smaller for shared machines).

Outputs: NetCDF4 (zlib on/off, netCDF4-python), plain HDF5 (h5py) and Zarr
format 2 or 3 (zarr-python).  Values are smooth fields plus a little noise so
that compression ratios resemble real temperature data rather than zeros or
white noise.  Data are written slab by slab, so memory stays at one slab.

Run as a script (``python -m iodiag.workloads.gen --out x.nc``) or call
``generate(out=..., ...)``.
"""

from __future__ import annotations

import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import UsageError
from ..units import fmt_bytes, fmt_seconds
from ._common import COMPRESSORS, Param, build_parser, parse_shape, results_path, run_main, tree_bytes, write_record

FORMATS = ("netcdf4", "hdf5", "zarr2", "zarr3")

PARAMS = (
    Param("out", str, None, "output path (.nc, .h5 or a .zarr directory)", required=True),
    Param("kind", str, "climate", "climate (time,plev,lat,lon) or cube (z,y,x) for weak scaling",
          choices=("climate", "cube")),
    Param("format", str, "netcdf4", "output format", choices=FORMATS),
    Param("compressor", str, "none", "compression of the output", choices=COMPRESSORS),
    Param("chunks", str, None, "chunk shape, e.g. 1,19,181,360, or 'contiguous' (NetCDF4 uncompressed); "
          "default: contiguous for uncompressed NetCDF4, else one time step / z-plane per chunk"),
    Param("time", int, 8, "climate: number of time steps"),
    Param("plev", int, 19, "climate: number of pressure levels"),
    Param("lat", int, 181, "climate: number of latitudes"),
    Param("lon", int, 360, "climate: number of longitudes"),
    Param("nx", int, 512, "cube: x size"),
    Param("ny", int, 512, "cube: y size"),
    Param("nz_per_worker", int, 32, "cube: z planes per worker (thesis: 256)"),
    Param("workers", int, 1, "cube: number of workers the cube is sized for"),
    Param("seed", int, 0, "random seed of the noise"),
    Param("results", str, None, "results record path (default: $IODIAG_JOB_DIR/results.json or <out>.results.json)"),
)


def _layout(kind: str, p: dict[str, Any]) -> tuple[str, tuple[str, ...], tuple[int, ...]]:
    if kind == "climate":
        return "ta", ("time", "plev", "lat", "lon"), (p["time"], p["plev"], p["lat"], p["lon"])
    return "data", ("z", "y", "x"), (p["nz_per_worker"] * p["workers"], p["ny"], p["nx"])


def _coords(kind: str, dims: tuple[str, ...], shape: tuple[int, ...]) -> dict[str, np.ndarray]:
    if kind == "climate":
        nt, nl, ny, nx = shape
        return {
            "time": np.arange(nt, dtype="f8"),  # hours since start
            "plev": np.linspace(100000.0, 100.0, nl),
            "lat": np.linspace(-90.0, 90.0, ny),
            "lon": np.linspace(0.0, 360.0, nx, endpoint=False),
        }
    return {d: np.arange(n, dtype="i4") for d, n in zip(dims, shape)}


def _slab(kind: str, shape: tuple[int, ...], i0: int, i1: int, rng: np.random.Generator) -> np.ndarray:
    """Values for leading-dim indices [i0, i1): smooth field + 0.05 K noise."""
    rest = shape[1:]
    grids = np.meshgrid(*[np.linspace(0, np.pi, n, dtype="f4") for n in rest], indexing="ij")
    out = np.empty((i1 - i0, *rest), dtype="f4")
    for k, i in enumerate(range(i0, i1)):
        if kind == "climate":
            lev, lat, lon = grids
            base = 288.0 - 70.0 * lev / np.pi  # colder aloft
            field = base + 25.0 * np.sin(lat) + 5.0 * np.sin(2 * lon + 0.3 * i) * np.cos(lat)
        else:
            y, x = grids
            field = np.sin(x * 3 + 0.01 * i) * np.cos(y * 2) * 10.0 + 0.1 * i
        out[k] = field + rng.normal(0.0, 0.05, size=rest).astype("f4")
    return out


def _default_chunks(shape: tuple[int, ...]) -> tuple[int, ...]:
    return (1, *shape[1:])


def _steps(n: int, chunk0: int, target_bytes: int, slab_bytes: int) -> list[tuple[int, int]]:
    """Write slabs aligned to the leading chunk size, ~target_bytes each."""
    per = max(chunk0, (max(1, target_bytes // max(slab_bytes, 1)) // chunk0) * chunk0)
    return [(i, min(n, i + per)) for i in range(0, n, per)]


def generate(*, out: str | Path, kind: str = "climate", format: str = "netcdf4", compressor: str = "none",
             chunks: str | tuple[int, ...] | None = None, time: int = 8, plev: int = 19, lat: int = 181,
             lon: int = 360, nx: int = 512, ny: int = 512, nz_per_worker: int = 32, workers: int = 1,
             seed: int = 0, results: str | Path | None = None) -> dict[str, Any]:
    """Write one synthetic dataset; return (and write) its results record."""
    params = dict(out=str(out), kind=kind, format=format, compressor=compressor, chunks=chunks, time=time,
                  plev=plev, lat=lat, lon=lon, nx=nx, ny=ny, nz_per_worker=nz_per_worker, workers=workers,
                  seed=seed)
    for p in PARAMS:
        if p.choices and params.get(p.name) not in p.choices:
            raise UsageError(f"{p.name} = {params.get(p.name)!r} is not one of {list(p.choices)}")
    var, dims, shape = _layout(kind, params)
    if any(n <= 0 for n in shape):
        raise UsageError(f"dataset shape {shape} must be positive in every dimension")
    contiguous = format == "netcdf4" and compressor == "none" and chunks in (None, "", "contiguous")
    if chunks == "contiguous":
        chunks = None
    cshape = parse_shape(chunks, what="chunks") if isinstance(chunks, (str, type(None))) else tuple(chunks)
    cshape = cshape or (shape if contiguous else _default_chunks(shape))
    if len(cshape) != len(shape):
        raise UsageError(f"chunks {cshape} has {len(cshape)} dimensions, the {kind} variable has {len(shape)}",
                         hint=f"dims are {','.join(dims)}")
    cshape = tuple(min(c, n) for c, n in zip(cshape, shape))
    if format in ("netcdf4", "hdf5") and compressor not in ("none", "zlib"):
        raise UsageError(f"compressor {compressor!r} is not available for {format} here",
                         hint="use zlib or none (blosc/zstd need HDF5 filter plugins)")
    out = Path(out)
    if out.exists():
        import shutil

        shutil.rmtree(out) if out.is_dir() else out.unlink()
    out.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    coords = _coords(kind, dims, shape)
    slab_bytes = int(np.prod(shape[1:])) * 4
    steps = _steps(shape[0], 1 if contiguous else cshape[0], 64 * 2**20, slab_bytes)
    t0 = time_mod.perf_counter()
    if format == "netcdf4":
        _write_netcdf(out, var, dims, shape, cshape, coords, compressor, kind, steps, rng, contiguous)
    elif format == "hdf5":
        _write_hdf5(out, var, dims, shape, cshape, coords, compressor, kind, steps, rng)
    else:
        _write_zarr(out, var, dims, shape, cshape, coords, compressor, int(format[-1]), kind, steps, rng)
    wall = time_mod.perf_counter() - t0
    stored, nfiles = tree_bytes(out)
    logical = int(np.prod(shape)) * 4
    record = {
        "workload": "gen",
        "params": params,
        "variable": var,
        "dims": list(dims),
        "shape": list(shape),
        "chunks": None if contiguous else list(cshape),
        "layout": "contiguous" if contiguous else "chunked",
        "timings_s": {"write": wall},
        "bytes": {"logical": logical, "stored": stored, "files": nfiles},
        "metrics": {"write_MBps": logical / 1e6 / wall if wall > 0 else None,
                    "compression_ratio": logical / stored if stored else None},
    }
    record["results_path"] = str(write_record(results_path(results, out.with_name(out.name + ".results.json")),
                                              record))
    return record


time_mod = time  # the `time` parameter shadows the module inside generate()


def _write_netcdf(out, var, dims, shape, cshape, coords, compressor, kind, steps, rng, contiguous) -> None:
    import netCDF4

    with netCDF4.Dataset(out, "w", format="NETCDF4") as ds:
        for d, n in zip(dims, shape):
            ds.createDimension(d, n)
            cv = ds.createVariable(d, coords[d].dtype, (d,))
            cv[:] = coords[d]
        _attrs_coords(ds, kind)
        v = ds.createVariable(var, "f4", dims, zlib=(compressor == "zlib"), complevel=1 if compressor == "zlib" else 4,
                              shuffle=compressor == "zlib", chunksizes=None if contiguous else cshape,
                              contiguous=contiguous)
        _attrs_var(v, kind)
        for i0, i1 in steps:
            v[i0:i1] = _slab(kind, shape, i0, i1, rng)


def _attrs_coords(ds, kind) -> None:
    if kind == "climate":
        ds["time"].units = "hours since 2000-01-01 00:00:00"
        ds["plev"].units = "Pa"
        ds["lat"].units = "degrees_north"
        ds["lon"].units = "degrees_east"


def _attrs_var(v, kind) -> None:
    if kind == "climate":
        v.units = "K"
        v.long_name = "air temperature"


def _write_hdf5(out, var, dims, shape, cshape, coords, compressor, kind, steps, rng) -> None:
    import h5py

    with h5py.File(out, "w") as f:
        for d in dims:
            f.create_dataset(d, data=coords[d])
        kw = dict(compression="gzip", compression_opts=1, shuffle=True) if compressor == "zlib" else {}
        dset = f.create_dataset(var, shape=shape, dtype="f4", chunks=cshape, **kw)
        dset.attrs["dims"] = ",".join(dims)
        for i0, i1 in steps:
            dset[i0:i1] = _slab(kind, shape, i0, i1, rng)


def _write_zarr(out, var, dims, shape, cshape, coords, compressor, zarr_format, kind, steps, rng) -> None:
    import zarr

    from ._common import zarr_compressor

    comp = zarr_compressor(compressor, zarr_format)
    root = zarr.open_group(str(out), mode="w", zarr_format=zarr_format)
    for d in dims:
        a = root.create_array(d, shape=coords[d].shape, dtype=coords[d].dtype, chunks=coords[d].shape,
                              fill_value=None if zarr_format == 2 else 0,
                              dimension_names=[d] if zarr_format == 3 else None)
        a[:] = coords[d]
        if zarr_format == 2:
            a.attrs["_ARRAY_DIMENSIONS"] = [d]
    arr = root.create_array(var, shape=shape, dtype="f4", chunks=cshape,
                            compressors=[comp] if comp is not None else None,
                            fill_value=float("nan"),
                            dimension_names=list(dims) if zarr_format == 3 else None)
    if zarr_format == 2:
        arr.attrs["_ARRAY_DIMENSIONS"] = list(dims)
    if kind == "climate":
        arr.attrs["units"] = "K"
    for i0, i1 in steps:
        arr[i0:i1] = _slab(kind, shape, i0, i1, rng)
    with warnings.catch_warnings():  # "consolidated metadata is not part of the v3 spec" — known, wanted
        warnings.simplefilter("ignore")
        zarr.consolidate_metadata(str(out))


EXAMPLES = """\
  %(prog)s --out data/ta.nc --time 24                      # 119 MB NetCDF4, 4.95 MB per time step
  %(prog)s --out data/ta.zarr --format zarr3 --compressor zstd --chunks 12,19,181,360
  %(prog)s --out data/cube-w2.nc --kind cube --workers 2   # weak-scaling input for 2 workers
"""


def main(argv: list[str] | None = None) -> int:
    args = build_parser("python -m iodiag.workloads.gen", __doc__.split("\n\n")[0], PARAMS,
                        EXAMPLES).parse_args(argv)
    rec = generate(**vars(args))
    print(f"gen: wrote {rec['params']['out']} shape={tuple(rec['shape'])} chunks={rec['layout'] if rec['chunks'] is None else tuple(rec['chunks'])} "
          f"{fmt_bytes(rec['bytes']['stored'], si=True)} stored in {fmt_seconds(rec['timings_s']['write'])} "
          f"(record {rec['results_path']})")
    return 0


if __name__ == "__main__":
    run_main(main)
