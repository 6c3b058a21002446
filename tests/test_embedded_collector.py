"""The embedded collector end to end: build, trace real processes, read back.

Every test runs a real Python workload in a subprocess with the environment
from ``prepare()`` and checks the profile the reader builds from its traces.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from iodiag.analyzers.readers.embedded import load_traces, raw_records
from iodiag.collectors import embedded
from iodiag.errors import CollectorError, InputNotFound
from iodiag.profile import OP, OPS_MODULE

pytestmark = pytest.mark.skipif(shutil.which("cc") is None and shutil.which("gcc") is None,
                                reason="no C compiler: the embedded collector cannot be built")


def run_traced(tmp_path: Path, code: str, *args: str, max_records: int | None = None, check: bool = True,
               wait: bool = True):
    trace = tmp_path / "traces"
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    script = tmp_path / "workload.py"
    script.write_text(textwrap.dedent(code))
    env = dict(os.environ)
    env.update(embedded.prepare(trace, max_records=max_records))
    cmd = [sys.executable, str(script), str(out), *args]
    if not wait:
        return subprocess.Popen(cmd, env=env, cwd=tmp_path, stdout=subprocess.PIPE, text=True), trace, out
    proc = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc, trace, out


def counters_of(profile, module: str, path: str) -> dict:
    ids = {p: i for i, p in profile.path_of().items()}
    t = profile.counters[module]
    rows = t.filter(t["file_id"] == np.uint64(ids[path]))
    return {c: rows[c].sum() if c not in ("file_id",) else rows[c][0] for c in rows.columns}


def ops_of(profile, path: str, op: str, module: str = "POSIX"):
    ids = {p: i for i, p in profile.path_of().items()}
    o = profile.ops
    return o.filter((o["file_id"] == np.uint64(ids[path])) & (o["op"] == OP[op]) & (o["module"] == OPS_MODULE[module]))


def test_prepare_builds_library_and_environment(tmp_path):
    env = embedded.prepare(tmp_path / "t")
    lib = Path(env["LD_PRELOAD"].split()[0])
    assert lib.is_file() and lib.name == "libiodiag_preload.so"
    assert env["IODIAG_TRACE_DIR"] == str((tmp_path / "t").resolve())
    assert int(env["IODIAG_MAX_RECORDS"]) > 0
    assert "/proc/" in env["IODIAG_EXCLUDE"].split(":")
    assert embedded.version().startswith("1.0+fmt1.")
    assert (tmp_path / "t" / "collector.json").is_file()
    # exported symbols include the glibc variants Python 3.11 and manylinux wheels call
    syms = subprocess.run(["nm", "-D", "--defined-only", str(lib)], capture_output=True, text=True).stdout
    for name in ("open64", "openat64", "__open_2", "stat64", "fstatat64", "statx", "__xstat64", "__fxstat64",
                 "pread64", "pwrite64", "readdir64", "renameat2", "unlinkat", "mkdirat", "fdopen", "fwrite"):
        assert f" T {name}\n" in syms, name


def test_missing_compiler_is_a_clear_collector_error(tmp_path, monkeypatch):
    monkeypatch.setenv("IODIAG_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setenv("CC", "no-such-cc")
    with pytest.raises(CollectorError) as exc:
        embedded.prepare(tmp_path / "t")
    assert "C compiler" in exc.value.message and "gcc" in (exc.value.hint or "")


def test_reader_rejects_missing_folder(tmp_path):
    with pytest.raises(InputNotFound):
        load_traces(tmp_path / "nope", job_id="x")


PLAIN = r"""
import os, sys, numpy as np
d = sys.argv[1]
os.makedirs(d + "/sub/deeper")
with open(d + "/w.bin", "wb", buffering=0) as f:
    for i in range(100):
        f.write(b"x" * 64)
fd = os.open(d + "/p.bin", os.O_RDWR | os.O_CREAT, 0o640)
for i in range(10):
    os.pwrite(fd, b"y" * 4096, (9 - i) * 4096)
