"""A job's report is the same anywhere, any time: ``iodiag run`` keeps the metadata a report reads from outside
the trace (the Zarr arrays' documents, NetCDF/HDF5 headers, mounts) in the job folder (``meta/snapshot.json``),
and reports read that, not the live stores.

The measured bug (issue 25): a conversion job reported, then ``rm -rf out.zarr``, reported again: the top
recommendation changed (from the chunk plan of the real array to "Merge chunks of ta … (≈ 0 B per chunk file)"),
because the report read the store's metadata at report time.
"""

from __future__ import annotations

import json
import shutil
import sys

import pytest

from conftest import require_embedded, run_cli
from iodiag.jobs.store import find_job

CONVERT = ["-m", "iodiag.workloads.convert", "--src", "ta.nc", "--dst", "out.zarr", "--workers", "1",
           "--chunks", "1,1,45,90"]


def _report(store, target: str, cwd) -> dict:
    run = run_cli("report", target, "--json", env={"IODIAG_HOME": str(store)}, cwd=str(cwd))
    assert run.returncode == 0, run.stderr.decode()[-2000:]
    return json.loads(run.stdout)


def _advice(rep: dict) -> tuple:
    """What the user is told: the findings and the recommendations (with what they are based on)."""
    return rep["findings"], rep["recommendations"]


@pytest.fixture(scope="module")
def conversion_job(tmp_path_factory):
    """A real conversion (NetCDF4 -> Zarr v2, one Dask worker) recorded by ``iodiag run --collector embedded``
    in a temporary folder: (folder, store, the job record)."""
    require_embedded()
    from iodiag.workloads.gen import generate

    d = tmp_path_factory.mktemp("snapjob")
    generate(out=d / "ta.nc", time=6, plev=8, lat=90, lon=180, compressor="zlib")
    store = d / "store"
    run = run_cli("run", "--collector", "embedded", "--no-dask-report", "--", sys.executable, *CONVERT,
                  env={"IODIAG_HOME": str(store)}, cwd=str(d), timeout=600)
    assert run.returncode == 0, run.stderr.decode()[-3000:]
    return d, store, find_job("last", root=store)


def test_the_job_records_its_metadata_snapshot(conversion_job):
    d, _, rec = conversion_job
    assert rec.data["artefacts"]["snapshot"] == "meta/snapshot.json"
    snap = json.loads((rec.folder / "meta" / "snapshot.json").read_text())
    assert snap["schema"] == "iodiag.job-snapshot/1" and snap["errors"] == []
    # the Zarr array the conversion wrote, as its .zarray says (shape, chunks, dtype), with its dimensions
    ta = snap["zarr"][str(d / "out.zarr" / "ta")]
    assert ta[".zarray"]["shape"] == [6, 8, 90, 180] and ta[".zarray"]["chunks"] == [1, 1, 45, 90]
    assert ta[".zarray"]["dtype"] == "<f4" and ta[".zattrs"]["_ARRAY_DIMENSIONS"] == ["time", "plev", "lat", "lon"]
    # the NetCDF4 source's header: HDF5 underneath, its variable's shape, chunking and compression
    src = snap["files"][str(d / "ta.nc")]
    var = next(v for v in src["variables"] if v["name"] == "ta")
    assert src["format"] == "hdf5" and var["shape"] == [6, 8, 90, 180] and var["compression"] == "gzip"
    # the file system of the data, from the mount table
    assert snap["fs_of_data"][str(d / "out.zarr")] and snap["mounts"]
    assert snap["lustre"]["status"]  # recorded, or said why not


