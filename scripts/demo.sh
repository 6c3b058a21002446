#!/usr/bin/env bash
# make demo: report on a bundled real Darshan log (the collector issue extends this to run + report).
set -euo pipefail
PY="$1"
OUT="$2"
mkdir -p "$OUT"
LOG="../shared/darshan-logs/darshan-logs/darshan_logs/imbalanced_io/imbalanced-io.darshan"
if [ ! -f "$LOG" ]; then
  echo "iodiag demo: example log $LOG not found (clone the repo next to shared/)" >&2
  exit 1
fi
"$PY" -m iodiag report "$LOG" --json-file "$OUT/report.json"
echo
echo "JSON report written to $OUT/report.json"
