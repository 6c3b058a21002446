"""`iodiag compare`: the comparison dict, its renderers and the command line, on real logs."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from iodiag.findings import Finding
from iodiag.reports.compare import SCHEMA, compare_jobs, render_compare_html, render_compare_text

from test_html_support import CORPUS, DASK_DXT, REPO, corpus_logs, leaked_names, load

BEFORE = "generated/smallio-metadata-heavy-default/*.darshan"  # default limits: POSIX and DXT partial
AFTER = "generated/smallio-metadata-heavy-maxrecords/*.darshan"  # same workload, record caps raised


def _metric(d, name):
    return next(r for r in d["metrics"] if r["name"] == name)


def _posix_stdio(prof, posix, stdio):
    return int(prof.counters["POSIX"][posix].sum()) + (int(prof.counters["STDIO"][stdio].sum()) if stdio and "STDIO" in prof.counters else 0)


def test_same_job_changes_nothing():
    p = load(DASK_DXT)
    d = compare_jobs(p, p)
    assert d["schema"] == SCHEMA
    assert all(r["delta"] == 0 and r["verdict"] == "same" for r in d["metrics"])
    assert d["findings"] == {"appeared": [], "resolved": [], "persisting": []}


def test_before_after_numbers_come_from_the_counters():
    a, b = load(BEFORE), load(AFTER)
    d = compare_jobs(a, b)
    assert d["layers"] == {"a": ["POSIX", "STDIO"], "b": ["POSIX", "STDIO"]}
    for prof, side in ((a, "a"), (b, "b")):
        assert _metric(d, "bytes_read")[side] == _posix_stdio(prof, "POSIX_BYTES_READ", "STDIO_BYTES_READ")
        assert _metric(d, "bytes_written")[side] == _posix_stdio(prof, "POSIX_BYTES_WRITTEN", "STDIO_BYTES_WRITTEN")
        assert _metric(d, "reads")[side] == _posix_stdio(prof, "POSIX_READS", "STDIO_READS")
        assert _metric(d, "wall_s")[side] == pytest.approx(prof.job.runtime_s)
        # files with a record at a file layer (not HDF5 datasets, PnetCDF variables or LUSTRE striping records)
        layers = [m for m in ("POSIX", "STDIO", "MPI-IO", "H5F", "PNETCDF_FILE", "DFS", "DAOS") if m in prof.counters]
        assert _metric(d, "files")[side] == len({f for m in layers for f in prof.counters[m]["file_id"].tolist()})
    r = _metric(d, "reads")
    assert r["delta"] == r["b"] - r["a"] and r["verdict"] == "worse"
    # B records the 100k-op file that A's capped POSIX module missed entirely
    assert r["b"] - r["a"] >= 100_000
    assert _metric(d, "wall_s")["verdict"] == "better"
    assert d["a"]["issues"] >= 1 and "POSIX" in d["a"]["partial_modules"] and d["b"]["issues"] == 0
    text = render_compare_text(d)
    assert "read operations" in text and "A has" in text and "lower bounds" in text


def test_report_and_compare_agree_on_every_number_they_share_on_every_corpus_log(corpus):
    """One job total per quantity (analyzers.summary.job_totals): `report` and `compare` once gave different file
    counts (74 vs 84 on hdf5_diagonal_write: compare counted the HDF5 datasets and LUSTRE records as files)."""
    import csv

    from iodiag.analyzers.load import load_job
    from iodiag.analyzers.summary import summarize
    from iodiag.errors import IodiagError
    from iodiag.reports.compare import job_metrics

    with (corpus / "MANIFEST.tsv").open() as fh:
        logs = [row["path"] for row in csv.DictReader(fh, delimiter="\t")]
    checked = 0
    for rel in logs:
        try:
            prof = load_job([str(corpus / rel)])
        except IodiagError:
            continue  # a log the corpus keeps because it cannot be read
        s, cmp = summarize(prof), job_metrics(prof)
        rep = {**s.volumes, "io_time_s": s.io_time_s, "processes": prof.job.nprocs, "wall_s": prof.job.runtime_s}
        shared = {k for k in rep if k in cmp}
        assert shared >= {"files", "bytes_read", "bytes_written", "reads", "writes", "io_time_s"}
        assert {k: (rep[k], cmp[k]) for k in shared if rep[k] != cmp[k]} == {}, rel
        checked += 1
    assert checked >= 100


def test_findings_appeared_resolved_persisting():
    # Findings built here only to exercise the bookkeeping of the comparison (no diagnosis is claimed).
    a, b = load(BEFORE), load(AFTER)
    fa = [Finding("small-io", "high", "Small I/O", {"ops": 1}, "buffer"), Finding("metadata-storm", "medium", "Storm", {}, "batch")]
    fb = [Finding("small-io", "low", "Small I/O", {"ops": 1}, "buffer"), Finding("many-small-files", "medium", "<files>", {}, "pack")]
    d = compare_jobs(a, b, fa, fb)
    f = d["findings"]
    assert [x["id"] for x in f["resolved"]] == ["metadata-storm"]
    assert [x["id"] for x in f["appeared"]] == ["many-small-files"]
    assert f["persisting"] == [{"id": "small-io", "title": "Small I/O", "severity_a": "high", "severity_b": "low",
                                "est_cost_s_a": None, "est_cost_s_b": None, "change": "better"}]
    html = render_compare_html(d)
    assert "<script" not in html.lower() and "&lt;files&gt;" in html and "1 appeared, 1 resolved, 1 persisting" in html
    json.dumps(d)  # JSON-serialisable as is


def _cli(*args):
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO / "src")
    return subprocess.run([sys.executable, "-m", "iodiag", "compare", *args], capture_output=True, text=True, env=env, cwd=REPO, timeout=300)


def test_cli_json_html_and_folders(tmp_path):
    a = corpus_logs(BEFORE)[0]
    b_dir = str(CORPUS / "generated/smallio-metadata-heavy-maxrecords")
    out = tmp_path / "delta.html"
    r = _cli(a, b_dir, "--json", "--html", str(out))
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["schema"] == SCHEMA and d["b"]["logs"] and d["b"]["logs"][0].startswith(b_dir)
    page = out.read_text()
    assert page.startswith("<!DOCTYPE html>") and "What changed" in page
    r = _cli(a, b_dir)
    assert r.returncode == 0 and "metric" in r.stdout and "verdict" in r.stdout


def test_cli_obfuscate_hides_names_in_every_output(tmp_path):
    logs = corpus_logs(DASK_DXT)
    folder = str(CORPUS / "generated/dask-localcluster-2workers-dxt-jobid")
    names = set(n for pat in (DASK_DXT, BEFORE) for n in __import__("iodiag.reports.obfuscate", fromlist=["x"]).sensitive_names(load(pat)))
    out = tmp_path / "delta.html"
    r = _cli(corpus_logs(BEFORE)[0], folder, "--json", "--html", str(out), "--obfuscate")
    assert r.returncode == 0, r.stderr
    assert leaked_names(names, r.stdout) == []
    assert leaked_names(names, out.read_text()) == []
    r2 = _cli(corpus_logs(BEFORE)[0], folder, "--obfuscate")
    assert r2.returncode == 0 and leaked_names(names, r2.stdout) == []
    assert len(logs) == 4


@pytest.mark.parametrize("bad,code,words", [("/no/such/log.darshan", 3, "no such file"), ("EMPTY", 3, "")])
def test_cli_user_errors_are_one_line(tmp_path, bad, code, words):
    if bad == "EMPTY":
        bad = str(tmp_path)
    r = _cli(bad, corpus_logs(BEFORE)[0])
    assert r.returncode == code
    assert "Traceback" not in r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and words in lines[0] and bad in lines[0] and lines[0].startswith("iodiag: error:")


def test_cli_folders_of_several_jobs_pick_with_job_a_b_or_all(tmp_path):
    logs = corpus_logs("generated/dask-localcluster-2workers-graceful/*.darshan")
    import shutil

    for p in logs:
        shutil.copy(p, tmp_path / os.path.basename(p))
    folder = str(tmp_path)
    # ambiguous: the jobs are listed and the hint names this command's options
    r = _cli(folder, folder)
    assert r.returncode == 5 and "Traceback" not in r.stderr
    assert "A: " in r.stderr and "holds 7 jobs" in r.stderr and "26138" in r.stderr
    assert "--job-a" in r.stderr and "--all" in r.stderr and "--job ID" not in r.stderr
    # one job from each side of the same folder
    r = _cli(folder, folder, "--job-a", "26138", "--job-b", "26154", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["a"]["job_id"] == "26138" and d["b"]["job_id"] == "26154"
    assert d["a"]["exe"] != d["b"]["exe"]  # python vs uname
    # --all on the folder side, a single log on the other (--all does not apply to a file)
    r = _cli(folder, logs[0], "--all", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert _metric(d, "processes")["a"] == 7 and _metric(d, "processes")["b"] == 1
    # B ambiguous while A is picked: the hint names --job-b
    r = _cli(folder, folder, "--job-a", "26138")
    assert r.returncode == 5 and "B: " in r.stderr and "--job-b" in r.stderr


@pytest.mark.parametrize("extra,code,words", [(("--job-a", "999"), 3, "no job with id 999"), (("--job-b", "26138"), 2, "not a folder of logs")])
def test_cli_job_options_errors_are_one_line(tmp_path, extra, code, words):
    folder = str(CORPUS / "generated/dask-localcluster-2workers-graceful")
    r = _cli(folder, corpus_logs(BEFORE)[0], *extra)
    assert r.returncode == code and "Traceback" not in r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and words in lines[0] and lines[0].startswith("iodiag: error:")
    assert ("--job-a" if "--job-a" in extra else "--job-b") in lines[0]


def test_compare_says_when_collectors_differ():
    """Two logs of the same test program written by Darshan 3.1.3 and 3.1.4: compare notes the version change;
    a log compared with itself has no such note."""
    from conftest import corpus_path
    from iodiag.analyzers.load import load_job
    from iodiag.reports.compare import compare_jobs, render_compare_text

    a = load_job([str(corpus_path("darshan-logs/darshan_logs/release_logs/mpi-io-test-ppc64-3.1.3.darshan"))])
    b = load_job([str(corpus_path("darshan-logs/darshan_logs/release_logs/mpi-io-test-ppc64-3.1.4.darshan"))])
    d = compare_jobs(a, b)
    assert len(d["notes"]) == 1 and "different collector versions" in d["notes"][0]
    assert "3.1.3" in d["notes"][0] and "3.1.4" in d["notes"][0]
    assert "note: A and B were recorded by different collector versions" in render_compare_text(d)
    assert compare_jobs(a, a)["notes"] == []


def test_darshan_blind_spot_by_version_and_glibc():
    """Darshan <= 3.5 on glibc >= 2.33 misses stat(): said by version and C library (no runtime needed)."""
    from iodiag.analyzers.job import darshan_blind_spots

    assert darshan_blind_spots("3.5.0", "2.36") and darshan_blind_spots("3.4.6", "2.33")
    assert darshan_blind_spots("3.5.0", "2.31") == [] and darshan_blind_spots("3.6.0", "2.36") == []
