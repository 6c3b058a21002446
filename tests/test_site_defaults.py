"""`iodiag site defaults` and site configs: default-vs-best numbers, weighting by the site's own jobs, the site config
a user's report reads, and bad input.

Real data: the site dataset is the Darshan corpus ingested with the real detectors; the sweeps are the ones measured
on this machine (docs/site-defaults/sweeps/, collected by `iodiag sweep collect`).  The one constructed table is the
stripe-count table of ``test_default_vs_best_by_hand``, a unit test of the arithmetic (no Lustre here, so a stripe
sweep cannot be measured; its numbers are made up to be checked by hand and are never shipped as results).
"""

from __future__ import annotations

import json
import shlex
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from conftest import CORPUS, corpus_path, run_cli
from iodiag.config import load_config
from iodiag.errors import NoUsableData, UsageError
from iodiag.site import ingest_archive, load_site
from iodiag.site.defaults import site_defaults, tunable_defaults
from iodiag.site.render import render_site_toml
from iodiag.site.sweeps import job_inputs, load_sweeps, map_jobs

REPO = Path(__file__).resolve().parents[1]
SWEEPS = REPO / "docs" / "site-defaults" / "sweeps"
READ = SWEEPS / "read-chunks.csv"
CONVERT = [SWEEPS / f"convert-compressor-rep{i}.csv" for i in (1, 2, 3)]
SMALL_IO_LOG = "dxt-explorer/sample/jeanbez_8_benchmark_parallel_id45195555_8-6-50011-11681279140261054765_1628283217.darshan"
E3SM_LOG = "darshan-logs/darshan_logs/e3sm_io_heatmaps_and_dxt/e3sm_io_heatmap_only.darshan"  # E3SM: PnetCDF, 512 ranks
pytestmark = pytest.mark.skipif(not CORPUS.is_dir(), reason=f"shared corpus not found at {CORPUS}")


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("defaults") / "site.parquet"
    ingest_archive(CORPUS, out, workers=0)
    return out


@pytest.fixture(scope="module")
def jobs(site):
    return load_site(site, tables=("jobs",))["jobs"]


def _rel(table, scenario, setting):
    f = table.frame
    t = f.groupby(["scenario", "setting"])["time_s"].mean()
    return t[scenario].min() / t[(scenario, setting)]


# -- the arithmetic, on a small constructed table -------------------------------------------------------------

