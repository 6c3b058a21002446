"""A weak-scaling sweep run as iodiag jobs: `sweep analyze --mode weak` diagnoses the runs' I/O."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

SPEC = """
[sweep]
name = "weak"
workload = "convert"
repetitions = 1
launcher = "iodiag-run"
collector = "embedded"

[vars]
data = "{data}"

[params]
src = "{{data}}/cube-w{{workers}}.nc"
dst = "{{run_dir}}/cube.zarr"
chunks = "4,64,64"
threads = 1
cluster = "local"
compressor = "none"

[grid]
workers = [1, 2]

[prepare]
workload = "gen"
params = {{ kind = "cube", nx = 64, ny = 64, nz_per_worker = 16, workers = "{{workers}}", out = "{{data}}/cube-w{{workers}}.nc" }}
"""


def _cli(*args, cwd, env):
    return subprocess.run([sys.executable, "-m", "iodiag", *args], env=env, capture_output=True, text=True,
                          cwd=cwd, timeout=900)


def test_weak_sweep_runs_are_jobs_and_are_diagnosed(tmp_path):
    try:
        from iodiag.collectors import embedded

        embedded.build()
    except Exception as exc:  # noqa: BLE001
        pytest.skip(f"the embedded collector cannot be built here: {exc}")
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "IODIAG_HOME": str(tmp_path / "store")}
    spec = tmp_path / "weak.toml"
    spec.write_text(SPEC.format(data=tmp_path / "data"))
    sweep = tmp_path / "sw"
    run = _cli("sweep", "run", str(spec), "--local", "--dir", str(sweep), "--json", cwd=tmp_path, env=env)
    assert run.returncode == 0, run.stderr[-3000:]
    p = _cli("sweep", "analyze", str(sweep), "--mode", "weak", "--no-plots", "--json", cwd=tmp_path, env=env)
    assert p.returncode == 0, p.stderr[-3000:]
    out = json.loads(p.stdout)
    # both runs were recorded as iodiag jobs and loaded for the I/O diagnosis of the scaling
    assert out["diagnosed_jobs"] == 2
    assert isinstance(out["findings"], list)
    assert all(f["id"] == "weak-scaling-loss" for f in out["findings"])
    jobs = _cli("jobs", "--json", cwd=tmp_path, env=env)
    assert len([j for j in json.loads(jobs.stdout)["jobs"] if "convert" in j["id"]]) == 2
