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
