"""Site ingest on the shared corpus used as an archive (real logs, real Dask cluster)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from iodiag.config import Config
from iodiag.errors import InputNotFound, UsageError
from iodiag.site import ingest_archive, load_site

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO.parent / "shared" / "darshan-logs"
PYTOKIO = CORPUS / "pytokio" / "tests" / "inputs" / "darshanlogs"

pytestmark = pytest.mark.skipif(not CORPUS.is_dir(), reason=f"shared corpus not found at {CORPUS}")


def all_logs(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file() and p.name.endswith((".darshan", ".darshan_partial")))


@pytest.fixture(scope="module")
def corpus_site(tmp_path_factory, cluster):
    out = tmp_path_factory.mktemp("site") / "corpus.parquet"
    events: list[tuple[str, int]] = []
    summary = ingest_archive(CORPUS, out, client=cluster, progress=lambda k, n: events.append((k, n)))
    return out, summary, events


def test_corpus_every_log_is_a_row_or_an_error(corpus_site):
    out, summary, events = corpus_site
    logs = all_logs(CORPUS)
    assert summary.logs_total == len(logs) == summary.logs_read
    data = load_site(out)
    jobs, errors, state = data["jobs"], data["errors"], data["logs"]
    assert len(state) == len(logs)
    ok = state[state["status"] == "ok"]
    unreadable = set(errors.loc[~errors["loaded"], "path"])
    # each log is read into exactly one job row, or is an unreadable-log error: never both, never neither
    assert int(jobs["n_logs"].sum()) == len(ok)
    assert len(unreadable) == len(state) - len(ok)
    assert {Path(p).name for p in unreadable} == set(state.loc[state["status"] == "error", "name"])
    # the zero-byte logs the MANIFEST lists are errors with the cause spelled out
    zero = [p for p in logs if p.stat().st_size == 0]
    assert len(zero) == 3
    for p in zero:
        cause = errors.loc[errors["path"] == str(p), "cause"].tolist()
        assert cause and "empty (0 bytes)" in cause[0]
    # the 900-byte truncated log crashes darshan-util: an error, not a crash of the run
    cut900 = [p for p in unreadable if "truncated-900B" in p]
    assert len(cut900) == 1
    # the 20000-byte truncated copy is readable for counters but flagged as damaged
    cut = errors[errors["path"].str.contains("truncated-20000B")]
    assert len(cut) >= 1 and cut["loaded"].all() and (cut["kind"] == "truncated").all()
    row = jobs[jobs["job_key"].str.contains("truncated-20000B")]
    assert len(row) == 1 and bool(row["partial"].iloc[0])
    # the progress callback saw the total and every log once
    assert ("total", len(logs)) in events
    assert sum(n for k, n in events if k in ("read", "skipped")) == len(logs)


def test_corpus_groups_jobs_and_programs(corpus_site):
    out, _, _ = corpus_site
    data = load_site(out)
    jobs, programs = data["jobs"], data["programs"]
    # DLIO: 24 per-process logs sharing job id 3116902 -> one job of 24 logs
    dlio = jobs[(jobs["job_id"] == "3116902")]
    assert len(dlio) == 1
    assert int(dlio["n_logs"].iloc[0]) == 24 and int(dlio["nprocs"].iloc[0]) == 24
    # pytokio archive: job 4478544 ran vpicio_uni then dbscan_read, 2048 ranks each, on 2017-03-20
    j = jobs[(jobs["job_id"] == "4478544") & jobs["dir"].str.startswith("pytokio/")]
    assert len(j) == 1
    j = j.iloc[0]
    assert j["day"] == "2017-03-20" and j["user"] == "glock" and j["n_programs"] == 2 and j["nprocs"] == 4096
    progs = programs[programs["job_key"] == j["job_key"]].set_index("program")
    assert set(progs.index) == {"vpicio_uni", "dbscan_read"}
    assert (progs["nprocs"] == 2048).all()
    # programs add up to their job
    for col in ("bytes_read", "bytes_written", "posix_opens", "n_logs"):
        assert progs[col].sum() == pytest.approx(j[col])
    # vpicio writes, dbscan reads the same HDF5 file on Lustre
    assert progs.loc["vpicio_uni", "bytes_written"] > 1e9 and progs.loc["dbscan_read", "bytes_read"] > 1e9
    assert j["fs_type_main"] == "lustre" and j["lustre_files"] >= 1
    assert j["lustre_stripe_count_median"] == 24 and j["lustre_stripe_size_median_bytes"] == 1 << 20
    # h5py dataset of 100,000 float64 in chunks of 1,000 elements: 8,000-byte chunks (MANIFEST note)
    h5 = jobs[jobs["dir"] == "generated/h5py-chunked-read-hdf5mod"].iloc[0]
    assert h5["uses_hdf5"] and h5["h5d_chunk_bytes_median"] == 8000


def test_features_match_pydarshan(corpus_site):
    """Volumes and op counts agree with pydarshan's own record reader."""
    darshan = pytest.importorskip("darshan")
    out, _, _ = corpus_site
    jobs = load_site(out)["jobs"]
    for rel in ("darshan/darshan-util/pydarshan/darshan/tests/input/sample.darshan",
                "darshan-logs/darshan_logs/imbalanced_io/imbalanced-io.darshan"):
        path = CORPUS / rel
        rep = darshan.DarshanReport(str(path), read_all=False)
        rep.mod_read_all_records("POSIX")
        c = rep.records["POSIX"].to_df()["counters"]
        f = rep.records["POSIX"].to_df()["fcounters"]
        row = jobs[jobs["job_key"].str.endswith(path.name)].iloc[0]
        assert row["posix_bytes_written"] == c["POSIX_BYTES_WRITTEN"].clip(lower=0).sum()
        assert row["posix_reads"] == c["POSIX_READS"].clip(lower=0).sum()
        assert row["posix_opens"] >= c["POSIX_OPENS"].clip(lower=0).sum()
        assert row["posix_size_write_100k_1m"] == c["POSIX_SIZE_WRITE_100K_1M"].clip(lower=0).sum()
        assert row["posix_write_time_s"] == pytest.approx(f["POSIX_F_WRITE_TIME"].clip(lower=0).sum())
        assert row["nprocs"] == rep.metadata["job"]["nprocs"]
        assert row["core_hours"] == pytest.approx(rep.metadata["job"]["nprocs"] * row["runtime_s"] / 3600)


