"""Bad input is refused before any work starts, in one line naming the path, the cause and the next step, with
a documented exit code; and every command that prints JSON tags it with its schema.

"Before any work": each case is one whose work would be visible (a run, a job folder, a dataset, a written file)
and the test checks that it did not happen."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from conftest import run_cli
from site_archive import CORPUS

REPO = Path(__file__).resolve().parents[1]
LOG = CORPUS / "darshan" / "darshan-util" / "pydarshan" / "darshan" / "tests" / "input" / "sample-badost.darshan"
MULTI = CORPUS / "generated" / "dask-localcluster-2workers-graceful"
pytestmark = pytest.mark.skipif(not CORPUS.is_dir(), reason=f"shared corpus not found at {CORPUS}")


def _refused(res, code: int, *words: str) -> str:
    err = res.stderr.decode()
    assert res.returncode == code, (res.returncode, err[-2000:])
    assert "Traceback" not in err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("iodiag: error: ") and " — " in lines[0], err  # cause — next step
    for w in words:
        assert w in lines[0], (w, lines[0])
    return lines[0]


@pytest.fixture()
def a_file(tmp_path) -> Path:
    f = tmp_path / "plain.txt"
    f.write_text("not a folder\n")
    return f


def test_report_flags_and_outputs(a_file, tmp_path):
    _refused(run_cli("report", str(MULTI), "--all", "--job", "26138"), 2, "--job 26138", "--all")
    out = a_file / "r.json"
    _refused(run_cli("report", str(LOG), "--json-file", str(out)), 2, str(a_file), "is a file, not a folder")
    _refused(run_cli("report", str(LOG), "--html", str(a_file / "r.html")), 2, str(a_file), "is a file")
    _refused(run_cli("report", str(LOG), "--html-path", str(tmp_path)), 2, "is a folder")  # a folder where the page goes
    assert not list(tmp_path.glob("iodiag-report-*.html"))


def test_run_refuses_bad_record_caps(tmp_path):
    store = tmp_path / "store"
    for cap in ("-5", "0"):
        _refused(run_cli("run", "--max-records", cap, "--collector", "none", "--", "true", env={"IODIAG_HOME": str(store)}),
                 2, f"--max-records {cap}", "at least 1")
    assert not (store / "jobs").exists() or not any((store / "jobs").iterdir())  # no job was made


def test_site_ingest_names_the_real_problem(a_file, tmp_path):
    _refused(run_cli("site", "ingest", str(a_file), "--out", str(tmp_path / "s")), 4, str(a_file), "is a file, not the folder")
    _refused(run_cli("site", "ingest", str(tmp_path / "nope"), "--out", str(tmp_path / "s")), 3, "no such folder")
    _refused(run_cli("site", "ingest", str(CORPUS), "--out", str(a_file / "s.parquet")), 2, str(a_file), "is a file, not a folder")
    _refused(run_cli("site", "ingest", str(CORPUS), "--out", str(a_file)), 2, "is a file, not a site dataset")
    _refused(run_cli("site", "ingest", str(CORPUS), "--out", str(tmp_path / "s"), "--workers", "-1"), 2, "--workers -1")
    for opt, bad in (("--memory", "lots"), ("--walltime", "1 hour")):
        _refused(run_cli("site", "ingest", str(CORPUS), "--out", str(tmp_path / "s"), "--cluster", "slurm", opt, bad),
                 2, f"{opt} {bad}")
    assert not (tmp_path / "s").exists()


def test_site_report_checks_its_outputs_first(a_file, tmp_path):
    _refused(run_cli("site", "report", str(tmp_path), "--top", "0"), 2, "--top 0")
    _refused(run_cli("site", "report", str(tmp_path), "--html", str(a_file / "x.html")), 2, "is a file")


def test_sweep_analyze_unknown_axis_and_mode(tmp_path):
    from test_cli_width import fake_sweep

    sw = fake_sweep(tmp_path / "sw", ["/data/a.nc", "/data/b.nc"], workers=(1, 2), reps=2)
    _refused(run_cli("sweep", "analyze", str(sw), "--axis", "nosuch"), 2, "--axis nosuch", "path, workers")
    _refused(run_cli("sweep", "analyze", str(sw), "--mode", "fast"), 2, "--mode fast")
    _refused(run_cli("sweep", "analyze", str(sw), "--compare-by", "nosuch", "--no-plots"), 2, "--compare-by nosuch")
    assert not (sw / "summary.csv").exists() and not (sw / "results.csv").exists()  # nothing collected or written
    ok = run_cli("sweep", "analyze", str(sw), "--axis", "workers", "--no-plots", "--json")
    assert ok.returncode == 0, ok.stderr.decode()
    d = json.loads(ok.stdout)
    assert d["schema"] == "iodiag.sweep/1" and d["command"] == "analyze" and len(d["scaling"]) == 4


def test_verify_checks_html_before_running(a_file, tmp_path):
    # the job does not even need to exist: the output path is refused first
    _refused(run_cli("verify", "last", "--html", str(a_file / "v.html"), env={"IODIAG_HOME": str(tmp_path / "s")}),
             2, "--html", "is a file")


def test_recommend_train_checks_outputs_and_depth(a_file):
    _refused(run_cli("recommend", "train", "--out", str(a_file / "m.json")), 2, "--out", "is a file")
    _refused(run_cli("recommend", "train", "--out", str(a_file.parent / "m.json"), "--max-depth", "9"), 2, "--max-depth 9")
    _refused(run_cli("recommend", "evaluate", "--markdown", str(a_file / "v.md")), 2, "--markdown", "is a file")


def test_jobs_limit():
    _refused(run_cli("jobs", "--limit", "-2"), 2, "--limit -2")


def test_every_exit_code_is_documented():
    """The exit codes the error classes carry (and 1, 130) are all in docs/report-contract.md."""
    from iodiag import errors

    doc = (REPO / "docs" / "report-contract.md").read_text()
    section = doc[doc.index("Exit codes"):]
    codes = {c.exit_code for c in vars(errors).values() if isinstance(c, type) and issubclass(c, errors.IodiagError)}
    for code in codes | {0, 1, 130}:
        assert re.search(rf"(^|[ ;:]){code} ", section), f"exit code {code} is not documented"


def test_json_outputs_carry_their_schema(tmp_path):
    """Every command printing JSON tags it: jobs, site ingest/report/defaults, sweep commands (the report's and
    verify's are tested where they are made)."""
    jobs = json.loads(run_cli("jobs", "--json", env={"IODIAG_HOME": str(tmp_path / "store")}).stdout)
    assert jobs["schema"] == "iodiag.jobs/1" and jobs["jobs"] == []
    arc = tmp_path / "arc" / "2024" / "1" / "2"
    arc.mkdir(parents=True)
    (arc / "u_app_id7_1-2-3-4_1.darshan").write_bytes(LOG.read_bytes())
    ds = tmp_path / "s.parquet"
    ing = json.loads(run_cli("site", "ingest", str(tmp_path / "arc"), "--out", str(ds), "--workers", "0", "--json").stdout)
    assert ing["schema"] == "iodiag.site-ingest/1" and ing["logs_read"] == 1
    rep = json.loads(run_cli("site", "report", str(ds), "--json").stdout)
    assert rep["schema"] == "iodiag.site-report/1" and "top_jobs" in rep
    if rep["top_jobs"]:
        assert rep["top_jobs"][0]["job_id"] == "6265799" or rep["top_jobs"][0]["report_command"]
    # an error of a --json command is an object under that command's schema too
    bad = run_cli("site", "report", str(tmp_path / "nope"), "--json")
    assert bad.returncode != 0 and json.loads(bad.stdout)["schema"] == "iodiag.site-report/1"
    bad = run_cli("sweep", "collect", str(tmp_path / "nope"), "--json")
    assert bad.returncode == 3 and json.loads(bad.stdout)["schema"] == "iodiag.sweep/1"
