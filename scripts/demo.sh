#!/usr/bin/env bash
# make demo: run an example NetCDF -> Zarr conversion on a small Dask LocalCluster under `iodiag run`
# (Darshan where a runtime is found, else the embedded collector), then `iodiag report last`.
set -euo pipefail
PY="$1"
OUT="$2"
mkdir -p "$OUT"
export IODIAG_HOME="$PWD/$OUT/store"
"$PY" -m iodiag run --collector auto --name demo-nc2zarr examples/nc2zarr.py --out "$OUT/data"
echo
"$PY" -m iodiag report last --json-file "$OUT/report.json"
echo
echo "job store: $IODIAG_HOME (iodiag jobs --store $IODIAG_HOME); JSON report: $OUT/report.json"