def test_rerun_reads_nothing_new(corpus_site, cluster):
    out, first, _ = corpus_site
    parts = sorted(p.name for p in (out / "jobs").iterdir())
    again = ingest_archive(CORPUS, out, client=cluster)
    assert again.run == first.run + 1
    assert again.logs_read == 0 and again.logs_skipped == first.logs_total and again.tasks == 0
    assert sorted(p.name for p in (out / "jobs").iterdir()) == parts


def test_incremental_new_logs_and_repaired_log(tmp_path, cluster):
    arc = tmp_path / "logs"
    shutil.copytree(PYTOKIO, arc)
    out = tmp_path / "site.parquet"
    s1 = ingest_archive(arc, out, client=cluster)
    assert (s1.logs_read, s1.jobs) == (4, 1)
    d1 = load_site(out)
    assert len(d1["errors"]) == 2  # the two zero-byte logs of 2017/3/21
    # a new day arrives, and a log of an existing job shows up late in 2017/3/20
    new_day = arc / "2017" / "3" / "22"
    new_day.mkdir()
    src = next((arc / "2017" / "3" / "20").glob("glock_vpicio_uni_*"))
    shutil.copyfile(src, new_day / "glock_vpicio_uni_id4500000_3-22-100-1_1.darshan")
    shutil.copyfile(src, arc / "2017" / "3" / "20" / "glock_h5ls_id4478544_3-20-9000-5_1.darshan")
    # and a zero-byte log is repaired (say, recovered from the mmap file)
    broken = next((arc / "2017" / "3" / "21").glob("glock_vpicio_uni_*"))
    shutil.copyfile(src, broken)
    s2 = ingest_archive(arc, out, client=cluster)
    # every changed job is read whole: 1 new-day log + the 3 logs of job 4478544
    # + the 2 logs of job 4487503 (repaired vpicio_uni, still-empty dbscan_read)
    assert s2.logs_total == 6 and s2.logs_read == 6 and s2.logs_skipped == 0
    # a fourth day with one new job: only that log is read
    day4 = arc / "2017" / "3" / "23"
    day4.mkdir()
    shutil.copyfile(src, day4 / "glock_vpicio_uni_id4600000_3-23-100-1_1.darshan")
    s2b = ingest_archive(arc, out, client=cluster)
    assert (s2b.logs_read, s2b.logs_skipped, s2b.jobs) == (1, 6, 1)
    d2 = load_site(out)
    jobs = d2["jobs"].set_index("job_id")
    assert set(jobs.index) == {"4478544", "4500000", "4487503", "4600000"}
    # the late log is a copy of the vpicio_uni log: programs come from the header exe
    assert jobs.loc["4478544", "n_logs"] == 3 and jobs.loc["4478544", "n_programs"] == 2
    assert jobs.loc["4478544", "nprocs"] == 3 * 2048
    assert jobs.loc["4487503", "n_logs"] == 1 and jobs.loc["4487503", "n_logs_failed"] == 1
    assert jobs.loc["4500000", "day"] == "2017-03-22"
    assert len(d2["errors"]) == 1 and "dbscan_read" in d2["errors"]["path"].iloc[0]
    s3 = ingest_archive(arc, out, client=cluster)
    assert s3.logs_read == 0