def test_report_is_unchanged_when_the_output_is_deleted(conversion_job, tmp_path):
    d, store, rec = conversion_job
    # an old job: the same folder without its snapshot (as recorded before snapshots existed), and without the
    # workload's results record (a user's own script leaves none): only the live store can say what the array is
    old_store = tmp_path / "old-store"
    old = shutil.copytree(rec.folder, old_store / "jobs" / rec.folder.name)
    (old / "meta" / "snapshot.json").unlink()
    (old / "results.json").unlink()
    # an old job that has its results record (a file of the job folder): the record says what the array was
    rec_store = tmp_path / "record-store"
    with_rec = shutil.copytree(rec.folder, rec_store / "jobs" / rec.folder.name)
    (with_rec / "meta" / "snapshot.json").unlink()

    with_snap = _report(store, rec.id, d)
    live = _report(old_store, rec.id, d)
    record_only = _report(rec_store, rec.id, d)
    out = d / "out.zarr"
    saved = shutil.copytree(out, tmp_path / "saved.zarr")
    shutil.rmtree(out)
    try:
        with_snap_gone = _report(store, rec.id, d)
        live_gone = _report(old_store, rec.id, d)
        record_only_gone = _report(rec_store, rec.id, d)
    finally:
        shutil.copytree(saved, out)

    # the job with its snapshot: the same findings and recommendations, store or no store
    assert _advice(with_snap_gone) == _advice(with_snap)
    assert with_snap["recommendations"][0]["title"] == with_snap_gone["recommendations"][0]["title"]
    assert not any("read live" in r["based_on"] for r in with_snap["recommendations"])
    # the old job reads the store live while it exists, gives the same advice, and says where it came from
    assert [r["title"] for r in live["recommendations"]] == [r["title"] for r in with_snap["recommendations"]]
    chunk_recs = [r for r in live["recommendations"] if r["id"] == "chunking"]
    assert chunk_recs and all(f"array metadata read live from {out} at report time (not recorded with the job)"
                              in r["based_on"] for r in chunk_recs)
    # ... and without the store it still reports, but on less: what the snapshot protects against
    assert live_gone["job"]["id"] == rec.id and live_gone["recommendations"]
    assert _advice(live_gone) != _advice(with_snap)
    # the job's own results record keeps the trained model's advice the same, store or no store
    # (based_on differs only by naming the store read live while it was there)
    tree = [{k: v for k, v in r.items() if k != "based_on"} for r in record_only["recommendations"]
            if r["source"] == "tree"]
    assert tree and tree == [{k: v for k, v in r.items() if k != "based_on"}
                             for r in record_only_gone["recommendations"] if r["source"] == "tree"]
    assert not any("no results record" in r["based_on"] for r in record_only_gone["recommendations"])


def test_a_damaged_snapshot_is_an_issue_and_the_job_still_reports(conversion_job, tmp_path):
    from iodiag.analyzers.job import load_job_record

    _, _, rec = conversion_job
    job = shutil.copytree(rec.folder, tmp_path / "job")
    (job / "meta" / "snapshot.json").write_text("{not json")
    prof = load_job_record(job)
    assert prof.job.snapshot is None and prof.job.arrays_from in ("live", "")
    issue = next(i for i in prof.issues_seen if i.path.endswith("meta/snapshot.json"))
    assert issue.kind == "unreadable" and "read live" in issue.next_step


def test_a_snapshot_error_never_fails_the_run(tmp_path, monkeypatch):
    """The snapshot is taken after the run; whatever goes wrong there is recorded in job.json, never raised."""
    from iodiag.jobs import snapshot as js
    from iodiag.jobs.store import create_job

    rec = create_job(name="x", root=tmp_path / "store", record={"collector": "embedded", "command": ["true"]})

    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(js, "take_snapshot", boom)
    assert js.write_snapshot(rec) is None
    data = json.loads((rec.folder / "job.json").read_text())
    assert data["snapshot_error"] == "OSError: disk full"
    assert any("no metadata snapshot" in n for n in data["run_notes"])
    assert "snapshot" not in (data.get("artefacts") or {})


def test_a_read_record_carries_its_array_metadata(tmp_path):
    """The read workload keeps the variable's Zarr metadata in its results record: the features of the run (its
    compressor and format) are the same after the store is gone, and nothing is read live."""
    from iodiag.recommend.features import planned_features
    from iodiag.workloads.gen import generate
    from iodiag.workloads.read import read_patterns

    store = tmp_path / "r.zarr"
    generate(out=store, format="zarr3", time=4, plev=2, lat=10, lon=20, compressor="zstd", chunks="1,2,10,20",
             results=str(tmp_path / "gen.json"))
    rec = read_patterns(path=store, patterns="whole", repeat=1, results=tmp_path / "read.json")
    assert rec["array"]["compressor"] == "zstd" and rec["array"]["dims"] == ["time", "plev", "lat", "lon"]
    here = planned_features(rec)
    shutil.rmtree(store)
    gone = planned_features(json.loads((tmp_path / "read.json").read_text()))
    assert gone["compressor"] == here["compressor"] == "zstd" and gone["zarr_format"] == here["zarr_format"]
    assert gone["dims"] == here["dims"] and "read live" not in gone["based_on"]


