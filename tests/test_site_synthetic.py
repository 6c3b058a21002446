"""Synthetic YYYY/M/D archives built from corpus logs, with damaged logs sprinkled in.

Every readable log must become one job row (its job id is unique), every
damaged log one error, nothing may crash, and a re-run must read nothing.
The default suite runs a few hundred logs; ``-m slow`` runs >= 10,000.
"""

from __future__ import annotations

import pytest

from iodiag.site import ingest_archive, load_site
from site_archive import CORPUS, build_archive

pytestmark = pytest.mark.skipif(not CORPUS.is_dir(), reason=f"shared corpus not found at {CORPUS}")


def check_archive(tmp_path, client, n_logs: int, logs_per_day: int):
    arc = build_archive(tmp_path / "archive", n_logs, logs_per_day=logs_per_day)
    assert len(arc.readable) + len(arc.damaged) == n_logs
    assert len(arc.damaged) >= 3 and set(arc.damaged.values()) == {"empty", "cut-200B", "garbage"}
    out = tmp_path / "site.parquet"
    seen = {"read": 0, "skipped": 0}
    s = ingest_archive(arc.root, out, client=client, progress=lambda k, n: seen.__setitem__(k, seen.get(k, 0) + n))
    assert s.logs_total == s.logs_read == seen["read"] == n_logs
    data = load_site(out)
    jobs, errors = data["jobs"], data["errors"]
    # one row per readable log, keyed by its own job id
    assert len(jobs) == len(arc.readable) == s.jobs
    assert jobs["job_key"].is_unique and (jobs["n_logs"] == 1).all() and (jobs["n_logs_failed"] == 0).all()
    expected_keys = {f"{p.parent.relative_to(arc.root).as_posix()}:{p.name.split('_')[0]}:{p.name.split('_id')[1].split('_')[0]}"
                     for p in arc.readable}
    assert set(jobs["job_key"]) == expected_keys
    # one error per damaged log, with its path and a cause; none of them produced a row
    assert len(errors) == len(arc.damaged)
    assert set(errors["path"]) == {str(p) for p in arc.damaged}
    assert (~errors["loaded"]).all() and errors["cause"].str.len().min() > 10
    by_kind = dict(zip(errors["path"], errors["cause"]))
    for p, kind in arc.damaged.items():
        if kind == "empty":
            assert "empty (0 bytes)" in by_kind[str(p)]
    # days come from the YYYY/M/D folders
    assert set(jobs["day"]) <= arc.days and len(set(jobs["day"])) == len(arc.days)
    # the numbers are the corpus logs' numbers: same bytes for the same source file
    assert jobs["bytes_written"].sum() > 0 and jobs["core_hours"].notna().all()
    # re-run: nothing new is read and nothing is written
    parts = sorted(p.name for p in (out / "jobs").iterdir())
    again = ingest_archive(arc.root, out, client=client)
    assert again.logs_read == 0 and again.logs_skipped == n_logs and again.tasks == 0
    assert sorted(p.name for p in (out / "jobs").iterdir()) == parts
    return s


def test_synthetic_archive_few_hundred_logs(tmp_path, cluster):
    s = check_archive(tmp_path, cluster, n_logs=400, logs_per_day=40)
    assert s.tasks >= 4 * 2  # about four tasks per worker


@pytest.mark.slow
def test_synthetic_archive_10k_logs(tmp_path, cluster):
    s = check_archive(tmp_path, cluster, n_logs=10_200, logs_per_day=60)
    assert s.tasks >= 4 * 2  # about four tasks per worker
