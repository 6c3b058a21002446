#!/usr/bin/env python3
"""Benchmark `iodiag site ingest`: logs per CPU-second, wall logs/s and peak memory, at any archive size.

A synthetic YYYY/M/D archive is built from the shared corpus (hard links to
every readable corpus log, round-robin, so the mix of small and 2,048-rank logs
is the corpus's own; 1% damaged files), or an existing one is given with
``--archive`` (e.g. a 100k-log archive built once in /tmp).  It is ingested into
a fresh dataset once per mode, each mode in a fresh Python process (so that its
peak memory is its own):

* ``0``: in this process without Dask (``--workers 0``),
* ``N``: on the LocalCluster that ``site ingest`` starts (``ingest.local_cluster``),
  N workers of 1 thread (cluster start-up excluded; the walk, the reads, the
  detectors, the features and the parquet writes included);
* ``slurmN``: on N Dask worker jobs of a single-node Slurm started here from
  Debian's slurm-wlm (tests/slurm/cluster.py, root needed), through dask-jobqueue,
  as ``site ingest --cluster slurm --jobs N`` does (job start-up excluded; the
  worker jobs' processes are found by their command line for CPU and memory).

CPU is that of the whole process tree (driver and scheduler, nannies, workers,
the long-lived reader processes and any reader restarted after a damaged log:
psutil's user + system time of every live process plus the reaped children it
waited for), which stays meaningful when other jobs share the machine.  Each
reader is started and has imported what a task needs before the measurement
(as in a long ingest); that one-time cost is reported separately.  Peak memory
is the high-water RSS (VmHWM) of the driver, of the largest worker and of the
largest reader process.

    python benchmarks/bench_site.py --logs 10000 [--workers 0,1,2] [--out benchmarks/results/site.md]
    python benchmarks/bench_site.py --archive /tmp/arc100k --workers 2
    python benchmarks/bench_site.py --logs 10000 --workers 2,slurm2      # local cluster, then 2 Slurm worker jobs
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "tests"))


def tree_cpu() -> float:
    """CPU seconds of this process and every descendant, live or reaped."""
    import psutil

    me = psutil.Process()
    return _cpu_of([me, *me.children(recursive=True)])


def _cpu_of(procs) -> float:
    """CPU seconds of these processes and the children they reaped (a process gone meanwhile counts 0)."""
    import psutil

    total = 0.0
    for p in procs:
        try:
            t = p.cpu_times()
        except psutil.Error:
            continue
        total += t.user + t.system + t.children_user + t.children_system
    return total


def tree_peaks() -> dict[str, float]:
    """High-water RSS in MiB: this process, and the largest of its descendants by kind (Linux /proc)."""
    import psutil

    def hwm(pid: int) -> float:
        try:
            with open(f"/proc/{pid}/status") as fh:
                for line in fh:
                    if line.startswith("VmHWM:"):
                        return int(line.split()[1]) / 1024
        except OSError:
            pass
        return 0.0

    me = psutil.Process()
    out = {"driver_mib": hwm(me.pid), "worker_mib": 0.0, "reader_mib": 0.0}
    for p in me.children(recursive=True):
        try:
            cmd = " ".join(p.cmdline())
        except psutil.Error:
            continue
        kind = "reader_mib" if "_serve" in cmd or "isolate" in cmd else "worker_mib"
        out[kind] = max(out[kind], hwm(p.pid))
    return out


def _warm(archive: str, in_reader: bool) -> None:
    """What a long ingest has done long before: start this thread's reader process and import what a task
    uses, here on two real jobs of the archive."""
    from iodiag.config import Config
    from iodiag.site.walk import group_units, iter_dirs
    from iodiag.site.worker import process_units

    units = group_units(archive, next(iter_dirs(archive)))[:2]
    process_units(units, config=Config(), run=0, in_reader=in_reader)


def _slurm_workers():
    """The processes of the Dask worker jobs on the local Slurm (nanny, worker, reader processes): they are
    slurmd's descendants, not ours, so they are found by their command line."""
    import psutil

    tops = []
    for p in psutil.process_iter(["cmdline"]):
        cmd = " ".join(p.info["cmdline"] or [])
        if "distributed.cli.dask_worker" in cmd or "dask_worker" in cmd or "dask-worker" in cmd:
            tops.append(p)
    seen, out = set(), []
    for p in tops:
        for q in [p, *p.children(recursive=True)]:
            if q.pid not in seen:
                seen.add(q.pid)
                out.append(q)
    return out


