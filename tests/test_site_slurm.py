"""`site ingest --cluster slurm`: Dask workers as jobs of a real single-node Slurm (Debian's slurm-wlm + munge,
started here as root, see tests/slurm/cluster.py), started, used and cancelled by the ingest; the table equals
the local ingest's cell for cell.  Skips with the reason when Slurm cannot be started here."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from site_archive import CORPUS, build_archive  # noqa: E402
from site_rows import diff_rows, site_rows  # noqa: E402
from test_sweep_slurm import slurm  # noqa: E402,F401  (the module-scoped local Slurm)

from iodiag.site import ingest_archive, load_site  # noqa: E402
from iodiag.site.ingest import jobqueue_options  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
pytestmark = [pytest.mark.slurm, pytest.mark.slow,
              pytest.mark.skipif(not CORPUS.is_dir(), reason=f"shared corpus not found at {CORPUS}")]


def _queue(slurm) -> list[str]:
    return slurm.run("squeue", "-h", "-o", "%i %j %T").stdout.split("\n")


def test_ingest_on_slurm_workers_equals_local(slurm, tmp_path, monkeypatch):
    pytest.importorskip("dask_jobqueue")
    monkeypatch.setenv("SLURM_CONF", str(slurm.conf))
    arc = build_archive(tmp_path / "archive", 400, logs_per_day=50, max_bytes=None)  # the corpus mix, 1% damaged
    local = ingest_archive(arc.root, tmp_path / "local.parquet", workers=0)
    logs = tmp_path / "worker-logs"
    s = ingest_archive(arc.root, tmp_path / "slurm.parquet",
                       cluster="slurm", cluster_options=jobqueue_options(jobs=2, memory="2GiB", walltime="00:10:00",
                                                                         log_directory=str(logs)))
    assert s.workers == 2 and s.logs_read == local.logs_read == 400
    assert (s.jobs, s.errors) == (local.jobs, local.errors) and s.errors >= len(arc.damaged)
    diff = diff_rows(site_rows(tmp_path / "local.parquet", arc.root), site_rows(tmp_path / "slurm.parquet", arc.root))
    assert not diff, diff
    # the workers were Slurm jobs (their logs say they registered) and are gone once the ingest returned
    outs = list(logs.glob("*.err"))
    assert len(outs) == 2 and all("Registered to" in p.read_text() for p in outs)
    deadline = time.monotonic() + 30
    while any(line.strip() for line in _queue(slurm)) and time.monotonic() < deadline:
        time.sleep(1)
    assert not any(line.strip() for line in _queue(slurm)), _queue(slurm)
    assert len(load_site(tmp_path / "slurm.parquet")["jobs"]) == local.jobs


def test_refused_worker_job_is_one_clear_line(slurm, tmp_path):
    pytest.importorskip("dask_jobqueue")
    env = {**slurm.env(), "PYTHONPATH": str(REPO / "src")}
    r = subprocess.run([sys.executable, "-m", "iodiag", "site", "ingest", str(CORPUS / "pytokio"), "--out",
                        str(tmp_path / "s.parquet"), "--cluster", "slurm", "--queue", "no-such-partition"],
                       env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr
    assert "sbatch refused" in lines[0] and "partition" in lines[0] and "--queue" in lines[0]
    assert not any(line.strip() for line in _queue(slurm))
