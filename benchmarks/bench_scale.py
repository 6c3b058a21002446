"""Report time and peak memory against the size of the trace (issue 17): embedded-collector jobs of 1M, 10M and
50M operations (8 processes of 64-byte pwrite calls, recorded with `iodiag run --collector embedded`) and, when a
Darshan runtime is found, a DXT log of >= 10M segments; plus `iodiag report` against `darshan-dxt-parser` on the
two DXT corpus logs when a darshan-util build is found.

Each measurement is a whole process (start-up and imports included) run alone; peak RSS comes from wait4's
rusage of that process, CPU time is its user + system time (less disturbed by other load than wall time).

Run:  python benchmarks/bench_scale.py [--sizes 1M,10M,50M] [--procs 8] [--repeat 1] [--no-dxt] [--no-speed]
      [--work DIR] [--out benchmarks/results/scale.md]
A 50M-operation job needs ~2.4 GB of disk for its traces and ~1.1 GB of memory to report (see README).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
CORPUS = REPO.parent / "shared" / "darshan-logs"
DXT_LOGS = {
    "600k DXT segments (tight-64B)": "generated/tight-64B-pwrite-pread-dxt-full/"
                                     "0_python_id2035-2035_11-22-83087-1216503035641033982_1.darshan",
    "1024-proc DXT (dxt-explorer)": "dxt-explorer/sample/"
                                    "jeanbez_8_benchmark_parallel_id45195555_8-6-50011-11681279140261054765_1628283217.darshan",
}

WRITER_C = r"""
/* nprocs processes (fork), each making n/nprocs 64-byte pwrite calls on its own file, offsets cycling
   through the first 1 MiB so the data files stay small */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
int main(int argc, char **argv) {
    if (argc != 4) { fprintf(stderr, "usage: %s DIR N NPROCS\n", argv[0]); return 2; }
    long long n = atoll(argv[2]); int np = atoi(argv[3]);
    char buf[64] = {0};
    for (int p = 0; p < np; p++) {
        pid_t pid = fork();
        if (pid == 0) {
            char path[4096]; snprintf(path, sizeof path, "%s/w%d.bin", argv[1], p);
            int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
            if (fd < 0) _exit(1);
            long long mine = n / np + (p < n % np);
            for (long long i = 0; i < mine; i++)
                if (pwrite(fd, buf, 64, (i % 16384) * 64) != 64) _exit(1);
            close(fd);
            _exit(0);
        }
    }
    int status, bad = 0;
    while (wait(&status) > 0) bad |= !WIFEXITED(status) || WEXITSTATUS(status);
    return bad;
}
"""


def parse_size(text: str) -> int:
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([kKmM]?)", text.strip())
    if not m:
        raise ValueError(f"{text!r}: give a count such as 1M, 500k or 2000000")
    return int(float(m.group(1)) * {"": 1, "k": 1e3, "K": 1e3, "m": 1e6, "M": 1e6}[m.group(2)])


def iodiag_env(store: Path | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO / "src") + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["MPLBACKEND"] = "Agg"
    if store is not None:
        env["IODIAG_HOME"] = str(store)
    return env


def build_writer(work: Path) -> Path:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise RuntimeError("no C compiler (cc/gcc): the writer workload cannot be built")
    src, exe = work / "scale_writer.c", work / "scale_writer"
    src.write_text(WRITER_C)
    subprocess.run([cc, "-O2", "-o", str(exe), str(src)], check=True)
    return exe


def measure(cmd: list[str], *, env: dict[str, str], cwd: str | None = None, stdout=subprocess.DEVNULL) -> dict:
    """One whole process: wall s, CPU s (user + system), peak RSS MiB (wait4), exit code."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=stdout, stderr=subprocess.PIPE)
    err = proc.stderr.read() if proc.stderr else b""
    _, status, ru = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    return {"wall_s": wall, "cpu_s": ru.ru_utime + ru.ru_stime, "rss_mib": ru.ru_maxrss / 1024,
            "exit": os.waitstatus_to_exitcode(status), "stderr": err.decode(errors="replace")[-2000:]}


