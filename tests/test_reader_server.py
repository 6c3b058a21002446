"""The long-lived reader process used by site ingest gives exactly what the forked reader gives."""

from __future__ import annotations

import os
import pickle

import pytest

from iodiag.analyzers.readers.isolate import ReaderServer, read_logs

MODULES = ("POSIX", "MPI-IO", "STDIO", "H5F", "H5D", "LUSTRE")


def _logs(corpus):
    base = corpus
    names = [
        "darshan-logs/darshan_logs/imbalanced_io/imbalanced-io.darshan",  # LUSTRE, 1,001 records
        "generated/edge-cases/truncated-900B_treddy_mpi-io-test_id4373053_6-2-60198-9815401321915095332_1.darshan",  # crashes darshan-util
        "darshan-logs/darshan_logs/release_logs/mpi-io-test-x86_64-3.4.4.darshan",
        "generated/edge-cases/truncated-20000B_treddy_mpi-io-test_id4373053_6-2-60198-9815401321915095332_1.darshan",
    ]
    paths = [str(base / n) for n in names]
    missing = [p for p in paths if not os.path.exists(p)]
    if missing:
        pytest.skip(f"corpus log missing: {missing[0]}")
    return paths


def _key(r):
    return r.path, r.error_kind, r.error, pickle.dumps(r.data) if r.data is not None else None


def test_server_matches_forked_reader_and_survives_a_crash(corpus):
    paths = _logs(corpus)
    forked = [_key(r) for r in read_logs(paths, MODULES, timeout_s=60)]
    srv = ReaderServer()
    try:
        served = [_key(r) for r in srv.read(paths, MODULES, names=True, timeout_s=60)]
        assert served == forked
        assert [k[1] for k in served] == [None, "crashed", None, None]
        assert "SIGSEGV" in served[1][2] or "SIGABRT" in served[1][2]
        # the crash replaced the server; the replacement keeps serving requests
        again = [_key(r) for r in srv.read(paths[2:], MODULES, names=True, timeout_s=60)]
        assert again == forked[2:]
    finally:
        srv.close()
    assert srv.proc is None


def test_abandoned_request_does_not_leak_into_the_next(corpus):
    paths = _logs(corpus)
    good = [paths[0], paths[2], paths[0], paths[2]]
    srv = ReaderServer()
    try:
        gen = srv.read(good, MODULES, names=True, timeout_s=60)
        first = next(gen)
        assert first.path == good[0] and first.data is not None
        gen.close()  # the caller stops after one log; the server may still be sending the others
        out = list(srv.read([paths[2]], MODULES, names=True, timeout_s=60))
        assert [r.path for r in out] == [paths[2]]
        assert out[0].data["header"]["nprocs"] == 4
    finally:
        srv.close()



def test_request_that_raises_in_the_caller_does_not_leak_into_the_next(corpus):
    """A progress callback that raises mid-request (or Ctrl-C there) leaves the server busy sending:
    the next request must get its own logs only, not the rest of the first one's."""
    paths = _logs(corpus)
    good = [paths[0], paths[2], paths[0], paths[2]]
    srv = ReaderServer()

    def boom(n):
        raise KeyboardInterrupt

    try:
        with pytest.raises(KeyboardInterrupt):
            list(srv.read(good, MODULES, names=True, timeout_s=60, progress=boom))
        out = list(srv.read([paths[2]], MODULES, names=True, timeout_s=60))
        assert [r.path for r in out] == [paths[2]]
        assert out[0].data["header"]["nprocs"] == 4
    finally:
        srv.close()

def test_a_server_that_cannot_start_falls_back_to_forking(corpus, monkeypatch):
    import iodiag.analyzers.readers.isolate as iso

    paths = _logs(corpus)
    forked = [_key(r) for r in read_logs(paths, MODULES, timeout_s=60)]
    monkeypatch.setattr(iso, "_SERVE", "import sys; sys.exit(3)\n")  # an interpreter that dies at once
    srv = ReaderServer()
    try:
        assert [_key(r) for r in srv.read(paths, MODULES, names=True, timeout_s=60)] == forked
    finally:
        srv.close()