os.fsync(fd)
os.close(fd)
for i in range(25):
    os.stat(d + "/w.bin")
os.listdir(d)
list(os.scandir(d + "/sub"))
os.rename(d + "/w.bin", d + "/v.bin")
np.arange(1000.0).tofile(d + "/n.bin")
os.unlink(d + "/p.bin")
os.rmdir(d + "/sub/deeper")
"""


def test_plain_python_workload_counts(tmp_path):
    t_before = time.time()
    _, trace, out = run_traced(tmp_path, PLAIN)
    t_after = time.time()
    prof = load_traces(trace, job_id="plain")
    assert prof.job.collector == "embedded" and prof.job.collector_version == embedded.version()
    assert prof.job.blind_spots and any("mmap" in b for b in prof.job.blind_spots)
    assert len(prof.processes) == 1 and not prof.processes["partial"][0]
    assert prof.processes["pid"][0] > 0 and prof.processes["end_kind"][0] == "exit"

    w = counters_of(prof, "POSIX", str(out / "w.bin"))
    assert w["POSIX_OPENS"] == 1 and w["POSIX_WRITES"] == 100 and w["POSIX_BYTES_WRITTEN"] == 6400
    assert w["POSIX_MAX_BYTE_WRITTEN"] == 6399
    assert w["POSIX_SIZE_WRITE_0_100"] == 100 and w["POSIX_SIZE_WRITE_100_1K"] == 0
    assert w["POSIX_STATS"] >= 25  # 25 os.stat + Python's fstat at open
    assert w["POSIX_CONSEC_WRITES"] == 99 and w["POSIX_SEQ_WRITES"] == 99  # Darshan: the first op at 0 is neither
    assert w["POSIX_RENAME_SOURCES"] == 1
    assert w["POSIX_ACCESS1_ACCESS"] == 64 and w["POSIX_ACCESS1_COUNT"] == 100
    assert w["POSIX_F_WRITE_TIME"] > 0 and w["POSIX_F_WRITE_END_TIMESTAMP"] >= w["POSIX_F_WRITE_START_TIMESTAMP"] > 0
    v = counters_of(prof, "POSIX", str(out / "v.bin"))
    assert v["POSIX_RENAME_TARGETS"] == 1 and v["POSIX_RENAMED_FROM"] != 0

    writes = ops_of(prof, str(out / "w.bin"), "write")
    assert writes["offset"].tolist() == list(range(0, 6400, 64))
    assert np.all(writes["length"] == 64) and np.all(writes["end_s"] >= writes["start_s"])
    assert t_before <= writes["start_s"][0] <= writes["end_s"][-1] <= t_after  # epoch seconds, during the run

    p = counters_of(prof, "POSIX", str(out / "p.bin"))
    assert p["POSIX_WRITES"] == 10 and p["POSIX_BYTES_WRITTEN"] == 40960 and p["POSIX_FSYNCS"] == 1
    # written backwards: only the first write (offset > initial last byte 0) is "sequential" in Darshan terms
    assert p["POSIX_MODE"] == 0o640 and p["POSIX_SEQ_WRITES"] == 1 and p["POSIX_CONSEC_WRITES"] == 0
    assert p["POSIX_SIZE_WRITE_1K_10K"] == 10
    assert sorted(ops_of(prof, str(out / "p.bin"), "write")["offset"].tolist()) == [i * 4096 for i in range(10)]
    assert len(ops_of(prof, str(out / "p.bin"), "unlink")) == 1

    assert len(ops_of(prof, str(out), "readdir")) == 1
    assert len(ops_of(prof, str(out / "sub"), "readdir")) == 1
    assert ops_of(prof, str(out / "sub"), "readdir")["length"][0] == 3  # ".", "..", "deeper"
    assert len(ops_of(prof, str(out / "sub" / "deeper"), "mkdir")) == 1
    assert len(ops_of(prof, str(out / "sub" / "deeper"), "unlink")) == 1  # rmdir

    # numpy's tofile goes through fdopen(dup(fd)) + fwrite: the STDIO module
    n = counters_of(prof, "STDIO", str(out / "n.bin"))
    assert n["STDIO_FDOPENS"] == 1 and n["STDIO_BYTES_WRITTEN"] == 8000 and n["STDIO_WRITES"] >= 1
    # the counters table carries every Darshan POSIX/STDIO counter name
    from iodiag.analyzers.readers.darshan_lib import counter_names

    for mod in ("POSIX", "STDIO"):
        missing = set(counter_names(mod)) | set(counter_names(mod, True))
        missing -= set(prof.counters[mod].columns)
        assert not missing, (mod, missing)
    assert set(prof.files["path"].tolist()) >= {str(out / "w.bin"), str(out / "v.bin"), str(out / "n.bin")}
    assert not any(p.startswith(sys.prefix + "/") for p in prof.files["path"].tolist())


def test_threads_lose_no_records(tmp_path):
    code = r"""
    import os, sys, threading
    d = sys.argv[1]
    def work(t):
        fd = os.open(f"{d}/t{t}.bin", os.O_WRONLY | os.O_CREAT, 0o644)
        for i in range(2000):
            os.pwrite(fd, b"a" * 64, i * 64)
        os.close(fd)
    ts = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    [t.start() for t in ts]; [t.join() for t in ts]
    """
    _, trace, out = run_traced(tmp_path, code)
    prof = load_traces(trace, job_id="threads")
    tids = set()
    for t in range(4):
        w = ops_of(prof, str(out / f"t{t}.bin"), "write")
        assert sorted(w["offset"].tolist()) == [i * 64 for i in range(2000)]
        assert len(set(w["thread"].tolist())) == 1
        tids |= set(w["thread"].tolist())
    assert len(tids) == 4


MP = r"""
import multiprocessing as mp, os, subprocess, sys
d = sys.argv[1]
def work(arg):
    tag, i = arg
    with open(f"{d}/{tag}-{i}.bin", "wb") as f:
        f.write(b"z" * 1000)
    return os.getpid()
