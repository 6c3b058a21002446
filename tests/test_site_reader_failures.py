"""Site ingest runs each job inside the long-lived reader process: what a failure there costs.

Real corpus logs in a small archive; the failures are real too: a truncated log
that crashes darshan-util, and job functions (tests/site_faults.py) that raise in
``diagnose``, get the reader process killed, or hang, for one job only.
"""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path

import pytest

from iodiag.analyzers.readers.isolate import close_reader_servers
from iodiag.config import Config
from iodiag.site.walk import group_units, iter_dirs
from iodiag.site.worker import process_units

HERE = Path(__file__).resolve().parent
CORPUS = HERE.parents[1] / "shared" / "darshan-logs"
GOOD = [
    "darshan-logs/darshan_logs/release_logs/mpi-io-test-x86_64-3.4.4.darshan",
    "darshan/darshan-util/pydarshan/darshan/tests/input/sample.darshan",
    "darshan-logs/darshan_logs/imbalanced_io/imbalanced-io.darshan",
]
CRASHES = "generated/edge-cases/truncated-900B_treddy_mpi-io-test_id4373053_6-2-60198-9815401321915095332_1.darshan"


def _link(src: Path, dst: Path) -> None:
    try:
        os.link(src, dst)
    except OSError:
        dst.write_bytes(src.read_bytes())


@pytest.fixture
def archive(tmp_path):
    """2024/1/2: job 100 of three logs (two readable, the crashing one between them), jobs 101 and 102 of one log."""
    srcs = [CORPUS / p for p in (*GOOD, CRASHES)]
    missing = [p for p in srcs if not p.is_file()]
    if missing:
        pytest.skip(f"corpus log missing: {missing[0]}")
    day = tmp_path / "arc" / "2024" / "1" / "2"
    day.mkdir(parents=True)
    for i, src in enumerate((srcs[0], srcs[3], srcs[1])):
        _link(src, day / f"alice_app_id100_1-2-{i}-1_{i}.darshan")
    _link(srcs[2], day / "bob_tool_id101_1-2-9-1_1.darshan")
    _link(srcs[0], day / "carol_app_id102_1-2-9-1_1.darshan")
    root = str(tmp_path / "arc")
    units = [u for d in iter_dirs(root) for u in group_units(root, d)]
    assert [u.job_id for u in units] == ["100", "101", "102"]
    return units


