"""Tests read only the repository and ../shared: the reports the golden files hold are made from what the repo
carries, on any machine.

The guard runs the golden reports (the embedded jobs of tests/golden/jobs and the corpus logs of MANIFEST.tsv) in a
fresh interpreter that records every path it opens, lists or stats (an audit hook on ``open``, ``os.listdir`` and
``os.scandir``, and a wrapper over ``os.stat``/``os.lstat`` through which ``os.path.isfile``/``isdir``/``exists``
and ``pathlib`` go) and fails on any path outside the repo, ../shared, the Python installation and the system
trees.  A job whose report would read its output store at report time (the golden g3 before issue 25 named
/tmp/h17/out3.zarr) fails here even on the machine where that store still exists.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import CORPUS, REPO, SHARED

JOBS = REPO / "tests" / "golden" / "jobs"
GOLDEN_JOBS = sorted(p.name for p in JOBS.iterdir() if (p / "job.json").is_file())

# run in a fresh interpreter: argv = allowed roots (JSON), then ("job"|"log", path) pairs; prints "<event> <path>"
# for each path touched outside the allowed roots (JSON) as its last line; a stat of a folder above an allowed root
# (resolving a path walks them) is not a read
GUARD = r'''
import json, os, sys

allowed_roots = json.loads(sys.argv[1])
targets = list(zip(sys.argv[2::2], sys.argv[3::2]))
seen = set()
busy = [False]


def note(path, kind):
    if busy[0] or isinstance(path, int) or path is None:
        return
    busy[0] = True
    try:
        p = os.fsdecode(os.fspath(path)) if not isinstance(path, str) else path
        seen.add((kind, os.path.normpath(os.path.join(os.getcwd(), p))))
    except (TypeError, ValueError):
        pass
    finally:
        busy[0] = False


def hook(event, args):
    if event in ("open", "os.listdir", "os.scandir") and args:
        note(args[0], event)


def wrap(fn):
    def wrapped(path, *a, **k):
        note(path, "stat")
        return fn(path, *a, **k)
    return wrapped


os.stat, os.lstat = wrap(os.stat), wrap(os.lstat)
sys.addaudithook(hook)

from iodiag.analyzers.job import load_job_record
from iodiag.analyzers.load import load_job
from iodiag.config import Config
from iodiag.reports.json_report import render_json
from iodiag.service import diagnose_report

from iodiag.errors import IodiagError

for kind, path in targets:
    try:
        prof = load_job_record(path, config=Config()) if kind == "job" else load_job([path], config=Config())
    except IodiagError:  # a log no reader can use (its error is its golden result)
        continue
    _, rep = diagnose_report(profile=prof, config=Config())
    render_json(rep)


def inside(p):
    return any(p == r or p.startswith(r.rstrip("/") + "/") for r in allowed_roots)


def above(p):  # a folder on the way to an allowed root: what resolving a path stats
    return any(r.startswith(p.rstrip("/") + "/") for r in allowed_roots)


print(json.dumps(sorted(f"{kind} {p}" for kind, p in seen if not inside(p) and not (kind == "stat" and above(p)))))
'''


def _allowed(tmp: Path) -> list[str]:
    import site
    import sysconfig

    roots = {str(REPO), str(SHARED), sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
             "/proc", "/sys", "/dev", "/etc", "/usr", str(tmp)}
    roots |= {v for v in sysconfig.get_paths().values() if v}
    roots |= set(site.getsitepackages()) | {site.getusersitepackages()}
    roots |= {str(Path(sys.executable).parent)}
    return sorted(roots | {str(Path(r).resolve()) for r in roots})


def _outside_reads(tmp: Path, targets: list[tuple[str, str]]) -> list[str]:
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith("IODIAG_")}
    env["PYTHONPATH"] = str(REPO / "src")
    env["IODIAG_CACHE_DIR"] = str(tmp / "cache")  # rebuildable C declarations: the test's own scratch
    argv = [sys.executable, "-c", GUARD, json.dumps(_allowed(tmp))] + [x for t in targets for x in t]
    run = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


def test_golden_job_reports_read_only_the_repo(tmp_path):
    bad = _outside_reads(tmp_path, [("job", str(JOBS / j)) for j in GOLDEN_JOBS])
    assert not bad, f"the golden job reports read {len(bad)} path(s) outside the repo: {bad[:10]}"


def test_corpus_reports_read_only_the_repo_and_shared(tmp_path):
    """The corpus logs whose reports are golden (MANIFEST.tsv, as test_golden.py reads them)."""
    from test_golden import _manifest_logs

    logs = [CORPUS / rel for rel in _manifest_logs() if (CORPUS / rel).is_file()]
    if not logs:
        pytest.skip(f"no corpus at {CORPUS}")
    bad = _outside_reads(tmp_path, [("log", str(p)) for p in logs])
    assert not bad, f"corpus reports read {len(bad)} path(s) outside the repo and ../shared: {bad[:10]}"


def test_the_guard_sees_a_report_that_reads_a_store_outside_the_repo(tmp_path):
    """The guard itself: a golden job whose snapshot is taken away reads its Zarr store's metadata live, at the
    absolute path its traces name (outside the repo), and the guard names that path."""
    import shutil

    job = shutil.copytree(JOBS / "g3", tmp_path / "job-without-snapshot")
    (job / "meta" / "snapshot.json").unlink()
    bad = _outside_reads(tmp_path, [("job", str(job))])
    stores = {p.split(" ", 1)[1] for p in bad if ".zarr" in p}
    assert stores, bad
    assert all(not s.startswith(str(REPO)) for s in stores)


@pytest.mark.parametrize("job", GOLDEN_JOBS)
def test_golden_jobs_carry_their_snapshot(job):
    """Static: every golden job folder holds its metadata snapshot, and the snapshot has the metadata of every
    Zarr array the job's traces touched (so no report of it needs the store)."""
    from iodiag.analyzers.job import load_job_record
    from iodiag.analyzers.readers.arrays import array_dirs
    from iodiag.collectors.snapshot import SCHEMA

    folder = JOBS / job
    rec = json.loads((folder / "job.json").read_text())
    assert rec["artefacts"].get("snapshot") == "meta/snapshot.json"
    snap = json.loads((folder / "meta" / "snapshot.json").read_text())
    assert snap["schema"] == SCHEMA and snap["errors"] == []
    prof = load_job_record(folder)
    assert prof.job.arrays_from == "snapshot"
    missing = [d for d in array_dirs(prof.files["path"].tolist()) if d not in snap["zarr"]]
    assert not missing, f"{job}: the snapshot lacks the Zarr metadata of {missing}"