def make_embedded_job(n_ops: int, nprocs: int, *, work: Path, store: Path, writer: Path) -> str:
    """Record a job of n_ops 64-byte writes over nprocs processes with the embedded collector; its job id."""
    out = work / f"data-{n_ops}"
    out.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "iodiag", "run", "--collector", "embedded", "--no-dask", "--name", f"scale-{n_ops}",
           "--", str(writer), str(out), str(n_ops), str(nprocs)]
    proc = subprocess.run(cmd, env=iodiag_env(store), capture_output=True, text=True)
    shutil.rmtree(out, ignore_errors=True)
    m = re.search(r"iodiag: job (\S+) \(exit 0", proc.stderr)
    if proc.returncode != 0 or not m:
        raise RuntimeError(f"recording the {n_ops:,}-op job failed: {proc.stderr[-500:]}")
    return m.group(1)


def report_rows(target: str, *, env: dict[str, str], work: Path, repeat: int, label: str, n_ops: int,
                compare: bool = True) -> list[dict]:
    """report --json, terminal report, HTML, and compare (the job against itself: two profiles of this size)."""
    cmds = {
        "report --json": [sys.executable, "-m", "iodiag", "report", target, "--json"],
        "report (terminal)": [sys.executable, "-m", "iodiag", "report", target, "--no-color"],
        "report --html": [sys.executable, "-m", "iodiag", "report", target, "--html-path", str(work / "r.html")],
    }
    if compare:
        cmds["compare (job vs itself)"] = [sys.executable, "-m", "iodiag", "compare", target, target, "--json"]
    rows = []
    for name, cmd in cmds.items():
        runs = [measure(cmd, env=env, cwd=str(work)) for _ in range(repeat)]
        best = min(runs, key=lambda r: r["cpu_s"])
        best["rss_mib"] = max(r["rss_mib"] for r in runs)
        rows.append({"case": label, "ops": n_ops, "command": name, **best})
        print(f"{label:34} {name:26} cpu {best['cpu_s']:7.2f} s  wall {best['wall_s']:7.2f} s  "
              f"{best['rss_mib']:8.0f} MiB  exit {best['exit']}", file=sys.stderr)
    return rows


def find_darshan_bin(name: str) -> Path | None:
    for cand in (os.environ.get("IODIAG_DARSHAN_BIN"), shutil.which(name) and str(Path(shutil.which(name)).parent),
                 "/opt/darshan-runtime/bin"):
        if cand and (Path(cand) / name).is_file():
            return Path(cand) / name
    return None


