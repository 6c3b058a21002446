#!/usr/bin/env python3
"""Benchmark `iodiag site ingest`: logs per second per core, and scaling from 1 to 2 Dask workers.

A synthetic YYYY/M/D archive is built from the shared corpus (hard links to
every readable corpus log, round-robin, so the mix of small and 2,048-rank logs
is the corpus's own; 1% damaged files), then ingested into a fresh dataset:

* in this process without Dask (``--workers 0``),
* on the LocalCluster that ``site ingest`` starts (``ingest.local_cluster``), of 1 worker
  and of 2 workers (1 thread each; cluster start-up is excluded, the walk, the reads, the
  parquet writes are included).

Two rates are reported for each: wall-clock logs/s divided by the cores in use,
and logs per CPU-second (all processes: driver and scheduler, workers, and the
long-lived reader processes that read, build and diagnose the jobs: their CPU is
read from /proc while they run, and from RUSAGE_CHILDREN once reaped), which stays
meaningful when other jobs share the machine.  Each reader is started and has
imported what a task needs before the measurement (as in a long ingest); that
one-time cost is printed separately.

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


def _live_readers_cpu() -> float:
    """CPU seconds of this process's live reader processes so far (Linux /proc)."""
    from iodiag.analyzers.readers import isolate

    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for srv in list(isolate._SERVERS.values()):
        if srv.proc is None:
            continue
        try:
            with open(f"/proc/{srv.proc.pid}/stat") as fh:
                fields = fh.read().rpartition(")")[2].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / tick  # utime, stime
    return total


def _cpu() -> float:
    """CPU seconds of this process, its reaped children and its live reader processes (runs on each worker too)."""
    import resource as r

    a, b = r.getrusage(r.RUSAGE_SELF), r.getrusage(r.RUSAGE_CHILDREN)
    return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime + _live_readers_cpu()


def _warm(archive: str, in_reader: bool) -> float:
    """What a long ingest has done long before: start this thread's reader process and import what a task
    uses, here on two real jobs of the archive.  Returns the CPU seconds that took (reported, not counted)."""
    from iodiag.config import Config
    from iodiag.site.walk import group_units, iter_dirs
    from iodiag.site.worker import process_units

    c0 = _cpu()
    units = group_units(archive, next(iter_dirs(archive)))[:2]
    process_units(units, config=Config(), run=0, in_reader=in_reader)
    return _cpu() - c0


def run(root: Path, tmp: Path, workers: int, tag: str) -> dict:
    out = tmp / f"site-{tag}.parquet"
    shutil.rmtree(out, ignore_errors=True)
    if workers == 0:
        warm = _warm(str(root), in_reader=False)  # --workers 0 builds and diagnoses in this process
        c0, t0 = _cpu(), time.perf_counter()
        s = ingest_archive(root, out, workers=0)
        wall, cpu = time.perf_counter() - t0, _cpu() - c0
        cores = 1
    else:
        from distributed import Client

        from iodiag.site.ingest import local_cluster

        with local_cluster(workers) as lc, Client(lc) as client:  # the cluster `site ingest` starts
            # on each worker's task thread (the reader process belongs to the thread that runs the tasks)
            addrs = list(client.scheduler_info()["workers"])
            warm = sum(client.gather([client.submit(_warm, str(root), True, workers=[a], allow_other_workers=False, pure=False)
                                      for a in addrs]))
            w0 = sum(client.run(_cpu).values())
            c0, t0 = _cpu(), time.perf_counter()
            s = ingest_archive(root, out, client=client)
            wall = time.perf_counter() - t0
            cpu = _cpu() - c0 + sum(client.run(_cpu).values()) - w0
        cores = workers
    from iodiag.analyzers.readers.isolate import close_reader_servers

    close_reader_servers()
    jobs = len(load_site(out)["jobs"])
    return {"mode": tag, "workers": workers, "logs": s.logs_read, "jobs": jobs, "errors": s.errors, "wall_s": wall,
            "cpu_s": cpu, "logs_per_s": s.logs_read / wall, "logs_per_s_per_core": s.logs_read / wall / cores,
            "logs_per_cpu_s": s.logs_read / cpu if cpu > 0 else float("nan"), "warm_cpu_s": warm}


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
              "Not in the CPU column: starting the reader processes and the first task's imports, done once per worker "
              "thread before the measurement as in a long ingest (two jobs read): "
              + ", ".join(f"{r['mode']} {r['warm_cpu_s']:.2f} s" for r in rows) + ".", "",
              f"Efficiency 1 -> 2 workers: {eff_wall:.2f} (wall-clock throughput ratio / 2); "
              f"{eff_cpu:.2f} (logs per CPU-second, 2 workers vs 1). Targets: >= 300 logs/s/core, efficiency >= 0.8."]
    text = "\n".join(lines) + "\n"
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
