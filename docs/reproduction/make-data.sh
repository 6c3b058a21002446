#!/bin/sh
# Inputs of read-patterns.toml and convert-compression.toml (119 MB each store).
set -e
D=${1:-/tmp/iodiag-repro/data}
iodiag workload gen --out "$D/ta.nc" --time 24                                   # NetCDF4, contiguous
iodiag workload gen --out "$D/ta-c1.zarr" --time 24 --format zarr2 --chunks 1,19,181,360    # 4.95 MB chunks
iodiag workload gen --out "$D/ta-c12.zarr" --time 24 --format zarr2 --chunks 12,19,181,360  # 59 MB chunks
