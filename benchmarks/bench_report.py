#!/usr/bin/env python3
"""Benchmark `iodiag report` against `python -m darshan summary` and `drishti` on the largest logs.

Whole process, including interpreter start-up and imports: wall time (min of N runs) and
peak RSS (max over the process and the children it waited for, from wait4's rusage).

    python benchmarks/bench_report.py [--repeat 3] [--out benchmarks/results/report.md]

The reference tools run from a separate venv (benchmarks/.ref-venv: darshan==3.5.0 and
drishti-io from PyPI, created on first use) so they never share iodiag's environment.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
CORPUS = REPO.parent / "shared" / "darshan-logs"
REF_VENV = HERE / ".ref-venv"

LOGS = {
    "1024-proc DXT (dxt-explorer)": "dxt-explorer/sample/jeanbez_8_benchmark_parallel_id45195555_8-6-50011-11681279140261054765_1628283217.darshan",
    "600k DXT segments (tight-64B)": "generated/tight-64B-pwrite-pread-dxt-full/0_python_id2035-2035_11-22-83087-1216503035641033982_1.darshan",
    "2048 files (sample-badost)": "darshan/darshan-util/pydarshan/darshan/tests/input/sample-badost.darshan",
    "512 ranks heatmap (e3sm_io)": "darshan-logs/darshan_logs/e3sm_io_heatmaps_and_dxt/e3sm_io_heatmap_only.darshan",
}


def ensure_ref_venv() -> Path:
    py = REF_VENV / "bin" / "python"
    if not (REF_VENV / "bin" / "drishti").exists():
        subprocess.run([sys.executable, "-m", "venv", str(REF_VENV)], check=True)
        subprocess.run([str(py), "-m", "pip", "install", "-q", "darshan==3.5.0", "drishti-io", "matplotlib", "seaborn",
                        "jinja2", "importlib_resources"], check=True)
    return py


def measure(cmd: list[str], *, cwd: str, env: dict[str, str], repeat: int) -> tuple[float, float, int]:
    """(min wall s, max peak RSS MiB, exit code)"""
    best, peak, code = float("inf"), 0.0, 0
    for _ in range(repeat):
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _, status, ru = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        code = proc.returncode
        best = min(best, wall)
        peak = max(peak, ru.ru_maxrss / 1024)
    return best, peak, code


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", type=Path, default=HERE / "results" / "report.md")
    ap.add_argument("--no-ref", action="store_true", help="only time iodiag")
    args = ap.parse_args()

    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO / "src")
    # An installed iodiag has its bytecode compiled at install time, as the reference tools (pip-installed
    # into .ref-venv) have theirs; a checkout run with PYTHONDONTWRITEBYTECODE=1 would otherwise compile
    # every module from source on each run (~0.06 s).  __pycache__ is ignored by git.
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(REPO / "src")], check=False, stdout=subprocess.DEVNULL)
    env["MPLBACKEND"] = "Agg"
    ref_py = None if args.no_ref else ensure_ref_venv()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for label, rel in LOGS.items():
            log = CORPUS / rel
            if not log.exists():
                print(f"skip {label}: {log} missing", file=sys.stderr)
                continue
            tools = {
                "iodiag report --json": [sys.executable, "-m", "iodiag", "report", str(log), "--json"],
                "iodiag report (terminal)": [sys.executable, "-m", "iodiag", "report", str(log), "--no-color"],
            }
            if ref_py:
                tools["darshan summary"] = [str(ref_py), "-m", "darshan", "summary", str(log), "--output", os.path.join(tmp, "s.html")]
                tools["drishti"] = [str(REF_VENV / "bin" / "drishti"), str(log)]
            res = {}
            for name, cmd in tools.items():
                wall, rss, code = measure(cmd, cwd=tmp, env=env, repeat=args.repeat)
                res[name] = (wall, rss, code)
                print(f"{label:32} {name:26} {wall:7.2f} s {rss:8.0f} MiB  exit {code}", file=sys.stderr)
            rows.append((label, res))

    lines = [
        "| log | tool | wall (s, min of %d) | peak RSS (MiB) | exit | speed-up of `iodiag report --json` |" % args.repeat,
        "|---|---|---:|---:|---:|---:|",
    ]
    for label, res in rows:
        ours = res["iodiag report --json"][0]
        for name, (wall, rss, code) in res.items():
            ratio = "" if name.startswith("iodiag") else f"{wall / ours:.1f}×"
            lines.append(f"| {label} | {name} | {wall:.2f} | {rss:.0f} | {code} | {ratio} |")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    header = (
        f"Command: `{Path(sys.executable).name} benchmarks/bench_report.py --repeat {args.repeat}`  \n"
        f"Machine: {os.cpu_count()} cores; load average at start {os.getloadavg()[0]:.2f}; "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}\n\n"
    )
    args.out.write_text(header + "\n".join(lines) + "\n")
    print(header + "\n".join(lines))


if __name__ == "__main__":
    main()
