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


print(json.dumps(sorted(f"{kind} {p}" for kind, p in seen)))  # every path touched (the tests sort them out)
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


def _guard(tmp: Path, targets: list[tuple[str, str]]) -> tuple[list[str], list[str]]:
    """("<event> <path>" of every path the reports touched, of those outside the allowed roots)."""
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith("IODIAG_")}
    env["PYTHONPATH"] = str(REPO / "src")
    env["IODIAG_CACHE_DIR"] = str(tmp / "cache")  # rebuildable C declarations: the test's own scratch
    argv = [sys.executable, "-c", GUARD, json.dumps(_allowed(tmp))] + [x for t in targets for x in t]
    run = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    lines = run.stdout.strip().splitlines()
    return json.loads(lines[-2]), json.loads(lines[-1])


def _outside_reads(tmp: Path, targets: list[tuple[str, str]]) -> list[str]:
    return _guard(tmp, targets)[1]


def test_golden_job_reports_read_only_the_repo(tmp_path):
    bad = _outside_reads(tmp_path, [("job", str(JOBS / j)) for j in GOLDEN_JOBS])
    assert not bad, f"the golden job reports read {len(bad)} path(s) outside the repo: {bad[:10]}"


def _recorded_paths(value) -> set[str]:
    """The absolute paths a job folder's JSON records of the machine it ran on (interpreter, preload library,
    mount points, outputs), each ``:``-separated entry of a path list on its own."""
    if isinstance(value, dict):
        return set().union(*(_recorded_paths(v) for v in value.values())) if value else set()
    if isinstance(value, list):
        return set().union(*(_recorded_paths(v) for v in value)) if value else set()
    if isinstance(value, str) and value.startswith("/"):
        return {x.split(" ", 1)[0].rstrip("/") for x in value.split(":") if x.startswith("/")}
    return set()


def test_golden_job_reports_touch_no_path_their_jobs_record():
    """The golden job folders record paths of the machine they were recorded on (the embedded preload under
    /root/.cache/iodiag, /var/run in the mount table, the files its processes touched).  Some lie in trees the
    guard above allows (system folders), where a read would pass on this machine and differ on another: the reports
    must touch none of them, nor anything below them.  Left out: the repo, ../shared and the running interpreter's
    installation (its own imports), and the folders above them (mount points such as "/")."""
    import tempfile

    from iodiag.collectors.embedded.format import read_names

    recorded: set[str] = set()
    for j in GOLDEN_JOBS:
        for f in [JOBS / j / "job.json", *sorted((JOBS / j / "meta").glob("*.json"))]:
            recorded |= _recorded_paths(json.loads(f.read_text()))
        for f in sorted((JOBS / j / "traces").glob("*.names")):  # every file the job's processes touched
            recorded |= _recorded_paths(list(read_names(f).values()))
    # what this run needs anyway: the repo, ../shared and the interpreter's own installation (its imports; on
    # another machine the recorded interpreter is simply absent), and the folders above them
    needed = [str(REPO), str(SHARED), sys.prefix, sys.base_prefix, str(Path(sys.executable).parent)]
    recorded = {r for r in recorded if r and not any(n == r or n.startswith(r + "/") or r.startswith(n + "/")
                                                     for n in needed)}
    # the kind of path this is about (what the golden jobs hold, not this machine): the preload library, /var/run
    assert {"/root/.cache/iodiag/embedded", "/var/run"} <= recorded, sorted(recorded)[:20]
    with tempfile.TemporaryDirectory() as tmp:
        touched, _ = _guard(Path(tmp), [("job", str(JOBS / j)) for j in GOLDEN_JOBS])
    hits = sorted(t for t in touched if any(t.split(" ", 1)[1] == r or t.split(" ", 1)[1].startswith(r + "/")
                                            for r in recorded))
    assert not hits, f"the golden job reports touched {len(hits)} path(s) their jobs record: {hits[:10]}"


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
