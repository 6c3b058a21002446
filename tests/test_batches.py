"""The batch path changes nothing but memory: with batches of 997 operations (instead of ~1M), so that every trace
below is cut into many batches — inside a process, inside a (process, file) group and inside runs of consecutive
operations — the reports of the DXT corpus logs and of the embedded jobs are their golden reports (test_golden.py),
and the timeline raster sums to the same busy time.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from conftest import CORPUS
from iodiag.analyzers import batches
from iodiag.analyzers.batches import OpsBuilder
from test_golden import HERE, JOBS, _first_difference, _golden_name, report_of_job, report_of_log

LOGS = [
    "generated/tight-64B-pwrite-pread-dxt-full/0_python_id2035-2035_11-22-83087-1216503035641033982_1.darshan",
    "dxt-explorer/sample/jeanbez_8_benchmark_parallel_id45195555_8-6-50011-11681279140261054765_1628283217.darshan",
    "generated/smallio-metadata-heavy-maxrecords/0_python_id1986-1986_11-22-83074-12837788380125807242_1.darshan",
    "darshan-logs/darshan_logs/partial_data_dxt/partial_data_dxt.darshan",
    "darshan-logs/darshan_logs/nonmpi_dxt_anonymized/nonmpi_dxt_anonymized.darshan",
]


@pytest.fixture
def small_batches(monkeypatch):
    monkeypatch.setattr(batches, "CHUNK_OPS", 997)


def _same_as_golden(name: str, got: dict) -> None:
    want = json.loads((HERE / name).read_text(encoding="utf-8"))
    got = json.loads(json.dumps(got, sort_keys=True))
    diff = _first_difference(want, got)
    assert not diff, f"{name}: batches of 997 changed the report: {diff}"


@pytest.mark.parametrize("rel", LOGS)
def test_small_batches_give_the_golden_report_of_dxt_logs(rel, small_batches):
    path = CORPUS / rel
    if not path.is_file():
        pytest.skip(f"corpus log {rel} not found")
    _same_as_golden(_golden_name(rel), report_of_log(path))


@pytest.mark.parametrize("job", ["g1", "g2", "g3"])
def test_small_batches_give_the_golden_report_of_embedded_jobs(job, small_batches):
    _same_as_golden(f"job-{job}.json", report_of_job(JOBS / job))


def test_timeline_raster_is_the_same_in_small_batches(monkeypatch):
    from iodiag.analyzers.load import load_job
    from iodiag.reports.plots.timeline import io_timeline

    path = CORPUS / LOGS[0]
    if not path.is_file():
        pytest.skip("corpus log not found")
    prof = load_job([str(path)])
    whole = io_timeline(prof)
    monkeypatch.setattr(batches, "CHUNK_OPS", 997)
    cut = io_timeline(prof)
    assert whole.source == cut.source == "ops"
    for col in ("read", "write"):
        assert np.allclose(whole.grid(col), cut.grid(col), rtol=1e-9, atol=1e-12)
    assert whole.totals["write_s"] == pytest.approx(cut.totals["write_s"], rel=1e-9)
    # the raster holds the busy time of the trace: the sum of the write durations
    o = prof.ops
    w = o["op"] == 1
    assert cut.totals["write_s"] == pytest.approx(float((o["end_s"] - o["start_s"])[w].sum()), rel=1e-6)


def test_ops_builder_orders_batches_by_time_one_column_at_a_time():
    b = OpsBuilder(10)
    cols = ("proc", "thread", "file_id", "module", "op", "offset", "length")
    b.add({**{c: np.array([0, 0, 0]) for c in cols}, "start_s": np.array([1.0, 3.0, 5.0]), "end_s": np.array([2.0, 4.0, 6.0])})
    b.add({**{c: np.array([1, 1]) for c in cols}, "start_s": np.array([2.0, 3.0]), "end_s": np.array([2.5, 3.5])})
    t = b.finish()
    assert len(t) == 5 and t["start_s"].tolist() == [1.0, 2.0, 3.0, 3.0, 5.0]
    assert t["proc"].tolist() == [0, 1, 0, 1, 0]  # equal start times keep the order they were added in
    assert t["proc"].dtype == np.int64 and t["op"].dtype == np.int8 and len(t["offset"]) == 5  # unused tail dropped


@pytest.mark.parametrize("base", [1.6e9, 0.0, -5.0])
def test_ops_builder_time_order_is_numpys_stable_order(base):
    """Positive times are sorted through their bit patterns (faster); the order must be np.argsort's stable order,
    ties included, and times at or below zero take the float sort."""
    rng = np.random.default_rng(7)
    n = 20_000
    st = base + np.round(rng.random(n) * 50, 2)  # many ties
    b = OpsBuilder(n)
    cols = ("proc", "thread", "file_id", "module", "op", "offset", "length")
    b.add({**{c: np.zeros(n, "i8") for c in cols if c != "offset"}, "offset": np.arange(n), "start_s": st,
           "end_s": st + 1})
    t = b.finish()
    assert np.array_equal(t["offset"], np.argsort(st, kind="stable"))


@pytest.mark.parametrize("job", ["g2", "g3"])
def test_an_ops_source_folds_to_the_numbers_of_the_table_it_stands_for(job, small_batches):
    """With batches of 997 the embedded reader keeps the ops of these jobs (3,000+ operations, 4 processes that
    overlap in time) as an OpsSource re-read one process at a time; every consumer folding over it gives exactly
    (not approximately) what it gives over the whole table."""
    from iodiag.analyzers.batches import OpsSource, process_tables
    from iodiag.analyzers.job import load_job_record
    from iodiag.analyzers.metrics import ops_procs_per_file
    from iodiag.analyzers.timemodel import time_model_of
    from iodiag.config import Config
    from iodiag.reports.plots.metadata import metadata_over_time
    from iodiag.reports.plots.timeline import io_timeline

    streamed = load_job_record(JOBS / job, config=Config())
    held = load_job_record(JOBS / job, config=Config())
    assert isinstance(streamed.ops, OpsSource) and isinstance(held.ops, OpsSource)
    held.ops = held.ops.table()
    whole = held.ops
    assert len(whole) == len(streamed.ops) > 3 * 997
    assert bool(np.all(whole["start_s"][1:] >= whole["start_s"][:-1]))
    # one process at a time, in the order of the table
    parts = list(process_tables(streamed.ops))
    assert len(parts) == len(np.unique(whole["proc"])) >= 2
    for part in parts:
        mine = whole.filter(whole["proc"] == part["proc"][0])
        for c in whole.columns:
            assert np.array_equal(part[c], mine[c]), c
    # the folds over it
    assert np.array_equal(time_model_of(streamed).proc_io_s, time_model_of(held).proc_io_s)
    for a, b in zip(ops_procs_per_file(streamed), ops_procs_per_file(held)):
        assert np.array_equal(a, b)
    t_s, t_h = io_timeline(streamed), io_timeline(held)
    assert t_s.source == t_h.source == "ops" and t_s.totals == t_h.totals
    for c in ("read", "write"):
        assert np.array_equal(t_s.grid(c), t_h.grid(c))
    m_s, m_h = metadata_over_time(streamed), metadata_over_time(held)
    for c in m_h.columns:
        assert np.array_equal(np.asarray(m_s[c]), np.asarray(m_h[c])), c
    # the access-size histogram of a profile without counters comes from the ops
    from iodiag.reports.plots.volumes import access_sizes

    streamed.counters, held.counters = {}, {}
    a_s, a_h = access_sizes(streamed), access_sizes(held)
    assert len(a_h) and set(a_h["source"].tolist()) == {"ops"} and int(a_h["count"].sum()) > 0
    for c in a_h.columns:
        assert a_s[c].tolist() == a_h[c].tolist(), c
    if job == "g3":  # a Dask job: the task <-> operation join reads the worker processes' operations only
        from iodiag.analyzers.tasktime import dask_time_of

        d_s, d_h = dask_time_of(streamed), dask_time_of(held)
        assert d_s is not None and d_s.io_traced and d_s.io_in_tasks_s > 0
        assert d_s == d_h
    assert streamed.ops._table is None  # none of these read the whole source


def test_a_trace_that_changed_after_it_was_read_is_a_clear_error(tmp_path, small_batches):
    """The source re-reads the traces: one that lost records since the first reading is reported, never folded
    silently into different numbers."""
    import shutil

    from iodiag.analyzers.batches import process_tables
    from iodiag.analyzers.readers.embedded import load_traces
    from iodiag.errors import InputUnreadable

    traces = shutil.copytree(JOBS / "g2" / "traces", tmp_path / "traces")
    prof = load_traces(traces, job_id="g2")
    assert sum(len(t) for t in process_tables(prof.ops, ("proc",))) == len(prof.ops)
    biggest = max(traces.glob("*.iot"), key=lambda p: p.stat().st_size)
    with biggest.open("r+b") as fh:
        fh.truncate(biggest.stat().st_size // 2)
    with pytest.raises(InputUnreadable, match="changed while the job was being read"):
        for _ in process_tables(prof.ops, ("proc",)):
            pass


@pytest.mark.parametrize("rel", LOGS)
def test_keyed_group_order_is_the_lexsort_order(rel, monkeypatch):
    """The radix-keyed (proc, file, op, time) order equals np.lexsort's on real DXT logs, also when the key
    needs a second 16-bit pass (file ids renumbered so that the key outgrows 16 bits)."""
    from iodiag.analyzers import opgroups
    from iodiag.analyzers.load import load_job

    path = CORPUS / rel
    if not path.is_file():
        pytest.skip(f"corpus log {rel} not found")
    prof = load_job([str(path)])
    o = prof.ops
    want = np.lexsort((o["start_s"], o["op"], o["file_id"], o["proc"]))
    got = opgroups._keyed_group_order(prof, o)
    assert got is not None and np.array_equal(got, want)
    # the same rows with every process number spread out (x 40,000): the key then needs the high pass
    wide = dict(o.items()) if hasattr(o, "items") else {c: o[c] for c in o.columns}
    wide["proc"] = o["proc"] * 40_000
    t = type(o)._trusted(wide)
    want = np.lexsort((t["start_s"], t["op"], t["file_id"], t["proc"]))
    got = opgroups._keyed_group_order(prof, t)
    assert got is not None and np.array_equal(got, want)
    shuffled = type(o)._trusted({c: v[::-1] for c, v in wide.items()})  # not in time order: no keyed order
    assert opgroups._keyed_group_order(prof, shuffled) is None or len(o) < 2


@pytest.mark.parametrize("rel", LOGS)
def test_time_order_is_numpys_stable_sort(rel):
    """The bucketed radix time order equals np.argsort(kind="stable") on the start times of real DXT logs (with
    their many equal times), on the same times shuffled, and on columns made to defeat the buckets."""
    from iodiag.analyzers.load import load_job
    from iodiag.analyzers.nputil import stable_argsort_times

    path = CORPUS / rel
    if not path.is_file():
        pytest.skip(f"corpus log {rel} not found")
    st = np.asarray(load_job([str(path)]).ops["start_s"])
    rng = np.random.default_rng(7)
    for t in (st, st[rng.permutation(len(st))], st[::-1].copy()):
        assert np.array_equal(stable_argsort_times(t), np.argsort(t, kind="stable"))


def test_time_order_falls_back_where_buckets_cannot_tell():
    from iodiag.analyzers.nputil import stable_argsort_times

    rng = np.random.default_rng(3)
    n = 20_000
    # a few far outliers squeeze the rest into a handful of buckets, where different times meet out of order
    t = np.concatenate([rng.random(n) * 1e-9, [1e6, 2e6]])[rng.permutation(n + 2)]
    ties = np.repeat(rng.random(n // 50), 50)[rng.permutation(n)]  # every time 50 times
    nan = rng.random(n)
    nan[::997] = np.nan
    same = np.full(n, 3.25)
    for col in (t, ties, nan, same, np.arange(n, 0, -1, dtype="f8"), rng.random(10)):
        assert np.array_equal(stable_argsort_times(col), np.argsort(col, kind="stable"))


def test_a_one_process_dxt_log_is_given_in_bounded_batches(monkeypatch):
    """A one-process DXT log too large to hold (here: batches of 997) is a source whose one process comes in batches
    of at most 997 operations, in table order: its rows are the held table's, and the whole table is never built
    (issue 29: before, one process was held whole)."""
    from iodiag.analyzers.batches import is_source, process_batches
    from iodiag.analyzers.load import load_job

    path = CORPUS / LOGS[0]
    if not path.is_file():
        pytest.skip(f"corpus log {LOGS[0]} not found")
    held = load_job([str(path)])
    monkeypatch.setattr(batches, "CHUNK_OPS", 997)
    prof = load_job([str(path)])
    assert len(prof.ops) > 2 * 997 and len(np.unique(held.ops["proc"])) == 1 and is_source(prof.ops)
    (parts,) = list(process_batches(prof.ops))
    parts = list(parts)
    assert len(parts) > 2 and max(len(p) for p in parts) <= 997
    for c in held.ops.columns:
        assert np.array_equal(np.concatenate([p[c] for p in parts]), held.ops[c]), c
    assert prof.ops._table is None


@pytest.mark.parametrize("rel", [LOGS[1]])
def test_a_dxt_source_stands_for_the_dxt_table(rel, monkeypatch):
    """A Darshan DXT log of many processes too large to hold (here: batches of 997) keeps its operations as an
    OpsSource made from the decoded segments one process at a time: each process's rows are exactly its rows of
    the held table, the files and the per-process I/O time are the same, and the whole table is never built."""
    from iodiag.analyzers.batches import OpsSource, is_source, process_tables
    from iodiag.analyzers.load import load_job
    from iodiag.analyzers.timemodel import time_model_of

    path = CORPUS / rel
    if not path.is_file():
        pytest.skip(f"corpus log {rel} not found")
    held = load_job([str(path)])
    monkeypatch.setattr(batches, "CHUNK_OPS", 997)
    streamed = load_job([str(path)])
    assert isinstance(streamed.ops, OpsSource) and not is_source(held.ops)
    whole = held.ops
    assert len(streamed.ops) == len(whole) > 3 * 997
    parts = list(process_tables(streamed.ops))
    assert len(parts) == len(np.unique(whole["proc"]))
    for part in parts:
        mine = whole.filter(whole["proc"] == part["proc"][0])
        for c in whole.columns:
            assert np.array_equal(part[c], mine[c]), c
    assert np.array_equal(streamed.files["file_id"], held.files["file_id"])
    assert np.array_equal(time_model_of(streamed).proc_io_s, time_model_of(held).proc_io_s)
    assert streamed.ops._table is None
