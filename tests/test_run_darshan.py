"""`iodiag run --darshan` with a real Darshan runtime: discovery, per-run set-up, concurrent jobs.

Tests that need a runtime find it the way users do (``find_runtime()``: darshan-config on PATH,
$DARSHAN_ROOT and friends, LD_LIBRARY_PATH, standard prefixes) and skip with the reason otherwise.
"""

from __future__ import annotations

import json
import os
import re
import signal
import time
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import numpy as np
import pytest

from conftest import cli_env, require_darshan_runtime, run_cli
from iodiag.analyzers.job import load_job_record
from iodiag.collectors import darshan as dcol
from iodiag.errors import CollectorError
from iodiag.jobs.store import find_job, list_jobs
from iodiag.profile import OP, OPS_MODULE


LOG_DONE = re.compile(r"_id\d+-\d+_\d+-\d+-\d+-\d+_\d+\.darshan$")


def _runtime_or_none():
    try:
        return dcol.find_runtime()
    except CollectorError as exc:
        return exc


@pytest.fixture(scope="module")
def runtime() -> dcol.DarshanRuntime:
    return require_darshan_runtime()


# --- discovery ---------------------------------------------------------------------------------

def _install_copy(runtime, prefix: Path, sub: str = "lib") -> Path:
    d = prefix / sub
    d.mkdir(parents=True)
    shutil.copy2(runtime.lib, d / "libdarshan.so")
    return d / "libdarshan.so"


def test_discovery_order_flag_env_root_ld_library_path(runtime, tmp_path):
    a = _install_copy(runtime, tmp_path / "a")
    b = _install_copy(runtime, tmp_path / "b", "lib64")
    c = _install_copy(runtime, tmp_path / "c")
    env = {"PATH": "/nonexistent", "IODIAG_DARSHAN_LIB": str(a), "DARSHAN_ROOT": str(tmp_path / "b"),
           "LD_LIBRARY_PATH": str(c.parent)}
    assert dcol.find_runtime(c.parent, env=env, prefixes=()).lib == c.resolve()  # --darshan-lib (a folder)
    found = dcol.find_runtime(env=env, prefixes=())
    assert found.lib == a.resolve() and found.found_by == "$IODIAG_DARSHAN_LIB"
    del env["IODIAG_DARSHAN_LIB"]
    env["LD_PRELOAD"] = f"/usr/lib/libfoo.so {c}"
    assert dcol.find_runtime(env=env, prefixes=()).found_by == "$LD_PRELOAD"
    del env["LD_PRELOAD"]
    found = dcol.find_runtime(env=env, prefixes=())
    assert found.lib == b.resolve() and found.found_by == "$DARSHAN_ROOT"
    del env["DARSHAN_ROOT"]
    env["DARSHAN_RUNTIME_ROOT"] = "/nonexistent/spack/darshan-runtime"
    found = dcol.find_runtime(env=env, prefixes=())
    assert found.lib == c.resolve() and found.found_by == "LD_LIBRARY_PATH"
    assert any("DARSHAN_RUNTIME_ROOT" in t for t in found.tried)


def test_darshan_config_on_path_is_used_with_its_build_features(runtime):
    if runtime.config_tool is None:
        pytest.skip("this runtime has no darshan-config next to it")
    env = {"PATH": str(runtime.config_tool.parent)}
    found = dcol.find_runtime(env=env, prefixes=())
    assert found.found_by == "darshan-config on PATH" and found.lib == runtime.lib
    libdir = subprocess.run([str(runtime.config_tool), "--libdir"], capture_output=True, text=True).stdout.strip()
    assert Path(libdir).resolve() == runtime.lib.parent.resolve()
    assert found.version and found.version[0].isdigit()
    assert found.mmap_logs is not None


def test_nothing_found_lists_what_was_tried_and_ignores_pydarshan_util_lib(tmp_path):
    import darshan

    util = sorted(Path(darshan.__file__).resolve().parents[1].glob("darshan.libs/libdarshan-util*"))
    folders = [str(p.parent) for p in util] + [str(tmp_path)]
    env = {"PATH": str(tmp_path), "LD_LIBRARY_PATH": ":".join(folders), "DARSHAN_ROOT": str(tmp_path / "gone")}
    with pytest.raises(CollectorError) as err:
        dcol.find_runtime(env=env, prefixes=(str(tmp_path / "std"),))
    msg = str(err.value)
    assert "darshan-config on PATH (not found)" in msg and "$DARSHAN_ROOT=" in msg and "LD_LIBRARY_PATH" in msg
    assert "module load darshan" in msg and "--collector embedded" in msg