def make_dxt_log(n_ops: int, *, work: Path, writer: Path, procs: int = 1) -> tuple[Path | None, str]:
    """A DXT job of n_ops writes over ``procs`` processes made with a Darshan runtime found as users find it:
    (its log for one process, else its folder of logs (one per process), or None and why not)."""
    sys.path.insert(0, str(REPO / "src"))
    from iodiag.collectors.darshan import REMOVE_VARS, DarshanSettings, darshan_environment, find_runtime
    from iodiag.errors import IodiagError

    try:
        rt = find_runtime()
    except IodiagError as exc:
        return None, f"no Darshan runtime found ({exc})"
    job = work / f"dxt-job-{procs}"
    env = {k: v for k, v in os.environ.items() if k not in REMOVE_VARS}
    # DXT keeps 32-40 bytes per segment in memory: give it room for every segment
    env.update(darshan_environment(rt, job_dir=job, darshan_jobid=17, dxt=True,
                                   settings=DarshanSettings(dxt_mib=max(64, n_ops // procs * 48 // (1 << 20) + 64))))
    data = work / "dxt-data"
    data.mkdir(exist_ok=True)
    subprocess.run([str(writer), str(data), str(n_ops), str(procs)], env=env, check=True)
    shutil.rmtree(data, ignore_errors=True)
    logs = sorted((job / "logs").rglob("*.darshan"), key=lambda p: p.stat().st_size)
    if not logs:
        return None, f"the Darshan runtime {rt.lib} left no log"
    return (logs[-1] if procs == 1 else job / "logs"), ""


def dxt_readable(log: Path, env: dict[str, str], work: Path) -> tuple[bool, str]:
    """Whether iodiag (pydarshan's darshan-util) decodes the log's DXT segments; the reason when not."""
    out = work / "dxt.json"
    with out.open("w") as fh:
        r = measure([sys.executable, "-m", "iodiag", "report", str(log), "--json"], env=env, stdout=fh)
    try:
        rep = json.loads(out.read_text())
    except ValueError:
        return False, f"iodiag report failed: {r['stderr'][-300:]}"
    lost = [e for e in rep.get("errors", []) if e.get("module", "").startswith("DXT")]
    if lost:
        ver = ""
        parser = find_darshan_bin("darshan-parser")
        if parser:
            head = subprocess.run([str(parser), "--show-incomplete", str(log)], capture_output=True, text=True).stdout
            m = re.search(r"# DXT_POSIX module: .*ver=(\d+)", head)
            ver = f" (the log's DXT_POSIX module is format version {m.group(1)})" if m else ""
        return False, f"pydarshan's darshan-util does not decode the DXT records{ver}: {lost[0].get('cause')}"
    return True, ""


def speed_rows(*, env: dict[str, str], work: Path, repeat: int) -> tuple[list[dict], str]:
    parser = find_darshan_bin("darshan-dxt-parser")
    rows = []
    for label, rel in DXT_LOGS.items():
        log = CORPUS / rel
        if not log.is_file():
            print(f"skip {label}: {log} missing", file=sys.stderr)
            continue
        cmds = {"iodiag report --json": [sys.executable, "-m", "iodiag", "report", str(log), "--json"],
                "iodiag report (terminal)": [sys.executable, "-m", "iodiag", "report", str(log), "--no-color"]}
        if parser:
            cmds["darshan-dxt-parser"] = [str(parser), str(log)]
        res = {name: [] for name in cmds}
        for _ in range(repeat):  # interleaved, so that a burst of load hits every tool alike
            for name, cmd in cmds.items():
                res[name].append(measure(cmd, env=env, cwd=str(work)))
        for name, runs in res.items():
            rows.append({"case": label, "command": name,
                         "wall_s": min(r["wall_s"] for r in runs), "cpu_s": min(r["cpu_s"] for r in runs),
                         "rss_mib": max(r["rss_mib"] for r in runs), "exit": runs[0]["exit"]})
    return rows, ("" if parser else "darshan-dxt-parser not found (PATH, $IODIAG_DARSHAN_BIN, /opt/darshan-runtime/bin)")


def table(rows: list[dict]) -> str:
    lines = ["| case | operations | command | CPU s | wall s | peak RSS MiB | bytes / op | µs CPU / op | exit |",
             "|---|---:|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        n = r.get("ops") or 0
        per_b = f"{r['rss_mib'] * 2**20 / n:.0f}" if n else ""
        per_t = f"{r['cpu_s'] * 1e6 / n:.2f}" if n else ""
        lines.append(f"| {r['case']} | {n:,} | {r['command']} | {r['cpu_s']:.2f} | {r['wall_s']:.2f} | "
                     f"{r['rss_mib']:.0f} | {per_b} | {per_t} | {r['exit']} |")
    return "\n".join(lines)


def speed_table(rows: list[dict]) -> str:
    lines = ["| log | tool | CPU s (min) | wall s (min) | peak RSS MiB | iodiag --json / dxt-parser (CPU) |",
             "|---|---|---:|---:|---:|---:|"]
    by = {(r["case"], r["command"]): r for r in rows}
    for r in rows:
        ratio = ""
        ref = by.get((r["case"], "darshan-dxt-parser"))
        if r["command"] == "iodiag report --json" and ref and ref["cpu_s"] > 0:
            ratio = f"{r['cpu_s'] / ref['cpu_s']:.2f}×"
        lines.append(f"| {r['case']} | {r['command']} | {r['cpu_s']:.2f} | {r['wall_s']:.2f} | {r['rss_mib']:.0f} | {ratio} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1M,10M", help="embedded job sizes in operations (e.g. 1M,10M,50M)")
    ap.add_argument("--procs", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--dxt-ops", default="10.5M", help="segments of the DXT log made with a Darshan runtime")
    ap.add_argument("--dxt-procs", default="1,8", help="processes sharing them, one DXT job each (e.g. 1,8)")
    ap.add_argument("--no-dxt", action="store_true")
    ap.add_argument("--no-speed", action="store_true")
    ap.add_argument("--no-compare", action="store_true", help="skip compare (it loads the job twice)")
    ap.add_argument("--work", type=Path, help="scratch folder (default: a temporary one, removed at the end)")
    ap.add_argument("--out", type=Path, default=HERE / "results" / "scale.md")
    a = ap.parse_args(argv)

    subprocess.run([sys.executable, "-m", "compileall", "-q", str(REPO / "src")], check=False, stdout=subprocess.DEVNULL)
    tmp = None if a.work else tempfile.mkdtemp(prefix="iodiag-scale-")
    work = a.work or Path(tmp)
    work.mkdir(parents=True, exist_ok=True)
    load0 = os.getloadavg()[0]
    notes: list[str] = []
    rows: list[dict] = []
    try:
        writer = build_writer(work)
        store = work / "store"
        env = iodiag_env(store)
        for size in [parse_size(s) for s in a.sizes.split(",") if s.strip()]:
            job = make_embedded_job(size, a.procs, work=work, store=store, writer=writer)
            label = f"embedded, {a.procs} process{'es' if a.procs != 1 else ''}"
            rows += report_rows(job, env=env, work=work, repeat=a.repeat, label=label,
                                n_ops=size, compare=not a.no_compare)
            shutil.rmtree(store / "jobs" / job, ignore_errors=True)  # 48 bytes per operation on disk
        if not a.no_dxt:
            n = parse_size(a.dxt_ops)
            for procs in [int(p) for p in a.dxt_procs.split(",") if p.strip()]:
                label = f"Darshan DXT, {procs} process{'es' if procs != 1 else ''}"
                log, why = make_dxt_log(n, work=work, writer=writer, procs=procs)
                if log is not None:
                    ok, why = dxt_readable(log, env, work)
                    if ok:
                        rows += report_rows(str(log), env=env, work=work, repeat=a.repeat, label=label, n_ops=n,
                                            compare=not a.no_compare)
                        parser = find_darshan_bin("darshan-dxt-parser")
                        if parser and procs == 1:  # the C reference on the same log: decode and print every segment
                            runs = [measure([str(parser), str(log)], env=env, cwd=str(work)) for _ in range(a.repeat)]
                            best = min(runs, key=lambda r: r["cpu_s"])
                            rows.append({"case": label, "ops": n, "command": "darshan-dxt-parser (C)", **best})
                if why:
                    notes.append(f"DXT job of {n:,} segments over {procs} process(es): skipped — {why}")
        speed, why = ([], "") if a.no_speed else speed_rows(env=env, work=work, repeat=max(a.repeat, 3))
        if why:
            notes.append(f"speed against darshan-dxt-parser: {why}")
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    head = (f"`python benchmarks/bench_scale.py --sizes {a.sizes} --procs {a.procs} --repeat {a.repeat} "
            f"--dxt-ops {a.dxt_ops} --dxt-procs {a.dxt_procs}` — "
            f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} cores, load average "
            f"{load0:.1f} at start, {os.getloadavg()[0]:.1f} at the end\n\n")
    text = head + table(rows) + "\n"
    if speed:
        text += "\n" + speed_table(speed) + "\n"
    if notes:
        text += "\n" + "\n".join(f"- {n}" for n in notes) + "\n"
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
