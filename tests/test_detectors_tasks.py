"""straggler-task on a task stream recorded from a real distributed LocalCluster."""

from __future__ import annotations

import os
import time

import numpy as np
import pytest

from iodiag.analyzers.detectors.tasks import detect_straggler_task
from iodiag.config import Config
from iodiag.profile import JobInfo, JobProfile, Table

distributed = pytest.importorskip("distributed")


def _work(i: int) -> int:
    # one task (i == 7) is slow for a reason the scheduler cannot see
    time.sleep(1.5 if i == 7 else 0.1)
    return i


def _tasks_table(stream: list[dict], pids: dict[str, int]) -> Table:
    """The ``tasks`` table contract (one row per task phase) from client.get_task_stream()."""
    from dask.utils import key_split

    rows = {k: [] for k in ("key", "prefix", "worker", "pid", "thread", "phase", "start_s", "end_s")}
    for rec in stream:
        for ss in rec["startstops"]:
            rows["key"].append(str(rec["key"]))
            rows["prefix"].append(key_split(rec["key"]))
            rows["worker"].append(rec["worker"])
            rows["pid"].append(pids.get(rec["worker"], -1))
            rows["thread"].append(int(rec.get("thread") or -1))
            rows["phase"].append(ss["action"])
            rows["start_s"].append(ss["start"])
            rows["end_s"].append(ss["stop"])
    return Table({k: np.asarray(v, dtype=object if k in ("key", "prefix", "worker", "phase") else None)
                  for k, v in rows.items()})


@pytest.fixture(scope="module")
def stream_profile():
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster, \
            Client(cluster) as client:
        pids = client.run(os.getpid)
        with distributed.get_task_stream(client) as ts:
            futs = client.map(_work, range(12), key=[f"work-{i}" for i in range(12)])
            assert client.gather(futs) == list(range(12))
        stream = ts.data
    return JobProfile(job=JobInfo(job_id="dask"), tasks=_tasks_table(stream, pids)), pids


def test_slow_task_is_found(stream_profile):
    prof, pids = stream_profile
    assert len(prof.tasks) >= 12
    (f,) = detect_straggler_task(prof, Config())
    assert f.evidence["slowest_key"] == "work-7"
    assert f.evidence["tasks"] == 12 and f.evidence["stragglers"] == 1
    assert f.evidence["slowest_task_s"] >= 1.4 and f.evidence["median_task_s"] < 0.5
    assert f.processes and f.processes[0] in pids.values()
    assert f.est_cost_s == pytest.approx(f.evidence["slowest_task_s"] - f.evidence["median_task_s"], rel=1e-3)


def test_threshold_from_config_silences_it(stream_profile):
    import dataclasses

    prof, _ = stream_profile
    cfg = Config()
    cfg = dataclasses.replace(cfg, stragglers=dataclasses.replace(cfg.stragglers, task_min_excess_s=5.0))
    assert detect_straggler_task(prof, cfg) == []


def test_no_tasks_no_finding():
    assert detect_straggler_task(JobProfile(job=JobInfo(job_id="x")), Config()) == []
