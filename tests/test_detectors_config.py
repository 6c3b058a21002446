"""Thresholds come from the typed Config (TOML-overridable); metrics are plain numbers."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from iodiag.analyzers.detectors import DETECTORS, diagnose
from iodiag.analyzers.load import load_job
from iodiag.analyzers.counters import small_bucket_count
from iodiag.analyzers.metrics import metrics_of, robust_z
from iodiag.config import load_config

CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "darshan-logs"
TIGHT = next(iter(sorted(CORPUS.glob("generated/tight-64B-pwrite-pread-dxt-full/*.darshan"))), None)
IMBALANCED = CORPUS / "darshan-logs/darshan_logs/imbalanced_io/imbalanced-io.darshan"
pytestmark = pytest.mark.skipif(TIGHT is None, reason=f"corpus not found at {CORPUS}")


@pytest.fixture(scope="module")
def tight():
    return load_job([str(TIGHT)])


def _toml(tmp_path, text):
    p = tmp_path / "iodiag.toml"
    p.write_text(text)
    return load_config(p)


def test_toml_threshold_silences_small_io(tight, tmp_path):
    assert "small-io" in {f.id for f in diagnose(tight)}
    # the file has 600,000 small ops; ask for more than that
    cfg = _toml(tmp_path, "[small_io]\nmin_ops = 700000\n")
    assert "small-io" not in {f.id for f in diagnose(tight, cfg)}


def test_toml_size_threshold_moves_the_bucket_edge(tight, tmp_path):
    # 64 B requests fall in the 0-100 B bucket; a 64 B threshold leaves no bucket wholly below it
    cfg = _toml(tmp_path, "[small_io]\nsize_bytes = 64\n")
    assert "small-io" not in {f.id for f in diagnose(tight, cfg)}


def test_mute_by_id(tight, tmp_path):
    cfg = _toml(tmp_path, '[report]\nmute = ["small-io"]\n')
    assert "small-io" not in {f.id for f in diagnose(tight, cfg)}


def test_severity_thresholds_are_configurable(tight, tmp_path):
    f = next(f for f in diagnose(tight) if f.id == "small-io")
    assert f.severity == "high"
    cfg = _toml(tmp_path, "[severity]\nhigh = 0.99\nmedium = 0.5\n")
    g = next(f for f in diagnose(tight, cfg) if f.id == "small-io")
    assert g.cost_share == f.cost_share and g.severity == "medium"  # share 0.97 < 0.99


def test_bucket_edges():
    assert small_bucket_count(100 * 1024) == (4, 102400)
    assert small_bucket_count(1024 * 1024) == (5, 1048576)
    assert small_bucket_count(50) == (0, 0)


def test_robust_z_ignores_one_outlier():
    x = np.array([10.0] * 20 + [11.0] * 20 + [100.0])
    z, med, mad = robust_z(x)
    assert med == 11.0 and mad == 1.0  # mean/stddev would be dragged by the outlier
    assert z[-1] == pytest.approx(0.6745 * 89)


def test_total_io_time_is_posix_level_seconds(tight):
    m = metrics_of(tight)
    # POSIX_F_READ_TIME 0.1379 + WRITE 0.1282 + META 0.0072 (+ STDIO ~0)
    assert m.total_io_s == pytest.approx(0.2733, abs=2e-3)
    assert m.dxt_complete


def test_shared_record_goes_to_its_slowest_rank():
    prof = load_job([str(IMBALANCED)])
    m = metrics_of(prof)
    # the one shared POSIX record names rank 0 slowest with 105,876,790,000 of its bytes
    assert int(np.argmax(m.proc_bytes)) == 0
    assert m.proc_bytes[0] > 0.99 * m.proc_bytes.sum()


def test_detectors_are_small_pure_functions():
    import inspect

    for det in DETECTORS:
        src = inspect.getsource(det)
        assert len(src.splitlines()) <= 80, det.__name__
        assert "print(" not in src


def test_access_size_table(tight):
    from iodiag.analyzers.counters import access_size_table

    t = access_size_table(tight)
    row = int(np.flatnonzero(t["read_0_100"] == t["read_0_100"].max())[0])
    # POSIX_SIZE_READ_0_100 300,000 and POSIX_SIZE_WRITE_0_100 300,000 on tight.bin
    assert t["read_0_100"][row] == 300_000 and t["write_0_100"][row] == 300_000
    assert int(t["read_0_100"].sum()) == 300_002  # + 2 tiny reads of the script itself
    per_proc = access_size_table(tight, by="proc")
    assert len(per_proc) == 1 and int(per_proc["write_0_100"][0]) == 300_000
