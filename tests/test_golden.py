"""Golden reports: `iodiag report --json` of every corpus log in MANIFEST.tsv and of three embedded-collector jobs
(tests/golden/jobs: one process; a multiprocessing pool; a Dask LocalCluster writing and reading Zarr), as the code
produced them before the readers were moved onto bounded batches (issue 17).  A change in any finding, number or
volume shows up here as a failing comparison naming the first differing field.

Compared: the whole report (schema iodiag.report/1) except
- paths of the corpus and of the job fixtures (replaced by <corpus> and <job>: they depend on the checkout), and
- the ``recommendation`` text of findings (advice wording is owned by recommend/ and changes on its own; the
  finding id, severity, title, evidence, files, processes and est_cost_s are still compared), and
- the ``notes`` of recommendations (what the trained model says of itself changes with every retraining; the
  recommendations' settings, changes, expected speedups and addressed findings are still compared).

Regenerate after an intended change, then read the diff of tests/golden/ before committing it:
    IODIAG_UPDATE_GOLDEN=1 python -m pytest tests/test_golden.py -q
"""

from __future__ import annotations

import csv
import json
import os
import re
from pathlib import Path

import pytest

from conftest import CORPUS
from iodiag.config import Config
from iodiag.errors import IodiagError
from iodiag.reports.json_report import render_json
from iodiag.service import diagnose_report

HERE = Path(__file__).resolve().parent / "golden"
JOBS = HERE / "jobs"
UPDATE = bool(os.environ.get("IODIAG_UPDATE_GOLDEN"))


def _manifest_logs() -> list[str]:
    path = CORPUS / "MANIFEST.tsv"
    if not path.is_file():
        return []
    with path.open() as fh:
        return [row["path"] for row in csv.DictReader(fh, delimiter="\t")]


def _golden_name(rel: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", rel)[-150:] + ".json"


def _strip(obj, root: str, tag: str):
    """The report with machine-dependent paths replaced and recommendation text dropped."""
    if isinstance(obj, dict):
        return {k: _strip(v, root, tag) for k, v in obj.items() if k not in ("recommendation", "notes")}
    if isinstance(obj, list):
        return [_strip(v, root, tag) for v in obj]
    if isinstance(obj, str):
        return obj.replace(root, tag)
    return obj


def report_of_log(path: Path) -> dict:
    from iodiag.analyzers.load import load_job

    try:
        prof = load_job([str(path)], config=Config())
    except IodiagError as exc:  # a log no reader can use: its error is the golden result
        return {"error": type(exc).__name__, "message": str(exc).replace(str(CORPUS), "<corpus>")}
    _, rep = diagnose_report(profile=prof, config=Config())
    return _strip(json.loads(render_json(rep)), str(CORPUS), "<corpus>")


def report_of_job(folder: Path) -> dict:
    from iodiag.analyzers.job import load_job_record

    prof = load_job_record(folder, config=Config())
    _, rep = diagnose_report(profile=prof, config=Config())
    return _strip(json.loads(render_json(rep)), str(folder), "<job>")


def _first_difference(want, got, where="") -> str:
    if type(want) is not type(got):
        return f"{where or '/'}: {want!r} != {got!r}"
    if isinstance(want, dict):
        for k in sorted(set(want) | set(got)):
            if k not in want or k not in got:
                return f"{where}/{k}: only in {'golden' if k in want else 'current'}"
            d = _first_difference(want[k], got[k], f"{where}/{k}")
            if d:
                return d
        return ""
    if isinstance(want, list):
        if len(want) != len(got):
            return f"{where}: {len(want)} items in golden, {len(got)} now"
        for i, (a, b) in enumerate(zip(want, got)):
            d = _first_difference(a, b, f"{where}[{i}]")
            if d:
                return d
        return ""
    return "" if want == got else f"{where}: golden {want!r}, now {got!r}"


def _check(name: str, got: dict) -> None:
    path = HERE / name
    text = json.dumps(got, indent=0, sort_keys=True) + "\n"
    if UPDATE:
        path.write_text(text, encoding="utf-8")
        return
    if not path.is_file():
        pytest.fail(f"no golden file {path}: regenerate (see the module docstring)")
    want = json.loads(path.read_text(encoding="utf-8"))
    got = json.loads(text)  # the same float rounding as the stored file
    diff = _first_difference(want, got)
    assert not diff, f"{name} differs from its golden report: {diff}"


@pytest.mark.parametrize("rel", _manifest_logs() or [pytest.param("", marks=pytest.mark.skip(reason=f"no corpus at {CORPUS}"))])
def test_corpus_log_matches_golden(rel):
    path = CORPUS / rel
    if not path.is_file():
        pytest.skip(f"corpus log {rel} not found")
    _check(_golden_name(rel), report_of_log(path))


@pytest.mark.parametrize("job", ["g1", "g2", "g3"])
def test_embedded_job_matches_golden(job):
    folder = JOBS / job
    rep = report_of_job(folder)
    assert rep["job"]["collector"] == "embedded"
    _check(f"job-{job}.json", rep)
