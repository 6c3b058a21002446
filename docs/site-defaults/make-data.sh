#!/bin/sh
# Inputs of read-chunks.toml and convert-compressor.toml: one 119 MB variable, four layouts.
set -e
D=${1:-/tmp/iodiag-site-defaults/data}
iodiag workload gen --out "$D/ta.nc" --time 24                                                 # NetCDF4, contiguous
iodiag workload gen --out "$D/ta-c1x1.zarr" --time 24 --format zarr2 --chunks 1,1,181,360      # 0.26 MB chunks
iodiag workload gen --out "$D/ta-c1.zarr" --time 24 --format zarr2 --chunks 1,19,181,360       # 4.95 MB chunks
iodiag workload gen --out "$D/ta-c12.zarr" --time 24 --format zarr2 --chunks 12,19,181,360     # 59 MB chunks