def test_default_vs_best_by_hand(tmp_path):
    # UNIT TEST OF THE ARITHMETIC ONLY: a stripe-count sweep as a Lustre site would give it (invented times; no
    # Lustre here).  Two scenarios described in job-feature terms (largest file, processes).
    rows = []
    times = {("small-files", "1"): 10.0, ("small-files", "8"): 20.0, ("big-shared", "1"): 40.0, ("big-shared", "8"): 10.0}
    desc = {"small-files": (1e6, 4), "big-shared": (4e9, 256)}
    for (sc, st), t in times.items():
        for rep in range(2):  # repetitions are averaged
            rows.append({"scenario": sc, "setting": st, "time_s": t + (0.5 if rep else -0.5),
                         "max_file_bytes": desc[sc][0], "nprocs": desc[sc][1]})
    path = tmp_path / "stripes.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    (table,) = load_sweeps([path], tunable="stripe_count")
    assert table.kind == "descriptors" and table.descriptors == ["max_file_bytes", "nprocs"]
    # uniform: stripe 1 -> rel (1, 0.25); stripe 8 -> rel (0.5, 1)
    res = tunable_defaults(table, None, uniform=True)
    s = {d["setting"]: d for d in res["measured"]["defaults"]}
    assert s["1"]["arithmetic"] == pytest.approx((1 + 0.25) / 2)
    assert s["1"]["geometric"] == pytest.approx(math.sqrt(0.25))
    assert s["1"]["harmonic"] == pytest.approx(2 / (1 + 4))
    assert s["8"]["arithmetic"] == pytest.approx(0.75) and s["8"]["harmonic"] == pytest.approx(2 / 3)
    assert s["1"]["best_share"] == s["1"]["worst_share"] == 0.5
    assert res["default"] == "8"  # harmonic 0.667 > 0.4
    # a site whose jobs are 3 small-file jobs of 1 core-hour of I/O and 1 big shared-file job of 1 core-hour:
    jobs = pd.DataFrame({"job_key": list("abcd"), "max_file_bytes": [2e6, 5e5, 1e6, 3e9], "nprocs": [2, 8, 4, 512],
                         "io_time_s": [3600.0] * 4, "core_hours": [10.0] * 4})
    mix = map_jobs(jobs, table)
    assert dict(zip(mix.rows["job_key"], mix.rows["scenario"])) == {"a": "small-files", "b": "small-files", "c": "small-files", "d": "big-shared"}
    res = tunable_defaults(table, jobs)
    s = {d["setting"]: d for d in res["site"]["defaults"]}
    # weights 3/4, 1/4: stripe 1 -> arithmetic 0.75 + 0.0625, harmonic 1 / (0.75 + 1); stripe 8 -> 0.375 + 0.25, 1 / (1.5 + 0.25)
    assert s["1"]["arithmetic"] == pytest.approx(0.75 * 1 + 0.25 * 0.25)
    assert s["1"]["harmonic"] == pytest.approx(1 / (0.75 / 1 + 0.25 / 0.25))
    assert s["8"]["arithmetic"] == pytest.approx(0.75 * 0.5 + 0.25 * 1)
    assert s["8"]["harmonic"] == pytest.approx(1 / (0.75 / 0.5 + 0.25 / 1))
    assert res["default"] == "1"  # the site mostly runs small-file jobs: the weighted default flips
    # the tree splits the site's jobs and beats the single default; its rule speaks of the jobs' counters
    tr = res["tree"]
    assert tr["beats_default"] and tr["policy"]["harmonic"] == pytest.approx(1.0)
    assert tr["user_rules"] and tr["user_rules"][0]["setting"] == "8"
    assert "largest file >" in tr["user_rules"][0]["when"] or "processes >" in tr["user_rules"][0]["when"]


# -- the measured sweeps and the corpus site ------------------------------------------------------------------

def test_measured_sweeps_load_as_collected():
    (read,) = load_sweeps([READ])
    assert read.kind == "read-pattern" and read.io == "read"
    assert set(read.scenarios) == {"point", "timeseries", "slice", "slices_same_chunk", "slices_across_chunks", "whole"}
    assert len(read.settings) == 4 and any("contiguous" in s for s in read.settings)
    assert len(read.frame) == 3 * 4 * 6  # 3 interleaved repetitions x 4 layouts x 6 patterns
    (conv,) = load_sweeps(CONVERT)  # three repetition folders of one tunable are joined
    assert conv.kind == "write-size" and conv.tunable == "write_compressor"
    assert set(conv.settings) == {"none", "zstd", "blosc"} and len(conv.frame) == 27


def test_jobs_map_to_scenarios_from_their_counters(jobs):
    (read,) = load_sweeps([READ])
    mix = map_jobs(jobs, read)
    inp = job_inputs(jobs)
    readers = int((inp["reads"] > 0).sum())
    assert mix.jobs_total == len(jobs) and mix.jobs_mapped + sum(mix.unmapped.values()) == len(jobs)
    assert mix.unmapped.get("reads nothing through POSIX", 0) == len(jobs) - readers - sum(
        v for k, v in mix.unmapped.items() if k != "reads nothing through POSIX")
    # a job mapped to "whole" read at least half of its files; "point"/"timeseries" jobs read small requests
    by_key = dict(zip(jobs["job_key"], range(len(jobs))))
    for key, sc in zip(mix.rows["job_key"], mix.rows["scenario"]):
        i = by_key[key]
        if sc == "whole":
            assert inp["read_file_coverage"][i] >= 0.5
        elif sc in ("point", "timeseries"):
            assert inp["read_request_bytes"][i] < 100 * 1024 and inp["read_file_coverage"][i] < 0.5
    # weights are the core-hours spent reading
    w = mix.rows.groupby("job_key")["weight"].sum()
    rt = jobs.set_index("job_key")["read_time_s"] / 3600
    assert np.allclose(w.to_numpy(), rt.loc[w.index].to_numpy())


