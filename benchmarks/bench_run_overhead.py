"""Overhead of `iodiag run` against the same workload under the bare collector.

Both sides run the same NetCDF -> Zarr conversion on a LocalCluster(2 workers x 1 thread) with the
same Darshan environment (LD_PRELOAD, non-MPI mode, the same generated config file, logs into a
folder).  "bare" is that environment and `python convert.py`, no iodiag; "iodiag" is
`iodiag run --darshan convert.py` (supervisor, process watch, Dask capture: task stream, workers; since
issue 28 the performance report is opt-in: the row `iodiag --dask-report` adds it).  Runs are interleaved
(bare, iodiag, iodiag --dask-report, iodiag --no-dask, bare, ...) to spread machine noise; the median wall
and CPU of each variant are used, and the median of the per-round differences to bare (each round's runs
are minutes apart at most, so slow drifts of the machine's load cancel).

    python benchmarks/bench_run_overhead.py [--repeats 3] [--size 240] [--out benchmarks/results/run_overhead.md]
    python benchmarks/bench_run_overhead.py --workload convert --size 73   # the issue-28 case: 73 time steps
        of the 1-degree climate grid (361 MB NetCDF4) through `python -m iodiag.workloads.convert --workers 2`

Without a Darshan runtime both sides run without a collector (the table says so).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

WORKLOAD = r'''
import sys
import numpy as np, xarray as xr
from distributed import Client, LocalCluster
src, dst, nt = sys.argv[1], sys.argv[2], int(sys.argv[3])
if __name__ == "__main__":
    rng = np.random.default_rng(0)
    xr.Dataset({v: (("time", "lat", "lon"), rng.random((nt, 90, 180), dtype="f4")) for v in ("tas", "pr", "uas")}).to_netcdf(src)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster, Client(cluster):
        ds = xr.open_dataset(src, chunks={"time": 4})
        ds.to_zarr(dst, mode="w")
        (ds.tas.mean("time") + ds.pr.std("time")).compute()
'''


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--size", type=int, default=240, help="time steps of the NetCDF file")
    ap.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "run_overhead.md"))
    ap.add_argument("--workload", choices=("script", "convert"), default="script",
                    help="script: the small conversion script above; convert: iodiag's convert workload on "
                         "--size time steps of the 1-degree climate grid")
    args = ap.parse_args()

    from iodiag.collectors import darshan as dcol
    from iodiag.errors import CollectorError

    work = Path(tempfile.mkdtemp(prefix="iodiag-bench-run-"))
    script = work / "convert.py"
    script.write_text(WORKLOAD)
    try:
        runtime = dcol.find_runtime()
        collector = "darshan"
    except CollectorError:
        runtime, collector = None, "none"
    env_base = dict(os.environ)
    env_base["PYTHONPATH"] = str(REPO / "src") + (os.pathsep + env_base["PYTHONPATH"] if env_base.get("PYTHONPATH") else "")

    variants = {"bare": None, "iodiag": [], "iodiag --dask-report": ["--dask-report"], "iodiag --no-dask": ["--no-dask"]}
    cpu: dict[str, list[float]] = {k: [] for k in variants}
    last_cpu: list[float] = [0.0]

    def timed(argv: list[str], env: dict[str, str]) -> float:
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = time.perf_counter()
        subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wall = time.perf_counter() - t
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        last_cpu[0] = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
        return wall

    if args.workload == "convert":
        subprocess.run([sys.executable, "-m", "iodiag.workloads.gen", "--out", str(work / "in.nc"), "--time",
                        str(args.size)], env=env_base, check=True, stdout=subprocess.DEVNULL)

    def command(out: str) -> list[str]:
        if args.workload == "convert":
            return [sys.executable, "-m", "iodiag.workloads.convert", "--src", str(work / "in.nc"), "--dst", out,
                    "--workers", "2", "--results", str(work / "results.json")]
        return [sys.executable, str(script), str(work / "in.nc"), out, str(args.size)]

    def bare(i: int) -> float:
        env = dict(env_base)
        job = work / f"bare{i}"
        job.mkdir()
        if runtime is not None:
            env.update(dcol.darshan_environment(runtime, job_dir=job, darshan_jobid=1000 + i, dxt=False, env=env_base))
        return timed(command(str(work / f"b{i}.zarr")), env)

    def iodiag(i: int, extra: list[str]) -> float:
        env = dict(env_base)
        env["IODIAG_HOME"] = str(work / "store")
        return timed([sys.executable, "-m", "iodiag", "run", "--collector", collector, *extra, "--",
                      *command(str(work / f"i{i}.zarr"))], env)

    walls: dict[str, list[float]] = {k: [] for k in variants}
    bare(-1)  # warm the page cache and imports
    for i in range(args.repeats):  # interleaved: A B C D A B C D ...
        for j, (k, extra) in enumerate(variants.items()):
            walls[k].append(bare(i) if extra is None else iodiag(100 * j + i, extra))
            cpu[k].append(last_cpu[0])
    final, own = [], []
    import json

    for rec in (work / "store" / "jobs").glob("*/dask/client-*.json"):
        d = json.loads(rec.read_text())
        if d.get("report"):
            final.append(d.get("final_capture_s") or 0.0)
        else:  # the capture's own cost without the report: its setup at client start + the final capture
            own.append((d.get("final_capture_s") or 0.0) + ((d.get("timeline") or {}).get("setup_s") or 0.0))
    med = {k: statistics.median(v) for k, v in walls.items()}
    mcpu = {k: statistics.median(v) for k, v in cpu.items()}
    load = os.getloadavg()[0]
    lines = [
        f"# `iodiag run` overhead ({time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores, collector: {collector}"
        + (f" {runtime.version}" if runtime else "") + ")",
        "",
        (f"Workload: `python -m iodiag.workloads.convert --workers 2` on {args.size} time steps of the 1-degree "
         "climate grid (NetCDF4 -> Zarr); " if args.workload == "convert" else
         f"Workload: NetCDF ({args.size}x90x180 x3 vars) -> Zarr + a reduction on LocalCluster(2 workers x 1 thread); ")
        + 
        f"{args.repeats} alternating runs per row; median wall and median CPU (user+sys of the whole process tree). "
        f"Load average at the end: {load:.1f} (a shared machine: wall times are noisy, CPU time less so).",
        "",
        "| variant | median wall (s) | runs (s) | wall overhead | median of paired differences (s) | median CPU (s) | CPU overhead |",
        "|---|---:|---|---:|---:|---:|---:|",
    ]
    for k, v in walls.items():
        over = (med[k] - med["bare"]) / med["bare"] * 100
        cover = (mcpu[k] - mcpu["bare"]) / mcpu["bare"] * 100
        paired = statistics.median(a - b for a, b in zip(v, walls["bare"]))
        lines.append(f"| {k} | {med[k]:.2f} | {', '.join(f'{x:.2f}' for x in v)} | "
                     + ("—" if k == "bare" else f"{over:+.1f} %") + " | " + ("—" if k == "bare" else f"{paired:+.2f}")
                     + f" | {mcpu[k]:.2f} | " + ("—" if k == "bare" else f"{cover:+.1f} %") + " |")
    if own:
        lines += ["", f"iodiag's Dask capture, its own measured cost (setup at client start + final capture at close, "
                      f"no report): median {statistics.median(own):.3f} s over {len(own)} runs."]
    if final:
        lines += ["", f"Dask capture at client close with --dask-report (task stream flush + performance report): "
                      f"median {statistics.median(final):.2f} s over {len(final)} runs."]
    text = "\n".join(lines) + "\n"
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    print(text)
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
