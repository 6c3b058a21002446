"""weak-scaling-loss from sets of real logs of the same program (mpi-io-test)."""

from __future__ import annotations

from pathlib import Path

import pytest

from iodiag.analyzers.detectors.scaling import compare_scaling
from iodiag.analyzers.load import load_job

LOGS = Path(__file__).resolve().parents[1].parent / "shared" / "darshan-logs" / "darshan-logs" / "darshan_logs"
REL = LOGS / "release_logs"
DXT32 = next(iter(sorted((LOGS / "mpi_io_test_with_dxt").glob("*.darshan"))), None)
pytestmark = pytest.mark.skipif(DXT32 is None, reason=f"corpus not found at {LOGS}")


def test_4_to_32_processes_loses_per_process_bandwidth():
    small = load_job([str(REL / "mpi-io-test-x86_64-3.4.2.darshan")])
    big = load_job([str(DXT32)])
    (f,) = compare_scaling([big, small])
    # 4 procs: 32 MiB each in ~0.023 s of I/O; 32 procs: 128 MiB each in ~1.8 s (mpi-io-test, 4 iterations)
    assert f.evidence["processes"] == [4, 32]
    assert f.evidence["strictly_weak"] is False  # 4x the bytes per process: compared by bandwidth
    assert f.evidence["efficiency"][1] < 0.2
    assert 0 < f.cost_share <= 1


def test_same_process_count_is_not_a_sweep():
    a = load_job([str(REL / "mpi-io-test-x86_64-3.4.2.darshan")])
    b = load_job([str(REL / "mpi-io-test-x86_64-3.4.3.darshan")])
    assert compare_scaling([a, b]) == []


DASK_WEAK = r'''
import sys
import dask.array as da
from distributed import Client, LocalCluster
if __name__ == "__main__":
    n = int(sys.argv[1])
    with LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=":0") as lc, Client(lc):
        x = da.ones((400 * n, 400), chunks=(100, 400))  # the same work per worker
        print(float((x * 2).sum().compute()))
'''


def test_dask_runs_are_judged_on_their_wall_time_split_into_components(tmp_path):
    """Two real `iodiag run` jobs of one Dask script at 1 and 2 workers: the finding costs the loss of the whole
    run and names its largest component, with what to change for it."""
    import dataclasses
    import sys

    pytest.importorskip("distributed")
    from conftest import run_cli
    from iodiag.analyzers.job import load_job_record
    from iodiag.analyzers.weakloss import COMPONENTS, weak_loss
    from iodiag.config import Config
    from iodiag.jobs.store import find_job
    from iodiag.recommend.rules import WEAK_LOSS_CHANGE, advise

    script = tmp_path / "weak.py"
    script.write_text(DASK_WEAK)
    home = {"IODIAG_HOME": str(tmp_path / "store")}
    profiles = []
    for n in (1, 2):
        r = run_cli("run", "--collector", "none", "--name", f"w{n}", str(script), str(n), env=home, timeout=600)
        assert r.returncode == 0, r.stderr.decode()[-3000:]
        profiles.append(load_job_record(find_job(f"w{n}", root=tmp_path / "store")))
    (row,) = weak_loss(profiles)
    assert (row["p0"], row["p"]) == (1, 2) and set(row["components_s"]) == set(COMPONENTS)
    assert sum(row["components_s"].values()) + row["unexplained_s"] == pytest.approx(row["loss_s"], abs=1e-6)
    assert not row["io_traced"]  # no collector: the tasks' I/O is inside compute, and the report says so
    cfg = Config()
    always = dataclasses.replace(cfg, stragglers=dataclasses.replace(cfg.stragglers, scaling_efficiency=100.0))
    (f,) = advise(compare_scaling(list(reversed(profiles)), always))
    assert f.id == "weak-scaling-loss" and f.evidence["largest"] == row["largest"]
    assert f.evidence["workers"] == [1, 2] and f.est_cost_s == pytest.approx(max(row["loss_s"], 0.0), abs=1e-6)
    assert WEAK_LOSS_CHANGE[row["largest"]] in f.recommendation
    # a sweep above the threshold gets no finding
    strict = dataclasses.replace(cfg, stragglers=dataclasses.replace(cfg.stragglers, scaling_efficiency=0.0))
    assert compare_scaling(profiles, strict) == []