def test_in_process_mode_and_parts(tmp_path):
    """--workers 0 reads without Dask; small part_rows flushes several parquet parts."""
    import dataclasses

    cfg = dataclasses.replace(Config(), site=dataclasses.replace(Config().site, batch_logs=8, part_rows=10))
    root = CORPUS / "darshan-logs" / "darshan_logs"
    out = tmp_path / "s.parquet"
    s = ingest_archive(root, out, workers=0, config=cfg)
    assert s.workers == 0 and s.tasks >= len(all_logs(root)) // 8
    assert len(list((out / "jobs").glob("*.parquet"))) >= 3
    jobs = load_site(out)["jobs"]
    assert jobs["job_key"].is_unique and len(jobs) == s.jobs


def test_user_errors(tmp_path):
    with pytest.raises(InputNotFound):
        ingest_archive(tmp_path / "nope", tmp_path / "o.parquet", workers=0)
    (tmp_path / "notsite").mkdir()
    (tmp_path / "notsite" / "x").write_text("x")
    with pytest.raises(UsageError, match="not a site dataset"):
        ingest_archive(PYTOKIO, tmp_path / "notsite", workers=0)
    ingest_archive(PYTOKIO, tmp_path / "a.parquet", workers=0)
    with pytest.raises(UsageError, match="one --out per archive"):
        ingest_archive(CORPUS / "generated", tmp_path / "a.parquet", workers=0)


def _cli(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO / "src") + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-m", "iodiag", *args], capture_output=True, text=True, env=env, timeout=300)


