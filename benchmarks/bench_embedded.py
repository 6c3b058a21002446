"""Overhead of the embedded collector against no collector.

Two workloads, each run alternately without and with the collector's
environment (``prepare()``), ``--reps`` times; the figures are the ratios of
median wall times and of median CPU times (user + system of the child, which
is less disturbed by other load on a shared machine); process start to exit,
so library load, trace creation and Python start-up are included.

- ``write-loop``: 200,000 unbuffered 64-byte ``os.write`` calls from Python
  (the issue's small-I/O worst case; Darshan with DXT measured 1.57x here).
- ``nc2zarr``: NetCDF4 (about 200 MB, 4 variables) -> Zarr v3 with xarray and
  Dask's threaded scheduler: the demo-style conversion (target <= 3 %).

Usage::

    python benchmarks/bench_embedded.py                # both, 5 reps; table -> benchmarks/results/embedded.md
    python benchmarks/bench_embedded.py --only write-loop --reps 9
    python benchmarks/bench_embedded.py --json results.json
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from iodiag.analyzers.readers.embedded import raw_records  # noqa: E402
from iodiag.collectors.embedded import prepare, version  # noqa: E402

WRITE_LOOP = r"""
import os, sys
fd = os.open(sys.argv[1] + "/loop.bin", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
b = b"x" * 64
w = os.write
for _ in range(200_000):
    w(fd, b)
os.close(fd)
"""

MAKE_NC = r"""
import sys, numpy as np, xarray as xr
nt, ny, nx = 120, 200, 500   # 4 variables x 120 x 200 x 500 x 4 B = 192 MB
rng = np.random.default_rng(0)
ds = xr.Dataset(
    {name: (("time", "y", "x"), rng.random((nt, ny, nx), dtype="f4")) for name in ("t2m", "u10", "v10", "msl")},
    coords={"time": np.arange(nt), "y": np.arange(ny), "x": np.arange(nx)})
ds.to_netcdf(sys.argv[1], engine="netcdf4")
"""

NC2ZARR = r"""
import shutil, sys, dask, xarray as xr
src, dst = sys.argv[2], sys.argv[1] + "/out.zarr"
shutil.rmtree(dst, ignore_errors=True)
with dask.config.set(scheduler="threads", num_workers=2):
    ds = xr.open_dataset(src, engine="netcdf4", chunks={"time": 10})
    ds.to_zarr(dst, zarr_format=3, mode="w", consolidated=False)
"""


# Per-call cost, measured inside one process (robust to other load: minimum over batches).
PERCALL_C = r"""
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
#define BATCH 20000
#define MEASURE(label, setup, body, teardown) do { double best = 1e9; \
    for (int rep = 0; rep < 15; rep++) { setup; double t0 = now(); \
        for (int i = 0; i < BATCH; i++) { body; } double dt = now() - t0; teardown; if (dt < best) best = dt; } \
    printf("%s %.1f\n", label, best / BATCH * 1e9); } while (0)
