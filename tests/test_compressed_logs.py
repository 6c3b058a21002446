"""Every compression Darshan writes is read: bzip2 regions (decompressed by iodiag when darshan-util was built
without bzip2), whole-file gzip/bzip2 logs, and a Darshan 1.x/2.x log gets a message that says what it is.

The bzip2 logs in tests/data/bzip2-logs were made from corpus logs with a darshan-util built with bzip2 (see the
README there)."""

from __future__ import annotations

import bz2
import gzip
import json
import struct
from pathlib import Path

import pytest

from conftest import REPO, corpus_path, run_cli

DATA = REPO / "tests" / "data" / "bzip2-logs"
SAME_AS_CORPUS = {
    "mpi-io-test-x86_64-3.5.0.darshan": "darshan-logs/darshan_logs/release_logs/mpi-io-test-x86_64-3.5.0.darshan",
    "0_python_id9100001-2061_11-22-83100-17579201604846787637_1.darshan":
        "generated/dask-localcluster-2workers-dxt-jobid/0_python_id9100001-2061_11-22-83100-17579201604846787637_1.darshan",
    "shane_ior-HDF5_id438090-438090_11-9-41522-17417065676046418211_1.darshan":
        "darshan-logs/darshan_logs/ior_pnetcdf_hdf5/shane_ior-HDF5_id438090-438090_11-9-41522-17417065676046418211_1.darshan",
}
TREDDY = "treddy_mpi-io-test_id4373053_6-2-60198-9815401321915095332_1.darshan"


def _report(path: Path) -> dict:
    res = run_cli("report", str(path), "--json")
    assert res.returncode == 0, res.stderr.decode()[-2000:]
    rep = json.loads(json.dumps(json.loads(res.stdout)).replace(json.dumps(str(path))[1:-1], "<log>"))
    # darshan-util sorts the mount table by path length with qsort (ties in no defined order), so a log it
    # rewrote (darshan-convert) lists mounts of equal length in another order: compared as a set
    rep["job"]["mounts"] = sorted(rep["job"]["mounts"], key=json.dumps)
    return rep


def test_pydarshan_refuses_bzip2_regions_itself():
    """The premise: the darshan-util iodiag loads cannot open these logs on its own (when it can, iodiag simply
    lets it: nothing to test here)."""
    from iodiag.analyzers.readers.darshan_lib import lib

    ffi, L = lib()
    h = L.darshan_log_open(str(DATA / "bzip2" / TREDDY).encode())
    if h != ffi.NULL:
        L.darshan_log_close(h)
        pytest.skip("this darshan-util reads bzip2 itself")
    assert (DATA / "bzip2" / TREDDY).read_bytes()[16] == 1  # the header's compression type: DARSHAN_BZIP2_COMP


@pytest.mark.parametrize("name", sorted(SAME_AS_CORPUS))
def test_a_bzip2_log_reports_exactly_what_its_zlib_original_does(name):
    assert _report(DATA / "bzip2" / name) == _report(corpus_path(SAME_AS_CORPUS[name]))


def test_a_bzip2_log_with_both_dxt_modules_reports_what_its_zlib_twin_does():
    bz, zl = _report(DATA / "bzip2" / TREDDY), _report(DATA / "zlib" / TREDDY)
    assert bz == zl
    assert bz["job"]["nprocs"] == 32 and {"DXT_POSIX", "DXT_MPIIO"} <= set(bz["job"]["modules"])


def test_bzip2_records_are_darshan_utils_to_the_byte():
    """The arrays decoded from the bzip2 log (regions decompressed by iodiag, records by darshan-util) equal the
    zlib twin's, module by module."""
    import numpy as np

    from iodiag.analyzers.readers.darshan import read_log

    a, b = read_log(str(DATA / "bzip2" / TREDDY)), read_log(str(DATA / "zlib" / TREDDY))
    assert set(a["mods"]) == set(b["mods"]) and not a["losses"] and a["names"] == b["names"]
    for mod, cols in a["mods"].items():
        for k, v in cols.items():
            if isinstance(v, np.ndarray):
                assert np.array_equal(v, b["mods"][mod][k]), (mod, k)


@pytest.mark.parametrize("kind", ["gz", "bz2"])
def test_whole_file_compressed_logs_are_read_transparently(tmp_path, kind):
    src = corpus_path(SAME_AS_CORPUS["mpi-io-test-x86_64-3.5.0.darshan"])
    packed = tmp_path / f"mpi-io-test-x86_64-3.5.0.darshan.{kind}"
    packed.write_bytes((gzip.compress if kind == "gz" else bz2.compress)(src.read_bytes()))
    assert _report(packed) == _report(src)
    # and a bzip2-region log gzip'd whole: both layers
    inner = DATA / "bzip2" / "mpi-io-test-x86_64-3.5.0.darshan"
    both = tmp_path / "mpi-io-test-x86_64-3.5.0.darshan.gz"
    both.write_bytes(gzip.compress(inner.read_bytes()))
    assert _report(both) == _report(src)


def _darshan2_log(version: bytes = b"2.06") -> bytes:
    """The start of a Darshan 2.x log: struct darshan_job of Darshan 2.3.1 (version string, CP_MAGIC_NR, uid,
    start, end, nprocs, jobid, metadata), then nothing iodiag reads."""
    job = struct.pack("<8sqqqqqq", version, 6567223, 1000, 1_300_000_000, 1_300_000_060, 4, 1234)
    return job + b"lib_ver=2.3.1\n".ljust(1024, b"\0") + b"\0" * 2048


@pytest.mark.parametrize("packed", ["plain", "gzip"])
def test_a_darshan2_log_is_named_and_darshan_convert_is_the_next_step(tmp_path, packed):
    raw = _darshan2_log()
    log = tmp_path / ("old.darshan" if packed == "plain" else "old.darshan.gz")
    log.write_bytes(raw if packed == "plain" else gzip.compress(raw))
    res = run_cli("report", str(log))
    err = res.stderr.decode()
    assert res.returncode == 6, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert str(log) in err and "Darshan 2.x log (format 2.06" in err and "darshan-convert" in err
    assert ("gzip-compressed" in err) == (packed == "gzip")
    assert "not a Darshan log" not in err


def test_a_damaged_gzip_file_says_so(tmp_path):
    src = corpus_path(SAME_AS_CORPUS["mpi-io-test-x86_64-3.5.0.darshan"])
    log = tmp_path / "cut.darshan.gz"
    log.write_bytes(gzip.compress(src.read_bytes())[:-40])
    res = run_cli("report", str(log))
    err = res.stderr.decode()
    assert res.returncode == 6 and "gzip-compressed file that does not decompress" in err and "gzip -t" in err
