"""Diagnosis vs load time on the largest corpus log (1024-process DXT, dxt-explorer sample).

    python benchmarks/bench_diagnose.py [LOG] [--repeat 5]

Prints load (isolated reader) and diagnose (all detectors) times, best and
median of N runs, and the ratio (load + diagnose) / load.  Target: <= 1.5.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from iodiag.analyzers.detectors import DETECTORS, diagnose  # noqa: E402
from iodiag.analyzers.load import load_job  # noqa: E402
from iodiag.analyzers import metrics  # noqa: E402

DEFAULT = next(iter(sorted((REPO.parent / "shared/darshan-logs/dxt-explorer/sample").glob("*.darshan"))), None)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("log", nargs="?", default=str(DEFAULT) if DEFAULT else None)
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()
    if not a.log:
        print("no log given and the dxt-explorer sample is not in ../shared", file=sys.stderr)
        return 2
    loads, diags, per = [], [], {d.__name__: [] for d in DETECTORS}
    for _ in range(a.repeat):
        t = time.perf_counter()
        prof = load_job([a.log])
        loads.append(time.perf_counter() - t)
        t = time.perf_counter()
        findings = diagnose(prof)
        diags.append(time.perf_counter() - t)
        metrics._CACHE.clear()
        for d in DETECTORS:  # per detector, metrics already cached
            metrics.metrics_of(prof)
            t = time.perf_counter()
            d(prof, __import__("iodiag.config", fromlist=["Config"]).Config())
            per[d.__name__].append(time.perf_counter() - t)
        metrics._CACHE.clear()
    lo, dg = statistics.median(loads), statistics.median(diags)
    print(f"log: {a.log}")
    print(f"processes {prof.job.nprocs}, DXT segments {len(prof.ops):,}, findings {[f.id for f in findings]}")
    print(f"load      best {min(loads):.3f} s  median {lo:.3f} s")
    print(f"diagnose  best {min(diags):.3f} s  median {dg:.3f} s")
    print(f"(load + diagnose) / load = {(lo + dg) / lo:.2f}  (target <= 1.5)")
    for name, ts in sorted(per.items(), key=lambda kv: -statistics.median(kv[1]))[:5]:
        print(f"  {name:32s} {statistics.median(ts) * 1000:7.1f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
