"""A finding is one spec: every finding id has all its parts, declared once (issue 29).

Each detector module declares ``SPECS`` (``iodiag.findings.FindingSpec``: id, detector, cost model, config keys,
docs text, site admin action); ``iodiag.analyzers.detectors`` collects them; recommend/rules.py registers one
advice function per spec id; docs/detectors.md's table is generated from them.  These tests fail when a part is
missing instead of a report silently leaving a recommendation empty or the docs going stale.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import replace

import pytest

from conftest import REPO, corpus_path
from iodiag.analyzers.detectors import DETECTORS, FINDING_IDS, SPEC_BY_ID, SPECS
from iodiag.analyzers.detectors._docs import with_table
from iodiag.config import Config
from iodiag.recommend import rules
from iodiag.recommend.site import admin_action

SRC = REPO / "src" / "iodiag"
# the Config sections whose keys are detector thresholds: each key is declared by at least one spec
DETECTOR_SECTIONS = ("small_io", "metadata", "sync", "small_files", "stragglers", "access", "tasks")
# corpus logs on which, together, 15 of the 18 ids fire (the goldens say which)
LOGS = (
    "darshan-logs/darshan_logs/e3sm_io_heatmaps_and_dxt/e3sm_io_heatmap_only.darshan",
    "generated/smallio-metadata-heavy-default/0_python_id2108-2108_11-22-83104-15636950488690977536_1.darshan",
    "darshan/darshan-util/pydarshan/darshan/examples/example_logs/ior_hdf5_example.darshan",
    "generated/dask-worker-sigterm/0_uname_id26398-26398_11-22-82761-5206413782166941905_1.darshan",
    "darshan-logs/darshan_logs/stdio_no_posix/laytonjb_test1_id28730_6-7-43012-2131301613401632697_1.darshan",
    "darshan/darshan-util/pydarshan/darshan/examples/example_logs/dxt.darshan",
    "darshan-logs/darshan_logs/mpi_io_test_with_dxt/treddy_mpi-io-test_id4373053_6-2-60198-9815401321915095332_1.darshan",
    "darshan/darshan-util/pydarshan/darshan/tests/input/sample.darshan",
)


def test_every_spec_has_all_its_parts():
    assert len(SPECS) == len(FINDING_IDS) == len(SPEC_BY_ID) >= 18
    assert [s.seq for s in SPECS] == list(range(1, len(SPECS) + 1))  # the vocabulary's order: no gap, no reuse
    cfg = Config()
    for s in SPECS:
        assert re.fullmatch(r"[a-z]+(-[a-z]+)*", s.id), s.id
        assert s.fires.strip() and s.cost.strip() and s.admin_action.strip(), s.id
        assert callable(s.detect) or s.runs_over, f"{s.id}: neither a detector nor what it runs over"
        for key in s.config_keys:
            section, name = key.split(".")
            assert name in {f.name for f in dataclasses.fields(getattr(cfg, section))}, f"{s.id}: no Config key {key}"
        assert admin_action(s.id) == s.admin_action
    assert DETECTORS == [s.detect for s in SPECS if s.detect is not None]


def test_every_detector_threshold_is_declared_by_a_spec():
    declared = {k for s in SPECS for k in s.config_keys}
    cfg = Config()
    orphans = [f"{sec}.{f.name}" for sec in DETECTOR_SECTIONS for f in dataclasses.fields(getattr(cfg, sec))
               if f"{sec}.{f.name}" not in declared]
    assert orphans == []


def test_every_id_has_its_advice_and_a_missing_one_fails_loudly(monkeypatch):
    assert set(rules.ADVICE) == set(FINDING_IDS)
    assert set(rules.PLANNED_EVIDENCE) <= set(FINDING_IDS)
    prof_findings = _findings_of(LOGS[-1])  # sample.darshan: misaligned and straggler-process
    assert prof_findings and all(f.recommendation for f in rules.advise(prof_findings))
    gone = prof_findings[0].id
    monkeypatch.setattr(rules, "ADVICE", {k: v for k, v in rules.ADVICE.items() if k != gone})
    with pytest.raises(KeyError, match=gone):
        rules.advise(prof_findings)


def test_docs_table_is_generated_from_the_specs():
    doc = (REPO / "docs" / "detectors.md").read_text()
    assert with_table(doc, SPECS) == doc, "docs/detectors.md is stale: run python scripts/detector_docs.py"
    for s in SPECS:
        assert f"| `{s.id}` |" in doc


def test_each_detector_emits_only_its_own_id():
    seen: set[str] = set()
    for rel in LOGS:
        prof = _profile(rel)
        for s in SPECS:
            if s.detect is None:
                continue
            ids = {f.id for f in s.detect(prof, Config())}
            assert ids <= {s.id}, f"{s.detect.__name__} on {rel}: {ids}"
            seen |= ids
    assert len(seen) >= 15  # the logs were picked so that these ids fire


def test_each_finding_id_is_spelled_in_at_most_two_modules():
    """The id literal stands in its spec module; every other module names the spec (``SMALL_IO.id``)."""
    texts = {p.relative_to(SRC).as_posix(): p.read_text() for p in SRC.rglob("*.py")}
    where = {i: [m for m, t in texts.items() if re.search(r"""(['"])%s\1""" % re.escape(i), t)] for i in FINDING_IDS}
    assert {i: ms for i, ms in where.items() if len(ms) > 2} == {}
    for i, ms in where.items():
        assert any(m.startswith("analyzers/detectors/") for m in ms), i


def _profile(rel: str):
    from iodiag.analyzers.load import load_job

    return load_job([str(corpus_path(rel))])


def _findings_of(rel: str):
    from iodiag.analyzers.detectors import diagnose

    return [replace(f, recommendation="") for f in diagnose(_profile(rel))]
