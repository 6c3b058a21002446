"""Site report numbers: prevalence weighted by core-hours and I/O time, top users/executables,
op sizes, files per job, trends; every figure checked against the job table it comes from."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from iodiag.analyzers import detectors
from iodiag.findings import Finding
from iodiag.site import feature_matrix, ingest_archive, load_site
from iodiag.site.aggregate import site_report
from iodiag.site.render import render_html, render_json, render_text

from test_html_support import browser, screenshot_dir  # noqa: F401  (browser is a fixture)

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO.parent / "shared" / "darshan-logs"
pytestmark = pytest.mark.skipif(not CORPUS.is_dir(), reason=f"shared corpus not found at {CORPUS}")


def small_ops(profile, cfg):
    """A test detector on real counters: most POSIX ops under 100 KiB (cost = the share of I/O time)."""
    t = profile.module("POSIX")
    if t is None:
        return []
    small = sum(float(np.clip(t[f"POSIX_SIZE_{rw}_{b}"], 0, None).sum()) for rw in ("READ", "WRITE") for b in ("0_100", "100_1K", "1K_10K", "10K_100K"))
    ops = float(np.clip(t["POSIX_READS"], 0, None).sum() + np.clip(t["POSIX_WRITES"], 0, None).sum())
    if ops < 100 or small / ops < cfg.small_io.min_share:
        return []
    io = float(np.clip(t["POSIX_F_READ_TIME"], 0, None).sum() + np.clip(t["POSIX_F_WRITE_TIME"], 0, None).sum())
    return [Finding(id="small-io", severity="medium", title="small ops", evidence={"ops": ops, "small_ops": small},
                    recommendation="aggregate", est_cost_s=io * small / ops)]


def many_opens(profile, cfg):
    """Another: a job opening more than 100 files; no cost estimate (est_cost_s None)."""
    t = profile.module("POSIX")
    if t is None or float(np.clip(t["POSIX_OPENS"], 0, None).sum()) <= 100:
        return []
    return [Finding(id="metadata-storm", severity="low", title="opens", evidence={}, recommendation="fewer files")]


def overclaiming_stdio(profile, cfg):
    """A detector that over-estimates (1e6 s): the report must cap a job's cost at its I/O time."""
    if profile.module("STDIO") is None or profile.module("POSIX") is None:
        return []
    return [Finding(id="stdio-heavy", severity="low", title="stdio", evidence={}, recommendation="-", est_cost_s=1e6)]


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setattr(detectors, "DETECTORS", [small_ops, many_opens, overclaiming_stdio])
    out = tmp_path_factory.mktemp("rep") / "site.parquet"
    try:
        ingest_archive(CORPUS, out, workers=0)  # in-process, so the test detectors are the ones that run
    finally:
        mp.undo()
    return out


def test_findings_are_stored_per_job(site):
    jobs = load_site(site)["jobs"]
    flagged = jobs[jobs["finding_small_io"]]
    assert 3 <= len(flagged) < len(jobs)
    # the detector's rule, re-derived from the stored features
    ops = jobs["posix_reads"] + jobs["posix_writes"]
    rule = (ops >= 100) & (jobs["posix_ops_lt_100k_share"] >= 0.5)
    assert set(flagged["job_key"]) == set(jobs.loc[rule, "job_key"])
    # cost = POSIX read+write time x small share, within rounding
    exp = (flagged["posix_read_time_s"] + flagged["posix_write_time_s"]) * flagged["posix_ops_lt_100k_share"]
    assert np.allclose(flagged["finding_small_io_cost_s"], exp)
    # ragged lists and wide columns agree; a finding without estimate is NaN, absent is 0
    ms = jobs[jobs["finding_metadata_storm"]]
    assert len(ms) >= 1 and ms["finding_metadata_storm_cost_s"].isna().all()
    assert (jobs.loc[~jobs["finding_metadata_storm"], "finding_metadata_storm_cost_s"] == 0).all()
    for _, r in jobs.iterrows():
        wide = [f for f in ("small-io", "metadata-storm", "stdio-heavy") if r[f"finding_{f.replace('-', '_')}"]]
        assert sorted(r["finding_ids"]) == sorted(wide)
        assert r["n_findings"] == len(r["finding_ids"])


