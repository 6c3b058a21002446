"""`read`: table 3.1's patterns on Zarr (small and large chunks), NetCDF4 and HDF5: same values,
chunk and byte accounting that follows from the stores' geometry."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from iodiag.errors import InputNotFound, InputUnreadable, UsageError
from iodiag.workloads.gen import generate
from iodiag.workloads.read import read_patterns

REPO = Path(__file__).resolve().parents[1]
SIZE = dict(time=6, plev=4, lat=46, lon=90)
STEP = 4 * 46 * 90 * 4  # bytes of one time step


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    d = tmp_path_factory.mktemp("read")
    out = {
        "nc": generate(out=d / "a.nc", **SIZE)["params"]["out"],
        "nc_chunked": generate(out=d / "b.nc", compressor="zlib", **SIZE)["params"]["out"],
        "h5": generate(out=d / "c.h5", format="hdf5", **SIZE)["params"]["out"],
        "zarr_small": generate(out=d / "s.zarr", format="zarr2", **SIZE)["params"]["out"],
        "zarr_large": generate(out=d / "l.zarr", format="zarr3", chunks="3,4,46,90", **SIZE)["params"]["out"],
    }
    return {k: Path(v) for k, v in out.items()}


def test_chunk_accounting_follows_geometry(stores):
    small = read_patterns(path=stores["zarr_small"], repeat=1)
    large = read_patterns(path=stores["zarr_large"], repeat=1)
    s, l = small["patterns"], large["patterns"]
    # requested bytes are the same whatever the layout
    for pat in s:
        assert s[pat]["requested_bytes"] == l[pat]["requested_bytes"]
    assert s["slice"]["requested_bytes"] == STEP and s["point"]["requested_bytes"] == 4
    assert s["timeseries"]["requested_bytes"] == 6 * 4
    # (1,·,·,·): one chunk per time step touched; (3,·,·,·): a whole 3-step chunk for one step
    assert s["slice"]["chunks_touched"] == 1 and s["timeseries"]["chunks_touched"] == 6
    assert l["timeseries"]["chunks_touched"] == 2 and l["slices_across_chunks"]["chunks_touched"] == 2
    assert s["slices_same_chunk"]["chunks_touched"] == 2 and l["slices_same_chunk"]["chunks_touched"] == 1
    # uncompressed Zarr chunks: stored bytes = chunk bytes (one step, or three steps for the large ones)
    assert s["point"]["stored_bytes_touched"] == STEP
    assert l["point"]["stored_bytes_touched"] == 3 * STEP
    assert l["point"]["read_amplification"] == pytest.approx(3 * STEP / 4)
    # reads went through read syscalls of at least the stored bytes for a whole-variable read
    assert s["whole"]["rchar_bytes"] >= 6 * STEP


def test_formats_return_the_same_values(stores):
    sums = {}
    for key, path in stores.items():
        api = "native" if key == "h5" else "xarray"
        rec = read_patterns(path=path, repeat=1, api=api, patterns="slice,point,timeseries")
        sums[key] = {p: v["checksum"] for p, v in rec["patterns"].items()}
    first = next(iter(sums.values()))
    for key, s in sums.items():
        assert s == pytest.approx(first, rel=1e-6), key


def test_contiguous_netcdf_and_chunked_hdf5(stores):
    nc = read_patterns(path=stores["nc"], repeat=2, patterns="slice,whole", cache="cold")
    assert nc["format"] == "netcdf4" and nc["chunks"] is None
    assert nc["patterns"]["slice"]["stored_bytes_touched"] == STEP  # contiguous: exactly what was asked
    assert len(nc["patterns"]["slice"]["total_s_all"]) == 2
    h5 = read_patterns(path=stores["nc_chunked"], repeat=1, patterns="timeseries", api="native")
    # compressed chunks from the HDF5 chunk index: 6 chunks, less than 6 raw steps
    assert h5["patterns"]["timeseries"]["chunks_touched"] == 6
    assert 0 < h5["patterns"]["timeseries"]["stored_bytes_touched"] < 6 * STEP


def test_dask_api_and_bad_input(stores, tmp_path):
    rec = read_patterns(path=stores["zarr_small"], repeat=1, api="xarray-dask", patterns="slices_across_chunks")
    assert rec["patterns"]["slices_across_chunks"]["selection"][0] == "[0,5]"
    with pytest.raises(InputNotFound):
        read_patterns(path=tmp_path / "nothing.zarr")
    with pytest.raises(UsageError, match="unknown read pattern"):
        read_patterns(path=stores["nc"], patterns="diagonal")
    (tmp_path / "d").mkdir()
    with pytest.raises(InputUnreadable, match="not a Zarr store"):
        read_patterns(path=tmp_path / "d")
    with pytest.raises(UsageError, match="api native"):
        read_patterns(path=stores["h5"], patterns="point")


def test_script_prints_patterns(stores):
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    p = subprocess.run([sys.executable, "-m", "iodiag.workloads.read", "--path", str(stores["zarr_small"]),
                        "--repeat", "1", "--patterns", "point,slice"], env=env, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert "point" in p.stdout and "slice" in p.stdout and "record" in p.stdout
