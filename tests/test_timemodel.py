"""The job-time model: findings are costed in seconds of the job's run, never in summed process-seconds.

Real data only: corpus logs (each case's counters are named in its comment) and a real 1,000-process run under
the embedded collector in which every process opens one shared file once.
"""

from __future__ import annotations

import csv

import numpy as np
import pytest

from conftest import CORPUS, corpus_path, require_embedded, run_cli
from iodiag.analyzers.detectors import diagnose
from iodiag.analyzers.load import load_job
from iodiag.analyzers.timemodel import _union_per_proc, time_model_of
from iodiag.errors import IodiagError
from iodiag.reports.json_report import build_report

NOPOSIX = "darshan/darshan-util/pydarshan/darshan/tests/input/noposix.darshan"
IMBALANCED = "darshan-logs/darshan_logs/imbalanced_io/imbalanced-io.darshan"
BADOST = "darshan/darshan-util/pydarshan/darshan/tests/input/sample-badost.darshan"
DXT1 = "darshan/darshan-util/pydarshan/darshan/examples/example_logs/dxt.darshan"


def _by(findings, fid):
    hit = [f for f in findings if f.id == fid]
    assert hit, f"{fid} not among {[f.id for f in findings]}"
    return hit[0]


def test_many_ranks_metadata_costs_seconds_of_the_run_not_process_seconds():
    """noposix: 512 ranks, a 39,213 s run; one shared STDIO record with 512 opens, 203,265 fseek/ftell and
    2.4 million fread/fwrite of 770 B on average; STDIO_F_META_TIME adds up to 365 process-seconds spread over the
    ranks, i.e. well under 2 s per rank. Summed, it looked like a 92 % metadata storm; in the run it is nothing,
    and stream positioning is not file-system metadata: the small STDIO calls (small-io) carry those seconds."""
    prof = load_job([str(corpus_path(NOPOSIX))])
    found = diagnose(prof)
    assert "metadata-storm" not in [f.id for f in found]
    f = _by(found, "small-io")
    assert f.evidence["layer"] == "STDIO" and f.evidence["stdio_seeks"] == 203265
    st = prof.module("STDIO")
    secs = sum(float(np.clip(st[c], 0, None).sum()) for c in ("STDIO_F_META_TIME", "STDIO_F_READ_TIME", "STDIO_F_WRITE_TIME"))
    assert f.evidence["cost_process_s"] == pytest.approx(secs, rel=1e-6) and secs > 390
    assert f.est_cost_s < secs / 512 * 10 and f.severity == "info"
    assert f.cost_share == pytest.approx(f.est_cost_s / 39213.0, abs=1e-6)


def test_one_heavy_rank_costs_what_it_makes_the_job_wait():
    """imbalanced-io: rank 0 does the POSIX writes (731 s) of files that all 496 ranks write collectively; every
    rank spends ~1,150 s in MPI-IO (MPIIO_F_*_TIME sum to ~570,000 s, SLOWEST ~ FASTEST per file) of a 1,479 s
    run, waiting for rank 0 inside the collective calls.  The critical path holds that MPI-IO time (not only the
    POSIX time beneath it), and the part of the wait that is rank 0's own POSIX work is charged to the imbalance."""
    prof = load_job([str(corpus_path(IMBALANCED))])
    tm = time_model_of(prof)
    mp = prof.module("MPI-IO")
    per_rank = sum(float(np.clip(mp[c], 0, None).sum()) for c in ("MPIIO_F_READ_TIME", "MPIIO_F_WRITE_TIME",
                                                                  "MPIIO_F_META_TIME")) / len(prof.processes)
    assert per_rank > 1100
    assert per_rank - 1 <= tm.io_wall_s <= 1479.0 and tm.io_process_s > 496 * 1100
    # the median rank's I/O is its MPI-IO time: it waits in the collective calls
    assert float(np.median(tm.proc_io_s)) == pytest.approx(per_rank, rel=0.05)
    assert float(np.median(tm.proc_mpiio_wait_s)) > 0.9 * per_rank
    # the wait charged to the imbalance is rank 0's own POSIX work (~731 s) that every other rank waits for
    # (less the 1/496 a balanced share would keep), on top of rank 0's excess over the median
    f = _by(diagnose(prof), "rank-imbalance")
    ev = f.evidence
    assert 700 < ev["heaviest_posix_s"] < per_rank
    assert ev["collective_wait_charged_s"] == pytest.approx(ev["heaviest_posix_s"] * (1 - 1 / 496), rel=0.01)
    assert f.severity == "high" and 731.0 - 21.5 < f.est_cost_s <= tm.io_wall_s + 1e-6
    assert f.cost_share == pytest.approx(f.est_cost_s / 1479.0, rel=1e-3)


