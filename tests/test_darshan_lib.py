"""darshan-util's C declarations are parsed once and kept in iodiag's cache (cffi's out-of-line ABI module)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from conftest import corpus_path

LOG = "darshan/darshan-util/pydarshan/darshan/tests/input/sample-badost.darshan"

PROBE = r"""
import json, sys
from iodiag.analyzers.readers.darshan_lib import lib, counter_names
from iodiag.analyzers.readers.isolate import read_logs
ffi, L = lib()
res = next(iter(read_logs([sys.argv[1]], isolate=False)))
print(json.dumps({
    "parsed": "cffi.api" in sys.modules,
    "sizes": [ffi.sizeof(s) for s in ("struct darshan_posix_file", "struct darshan_mpiio_file", "struct segment_info")],
    "offset": ffi.offsetof("struct darshan_posix_file", "counters"),
    "names": len(counter_names("POSIX")),
    "posix_rows": len(res.data["mods"]["POSIX"]["file_id"]) if res.data else None,
    "error": res.error,
}))
"""


def _probe(env_extra: dict) -> dict:
    env = dict(os.environ, **env_extra)
    res = subprocess.run([sys.executable, "-c", PROBE, str(corpus_path(LOG))], capture_output=True, text=True,
                         env=env, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    return json.loads(res.stdout)


def test_declarations_are_cached_and_give_the_same_layout(tmp_path):
    cache = tmp_path / "cache"
    first = _probe({"IODIAG_CACHE_DIR": str(cache)})
    made = list((cache / "cffi").glob("_iodiag_darshan_ffi_*.py"))
    assert len(made) == 1
    second = _probe({"IODIAG_CACHE_DIR": str(cache)})
    assert first["parsed"] is True and second["parsed"] is False  # the second process did not parse the header
    for k in ("sizes", "offset", "names", "posix_rows", "error"):
        assert first[k] == second[k], k
    assert first["posix_rows"] and first["error"] is None


def test_unwritable_or_damaged_cache_still_reads(tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")  # the cache root is a file: nothing can be written under it
    a = _probe({"IODIAG_CACHE_DIR": str(blocker)})
    cache = tmp_path / "cache"
    _probe({"IODIAG_CACHE_DIR": str(cache)})
    (made,) = (cache / "cffi").glob("_iodiag_darshan_ffi_*.py")
    made.write_text("raise RuntimeError('damaged')\n")
    b = _probe({"IODIAG_CACHE_DIR": str(cache)})
    assert a["parsed"] and b["parsed"]
    assert a["sizes"] == b["sizes"] and a["posix_rows"] == b["posix_rows"] and a["posix_rows"]


DXT_LOG = ("dxt-explorer/sample/jeanbez_8_benchmark_parallel_id45195555_8-6-50011-11681279140261054765_"
           "1628283217.darshan")


def _arrays(obj, path=""):
    import numpy as np

    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _arrays(v, f"{path}/{k}")
    elif isinstance(obj, np.ndarray):
        yield path, obj


def test_large_results_cross_out_of_band_and_equal_in_band(monkeypatch):
    """The forked reader hands a 10 MB DXT log back through a memfd; the arrays are the in-band ones, writable."""
    import numpy as np

    from iodiag.analyzers.readers import isolate, wire  # wire.py: the messages between reader and parent

    log = str(corpus_path(DXT_LOG))
    sent = []
    real = wire._oob_load
    monkeypatch.setattr(wire, "_oob_load", lambda msg, sock: sent.append(msg[3]) or real(msg, sock))
    (oob,) = list(isolate.read_logs([log]))
    assert sent and sent[0] > 8 << 20, "the DXT segments (10 MB) should have crossed out of band"
    monkeypatch.setattr(wire, "OOB_MIN_BYTES", 1 << 62)
    (inband,) = list(isolate.read_logs([log]))
    assert len(sent) == 1
    a, b = dict(_arrays(oob.data)), dict(_arrays(inband.data))
    assert a.keys() == b.keys() and len(a) > 10
    for k in a:
        assert a[k].dtype == b[k].dtype and np.array_equal(a[k], b[k]), k
    col = a["/mods/DXT_POSIX/segments"]
    assert col.flags.writeable
    col[0, 0] += 1  # a private mapping: writing changes this array only
    assert col[0, 0] == b["/mods/DXT_POSIX/segments"][0, 0] + 1


def test_while_reading_runs_once_in_the_parent_and_cannot_break_the_read():
    from iodiag.analyzers.readers import isolate

    logs = [str(corpus_path(LOG)), str(corpus_path(DXT_LOG))]
    calls = []
    out = list(isolate.read_logs(logs, while_reading=lambda: calls.append(os.getpid())))
    assert calls == [os.getpid()]
    assert [r.error for r in out] == [None, None]

    def boom():
        raise RuntimeError("warm-up failed")

    again = list(isolate.read_logs(logs, while_reading=boom))
    assert [r.error for r in again] == [None, None]
    assert len(again[1].data["mods"]["DXT_POSIX"]["segments"]) == len(out[1].data["mods"]["DXT_POSIX"]["segments"]) > 0


def test_each_large_array_has_its_own_mapping(monkeypatch):
    """An array the parent keeps must not keep the rest of the log's memory alive: every out-of-band array is
    its own mapping, and small arrays (per-record columns) are ordinary in-band arrays."""
    import mmap

    import numpy as np

    from iodiag.analyzers.readers import isolate

    (res,) = list(isolate.read_logs([str(corpus_path(DXT_LOG))]))
    mapped, small = [], []
    for path, arr in _arrays(res.data):
        base = arr
        while isinstance(base, np.ndarray) and base.base is not None:
            base = base.base
        owner = base.obj if isinstance(base, memoryview) else base
        if isinstance(owner, mmap.mmap):
            mapped.append((path, owner))
        elif arr.nbytes < isolate.OOB_MIN_BUFFER:
            small.append(path)
    assert len(mapped) >= 2, "the DXT segment blocks should have crossed out of band"
    assert len({id(m) for _, m in mapped}) == len(mapped), "two arrays share one mapping"
    assert "/mods/DXT_POSIX/rec_rank" in small and "/mods/DXT_POSIX/segments" in {p for p, _ in mapped}


def test_a_result_that_cannot_be_mapped_is_that_logs_error(monkeypatch):
    """If the parent cannot map a log's result (no memory, a lost descriptor), that log gets an error naming the
    cause and the next log is still read, from its own memory (checked against a second reading)."""
    import numpy as np

    from iodiag.analyzers.readers import isolate

    import mmap

    real, calls = mmap.mmap, []

    def fail_first(*a, **k):  # the first log's first mapping fails, as it would without memory
        calls.append(1)
        if len(calls) == 1:
            raise OSError(12, "Cannot allocate memory")
        return real(*a, **k)

    monkeypatch.setattr(mmap, "mmap", fail_first)
    out = list(isolate.read_logs([str(corpus_path(DXT_LOG)), str(corpus_path(LOG))]))
    assert out[0].data is None and out[0].error_kind == "unreadable"
    assert "could not be received" in out[0].error and "Cannot allocate memory" in out[0].error
    (again,) = list(isolate.read_logs([str(corpus_path(LOG))]))
    assert out[1].error is None
    assert np.array_equal(out[1].data["mods"]["POSIX"]["counters"], again.data["mods"]["POSIX"]["counters"])


def test_a_prefetched_reader_is_adopted_for_its_log_and_stopped_otherwise(monkeypatch):
    """`iodiag report LOG` starts LOG's reader before it has loaded its configuration; read_logs adopts that
    child (one fork in all, the same result) when asked for the same log, and a prefetch nobody adopts is
    stopped and reaped by close()."""
    import numpy as np

    from iodiag.analyzers.readers import isolate

    log = str(corpus_path(LOG))
    (plain,) = list(isolate.read_logs([log]))
    forks = []
    real = isolate._start_child
    monkeypatch.setattr(isolate, "_start_child", lambda *a: forks.append(a[0]) or real(*a))
    pre = isolate.prefetch([log])
    (got,) = list(isolate.read_logs([os.path.join(os.path.dirname(log), ".", os.path.basename(log))], prefetched=pre))
    pre.close()
    assert len(forks) == 1 and got.error is None
    assert np.array_equal(got.data["mods"]["POSIX"]["counters"], plain.data["mods"]["POSIX"]["counters"])

    other = isolate.prefetch([log])
    pid = other._child[0]
    (dxt,) = list(isolate.read_logs([str(corpus_path(DXT_LOG))], prefetched=other))  # another log: not adopted
    assert dxt.error is None and len(forks) == 3
    other.close()
    other.close()  # idempotent
    try:
        os.waitpid(pid, os.WNOHANG)
        raise AssertionError("the unadopted reader child was not reaped")
    except ChildProcessError:
        pass