def test_generated_config_and_environment(runtime, tmp_path, monkeypatch):
    site = tmp_path / "site.conf"
    site.write_text("MOD_DISABLE LUSTRE\n")
    env = {"DARSHAN_CONFIG_PATH": str(site), "LD_PRELOAD": "/x/libother.so"}
    out = dcol.darshan_environment(runtime, job_dir=tmp_path / "job", darshan_jobid=4242, dxt=True, env=env)
    assert out["DARSHAN_ENABLE_NONMPI"] == "1"
    assert out["LD_PRELOAD"] == f"{runtime.lib}:/x/libother.so"
    assert out["DARSHAN_JOBID"] == dcol.JOBID_VAR and out[dcol.JOBID_VAR] == "4242"
    assert out["DARSHAN_LOGPATH"] == str(tmp_path / "job" / "logs")
    assert Path(out["DARSHAN_MMAP_LOGPATH"]).is_dir()
    conf = Path(out["DARSHAN_CONFIG_PATH"]).read_text()
    assert conf.startswith("# --- site configuration") and "MOD_DISABLE LUSTRE" in conf  # the site's settings kept
    assert "MAX_RECORDS 16384 POSIX,STDIO" in conf and "MODMEM 64" in conf and "NAMEMEM 16" in conf
    assert "MOD_ENABLE DXT_POSIX,DXT_MPIIO" in conf and "MAX_RECORDS 65536 DXT_POSIX,DXT_MPIIO" in conf
    stdlib = os.path.realpath(sysconfig.get_paths()["stdlib"])
    assert any(line.startswith("NAME_EXCLUDE ") and stdlib.replace(".", "\\.") in line for line in conf.splitlines())


# --- real runs -------------------------------------------------------------------------------

MANY_FILES = r'''
import os, sys, numpy
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
for i in range(1500):                      # more files than Darshan's default 1,024 records
    with open(os.path.join(out, f"chunk{i:05d}"), "wb") as fh:
        fh.write(b"x" * 100)
with open(numpy.__file__, "rb") as fh:     # a file of the interpreter's own library folders
    fh.read()
with open(os.path.join(out, "big.bin"), "wb") as fh:
    for _ in range(64):
        fh.write(b"y" * 4096)
'''


def test_record_caps_raised_interpreter_excluded_one_jobid(runtime, tmp_path):
    script = tmp_path / "many.py"
    script.write_text(MANY_FILES)
    home = {"IODIAG_HOME": str(tmp_path / "store")}
    run = run_cli("run", "--darshan", "--dxt", "--name", "many files", str(script), str(tmp_path / "out"), env=home)
    assert run.returncode == 0, run.stderr.decode()[-3000:]
    rec = find_job("last", root=tmp_path / "store")
    assert rec.id.split("-")[3:5] == ["many", "files"]
    assert rec.data["status"] == "complete", rec.data["partial_reasons"]
    prof = load_job_record(rec)
    assert prof.job.partial_modules == []  # 1,500 files did not hit a record cap
    paths = prof.files["path"].tolist()
    chunks = [p for p in paths if "/out/chunk" in p]
    assert len(chunks) == 1500
    assert not any(p.startswith(os.path.dirname(np.__file__)) for p in paths)  # NAME_EXCLUDE worked
    assert not any(p.startswith(str(rec.folder)) for p in paths)  # iodiag's own files are not the workload's
    big = prof.files["file_id"][np.array([p.endswith("/out/big.bin") for p in paths])]
    ops = prof.ops.filter((prof.ops["file_id"] == big[0]) & (prof.ops["module"] == OPS_MODULE["POSIX"]))
    writes = ops.filter(ops["op"] == OP["write"])
    assert len(writes) == 64 and set(writes["length"].tolist()) == {4096}  # DXT on request
    ids = {p.split("_id")[1].split("-")[0] for p in rec.data["artefacts"]["logs"]}
    assert ids == {str(rec.data["darshan"]["jobid"])}
    assert int(prof.processes["pid"][0]) == rec.data["pid"]