def slurm_cpu() -> float:
    """CPU seconds of this process tree plus the worker jobs' processes (live, and the children they reaped)."""
    return tree_cpu() + _cpu_of(_slurm_workers())


def slurm_peaks() -> dict[str, float]:
    import psutil

    out = tree_peaks()
    for p in _slurm_workers():
        try:
            cmd = " ".join(p.cmdline())
            with open(f"/proc/{p.pid}/status") as fh:
                hwm = next((int(ln.split()[1]) / 1024 for ln in fh if ln.startswith("VmHWM:")), 0.0)
        except (psutil.Error, OSError):
            continue
        kind = "reader_mib" if "_serve" in cmd or "isolate" in cmd else "worker_mib"
        out[kind] = max(out[kind], hwm)
    return out


def one(archive: Path, out: Path, workers) -> dict:
    """One measured ingest (run in a fresh process by main); ``workers`` 0, N or "slurmN" (N worker jobs of the
    local Slurm that main started, through dask-jobqueue: what `site ingest --cluster slurm --jobs N` does)."""
    from iodiag.site import ingest_archive

    shutil.rmtree(out, ignore_errors=True)
    if isinstance(workers, str) and workers.startswith("slurm"):
        from distributed import Client

        from iodiag.config import Config
        from iodiag.jobqueue import wait_for_workers
        from iodiag.site.ingest import _jobqueue_cluster, jobqueue_options

        n = int(workers[len("slurm"):])
        opts = jobqueue_options(jobs=n, memory="2GiB", walltime="00:30:00", log_directory=str(out.parent / "worker-logs"))
        cluster, opts = _jobqueue_cluster("slurm", Config(), opts)
        with cluster, Client(cluster) as client:
            wait_for_workers(client, cluster, "slurm", jobs=n, timeout_s=300)
            c0 = slurm_cpu()
            client.gather([client.submit(_warm, str(archive), True, workers=[a], allow_other_workers=False, pure=False)
                           for a in client.scheduler_info()["workers"]])
            c1, t0 = slurm_cpu(), time.perf_counter()
            s = ingest_archive(archive, out, client=client)
            wall, cpu = time.perf_counter() - t0, slurm_cpu() - c1
            peaks = slurm_peaks()
    elif workers == 0:
        c0 = tree_cpu()
        _warm(str(archive), in_reader=False)  # --workers 0 builds and diagnoses in this process
        c1, t0 = tree_cpu(), time.perf_counter()
        s = ingest_archive(archive, out, workers=0)
        wall, cpu = time.perf_counter() - t0, tree_cpu() - c1
        peaks = tree_peaks()
    else:
        from distributed import Client

        from iodiag.site.ingest import local_cluster

        with local_cluster(workers) as lc, Client(lc) as client:  # the cluster `site ingest` starts
            c0 = tree_cpu()
            # on each worker's task thread (the reader process belongs to the thread that runs the tasks)
            client.gather([client.submit(_warm, str(archive), True, workers=[a], allow_other_workers=False, pure=False)
                           for a in client.scheduler_info()["workers"]])
            c1, t0 = tree_cpu(), time.perf_counter()
            s = ingest_archive(archive, out, client=client)
            wall, cpu = time.perf_counter() - t0, tree_cpu() - c1
            peaks = tree_peaks()
    return {"workers": workers, "logs": s.logs_read, "jobs": s.jobs, "errors": s.errors, "parts": len(list((out / "jobs").glob("*.parquet"))),
            "wall_s": wall, "cpu_s": cpu, "warm_cpu_s": c1 - c0, "logs_per_s": s.logs_read / wall,
            "logs_per_cpu_s": s.logs_read / cpu if cpu > 0 else float("nan"), **peaks}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--logs", type=int, default=2000, help="size of the archive to build (ignored with --archive)")
    ap.add_argument("--archive", type=Path, help="an existing archive to ingest instead of building one")
    ap.add_argument("--workers", default="0,1,2", help="comma-separated modes: 0 = in this process, N = N Dask workers")
    ap.add_argument("--out", type=Path, default=HERE / "results" / "site.md")
    ap.add_argument("--max-bytes", type=int, default=0, help="leave out corpus logs larger than this (0: keep all)")
    ap.add_argument("--one", nargs=3, metavar=("ARCHIVE", "OUT", "WORKERS"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        mode = args.one[2]
        print(json.dumps(one(Path(args.one[0]), Path(args.one[1]), mode if mode.startswith("slurm") else int(mode))))
        return 0
    load0 = os.getloadavg()
    modes = args.workers.split(",")
    slurm = None
    env = dict(os.environ)
    with tempfile.TemporaryDirectory(prefix="iodiag-bench-site-") as td:
        tmp = Path(td)
        if any(m.startswith("slurm") for m in modes):  # Debian's slurm-wlm, one node, started here (tests/slurm)
            from slurm.cluster import LocalSlurm, ensure_packages

            ensure_packages(allow_apt=False)
            slurm = LocalSlurm(tmp / "slurm").start()
            env["SLURM_CONF"] = str(slurm.conf)
        if args.archive:
            root = args.archive.resolve()
            from iodiag.site.walk import count_logs

            n_logs, what = count_logs(root), f"`{root}`"
        else:
            from site_archive import build_archive

            arc = build_archive(tmp / "archive", args.logs, logs_per_day=100, max_bytes=args.max_bytes or None)
            root, n_logs = arc.root, args.logs
            what = f"built here ({len(arc.readable)} readable hard links to the corpus mix, {len(arc.damaged)} damaged)"
        rows = []
        try:
            for w in modes:
                p = subprocess.run([sys.executable, __file__, "--one", str(root), str(tmp / f"site-{w}.parquet"), w],
                                   capture_output=True, text=True, env=env)
                if p.returncode != 0:
                    sys.stderr.write(p.stderr)
                    return 1
                rows.append(json.loads(p.stdout.strip().splitlines()[-1]))
                print(rows[-1], flush=True)
        finally:
            if slurm is not None:
                slurm.stop()
    load1 = os.getloadavg()
    lines = [
        f"Command: `python benchmarks/bench_site.py {' '.join(sys.argv[1:])}`  ",
        f"Archive: {n_logs} logs, {what}, YYYY/M/D, 100 logs/day  ",
        f"Machine: {os.cpu_count()} cores shared with other jobs; load average (1/5/15 min) {load0[0]:.2f}/{load0[1]:.2f}/{load0[2]:.2f} "
        f"at start, {load1[0]:.2f}/{load1[1]:.2f}/{load1[2]:.2f} at end; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
        "",
        "| workers | logs | jobs | errors | parquet parts | wall (s) | logs/s | CPU (s) | logs per CPU-s | peak RSS driver (MiB) | worker (MiB) | reader (MiB) |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(f"| {r['workers']} | {r['logs']} | {r['jobs']} | {r['errors']} | {r['parts']} | {r['wall_s']:.1f} | {r['logs_per_s']:.0f} | "
                     f"{r['cpu_s']:.1f} | {r['logs_per_cpu_s']:.0f} | {r['driver_mib']:.0f} | {r['worker_mib']:.0f} | {r['reader_mib']:.0f} |")
    lines += ["", "Not in the CPU column: starting the cluster's reader processes and the first task's imports (two jobs read), "
              "done once per worker thread before the measurement as in a long ingest: "
              + ", ".join(f"{r['workers']} workers {r['warm_cpu_s']:.1f} s" for r in rows) + "."]
    text = "\n".join(lines) + "\n"
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
