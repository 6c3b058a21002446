"""Example workload for `make demo`: convert a NetCDF file to Zarr on a small Dask LocalCluster.

An ordinary script (it knows nothing about iodiag): it writes a synthetic climate-like NetCDF4
file, then reads it in small time chunks and writes a Zarr store, the pattern that makes
thousands of small chunk files in real conversions.

    python examples/nc2zarr.py --out demo-out/data [--times 96]
"""

import argparse
import os

import numpy as np
import xarray as xr
from distributed import Client, LocalCluster


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="demo-out/data")
    ap.add_argument("--times", type=int, default=96)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    src = os.path.join(args.out, "input.nc")
    dst = os.path.join(args.out, "output.zarr")
    rng = np.random.default_rng(42)
    coords = {"time": np.arange(args.times), "lat": np.linspace(-89.5, 89.5, 90), "lon": np.linspace(0, 358, 180)}
    ds = xr.Dataset({v: (("time", "lat", "lon"), rng.random((args.times, 90, 180), dtype="f4"))
                     for v in ("tas", "pr", "uas", "vas")}, coords=coords)
    ds.to_netcdf(src)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster, \
            Client(cluster):
        # small chunks on purpose: one Zarr chunk file per 2 time steps and 45 latitudes
        xr.open_dataset(src, chunks={"time": 2, "lat": 45}).to_zarr(dst, mode="w")
    print(f"wrote {dst}")


if __name__ == "__main__":
    main()