def test_cli_ingest_and_report(tmp_path):
    import json

    out = tmp_path / "site.parquet"
    r = _cli("site", "ingest", str(PYTOKIO), "--out", str(out), "--workers", "1", "--json")
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)
    assert summary["logs_read"] == 4 and summary["jobs"] == 1 and summary["errors"] == 2
    r = _cli("site", "report", str(out), "--json", "--html", str(tmp_path / "r.html"))
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert rep["overview"]["jobs"] == 1 and rep["overview"]["logs_damaged"] == 2
    assert rep["trends"]["rows"][0]["period"] == "2017-03-20"
    html = (tmp_path / "r.html").read_text()
    assert "glock_dbscan_read_id4487503" in html and "<table>" in html
    r = _cli("site", "report", str(out))
    assert r.returncode == 0 and "Damaged or unreadable logs" in r.stdout and "unreadable" in r.stdout
    # user errors: one line, the path, non-zero exit, no traceback
    r = _cli("site", "report", str(tmp_path / "missing.parquet"))
    assert r.returncode == 3 and "missing.parquet" in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    r = _cli("site", "ingest", str(tmp_path / "nowhere"), "--out", str(out))
    assert r.returncode == 3 and "nowhere" in r.stderr and "Traceback" not in r.stderr


def test_cli_ingest_on_a_running_scheduler(tmp_path, cluster):
    """--scheduler ADDRESS: the CLI submits to an existing cluster (as with dask-jobqueue)."""
    import json

    address = cluster.scheduler_info()["address"]
    out = tmp_path / "site.parquet"
    r = _cli("site", "ingest", str(PYTOKIO), "--out", str(out), "--scheduler", address, "--json")
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    assert s["workers"] == 2 and s["logs_read"] == 4 and s["jobs"] == 1
    assert len(load_site(out)["programs"]) == 2


SNAPSHOT = Path(__file__).resolve().parent / "snapshots" / "site-corpus-rows.json"


def test_corpus_table_is_unchanged(corpus_site, tmp_path):
    """Every cell of the corpus ingest (jobs, programs, errors, log states) equals the recorded snapshot,
    on the Dask cluster and in this process: speed work must not change a single feature.
    After an intended change of the features: IODIAG_UPDATE_SNAPSHOTS=1 pytest tests/test_site_ingest.py"""
    import json

    from site_rows import diff_rows, row_digests, site_rows

    out, _, _ = corpus_site
    got = site_rows(out, CORPUS)
    local = tmp_path / "local.parquet"
    ingest_archive(CORPUS, local, workers=0)
    assert not diff_rows(got, site_rows(local, CORPUS)), diff_rows(got, site_rows(local, CORPUS))
    digests = row_digests(got)
    if os.environ.get("IODIAG_UPDATE_SNAPSHOTS"):
        SNAPSHOT.write_text(json.dumps(digests, indent=1) + "\n")
    want = json.loads(SNAPSHOT.read_text())
    for table in want:
        changed = sorted(k for k in set(want[table]) | set(digests[table]) if want[table].get(k) != digests[table].get(k))
        assert not changed, f"{table}: {len(changed)} rows differ from {SNAPSHOT.name}, e.g. {changed[:5]}"


def test_cli_cluster_without_sbatch(tmp_path):
    """--cluster slurm on a machine without sbatch: one line that says so and what to do instead."""
    pytest.importorskip("dask_jobqueue")
    env = dict(os.environ, PATH=str(tmp_path), PYTHONPATH=str(REPO / "src"))
    r = subprocess.run([sys.executable, "-m", "iodiag", "site", "ingest", str(PYTOKIO), "--out", str(tmp_path / "s.parquet"),
                        "--cluster", "slurm"], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert "sbatch not found" in r.stderr and "--workers" in r.stderr
    r = subprocess.run([sys.executable, "-m", "iodiag", "site", "ingest", str(PYTOKIO), "--out", str(tmp_path / "s.parquet"),
                        "--cluster", "slurm", "--workers", "2"], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 2 and "leave out --scheduler and --workers" in r.stderr


def test_driver_keeps_no_job_specs(corpus_site):
    """The scheduler (in this process) keeps finished tasks' arguments: tasks carry their jobs packed
    in one byte string, so no Unit of the 134 corpus logs outlives the ingest here (they cost ~1.3 kB
    per log each, for the whole run, when submitted as objects)."""
    import gc

    from iodiag.site.walk import Unit

    gc.collect()
    assert [o for o in gc.get_objects() if isinstance(o, Unit)] == []
