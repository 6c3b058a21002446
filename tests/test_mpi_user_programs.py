"""Small MPI programs of the kind HPC users write, run here under an MPI-enabled Darshan runtime (skipped with the
reason when ``mpicc``/``mpiexec`` or the runtime are absent): what iodiag says about them must match what the
program does (which ranks, which calls, which direction).  Programs in tests/cprogs."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from conftest import REPO
from iodiag.analyzers.detectors import diagnose
from iodiag.analyzers.load import load_job
from test_detectors_layer_time import _by, _mpi_runtime

PROGS = REPO / "tests" / "cprogs"


def _run(tmp_path: Path, prog: str, args: list[str], nprocs: int = 4) -> Path:
    lib = _mpi_runtime()
    exe = tmp_path / prog
    subprocess.run(["mpicc", "-O2", "-o", str(exe), str(PROGS / f"{prog}.c")], check=True, capture_output=True)
    logs = tmp_path / f"logs-{prog}"
    logs.mkdir()
    env = {**os.environ, "DARSHAN_LOGPATH": str(logs), "LD_PRELOAD": str(lib)}
    subprocess.run(["mpiexec", "-n", str(nprocs), str(exe), *args], check=True, env=env, capture_output=True,
                   timeout=120)
    got = sorted(logs.glob("*.darshan"))
    assert len(got) == 1, got
    return got[0]


def test_small_writes_of_a_shared_record_name_every_rank_not_rank_0(tmp_path):
    """4 ranks pwrite 1000-byte pieces into one shared file: Darshan keeps one record for it (rank -1).  small-io
    named process 0 alone (the shared record's -1 clipped to 0): every rank wrote; a reduced record names none."""
    log = _run(tmp_path, "pwrite_shared", [str(tmp_path / "pw.dat"), "3000", "1000"])
    prof = load_job([str(log)])
    px = prof.module("POSIX")
    assert (px["proc"][px["POSIX_WRITES"] > 0] < 0).all()  # the shared record: no process named by Darshan
    f = _by(diagnose(prof), "small-io")
    assert f.evidence["small_writes"] == 4 * 3000
    assert f.processes == []  # no rank singled out: the record is every rank's
