"""Snapshots of what a user reads: the terminal report at 80 and 120 columns and the JSON report, on three real
corpus logs of different kinds (one heavy rank of 496; 2,048 ranks with 85 stragglers on one OST; HDF5 over
MPI-IO with ROMIO read-modify-write).

The reports are those `iodiag report` prints, "What to change" included.  A change to the report shows up here as a diff to read, not as a silent drift. After an intended change,
regenerate with:  IODIAG_UPDATE_SNAPSHOTS=1 .venv/bin/python -m pytest tests/test_snapshots.py
and read the diff of tests/snapshots/ before committing it.
"""

from __future__ import annotations

import json
import os

import pytest

from conftest import CORPUS, corpus_path
from iodiag.analyzers.load import load_job
from iodiag.config import Config
from iodiag.reports.json_report import render_json
from iodiag.reports.terminal import render_terminal
from iodiag.service import diagnose_report

HERE = os.path.join(os.path.dirname(__file__), "snapshots")
LOGS = {
    "imbalanced": "darshan-logs/darshan_logs/imbalanced_io/imbalanced-io.darshan",
    "badost": "darshan/darshan-util/pydarshan/darshan/tests/input/sample-badost.darshan",
    "h5bench-write": "drishti-io/sample/jlbez_8a_benchmark_write_parallel_id1322696_8-21-14519-8141979180909667175_12"
                     ".darshan",
}


def _report(name):
    """The report as `iodiag report` builds it, "What to change" included (through the service layer; the
    model's self-description is left out: it changes with every retraining and is snapshotted nowhere)."""
    prof = load_job([str(corpus_path(LOGS[name]))])
    _, rep = diagnose_report(profile=prof, config=Config(), home=None)
    for rec in rep.get("recommendations") or []:
        rec.pop("notes", None)
    text = render_json(rep)
    return json.loads(text.replace(str(CORPUS), "<corpus>"))


def _check(name: str, got: str) -> None:
    path = os.path.join(HERE, name)
    if os.environ.get("IODIAG_UPDATE_SNAPSHOTS"):
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(got)
        return
    if not os.path.exists(path):
        pytest.fail(f"no snapshot {path}: run with IODIAG_UPDATE_SNAPSHOTS=1 once and read the file")
    with open(path, encoding="utf-8") as fh:
        want = fh.read()
    assert got == want, f"{name} changed: regenerate (see the module docstring) and read the diff"


@pytest.mark.parametrize("name", sorted(LOGS))
def test_json_snapshot(name):
    _check(f"{name}.json", json.dumps(_report(name), indent=1, sort_keys=True) + "\n")


@pytest.mark.parametrize("width", [80, 120])
@pytest.mark.parametrize("name", sorted(LOGS))
def test_terminal_snapshot(name, width):
    text = render_terminal(_report(name), color=False, width=width)
    lines = text.splitlines()
    assert all(len(x) <= width for x in lines), max(lines, key=len)
    # the headline (run time, I/O share) comes before the first finding, within the first screen
    head = next(i for i, x in enumerate(lines) if " run: I/O on the critical path" in x)
    first = next(i for i, x in enumerate(lines) if x.strip().startswith("1. "))
    assert head < first < 20
    _check(f"{name}-{width}.txt", text)