def test_weighting_by_the_mix_changes_the_default_where_it_should(jobs):
    (conv,) = load_sweeps(CONVERT)
    small_chunk = "1x1x181x360"
    best_small = min(conv.settings, key=lambda s: -_rel(conv, small_chunk, s))
    uniform = tunable_defaults(conv, jobs, uniform=True)["default"]
    assert best_small != uniform  # measured here: the small-chunk scenario's best is not the uniform default
    req = job_inputs(jobs)["write_request_bytes"]
    small_writers = jobs[np.nan_to_num(req) < 1e5]
    large_writers = jobs[np.nan_to_num(req) > 4e6]
    assert len(small_writers) >= 3 and len(large_writers) >= 3
    res_small = tunable_defaults(conv, small_writers)
    # every small writer maps onto the small-chunk scenario, so its best setting becomes the site default
    assert [s["scenario"] for s in res_small["mix"]["scenarios"] if s["weight"] > 0] == [small_chunk]
    assert res_small["default"] == best_small
    res_large = tunable_defaults(conv, large_writers)
    assert res_large["default"] == uniform
    # the read layout too: a site of small-request readers is served best by small chunks
    (read,) = load_sweeps([READ])
    inp = job_inputs(jobs)
    small_readers = jobs[(np.nan_to_num(inp["read_request_bytes"], nan=1e12) < 100 * 1024)
                         & (np.nan_to_num(inp["read_file_coverage"], nan=1.0) < 0.5)]
    r = tunable_defaults(read, small_readers)
    mixw = {x["scenario"]: x["weight"] for x in r["mix"]["scenarios"] if x["weight"] > 0}
    tot = sum(mixw.values())

    def harmonic(setting):  # the weighted harmonic mean of relative performance, by hand
        return 1 / sum(w / tot / _rel(read, sc, setting) for sc, w in mixw.items())

    expect = max(read.settings, key=harmonic)
    assert r["default"] == expect and "1x1x181x360" in r["default"]
    assert "contiguous" in tunable_defaults(read, jobs, uniform=True)["default"]


def test_proposed_toml_is_a_site_config(site, tmp_path):
    res = site_defaults(site, [READ, *CONVERT], site_name="Test site")
    text = render_site_toml(res)
    path = tmp_path / "site.toml"
    path.write_text(text)
    cfg = load_config(site_config=path)
    assert cfg.site.name == "Test site"
    assert cfg.site.defaults == {t["tunable"]: t["default"] for t in res["tunables"]}
    assert set(cfg.site.advice) == {"small-io", "random-access", "redundant-read"}
    assert res["tunables"][0]["default"] in cfg.site.advice["small-io"]
    assert list(cfg.site.rules) == res["config"]["rules"]
    for t in res["tunables"]:
        assert t["tree"] is not None and t["tree"]["depth"] <= 4


