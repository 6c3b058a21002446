"""What a new user's own scripts (not iodiag's workloads), run for real, are told: the job is named after the
script even when the interpreter has options with a value (``python -W ignore script.py``)."""

from __future__ import annotations

import json
import sys

import pytest

from conftest import run_cli

TINY = "open('out.txt', 'w').write('x' * 100)\n"


def test_python_options_with_a_value_do_not_name_the_job(tmp_path):
    env = {"IODIAG_HOME": str(tmp_path / "home")}
    (tmp_path / "tiny.py").write_text(TINY)
    r = run_cli("run", "--collector", "embedded", "--", sys.executable, "-W", "ignore", "-X", "utf8", "tiny.py",
                env=env, cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr.decode()[-2000:]
    assert "job " in r.stderr.decode() and "-tiny-" in r.stderr.decode()  # not "-ignore-"
    rep = json.loads(run_cli("report", "last", "--json", env=env).stdout)
    assert rep["job"]["program"] == "tiny.py"


REREAD = '''import subprocess, sys
if len(sys.argv) > 1:  # a child: reads data.bin twice through POSIX (open().read) and twice through STDIO (fromfile)
    import numpy as np
    for _ in range(2):
        open("data.bin", "rb").read()
        np.fromfile("data.bin", dtype="u1")
else:  # the parent reads nothing and starts two children
    for p in [subprocess.Popen([sys.executable, __file__, "child"]) for _ in range(2)]:
        p.wait()
'''


def test_a_file_read_through_posix_and_stdio_counts_each_reader_once(tmp_path):
    env = {"IODIAG_HOME": str(tmp_path / "home")}
    (tmp_path / "data.bin").write_bytes(bytes(range(256)) * 8192)  # 2 MiB
    (tmp_path / "reread.py").write_text(REREAD)
    r = run_cli("run", "--collector", "embedded", sys.executable, "reread.py", env=env, cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr.decode()[-2000:]
    rep = json.loads(run_cli("report", "last", "--json", env=env).stdout)
    assert rep["job"]["nprocs"] == 3
    f = next(f for f in rep["findings"] if f["id"] == "redundant-read")
    assert f["evidence"]["worst_file_amplification"] == 8.0
    assert f["evidence"]["worst_file_readers"] == 2  # two children, each with a POSIX and a STDIO record
    assert "by 2 processes" in f["recommendation"]


APPEND_ZARR = '''import sys
import numpy as np, pandas as pd, xarray as xr
for i in range(int(sys.argv[2])):  # one time step per to_zarr call, appended along time
    ds = xr.Dataset({"tas": (("time", "lat", "lon"), np.full((1, 9, 18), i, "f4"))},
                    coords={"time": [pd.Timestamp("2001-01-01") + pd.Timedelta(days=i)]})
    if i == 0:
        ds.to_zarr(sys.argv[1], mode="w", zarr_format=3, consolidated=False)
    else:
        ds.to_zarr(sys.argv[1], append_dim="time", consolidated=False)
'''


def _run_append(tmp_path, steps=40):
    env = {"IODIAG_HOME": str(tmp_path / "home")}
    (tmp_path / "append_zarr.py").write_text(APPEND_ZARR)
    r = run_cli("run", "--collector", "embedded", sys.executable, "append_zarr.py", str(tmp_path / "a.zarr"), str(steps),
                env=env, cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr.decode()[-2000:]
    return env, json.loads(run_cli("report", "last", "--json", env=env).stdout)


def test_zarr_v3_metadata_written_through_temp_files_keeps_its_name(tmp_path):
    pytest.importorskip("zarr")
    env, rep = _run_append(tmp_path)
    paths = [f["path"] for f in rep["top_files"]] + [p for f in rep["findings"] for p in f["files"]]
    assert any(p.endswith("/tas/zarr.json") for p in paths), paths
    assert not [p for p in paths if p.endswith("/zarr")]  # zarr.<hex>.partial was named ".../zarr"


def test_a_zarr_append_loop_is_told_to_batch_its_appends_not_to_keep_zarr_json_open(tmp_path):
    pytest.importorskip("zarr")
    env, rep = _run_append(tmp_path)
    f = next(f for f in rep["findings"] if f["id"] == "metadata-storm")
    assert "zarr.json is opened" in f["recommendation"]
    assert "append many steps per call" in f["recommendation"]
    assert "reuse the handle" not in f["recommendation"]  # zarr-python gives the program no handle to keep
    rec = json.loads(run_cli("recommend", "last", "--json", env=env).stdout)
    top = rec["recommendations"][0]
    code = "\n".join(c["text"] for c in top["changes"])
    assert "Append many time steps per to_zarr call" in top["title"]
    assert 'append_dim="time"' in code and "open(" not in code  # not: open(".../zarr.json", "r+b")
    assert "at most" not in json.dumps(top["gain"])  # the calls' CPU work changes too: no I/O-only bound


MONTHLY = '''import sys
import xarray as xr
ds = xr.open_zarr(sys.argv[1])
print(float(ds["tas"].groupby("time.month").mean("time").mean()))
'''


def test_the_trained_model_addresses_only_findings_the_job_has(tmp_path):
    """A monthly mean over a store of one chunk per day: the model's rechunking said it addressed small-io,
    many-small-files, metadata-storm, task-overhead and redundant-read whatever the job's findings were."""
    np, pd, xr = pytest.importorskip("numpy"), pytest.importorskip("pandas"), pytest.importorskip("xarray")
    env = {"IODIAG_HOME": str(tmp_path / "home")}
    time = pd.date_range("2000-01-01", periods=365, freq="D")
    data = np.random.default_rng(0).standard_normal((365, 90, 180)).astype("f4")  # 23.7 MB: in the model's range
    xr.Dataset({"tas": (("time", "lat", "lon"), data)}, coords={"time": time}).chunk({"time": 1}).to_zarr(
        tmp_path / "daily.zarr", zarr_format=3, consolidated=False)
    (tmp_path / "monthly.py").write_text(MONTHLY)
    r = run_cli("run", "--collector", "embedded", sys.executable, "monthly.py", "daily.zarr", env=env, cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr.decode()[-2000:]
    rep = json.loads(run_cli("report", "last", "--json", env=env).stdout)
    found = {f["id"] for f in rep["findings"]}
    tree = next(x for x in rep["recommendations"] if x["source"] == "tree")
    assert tree["settings"].get("chunks")  # the model does advise this job
    assert set(tree["addresses"]) <= found, (tree["addresses"], found)


STEPS_NPY = '''import os
import numpy as np
os.makedirs("steps", exist_ok=True)
for t in range(400):  # one small .npy per time step: numpy writes its data with one fwrite
    np.save(f"steps/field_{t:05d}.npy", np.full((16, 16), t, "f4"))
'''


def test_small_files_written_in_one_fwrite_each_are_not_told_to_raise_the_stream_buffer(tmp_path):
    pytest.importorskip("numpy")
    env = {"IODIAG_HOME": str(tmp_path / "home")}
    (tmp_path / "steps.py").write_text(STEPS_NPY)
    r = run_cli("run", "--collector", "embedded", sys.executable, "steps.py", env=env, cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr.decode()[-2000:]
    rep = json.loads(run_cli("report", "last", "--json", env=env).stdout)
    f = next(f for f in rep["findings"] if f["id"] == "stdio-heavy")
    assert f["evidence"]["stdio_ops"] >= 400 and f["evidence"]["mean_stdio_request_bytes"] < 4096
    assert "a larger buffer saves no call" in f["recommendation"] and "setvbuf" not in f["recommendation"]
    assert not [x for x in rep["recommendations"] if x["id"] == "buffering" and not x.get("abstain")]
    assert any(x["id"] == "many-small-files" or "small ones" in x["title"] for x in rep["recommendations"])


H5_COLUMNS = '''import h5py
with h5py.File("cols.h5", "r") as f:
    d = f["data"]
    means = [d[:, j].mean() for j in range(0, 2048, 64)]  # a time series per grid point, one column at a time
'''


def test_an_h5py_column_loop_is_not_told_to_buffer_python_open(tmp_path):
    """HDF5 makes the small reads of an h5py loop (64 KiB sieve reads): Python's open(buffering=...) cannot reach
    them, and the whole-file read for it is h5py's, not xarray's."""
    h5py, np = pytest.importorskip("h5py"), pytest.importorskip("numpy")
    env = {"IODIAG_HOME": str(tmp_path / "home")}
    with h5py.File(tmp_path / "cols.h5", "w") as f:
        f.create_dataset("data", data=np.zeros((400, 2048)))  # contiguous, 6.25 MiB
    (tmp_path / "cols.py").write_text(H5_COLUMNS)
    r = run_cli("run", "--collector", "embedded", sys.executable, "cols.py", env=env, cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr.decode()[-2000:]
    rep = json.loads(run_cli("report", "last", "--json", env=env).stdout)
    small = next(f for f in rep["findings"] if f["id"] == "small-io")
    assert "Python's open() cannot buffer them" in small["recommendation"]
    codes = {x["id"]: "\n".join(c["text"] for c in x["changes"]) for x in rep["recommendations"]}
    assert "set_sieve_buf_size" in codes["buffering"] and "open(path" not in codes["buffering"]
    assert 'h5py.File("' in codes["read-once"] and "xr.open_dataset" not in codes["read-once"]


REOPEN_NC = '''import sys
import netCDF4
for _ in range(3):  # a header look at each pass: netCDF-C reads up to 4 MiB of the file at every open
    with netCDF4.Dataset(sys.argv[1]) as nc:
        print(nc["v"].shape)
'''


def test_netcdf_open_probe_rereads_are_told_to_open_less_not_to_cache_data(tmp_path):
    np, xr = pytest.importorskip("numpy"), pytest.importorskip("xarray")
    pytest.importorskip("netCDF4")
    env = {"IODIAG_HOME": str(tmp_path / "home")}
    xr.Dataset({"v": (("t", "y", "x"), np.zeros((20, 100, 500), "f4"))}).to_netcdf(tmp_path / "f.nc")  # 4 MB
    (tmp_path / "reopen.py").write_text(REOPEN_NC)
    r = run_cli("run", "--collector", "embedded", sys.executable, "reopen.py", "f.nc", env=env, cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr.decode()[-2000:]
    rep = json.loads(run_cli("report", "last", "--json", env=env).stdout)
    f = next(f for f in rep["findings"] if f["id"] == "redundant-read")
    assert "netCDF-C's format probe (3 opens" in f["recommendation"]
    assert "keep it in memory" not in f["recommendation"]  # the program reads no data: a data cache saves nothing
    top = next(x for x in rep["recommendations"] if "redundant-read" in x["addresses"])
    assert top["id"] == "open-once" and top["title"].startswith("Open each NetCDF file once per process (3 opens")


REOPEN_ZARR = '''import sys
import xarray as xr
tot = 0.0
for t in range(30):
    ds = xr.open_zarr(sys.argv[1], consolidated=False)  # re-opened for every time step
    tot += float(ds["tas"].isel(time=t).mean())
'''


def test_a_zarr_store_reopened_per_step_is_told_to_open_the_store_once(tmp_path):
    np, pd, xr = pytest.importorskip("numpy"), pytest.importorskip("pandas"), pytest.importorskip("xarray")
    env = {"IODIAG_HOME": str(tmp_path / "home")}
    time = pd.date_range("2000-01-01", periods=30, freq="D")
    xr.Dataset({"tas": (("time", "y", "x"), np.zeros((30, 8, 16), "f4"))}, coords={"time": time}).chunk(
        {"time": 1}).to_zarr(tmp_path / "s.zarr", zarr_format=3, consolidated=False)
    (tmp_path / "reopen.py").write_text(REOPEN_ZARR)
    r = run_cli("run", "--collector", "embedded", sys.executable, "reopen.py", "s.zarr", env=env, cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr.decode()[-2000:]
    rep = json.loads(run_cli("report", "last", "--json", env=env).stdout)
    text = next(f for f in rep["findings"] if f["id"] == "metadata-storm")["recommendation"]
    assert "part of a Zarr store, read again at every open of the store" in text
    assert "reuse the handle" not in text and "open_dataset once" not in text
    assert "temp file" not in text  # the job writes no chunk: no temp file, no rename
    top = next(x for x in rep["recommendations"] if x["id"] == "open-once")
    assert top["title"].startswith("Open the Zarr store once")
    assert f'xr.open_zarr("{tmp_path / "s.zarr"}")' in top["changes"][0]["text"]


RECHUNK = '''import sys
import dask.array as da
a = da.from_zarr(sys.argv[1], component="tas")
a.rechunk((a.shape[0], 30, 30)).to_zarr(sys.argv[2])  # time series per grid box
'''


def test_the_tree_rules_of_a_conversion_fit_an_80_column_terminal(tmp_path):
    np, xr = pytest.importorskip("numpy"), pytest.importorskip("xarray")
    env = {"IODIAG_HOME": str(tmp_path / "home")}
    data = np.random.default_rng(0).standard_normal((365, 90, 180)).astype("f4")  # 23.7 MB: in the model's range
    xr.Dataset({"tas": (("time", "lat", "lon"), data)}).chunk({"time": 5}).to_zarr(
        tmp_path / "in.zarr", zarr_format=3, consolidated=False)
    (tmp_path / "rechunk.py").write_text(RECHUNK)
    r = run_cli("run", "--collector", "embedded", sys.executable, "rechunk.py", "in.zarr", "out.zarr", env=env,
                cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr.decode()[-2000:]
    out = run_cli("recommend", "last", env={**env, "COLUMNS": "80", "NO_COLOR": "1"}).stdout.decode()
    rules = out.split("the tree's rules")[1].split("\n\n")[0].splitlines()[1:]
    assert any("best in" in ln for ln in rules) and all(len(ln) <= 80 for ln in rules), rules
