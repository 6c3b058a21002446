"""Memory of a site ingest does not grow with the archive: the driver writes parquet parts of
[site] part_rows jobs and keeps a bounded number of tasks in flight; each worker holds one task's
rows and each reader one job's decoded logs.  Measured in fresh processes (tests/site_memory.py),
on archives of the corpus mix (the 2,048-rank logs included) of 1,000 and 5,000 logs.

Measured when this test was written (2-core VM, Dask LocalCluster of 2 workers, tasks of 100 logs,
parts of 1,000 jobs): driver 180 -> 181 MiB, workers 149 -> 149 MiB, readers 64 -> 67 MiB for
1,000 -> 6,000 logs; benchmarks/README.md has 10k and 100k (driver 197-201 and 216 MiB)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from site_archive import CORPUS, build_archive

HERE = Path(__file__).resolve().parent
pytestmark = [pytest.mark.slow, pytest.mark.skipif(not CORPUS.is_dir(), reason=f"shared corpus not found at {CORPUS}"),
              pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads VmHWM from /proc")]


def _peak(tmp_path: Path, n_logs: int) -> dict:
    arc = build_archive(tmp_path / f"archive-{n_logs}", n_logs, logs_per_day=100, max_bytes=None)
    env = {**os.environ, "PYTHONPATH": str(HERE.parent / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    p = subprocess.run([sys.executable, str(HERE / "site_memory.py"), str(arc.root), str(tmp_path / f"site-{n_logs}.parquet"),
                        "2", "100", "1000"], capture_output=True, text=True, env=env, timeout=900)
    assert p.returncode == 0, p.stderr[-2000:]
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert out["logs"] == n_logs and out["tasks"] >= n_logs // 100
    return out


def test_ingest_memory_does_not_grow_with_the_archive(tmp_path):
    small, large = _peak(tmp_path, 1000), _peak(tmp_path, 5000)
    for proc in ("driver_mib", "worker_mib", "reader_mib"):
        assert small[proc] > 0
        # 5x the logs, 5x the parquet parts: the same high-water mark within noise (30 MiB)
        assert large[proc] - small[proc] < 30, (proc, small, large)
