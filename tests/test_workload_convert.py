"""`convert`: NetCDF4 -> Zarr on a real distributed cluster, both strategies, formats 2 and 3."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from iodiag.errors import InputNotFound, UsageError
from iodiag.workloads.convert import convert
from iodiag.workloads.gen import generate

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    d = tmp_path_factory.mktemp("conv")
    src = d / "ta.nc"
    generate(out=src, time=6, plev=4, lat=46, lon=90, compressor="zlib")
    import xarray as xr

    with xr.open_dataset(src) as ds:
        values = ds["ta"].values.copy()
    return src, values


@pytest.mark.parametrize("strategy,fmt,comp", [("to_zarr", 2, "zstd"), ("region", 3, "blosc")])
def test_conversion_on_local_cluster_is_exact(tmp_path, source, strategy, fmt, comp):
    import xarray as xr
    import zarr

    src, values = source
    dst = tmp_path / "out.zarr"
    rec = convert(src=src, dst=dst, strategy=strategy, zarr_format=fmt, compressor=comp, chunks="2,4,46,90",
                  workers=2, threads=1, cluster="local")
    with xr.open_dataset(dst, engine="zarr") as ds:
        np.testing.assert_array_equal(ds["ta"].values, values)
    arr = zarr.open_group(str(dst), mode="r")["ta"]
    assert arr.chunks == (2, 4, 46, 90) and arr.metadata.zarr_format == fmt
    codecs = arr.compressors
    assert (len(codecs) == 0) == (comp == "none")
    # two real worker processes did the work (their own pids, not ours)
    assert len(rec["cluster"]["worker_pids"]) == 2 and os.getpid() not in rec["cluster"]["worker_pids"]
    assert rec["bytes"]["logical"] == values.nbytes
    assert rec["bytes"]["workers_io"]["wchar"] > 0  # the workers, not the client, wrote the chunks
    if strategy == "region":
        assert rec["n_tasks"] == 3 and "template" in rec["timings_s"]
    assert rec["metrics"]["throughput_MBps"] == pytest.approx(values.nbytes / 1e6 / rec["timings_s"]["write"])
    assert (dst / ("zarr.json" if fmt == 3 else ".zmetadata")).exists()  # consolidated


def test_chunk_mb_target_and_sync_scheduler(tmp_path, source):
    src, values = source
    rec = convert(src=src, dst=tmp_path / "o.zarr", chunk_mb=0.2, cluster="sync")
    # one time step is 4*46*90*4 B = 66 kB: three steps fit under 0.2 MB
    assert rec["chunks"] == [3, 4, 46, 90]
    assert rec["chunk_MB"] <= 0.2
    import zarr

    assert zarr.open_group(str(tmp_path / "o.zarr"), mode="r")["ta"].compressors == ()  # compressor none


def test_bad_input(tmp_path, source):
    src, _ = source
    with pytest.raises(InputNotFound, match="does not exist"):
        convert(src=tmp_path / "nope.nc", dst=tmp_path / "o.zarr", cluster="sync")
    with pytest.raises(UsageError, match="not both"):
        convert(src=src, dst=tmp_path / "o.zarr", chunks="1,1,1,1", chunk_mb=5, cluster="sync")
    with pytest.raises(UsageError, match="no variable"):
        convert(src=src, dst=tmp_path / "o.zarr", variable="pr", cluster="sync")


def test_script_exit_codes(tmp_path, source):
    src, _ = source
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    p = subprocess.run([sys.executable, "-m", "iodiag.workloads.convert", "--src", str(tmp_path / "missing.nc"),
                        "--dst", str(tmp_path / "o.zarr")], env=env, capture_output=True, text=True)
    assert p.returncode == 3 and "missing.nc" in p.stderr and "Traceback" not in p.stderr
    p = subprocess.run([sys.executable, "-m", "iodiag.workloads.convert", "--src", str(src), "--dst",
                        str(tmp_path / "o.zarr"), "--cluster", "threads", "--workers", "1", "--threads", "2",
                        "--zarr-format", "3", "--no-consolidated"], env=env, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    rec = json.loads((tmp_path / "o.zarr.results.json").read_text())
    assert rec["params"]["consolidated"] is False and rec["cluster"]["cluster"] == "threads"


def test_plain_hdf5_source_converts_the_field(tmp_path):
    import h5py
    import zarr

    src = tmp_path / "a.h5"
    generate(out=src, format="hdf5", time=2, plev=2, lat=5, lon=8)
    rec = convert(src=src, dst=tmp_path / "o.zarr", cluster="sync")
    assert rec["variables"] == ["ta"] and rec["shape"] == [2, 2, 5, 8]  # not the 1-D coordinate datasets
    with h5py.File(src) as h:
        np.testing.assert_array_equal(zarr.open_group(str(tmp_path / "o.zarr"), mode="r")["ta"][:], h["ta"][:])