@pytest.fixture
def fresh_readers(monkeypatch):
    """Reader processes started for this test only, with tests/ importable in them."""
    close_reader_servers()
    monkeypatch.setenv("PYTHONPATH", str(HERE) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    yield
    close_reader_servers()


def _ingest(units, job_fn=None, site=None, **reader):
    cfg = Config()
    if reader:
        cfg = dataclasses.replace(cfg, reader=dataclasses.replace(cfg.reader, **reader))
    if site:
        cfg = dataclasses.replace(cfg, site=dataclasses.replace(cfg.site, **site))
    kw = {"job_fn": job_fn} if job_fn else {}
    res = process_units(units, config=cfg, run=1, **kw)
    return {k: (v.to_pylist() if k != "n_logs" else v) for k, v in res.items()}


def _by_job(rows):
    return {r["job_id"]: r for r in rows}


def test_a_crash_costs_that_log_only(archive, fresh_readers):
    """darshan-util dies (SIGSEGV/SIGABRT) on the middle log of job 100: that log is an error;
    the job is built from its other two logs; the jobs after it are read by a fresh reader."""
    out = _ingest(archive)
    jobs = _by_job(out["jobs"])
    assert set(jobs) == {"100", "101", "102"}
    assert (jobs["100"]["n_logs"], jobs["100"]["n_logs_failed"]) == (2, 1)
    errs = [e for e in out["errors"] if not e["loaded"]]
    assert len(errs) == 1 and errs[0]["kind"] == "crashed" and errs[0]["name"].startswith("alice_app_id100_1-2-1")
    assert re.search(r"SIGSEGV|SIGABRT", errs[0]["cause"])
    status = {r["name"]: r["status"] for r in out["logs"]}
    assert sorted(status.values()) == ["error", "ok", "ok", "ok", "ok"]
    # the same numbers as the job made of its two readable logs alone
    two = [u for u in archive if u.job_id == "100"][0]
    alone = dataclasses.replace(two, paths=two.paths[::2], names=two.names[::2], sizes=two.sizes[::2], mtimes_ns=two.mtimes_ns[::2])
    ref = _by_job(_ingest([alone])["jobs"])["100"]
    for col in ("nprocs", "bytes_read", "bytes_written", "posix_opens", "core_hours", "io_time_s"):
        assert jobs["100"][col] == ref[col]
    assert "partial-log" in jobs["100"]["finding_ids"] and "partial-log" not in ref["finding_ids"]
    # and the other jobs are what they are without a crash in the batch
    ref_rest = _by_job(_ingest(archive[1:])["jobs"])
    for j in ("101", "102"):
        assert repr(jobs[j]) == repr(ref_rest[j])  # repr: NaN equals NaN


def test_diagnose_raising_in_the_reader_costs_that_job(archive, fresh_readers):
    out = _ingest(archive, "site_faults:diagnose_raises")
    jobs = _by_job(out["jobs"])
    assert set(jobs) == {"101", "102"}  # job 100 has no row; the next jobs are ingested
    failed = [e for e in out["errors"] if e["kind"] == "ingest-failed"]
    # one ingest-failed error per readable log of job 100, with the exception as cause
    assert len(failed) == 2 and {e["job_key"] for e in failed} == {"2024/1/2:alice:100"}
    m = re.search(r"RuntimeError: injected diagnose failure in process (\d+)", failed[0]["cause"])
    assert m and int(m.group(1)) != os.getpid()  # raised inside the reader process, not here
    assert [e["kind"] for e in out["errors"] if e["kind"] != "ingest-failed"] == ["crashed"]
    status = [r["status"] for r in out["logs"] if r["job_key"] == "2024/1/2:alice:100"]
    assert status == ["error"] * 3


def test_reader_killed_while_building_a_job(archive, fresh_readers):
    out = _ingest(archive, "site_faults:killed_while_building")
    assert set(_by_job(out["jobs"])) == {"101", "102"}
    failed = [e for e in out["errors"] if e["job_key"] == "2024/1/2:alice:100"]
    assert len(failed) == 3 and {e["kind"] for e in failed} == {"ingest-failed"}
    assert "died while processing this job" in failed[0]["cause"] and "SIGKILL" in failed[0]["cause"]


def test_reader_hung_while_building_a_job(archive, fresh_readers):
    # the job's analysis has its own limit ([site] job_timeout_s); decoding keeps the per-log one
    out = _ingest(archive, "site_faults:hangs_while_building", site={"job_timeout_s": 3.0}, timeout_s=60.0)
    assert set(_by_job(out["jobs"])) == {"101", "102"}
    failed = [e for e in out["errors"] if e["job_key"] == "2024/1/2:alice:100"]
    assert len(failed) == 3 and "hung while processing this job" in failed[0]["cause"]
    assert "analysis did not finish within 3 s" in failed[0]["cause"]


def test_a_function_the_reader_cannot_import_runs_here(archive, monkeypatch):
    """Without tests/ on the reader's PYTHONPATH the reader cannot import site_faults: the
    jobs are then read (forked) and built in this process, with the same outcome."""
    close_reader_servers()
    monkeypatch.delenv("PYTHONPATH", raising=False)
    try:
        out = _ingest(archive, "site_faults:diagnose_raises")
    finally:
        close_reader_servers()
    assert set(_by_job(out["jobs"])) == {"101", "102"}
    failed = [e for e in out["errors"] if e["kind"] == "ingest-failed"]
    assert len(failed) == 2
    assert f"injected diagnose failure in process {os.getpid()}" in failed[0]["cause"]


def test_a_failure_after_finished_jobs_loses_no_row_and_doubles_none(archive, fresh_readers, monkeypatch):
    """The reader sends finished jobs in batches: when it dies on job 102, jobs 100 and 101 (done,
    maybe not yet sent) are done again by a fresh reader; every row comes out exactly once."""
    monkeypatch.setenv("SITE_FAULTS_JOB", "102")
    out = _ingest(archive, "site_faults:killed_while_building")
    assert sorted(r["job_id"] for r in out["jobs"]) == ["100", "101"]
    # job 100 ran two executables (its two readable logs), job 101 one
    assert sorted(r["job_id"] for r in out["programs"]) == ["100", "100", "101"]
    assert sorted((e["kind"], e["name"][:20]) for e in out["errors"]) == [
        ("crashed", "alice_app_id100_1-2-"), ("ingest-failed", "carol_app_id102_1-2-")]
    assert sorted(r["name"] for r in out["logs"]) == sorted(u_name for u in archive for u_name in u.names)
