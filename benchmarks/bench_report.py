#!/usr/bin/env python3
"""Benchmark `iodiag report` against `python -m darshan summary`, `drishti` and `darshan-dxt-parser`.

Whole process, including interpreter start-up and imports: wall time and CPU time (user + system of the process
and the children it waited for, from wait4), minimum over N interleaved rounds (round r runs every tool once,
so a burst of load on a shared machine hits every tool, not one), and peak RSS (the largest over the rounds).

    python benchmarks/bench_report.py [--repeat 5] [--no-summary] [--out benchmarks/results/report.md]

The reference tools run from a separate venv (benchmarks/.ref-venv: darshan==3.5.0 and drishti-io from PyPI,
created on first use) so they never share iodiag's environment.  `darshan-dxt-parser` (darshan-util's C parser,
the speed reference of issue 17) is taken from $DARSHAN_DXT_PARSER, PATH, or the bin folder of the Darshan
installation iodiag finds for `iodiag run --darshan`; without one, its rows say why they are missing.
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
CORPUS = REPO.parent / "shared" / "darshan-logs"
REF_VENV = HERE / ".ref-venv"

LOGS = {
    "1024-proc DXT (dxt-explorer)": ("dxt-explorer/sample/jeanbez_8_benchmark_parallel_id45195555_8-6-50011-11681279140261054765_1628283217.darshan", True),
    "600k DXT segments (tight-64B)": ("generated/tight-64B-pwrite-pread-dxt-full/0_python_id2035-2035_11-22-83087-1216503035641033982_1.darshan", True),
    "2048 files (sample-badost)": ("darshan/darshan-util/pydarshan/darshan/tests/input/sample-badost.darshan", False),
    "512 ranks heatmap (e3sm_io)": ("darshan-logs/darshan_logs/e3sm_io_heatmaps_and_dxt/e3sm_io_heatmap_only.darshan", False),
}  # label -> (path under the corpus, whether the dxt-parser comparison applies: a DXT log)


def ensure_ref_venv() -> Path:
    py = REF_VENV / "bin" / "python"
    if not (REF_VENV / "bin" / "drishti").exists():
        subprocess.run([sys.executable, "-m", "venv", str(REF_VENV)], check=True)
        subprocess.run([str(py), "-m", "pip", "install", "-q", "darshan==3.5.0", "drishti-io", "matplotlib", "seaborn",
                        "jinja2", "importlib_resources"], check=True)
    return py


def run_once(cmd: list[str], *, cwd: str, env: dict[str, str]) -> tuple[float, float, float, int]:
    """(wall s, CPU s, peak RSS MiB, exit code) of one whole-process run."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, ru = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    return wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss / 1024, os.waitstatus_to_exitcode(status)


def find_dxt_parser() -> tuple[str | None, str]:
    """(path, how it was found) or (None, why not)."""
    env_tool = os.environ.get("DARSHAN_DXT_PARSER")
    if env_tool:
        return (env_tool, "$DARSHAN_DXT_PARSER") if os.access(env_tool, os.X_OK) else (None, f"$DARSHAN_DXT_PARSER={env_tool} is not executable")
    on_path = shutil.which("darshan-dxt-parser")
    if on_path:
        return on_path, "PATH"
    try:
        sys.path.insert(0, str(REPO / "src"))
        from iodiag.collectors.darshan import find_runtime

        rt = find_runtime()
        cand = Path(rt.lib).parent.parent / "bin" / "darshan-dxt-parser"
        if os.access(cand, os.X_OK):
            return str(cand), f"beside the Darshan runtime iodiag found ({rt.found_by})"
        return None, f"no darshan-dxt-parser beside the Darshan runtime at {rt.lib}"
    except Exception as exc:  # noqa: BLE001 - a benchmark row, not a failure
        return None, f"no darshan-util build found (PATH, $DARSHAN_DXT_PARSER, Darshan runtime: {exc})"