if __name__ == "__main__":
    pids = {}
    for method in ("fork", "spawn", "forkserver"):
        pool = mp.get_context(method).Pool(2)
        pids[method] = set(pool.map(work, [(method, i) for i in range(4)]))
        pool.close()  # not terminate(): workers exit on their own (the with-block would SIGTERM them)
        pool.join()
    subprocess.run([sys.executable, "-c", f"open('{d}/sub.txt', 'w').write('s' * 10)"], check=True)
    print(repr(pids))
"""


def test_every_process_kind_is_traced(tmp_path):
    proc, trace, out = run_traced(tmp_path, MP)
    pids = eval(proc.stdout.strip().splitlines()[-1])  # dict of sets of ints, printed by our own script
    prof = load_traces(trace, job_id="mp")
    for method, workers in pids.items():
        for i in range(4):
            path = str(out / f"{method}-{i}.bin")
            w = ops_of(prof, path, "write")
            assert len(w) == 1 and w["length"][0] == 1000, (method, i)
            owner = int(prof.processes["pid"][w["proc"][0]])
            assert owner in workers, (method, owner, workers)
    assert len(ops_of(prof, str(out / "sub.txt"), "write")) == 1
    assert prof.job.nprocs == len(prof.processes) >= 1 + 2 + 2 + 2 + 1
    assert not any(prof.processes["partial"]), prof.issues_seen
    assert set(prof.processes["end_kind"].tolist()) <= {"exit", "exec"}


KILL = r"""
import os, sys, time
d = sys.argv[1]
with open(f"{d}/k.bin", "wb", buffering=0) as f:
    for i in range(5000):
        f.write(b"k" * 64)
    print("ready", flush=True)
    time.sleep(120)
