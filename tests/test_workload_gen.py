"""`gen`: real NetCDF4/HDF5/Zarr files with the shapes, chunks and records asked for."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from iodiag.errors import UsageError
from iodiag.workloads.gen import generate

REPO = Path(__file__).resolve().parents[1]
SMALL = dict(time=3, plev=4, lat=19, lon=36)


@pytest.mark.parametrize("fmt", ["netcdf4", "hdf5", "zarr2", "zarr3"])
def test_formats_hold_the_field_with_requested_chunks(tmp_path, fmt):
    out = tmp_path / f"ta.{fmt}"
    rec = generate(out=out, format=fmt, compressor="zlib", chunks="1,2,19,36", **SMALL)
    assert rec["shape"] == [3, 4, 19, 36] and rec["chunks"] == [1, 2, 19, 36]
    if fmt == "netcdf4":
        import netCDF4

        with netCDF4.Dataset(out) as ds:
            v = ds["ta"]
            assert v.chunking() == [1, 2, 19, 36]
            assert v.filters()["zlib"] is True
            data = v[:].data
            assert list(ds["lat"][[0, -1]]) == [-90.0, 90.0]
    elif fmt == "hdf5":
        import h5py

        with h5py.File(out) as h:
            assert h["ta"].chunks == (1, 2, 19, 36) and h["ta"].compression == "gzip"
            data = h["ta"][:]
    else:
        import zarr

        a = zarr.open_group(str(out), mode="r")["ta"]
        assert a.chunks == (1, 2, 19, 36) and a.metadata.zarr_format == int(fmt[-1])
        data = a[:]
    # temperature-like: 180-320 K, colder aloft, not constant
    assert data.dtype == np.float32 and 150 < data.min() < data.max() < 330
    assert data[:, 0].mean() > data[:, -1].mean()
    # the record tells the truth about bytes
    stored = out.stat().st_size if out.is_file() else sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
    assert rec["bytes"]["logical"] == 3 * 4 * 19 * 36 * 4
    assert rec["bytes"]["stored"] == stored
    on_disk = json.loads(Path(rec["results_path"]).read_text())
    assert on_disk["schema"] == "iodiag.workload-result/1" and on_disk["params"]["format"] == fmt


def test_xarray_reads_zarr_coordinates_unmasked(tmp_path):
    import xarray as xr

    generate(out=tmp_path / "a.zarr", format="zarr2", **SMALL)
    with xr.open_dataset(tmp_path / "a.zarr", engine="zarr") as ds:
        assert ds["lon"].values[0] == 0.0 and ds["time"].values[0] == 0.0  # 0 is not a fill value
        assert ds["ta"].dims == ("time", "plev", "lat", "lon")


def test_compression_shrinks_and_uncompressed_netcdf_is_contiguous(tmp_path):
    size = dict(time=3, plev=4, lat=91, lon=180)
    raw = generate(out=tmp_path / "raw.nc", **size)
    z = generate(out=tmp_path / "z.nc", compressor="zlib", **size)
    assert raw["layout"] == "contiguous" and raw["chunks"] is None
    assert z["bytes"]["stored"] < 0.75 * raw["bytes"]["stored"]


def test_weak_scaling_cube_grows_with_workers(tmp_path):
    rec = generate(out=tmp_path / "c.zarr", kind="cube", format="zarr3", nx=32, ny=16, nz_per_worker=8, workers=3)
    assert rec["dims"] == ["z", "y", "x"] and rec["shape"] == [24, 16, 32]
    assert rec["bytes"]["logical"] == 24 * 16 * 32 * 4


def test_bad_input_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match="3 dimensions"):
        generate(out=tmp_path / "x.nc", chunks="1,2,3", **SMALL)
    with pytest.raises(UsageError, match="zstd"):
        generate(out=tmp_path / "x.nc", compressor="zstd", **SMALL)


def test_script_and_cli_write_record_where_asked(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    res = tmp_path / "rec.json"
    p = subprocess.run([sys.executable, "-m", "iodiag.workloads.gen", "--out", str(tmp_path / "a.nc"),
                        "--time", "2", "--plev", "2", "--lat", "5", "--lon", "8", "--results", str(res)],
                       env=env, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert json.loads(res.read_text())["shape"] == [2, 2, 5, 8]
    # inside an iodiag job, the record goes to the job folder
    job = tmp_path / "job"
    p = subprocess.run([sys.executable, "-m", "iodiag", "workload", "gen", "--out", str(tmp_path / "b.zarr"),
                        "--format", "zarr2", "--time", "2", "--plev", "2", "--lat", "5", "--lon", "8", "--json"],
                       env={**env, "IODIAG_JOB_DIR": str(job)}, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["results_path"] == str(job / "results.json")
    assert (job / "results.json").is_file()
    # a sweep sends the record to its run folder; inside an iodiag job a copy lands in the job too
    job2, res2 = tmp_path / "job2", tmp_path / "run" / "results.json"
    p = subprocess.run([sys.executable, "-m", "iodiag.workloads.gen", "--out", str(tmp_path / "c.nc"),
                        "--time", "2", "--plev", "2", "--lat", "5", "--lon", "8"],
                       env={**env, "IODIAG_JOB_DIR": str(job2), "IODIAG_JOB_ID": "2026-11-23-gen-ab12",
                            "IODIAG_RESULTS": str(res2)}, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert json.loads(res2.read_text())["iodiag_job"] == "2026-11-23-gen-ab12"
    assert json.loads((job2 / "results.json").read_text()) == json.loads(res2.read_text())
    # bad option: argparse's one-line error, exit 2, no traceback
    p = subprocess.run([sys.executable, "-m", "iodiag", "workload", "gen", "--out", "x.nc", "--format", "grib"],
                       env=env, capture_output=True, text=True, cwd=tmp_path)
    assert p.returncode == 2 and "invalid choice" in p.stderr and "Traceback" not in p.stderr