def test_default_caps_would_have_cut_the_same_workload(runtime, tmp_path):
    """Control: the same script under bare Darshan defaults is cut at 1,024 records (why the config exists)."""
    script = tmp_path / "many.py"
    script.write_text(MANY_FILES)
    logs = tmp_path / "logs"
    logs.mkdir()
    env = cli_env({"LD_PRELOAD": str(runtime.lib), "DARSHAN_ENABLE_NONMPI": "1", "DARSHAN_LOGPATH": str(logs)})
    env.pop("DARSHAN_CONFIG_PATH", None)
    if "DARSHAN_LOGPATH" not in runtime.log_path_by_env:
        pytest.skip("this runtime writes to a dated log tree; the control run needs a flat log folder")
    subprocess.run([sys.executable, str(script), str(tmp_path / "out")], env=env, check=True)
    from iodiag.analyzers.load import load_job

    prof = load_job([str(p) for p in logs.glob("*.darshan")])
    assert "POSIX" in prof.job.partial_modules
    assert sum("/out/chunk" in p for p in prof.files["path"].tolist()) < 1500


CONCURRENT = r'''
import os, sys
with open(sys.argv[1], "wb") as fh:
    fh.write(os.urandom(1 << 16))
print(sys.argv[1])
'''


def test_eight_concurrent_runs_make_eight_complete_jobs(tmp_path):
    script = tmp_path / "w.py"
    script.write_text(CONCURRENT)
    collector = "auto" if not isinstance(_runtime_or_none(), CollectorError) else "none"
    env = cli_env({"IODIAG_HOME": str(tmp_path / "store")})
    procs = [subprocess.Popen([sys.executable, "-m", "iodiag", "run", "--collector", collector, "--name", "conc",
                               str(script), str(tmp_path / f"o{i}.bin")], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE) for i in range(8)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0] * 8, [o[1][-500:] for o in outs]
    jobs = list_jobs(tmp_path / "store")
    assert len(jobs) == 8 and len({j.id for j in jobs}) == 8
    outputs = set()
    for j in jobs:
        assert j.data["status"] == "complete", j.data.get("partial_reasons")
        assert j.data["exit_code"] == 0
        outputs.add(j.data["command"][-1])
        if j.data["collector"] == "darshan":
            logs = j.data["artefacts"]["logs"]
            assert len(logs) == 1 and (j.folder / logs[0]).stat().st_size > 0
            prof = load_job_record(j)
            assert any(p == j.data["command"][-1] for p in prof.files["path"].tolist())
    assert len(outputs) == 8  # each job recorded its own command
    ids_printed = {o[1].decode().rsplit("iodiag report ", 1)[1].strip() for o in outs}
    assert ids_printed == {j.id for j in jobs}


SHUTDOWN = r'''
import os, sys
print(os.getpid(), flush=True)
fd = os.open(sys.argv[1], os.O_CREAT | os.O_RDWR, 0o644)
for i in range(200000):
    os.pwrite(fd, b"x" * 64, (i * 7919) % 50_000_000)
os.close(fd)
sys.stdin.readline()  # exit when told to
'''


