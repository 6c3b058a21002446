"""The speed-ups in front of the detectors change no result, on every readable corpus log.

* Each detector module may have cheap ``_may_*`` gates: job totals (module column sums) or record-level
  tests that say a detector cannot fire before it builds per-file tables.  With every gate forced open,
  ``diagnose`` must return exactly the same findings (site modules and all modules with DXT).
* ``pcol`` (positive counter columns made once per profile from the loader's 2-D arrays) equals ``col``;
  ``module_sums`` equals per-column sums; ``median`` equals ``np.median``.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from iodiag.analyzers.detectors import access, coverage, diagnose, metadata, mpi, parallel, smallio
from iodiag.analyzers.load import build_profile
from iodiag.analyzers.counters import col, module_sums, pcol
from iodiag.analyzers.nputil import median
from iodiag.analyzers.readers.darshan import read_log
from iodiag.analyzers.readers.isolate import LogResult
from iodiag.config import Config
from site_archive import corpus_logs

GATED = (access, coverage, metadata, mpi, parallel, smallio)


def _gates() -> list[tuple[object, str]]:
    return [(mod, name) for mod in GATED for name, fn in inspect.getmembers(mod, inspect.isfunction)
            if name.startswith("_may_") and fn.__module__ == mod.__name__]


def _profiles(modules):
    """(name, a function building a fresh profile) per readable corpus log; modules=() reads all of them."""
    for p in corpus_logs():
        try:
            data = read_log(str(p), modules, names=True) if modules else read_log(str(p), names=True)
        except Exception:  # noqa: BLE001 - unreadable corpus logs are other tests' business
            continue
        yield p.name, lambda data=data: build_profile([LogResult(path="x", data=data)])


def _plain(findings) -> list[dict]:
    return [dict(f.__dict__) for f in findings]


def gates_agree(make, cfg, monkeypatch) -> list[dict]:
    """Findings of a fresh profile from ``make()`` with every gate as written and with every gate forced
    open must be equal; returns them.  Used here on the corpus and by the collector tests on their jobs."""
    want = _plain(diagnose(make(), cfg))
    with monkeypatch.context() as mp:
        for mod, g in _gates():
            mp.setattr(mod, g, lambda *_a: True)
        got = _plain(diagnose(make(), cfg))
    assert got == want
    return want


@pytest.mark.parametrize("which", ["site", "all"])
def test_gates_never_hide_a_finding(which, monkeypatch):
    cfg = Config()
    gates = _gates()
    assert len(gates) >= 8, gates
    closed = {name: 0 for _, name in gates}
    seen = 0
    for name, make in _profiles(cfg.site.modules if which == "site" else ()):
        prof = make()
        want = _plain(diagnose(prof, cfg))
        for mod, g in gates:
            closed[g] += not getattr(mod, g)(prof, cfg)
        with monkeypatch.context() as mp:
            for mod, g in gates:
                mp.setattr(mod, g, lambda *_a: True)
            got = _plain(diagnose(make(), cfg))
        assert got == want, name
        seen += 1
    assert seen >= 100
    # every gate is exercised: it closes on some corpus logs (so the comparison above tests it)
    assert all(n > 0 for n in closed.values()), closed


def test_gate_of_a_tight_config_still_agrees(monkeypatch):
    """Thresholds come from Config: with tight ones the gates open where the detectors fire."""
    from dataclasses import replace
    base = Config()
    cfg = replace(base, small_io=replace(base.small_io, min_ops=1), access=replace(base.access, min_ops=1, redundant_min_bytes=1,
                  shared_min_ranks=2), metadata=replace(base.metadata, min_ops=1), small_files=replace(base.small_files, count=1))
    fired: set[str] = set()
    for name, make in _profiles(cfg.site.modules):
        want = _plain(diagnose(make(), cfg))
        with monkeypatch.context() as mp:
            for mod, g in _gates():
                mp.setattr(mod, g, lambda *_a: True)
            assert _plain(diagnose(make(), cfg)) == want, name
        fired |= {f["id"] for f in want}
    # every gated detector fires on some log, so a gate closing too often would show above
    assert {"small-io", "random-access", "misaligned", "redundant-read", "stdio-heavy", "metadata-storm",
            "many-small-files", "shared-file-contention", "no-collective-io"} <= fired, fired


def test_positive_columns_and_sums_match_the_plain_ones():
    checked = 0
    for name, make in _profiles(()):
        prof = make()
        for mod, t in prof.counters.items():
            if not len(t):
                continue
            sums = module_sums(prof, mod)
            for n, a in t.items():
                if not (n.isupper() and a.dtype.kind in "iuf"):
                    continue
                for dt in (("i8", "f8") if a.dtype.kind in "iu" else ("f8",)):
                    got, ref = pcol(prof, mod, n, dt), col(t, n, dt)
                    assert got.dtype == ref.dtype and np.array_equal(got, ref), (name, mod, n, dt)
                    assert not got.flags.writeable
                plain = float(np.where(a > 0, a, 0).astype("f8").sum())
                assert sums[n] == pytest.approx(plain, rel=1e-12, abs=0), (name, mod, n)
                checked += 1
    assert checked > 10000


def test_median_is_numpys():
    rng = np.random.default_rng(7)
    for n in list(range(1, 12)) + [100, 101]:
        for x in (rng.random(n), rng.integers(0, 5, n), rng.integers(-2**40, 2**40, n), np.round(rng.random(n), 1)):
            assert median(x) == float(np.median(x))
    assert np.isnan(median(np.array([1.0, np.nan, 3.0])))


def test_level_table_from_counter_arrays_matches_the_column_path(monkeypatch):
    """level_rows takes POSIX-level columns from the loader's counter arrays by fancy indexing; the
    column-by-column path (col() per name, then concatenation) gives the same table."""
    from iodiag.analyzers import counters

    checked = 0
    for name, make in _profiles(()):
        fast = counters.level_rows(make())
        with monkeypatch.context() as mp:
            mp.setattr(counters, "_level_mats", lambda *_a: None)
            slow = counters.level_rows(make())
        assert fast.columns == slow.columns, name
        for c in slow.columns:
            assert fast[c].dtype == slow[c].dtype and np.array_equal(fast[c], slow[c]), (name, c)
        checked += len(slow) > 0
    assert checked >= 100


def test_few_shared_records_attributed_like_the_vector_code(monkeypatch):
    """Shared records (rank -1) of a few rows are split over processes in Python floats; the NumPy code
    used for many rows gives bit-identical per-process arrays on every corpus log that has them."""
    from iodiag.analyzers import metrics

    checked = 0
    for name, make in _profiles(()):
        few = metrics._compute(make())
        with monkeypatch.context() as mp:
            mp.setattr(metrics, "_FEW_SHARED", -1)
            vec = metrics._compute(make())
        for a in ("proc_io_s", "proc_bytes", "proc_ops"):
            assert getattr(few, a).tobytes() == getattr(vec, a).tobytes(), (name, a)
        checked += bool((few.level["proc"] < 0).any()) and len(make().processes) > 1
    assert checked >= 20, checked


def test_large_counter_blocks_are_not_kept_twice(monkeypatch):
    """Above the size limit the positive 2-D copy of a module is not cached (a million-record log would keep
    two extra copies of its counters alive): findings are the same either way, on every corpus log."""
    from iodiag.analyzers import counters

    cfg = Config()
    seen = 0
    for name, make in _profiles(cfg.site.modules):
        want = _plain(diagnose(make(), cfg))
        with monkeypatch.context() as mp:
            mp.setattr(counters, "_RAW_KEEP_MAX", 0)
            prof = make()
            got = _plain(diagnose(prof, cfg))
            derived = prof.__dict__.get("_derived", {})
        assert got == want, name
        assert not any(isinstance(k, tuple) and k[0] == "posraw" for k in derived), name
        seen += ("pos", "POSIX") in derived
    assert seen > 20  # the transposed copy was built (and the raw one dropped) on many logs


def test_derived_data_does_not_outlive_a_replaced_table():
    """Metrics, positive columns and paths are kept on the profile; replacing a table drops them, so a
    later look sees the new table (the job loader replaces the task table after loading, for one)."""
    from iodiag.analyzers.metrics import metrics_of

    make = next(make for name, make in _profiles(Config().site.modules) if name == "imbalanced-io.darshan")
    prof = make()
    before = metrics_of(prof)
    assert metrics_of(prof) is before and module_sums(prof, "POSIX")  # computed once, then kept
    first = prof.path_of()
    fewer = prof.files.filter(np.arange(len(prof.files)) < 10)
    prof.files = fewer
    assert metrics_of(prof) is not before
    assert len(prof.path_of()) == 10 and prof.path_of() is not first