def test_zarr_folders_come_from_the_jobs_own_paths():
    """Candidates for array metadata: stores, the folders right below them and metadata-file folders first (a
    store's many v3 chunk folders never crowd them out), deeper folders after; no chunk folder is a candidate."""
    from iodiag.collectors.snapshot import zarr_candidates

    chunks = [f"/d/big.zarr/ta/c/{i}/0/0" for i in range(2000)]
    got = zarr_candidates(chunks + ["/d/big.zarr/tb/zarr.json", "/d/g.zarr/grp/sub/arr/c/0/0", "/d/n.txt"], limit=8)
    assert got[:5] == ["/d/big.zarr", "/d/big.zarr/ta", "/d/big.zarr/tb", "/d/g.zarr", "/d/g.zarr/grp"]
    assert "/d/g.zarr/grp/sub/arr" in got and not any("/c/" in g or g.endswith("/c") for g in got)


def test_a_darshan_jobs_touched_paths_are_its_logs_name_records(tmp_path):
    """A job recorded with Darshan: the paths to snapshot are the name records of its logs (read through the
    reader ``iodiag run`` is given; without one the snapshot says it has none)."""
    from conftest import corpus_path
    from iodiag.analyzers.readers.darshan_logmeta import log_names
    from iodiag.jobs.snapshot import touched_paths
    from iodiag.jobs.store import create_job

    log = corpus_path("generated/xarray-nc2zarr-1proc/0_python_id20259-20259_11-22-82619-9038751429951342753_1.darshan")
    rec = create_job(name="d", root=tmp_path / "store", record={"collector": "darshan", "command": ["python"]})
    (rec.folder / "logs").mkdir()
    shutil.copy(log, rec.folder / "logs" / log.name)
    rec.data["artefacts"] = {"logs": [f"logs/{log.name}"]}
    paths, how = touched_paths(rec, log_names)
    assert "Darshan" in how and any(p.endswith("out.zarr") for p in paths) and len(paths) == len(set(paths)) > 10
    assert touched_paths(rec, None) == ([], "none: no reader of Darshan name records was given")


@pytest.mark.parametrize("libc,blind", [(["glibc", "2.17"], False), (["glibc", "2.36"], True), (["", ""], False)])
def test_darshans_stat_blind_spot_follows_the_recording_machines_c_library(tmp_path, libc, blind):
    """Darshan <= 3.5 misses stat() on glibc >= 2.33: the blind spot is the recording machine's (its snapshot),
    not the one of the machine that reads the report."""
    from conftest import corpus_path
    from iodiag.analyzers.job import load_job_record
    from iodiag.collectors.snapshot import SCHEMA
    from iodiag.jobs.store import create_job

    log = corpus_path("generated/xarray-nc2zarr-1proc/0_python_id20259-20259_11-22-82619-9038751429951342753_1.darshan")
    rec = create_job(name="d", root=tmp_path / "store", record={"collector": "darshan", "command": ["python"]})
    (rec.folder / "logs").mkdir()
    (rec.folder / "meta").mkdir()
    shutil.copy(log, rec.folder / "logs" / log.name)
    rec.update(artefacts={"logs": [f"logs/{log.name}"], "snapshot": "meta/snapshot.json"})
    (rec.folder / "meta" / "snapshot.json").write_text(json.dumps({"schema": SCHEMA, "zarr": {}, "libc": libc}))
    prof = load_job_record(rec.folder)
    assert prof.job.snapshot["libc"] == libc
    assert any("stat()" in b for b in prof.job.blind_spots) == blind
