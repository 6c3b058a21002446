""""What to change" and the headline's explained total on every corpus log (shared/darshan-logs/MANIFEST.tsv) and
every log recorded for the tests (tests/data/darshan).

- Every medium+ finding is addressed by a recommendation with a concrete change (a flag, a variable, code, a
  shell line), or the report says why no setting can help it (a recommendation of ``source`` "rules" with
  ``abstain`` set: a slow node or storage target, the program's own decomposition, a damaged log).
- Every gain says how it is known; a bound is a real upper bound of the run (all the I/O on the critical path
  removed), never a share of one finding's cost.
- A job that reads nothing gets no read advice; a job that writes nothing gets no write advice.
- An HPC job (no Zarr array, no Dask task) is not told that the trained model "does not know the workload": the
  model's abstention says it does not apply, and the changes come from the findings.
- The findings' explained total is their union: never above the I/O on the critical path plus the non-I/O time
  findings name (task overhead), never above the run time, never below the costliest I/O finding.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from conftest import CORPUS
from iodiag.analyzers.load import load_job
from iodiag.analyzers.metrics import level_total
from iodiag.analyzers.detectors import SPEC_BY_ID
from iodiag.config import Config
from iodiag.errors import IodiagError
from iodiag.service import diagnose_report

READ_ONLY_SETTINGS = {"romio_cb_read", "romio_ds_read", "ind_rd_buffer_size", "read_whole", "read-once"}
READ_IDS = {"read-whole", "read-once", "data-sieving", "read-many-steps", "broadcast", "persist"}
WRITE_IDS = {"write-in-order", "fsync-policy", "file-per-process", "shared-file"}
GAINS = {"measured", "predicted", "bound", "unknown", "none"}


@pytest.fixture(scope="module")
def reports():
    path = CORPUS / "MANIFEST.tsv"
    if not path.is_file():
        pytest.skip("MANIFEST.tsv not found")
    out = {}
    with path.open() as fh:
        for row in csv.DictReader(fh, delimiter="\t"):
            try:
                prof = load_job([str(CORPUS / row["path"])], config=Config())
            except IodiagError:  # a log no reader can use (the golden reports hold its error)
                continue
            _, rep = diagnose_report(profile=prof, config=Config())
            out[row["path"]] = (prof, rep)
    # and the logs recorded for the tests (fsync per write, one collective-buffering aggregator, tiny freads)
    for p in sorted((Path(__file__).parent / "data" / "darshan").glob("*.darshan")):
        prof = load_job([str(p)], config=Config())
        out[p.name] = (prof, diagnose_report(profile=prof, config=Config())[1])
    assert len(out) > 50
    return out


def _changes(rep):
    return [r for r in rep.get("recommendations") or [] if r.get("abstain") is None and r.get("changes")]


def test_every_medium_or_high_finding_has_a_change_or_a_reason(reports):
    missing, seen = [], 0
    for path, (_, rep) in reports.items():
        addressed = {a for r in _changes(rep) for a in r["addresses"]}
        why = {a for r in rep.get("recommendations") or [] if r.get("abstain") and r.get("source") == "rules"
               for a in r["addresses"]}
        for f in rep["findings"]:
            if f["severity"] in ("high", "medium"):
                seen += 1
                if f["id"] not in addressed | why:
                    missing.append(f"{path}: {f['id']} ({f['severity']})")
    assert seen > 30  # the corpus holds medium+ findings of many kinds
    assert not missing, "\n".join(missing)


def test_reasons_are_said_and_changes_are_concrete(reports):
    for path, (_, rep) in reports.items():
        for r in rep.get("recommendations") or []:
            if r.get("source") == "rules" and r.get("abstain") is not None:
                assert len(r["abstain"]) > 20 and r["addresses"], path
            elif r.get("abstain") is None:
                assert r["changes"] and all(c["text"].strip() for c in r["changes"]), (path, r["id"])
                assert r["gain"] in GAINS, (path, r["id"], r["gain"])


def test_a_bound_counts_all_the_io_the_change_acts_on(reports):
    """A hint or variable acts on every file: its bound is the whole critical-path I/O removed.  Code on the files
    a finding lists in full is bounded by all the I/O on those files (not by the finding's share of it), which
    is at most the former."""
    n = whole = 0
    for path, (_, rep) in reports.items():
        t = rep["time"]
        rt, io = t["runtime_s"], t["io_wall_s"]
        for r in _changes(rep):
            if r["gain"] != "bound":
                continue
            n += 1
            assert r["speedup_low"] == 1.0 and r["expected_speedup"] is None
            top = rt / max(rt - min(io, rt), 0.01 * rt)
            assert 1.0 <= r["speedup_high"] <= top * (1 + 1e-3), path
            if any(c["kind"] == "env" for c in r["changes"]):
                whole += 1
                assert r["speedup_high"] == pytest.approx(top, rel=1e-3), path
            # never the finding's own cost alone: at least what removing the costliest addressed finding gives
            cost = max(f["est_cost_s"] or 0 for f in rep["findings"] if f["id"] in r["addresses"])
            assert r["speedup_high"] >= rt / max(rt - min(cost, rt), 0.01 * rt) * (1 - 1e-3), (path, r["id"])
    assert n > 10 and whole > 3


def test_no_read_advice_for_jobs_that_read_nothing_and_no_write_advice_for_jobs_that_write_nothing(reports):
    checked = 0
    for path, (prof, rep) in reports.items():
        reads = float(level_total(prof, "bytes_read")) > 0
        writes = float(level_total(prof, "bytes_written")) > 0
        for r in _changes(rep):
            if not reads:
                checked += 1
                assert r["id"] not in READ_IDS and not READ_ONLY_SETTINGS & set(r["settings"]), (path, r["id"])
            if not writes:
                checked += 1
                assert r["id"] not in WRITE_IDS and "romio_cb_write" not in r["settings"], (path, r["id"])
        if not reads:
            for f in rep["findings"]:
                assert "read the whole strided region" not in (f["recommendation"] or ""), (path, f["id"])
    assert checked >= 3  # write-only jobs with changes (IOR, h5bench, HDF5 diagonal writes)


def test_hpc_jobs_are_not_told_the_model_does_not_know_their_workload(reports):
    n = 0
    for path, (prof, rep) in reports.items():
        if prof.job.arrays or len(prof.tasks):
            continue
        for r in rep.get("recommendations") or []:
            if r.get("source") == "tree" and r.get("abstain"):
                n += 1
                assert "not known" not in r["abstain"] and r["abstain"].startswith("not applicable"), path
    assert n > 10


def test_explained_total_is_the_union_of_the_findings_costs(reports):
    over = 0
    for path, (_, rep) in reports.items():
        t = rep["time"]
        if t.get("explained_s") is None:
            continue
        io_costs = [f["est_cost_s"] for f in rep["findings"] if f["est_cost_s"] and not SPEC_BY_ID[f["id"]].outside_io]
        other = sum(f["est_cost_s"] for f in rep["findings"] if f["est_cost_s"] and SPEC_BY_ID[f["id"]].outside_io)
        if sum(io_costs) > (t["io_wall_s"] or 0) + 1e-6:
            over += 1  # findings that overlap: their plain sum would exceed the I/O they are about
        eps = 1e-5
        assert t["explained_io_s"] <= max(t["io_wall_s"], max(io_costs, default=0)) + eps, path
        assert t["explained_s"] <= t["explained_io_s"] + other + eps, path
        if t["runtime_s"]:
            assert t["explained_s"] <= t["runtime_s"] + eps, path
        assert t["explained_io_s"] >= max(io_costs, default=0) - eps, path  # the union holds its largest member
        assert t["explained_other_s"] == pytest.approx(min(other, t["runtime_s"] or other), abs=eps), path
    assert over >= 3  # the logs whose findings overlap (noposixopens: 58 s of costs, 19.8 s of I/O)


def test_a_conversion_without_its_results_record_is_still_a_conversion():
    """A run killed before it wrote its results record (or a quarter of its array) is advised as what its command
    says, a conversion, never as a read; and the features say they rest on the command's parameters."""
    from pathlib import Path

    from iodiag.analyzers.job import load_job_record
    from iodiag.recommend.features import BASED_ON_MEASURED, job_features

    prof = load_job_record(Path(__file__).parent / "golden" / "jobs" / "g3", config=Config())
    alone = job_features(prof)  # from its counters alone: it wrote less than a quarter of its array
    assert alone["workload"] != "convert" and alone["based_on"].startswith(BASED_ON_MEASURED)
    f = job_features(prof, params={"src": "in.nc", "dst": "out.zarr", "chunks": "1,1,90,180"})
    assert f["workload"] == "convert" and f["pattern"] == "conversion"
    assert f["based_on"].startswith("workload parameters") and "no workload parameters" not in f["based_on"]