def test_process_killed_while_darshan_writes_its_log_is_recovered(runtime, tmp_path):
    """Darshan unlinks its mmap log when its shutdown starts; a kill then leaves nothing -- except iodiag's link."""
    if runtime.mmap_logs is False:
        pytest.skip("this Darshan runtime was built with --disable-mmap-logs")
    script = tmp_path / "shut.py"
    script.write_text(SHUTDOWN)
    home = tmp_path / "store"
    proc = subprocess.Popen([sys.executable, "-m", "iodiag", "run", "--darshan", "--dxt", "--mmap-dir", str(tmp_path / "mmap"),
                             str(script), str(tmp_path / "f.bin")],
                            env=cli_env({"IODIAG_HOME": str(home)}), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    pid = int(proc.stdout.readline())
    deadline = time.time() + 60
    mmap = []
    while not mmap and time.time() < deadline:
        mmap = list((tmp_path / "mmap").glob("iodiag-mmap-*/*.darshan"))  # node-local, outside the job store
        time.sleep(0.01)
    assert mmap, "Darshan made no mmap log"
    time.sleep(2.0)  # the watch has linked it by now (it looks at least once a second)
    proc.stdin.write(b"\n")
    proc.stdin.flush()
    while mmap[0].exists() and time.time() < deadline:
        time.sleep(0.0005)
    os.kill(pid, signal.SIGKILL)  # Darshan's shutdown has begun: its mmap log is already unlinked
    proc.communicate(timeout=120)
    assert proc.returncode == 137
    rec = find_job("last", root=home)
    if any(LOG_DONE.search(p) for p in rec.data["artefacts"]["logs"]):
        pytest.skip("Darshan finished writing its log before the kill landed")
    assert [(r["pid"], r["when"]) for r in rec.data["recovered_logs"]] == [(pid, "during shutdown")]
    # the mmap log came into the job store because it was needed; the node-local folder is gone
    assert not list((tmp_path / "mmap").glob("iodiag-mmap-*")) and not (rec.folder / "logs" / "mmap").exists()
    prof = load_job_record(rec)  # loads either way
    assert any(i.kind == "recovered-mmap" for i in prof.issues_seen)
    if "POSIX" in prof.counters:
        # killed early in the shutdown: the kept mmap log is whole
        assert int(prof.counters["POSIX"]["POSIX_WRITES"].sum()) >= 200000  # every write up to the kill
        assert not any(i.kind == "no-end-time" for i in prof.issues_seen)  # the shutdown had stamped the end time
    else:
        # killed after Darshan began rewriting the header for the compressed log: said, not hidden
        assert any(i.kind == "unreadable" and "mmap-recovered" in i.cause for i in prof.issues_seen)
        assert prof.job.metadata["signal"] == "SIGKILL"


EXEC_SCRIPT = """#!/bin/bash
dd if=input.bin of=copy.bin bs=64k 2>/dev/null
cat input.bin > /dev/null
exec cat input.bin > /dev/null
"""


def test_a_batch_script_that_execs_is_not_a_killed_process(runtime, tmp_path):
    """A bash batch script runs dd and cat, then ``exec cat``.  Each bash image that exec replaces (the script
    itself, and each child bash forks before it execs dd or cat) leaves its mmap log: Darshan's shutdown never runs
    for it.  That is not a kill: the job is complete, the images' records are kept (the script's own read of
    app.sh is in bash's mmap log), and no log is reported as lacking an end time."""
    if runtime.mmap_logs is False:
        pytest.skip("this Darshan runtime was built with --disable-mmap-logs")
    work = tmp_path / "work"
    work.mkdir()
    data = os.urandom(409_806)
    (work / "input.bin").write_bytes(data)
    app = work / "app.sh"
    app.write_text(EXEC_SCRIPT)
    app.chmod(0o755)
    home = {"IODIAG_HOME": str(tmp_path / "store")}
    res = run_cli("run", "--darshan", "--", "./app.sh", env=home, cwd=str(work))
    assert res.returncode == 0, res.stderr.decode()[-2000:]
    rec = find_job("last", root=tmp_path / "store")
    # (the process watch may miss the short-lived shells on a loaded machine; the logs' own times then tell them)
    assert rec.data["partial"] is False and rec.data["partial_reasons"] == []
    execd = [r for r in rec.data["recovered_logs"] if r["when"] == "replaced by exec"]
    assert execd and all(set(r["exec"].split(" or ")) <= {"cat", "dd"} for r in execd)
    assert rec.data["pid"] in {r["pid"] for r in execd}  # the script's own image: replaced by `exec cat`
    assert any("replaced its image (bash) by exec (cat)" in n for n in rec.data["run_notes"])
    prof = load_job_record(rec)
    kinds = {i.kind for i in prof.issues_seen}
    assert not kinds & {"recovered-mmap", "no-end-time", "killed", "missing-log"}, prof.issues_seen
    assert not prof.job.runtime_derived and not prof.job.partial_modules
    # bash's records are kept: it read the script it ran
    posix = prof.counters["POSIX"]
    paths = dict(zip(prof.files["file_id"].tolist(), prof.files["path"].tolist()))
    script_reads = sum(int(b) for f, b in zip(posix["file_id"].tolist(), posix["POSIX_BYTES_READ"].tolist())
                       if paths.get(f) == str(app))
    assert script_reads >= len(EXEC_SCRIPT)
    # and so are the reads of dd, cat and the exec'd cat (to /dev/null: read(), which Darshan sees)
    read = sum(int(b) for f, b in zip(posix["file_id"].tolist(), posix["POSIX_BYTES_READ"].tolist())
               if paths.get(f) == str(work / "input.bin"))
    assert read == 3 * len(data)
    # the main process's bash image ends when its exec'd cat starts
    pr = prof.processes
    main = pr["pid"] == rec.data["pid"]
    assert main.sum() == 2
    ends, starts = pr["end_s"][main], pr["start_s"][main]
    assert ends.min() <= starts.max() + 1.0  # one clock (Darshan's seconds): the first image ends by the second's start
    rep = json.loads(run_cli("report", "last", "--json", env=home).stdout)
    assert not [e for e in rep["errors"] if e["kind"] in ("recovered-mmap", "no-end-time")]
    assert not any(f["id"] == "partial-log" for f in rep["findings"])
    assert any("copy_file_range" in b for b in rep["job"]["blind_spots"])  # what `cat in > out` would not show


def _blind_watch_run(monkeypatch, tmp_path, script: str, name: str = "app.sh"):
    """Run ``script`` (a bash batch script, or a Python one given its ``name``) under ``iodiag run --darshan`` in
    this process with the process watch seeing nothing, as it can happen on a loaded machine for short-lived
    processes: what is left to tell an image exec replaced from a process that died is the logs themselves."""
    from iodiag.analyzers.readers.darshan_logmeta import log_times
    from iodiag.collectors import supervise
    from iodiag.jobs.run import RunOptions, run_job

    work = tmp_path / "work"
    work.mkdir()
    data = os.urandom(409_806)
    (work / "input.bin").write_bytes(data)
    app = work / name
    app.write_text(script)
    app.chmod(0o755)
    monkeypatch.setattr(supervise._Watch, "tick", lambda self: None)
    monkeypatch.chdir(work)
    command = [f"./{name}"] + (["input.bin"] if name.endswith(".py") else [])
    res = run_job(RunOptions(command=command, collector="darshan", store=str(tmp_path / "store"), dask=False,
                             log_times=log_times))
    rec = res.record
    assert rec.data["processes"] == []  # the watch saw nothing indeed
    finals = {}
    for name in rec.data["artefacts"]["logs"]:
        m = re.search(r"_(\w+?)_id\d+-(\d+)_\d+-\d+-\d+-\d+_\d+\.darshan$", name)
        if m:
            finals[int(m[2])] = m[1]
    return rec, finals, data


def test_exec_images_are_told_by_the_logs_times_when_the_watch_sees_nothing(runtime, tmp_path, monkeypatch):
    """Each bash image that exec replaced is tied to the process whose next image's log carries its pid, from the
    logs' job records and record times only."""
    if runtime.mmap_logs is False:
        pytest.skip("this Darshan runtime was built with --disable-mmap-logs")
    rec, finals, data = _blind_watch_run(monkeypatch, tmp_path, EXEC_SCRIPT)
    assert sorted(finals.values()) == ["cat", "cat", "dd"] and rec.data["pid"] in finals
    assert rec.data["partial"] is False and rec.data["partial_reasons"] == []
    execd = {r["pid"]: r for r in rec.data["recovered_logs"]}
    assert all(r["when"] == "replaced by exec" and r["told_by"] == "the log times" for r in execd.values())
    # every image named with the pid and the program of the log that followed it: the dd child, the cat child, and
    # the script's own image replaced by `exec cat`
    assert {pid: r["exec"] for pid, r in execd.items()} == finals
    assert execd[rec.data["pid"]]["role"] == "workload main process"
    assert any(n.startswith(f"process {rec.data['pid']} (workload main process) replaced its image (bash) by exec "
                            "(cat)") and "told by the logs' times" in n for n in rec.data["run_notes"])
    prof = load_job_record(rec)
    assert not {i.kind for i in prof.issues_seen} & {"recovered-mmap", "no-end-time", "killed", "missing-log"}
    pr = prof.processes
    assert sorted(set(pr["pid"].tolist())) == sorted(finals)  # each image in the process it belongs to
    paths = dict(zip(prof.files["file_id"].tolist(), prof.files["path"].tolist()))
    posix = prof.counters["POSIX"]
    read = sum(int(b) for f, b in zip(posix["file_id"].tolist(), posix["POSIX_BYTES_READ"].tolist())
               if paths.get(f) == str(tmp_path / "work" / "input.bin"))
    assert read == 3 * len(data)


KILLED_SCRIPT = """#!/bin/bash
cat input.bin > /dev/null &
kill -KILL $$
"""


def test_a_killed_script_is_not_an_exec_when_the_watch_sees_nothing(runtime, tmp_path, monkeypatch):
    """The script starts cat in the background and kills itself: the child bash's image is an exec (its pid is
    cat's); the script's own image is a process that died, though its last record is usually before cat's log
    starts too (by time alone either image could precede cat): the earliest log is the main process's, and only
    the main process's own log can follow it."""
    if runtime.mmap_logs is False:
        pytest.skip("this Darshan runtime was built with --disable-mmap-logs")
    rec, finals, _ = _blind_watch_run(monkeypatch, tmp_path, KILLED_SCRIPT)
    assert list(finals.values()) == ["cat"] and rec.data["pid"] not in finals
    assert rec.data["signal_name"] == "SIGKILL" and rec.data["partial"] is True
    by_when = sorted((r["when"], r["pid"]) for r in rec.data["recovered_logs"])
    cat_pid = next(iter(finals))
    assert by_when[0] == ("before shutdown", None) or by_when[0] == ("before shutdown", rec.data["pid"])
    assert by_when[1:] == [("replaced by exec", cat_pid)]
    assert any("ended before Darshan's shutdown could write its log" in r for r in rec.data["partial_reasons"])
    assert not any("replaced its image" in n and "?" in n for n in rec.data["run_notes"])


KILLED_CHILD = """
import os, signal, subprocess, sys
child = os.fork()
if child == 0:  # a forked worker reads, then dies without Darshan's shutdown
    open(sys.argv[1], "rb").read()
    os.kill(os.getpid(), signal.SIGKILL)
os.waitpid(child, 0)
subprocess.run(["cat", sys.argv[1]], stdout=subprocess.DEVNULL, check=True)  # no forked image before it (vfork)
"""


def test_a_killed_python_child_is_not_the_exec_of_a_later_program_when_the_watch_sees_nothing(runtime, tmp_path,
                                                                                              monkeypatch):
    """A forked Python worker is killed; then the main process starts cat through subprocess, which leaves no
    image before cat's log.  By name and time alone the worker's image would fit as cat's predecessor; it stays a
    process that died (only shells' and exec-only wrappers' images are taken for an exec the watch missed)."""
    if runtime.mmap_logs is False:
        pytest.skip("this Darshan runtime was built with --disable-mmap-logs")
    rec, finals, data = _blind_watch_run(monkeypatch, tmp_path, KILLED_CHILD, name="w.py")
    assert "cat" in finals.values() and rec.data["pid"] in finals and len(finals) == 2
    assert [r["when"] for r in rec.data["recovered_logs"]] == ["before shutdown"]
    assert rec.data["partial"] is True and not any("replaced its image" in n for n in rec.data["run_notes"])
    prof = load_job_record(rec)
    assert "recovered-mmap" in {i.kind for i in prof.issues_seen}
    paths = dict(zip(prof.files["file_id"].tolist(), prof.files["path"].tolist()))
    posix = prof.counters["POSIX"]
    read = sum(int(b) for f, b in zip(posix["file_id"].tolist(), posix["POSIX_BYTES_READ"].tolist())
               if paths.get(f) == str(tmp_path / "work" / "input.bin"))
    assert read >= len(data)  # the dead worker's read is kept (cat's copy to /dev/null may be a copy_file_range)