"""


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_killed_process_leaves_a_readable_trace(tmp_path, sig):
    popen, trace, out = run_traced(tmp_path, KILL, wait=False)
    assert popen.stdout.readline().strip() == "ready"
    popen.send_signal(sig)
    popen.wait(timeout=60)
    assert popen.returncode == -sig
    prof = load_traces(trace, job_id="killed")
    assert len(prof.processes) == 1
    assert prof.processes["partial"][0] and prof.processes["end_kind"][0] == "killed"
    w = counters_of(prof, "POSIX", str(out / "k.bin"))
    assert w["POSIX_WRITES"] == 5000 and w["POSIX_BYTES_WRITTEN"] == 320000
    assert any(i.kind == "killed" for i in prof.issues_seen)
    assert prof.job.runtime_derived


def test_pool_worker_terminated_mid_run(tmp_path):
    code = r"""
    import multiprocessing as mp, os, sys, time
    d = sys.argv[1]
    def work(i):
        with open(f"{d}/w{i}.bin", "wb", buffering=0) as f:
            for k in range(300):
                f.write(b"w" * 128)
        open(f"{d}/done{i}", "w").close()
        time.sleep(60)
    if __name__ == "__main__":
        pool = mp.get_context("fork").Pool(2)
        pool.map_async(work, range(2))
        while not all(os.path.exists(f"{d}/done{i}") for i in range(2)):
            time.sleep(0.05)
        pool.terminate()  # SIGTERM to the workers
        pool.join()
    """
    _, trace, out = run_traced(tmp_path, code)
    prof = load_traces(trace, job_id="term")
    killed = prof.processes.filter(prof.processes["end_kind"] == "killed")
    assert len(killed) == 2 and all(killed["partial"])
    for i in range(2):
        assert counters_of(prof, "POSIX", str(out / f"w{i}.bin"))["POSIX_WRITES"] == 300
    parent = prof.processes.filter(prof.processes["end_kind"] == "exit")
    assert len(parent) >= 1 and not any(parent["partial"])


def test_record_cap_marks_the_job_partial(tmp_path):
    code = r"""
    import os, sys
    d = sys.argv[1]
    fd = os.open(d + "/c.bin", os.O_WRONLY | os.O_CREAT, 0o644)
    for i in range(500):
        os.write(fd, b"c" * 10)
    os.close(fd)
    """
    _, trace, out = run_traced(tmp_path, code, max_records=100)
    prof = load_traces(trace, job_id="cap")
    assert int(prof.processes["records"][0]) == 100
    assert int(prof.processes["dropped"][0]) >= 400
    assert prof.processes["partial"][0] and prof.job.partial_modules
    assert any(i.kind == "partial-module" and "cap" in i.cause for i in prof.issues_seen)
    hdr, recs = raw_records(next(trace.glob("*.iot")))
    assert len(recs) == 100 and int(hdr["dropped"]) >= 400
    assert next(trace.glob("*.iot")).stat().st_size == 4096 + 100 * 48  # bounded on disk


def test_default_keeps_every_record_and_an_address_space_limit_is_stated(tmp_path):
    """No silent cap: by default a process may write 2^32 records (disk-bound); under ``ulimit -v`` the collector
    reserves less address space and writes the smaller cap in the trace header, where the reader reports it."""
    code = r"""
    import os, sys
    d = sys.argv[1]
    fd = os.open(d + "/a.bin", os.O_WRONLY | os.O_CREAT, 0o644)
    for i in range(70000):  # past the first 65,536-record chunk of the file
        os.write(fd, b"a")
    os.close(fd)
    """
    _, trace, _ = run_traced(tmp_path, code)
    hdr, recs = raw_records(next(trace.glob("*.iot")))
    assert int(hdr["cap"]) == 1 << 32 and int(hdr["dropped"]) == 0
    prof = load_traces(trace, job_id="big")
    assert int(prof.processes["records"][0]) == len(recs) >= 70000 and not prof.processes["partial"][0]

    limited = tmp_path / "limited"
    limited.mkdir()
    env = dict(os.environ)
    env.update(embedded.prepare(limited / "traces"))
    script = tmp_path / "workload.py"
    import resource

    def limit():  # 3 GiB of address space: the 192 GiB reservation is refused, a smaller one is taken
        resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))

    proc = subprocess.run([sys.executable, str(script), str(tmp_path / "out")], env=env, capture_output=True,
                          text=True, timeout=300, preexec_fn=limit)
    assert proc.returncode == 0, proc.stderr
    traces = sorted((limited / "traces").glob("*.iot"))
    caps = [int(raw_records(t)[0]["cap"]) for t in traces]
    assert traces and all(65536 <= c < 1 << 32 for c in caps), caps
    assert any(len(raw_records(t)[1]) >= 70000 for t in traces)


def test_damaged_and_inflight_traces(tmp_path):
    _, trace, out = run_traced(tmp_path, PLAIN)
    good = next(trace.glob("*.iot"))
    n_before = len(load_traces(trace, job_id="x").ops)
    # a record caught in flight by a kill has op == 0: it is skipped, nothing else is lost
    data = bytearray(good.read_bytes())
    hdr, recs = raw_records(good)
    data[4096 + (len(recs) - 1) * 48] = 0
    good.write_bytes(bytes(data))
    assert len(load_traces(trace, job_id="x").ops) == n_before - 1
    # a trace cut inside its header is reported, the others still load
    (trace / "123-1.iot").write_bytes(b"IODIAGT1" + b"\0" * 100)
    prof = load_traces(trace, job_id="x")
    assert any(i.kind == "unreadable" and "123-1.iot" in i.path for i in prof.issues_seen)
    assert len(prof.processes) == 1


def test_detectors_fire_on_embedded_data(tmp_path):
    from iodiag.analyzers.detectors import diagnose

    code = r"""
    import os, sys
    d = sys.argv[1]
    with open(d + "/small.bin", "wb", buffering=0) as f:
        for i in range(5000):
            f.write(b"x" * 64)
    for r in range(4):
        for i in range(400):
            os.stat(d + "/small.bin")
            with open(d + "/small.bin", "rb") as f:
                f.read(10)
    """
    _, trace, out = run_traced(tmp_path, code)
    prof = load_traces(trace, job_id="diag")
    found = {f.id: f for f in diagnose(prof)}
    assert "small-io" in found and "metadata-storm" in found, list(found)
    assert str(out / "small.bin") in found["small-io"].files


def test_library_path_unfit_for_ld_preload_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("IODIAG_CACHE_DIR", str(tmp_path / "with space"))
    with pytest.raises(CollectorError) as exc:
        embedded.prepare(tmp_path / "t")
    assert "LD_PRELOAD" in exc.value.message and "IODIAG_CACHE_DIR" in exc.value.hint


def test_build_is_cached_by_source_hash(tmp_path, monkeypatch):
    monkeypatch.setenv("IODIAG_CACHE_DIR", str(tmp_path / "cache"))
    lib = embedded.build()
    assert lib.parent.name in embedded.version() or embedded.version().split(".")[-1] in lib.parent.name
    mtime = lib.stat().st_mtime_ns
    assert embedded.build() == lib and lib.stat().st_mtime_ns == mtime  # not rebuilt


def test_exit_status_and_end_are_recorded(tmp_path):
    code = r"""
    import sys
    open(sys.argv[1] + "/x.txt", "w").write("x")
    sys.exit(3)
    """
    proc, trace, out = run_traced(tmp_path, code, check=False)
    assert proc.returncode == 3
    prof = load_traces(trace, job_id="exit")
    assert prof.processes["end_kind"][0] == "exit" and prof.processes["exit_status"][0] == 3
    assert prof.processes["end_s"][0] >= prof.ops["end_s"].max()
    assert not prof.processes["partial"][0] and not prof.issues_seen


def test_c_stdio_streams(tmp_path):
    code = r"""
    import ctypes, os, sys
    libc = ctypes.CDLL(None)
    libc.fopen.restype = ctypes.c_void_p
    libc.fopen.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
    libc.fileno.argtypes = [ctypes.c_void_p]
    p = (sys.argv[1] + "/s.txt").encode()
    f = ctypes.c_void_p(libc.fopen(p, b"w"))
    for i in range(10):
        libc.fputs(b"0123456789\n", f)                     # 11 bytes each
    libc.fprintf(f, b"%05d\n", ctypes.c_int(42))           # 6 bytes
    buf = ctypes.create_string_buffer(b"z" * 100, 100)
    libc.fwrite(buf, 1, 100, f)                            # 100 bytes
    libc.fflush(f)
    libc.fsync(libc.fileno(f))
    libc.fclose(f)
    f = ctypes.c_void_p(libc.fopen(p, b"r"))
    out = ctypes.create_string_buffer(200)
    libc.fgets(out, 200, f)                                # one line: 11 bytes
    libc.fread(out, 1, 50, f)                              # 50 bytes
    libc.fseek(f, 5, 0)
    libc.fclose(f)
    assert not libc.fopen(b"/nonexistent-dir/x", b"r")
    """
    _, trace, out = run_traced(tmp_path, code)
    prof = load_traces(trace, job_id="stdio")
    s = counters_of(prof, "STDIO", str(out / "s.txt"))
    assert s["STDIO_OPENS"] == 2 and s["STDIO_FDOPENS"] == 0
    assert s["STDIO_WRITES"] == 12 and s["STDIO_BYTES_WRITTEN"] == 10 * 11 + 6 + 100
    assert s["STDIO_READS"] == 2 and s["STDIO_BYTES_READ"] == 11 + 50
    assert s["STDIO_FLUSHES"] == 1 and s["STDIO_SEEKS"] == 1
    assert s["STDIO_MAX_BYTE_WRITTEN"] == 215 and s["STDIO_MAX_BYTE_READ"] == 60
    assert s["STDIO_F_WRITE_TIME"] > 0 and s["STDIO_F_META_TIME"] > 0
    p = counters_of(prof, "POSIX", str(out / "s.txt"))
    assert p["POSIX_FSYNCS"] == 1  # fsync(fileno(f)) is a POSIX call on the stream's file
    assert p["POSIX_WRITES"] == 0  # glibc's buffer flushes are not program calls
    writes = ops_of(prof, str(out / "s.txt"), "write", module="STDIO")
    assert writes["offset"].tolist()[:3] == [0, 11, 22]
    assert int(prof.job.metadata["failed_ops"]) >= 1  # the fopen of a missing file


def test_folder_without_traces_is_an_empty_job_with_an_issue(tmp_path):
    embedded.prepare(tmp_path / "t")  # a run whose workload did no traced I/O
    prof = load_traces(tmp_path / "t", job_id="none")
    assert prof.job.nprocs == 0 and len(prof.ops) == 0 and len(prof.processes) == 0
    assert [i.kind for i in prof.issues_seen] == ["missing-log"]
    assert prof.job.collector == "embedded"


def test_dask_worker_processes_are_traced(tmp_path):
    code = r"""
    import os, sys
    from dask.distributed import Client, LocalCluster
    d = sys.argv[1]
    def work(i):
        with open(f"{d}/task{i}.bin", "wb") as f:
            f.write(b"d" * 4096)
        return os.getpid()
    if __name__ == "__main__":
        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cl, Client(cl) as c:
            pids = set(c.gather(c.map(work, range(8))))
            workers = set(c.run(os.getpid).values())
        print(sorted(pids), sorted(workers))
    """
    proc, trace, out = run_traced(tmp_path, code)
    line = proc.stdout.strip().splitlines()[-1]
    task_pids = set(int(x) for x in line.split("] [")[0].strip("[]").split(", "))
    worker_pids = set(int(x) for x in line.split("] [")[1].strip("[]").split(", "))
    assert task_pids <= worker_pids and len(worker_pids) == 2
    prof = load_traces(trace, job_id="dask")
    traced = set(prof.processes["pid"].tolist())
    assert task_pids <= traced  # the workers (spawned by nannies) left traces
    for i in range(8):
        w = ops_of(prof, str(out / f"task{i}.bin"), "write")
        assert len(w) == 1 and w["length"][0] == 4096
        assert int(prof.processes["pid"][w["proc"][0]]) in task_pids
