"""Diagnosis vs load time on the largest corpus log (1024-process DXT, dxt-explorer sample).

    python benchmarks/bench_diagnose.py [LOG] [--repeat 5]
    python benchmarks/bench_diagnose.py --corpus [--repeat 3]

Prints load (isolated reader) and diagnose (all detectors) times, best and
median of N runs, and the ratio (load + diagnose) / load.  Target: <= 1.5.

``--corpus`` measures what site ingest pays per log on the corpus mix (readable
logs <= 600 KB, counters-only modules as ``Config().site.modules``): CPU time
(process_time) of ``diagnose`` and of the site feature row (job_meta +
extract_features + finding_columns), mean per log over the repeats, and each
detector's share when run on its own (in diagnose order: the first detector that
needs a per-profile table pays for it).  Targets (issue 9): diagnose <= 0.9 ms,
features <= 0.35 ms.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from iodiag.analyzers.detectors import DETECTORS, diagnose  # noqa: E402
from iodiag.analyzers.load import load_job  # noqa: E402
from iodiag.analyzers import metrics  # noqa: E402

DEFAULT = next(iter(sorted((REPO.parent / "shared/darshan-logs/dxt-explorer/sample").glob("*.darshan"))), None)


def corpus(repeat: int) -> int:
    sys.path.insert(0, str(REPO / "tests"))
    from site_archive import corpus_logs

    from iodiag.analyzers.load import build_profile
    from iodiag.analyzers.readers.darshan import read_log
    from iodiag.analyzers.readers.isolate import LogResult
    from iodiag.config import Config
    from iodiag.site.features import extract_features, finding_columns, job_meta

    cfg = Config()
    datas = []
    for p in corpus_logs():
        try:
            datas.append(read_log(str(p), cfg.site.modules, names=True))
        except Exception:  # noqa: BLE001 - damaged corpus logs are not what is measured here
            pass
    clock = time.process_time
    diag = feat = 0.0
    per = {d.__name__: 0.0 for d in DETECTORS}
    for _ in range(repeat):
        for d in datas:  # whole diagnose + features, fresh profile (no cached tables)
            prof = build_profile([LogResult(path="x", data=d)])
            t0 = clock()
            found = diagnose(prof, cfg)
            t1 = clock()
            job_meta(prof), extract_features(prof), finding_columns(found)
            t2 = clock()
            diag, feat = diag + t1 - t0, feat + t2 - t1
        for d in datas:  # each detector on its own, in diagnose order
            prof = build_profile([LogResult(path="x", data=d)])
            for det in DETECTORS:
                t0 = clock()
                det(prof, cfg)
                per[det.__name__] += clock() - t0
    n = repeat * len(datas)
    print(f"corpus mix: {len(datas)} logs, {repeat} repeats, CPU ms per log (mean)")
    print(f"diagnose       {diag / n * 1e3:7.3f} ms   (target <= 0.9)")
    print(f"site features  {feat / n * 1e3:7.3f} ms   (target <= 0.35)")
    for name, t in sorted(per.items(), key=lambda kv: -kv[1]):
        print(f"  {name:32s} {t / n * 1e3:7.3f} ms")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("log", nargs="?", default=str(DEFAULT) if DEFAULT else None)
    ap.add_argument("--repeat", type=int, default=None)
    ap.add_argument("--corpus", action="store_true", help="per-log diagnose and site-feature CPU time on the corpus mix")
    a = ap.parse_args()
    if a.corpus:
        return corpus(a.repeat or 3)
    a.repeat = a.repeat or 5
    if not a.log:
        print("no log given and the dxt-explorer sample is not in ../shared", file=sys.stderr)
        return 2
    loads, diags, per = [], [], {d.__name__: [] for d in DETECTORS}
    for _ in range(a.repeat):
        t = time.perf_counter()
        prof = load_job([a.log])
        loads.append(time.perf_counter() - t)
        t = time.perf_counter()
        findings = diagnose(prof)
        diags.append(time.perf_counter() - t)
        prof.__dict__.pop("_derived", None)
        for d in DETECTORS:  # per detector, metrics already cached
            metrics.metrics_of(prof)
            t = time.perf_counter()
            d(prof, __import__("iodiag.config", fromlist=["Config"]).Config())
            per[d.__name__].append(time.perf_counter() - t)
        prof.__dict__.pop("_derived", None)
    lo, dg = statistics.median(loads), statistics.median(diags)
    print(f"log: {a.log}")
    print(f"processes {prof.job.nprocs}, DXT segments {len(prof.ops):,}, findings {[f.id for f in findings]}")
    print(f"load      best {min(loads):.3f} s  median {lo:.3f} s")
    print(f"diagnose  best {min(diags):.3f} s  median {dg:.3f} s")
    print(f"(load + diagnose) / load = {(lo + dg) / lo:.2f}  (target <= 1.5)")
    for name, ts in sorted(per.items(), key=lambda kv: -statistics.median(kv[1]))[:5]:
        print(f"  {name:32s} {statistics.median(ts) * 1000:7.1f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