def measure(repeat: int, *, ref: bool = True, summary: bool = True, logs: dict | None = None) -> tuple[list, str | None, str]:
    """Time every tool on every benchmark log: ([(label, is_dxt, {tool: (wall, CPU, peak RSS MiB, exit)})],
    darshan-dxt-parser path or None, how it was found or why not).  Minimum over ``repeat`` interleaved rounds.
    Used by main() (the table) and by benchmarks/gate.py (the speed gate of `make bench`)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO / "src")
    # An installed iodiag has its bytecode compiled at install time, as the reference tools (pip-installed
    # into .ref-venv) have theirs; a checkout run with PYTHONDONTWRITEBYTECODE=1 would otherwise compile
    # every module from source on each run (~0.06 s).  __pycache__ is ignored by git.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(REPO / "src")], check=False, stdout=subprocess.DEVNULL)
    env["MPLBACKEND"] = "Agg"
    ref_py = ensure_ref_venv() if ref else None
    dxt_parser, dxt_how = find_dxt_parser()
    # the `iodiag` command as users run it (the console script beside this interpreter, with this checkout first on
    # PYTHONPATH); `python -m iodiag` would add runpy's ~3 ms that no user pays
    script = Path(sys.executable).parent / "iodiag"
    iodiag = [sys.executable, str(script)] if script.is_file() else [sys.executable, "-m", "iodiag"]
    rows = []
    logs = LOGS if logs is None else logs
    with tempfile.TemporaryDirectory() as tmp:
        # warm the caches every tool keeps (iodiag's parsed C declarations, the page cache) before timing
        for label, (rel, _) in logs.items():
            if (CORPUS / rel).exists():
                run_once([*iodiag, "report", str(CORPUS / rel), "--json"], cwd=tmp, env=env)
        for label, (rel, is_dxt) in logs.items():
            log = CORPUS / rel
            if not log.exists():
                print(f"skip {label}: {log} missing", file=sys.stderr)
                continue
            tools = {
                "iodiag report --json": [*iodiag, "report", str(log), "--json"],
                "iodiag report (terminal)": [*iodiag, "report", str(log), "--no-color"],
            }
            if ref_py:
                if summary:
                    tools["darshan summary"] = [str(ref_py), "-m", "darshan", "summary", str(log), "--output", os.path.join(tmp, "s.html")]
                tools["drishti"] = [str(REF_VENV / "bin" / "drishti"), str(log)]
            if is_dxt and dxt_parser:
                tools["darshan-dxt-parser"] = [dxt_parser, str(log)]
            runs: dict[str, list] = {name: [] for name in tools}
            for _ in range(repeat):  # interleaved rounds
                for name, cmd in tools.items():
                    runs[name].append(run_once(cmd, cwd=tmp, env=env))
            res = {name: (min(r[0] for r in rs), min(r[1] for r in rs), max(r[2] for r in rs), rs[-1][3]) for name, rs in runs.items()}
            for name, (wall, cpu, rss, code) in res.items():
                print(f"{label:32} {name:26} wall {wall:6.3f} s  CPU {cpu:6.3f} s  {rss:6.0f} MiB  exit {code}", file=sys.stderr)
            rows.append((label, is_dxt, res))
    return rows, dxt_parser, dxt_how


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--out", type=Path, default=HERE / "results" / "report.md")
    ap.add_argument("--no-ref", action="store_true", help="only time iodiag (and darshan-dxt-parser)")
    ap.add_argument("--no-summary", action="store_true", help="leave out `darshan summary` (5-7 s per run)")
    args = ap.parse_args()
    rows, dxt_parser, dxt_how = measure(args.repeat, ref=not args.no_ref, summary=not args.no_summary)

    lines = [
        f"| log | tool | wall s (min of {args.repeat}) | CPU s (min of {args.repeat}) | peak RSS MiB | exit | tool's wall / iodiag's (`--json`) |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    verdicts = []
    for label, is_dxt, res in rows:
        ours_wall, ours_cpu = res["iodiag report --json"][0], res["iodiag report --json"][1]
        for name, (wall, cpu, rss, code) in res.items():
            ratio = "" if name.startswith("iodiag") else f"{wall / ours_wall:.2f}×"
            lines.append(f"| {label} | {name} | {wall:.3f} | {cpu:.3f} | {rss:.0f} | {code} | {ratio} |")
        if "drishti" in res:
            for ours in ("iodiag report --json", "iodiag report (terminal)"):
                r = res["drishti"][0] / res[ours][0]
                verdicts.append(f"- {label}: `{ours.replace('iodiag ', '')}` {r:.2f}× faster than Drishti (wall; target ≥ 3×: {'met' if r >= 3 else 'NOT met'})")
        if is_dxt:
            if "darshan-dxt-parser" in res:
                d_wall, d_cpu = res["darshan-dxt-parser"][0], res["darshan-dxt-parser"][1]
                for ours in ("iodiag report --json", "iodiag report (terminal)"):
                    rw, rc = res[ours][0] / d_wall, res[ours][1] / d_cpu
                    verdicts.append(f"- {label}: `{ours.replace('iodiag ', '')}` takes {rw:.2f}× darshan-dxt-parser's wall time and "
                                    f"{rc:.2f}× its CPU time (target ≤ 1.5×: wall {'met' if rw <= 1.5 else 'NOT met'}, CPU {'met' if rc <= 1.5 else 'NOT met'})")
            else:
                verdicts.append(f"- {label}: darshan-dxt-parser row skipped: {dxt_how}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    header = (
        f"Command: `{Path(sys.executable).name} benchmarks/bench_report.py --repeat {args.repeat}"
        f"{' --no-summary' if args.no_summary else ''}`  \n"
        f"Machine: {os.cpu_count()} cores; load average at start {os.getloadavg()[0]:.2f}; "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; darshan-dxt-parser: {dxt_parser or 'not found'} ({dxt_how})\n\n"
    )
    text = header + "\n".join(lines) + "\n\n" + "\n".join(verdicts) + "\n"
    args.out.write_text(text)
    # the same numbers for benchmarks/gate.py (run by `make bench` after the benchmarks): not committed (*.raw)
    raw = {"repeat": args.repeat, "dxt_parser": dxt_parser, "dxt_how": dxt_how, "when": time.time(),
           "rows": [{"label": label, "dxt": is_dxt, "tools": {k: list(v) for k, v in res.items()}} for label, is_dxt, res in rows]}
    args.out.with_suffix(".json.raw").write_text(json.dumps(raw, indent=1))
    print(text)


if __name__ == "__main__":
    main()