def test_site_config_changes_a_users_report(tmp_path):
    log = str(corpus_path(SMALL_IO_LOG))
    site = tmp_path / "site.toml"
    site.write_text('[severity]\nhigh = 0.1\n\n[site]\nname = "Cluster A"\n\n[site.advice]\n'
                    '"small-io" = "use /scratch/big (stripe count 4) and chunks of at least 4 MiB; see docs.example.org/io"\n')
    before = json.loads(run_cli("report", log, "--json").stdout)
    after = run_cli("report", log, "--json", "--site-config", str(site))
    assert after.returncode == 0, after.stderr.decode()
    after = json.loads(after.stdout)
    b = {f["id"]: f for f in before["findings"]}["small-io"]
    a = {f["id"]: f for f in after["findings"]}["small-io"]
    share = b["est_cost_s"] / before["job"]["runtime_s"]
    assert 0.1 <= share < 0.2 and b["severity"] == "medium" and a["severity"] == "high"  # the site's threshold
    assert a["recommendation"].startswith(b["recommendation"].rstrip())
    assert a["recommendation"].endswith("Site advice (Cluster A): use /scratch/big (stripe count 4) and chunks of at least 4 MiB; see docs.example.org/io")
    # the same through the environment, and the user's own config wins over the site's
    env = {"IODIAG_SITE_CONFIG": str(site)}
    user = tmp_path / "user.toml"
    user.write_text("[severity]\nhigh = 0.5\n")
    mine = json.loads(run_cli("report", log, "--json", "--config", str(user), env=env).stdout)
    m = {f["id"]: f for f in mine["findings"]}["small-io"]
    assert m["severity"] == "medium" and "Site advice (Cluster A):" in m["recommendation"]
    text = run_cli("report", log, "--no-color", env=env).stdout.decode()
    assert "Site advice (Cluster A): use /scratch/big" in " ".join(text.split())  # wherever the lines wrap


def test_site_advice_after_long_advice_reaches_the_terminal(tmp_path):
    """Site advice is appended after the rules' text; where that text has three or more '; '-parts (E3SM's
    rank-imbalance: aggregators, the file's striping, the share per process) the terminal still shows every
    part and the site's advice after them, at 80 columns."""
    log = str(corpus_path(E3SM_LOG))
    site = tmp_path / "site.toml"
    site.write_text('[site]\nname = "Cluster B"\n\n[site.advice]\n'
                    '"rank-imbalance" = "ask the I/O team for a striping review; see docs.example.org/stripes"\n')
    env = {"IODIAG_SITE_CONFIG": str(site), "COLUMNS": "80"}
    rep = json.loads(run_cli("report", log, "--json", env=env).stdout)
    advice = {f["id"]: f for f in rep["findings"]}["rank-imbalance"]["recommendation"]
    rules_text, site_text = advice.split(" Site advice (Cluster B): ")
    assert len(rules_text.split("; ")) >= 3, "the rules' advice has fewer than 3 parts now: pick another finding"
    assert site_text == "ask the I/O team for a striping review; see docs.example.org/stripes"
    text = run_cli("report", log, "--no-color", env=env).stdout.decode()
    shown = " ".join(text.split())  # wherever lines wrap
    assert " ".join(advice.split()) in shown and "more in --json/--html" not in shown
    # the site's advice starts a line of its own, under iodiag's (not glued onto its last sentence)
    assert any(ln.strip().startswith("Site advice (Cluster B): ask the I/O team") for ln in text.splitlines()), text


# -- bad input: one clear error each ----------------------------------------------------------------------------

def _one_line_error(proc, *needles):
    err = proc.stderr.decode()
    assert proc.returncode != 0 and "Traceback" not in err, err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("iodiag: error:"), err
    for n in needles:
        assert n in err, (n, err)


