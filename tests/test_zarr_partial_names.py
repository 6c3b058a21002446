"""zarr-python 3 writes each chunk to a temporary file named with ``Path.with_suffix``, which on a Zarr v2 key
(``36.1.0.0``) replaces the key's last index (``36.1.0.<uuid>.partial``) before renaming it to the key.  The
chunk files' bytes are written under those temporary names only; a conversion recorded here for real must still
get its chunk files' true size (it was "~0 B per chunk file": the temporary names, one index short, were
dropped)."""

from __future__ import annotations

import json
import statistics
import sys

import pytest

from conftest import run_cli


def test_chunk_bytes_come_from_temporary_names_one_index_short(tmp_path):
    zarr = pytest.importorskip("zarr")
    if int(zarr.__version__.split(".")[0]) < 3:
        pytest.skip(f"zarr {zarr.__version__} names its temporary chunk files otherwise")
    env = {"IODIAG_HOME": str(tmp_path / "home")}
    src, dst = tmp_path / "in.nc", tmp_path / "out.zarr"
    g = run_cli("workload", "gen", "--out", str(src), "--time", "300", "--plev", "2", "--lat", "16", "--lon", "32",
                env=env)
    assert g.returncode == 0, g.stderr.decode()[-2000:]
    r = run_cli("run", "--collector", "embedded", "--no-dask-report", sys.executable, "-m", "iodiag.workloads.convert",
                "--src", str(src), "--dst", str(dst), "--chunks", "1,1,16,32", "--cluster", "sync",
                "--zarr-format", "2", env=env, cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr.decode()[-2000:]
    (tmp_path / "c.toml").write_text("[small_files]\ncount = 100\n")
    rep = json.loads(run_cli("report", "last", "--json", "--config", str(tmp_path / "c.toml"), env=env).stdout)
    f = next(x for x in rep["findings"] if x["id"] == "many-small-files")
    ev = f["evidence"]
    assert ev["largest_array_chunk_grid"] == [300, 2, 1, 1]
    on_disk = [p.stat().st_size for p in (dst / ev["largest_array"].rsplit("/", 1)[-1]).iterdir()
               if not p.name.startswith(".")]
    assert len(on_disk) == 600
    # the mean of what the job wrote per chunk is the chunk files' size (compressed chunks differ a little)
    assert ev["largest_array_mean_chunk_bytes"] == pytest.approx(statistics.mean(on_disk), rel=0.02)
    assert "~0 B per chunk" not in f["recommendation"]
