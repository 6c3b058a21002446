"""Where a Dask job's wall time goes, on real `distributed` runs recorded by the embedded collector.

A NetCDF -> Zarr conversion cut into thousands of one-step chunks spends its worker threads between tasks:
task-overhead comes first with a chunk shape computed from the Zarr array's own metadata; running the same
conversion with that chunk shape removes the finding. Tasks that write known bytes are checked against the
join of operations to tasks; a task slowed by I/O and one slowed by compute are told apart.
"""

from __future__ import annotations

import dataclasses
import sys

import pytest

from conftest import require_embedded, run_cli
from iodiag.recommend.rules import diagnose_with_advice as diagnose
from iodiag.analyzers.job import load_job_record
from iodiag.analyzers.tasktime import dask_time_of
from iodiag.config import Config
from iodiag.jobs.store import find_job

pytest.importorskip("distributed")
pytest.importorskip("xarray")


def _run(tmp_path, name, *args):
    home = {"IODIAG_HOME": str(tmp_path / "store")}
    r = run_cli("run", "--collector", "embedded", "--no-dask-report", "--name", name, "--", sys.executable, *args,
                env=home, timeout=600)
    assert r.returncode == 0, r.stderr.decode()[-3000:]
    return load_job_record(find_job(name, root=tmp_path / "store"))


def test_one_step_chunks_get_task_overhead_and_its_chunk_advice_removes_it(tmp_path):
    require_embedded()
    src = tmp_path / "ta.nc"
    g = run_cli("workload", "gen", "--out", str(src), "--time", "120", "--plev", "10", "--lat", "45", "--lon", "90")
    assert g.returncode == 0, g.stderr.decode()
    conv = ["-m", "iodiag.workloads.convert", "--src", str(src), "--workers", "2", "--threads", "1"]
    tiny = _run(tmp_path, "tiny", *conv, "--dst", str(tmp_path / "a.zarr"), "--chunks", "1,1,45,90")
    findings = diagnose(tiny)
    top = max((f for f in findings if f.est_cost_s), key=lambda f: f.est_cost_s)
    assert top.id == "task-overhead", [(f.id, f.est_cost_s) for f in findings]
    ev = top.evidence
    assert ev["chunks_now"] == [1, 1, 45, 90] and ev["array_shape"] == [120, 10, 45, 90]
    assert "chunks={" in top.recommendation and "'time'" in top.recommendation
    dt = dask_time_of(tiny)
    assert dt.tasks >= 1200 and dt.between_share_of_span >= 0.2
    parts = dt.split_s
    assert sum(parts.values()) == pytest.approx(dt.threads * dt.run_s, rel=1e-6)
    # no lump: the run outside tasks is named from the capture's own timestamps, iodiag's cost included
    assert dt.timeline["basis"] == "capture" and dt.timeline["compute_calls"] == 1
    assert set(parts) == {"task_compute", "task_io", "between_tasks", "cluster_startup", "graph_submit", "shutdown",
                          "iodiag_capture", "other"}
    assert min(parts["cluster_startup"], parts["graph_submit"], parts["shutdown"], parts["iodiag_capture"]) > 0
    assert dt.share("other") <= 0.10, dt.timeline  # the conversion workload: what is left unnamed is small
    # the conversion's bytes are joined to its store tasks
    store = next(p for p in dt.prefixes if p["prefix"].startswith("store"))
    assert store["bytes"] >= 120 * 10 * 45 * 90 * 4
    # --obfuscate hides the store's path and the variable's name in the evidence and the advice
    from iodiag.reports.json_report import build_report
    from iodiag.reports.obfuscate import obfuscate_report

    obf = obfuscate_report(build_report(tiny, findings))
    f = next(x for x in obf["findings"] if x["id"] == "task-overhead")
    assert str(tmp_path) not in str(obf) and not f["recommendation"].startswith("ta ") and "var-" in f["recommendation"]
    # apply the recommendation: the same conversion with the recommended chunks
    new = ",".join(str(x) for x in ev["chunks_recommended"])
    big = _run(tmp_path, "big", *conv, "--dst", str(tmp_path / "b.zarr"), "--chunks", new)
    assert "task-overhead" not in {f.id for f in diagnose(big)}
    assert dask_time_of(big).tasks * 20 < dt.tasks


TWO_COMPUTES = r'''
import time
import dask.array as da
from distributed import Client, LocalCluster
if __name__ == "__main__":
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as lc, Client(lc) as c:
        x = da.ones((2000, 2000), chunks=(250, 250))
        print(float((x + 1).sum().compute()))
        time.sleep(2.0)  # the script preparing its next graph: no task can run
        print(float((x * 2).sum().compute()))
'''


def test_a_gap_between_two_computes_is_graph_building_not_task_overhead(tmp_path):
    script = tmp_path / "two.py"
    script.write_text(TWO_COMPUTES)
    home = {"IODIAG_HOME": str(tmp_path / "store")}
    r = run_cli("run", "--collector", "none", "--name", "two", str(script), env=home, timeout=600)
    assert r.returncode == 0, r.stderr.decode()[-3000:]
    dt = dask_time_of(load_job_record(find_job("two", root=tmp_path / "store")))
    assert dt.timeline["compute_calls"] == 2
    per = dt.per_thread_s()
    assert sum(per.values()) == pytest.approx(dt.run_s, rel=1e-6)
    assert per["graph_submit"] >= 2.0  # the 2 s the script slept between its computes (a lower bound: sleep)
    assert per["between_tasks"] < per["graph_submit"]  # ... is not counted as waiting between tasks
    assert per["iodiag_capture"] > 0 and per["cluster_startup"] > 0 and per["shutdown"] > 0
    assert "graph building and submission" in dt.headline


