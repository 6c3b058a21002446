"""weak-scaling-loss from sets of real logs of the same program (mpi-io-test)."""

from __future__ import annotations

from pathlib import Path

import pytest

from iodiag.analyzers.detectors.scaling import compare_scaling
from iodiag.analyzers.load import load_job

LOGS = Path(__file__).resolve().parents[1].parent / "shared" / "darshan-logs" / "darshan-logs" / "darshan_logs"
REL = LOGS / "release_logs"
DXT32 = next(iter(sorted((LOGS / "mpi_io_test_with_dxt").glob("*.darshan"))), None)
pytestmark = pytest.mark.skipif(DXT32 is None, reason=f"corpus not found at {LOGS}")


def test_4_to_32_processes_loses_per_process_bandwidth():
    small = load_job([str(REL / "mpi-io-test-x86_64-3.4.2.darshan")])
    big = load_job([str(DXT32)])
    (f,) = compare_scaling([big, small])
    # 4 procs: 32 MiB each in ~0.023 s of I/O; 32 procs: 128 MiB each in ~1.8 s (mpi-io-test, 4 iterations)
    assert f.evidence["processes"] == [4, 32]
    assert f.evidence["strictly_weak"] is False  # 4x the bytes per process: compared by bandwidth
    assert f.evidence["efficiency"][1] < 0.2
    assert 0 < f.cost_share <= 1


def test_same_process_count_is_not_a_sweep():
    a = load_job([str(REL / "mpi-io-test-x86_64-3.4.2.darshan")])
    b = load_job([str(REL / "mpi-io-test-x86_64-3.4.3.darshan")])
    assert compare_scaling([a, b]) == []
