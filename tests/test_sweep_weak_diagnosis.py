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
    # the loss of 2 workers against 1, split into named components from the jobs' own time models
    (row,) = out["weak_loss"]
    assert (row["p"], row["p0"]) == (2, 1)
    assert row["loss_s"] == pytest.approx(row["T_s"] - row["T0_s"])
    assert set(row["components_s"]) == {"io", "compute", "task_overhead", "transfer_spill", "startup_shutdown",
                                        "graph_submit", "iodiag_capture"}
    # named + unexplained is the loss; the named components account for it within 25 %
    assert sum(row["components_s"].values()) + row["unexplained_s"] == pytest.approx(row["loss_s"], abs=1e-6)
    assert row["adds_up"] and abs(row["unexplained_s"]) <= 0.25 * abs(row["loss_s"]) + 1e-9, row
    assert row["io_traced"]  # the embedded collector traced the tasks' I/O: it is split from compute
    assert row["largest"] == max(row["components_s"], key=row["components_s"].get)
    for f in out["findings"]:  # the finding names the largest component and what to change for it
        assert f["evidence"]["largest"] == row["largest"] and f["est_cost_s"] <= row["T_s"]
    # the terminal shows a bar per scale and each component with its band; the HTML page the same
    text = _cli("sweep", "analyze", str(sweep), "--mode", "weak", cwd=tmp_path, env=env)
    assert text.returncode == 0, text.stderr[-3000:]
    assert "2 vs 1 workers" in text.stdout and "<- largest" in text.stdout and "start-up and shutdown" in text.stdout
    page = (sweep / "weak_loss.html").read_text()
    assert "<svg" in page and "loss by component at 2 workers" in page
    jobs = _cli("jobs", "--json", cwd=tmp_path, env=env)
    assert len([j for j in json.loads(jobs.stdout)["jobs"] if "convert" in j["id"]]) == 2
