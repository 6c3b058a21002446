#!/usr/bin/env python3
"""Measure (job, change) pairs the trained model never saw, to calibrate and validate its predicted gains.

    python scripts/recommender_calibrate.py [--reps 3] [--set 1|2] [--append] [--out src/iodiag/recommend/data/calibration.csv]

Each pair: an iodiag conversion or read workload at an array scale that is not in the training table
(``recommend/data/training.csv``), run with a "before" setting; ``planned_features`` of its results record goes
to the shipped model (``Model.advise``), whose top recommendation is the "after" setting; before and after are
then run ``--reps`` times each, interleaved (B A B A ...), with no collector.  Recorded per pair: the model's
raw predicted speedup and band, and the measured speedups (median before / median after) of the whole command's
wall time, of the workload's own section (conversion: open .. last chunk written; read: the pattern) and of the
part the model was trained on (conversion: the write phase; read: the pattern).  Pairs where the model abstains
or already agrees with the job are listed as skipped, never measured.  Nothing is typed in by hand: every number
in the table comes from a run.  The table's header lines say where and when; ``--append`` adds a batch (its own header line) to the table
instead of replacing it.  ``--set 1`` is the first batch (2026-11-26 09:16, 2 reps); ``--set 2`` the second, at
other array scales, with before settings shaped like docs/recommender-verify.md's case (c): 1-step time chunks
(cut in plev, or whole steps) on 2 Dask workers; ``--set 3`` (conversions only) four more scales, the (c) shape
on 2 and on 1 worker and tiny chunks on 1 worker; ``--set 4`` (conversions only) two more scales, to judge the
forms of the band forward (the (c) shape on 2 and 1 workers, tiny zstd chunks on 2 workers).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from iodiag.recommend.features import planned_features  # noqa: E402
from iodiag.recommend.model import load_model  # noqa: E402

PY = sys.executable
# array scales absent from the training table (1024x2x46x90, 512x4x46x90, 96x8x91x180, 48x19x91x180, 24x19x181x360)
CONVERT = {
    "c300": (300, 4, 46, 90),
    "c730": (730, 2, 46, 90),
    "c64": (64, 10, 91, 180),
    "c36": (36, 19, 91, 180),
}
# before settings of a conversion: (--chunk-mb or --chunks, compressor, workers)
CONVERT_BEFORE = [
    (("--chunk-mb", "0.05"), "none", 2),
    (("--chunk-mb", "0.05"), "zstd", 1),
    (("--chunk-mb", "50"), "none", 2),
    (("--chunk-mb", "0.5"), "none", 1),
]
# the second batch: scales absent from the training table and from the first batch
CONVERT2 = {
    "c200": (200, 10, 90, 180),
    "c500": (500, 2, 64, 128),
    "c120": (120, 8, 72, 144),
    "c90": (90, 19, 73, 144),
}
CONVERT_BEFORE2 = [
    (lambda s: ("--chunks", ",".join(map(str, (1, 1, *s[2:])))), "none", 2),  # docs' (c): 1 step, 1 level
    (lambda s: ("--chunks", ",".join(map(str, (1, *s[1:])))), "none", 2),  # one whole step per chunk
    (lambda s: ("--chunk-mb", "0.05"), "zstd", 2),
]
READ2 = {"r200": (200, 10, 90, 180), "r500": (500, 2, 64, 128)}
# the third batch (chosen before it was run, to judge the band of the first two forward): four more scales, the
# docs' (c) shape on 2 and on 1 worker, and tiny chunks on 1 worker
CONVERT3 = {
    "c150": (150, 6, 80, 160),
    "c400": (400, 3, 60, 120),
    "c60": (60, 12, 96, 192),
    "c250": (250, 5, 72, 144),
}
CONVERT_BEFORE3 = [
    (lambda s: ("--chunks", ",".join(map(str, (1, 1, *s[2:])))), "none", 2),
    (lambda s: ("--chunks", ",".join(map(str, (1, 1, *s[2:])))), "none", 1),
    (("--chunk-mb", "0.05"), "none", 1),
]
# the fourth batch (chosen after the residual forms of the first three were compared, before it ran, to judge them
# forward on pairs none of them saw): two more scales; the (c) shape on 2 workers (the change drops one) and on 1
# (it does not), and tiny zstd chunks on 2 workers (the shape the Amdahl band under-predicted most)
CONVERT4 = {
    "c180": (180, 7, 84, 168),
    "c320": (320, 4, 70, 140),
}
CONVERT_BEFORE4 = [
    (lambda s: ("--chunks", ",".join(map(str, (1, 1, *s[2:])))), "none", 2),
    (lambda s: ("--chunks", ",".join(map(str, (1, 1, *s[2:])))), "none", 1),
    (("--chunk-mb", "0.05"), "zstd", 2),
]
READ = {"r600": (600, 2, 46, 90), "r64": (64, 10, 91, 180), "r36": (36, 19, 91, 180)}
# before store layouts of a read: (chunks as a function of the shape, compressor, zarr format), patterns
READ_BEFORE = [
    (lambda s: (1, *s[1:]), "none", 2, "whole"),
    (lambda s: (s[0], s[1], max(1, s[2] // 8), max(1, s[3] // 8)), "zstd", 3, "slice"),
    (lambda s: (1, *s[1:]), "zstd", 3, "timeseries"),
]


def _run(args: list[str], cwd: Path, env: dict) -> tuple[float, dict]:
    t0 = time.perf_counter()
    r = subprocess.run([PY, *args], cwd=cwd, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    if r.returncode:
        raise RuntimeError(f"{' '.join(args)} failed:\n{r.stderr[-1500:]}")
    return wall, {}


def _flags(cmd: list[str]) -> str:
    """The setting flags of a conversion command, in a fixed order (paths and the results record left out)."""
    keys = ("--chunk-mb", "--chunks", "--compressor", "--workers", "--threads")
    return " ".join(f"{k} {cmd[cmd.index(k) + 1]}" for k in keys if k in cmd)


def _record(path: Path) -> dict:
    return json.loads(path.read_text())


def _apply(before: list[str], changes) -> list[str]:
    """The before command's flags with the recommendation's arg changes applied (a --chunks change replaces a
    --chunk-mb and the reverse: the workload takes one of them)."""
    out = list(before)
    for c in changes:
        if c.kind != "arg":
            continue
        drop = {c.name} | ({"--chunk-mb", "--chunks"} if c.name in ("--chunk-mb", "--chunks") else set())
        i = 0
        while i < len(out):
            if out[i] in drop:
                del out[i:i + 2]
            else:
                i += 1
        out += [c.name, str(c.value)]
    return out


def _timed(cmd_a: list[str], cmd_b: list[str], res: Path, reps: int, cwd: Path, env: dict, key) -> dict:
    walls = {"a": [], "b": []}
    secs = {"a": [], "b": []}
    model = {"a": [], "b": []}
    for _ in range(reps):
        for side, cmd in (("a", cmd_a), ("b", cmd_b)):
            w, _ = _run(cmd, cwd, env)
            rec = _record(res)
            s, m = key(rec)
            walls[side].append(w)
            secs[side].append(s)
            model[side].append(m)
    med = {k: {s: statistics.median(v[s]) for s in v} for k, v in (("wall", walls), ("section", secs), ("model", model))}
    return {f"{k}_before_s": med[k]["a"] for k in med} | {f"{k}_after_s": med[k]["b"] for k in med}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--set", type=int, default=3, choices=(1, 2, 3, 4), help="which batch of scales and settings")
    ap.add_argument("--append", action="store_true", help="add the pairs to the table instead of replacing it")
    ap.add_argument("--out", default=str(REPO / "src" / "iodiag" / "recommend" / "data" / "calibration.csv"))
    ap.add_argument("--only", default="convert,read")
    ap.add_argument("--work", default=None)
    a = ap.parse_args()
    work = Path(a.work or tempfile.mkdtemp(prefix="iodiag-calibrate-"))
    work.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    env.pop("IODIAG_JOB_DIR", None)
    model = load_model()
    rows, started = [], time.time()
    loads = []

    def note(row: dict) -> None:
        rows.append(row)
        print(json.dumps(row), flush=True)

    convert, convert_before, read = {1: (CONVERT, CONVERT_BEFORE, READ), 2: (CONVERT2, CONVERT_BEFORE2, READ2),
                                     3: (CONVERT3, CONVERT_BEFORE3, {}), 4: (CONVERT4, CONVERT_BEFORE4, {})}[a.set]
    if "convert" in a.only:
        for name, (t, p, y, x) in convert.items():
            src = work / f"{name}.nc"
            _run(["-m", "iodiag.workloads.gen", "--out", str(src), "--time", str(t), "--plev", str(p), "--lat", str(y),
                  "--lon", str(x)], work, env)
            for size, comp, workers in convert_before:
                size = size((t, p, y, x)) if callable(size) else size
                res = work / f"{name}.json"
                before = ["-m", "iodiag.workloads.convert", "--src", str(src), "--dst", str(work / f"{name}.zarr"),
                          *size, "--compressor", comp, "--workers", str(workers), "--threads", "1", "--results", str(res)]
                _run(before, work, env)  # the job the model advises on (and a warm-up)
                feats = planned_features(_record(res))
                rec = model.advise(feats)
                row = {"pair": f"{name}:{' '.join(size)}/{comp}/{workers}w", "workload": "convert",
                       "pattern": "conversion", "shape": "x".join(map(str, (t, p, y, x))), "before": _flags(before)}
                if rec.abstain or not rec.changes:
                    note({**row, "skipped": rec.abstain or "the model keeps the job's setting"})
                    continue
                after = _apply(before, rec.changes)
                row["after"] = _flags(after)
                m = _timed(before, after, res, a.reps, work, env,
                           key=lambda r: (float(r["timings_s"]["total"]), float(r["timings_s"]["write"])))
                loads.append(os.getloadavg()[0])
                note({**row, **m, "predicted": rec.expected_speedup, "predicted_low": rec.speedup_low,
                      "predicted_high": rec.speedup_high, "load1": round(loads[-1], 2)})
    if "read" in a.only:
        for name, shape in read.items():
            for chunks_of, comp, fmt, pattern in READ_BEFORE:
                ch = chunks_of(shape)
                store = work / f"{name}-{'-'.join(map(str, ch))}-{comp}-v{fmt}.zarr"
                gen = ["-m", "iodiag.workloads.gen", "--out", str(store), "--format", f"zarr{fmt}", "--compressor", comp,
                       "--chunks", ",".join(map(str, ch)), "--time", str(shape[0]), "--plev", str(shape[1]),
                       "--lat", str(shape[2]), "--lon", str(shape[3])]
                _run(gen, work, env)
                res = work / f"{name}.read.json"
                before = ["-m", "iodiag.workloads.read", "--path", str(store), "--patterns", pattern, "--repeat", "1",
                          "--results", str(res)]
                _run(before, work, env)
                rec = model.advise(planned_features(_record(res), pattern=pattern))
                row = {"pair": f"{name}:{pattern}:{','.join(map(str, ch))}/{comp}/v{fmt}", "workload": "read",
                       "pattern": pattern, "shape": "x".join(map(str, shape)),
                       "before": f"store chunks {','.join(map(str, ch))} {comp} v{fmt}"}
                if rec.abstain or not rec.changes:
                    note({**row, "skipped": rec.abstain or "the model keeps the job's setting"})
                    continue
                new = tuple(rec.settings["chunks"])
                after_store = work / f"{name}-after-{'-'.join(map(str, new))}.zarr"
                _run(["-m", "iodiag.workloads.gen", "--out", str(after_store), "--format",
                      f"zarr{int(rec.settings['zarr_format'])}", "--compressor", str(rec.settings["compressor"]),
                      "--chunks", ",".join(map(str, new)), "--time", str(shape[0]), "--plev", str(shape[1]),
                      "--lat", str(shape[2]), "--lon", str(shape[3])], work, env)  # prepared once, not timed
                after = [before[0], before[1], "--path", str(after_store), *before[4:]]
                row["after"] = (f"store chunks {','.join(map(str, new))} {rec.settings['compressor']} "
                                f"v{int(rec.settings['zarr_format'])}")
                m = _timed(before, after, res, a.reps, work, env,
                           key=lambda r, p=pattern: (float(r["patterns"][p]["total_s"]),) * 2)
                loads.append(os.getloadavg()[0])
                note({**row, **m, "predicted": rec.expected_speedup, "predicted_low": rec.speedup_low,
                      "predicted_high": rec.speedup_high, "load1": round(loads[-1], 2)})
    cols = ["pair", "workload", "pattern", "shape", "before", "after", "predicted", "predicted_low", "predicted_high",
            "wall_before_s", "wall_after_s", "section_before_s", "section_after_s", "model_before_s", "model_after_s",
            "load1", "skipped"]
    import hashlib

    sha = hashlib.sha256((REPO / "src" / "iodiag" / "recommend" / "data" / "model.json").read_bytes()).hexdigest()[:12]
    out = Path(a.out)
    append = a.append and out.exists()
    with out.open("a" if append else "w", newline="") as fh:
        fh.write(f"# {'then ' if append else ''}measured by scripts/recommender_calibrate.py --reps {a.reps} --set {a.set} with the shipped model (model.json "
                 f"sha256 {sha}…) on "
                 f"{platform.node()} ({os.cpu_count()} cores, {platform.platform()}), "
                 f"{datetime.fromtimestamp(started, timezone.utc):%Y-%m-%d %H:%M}-"
                 f"{datetime.now(timezone.utc):%H:%M} UTC, 1-min load {min(loads, default=0):.1f}-"
                 f"{max(loads, default=0):.1f}; median of {a.reps} interleaved runs per side\n")
        w = csv.DictWriter(fh, fieldnames=cols, extrasaction="ignore")
        if not append:
            w.writeheader()
        for r in rows:
            w.writerow({k: (round(v, 4) if isinstance(v, float) else v) for k, v in r.items()})
    print(f"{sum('skipped' not in r for r in rows)} pairs measured, {sum('skipped' in r for r in rows)} skipped -> {out}; "
          f"{time.time() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