def test_prevalence_weighting(site):
    jobs = load_site(site)["jobs"]
    rep = site_report(site)
    prev = {p["finding"]: p for p in rep["prevalence"]}
    assert set(prev) == {"small-io", "metadata-storm", "stdio-heavy"}
    for fid, col in (("small-io", "finding_small_io"), ("metadata-storm", "finding_metadata_storm")):
        f = jobs[jobs[col]]
        p = prev[fid]
        assert p["jobs"] == len(f)
        assert p["jobs_share"] == pytest.approx(len(f) / len(jobs))
        assert p["core_hours_share"] == pytest.approx(f["core_hours"].sum() / jobs["core_hours"].sum())
        assert p["io_time_share"] == pytest.approx(f["io_time_s"].sum() / jobs["io_time_s"].sum())
    assert prev["small-io"]["est_cost_s"] == pytest.approx(jobs["finding_small_io_cost_s"].sum())
    assert prev["metadata-storm"]["est_cost_s"] is None  # no detector estimate: not a made-up 0
    # ranked by recoverable core-hours: per job, cost / run time x core-hours, at most its I/O core-hours
    f = jobs[jobs["finding_small_io"]]
    by_hand = np.minimum((f["finding_small_io_cost_s"] / f["runtime_s"]).clip(0, 1) * f["core_hours"], f["io_time_s"] / 3600)
    assert prev["small-io"]["recoverable_core_hours"] == pytest.approx(by_hand.sum()) and by_hand.sum() > 0
    assert prev["metadata-storm"]["recoverable_core_hours"] == 0.0  # no estimate: nothing claimed
    rec = [p["recoverable_core_hours"] for p in rep["prevalence"]]
    assert rec == sorted(rec, reverse=True)
    # the recommendations: the same order, only findings with something to recover, each with an action and who it costs
    recs = rep["recommendations"]
    assert [r["finding"] for r in recs] == [p["finding"] for p in rep["prevalence"] if p["recoverable_core_hours"] > 0]
    top = recs[0]
    assert top["action"] and top["site_advice"] is None  # no site config
    mine = jobs[jobs[f"finding_{top['finding'].replace('-', '_')}"]]
    best_user = top["users"][0]["user"]
    assert best_user in set(mine["user"])


def test_top_users_and_executables(site):
    data = load_site(site)
    jobs, programs = data["jobs"], data["programs"]
    rep = site_report(site, top_n=5)
    users = rep["top_users"]
    assert 1 <= len(users) <= 5
    # every listed user really has affected jobs, counted right, ranked by estimated cost
    for u in users:
        mine = jobs[jobs["user"] == u["user"]]
        aff = mine[mine["n_findings"] > 0]
        assert u["jobs"] == len(mine) and u["jobs_affected"] == len(aff)
        assert u["affected_io_time_s"] == pytest.approx(aff["io_time_s"].sum())
        # a job's cost is the sum of its findings' estimates, capped at its I/O time
        capped = np.minimum(aff["finding_small_io_cost_s"] + aff["finding_stdio_heavy_cost_s"], aff["io_time_s"])
        assert u["est_cost_s"] == pytest.approx(capped.sum())
        assert u["est_cost_s"] <= u["affected_io_time_s"] * (1 + 1e-9)
    rec = [u["recoverable_core_hours"] for u in users]
    assert rec == sorted(rec, reverse=True)  # whom to contact first: most core-hours to win back
    for u in users:
        assert u["costliest_finding"] in u["findings"] and u["costliest_core_hours"] <= u["recoverable_core_hours"] + 1e-9
    exes = {e["exe"] for e in rep["top_executables"]}
    assert exes and exes <= set(programs["program"])
    # multi-program jobs: each executable is credited with its own program's numbers
    for e in rep["top_executables"]:
        mine = programs[(programs["program"] == e["exe"]) & (programs["n_findings"] > 0)]
        assert e["affected_core_hours"] == pytest.approx(mine["core_hours"].sum())
        assert e["affected_io_time_s"] == pytest.approx(mine["io_time_s"].sum())


