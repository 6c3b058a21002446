"""g3: a Dask LocalCluster (2 worker processes, 1 thread each) writes a 3.2 MB array of 8 chunks to a Zarr store
and reads it back for a sum."""
import os
import sys

import dask.array as da
from distributed import Client, LocalCluster

if __name__ == "__main__":
    out = sys.argv[1]
    scratch = os.path.join(os.path.dirname(os.path.abspath(out)), "dask-scratch")
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0",
                      local_directory=scratch) as lc, Client(lc):
        x = da.arange(8 * 100 * 500, chunks=100 * 500, dtype="f8").reshape(8, 100, 500) % 97
        x.to_zarr(out, overwrite=True)
        print(float(da.from_zarr(out).sum().compute()))
