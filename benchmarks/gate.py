#!/usr/bin/env python3
"""The speed gate of `make bench` (issue 29): fails when `iodiag report` falls below 3x Drishti's speed or above
1.5x `darshan-dxt-parser`'s wall time on the benchmark logs of bench_report.py.

    python benchmarks/gate.py [--from benchmarks/results/report.json.raw] [--repeat 5] [--allow-missing]

Whole-process wall time, minimum over interleaved rounds (bench_report.measure: every tool once per round, so a
burst of load on a shared machine hits every tool).  Both report forms count: `report --json` and the terminal
report.  `make bench` runs it after the benchmarks on the numbers bench_report.py just wrote (``--from``, when
they are under an hour old); alone, it measures (``--repeat`` rounds, without `darshan summary`).

Exit status: 0 every target met; 1 a target missed (each miss printed); 2 a reference could not be measured
(no Drishti venv, no darshan-dxt-parser, a log missing from the corpus) — a target that was not measured is not
met, unless ``--allow-missing`` is given (then those rows are listed as not measured and the rest decides).
Not part of `make test`: timings are never test assertions.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import bench_report  # noqa: E402 - beside this script

MIN_VS_DRISHTI = 3.0  # report at least this many times faster than Drishti (wall)
MAX_VS_DXT_PARSER = 1.5  # report's wall time at most this multiple of darshan-dxt-parser's
OURS = ("iodiag report --json", "iodiag report (terminal)")
FRESH_S = 3600.0


def verdicts(rows: list[dict], dxt_how: str = "") -> tuple[list[str], list[str], list[str]]:
    """(met, missed, not measured) lines from bench_report's rows ({label, dxt, tools: {tool: [wall, ...]}})."""
    met, missed, unmeasured = [], [], []
    for row in rows:
        label, tools = row["label"], row["tools"]
        if not all(o in tools and tools[o][3] == 0 for o in OURS):
            missed.append(f"{label}: iodiag report did not run cleanly ({ {o: tools.get(o) for o in OURS} })")
            continue
        if "drishti" in tools and tools["drishti"][3] == 0:
            for o in OURS:
                r = tools["drishti"][0] / tools[o][0]
                line = f"{label}: `{o}` {r:.2f}x faster than Drishti (target >= {MIN_VS_DRISHTI}x)"
                (met if r >= MIN_VS_DRISHTI else missed).append(line)
        else:
            unmeasured.append(f"{label}: Drishti not measured" + (" (it failed on this log)" if "drishti" in tools else ""))
        if row["dxt"]:
            if "darshan-dxt-parser" in tools and tools["darshan-dxt-parser"][3] == 0:
                for o in OURS:
                    r = tools[o][0] / tools["darshan-dxt-parser"][0]
                    line = f"{label}: `{o}` takes {r:.2f}x darshan-dxt-parser's wall time (target <= {MAX_VS_DXT_PARSER}x)"
                    (met if r <= MAX_VS_DXT_PARSER else missed).append(line)
            else:
                unmeasured.append(f"{label}: darshan-dxt-parser not measured ({dxt_how or 'not found'})")
    return met, missed, unmeasured


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--from", dest="src", type=Path, default=None,
                    help="bench_report.py's raw numbers (report.json.raw) instead of measuring")
    ap.add_argument("--repeat", type=int, default=5, help="interleaved rounds when measuring")
    ap.add_argument("--allow-missing", action="store_true", help="a reference that cannot be measured is not a failure")
    args = ap.parse_args()
    if args.src is not None and args.src.is_file() and time.time() - json.loads(args.src.read_text())["when"] < FRESH_S:
        raw = json.loads(args.src.read_text())
        print(f"speed gate on {args.src} ({raw['repeat']} rounds)")
        rows, how = raw["rows"], raw.get("dxt_how", "")
    else:
        print(f"speed gate: measuring ({args.repeat} interleaved rounds)", flush=True)
        measured, _, how = bench_report.measure(args.repeat, ref=True, summary=False)
        rows = [{"label": label, "dxt": is_dxt, "tools": {k: list(v) for k, v in res.items()}}
                for label, is_dxt, res in measured]
    missing_logs = [label for label in bench_report.LOGS if label not in {r["label"] for r in rows}]
    met, missed, unmeasured = verdicts(rows, how)
    unmeasured += [f"{label}: log not in the corpus" for label in missing_logs]
    for line in met:
        print(f"  met      {line}")
    for line in missed:
        print(f"  MISSED   {line}")
    for line in unmeasured:
        print(f"  not measured  {line}")
    if missed:
        print(f"speed gate FAILED: {len(missed)} target(s) missed", file=sys.stderr)
        return 1
    if unmeasured and not args.allow_missing:
        print(f"speed gate INCOMPLETE: {len(unmeasured)} comparison(s) could not be measured "
              "(install the reference tools, or pass --allow-missing)", file=sys.stderr)
        return 2
    print(f"speed gate passed: {len(met)} target(s) met" + (f", {len(unmeasured)} not measured" if unmeasured else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