def test_distributions_and_trends_add_up(site):
    jobs = load_site(site)["jobs"]
    rep = site_report(site)
    ops = rep["op_sizes"]
    assert ops["read_ops"][0] == pytest.approx(jobs["posix_size_read_0_100"].sum())
    assert sum(ops["write_ops"]) == pytest.approx(sum(jobs[f"posix_size_write_{b.lower()}"].sum() for b in ops["bins"]))
    with_ops = ((jobs[[c for c in jobs if c.startswith("posix_size_read_")]].sum(axis=1)) > 0).sum()
    assert sum(ops["read_jobs_by_dominant_bin"]) == with_ops
    fpj = rep["files_per_job"]
    assert sum(h["jobs"] for h in fpj["histogram"]) == len(jobs)
    assert fpj["quantiles"]["max"] == jobs["n_files"].max() and fpj["quantiles"]["p50"] == jobs["n_files"].median()
    tr = rep["trends"]
    assert tr["period"] == "month"  # the corpus spans ten years
    assert sum(r["jobs"] for r in tr["rows"]) == len(jobs)
    assert sum(r["core_hours"] for r in tr["rows"]) == pytest.approx(jobs["core_hours"].sum())
    months = [r["period"] for r in tr["rows"]]
    assert months == sorted(months)
    r2017 = next(r for r in tr["rows"] if r["period"] == "2017-03")
    sel = jobs[jobs["month"] == "2017-03"]
    assert r2017["jobs"] == len(sel)
    share = r2017["finding_share"].get("small-io", 0.0)
    assert share == pytest.approx(sel["finding_small_io"].mean())
    assert rep["errors"]["total"] >= 4 and rep["errors"]["unreadable"] == 4


def test_renderers_only_format(site, tmp_path):
    import json

    rep = site_report(site)
    text = render_text(rep)
    for title in ("Overview", "What to change", "Findings: prevalence", "Users to contact first", "Executables to look at first",
                  "POSIX op sizes", "Files per job", "Trends per month", "Damaged or unreadable logs"):
        assert title in text
    assert "small-io" in text and "metadata-storm" in text
    # op-size buckets as people read them, not Darshan's counter suffixes
    assert "≤ 100 B" in text and "100 KiB – 1 MiB" in text and "1G_PLUS" not in text and "0_100" not in text
    back = json.loads(render_json(rep))
    assert back["overview"]["jobs"] == rep["overview"]["jobs"]
    html = render_html(rep)
    assert html.startswith("<!doctype html>") and html.count("<table>") >= 6 and "small-io" in html
    assert html.count("<svg") >= 3 and "What to change" in html and "&gt; 1 GiB" in html


def test_report_on_empty_dataset(tmp_path):
    arc = tmp_path / "arc" / "2024" / "1" / "2"
    arc.mkdir(parents=True)
    (arc / "u_app_id1_1-2-3-4_1.darshan").write_bytes(b"")
    out = tmp_path / "s.parquet"
    ingest_archive(tmp_path / "arc", out, workers=0)
    rep = site_report(out)
    assert rep["overview"]["jobs"] == 0 and rep["errors"]["total"] == 1
    assert rep["prevalence"] == [] and rep["trends"]["rows"] == []
    assert "(no findings)" in render_text(rep)


def test_feature_matrix_for_the_recommender(site):
    from iodiag.analyzers.detectors import FINDING_IDS

    m = feature_matrix(site)
    programs = load_site(site)["programs"]
    X, Y, keys = m["X"], m["Y"], m["keys"]
    assert len(X) == len(Y) == len(keys) == len(programs)
    assert list(Y.columns) == list(FINDING_IDS)
    assert all(str(t) == "float64" for t in X.dtypes)
    assert {"nprocs", "core_hours", "bytes_written", "posix_size_write_0_100", "lustre_stripe_size_median_bytes"} <= set(X.columns)
    assert {"user", "exe", "program", "day"} <= set(keys.columns)
    # the label column is the stored estimate: small-io where flagged, 0 elsewhere
    flagged = programs["finding_small_io"].to_numpy()
    assert (Y.loc[flagged, "small-io"] > 0).all() and (Y.loc[~flagged, "small-io"] == 0).all()
    assert Y["metadata-storm"].isna().sum() == programs["finding_metadata_storm"].sum()


