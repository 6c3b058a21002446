#!/usr/bin/env python3
"""Benchmark `iodiag site ingest`: logs per second per core, and scaling from 1 to 2 Dask workers.

A synthetic YYYY/M/D archive is built from the shared corpus (hard links to
every readable corpus log, round-robin, so the mix of small and 2,048-rank logs
is the corpus's own; 1% damaged files), then ingested into a fresh dataset:

* in this process without Dask (``--workers 0``),
* on a LocalCluster of 1 worker and of 2 workers (1 thread each; cluster
  start-up is excluded, the walk, the reads, the parquet writes are included).

Two rates are reported for each: wall-clock logs/s divided by the cores in use,
and logs per CPU-second (all processes: driver, workers and their forked
darshan-util readers), which stays meaningful when other jobs share the machine.

    python benchmarks/bench_site.py [--logs 2000] [--out benchmarks/results/site.md]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "tests"))

from site_archive import build_archive  # noqa: E402

from iodiag.site import ingest_archive, load_site  # noqa: E402


def _cpu_self() -> float:
    a, b = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime


def _cpu_worker() -> float:  # runs on each Dask worker (its reader children are reaped there)
    import resource as r

    a, b = r.getrusage(r.RUSAGE_SELF), r.getrusage(r.RUSAGE_CHILDREN)
    return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime


def run(root: Path, tmp: Path, workers: int, tag: str) -> dict:
    out = tmp / f"site-{tag}.parquet"
    shutil.rmtree(out, ignore_errors=True)
    if workers == 0:
        c0, t0 = _cpu_self(), time.perf_counter()
        s = ingest_archive(root, out, workers=0)
        wall, cpu = time.perf_counter() - t0, _cpu_self() - c0
        cores = 1
    else:
        import logging

        from distributed import Client, LocalCluster

        with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=":0",
                          silence_logs=logging.ERROR) as lc, Client(lc) as client:
            client.run(lambda: __import__("iodiag.site.worker"))  # warm imports, as a long ingest would be
            w0 = sum(client.run(_cpu_worker).values())
            c0, t0 = _cpu_self(), time.perf_counter()
            s = ingest_archive(root, out, client=client)
            wall = time.perf_counter() - t0
            cpu = _cpu_self() - c0 + sum(client.run(_cpu_worker).values()) - w0
        cores = workers
    jobs = len(load_site(out)["jobs"])
    return {"mode": tag, "workers": workers, "logs": s.logs_read, "jobs": jobs, "errors": s.errors, "wall_s": wall,
            "cpu_s": cpu, "logs_per_s": s.logs_read / wall, "logs_per_s_per_core": s.logs_read / wall / cores,
            "logs_per_cpu_s": s.logs_read / cpu if cpu > 0 else float("nan")}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--logs", type=int, default=2000)
    ap.add_argument("--out", type=Path, default=HERE / "results" / "site.md")
    ap.add_argument("--max-bytes", type=int, default=0, help="leave out corpus logs larger than this (0: keep all)")
    args = ap.parse_args()
    load0 = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="iodiag-bench-site-") as td:
        tmp = Path(td)
        arc = build_archive(tmp / "archive", args.logs, logs_per_day=100, max_bytes=args.max_bytes or None)
        size = sum(p.stat().st_size for p in arc.readable)
        rows = [run(arc.root, tmp, 0, "in-process"), run(arc.root, tmp, 1, "dask-1"), run(arc.root, tmp, 2, "dask-2")]
    r1, r2 = rows[1], rows[2]
    eff_wall = r2["logs_per_s"] / r1["logs_per_s"] / 2
    eff_cpu = r2["logs_per_cpu_s"] / r1["logs_per_cpu_s"]
    load1 = os.getloadavg()[0]
    lines = [
        f"Command: `python benchmarks/bench_site.py --logs {args.logs}`  ",
        f"Archive: {args.logs} logs ({len(arc.readable)} readable hard links to the corpus mix, "
        f"{len(arc.damaged)} damaged), {size / 2**20:.0f} MiB, YYYY/M/D, 100 logs/day  ",
        f"Machine: {os.cpu_count()} cores; load average {load0:.2f} at start, {load1:.2f} at end; "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
        "",
        "| mode | workers | logs | jobs | errors | wall (s) | logs/s | logs/s/core (wall) | CPU (s) | logs per CPU-s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(f"| {r['mode']} | {r['workers']} | {r['logs']} | {r['jobs']} | {r['errors']} | {r['wall_s']:.1f} | "
                     f"{r['logs_per_s']:.0f} | {r['logs_per_s_per_core']:.0f} | {r['cpu_s']:.1f} | {r['logs_per_cpu_s']:.0f} |")
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    lines += ["", f"Peak RSS of the driver process (walk, scheduler, parquet writes) over all runs: {rss:.0f} MiB.", "",
              f"Efficiency 1 -> 2 workers: {eff_wall:.2f} (wall-clock throughput ratio / 2); "
              f"{eff_cpu:.2f} (logs per CPU-second, 2 workers vs 1). Targets: >= 300 logs/s/core, efficiency >= 0.8."]
    text = "\n".join(lines) + "\n"
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
