#!/usr/bin/env bash
# make demo: generate a small NetCDF file, convert it to Zarr with xarray + a 2-worker Dask LocalCluster
# under `iodiag run` (Darshan when a runtime is found, else the embedded collector), then `iodiag report last`,
# `iodiag recommend last` and `iodiag verify last` (the top recommendation re-run and measured).
# The conversion uses deliberately small chunks (one level of one time step per chunk, ~7 KB) so the
# diagnosis has something to say: small I/O, thousands of chunk files, a metadata storm.
set -euo pipefail
PY="$1"
OUT="$2"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
export IODIAG_HOME="${IODIAG_HOME:-$OUT/jobs}"

echo "== 1/5 generate an example NetCDF4 dataset ($OUT/ta.nc)"
"$PY" -m iodiag workload gen --out "$OUT/ta.nc" --time 48 --plev 4 --lat 60 --lon 120 --results "$OUT/gen.results.json"

echo "== 2/5 convert it to Zarr under iodiag run"
"$PY" -m iodiag run --name demo-convert -- "$PY" -m iodiag.workloads.convert \
    --src "$OUT/ta.nc" --dst "$OUT/ta.zarr" --chunks 1,1,20,40 --workers 2 --threads 1 --zarr-format 3

echo "== 3/5 diagnose it"
"$PY" -m iodiag report last --html-path "$OUT/report.html" --json-file "$OUT/report.json"

echo "== 4/5 what to change"
"$PY" -m iodiag recommend last

echo "== 5/5 verify the top recommendation: re-run before/after, 5 times each, interleaved"
"$PY" -m iodiag verify last --reps 5 --html "$OUT/verify.html"
echo
echo "Reports: $OUT/report.html, $OUT/report.json, $OUT/verify.html  (job store: $IODIAG_HOME; try: IODIAG_HOME=$IODIAG_HOME $PY -m iodiag jobs)"