@pytest.mark.chromium
def test_html_in_chromium(site, tmp_path, browser):  # noqa: F811 (browser is a fixture)
    """The site page in headless Chromium: no script, no error, its three plots laid out with their bars drawn,
    and what to change before anything else."""
    rep = site_report(site)
    page = tmp_path / "site.html"
    page.write_text(render_html(rep), encoding="utf-8")
    r = browser.load(page, screenshot=screenshot_dir(tmp_path) / "site-report.png")
    assert r["errors"] == [] and r["scripts"] == [] and r["script_elements"] == 0
    figs = {f["id"]: f for f in r["svgs"]}
    assert {"plot-recoverable", "plot-op-sizes", "plot-files-per-job"} <= set(figs)
    for f in figs.values():
        assert f["w"] > 300 and f["h"] > 100 and f["marks"] > 0 and f["drawn"] == f["marks"], f
    # one bar per finding with something to recover
    assert figs["plot-recoverable"]["marks"] == min(10, len(rep["recommendations"]))
    text = r["text"]
    assert text.index("What to change, by recoverable") < text.index("Whom to contact first") < text.index("Findings: prevalence")
    assert rep["recommendations"][0]["finding"] in text and "> 1 GiB" in text and "1G_PLUS" not in text


def test_admin_can_follow_up_each_recommendation(site, tmp_path):
    """Each recommendation names its jobs (id, user, program, recoverable core-hours) with the command that reports
    each alone; users and programs partition the finding's recoverable core-hours; the command works."""
    import json
    import shlex

    from conftest import run_cli

    rep = site_report(site)
    assert rep["schema"] == "iodiag.site-report/1"
    jobs = load_site(site)["jobs"].set_index("job_key")
    assert rep["recommendations"]
    for r in rep["recommendations"]:
        total = r["recoverable_core_hours"]
        assert sum(u["recoverable_core_hours"] for u in r["users"]) == pytest.approx(total, rel=1e-9)
        assert sum(e["recoverable_core_hours"] for e in r["executables"]) == pytest.approx(total, rel=1e-9)
        assert r["top_jobs"] and len(r["top_jobs"]) <= min(r["jobs"], 5)
        rec = [j["recoverable_core_hours"] for j in r["top_jobs"]]
        assert rec == sorted(rec, reverse=True) and sum(rec) <= total * (1 + 1e-9)
        for j in r["top_jobs"]:
            row = jobs.loc[j["job_key"]]
            assert j["job_id"] == str(row["job_id"]) and j["user"] == (str(row["user"]) or "?")
            assert j["report_command"].startswith("iodiag report ")
    # the top jobs over all findings, each with its findings and command
    top = rep["top_jobs"]
    assert top and all(t["findings"] and t["report_command"] for t in top)
    assert sum(t["recoverable_core_hours"] for t in top) <= rep["overview"]["recoverable_core_hours"] * (1 + 1e-9)
    # the command reports that very job
    first = top[0]
    res = run_cli(*shlex.split(first["report_command"])[1:], "--json")
    assert res.returncode == 0, res.stderr.decode()[-2000:]
    assert json.loads(res.stdout)["job"]["id"] == first["job_id"]
    # text (80 columns): the job ids and their commands are there; HTML links each job to its command
    text = render_text(rep, width=80)
    assert first["job_id"] in text and first["report_command"] in text
    for ln in text.splitlines():
        assert len(ln) <= 80 or ln.strip().startswith("iodiag report "), ln
    page = render_html(rep)
    assert f"<a href='#cmd-top-0'>{first['job_id']}</a>" in page and "id='cmd-top-0'" in page
    assert json.loads(render_json(rep))["top_jobs"][0]["job_id"] == first["job_id"]
