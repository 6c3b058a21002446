"""What the trained recommender adds to a report: import of iodiag.recommend.model, load_model() of the shipped
model, job_features() and advise() on a real job, each in a fresh process (as `iodiag report` pays it), against
the import of scikit-learn's trees that applying the model avoids.

The job: a whole-variable read of a (1, ·, ·, ·)-chunked Zarr store (1024 x 2 x 46 x 90 float32) recorded with
`iodiag run --collector embedded` into a temporary job store (or --job ID with $IODIAG_HOME set).  Rounds are
interleaved (model, scikit-learn import, model, ...); medians of wall and CPU time per step.

Run: python benchmarks/bench_recommend_model.py [--rounds 7] [--job ID]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CHILD = r"""
import json, sys, time
def t(): return time.perf_counter(), time.process_time()
out = {}
from iodiag.analyzers.job import load_job_record
from iodiag.jobs.store import find_job
prof = load_job_record(find_job(sys.argv[1]))
a = t(); import iodiag.recommend.model as M; from iodiag.recommend.features import job_features; b = t()
m = M.load_model(); c = t()
f = job_features(prof); d = t()
rec = m.advise(f); e = t()
def dt(x, y): return [y[0] - x[0], y[1] - x[1]]
out = {"import": dt(a, b), "load_model": dt(b, c), "job_features": dt(c, d), "advise": dt(d, e),
       "total": dt(a, e), "sklearn_imported": any(k.startswith("sklearn") for k in sys.modules),
       "abstain": rec.abstain, "title": rec.title}
print(json.dumps(out))
"""
SKLEARN = r"""
import json, time
a = time.perf_counter(), time.process_time()
import sklearn.tree
b = time.perf_counter(), time.process_time()
print(json.dumps({"import sklearn.tree": [b[0] - a[0], b[1] - a[1]]}))
"""


def _env(home: str) -> dict:
    env = dict(os.environ, IODIAG_HOME=home)
    env["PYTHONPATH"] = str(REPO / "src") + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def _make_job(home: str, tmp: Path) -> str:
    store = tmp / "long.zarr"
    env = _env(home)
    subprocess.run([sys.executable, "-m", "iodiag", "workload", "gen", "--out", str(store), "--format", "zarr3",
                    "--chunks", "1,2,46,90", "--time", "1024", "--plev", "2", "--lat", "46", "--lon", "90"],
                   env=env, check=True, capture_output=True)
    subprocess.run([sys.executable, "-m", "iodiag", "run", "--name", "bench-recommend", "--collector", "embedded",
                    "--", sys.executable, "-m", "iodiag.workloads.read", "--path", str(store), "--patterns", "whole",
                    "--api", "xarray-dask", "--repeat", "1"], env=env, check=True, capture_output=True)
    return "last"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--job", default=None, help="job id in $IODIAG_HOME (default: record one in a temp store)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        home = os.environ.get("IODIAG_HOME", "") if args.job else str(Path(tmp) / "home")
        job = args.job or _make_job(home, Path(tmp))
        env = _env(home)
        rows: dict[str, list] = {}
        for _ in range(args.rounds):
            for code, extra in ((CHILD, [job]), (SKLEARN, [])):
                r = subprocess.run([sys.executable, "-c", code, *extra], env=env, capture_output=True, text=True,
                                   check=True)
                for k, v in json.loads(r.stdout.strip().splitlines()[-1]).items():
                    rows.setdefault(k, []).append(v)
    load = open("/proc/loadavg").read().split()[:3]
    print(f"{args.rounds} interleaved rounds, fresh process each; load average {' '.join(load)}; "
          f"scikit-learn imported while advising: {any(rows['sklearn_imported'])}; advice: {rows['title'][0]}")
    print("| step | wall median (ms) | CPU median (ms) |")
    print("|---|---:|---:|")
    for k in ("import", "load_model", "job_features", "advise", "total", "import sklearn.tree"):
        w = statistics.median(v[0] for v in rows[k]) * 1000
        c = statistics.median(v[1] for v in rows[k]) * 1000
        print(f"| {k} | {w:.1f} | {c:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
