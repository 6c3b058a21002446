#!/usr/bin/env bash
# make demo: generate a small NetCDF file, convert it to Zarr with xarray + a 2-worker Dask LocalCluster
# under `iodiag run` (Darshan when a runtime is found, else the embedded collector), then `iodiag report last`.
# The conversion uses deliberately small chunks (one level of one time step per chunk, ~7 KB) so the
# diagnosis has something to say: small I/O, thousands of chunk files, a metadata storm.
set -euo pipefail
PY="$1"
OUT="$2"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
export IODIAG_HOME="${IODIAG_HOME:-$OUT/jobs}"

echo "== 1/3 generate an example NetCDF4 dataset ($OUT/ta.nc)"
"$PY" -m iodiag workload gen --out "$OUT/ta.nc" --time 48 --plev 4 --lat 60 --lon 120 --results "$OUT/gen.results.json"

echo "== 2/3 convert it to Zarr under iodiag run"
"$PY" -m iodiag run --name demo-convert -- "$PY" -m iodiag.workloads.convert \
    --src "$OUT/ta.nc" --dst "$OUT/ta.zarr" --chunks 1,1,20,40 --workers 2 --threads 1 --zarr-format 3

echo "== 3/3 diagnose it"
"$PY" -m iodiag report last --html-path "$OUT/report.html" --json-file "$OUT/report.json"
echo
echo "Reports: $OUT/report.html and $OUT/report.json  (job store: $IODIAG_HOME; try: IODIAG_HOME=$IODIAG_HOME $PY -m iodiag jobs)"