SLOW = r'''
import os, sys, time
import numpy as np
from distributed import Client, LocalCluster
out = sys.argv[1]
os.makedirs(out, exist_ok=True)

def write(i, n):
    with open(os.path.join(out, f"part{i}.bin"), "wb", buffering=0) as fh:
        for _ in range(n):
            fh.write(b"x")
    return n

def spin(i, s):
    t = time.time()
    while time.time() - t < s:
        pass
    return i

if __name__ == "__main__":
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as lc, Client(lc) as c:
        w = [c.submit(write, i, 300000 if i == 7 else 300, key=f"write-{i}", pure=False) for i in range(12)]
        s = [c.submit(spin, i, 1.5 if i == 5 else 0.05, key=f"spin-{i}", pure=False) for i in range(12)]
        c.gather(w + s)
'''


def test_stragglers_are_explained_by_their_own_io(tmp_path):
    """write-7 makes 1,000x the 1-byte writes of its peers (300,000 unbuffered); spin-5 only computes 30x longer."""
    require_embedded()
    script = tmp_path / "slow.py"
    script.write_text(SLOW)
    prof = _run(tmp_path, "slow", str(script), str(tmp_path / "out"))
    dt = dask_time_of(prof)
    # every byte of the write tasks lands on its task: 4 KiB x the count each one wrote
    for i in range(12):
        assert dt.task_bytes.get(f"write-{i}", 0) == (300000 if i == 7 else 300)
    # the slow write costs ~0.2 s here: judge stragglers from 0.1 s of excess (the default is 0.5 s)
    cfg = Config()
    cfg = dataclasses.replace(cfg, stragglers=dataclasses.replace(cfg.stragglers, task_min_excess_s=0.1))
    strag = {f.evidence["prefix"]: f for f in diagnose(prof, cfg) if f.id == "straggler-task"}
    assert "I/O-bound" in strag["write"].recommendation, strag["write"].recommendation
    assert strag["write"].evidence["slowest_task_bytes"] == 300000
    assert "not I/O-bound" in strag["spin"].recommendation, strag["spin"].recommendation


GROW = r'''
import os, sys
from distributed import Client, LocalCluster
out, workers, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
os.makedirs(out, exist_ok=True)

def write(i, n):
    with open(os.path.join(out, f"w{i}.bin"), "wb", buffering=0) as fh:
        for _ in range(n):
            fh.write(b"x" * 512)
    return n

if __name__ == "__main__":
    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=":0") as lc, \
            Client(lc) as c:
        c.gather([c.submit(write, i, n, key=f"write-{i}", pure=False) for i in range(8)])
'''


def test_scaling_names_the_component_that_grew(tmp_path):
    """Two real runs: 1 worker whose write tasks make 300 writes each, 2 workers whose tasks make 3,000: the
    scaling analysis names the 'write' tasks and says each issues ~10x the operations (the work grew, not the
    storage's time per operation)."""
    from iodiag.analyzers.detectors.scaling import _grown_component

    require_embedded()
    script = tmp_path / "grow.py"
    script.write_text(GROW)
    a = _run(tmp_path, "w1", str(script), str(tmp_path / "a"), "1", "300")
    b = _run(tmp_path, "w2", str(script), str(tmp_path / "b"), "2", "3000")
    ev = {}
    text = _grown_component(a, b, ev)
    assert ev["grown_prefix"] == "write"
    assert ev["ops_per_task_worst"] / ev["ops_per_task_base"] == pytest.approx(10, rel=0.05)
    assert "'write' tasks" in text and "the operations" in text


THREADS = r'''
import os, sys, time
from distributed import Client, LocalCluster
out = sys.argv[1]
os.makedirs(out, exist_ok=True)

def write(i, n):
    # two tasks run at once in one worker process (2 threads): only the thread tells whose writes these are
    with open(os.path.join(out, f"t{i}.bin"), "wb", buffering=0) as fh:
        for _ in range(n):
            fh.write(b"x" * 100)
            time.sleep(0.0002)
    return n

if __name__ == "__main__":
    with LocalCluster(n_workers=1, threads_per_worker=2, processes=True, dashboard_address=":0") as lc:
        c = Client(lc)
        c.gather([c.submit(write, i, 300 + 100 * i, key=f"write-{i}", pure=False) for i in range(8)])
        c.close()
'''


def test_join_is_exact_by_thread_when_tasks_overlap(tmp_path):
    """One worker with 2 threads running write tasks side by side: a time window cannot tell the two tasks'
    writes apart, the thread can: every task gets exactly its own bytes (100 x (300 + 100 i)) and the join
    says it was exact."""
    require_embedded()
    script = tmp_path / "threads.py"
    script.write_text(THREADS)
    prof = _run(tmp_path, "thr", str(script), str(tmp_path / "out"))
    dt = dask_time_of(prof)
    assert dt.threads == 2
    assert (prof.tasks["tid"] >= 0).all(), "the capture mapped every task thread to its OS thread id"
    for i in range(8):
        assert dt.task_bytes.get(f"write-{i}", 0) == 100 * (300 + 100 * i), (i, dt.task_bytes)
    assert dt.exact_io_share > 0.99
    # the worker preload logged the clock-offset estimate each task was given, so every task was put back on the
    # worker's clock exactly and no shift was searched for (a search put whole tasks' writes on the wrong task
    # under load; the history of the estimate alone left a task 50 ms off where the estimate changed at its start)
    from iodiag.analyzers.readers.dask import load_task_delays

    folder = find_job("thr", root=tmp_path / "store").folder
    assert {key for _, key in load_task_delays(folder / "dask")} == {f"write-{i}" for i in range(8)}
    assert all(abs(v) < 0.001 for v in dt.clock_offsets_s.values()), dt.clock_offsets_s
