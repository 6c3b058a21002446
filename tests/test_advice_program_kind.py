"""Advice speaks the program's language: an MPI job that re-opens a file is told to open it once and reuse the
handle, without xarray's way of doing it; a Python program doing the same (recorded here for real) is also told
xarray's way.  And a few hundred tiny files that all fit in one container are told to pack into one file, not
"~397,294 of today's files each"."""

from __future__ import annotations

import json
import sys

import pytest

from conftest import corpus_path, run_cli
from test_recommend_open_once import SCRIPT  # a NetCDF file re-opened for each of 200 time steps



def _finding(rep, fid):
    return next(f for f in rep["findings"] if f["id"] == fid)


def test_an_mpi_job_is_not_told_about_xarray():
    log = corpus_path("darshan-logs/darshan_logs/imbalanced_io/imbalanced-io.darshan")
    r = run_cli("report", str(log), "--json")
    rep = json.loads(r.stdout)
    text = _finding(rep, "metadata-storm")["recommendation"]
    assert "opened 14,689 times by process 0: open it once per process and reuse the handle" in text
    assert "xarray" not in text and "Dataset" not in text


def test_a_python_job_reopening_a_netcdf_file_is_told_the_xarray_way(tmp_path):
    pytest.importorskip("netCDF4")
    env = {"IODIAG_HOME": str(tmp_path / "home")}
    nc = tmp_path / "s.nc"
    g = run_cli("workload", "gen", "--out", str(nc), "--time", "200", "--plev", "1", "--lat", "8", "--lon", "16",
                env=env)
    assert g.returncode == 0, g.stderr.decode()[-2000:]
    (tmp_path / "steps.py").write_text(SCRIPT)
    r = run_cli("run", "--collector", "embedded", "--no-dask-report", sys.executable, str(tmp_path / "steps.py"), str(nc),
                env=env, cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr.decode()[-2000:]
    rep = json.loads(run_cli("report", "last", "--json", env=env).stdout)
    text = _finding(rep, "metadata-storm")["recommendation"]
    assert "open it once per process and reuse the handle (xarray: open_dataset once" in text


def test_a_python_job_reopening_a_netcdf_file_to_append_is_told_once_and_not_to_read_it_with_xarray(tmp_path):
    pytest.importorskip("netCDF4")
    from test_verify_open_once import APPEND

    env = {"IODIAG_HOME": str(tmp_path / "home")}
    (tmp_path / "append.py").write_text(APPEND)
    r = run_cli("run", "--collector", "embedded", "--no-dask-report", sys.executable, str(tmp_path / "append.py"),
                str(tmp_path / "steps.nc"), "120", env=env, cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr.decode()[-2000:]
    rep = json.loads(run_cli("report", "last", "--json", env=env).stdout)
    text = _finding(rep, "metadata-storm")["recommendation"]
    assert "steps.nc is opened" in text and "open it once per process and reuse the handle" in text
    assert "xarray" not in text and "open_dataset" not in text  # it writes the file: no read advice
    assert text.count("once per process") == 1  # said once, for the file re-opened


def test_tiny_files_that_fit_in_one_container_are_packed_into_one():
    log = corpus_path("generated/smallio-metadata-heavy-default/"
                      "0_python_id2108-2108_11-22-83104-15636950488690977536_1.darshan")
    rep = json.loads(run_cli("report", str(log), "--json").stdout)
    f = _finding(rep, "many-small-files")
    assert f["evidence"]["small_files"] > 1000
    assert "pack them into one file" in f["recommendation"] and "of today's files each" not in f["recommendation"]
    assert "-> 1 (opens" in f["recommendation"]


@pytest.mark.parametrize("rel,mode", [
    # an HDF5 benchmark that writes its file: opening it read-only once would break its writes
    ("dxt-explorer/sample/jeanbez_8_benchmark_parallel_id45195555_8-6-50011-11681279140261054765_1628283217.darshan",
     "H5F_ACC_RDWR"),
    # a reader of an HDF5 file it never writes (the job writes only to stderr/stdout): read-only
    ("pytokio/tests/inputs/darshanlogs/2017/3/20/glock_dbscan_read_id4478544_3-20-7800-15217972833987807816_1.darshan",
     "H5F_ACC_RDONLY"),
])
def test_a_c_open_once_snippet_opens_for_writing_only_a_file_the_job_writes(rel, mode):
    rep = json.loads(run_cli("report", str(corpus_path(rel)), "--json").stdout)
    top = next(r for r in rep["recommendations"] if r["id"] == "open-once")
    (code,) = [c["text"] for c in top["changes"]]
    assert code.startswith("f = H5Fopen(") and f", {mode}, fapl);" in code