def test_stragglers_cost_their_excess_over_the_median():
    """sample-badost: 85 of 2,048 ranks write for up to 778.6 s against a 12.1 s median in a 780 s run."""
    prof = load_job([str(corpus_path(BADOST))])
    f = _by(diagnose(prof), "straggler-process")
    assert f.est_cost_s == pytest.approx(778.6 - 12.15, abs=1.0) and f.severity == "high"


def test_threads_overlapping_in_time_count_once():
    """dxt.darshan: one process whose calls add up to 11,218 s of I/O in a 1,469 s run (several threads
    blocked in I/O at once). Its I/O on the critical path is bounded by the run, and every cost by that."""
    prof = load_job([str(corpus_path(DXT1))])
    tm = time_model_of(prof)
    assert tm.io_process_s > 11000 and tm.io_wall_s <= 1469.0
    for f in diagnose(prof):
        if f.est_cost_s is not None:
            assert f.est_cost_s <= tm.io_wall_s + 1e-6 and 0 <= f.cost_share <= 1


def test_interval_union_per_process():
    """The union of intervals: one long interval covering others counts once; separate processes stay apart."""
    proc = np.array([0, 0, 0, 1, 1, 2])
    start = np.array([0.0, 1.0, 5.0, 0.0, 0.0, 3.0]) + 1.7e9
    end = np.array([2.0, 3.0, 6.0, 10.0, 1.0, 3.5]) + 1.7e9
    assert _union_per_proc(proc, start, end, 4).tolist() == pytest.approx([4.0, 10.0, 0.5, 0.0])


def _manifest():
    path = CORPUS / "MANIFEST.tsv"
    if not path.is_file():
        pytest.skip("MANIFEST.tsv not found")
    with path.open() as fh:
        return [r["path"] for r in csv.DictReader(fh, delimiter="\t")]


def test_every_corpus_cost_is_within_the_run():
    """On every readable corpus log: the critical-path I/O and every finding's cost are within the run time,
    the cost share is cost / run time, and the report's time object says the same numbers."""
    checked = 0
    for rel in _manifest():
        try:
            prof = load_job([str(CORPUS / rel)])
        except IodiagError:
            continue
        findings = diagnose(prof)
        rep = build_report(prof, findings)
        t = rep["time"]
        rt = prof.job.runtime_s
        if not rt:
            continue
        checked += 1
        assert t["io_wall_s"] <= rt + 1e-6, rel
        assert t["explained_s"] <= rt + 1e-6, rel
        for f in rep["findings"]:
            if f["est_cost_s"] is not None:
                assert 0 <= f["est_cost_s"] <= rt + 1e-6, (rel, f["id"])
                assert f["cost_share"] == pytest.approx(min(f["est_cost_s"] / rt, 1.0), abs=1e-4), (rel, f["id"])
    assert checked > 80


FORKER = r'''
import os, sys, time
shared = sys.argv[1] + ".shared"
with open(shared, "wb") as fh:
    fh.write(b"x" * 4096)
kids = []
for i in range(1000):
    pid = os.fork()
    if pid == 0:
        fd = os.open(shared, os.O_RDONLY)
        os.read(fd, 16)
        os.close(fd)
        time.sleep(0.5)
        os._exit(0)
    kids.append(pid)
for pid in kids:
    os.waitpid(pid, 0)
'''


def test_thousand_processes_opening_one_shared_file_is_not_a_storm(tmp_path):
    """A real run of 1,000 processes (embedded collector) that each open one shared file once: the opens add
    up over processes, but each process waits for its own open only, so the metadata is not a problem of the run."""
    require_embedded()
    script = tmp_path / "forker.py"
    script.write_text(FORKER)
    home = {"IODIAG_HOME": str(tmp_path / "store")}
    run = run_cli("run", "--collector", "embedded", "--no-dask-report", str(script), str(tmp_path / "data"), env=home,
                  timeout=600)
    assert run.returncode == 0, run.stderr.decode()[-2000:]
    from iodiag.analyzers.job import load_job_record
    from iodiag.jobs.store import find_job

    prof = load_job_record(find_job("last", root=tmp_path / "store"))
    assert len(prof.processes) >= 1000
    tm = time_model_of(prof)
    findings = diagnose(prof)
    # a loaded machine can stall one process's open for a tenth of a second (seen: 0.15 s of a 1.9 s run); the
    # run then really waits for that process, and only then may the storm be more than low
    stalled = tm.io_wall_s >= 0.05 * tm.runtime_s
    for f in findings:
        if f.id == "metadata-storm" and not stalled:
            assert f.severity in ("info", "low"), f
        if f.est_cost_s is not None:
            assert f.est_cost_s <= tm.io_wall_s + 1e-9
    # each child waits for its own open only: a typical process's I/O is a tiny part of the summed seconds,
    # and the critical path (the busiest process, here the parent with its imports) is below that sum
    assert float(np.median(tm.proc_io_s)) * 100 < tm.io_process_s
    assert tm.io_wall_s <= tm.io_process_s
