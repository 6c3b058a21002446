#!/usr/bin/env python3
"""Regenerate docs/dask-time.md: a NetCDF -> Zarr conversion with tiny chunks, diagnosed, then re-run with the
chunks iodiag recommends, repetitions interleaved.

    python scripts/dask_chunks.py [--reps 3] [--time 365] [--out docs/dask-time.md]

Every run is a real `iodiag run --collector embedded` of `python -m iodiag.workloads.convert` on a 2-worker
LocalCluster; the chunk shape of the second configuration is read from the task-overhead finding of the first
run (nothing is typed in by hand).  Wall times are the jobs' own (job.json), medians over the repetitions.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))


def _iodiag(*args: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "iodiag", *args], env=env, capture_output=True, text=True, check=False)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--time", type=int, default=365)
    ap.add_argument("--out", default=str(REPO / "docs" / "dask-time.md"))
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="iodiag-dask-chunks-"))
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "IODIAG_HOME": str(work / "store")}
    src = work / "ta.nc"
    g = _iodiag("workload", "gen", "--out", str(src), "--time", str(a.time), "--plev", "10", "--lat", "90",
                "--lon", "180", env=env)
    if g.returncode:
        print(g.stderr, file=sys.stderr)
        return 1
    tiny = "1,1,90,180"

    def run(job: str, chunks: str) -> float:
        r = _iodiag("run", "--collector", "embedded", "--no-dask-report", "--name", job, "--", sys.executable,
                    "-m", "iodiag.workloads.convert", "--src", str(src), "--dst", str(work / f"{job}.zarr"),
                    "--workers", "2", "--threads", "1", "--chunks", chunks, env=env)
        if r.returncode:
            raise SystemExit(f"{job} failed:\n{r.stderr[-2000:]}")
        rec = json.loads(next((work / "store" / "jobs").glob(f"*-{job}-*/job.json")).read_text())
        return float(rec["wall_s"])

    walls: dict[str, list[float]] = {"tiny": [run("tiny-0", tiny)], "recommended": []}
    first_report = json.loads(_iodiag("report", "tiny-0", "--json", env=env).stdout)
    f = next(f for f in first_report["findings"] if f["id"] == "task-overhead")
    recommended = ",".join(str(x) for x in f["evidence"]["chunks_recommended"])
    configs = {"recommended": recommended}
    for rep in range(a.reps):  # interleaved: recommended, tiny, recommended, tiny, ...
        walls["recommended"].append(run(f"recommended-{rep}", recommended))
        if rep:
            walls["tiny"].append(run(f"tiny-{rep}", tiny))
    t = first_report["time"]
    top = max((f for f in first_report["findings"] if f["est_cost_s"]), key=lambda f: f["est_cost_s"])
    mt, mr = statistics.median(walls["tiny"]), statistics.median(walls["recommended"])
    lines = [
        "# Where a Dask conversion's time goes, and what the chunk advice buys",
        "",
        f"Made by `python scripts/dask_chunks.py --reps {a.reps} --time {a.time}` on "
        f"{time.strftime('%Y-%m-%d')} (this machine: 2 cores; load average at the end "
        f"{os.getloadavg()[0]:.2f}). Data: `iodiag workload gen --time {a.time} --plev 10 --lat 90 --lon 180` "
        "(float32, NetCDF4). Each run: `iodiag run --collector embedded -- python -m iodiag.workloads.convert "
        "--workers 2 --threads 1 --chunks ...`, configurations interleaved, wall time from the job record.",
        "",
        "The first run's report (tiny chunks):",
        "",
        f"- headline: {t['dask']['headline']}",
        f"- I/O on the critical path: {t['io_wall_s']:.2f} s of a {t['runtime_s']:.2f} s run",
        f"- top finding: `{top['id']}` ({top['severity']}), ~{top['est_cost_s']:.2f} s of the run: {top['title']}",
        f"- recommendation: {top['recommendation']}",
        "",
        "| chunks | runs | wall s (median) | wall s (each) |",
        "|---|---:|---:|---|",
        f"| `{tiny}` (tiny) | {len(walls['tiny'])} | {mt:.2f} | {', '.join(f'{w:.2f}' for w in walls['tiny'])} |",
        f"| `{configs['recommended']}` (iodiag's advice) | {len(walls['recommended'])} | {mr:.2f} | "
        f"{', '.join(f'{w:.2f}' for w in walls['recommended'])} |",
        "",
        f"Speedup of the recommended chunks: **{mt / mr:.1f}x** (median over median).",
    ]
    Path(a.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
