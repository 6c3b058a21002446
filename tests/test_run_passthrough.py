"""`iodiag run` passes the workload through untouched: bytes, stdin, exit codes, signals."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import cli_env, run_cli
from iodiag.collectors.darshan import find_runtime
from iodiag.errors import CollectorError

WORKLOAD = r'''
import os, signal, sys, time, subprocess
mode = sys.argv[1]
if mode == "bytes":
    blob = bytes(range(256)) * 4096 + b"\r\n\x00tail-without-newline"
    sys.stdout.buffer.write(blob)
    sys.stderr.buffer.write(b"err\x00\xff\n")
    sys.stdout.flush()
elif mode == "argv":
    import json
    print(json.dumps(sys.argv[2:]))
elif mode == "stdin":
    data = sys.stdin.buffer.read()
    sys.stdout.buffer.write(data[::-1])
elif mode == "exit":
    sys.exit(int(sys.argv[2]))
elif mode == "selfkill":
    os.kill(os.getpid(), signal.SIGKILL)
elif mode == "catch":
    marker = sys.argv[2]
    def handler(signum, frame):
        with open(marker, "w") as fh:
            fh.write(signal.Signals(signum).name)
        sys.exit(5)
    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
    print("ready", flush=True)
    time.sleep(60)
elif mode == "tree":
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    with open(sys.argv[2], "w") as fh:
        fh.write(str(child.pid))
    print("ready", flush=True)
    child.wait()
'''


def collectors() -> list[str]:
    out = ["none"]
    try:
        find_runtime()
        out.append("darshan")
    except CollectorError:
        pass
    return out


@pytest.fixture()
def workload(tmp_path: Path) -> Path:
    p = tmp_path / "workload.py"
    p.write_text(WORKLOAD)
    return p


@pytest.fixture()
def home(tmp_path: Path) -> dict[str, str]:
    return {"IODIAG_HOME": str(tmp_path / "store")}


def last_job(home: dict[str, str]) -> dict:
    jobs = sorted((Path(home["IODIAG_HOME"]) / "jobs").glob("*/job.json"), key=lambda p: json.loads(p.read_text())["start_s"])
    return json.loads(jobs[-1].read_text())


@pytest.mark.parametrize("collector", collectors())
def test_stdout_and_stderr_bytes_are_identical(workload, home, collector, tmp_path):
    direct = subprocess.run([sys.executable, str(workload), "bytes"], capture_output=True, cwd=tmp_path)
    run = run_cli("run", "--collector", collector, str(workload), "bytes", env=home, cwd=str(tmp_path))
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout == direct.stdout
    assert len(run.stdout) == 256 * 4096 + len(b"\r\n\x00tail-without-newline")
    # stderr: the workload's bytes first, then iodiag's one closing line
    assert run.stderr.startswith(direct.stderr)
    tail = run.stderr[len(direct.stderr):].decode()
    job = last_job(home)
    assert f"iodiag: job {job['id']}" in tail and f"iodiag report {job['id']}" in tail
    assert job["status"] == "complete" and job["exit_code"] == 0 and job["collector"] == collector


def test_script_arguments_with_dashes_reach_the_script(workload, home):
    args = ["--in", "a.nc", "--out", "b.zarr", "--help", "--darshan", "-x", "--", "sp ace"]
    run = run_cli("run", "--collector", "none", str(workload), "argv", *args, env=home)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout) == args
    run = run_cli("run", "--collector", "none", "--", sys.executable, str(workload), "argv", "--name", "x", env=home)
    assert json.loads(run.stdout) == ["--name", "x"]
    assert last_job(home)["command"] == [sys.executable, str(workload), "argv", "--name", "x"]


def test_stdin_passes_through(workload, home, tmp_path):
    data = os.urandom(200_000)
    run = run_cli("run", "--collector", "none", str(workload), "stdin", env=home, input=data, cwd=str(tmp_path))
    assert run.returncode == 0
    assert run.stdout == data[::-1]


@pytest.mark.parametrize("collector", collectors())
@pytest.mark.parametrize("code", [0, 7, 255])
def test_exit_code_passes_through(workload, home, collector, code):
    run = run_cli("run", "--collector", collector, str(workload), "exit", str(code), env=home)
    assert run.returncode == code
    job = last_job(home)
    assert job["exit_code"] == code and job["signal"] is None and job["status"] == "complete"


@pytest.mark.parametrize("collector", collectors())
def test_sigkill_of_workload_gives_137_and_a_partial_job(workload, home, collector):
    run = run_cli("run", "--collector", collector, str(workload), "selfkill", env=home)
    assert run.returncode == 137
    job = last_job(home)
    assert job["signal_name"] == "SIGKILL" and job["partial"] is True
    assert any("SIGKILL" in r for r in job["partial_reasons"])
    if collector == "darshan":  # the killed process left its mmap log: recovered, named by pid
        assert [r["pid"] for r in job["recovered_logs"]] == [job["pid"]]
        assert job["artefacts"]["logs"][0].startswith("logs/") and "mmap-recovered" in job["artefacts"]["logs"][0]


def _start(args, home, tmp_path):
    proc = subprocess.Popen([sys.executable, "-m", "iodiag", "run", *args], env=cli_env(home), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, cwd=tmp_path)
    assert proc.stdout.readline().strip() == b"ready"
    return proc


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signals_to_iodiag_reach_the_workload(workload, home, tmp_path, sig):
    marker = tmp_path / "got"
    proc = _start(["--collector", "none", str(workload), "catch", str(marker)], home, tmp_path)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    assert marker.read_text() == sig.name  # the workload's own handler ran
    assert proc.returncode == 5  # and its exit code came back
    assert last_job(home)["forwarded_signals"] == [sig.name]


def test_sigterm_reaches_the_whole_process_group_and_iodiag_dies_the_same_way(workload, home, tmp_path):
    pidfile = tmp_path / "child.pid"
    proc = _start(["--collector", "none", str(workload), "tree", str(pidfile)], home, tmp_path)
    grandchild = int(pidfile.read_text())
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGTERM  # re-delivered: the caller sees "killed by SIGTERM"
    deadline = time.time() + 10
    while time.time() < deadline:
        try:
            os.kill(grandchild, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        os.kill(grandchild, signal.SIGKILL)
        pytest.fail("the workload's child process did not receive SIGTERM")
    job = last_job(home)
    assert job["signal_name"] == "SIGTERM" and job["partial"] is True


def test_missing_script_and_bad_darshan_lib_are_one_line_errors(home, tmp_path, workload):
    run = run_cli("run", "--collector", "none", str(tmp_path / "nope.py"), env=home)
    assert run.returncode == 2
    assert run.stderr.decode().count("\n") == 1 and "nope.py: no such script" in run.stderr.decode()
    run = run_cli("run", "--darshan", "--darshan-lib", str(tmp_path), str(workload), "exit", "0", env=home)
    assert run.returncode == 8
    msg = run.stderr.decode()
    assert msg.count("\n") == 1 and "no libdarshan.so there" in msg and "Traceback" not in msg
    run = run_cli("run", "--darshan", "--collector", "none", str(workload), "exit", "0", env=home)
    assert run.returncode == 2 and "contradicts" in run.stderr.decode()
    assert not (Path(home["IODIAG_HOME"]) / "jobs").exists() or not any((Path(home["IODIAG_HOME"]) / "jobs").iterdir())


def test_a_command_that_cannot_start_is_an_error_and_a_failed_job(home, tmp_path):
    app = tmp_path / "app"
    app.write_text("#!/bin/sh\necho hi\n")  # not executable
    run = run_cli("run", "--collector", "none", "--", str(app), env=home)
    assert run.returncode == 8
    msg = run.stderr.decode()
    assert msg.count("\n") == 1 and "permission denied" in msg and "chmod +x" in msg
    job = last_job(home)
    assert job["status"] == "failed" and "permission denied" in job["partial_reasons"][0]
