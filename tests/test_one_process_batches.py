"""One process of many operations is read and reported in bounded batches (issue 29): the embedded reader reads a
process of more than ``CHUNK_OPS`` records in chunks (its counters folded by ``ModuleFold``) and registers it as
an ordered source, and every consumer on the report path folds over its batches.  On real recorded jobs, with
batches far smaller than the process, the numbers are those of the held table (bit for bit) and the traced peak
allocation of reading and reporting one process stays below the size of its records.
"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from conftest import REPO, require_embedded
from iodiag.analyzers import batches
from iodiag.config import Config

N_OPS = 300_000  # one process of 64-byte pwrite calls (bench_scale's writer): 14.4 MB of records
CHUNK = 8192

THREADS = r"""
import os, sys, threading
d = sys.argv[1]
def work(k):
    fd = os.open(os.path.join(d, f"t{k % 2}.bin"), os.O_CREAT | os.O_WRONLY, 0o644)
    for i in range(3000):
        os.pwrite(fd, b"x" * (64 + 64 * (k % 3)), (i * 7919 % 4096) * 64)
    os.close(fd)
ts = [threading.Thread(target=work, args=(k,)) for k in range(4)]
[t.start() for t in ts]
[t.join() for t in ts]
"""


def _bench():
    spec = importlib.util.spec_from_file_location("bench_scale", REPO / "benchmarks" / "bench_scale.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


def _record(b, tmp_path: Path, cmd: list[str], name: str) -> Path:
    store = tmp_path / "store"
    proc = subprocess.run([sys.executable, "-m", "iodiag", "run", "--collector", "embedded", "--no-dask", "--name", name,
                           "--", *cmd], env=b.iodiag_env(store), capture_output=True, text=True)
    m = re.search(r"iodiag: job (\S+) \(exit 0", proc.stderr)
    assert proc.returncode == 0 and m, proc.stderr[-800:]
    return store / "jobs" / m.group(1)


def _report(folder: Path) -> dict:
    from iodiag.analyzers.job import load_job_record
    from iodiag.reports.json_report import render_json
    from iodiag.service import diagnose_report

    prof = load_job_record(folder, config=Config())
    _, rep = diagnose_report(profile=prof, config=Config())
    return json.loads(render_json(rep))


def _profiles(folder: Path, monkeypatch, chunk: int):
    from iodiag.analyzers.readers.embedded import load_traces

    whole = load_traces(folder / "traces", job_id="x")
    monkeypatch.setattr(batches, "CHUNK_OPS", chunk)
    streamed = load_traces(folder / "traces", job_id="x")
    return whole, streamed


def _same_counters(whole, streamed) -> None:
    assert set(whole.counters) == set(streamed.counters)
    for mod, a in whole.counters.items():
        b = streamed.counters[mod]
        assert list(a.columns) == list(b.columns), mod
        for c in a.columns:
            x, y = np.asarray(a[c]), np.asarray(b[c])
            assert x.dtype == y.dtype and np.array_equal(x, y), f"{mod} {c}: {x[:4]} != {y[:4]}"


@pytest.fixture(scope="module")
def one_process_job(tmp_path_factory):
    require_embedded()
    tmp = tmp_path_factory.mktemp("one-process")
    b = _bench()
    writer = b.build_writer(tmp)
    data = tmp / "data"
    data.mkdir()
    return _record(b, tmp, [str(writer), str(data), str(N_OPS), "1"], "one-process")


def test_one_process_in_small_batches_gives_the_numbers_of_the_table(one_process_job, monkeypatch):
    want = _report(one_process_job)  # 300k operations: the held table
    whole, streamed = _profiles(one_process_job, monkeypatch, CHUNK)
    assert not batches.is_source(whole.ops) and batches.is_source(streamed.ops)
    assert streamed.ops._ordered == [True] and len(streamed.ops) == len(whole.ops) >= N_OPS  # (+ open, close)
    _same_counters(whole, streamed)
    got = _report(one_process_job)
    assert got == want
    assert want["job"]["nprocs"] == 1
    small = next(f for f in got["findings"] if f["id"] == "small-io")
    assert small["evidence"]["dxt_small_ops"] == N_OPS


def test_reading_and_reporting_one_process_stays_below_its_records(one_process_job, monkeypatch):
    """The traced peak (numpy's allocations included) of reading and reporting the 300k-operation process in batches
    of 8,192 is below the size of its records (48 bytes each): nothing holds the process.  Measured here
    (2026-11-26): 2.7 MB; the code before issue 29 read the process whole: 51 MB (~170 bytes per operation)."""
    monkeypatch.setattr(batches, "CHUNK_OPS", CHUNK)
    _report(one_process_job)  # imports and caches outside the measurement
    tracemalloc.start()
    try:
        _report(one_process_job)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < N_OPS * 48, f"traced peak {peak / 2**20:.1f} MiB for {N_OPS:,} operations of one process"


def test_threads_out_of_time_order_are_merged_in_a_window(tmp_path, monkeypatch):
    """Records come in completion order: threads that overlap leave starts out of order.  The reader's window merge
    gives the table's order, and the counters folded over it are module_counters' numbers, bit for bit."""
    require_embedded()
    b = _bench()
    script = tmp_path / "threads.py"
    script.write_text(THREADS)
    data = tmp_path / "data"
    data.mkdir()
    folder = _record(b, tmp_path, [sys.executable, str(script), str(data)], "threads")
    whole, streamed = _profiles(folder, monkeypatch, 997)
    from iodiag.analyzers.readers.embedded import raw_records

    starts = [raw_records(p)[1]["start_ns"] for p in sorted((folder / "traces").glob("*.iot"))]
    assert any(len(s) > 2 * 997 and bool(np.any(s[1:] < s[:-1])) for s in starts), "no overlapping calls recorded"
    _same_counters(whole, streamed)
    for c in whole.ops.columns:
        assert np.array_equal(whole.ops[c], streamed.ops.table()[c]), c
