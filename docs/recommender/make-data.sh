#!/bin/sh
# Inputs of the default training sweep (train-convert.toml, train-read.toml): array scales of the synthetic
# climate variable ta(time, plev, lat, lon) float32, as contiguous NetCDF4 sources for the conversion sweep
# (five scales) and as Zarr stores in every layout the read sweep compares (three scales).  ~1.4 GB in all.
#   long: 1024 x 2 x 46 x 90    (34 MB, 33 kB per time step: many short steps)
#   mid:    96 x 8 x 91 x 180   (50 MB, 0.52 MB per time step)
#   wide:   24 x 19 x 181 x 360 (119 MB, 4.95 MB per time step: the 1-degree grid of the thesis)
# Layouts: step = one time step per chunk, (1,.,.,.); block = ~16 MB along time; pencil = the whole time axis
# on a 4 x 4 split of the horizontal grid.  Each in Zarr format 2 and 3, uncompressed and zstd.
set -e
D=${1:-/tmp/iodiag-train/data}
G="iodiag workload gen"
mkdir -p "$D"
layout() {  # scale time plev lat lon step block pencil
    s=$1; t=$2; p=$3; y=$4; x=$5
    $G --out "$D/$s.nc" --time "$t" --plev "$p" --lat "$y" --lon "$x"
    for l in "step:$6" "block:$7" "pencil:$8"; do
        name=${l%%:*}; chunks=${l#*:}
        for f in 2 3; do
            for c in none zstd; do
                $G --out "$D/$s-$name-$c-v$f.zarr" --format "zarr$f" --compressor "$c" --chunks "$chunks" \
                   --time "$t" --plev "$p" --lat "$y" --lon "$x"
            done
        done
    done
}
layout long 1024 2 46 90   1,2,46,90    483,2,46,90  1024,2,12,23
layout mid  96   8 91 180  1,8,91,180   30,8,91,180  96,8,23,45
layout wide 24  19 181 360 1,19,181,360 3,19,181,360 24,19,46,90
# two more scales for the conversion sweep only (NetCDF4 sources)
$G --out "$D/tall.nc" --time 512 --plev 4 --lat 46 --lon 90    # 34 MB, 66 kB per step
$G --out "$D/deep.nc" --time 48 --plev 19 --lat 91 --lon 180   # 60 MB, 1.24 MB per step
