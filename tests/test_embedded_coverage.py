"""The coverage table's claim, re-checked: collector counts match `strace -f` on the same run.

Uses benchmarks/embedded_coverage.py (the script that writes
docs/embedded-coverage.md).  Plain Python and multiprocessing run in the
default suite; netCDF4, h5py and the Zarr-with-Dask-workers workloads are
slow and run with ``-m slow``.
"""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

pytestmark = [
    pytest.mark.skipif(shutil.which("strace") is None, reason="strace is not installed (Debian: apt-get install strace)"),
    pytest.mark.skipif(shutil.which("cc") is None and shutil.which("gcc") is None, reason="no C compiler for the embedded collector"),
]


def _coverage():
    spec = importlib.util.spec_from_file_location("embedded_coverage", REPO / "benchmarks" / "embedded_coverage.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _check(name: str, tmp_path: Path) -> dict:
    cov = _coverage()
    res = cov.run_workload(name, tmp_path)
    rows = {r["class"]: r for r in cov.rows(res)}
    for cls, r in rows.items():
        if r["program"] == 0:
            assert r["collector"] == 0, (name, cls, r)
        else:
            assert abs(r["diff_pct"]) <= 2.0, (name, cls, r, res["mismatch"])
    # failed path calls (missing files probed by exists(), by HDF5, by Dask) are seen too, flagged
    for cls in ("open", "stat", "mkdir", "rename", "unlink"):
        assert res["failed_collector"].get(cls, 0) == res["failed_strace"].get(cls, 0), (name, cls)
    # every byte written reached the files through calls the collector saw (POSIX or STDIO)
    assert res["bytes_collector"].get("write", 0) == res["bytes_strace"].get("write", 0)
    return rows


def test_plain_python_matches_strace(tmp_path):
    rows = _check("plain", tmp_path)
    # the workload exercises every class, so none of the checks above is vacuous
    for cls in ("open", "stat", "read", "write", "seek", "fsync", "readdir", "mkdir", "rename", "unlink", "close"):
        assert rows[cls]["program"] > 0, cls
    assert rows["stat"]["program"] >= 600  # 300 x (stat, lstat); the 300 failed exists() are not counted


def test_multiprocessing_fork_spawn_forkserver_matches_strace(tmp_path):
    rows = _check("multiprocessing", tmp_path)
    assert rows["write"]["program"] >= 18  # each of the 18 pool tasks wrote its file


@pytest.mark.slow
@pytest.mark.parametrize("name", ["netcdf4", "h5py", "zarr-dask"])
def test_library_workloads_match_strace(tmp_path, name):
    rows = _check(name, tmp_path)
    assert rows["open"]["program"] > 0 and rows["read"]["program"] > 0


def test_strace_parser_on_real_lines(tmp_path):
    cov = _coverage()
    (tmp_path / "s.100").write_text(
        '1.000001 openat(AT_FDCWD</w>, "d/x.bin", O_RDONLY|O_CLOEXEC) = 3</w/d/x.bin>\n'
        '1.000002 newfstatat(3</w/d/x.bin>, "", {st_mode=S_IFREG|0644, st_size=10, ...}, AT_EMPTY_PATH) = 0\n'
        '1.000003 read(3</w/d/x.bin>, "0123456789", 4096) = 10\n'
        '1.000004 lseek(10</tmp/#123>(deleted), 0, SEEK_CUR) = 0\n'
        '1.000005 unlinkat(4</w/d>, "sub", AT_REMOVEDIR) = 0\n'
        '1.000006 newfstatat(AT_FDCWD</w>, "/w/missing", 0x7ffd, 0) = -1 ENOENT (No such file or directory)\n'
        '1.000007 clone3({flags=CLONE_VM|CLONE_THREAD, ...}, 88) = 101\n'
        '1.000008 close(3</w/d/x.bin>) = 0\n')
    calls = cov.parse_strace(tmp_path / "s", "/w")
    by = [(c["cls"], c["path"], c["ok"]) for c in calls]
    assert by == [("open", "/w/d/x.bin", True), ("stat", "/w/d/x.bin", True), ("read", "/w/d/x.bin", True),
                  ("seek", "/tmp/#123", True), ("unlink", "/w/d/sub", True), ("stat", "/w/missing", False),
                  ("close", "/w/d/x.bin", True)]
    assert calls[2]["bytes"] == 10 and calls[0]["fd"] == 3
