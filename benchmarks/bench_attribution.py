#!/usr/bin/env python3
"""Attribution speed: joining a Dask job's operations to its tasks (analyzers/tasktime.py) on a real job.

    python benchmarks/bench_attribution.py [--job JOB_FOLDER] [--time 1095]

Without --job, records one: a NetCDF -> Zarr conversion in one-level-of-one-step chunks (10,952 tasks at
--time 1095) under `iodiag run --collector embedded`.  Prints the operations, tasks and the seconds of: loading
the job, the attribution and time split (dask_time_of), and the whole diagnosis; best of 3.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))


def record(time_steps: int) -> Path:
    work = Path(tempfile.mkdtemp(prefix="iodiag-bench-attr-"))
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "IODIAG_HOME": str(work / "store")}
    py = [sys.executable, "-m", "iodiag"]
    subprocess.run(py + ["workload", "gen", "--out", str(work / "ta.nc"), "--time", str(time_steps), "--plev", "10",
                         "--lat", "90", "--lon", "180"], env=env, check=True, capture_output=True)
    subprocess.run(py + ["run", "--collector", "embedded", "--no-dask-report", "--name", "attr", "--", sys.executable,
                         "-m", "iodiag.workloads.convert", "--src", str(work / "ta.nc"), "--dst", str(work / "o.zarr"),
                         "--workers", "2", "--threads", "1", "--chunks", "1,1,90,180"], env=env, check=True,
                   capture_output=True)
    return next((work / "store" / "jobs").glob("*-attr-*"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--job", help="a job folder recorded by iodiag run (with traces/ and dask/)")
    ap.add_argument("--time", type=int, default=1095)
    a = ap.parse_args()
    folder = Path(a.job) if a.job else record(a.time)
    from iodiag.analyzers.detectors import diagnose
    from iodiag.analyzers.job import load_job_record
    from iodiag.analyzers.tasktime import dask_time_of

    best = {"load": 1e9, "attribution": 1e9, "diagnose": 1e9}
    for _ in range(3):
        t0 = time.perf_counter()
        prof = load_job_record(folder)
        t1 = time.perf_counter()
        dt = dask_time_of(prof)
        t2 = time.perf_counter()
        diagnose(prof)
        t3 = time.perf_counter()
        for k, v in (("load", t1 - t0), ("attribution", t2 - t1), ("diagnose", t3 - t2)):
            best[k] = min(best[k], v)
    print(f"job {folder.name}: {len(prof.ops):,} operations, {dt.tasks:,} tasks, {dt.threads} worker threads")
    print(f"load {best['load']:.2f} s · attribution + time split {best['attribution']:.2f} s · "
          f"diagnosis (after attribution) {best['diagnose']:.2f} s (best of 3)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
