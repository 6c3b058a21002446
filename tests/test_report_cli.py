"""`iodiag report` as a user runs it: logs, folders, site trees, JSON contract, bad input."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from conftest import CORPUS, corpus_glob, corpus_path, run_cli

TREE = CORPUS / "pytokio/tests/inputs/darshanlogs"
CONTRACT_VOLUMES = {"bytes_read", "bytes_written", "reads", "writes", "opens", "stats", "seeks", "fsyncs", "files"}
CONTRACT_JOB = {"id", "exe", "nprocs", "start", "end", "runtime_s", "collector", "darshan_version", "partial_modules"}


def _json(proc):
    assert proc.returncode == 0, proc.stderr.decode()
    return json.loads(proc.stdout)


def _one_line_error(proc, *needles):
    err = proc.stderr.decode()
    assert proc.returncode != 0
    assert "Traceback" not in err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert lines and lines[0].startswith("iodiag: error:"), err
    for n in needles:
        assert n in err, (n, err)
    return err


def test_json_contract_on_a_real_log():
    log = corpus_path("darshan/darshan-util/pydarshan/darshan/tests/input/sample.darshan")
    rep = _json(run_cli("report", str(log), "--json"))
    assert rep["schema"] == "iodiag.report/1"
    assert CONTRACT_JOB <= set(rep["job"])
    assert CONTRACT_VOLUMES <= set(rep["volumes"])
    assert isinstance(rep["findings"], list) and isinstance(rep["errors"], list)
    for f in rep["findings"]:
        assert {"id", "severity", "title", "evidence", "files", "processes", "recommendation"} <= set(f)
        assert f["severity"] in ("high", "medium", "low", "info")
    # figures from the log itself (darshan-parser --total on sample.darshan)
    assert rep["job"]["nprocs"] == 2048
    assert rep["job"]["collector"] == "darshan"
    assert rep["volumes"]["bytes_written"] > 0


def test_terminal_report_lists_modules_volumes_and_top_files():
    log = corpus_path("darshan-logs/darshan_logs/imbalanced_io/imbalanced-io.darshan")
    p = run_cli("report", str(log), "--no-color")
    out = p.stdout.decode()
    assert p.returncode == 0, p.stderr.decode()
    assert "496 processes" in out
    assert "partial: POSIX" in out
    assert "Top files by I/O time" in out
    assert "Per-process I/O time" in out
    assert "record cap" in out  # the partial module is explained, never hidden


def test_site_tree_job_with_two_programs():
    if not TREE.is_dir():
        pytest.skip("pytokio tree missing")
    rep = _json(run_cli("report", "4478544", "--log-tree", str(TREE), "--json"))
    exes = sorted(os.path.basename(p["exe"]) for p in rep["job"]["programs"])
    assert len(exes) == 2
    assert any("dbscan" in e for e in exes) and any("vpicio" in e for e in exes)
    assert rep["job"]["id"] == "4478544"
    assert not rep["errors"]


def test_site_tree_job_from_env_and_zero_byte_logs():
    if not TREE.is_dir():
        pytest.skip("pytokio tree missing")
    # job 4487503's logs are zero-byte placeholders: a clear error, exit non-zero, no traceback
    p = run_cli("report", "4487503", "--json", env={"IODIAG_LOG_TREE": str(TREE)})
    _one_line_error(p, "empty", "4487503")


def test_site_tree_zero_byte_beside_good_logs(tmp_path):
    # a tree where one of a job's logs is empty: the others are still reported, the empty one is an error
    day = tmp_path / "2017" / "3" / "20"
    day.mkdir(parents=True)
    for src in sorted((TREE / "2017/3/20").glob("*.darshan")):
        shutil.copy(src, day / src.name)
    (day / "glock_extra_id4478544_3-20-9999-1_1.darshan").write_bytes(b"")
    rep = _json(run_cli("report", "4478544", "--log-tree", str(tmp_path), "--json"))
    assert len(rep["job"]["programs"]) == 2
    errs = [e for e in rep["errors"] if e["path"].endswith("glock_extra_id4478544_3-20-9999-1_1.darshan")]
    assert errs and "empty" in errs[0]["cause"]


def test_folder_with_several_jobs_lists_them_then_picks(tmp_path):
    logs = corpus_glob("generated/dask-localcluster-2workers-graceful")
    for p in logs:
        shutil.copy(p, tmp_path / p.name)
    p = run_cli("report", str(tmp_path))
    err = p.stderr.decode()
    assert p.returncode == 5 and "Traceback" not in err
    assert "holds 7 jobs" in err and "26138" in err and "--job" in err and "--all" in err
    one = _json(run_cli("report", str(tmp_path), "--job", "26138", "--json"))
    assert one["job"]["id"] == "26138" and one["job"]["nprocs"] == 1
    every = _json(run_cli("report", str(tmp_path), "--all", "--json"))
    assert every["job"]["nprocs"] == 7
    assert len(every["job"]["programs"]) == 2  # python and uname


def test_folder_of_one_job():
    d = CORPUS / "generated/dask-localcluster-2workers-dxt-jobid"
    rep = _json(run_cli("report", str(d), "--json"))
    assert rep["job"]["id"] == "9100001" and rep["job"]["nprocs"] == 4


@pytest.mark.parametrize(
    "args,needles",
    [
        (("report", "/no/such/log.darshan"), ["/no/such/log.darshan", "no such file"]),
        (("report", "no-such-job-xyz"), ["no-such-job-xyz"]),
        (("report", "4478544", "--log-tree", "/no/such/tree"), ["/no/such/tree", "does not exist"]),
        (("report", "99999999", "--log-tree", str(TREE)), ["99999999", "no log"]),
    ],
)
def test_bad_input_is_one_clear_line(args, needles):
    _one_line_error(run_cli(*args), *needles)


def test_empty_folder_and_foreign_file(tmp_path):
    _one_line_error(run_cli("report", str(tmp_path)), str(tmp_path), "no Darshan logs")
    bogus = tmp_path / "x.darshan"
    bogus.write_text("hello\n" * 100)
    _one_line_error(run_cli("report", str(bogus)), "x.darshan", "not a Darshan log")


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_unreadable_file(tmp_path):
    src = corpus_path("darshan-logs/darshan_logs/release_logs/mpi-io-test-x86_64-3.4.0.darshan")
    dst = tmp_path / "locked.darshan"
    shutil.copy(src, dst)
    dst.chmod(0)
    _one_line_error(run_cli("report", str(dst)), "locked.darshan", "permission denied")


def test_bad_config_and_mute(tmp_path):
    log = corpus_path("darshan-logs/darshan_logs/release_logs/mpi-io-test-x86_64-3.4.0.darshan")
    cfg = tmp_path / "t.toml"
    cfg.write_text("[small_io]\nsize_byte = 3\n")
    _one_line_error(run_cli("report", str(log), "--config", str(cfg)), "size_byte", "known keys")
    _one_line_error(run_cli("report", str(log), "--mute", "no-such-finding"), "no-such-finding")


def test_damaged_log_alone_is_an_error_not_a_crash():
    log = corpus_path("generated/edge-cases/truncated-900B_treddy_mpi-io-test_id4373053_6-2-60198-9815401321915095332_1.darshan")
    _one_line_error(run_cli("report", str(log), "--json"), "truncated-900B", "crashed")


def test_truncated_log_reports_loss_in_json():
    log = corpus_path("generated/edge-cases/truncated-20000B_treddy_mpi-io-test_id4373053_6-2-60198-9815401321915095332_1.darshan")
    rep = _json(run_cli("report", str(log), "--json"))
    assert {"DXT_POSIX", "DXT_MPIIO"} <= set(rep["job"]["partial_modules"])
    assert any(e["kind"] == "truncated" for e in rep["errors"])


def test_help_has_examples():
    p = run_cli("report", "--help")
    assert p.returncode == 0
    out = p.stdout.decode()
    assert "Examples" in out and "--log-tree" in out and "--json" in out


@pytest.mark.parametrize("env, coloured", [({}, True), ({"NO_COLOR": "1"}, False), ({"TERM": "dumb"}, False)])
def test_terminal_colour_follows_the_terminal_and_no_color(env, coloured):
    """On a terminal the report is coloured, unless $NO_COLOR is set (no-color.org) or the terminal is dumb."""
    import sys

    from test_run_terminal import _run_on_pty

    log = corpus_path("darshan-logs/darshan_logs/imbalanced_io/imbalanced-io.darshan")
    full = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    full.update({"TERM": "xterm", "COLUMNS": "100", **env})
    code, out = _run_on_pty([sys.executable, "-m", "iodiag", "report", str(log)], full)
    assert code == 0 and "Diagnosis" in out
    assert ("\x1b[" in out) == coloured
