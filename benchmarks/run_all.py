#!/usr/bin/env python3
"""`make bench`: run every benchmarks/bench_*.py; each writes its table under benchmarks/results/.  Then the speed
gate (benchmarks/gate.py, on the numbers bench_report.py wrote): `make bench` fails when `report` is below 3x
Drishti or above 1.5x darshan-dxt-parser's wall time."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> int:
    failed = []
    for script in sorted(HERE.glob("bench_*.py")):
        print(f"== {script.name}", flush=True)
        if subprocess.run([sys.executable, str(script)]).returncode != 0:
            failed.append(script.name)
    print("== gate.py", flush=True)
    gate = subprocess.run([sys.executable, str(HERE / "gate.py"), "--from", str(HERE / "results" / "report.json.raw")])
    if gate.returncode != 0:
        failed.append("gate.py (speed targets)")
    if failed:
        print("benchmarks failed: " + ", ".join(failed), file=sys.stderr)
        return 1
    print(f"tables written under {HERE / 'results'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
