#!/usr/bin/env python3
"""`make bench`: run every benchmarks/bench_*.py; each writes its table under benchmarks/results/."""

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
    if failed:
        print("benchmarks failed: " + ", ".join(failed), file=sys.stderr)
        return 1
    print(f"tables written under {HERE / 'results'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