int main(int argc, char **argv) {
    char path[4096]; snprintf(path, sizeof path, "%s/percall.bin", argv[1]);
    char buf[64]; memset(buf, 'x', sizeof buf); struct stat st; int fd; FILE *f;
    MEASURE("write_64B", fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644), write(fd, buf, 64), close(fd));
    MEASURE("pread_64B", fd = open(path, O_RDONLY), pread(fd, buf, 64, (i % 1000) * 64), close(fd));
    MEASURE("lseek", fd = open(path, O_RDONLY), lseek(fd, i, SEEK_SET), close(fd));
    MEASURE("stat", (void)0, stat(path, &st), (void)0);
    MEASURE("open_close", (void)0, (fd = open(path, O_RDONLY), close(fd)), (void)0);
    MEASURE("fwrite_64B", f = fopen(path, "w"), fwrite(buf, 1, 64, f), fclose(f));
    MEASURE("write_untraced_fd", fd = open("/dev/null", O_WRONLY), write(fd, buf, 64), close(fd));
    return 0;
}
"""


def percall(work: Path) -> list[dict] | None:
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        return None
    src, exe = work / "percall.c", work / "percall"
    src.write_text(PERCALL_C)
    subprocess.run([cc, "-O2", "-o", str(exe), str(src)], check=True)
    base = dict(os.environ)
    out = {}
    for arm in ("none", "embedded"):
        env = dict(base)
        if arm == "embedded":
            env.update(prepare(work / "traces-percall"))
        res = subprocess.run([str(exe), str(work)], env=env, capture_output=True, text=True, check=True).stdout
        out[arm] = {line.split()[0]: float(line.split()[1]) for line in res.splitlines()}
    shutil.rmtree(work / "traces-percall", ignore_errors=True)
    return [{"call": k, "none_ns": out["none"][k], "embedded_ns": out["embedded"][k],
             "added_ns": out["embedded"][k] - out["none"][k]} for k in out["none"]]


def _run(script: Path, args: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds user+system) of one child run."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run([sys.executable, str(script), *args], env=env, check=True)
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)


def find_darshan() -> Path | None:
    """A Darshan runtime for the comparison arm, found the way `iodiag run` finds it."""
    from iodiag.collectors.darshan import find_runtime
    from iodiag.errors import CollectorError

    try:
        return find_runtime().lib
    except CollectorError:
        return None


def darshan_env(lib: Path, logdir: Path) -> dict[str, str]:
    logdir.mkdir(parents=True, exist_ok=True)
    return {"LD_PRELOAD": str(lib), "DARSHAN_ENABLE_NONMPI": "1", "DXT_ENABLE_IO_TRACE": "1",
            "DARSHAN_LOGPATH": str(logdir), "DARSHAN_LOGFILE": str(logdir / "run.darshan")}


def measure(name: str, code: str, args: list[str], work: Path, reps: int) -> dict:
    script = work / f"{name}.py"
    script.write_text(textwrap.dedent(code))
    base_env = dict(os.environ)
    base_env.pop("PYTHONPATH", None)
    base, traced, base_cpu, traced_cpu, nrec = [], [], [], [], 0
    darshan = find_darshan()
    dar, dar_cpu = [], []
    _run(script, args, base_env)  # warm the page cache and the import caches
    for i in range(reps):
        w, c = _run(script, args, base_env)
        base.append(w)
        base_cpu.append(c)
        tdir = work / f"traces-{name}-{i}"
        env = dict(base_env)
        env.update(prepare(tdir))
        w, c = _run(script, args, env)
        traced.append(w)
        traced_cpu.append(c)
        nrec = sum(int(raw_records(p)[0]["count"]) for p in tdir.glob("*.iot"))
        shutil.rmtree(tdir)
        if darshan is not None:
            ddir = work / f"darshan-{name}-{i}"
            env = dict(base_env)
            env.update(darshan_env(darshan, ddir))
            w, c = _run(script, args, env)
            dar.append(w)
            dar_cpu.append(c)
            shutil.rmtree(ddir)
    mb, mt = statistics.median(base), statistics.median(traced)
    cb, ct = statistics.median(base_cpu), statistics.median(traced_cpu)
    return {"workload": name, "reps": reps, "baseline_s": base, "embedded_s": traced,
            "baseline_cpu_s": base_cpu, "embedded_cpu_s": traced_cpu,
            "median_baseline_s": mb, "median_embedded_s": mt, "ratio": mt / mb,
            "median_baseline_cpu_s": cb, "median_embedded_cpu_s": ct, "cpu_ratio": ct / cb,
            "min_ratio": min(traced) / min(base), "min_cpu_ratio": min(traced_cpu) / min(base_cpu), "records": nrec,
            "darshan": str(darshan) if darshan else None, "darshan_s": dar, "darshan_cpu_s": dar_cpu,
            "darshan_ratio": statistics.median(dar) / mb if dar else None,
            "darshan_cpu_ratio": statistics.median(dar_cpu) / cb if dar else None}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--only", help="comma-separated: write-loop, nc2zarr, percall")
    ap.add_argument("--json", type=Path, help="also write the raw timings here")
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results" / "embedded.md",
                    help="markdown table to write (default: benchmarks/results/embedded.md)")
    a = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="iodiag-bench-"))
    results = []
    try:
        names = a.only.split(",") if a.only else ["write-loop", "nc2zarr"]
        if "write-loop" in names:
            results.append(measure("write-loop", WRITE_LOOP, [str(work)], work, a.reps))
        if "nc2zarr" in names:
            src = work / "in.nc"
            subprocess.run([sys.executable, "-c", textwrap.dedent(MAKE_NC), str(src)], check=True)
            results.append(measure("nc2zarr", NC2ZARR, [str(work), str(src)], work, a.reps))
        calls = percall(work) if (not a.only or "percall" in names) else None
    finally:
        shutil.rmtree(work, ignore_errors=True)
    load = os.getloadavg()[0]
    lines = [
        f"Embedded collector {version()}, Python {sys.version.split()[0]}, {os.cpu_count()} CPUs, "
        f"load average {load:.1f} at the end, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.",
        "",
    ]
    if results:
        lines += [
            "Medians over the repetitions; in brackets the ratio of the fastest runs (least disturbed by other load).",
            "",
            "| workload | reps | records traced | wall, no collector (s) | wall, embedded (s) | wall ratio | CPU, no collector (s) | CPU, embedded (s) | CPU ratio |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
    for r in results:
        lines.append(f"| {r['workload']} | {r['reps']} | {r['records']} | {r['median_baseline_s']:.3f} | {r['median_embedded_s']:.3f} | "
                     f"{r['ratio']:.3f} ({r['min_ratio']:.3f}) | {r['median_baseline_cpu_s']:.3f} | {r['median_embedded_cpu_s']:.3f} | "
                     f"{r['cpu_ratio']:.3f} ({r['min_cpu_ratio']:.3f}) |")
    if calls:
        lines += ["", "Per call, inside one C process (thread CPU time, best of 15 batches of 20,000; the added cost is the collector's):", "",
                  "| call | no collector (ns) | embedded (ns) | added (ns) |", "|---|---:|---:|---:|"]
        lines += [f"| {c['call']} | {c['none_ns']:.0f} | {c['embedded_ns']:.0f} | {c['added_ns']:+.0f} |" for c in calls]
    dars = [r for r in results if r["darshan"]]
    if dars:
        lines += ["", f"Same runs under Darshan ({dars[0]['darshan']}, non-MPI mode, DXT on, default memory): "
                  + "; ".join(f"{r['workload']} wall ratio {r['darshan_ratio']:.3f}, CPU ratio {r['darshan_cpu_ratio']:.3f}"
                              for r in dars) + "."]
    elif results:
        lines += ["", "No Darshan runtime found (IODIAG_DARSHAN_LIB, darshan-config, /opt/darshan-runtime): no Darshan arm."]
    text = "\n".join(lines) + "\n"
    print(text)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(text)
    if a.json:
        a.json.write_text(json.dumps({"version": version(), "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