def test_bad_input_is_one_clear_error(site, tmp_path):
    # a dataset without the needed columns (an older or foreign job table)
    old = tmp_path / "old.parquet"
    import shutil

    shutil.copytree(site, old)
    for part in (old / "jobs").glob("*.parquet"):
        t = pd.read_parquet(part)
        t.drop(columns=["max_file_bytes"]).to_parquet(part, index=False)
    _one_line_error(run_cli("site", "defaults", str(old), "--sweep", str(READ)), "max_file_bytes", "re-ingest")
    # sweeps that cover one setting only
    one = tmp_path / "one.csv"
    pd.read_csv(READ).query("chunks == 'contiguous'").to_csv(one, index=False)
    _one_line_error(run_cli("site", "defaults", str(site), "--sweep", str(one)), "covers 1 setting", "at least two")
    # a table that is not a sweep
    junk = tmp_path / "junk.csv"
    junk.write_text("a,b\n1,2\n")
    _one_line_error(run_cli("site", "defaults", str(site), "--sweep", str(junk)), "scenario", "--setting")
    # no sweep at all
    _one_line_error(run_cli("site", "defaults", str(site)), "no sweep given")
    # an empty archive: the ingest says so before writing anything
    empty = tmp_path / "empty"
    (empty / "2024" / "1" / "1").mkdir(parents=True)
    _one_line_error(run_cli("site", "ingest", str(empty), "--out", str(tmp_path / "e.parquet"), "--workers", "0"), "no Darshan logs found")
    # an archive of damaged logs only: a dataset without a job
    (empty / "2024" / "1" / "1" / "u_app_id1_1-1-3-4_1.darshan").write_bytes(b"")
    ds = tmp_path / "empty.parquet"
    ingest_archive(empty, ds, workers=0)
    _one_line_error(run_cli("site", "defaults", str(ds), "--sweep", str(READ)), "holds no job")
    with pytest.raises(NoUsableData):
        site_defaults(ds, [READ])
    with pytest.raises(UsageError):
        site_defaults(site, [READ], mean="median")
    # a site config with a wrong type is the config's error, naming the file
    bad = tmp_path / "bad.toml"
    bad.write_text('[site.advice]\n"small-io" = 3\n')
    _one_line_error(run_cli("report", str(corpus_path(SMALL_IO_LOG)), "--site-config", str(bad)), "bad.toml", "site")


def test_cli_writes_toml_and_report_uses_it(site, tmp_path):
    toml = tmp_path / "site.toml"
    p = run_cli("site", "defaults", str(site), "--sweep", str(READ), *(a for c in CONVERT for a in ("--sweep", str(c))),
                "--toml", str(toml), "--name", "Corpus")
    assert p.returncode == 0, p.stderr.decode()
    out = p.stdout.decode()
    assert "default vs best, weighted by the site's workload mix" in out and "harm. mean" in out and "◀ default" in out
    assert toml.is_file() and load_config(site_config=toml).site.name == "Corpus"
    rep = run_cli("site", "report", str(site), "--json", "--site-config", str(toml))
    recs = json.loads(rep.stdout)["recommendations"]
    told = {r["finding"]: r["site_advice"] for r in recs}
    # in a user's words (no tunable names), and only for the jobs its sweep stands for: serial POSIX readers
    assert told["small-io"].startswith("Site advice (Corpus): Data read here is read fastest when stored as")
    assert "read_layout" not in told["small-io"] and all(r["action"] for r in recs)
    assert any(v is None for v in told.values())  # findings the site config says nothing about
    small = next(r for r in recs if r["finding"] == "small-io")
    assert small["site_advice_scope"] == "serial-read" and 0 < small["site_advice_jobs"] <= small["jobs"]
    from iodiag.site import load_site

    jobs = load_site(site)["jobs"].set_index("job_key")
    for j in small["top_jobs"]:  # the advice is marked for a job exactly when it reads through POSIX without MPI-IO
        row = jobs.loc[j["job_key"]]
        assert j["site_advice_applies"] == bool(row["posix_reads"] > 0 and not row["uses_mpiio"]), j
    assert any(j["site_advice_applies"] is False for r in recs for j in r["top_jobs"] if r["site_advice"])
    # the per-job report agrees: an MPI-IO job's report does not carry the serial readers' advice
    mpi = next(j for r in recs for j in r["top_jobs"] if r["finding"] == "small-io" and j["site_advice_applies"] is False)
    cmd = shlex.split(mpi["report_command"])[2:]
    per_job = json.loads(run_cli("report", *cmd, "--json", "--site-config", str(toml)).stdout)
    assert per_job["findings"] and not any("Site advice" in f["recommendation"] for f in per_job["findings"])
