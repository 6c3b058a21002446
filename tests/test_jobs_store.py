"""Job store: unique ids under concurrency, atomic records, id/prefix/last resolution, `iodiag jobs`."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import re

import pytest

from conftest import run_cli
from iodiag.errors import AmbiguousInput, InputNotFound, JobStoreError
from iodiag.jobs import store


def _claim(args):
    root, i = args
    return store.create_job(name="convert.py", root=root, record={"n": i}).id


def test_ids_are_readable_and_unique_across_processes(tmp_path):
    with mp.get_context("fork").Pool(4) as pool:
        ids = pool.map(_claim, [(str(tmp_path), i) for i in range(40)])
    assert len(set(ids)) == 40
    for job_id in ids:
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}-convert-[0-9a-f]{4}", job_id), job_id
        data = json.loads((tmp_path / "jobs" / job_id / "job.json").read_text())
        assert data["id"] == job_id and data["status"] == "running"


def test_store_root_precedence(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("IODIAG_HOME", raising=False)
    assert store.store_root() == tmp_path / "xdg" / "iodiag"
    monkeypatch.setenv("IODIAG_HOME", str(tmp_path / "home"))
    assert store.store_root() == tmp_path / "home"
    assert store.store_root(tmp_path / "flag") == tmp_path / "flag"


def test_find_job_by_id_prefix_last_and_folder(tmp_path):
    a = store.create_job(name="alpha", root=tmp_path, when=1_700_000_000)
    b = store.create_job(name="beta", root=tmp_path, when=1_700_000_100)
    c = store.create_job(name="beta", root=tmp_path, when=1_700_000_200)
    assert store.find_job("last", root=tmp_path).id == c.id
    assert store.find_job(a.id, root=tmp_path).id == a.id
    assert store.find_job(a.id[:-2], root=tmp_path).id == a.id  # unique prefix
    assert store.find_job(str(b.folder)).id == b.id  # a job folder path
    with pytest.raises(AmbiguousInput) as amb:
        store.find_job(b.id.rsplit("-", 1)[0], root=tmp_path)  # "<date>-beta" names two jobs
    assert sorted(amb.value.choices) == sorted([b.id, c.id])
    with pytest.raises(InputNotFound):
        store.find_job("1999-01-01-nothing", root=tmp_path)
    with pytest.raises(InputNotFound):
        store.find_job("last", root=tmp_path / "empty")


def test_record_update_is_atomic_and_leaves_no_temp_files(tmp_path):
    rec = store.create_job(name="x", root=tmp_path)
    for i in range(50):
        rec.update(step=i, payload="y" * 10_000)
    assert json.loads((rec.folder / "job.json").read_text())["step"] == 49
    assert sorted(p.name for p in rec.folder.iterdir()) == ["job.json"]


def _crash_during_update(folder):
    rec = store.read_job(folder)
    os.replace = lambda *a, **k: os._exit(3)  # the process dies after writing the temp file, before the rename
    rec.update(status="partial", payload="z" * 100_000)


def test_crash_while_writing_leaves_the_previous_record_whole(tmp_path):
    rec = store.create_job(name="x", root=tmp_path)
    rec.update(status="complete")
    before = (rec.folder / "job.json").read_bytes()
    p = mp.get_context("fork").Process(target=_crash_during_update, args=(rec.folder,))
    p.start()
    p.join()
    assert p.exitcode == 3
    assert (rec.folder / "job.json").read_bytes() == before
    assert store.read_job(rec.folder).data["status"] == "complete"
    assert [r.id for r in store.list_jobs(tmp_path)] == [rec.id]


def test_damaged_record_is_a_clear_error_and_skipped_in_listing(tmp_path):
    good = store.create_job(name="good", root=tmp_path)
    bad = store.create_job(name="bad", root=tmp_path)
    (bad.folder / "job.json").write_text('{"id": "trunc')
    with pytest.raises(JobStoreError, match="not valid JSON"):
        store.read_job(bad.folder)
    assert [r.id for r in store.list_jobs(tmp_path)] == [good.id]


def test_running_record_of_a_dead_supervisor_is_abandoned(tmp_path):
    rec = store.create_job(name="x", root=tmp_path)
    assert rec.status == "running"
    p = mp.get_context("fork").Process(target=os._exit, args=(0,))
    p.start()
    p.join()
    rec.update(supervisor_pid=p.pid)  # a pid that no longer exists
    assert store.read_job(rec.folder).status == "abandoned"


def test_jobs_cli_lists_table_and_json(tmp_path):
    a = store.create_job(name="first", root=tmp_path, when=1_700_000_000)
    a.update(status="complete", exit_code=0, wall_s=1.5, command=["python", "first.py"])
    b = store.create_job(name="second", root=tmp_path, when=1_700_000_500)
    b.update(status="partial", partial=True, exit_code=None, signal_name="SIGKILL", command=["python", "second.py"])
    out = run_cli("jobs", "--json", env={"IODIAG_HOME": str(tmp_path)})
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["schema"] == "iodiag.jobs/1" and doc["damaged"] == []
    rows = doc["jobs"]
    assert [r["id"] for r in rows] == [b.id, a.id]
    assert rows[0]["status"] == "partial" and rows[0]["signal"] == "SIGKILL"
    assert rows[1]["status"] == "complete" and rows[1]["exit_code"] == 0
    table = run_cli("jobs", "--store", str(tmp_path), env={"IODIAG_HOME": str(tmp_path / "other")})
    assert table.returncode == 0
    lines = [ln.strip() for ln in table.stdout.decode().splitlines()]
    assert lines[0].startswith("job id") and lines[2].startswith(b.id) and lines[3].startswith(a.id)
    empty = run_cli("jobs", env={"IODIAG_HOME": str(tmp_path / "none")})
    assert empty.returncode == 0 and b"no jobs in" in empty.stderr


def test_damaged_record_is_named_not_missing(tmp_path):
    """A job whose job.json is damaged is reported as damaged (with its path), not as "no job"; `iodiag jobs` says
    it skipped it, and --json lists it under `damaged`."""
    good = store.create_job(name="good", root=tmp_path, when=1_700_000_000)
    good.update(status="complete", exit_code=0)
    bad = store.create_job(name="broken", root=tmp_path, when=1_700_000_100)
    (bad.folder / "job.json").write_text('{"id": "' + bad.id + '", "status": "comp')  # cut short
    env = {"IODIAG_HOME": str(tmp_path)}
    rep = run_cli("report", bad.id[:-2], env=env)
    err = rep.stderr.decode()
    assert rep.returncode == 9 and "not valid JSON" in err and str(bad.folder / "job.json") in err, err
    assert "Traceback" not in err
    listing = run_cli("jobs", env=env)
    assert listing.returncode == 0 and good.id in listing.stdout.decode()
    assert "damaged job record" in listing.stderr.decode() and bad.id in listing.stderr.decode()
    doc = json.loads(run_cli("jobs", "--json", env=env).stdout)
    assert [j["id"] for j in doc["jobs"]] == [good.id]
    assert len(doc["damaged"]) == 1 and bad.id in doc["damaged"][0]["path"]
