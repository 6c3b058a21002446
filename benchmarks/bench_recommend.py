"""What "What to change" adds to a report: recommendations (rules + the trained tree when installed) vs none.

    python benchmarks/bench_recommend.py [TARGET ...] [--repeat 5]

TARGETs are what `iodiag report` takes (default: three corpus logs of different kinds).  For each, on one loaded
profile: CPU time (process_time) of the report without recommendations (detectors + rules' advice + report dict)
and with them (``service.diagnose_report``: + workload parameters, model loading, engine), best of N; and the
one-off cost in a fresh interpreter of importing what the report path adds (recommend.engine, reports.advice).
Also checks that scikit-learn is not imported on the report path.  Target (issue 18): <= 0.2 s added.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

CORPUS = REPO.parent / "shared" / "darshan-logs"
DEFAULTS = [
    "darshan/darshan-util/pydarshan/darshan/tests/input/sample.darshan",
    "darshan-logs/darshan_logs/imbalanced_io/imbalanced-io.darshan",
    "drishti-io/sample/jlbez_8a_benchmark_write_parallel_id1322696_8-21-14519-8141979180909667175_12.darshan",
]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("targets", nargs="*")
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()
    from iodiag.config import Config
    from iodiag.recommend.rules import diagnose_with_advice
    from iodiag.reports.json_report import build_report
    from iodiag.service import diagnose_report, load_target

    cfg = Config()
    targets = a.targets or [str(CORPUS / t) for t in DEFAULTS if (CORPUS / t).exists()]
    print("| target | findings | recommendations | report without, CPU s | with, CPU s | added s |")
    print("|---|---:|---:|---:|---:|---:|")
    for t in targets:
        loaded = load_target(target=t, config=cfg)
        prof, home = loaded.profile, loaded.home
        best = {"without": 1e9, "with": 1e9}
        n_rec = n_find = 0
        for _ in range(a.repeat):
            t0 = time.process_time()
            found = diagnose_with_advice(prof, cfg)
            build_report(prof, found)
            best["without"] = min(best["without"], time.process_time() - t0)
            t0 = time.process_time()
            found, rep = diagnose_report(profile=prof, config=cfg, home=home)
            best["with"] = min(best["with"], time.process_time() - t0)
            n_rec, n_find = len(rep["recommendations"]), len(found)
        name = os.path.basename(t.rstrip("/"))[:48]
        print(f"| `{name}` | {n_find} | {n_rec} | {best['without']:.4f} | {best['with']:.4f} | "
              f"{best['with'] - best['without']:.4f} |")
    print()
    print(f"scikit-learn imported on the report path: {'sklearn' in sys.modules}")
    code = ("import time,sys; import iodiag.service, iodiag.reports.json_report, iodiag.recommend.rules; "
            "t=time.process_time(); import iodiag.recommend.engine, iodiag.reports.advice; "
            "print(time.process_time()-t, 'sklearn' in sys.modules)")
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    runs = [subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True).stdout.split()
            for _ in range(3)]
    print(f"one-off import of recommend.engine + reports.advice in a fresh interpreter: "
          f"{min(float(r[0]) for r in runs):.4f} s CPU (scikit-learn imported: {runs[0][1]})")
    print(f"load average: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
