"""A sweep run here end to end: prepare step, runs, a failure on purpose, resume (skip succeeded,
retry failed), collect to CSV and parquet, analyze."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

SPEC = """
[sweep]
name = "local"
workload = "read"
repetitions = 2
launcher = "direct"

[vars]
data = "{data}"

[params]
path = "{{data}}/in-{{api}}.zarr"
patterns = "point,slice"
repeat = 1

[grid]
api = ["xarray", "native"]

[prepare]
workload = "gen"
params = {{ out = "{{sweep_dir}}/made.zarr", format = "zarr2", time = 3, plev = 2, lat = 10, lon = 20 }}
"""


def _cli(*args, cwd):
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    return subprocess.run([sys.executable, "-m", "iodiag", *args], env=env, capture_output=True, text=True,
                          cwd=cwd, timeout=600)


def test_local_sweep_fail_resume_collect_analyze(tmp_path):
    from iodiag.workloads.gen import generate

    data = tmp_path / "data"
    generate(out=data / "in-xarray.zarr", format="zarr2", time=3, plev=2, lat=10, lon=20)
    spec = tmp_path / "s.toml"
    spec.write_text(SPEC.format(data=data))
    sweep = tmp_path / "sw"

    p = _cli("sweep", "run", str(spec), "--local", "--dir", str(sweep), "--json", cwd=tmp_path)
    assert p.returncode == 1, p.stderr  # the native runs fail: in-native.zarr is missing
    out = json.loads(p.stdout)
    assert sorted(out["failed"]) == ["read_api=native_r1", "read_api=native_r2"]
    assert sorted(out["ran"]) == ["prepare_gen", "read_api=xarray_r1", "read_api=xarray_r2"]
    failed = sweep / "runs" / "read_api=native_r1"
    assert (failed / "FAILED").read_text().strip() == "3"  # InputNotFound's exit code, kept by the marker
    assert "in-native.zarr does not exist" in (failed / "stderr.log").read_text()
    ok = sweep / "runs" / "read_api=xarray_r1"
    assert (ok / "SUCCESS").exists() and json.loads((ok / "results.json").read_text())["workload"] == "read"
    assert (sweep / "made.zarr" / ".zgroup").exists()  # the prepare step ran first
    # repetitions ran round-robin over the grid points: xarray r1, native r1, xarray r2, native r2
    ends = [(sweep / "runs" / n / m).stat().st_mtime_ns for n, m in
            (("read_api=xarray_r1", "SUCCESS"), ("read_api=native_r1", "FAILED"), ("read_api=xarray_r2", "SUCCESS"),
             ("read_api=native_r2", "FAILED"))]
    assert ends == sorted(ends)

    shutil.copytree(data / "in-xarray.zarr", data / "in-native.zarr")
    before = (ok / "results.json").stat().st_mtime_ns
    p = _cli("sweep", "run", str(spec), "--dir", str(sweep), "--json", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert sorted(out["ran"]) == ["read_api=native_r1", "read_api=native_r2"]
    assert sorted(out["skipped"]) == ["prepare_gen", "read_api=xarray_r1", "read_api=xarray_r2"]
    assert (ok / "results.json").stat().st_mtime_ns == before  # succeeded runs untouched
    assert len((failed / "attempts.jsonl").read_text().splitlines()) == 2

    p = _cli("sweep", "collect", str(sweep), cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    import pandas as pd

    csv = pd.read_csv(sweep / "results.csv")
    pq = pd.read_parquet(sweep / "results.parquet")
    assert len(csv) == len(pq) == 4 * 2  # 4 runs × 2 patterns
    assert set(csv["status"]) == {"succeeded"} and set(csv["api"]) == {"xarray", "native"}
    assert set(csv["pattern"]) == {"point", "slice"}
    assert (csv.loc[csv.pattern == "slice", "bytes_requested"] == 2 * 10 * 20 * 4).all()

    p = _cli("sweep", "analyze", str(sweep), "--axis", "api", "--compare-by", "api", "--group", "pattern",
             "--json", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    res = json.loads(p.stdout)
    assert {(r["api"], r["pattern"]) for r in res["summary"]} == {
        ("xarray", "point"), ("xarray", "slice"), ("native", "point"), ("native", "slice")}
    row = next(r for r in res["summary"] if r["api"] == "native" and r["pattern"] == "slice")
    times = csv[(csv.api == "native") & (csv.pattern == "slice")]["t_total_s"]
    assert row["time_s_n"] == 2 and row["time_s_mean"] == pytest.approx(times.mean())
    assert (row["time_s_min"], row["time_s_max"]) == (pytest.approx(times.min()), pytest.approx(times.max()))
    assert (sweep / "compare.png").stat().st_size > 1000
    assert res["notes"] == ["api is not numeric: no speedup or efficiency along it"]
    # a group column the sweep lacks gives one group of bars (was KeyError: 'pattern'); an unknown
    # --compare-by column is a usage error naming the columns
    (sweep / "compare.png").unlink()
    p = _cli("sweep", "analyze", str(sweep), "--axis", "api", "--compare-by", "api", "--group", "nosuch", cwd=tmp_path)
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr
    assert (sweep / "compare.png").stat().st_size > 1000
    p = _cli("sweep", "analyze", str(sweep), "--axis", "api", "--compare-by", "nosuch", cwd=tmp_path)
    assert p.returncode == 2 and "nosuch" in p.stderr and "Traceback" not in p.stderr, p.stderr

    # the recommender's training table reads the same folder through the sweep's public reader: the 4 succeeded
    # read runs x 2 patterns, with the array's geometry from each run's own record (the prepare step is no run to
    # train on); a folder that is no sweep is refused by name
    from iodiag.errors import InputNotFound
    from iodiag.recommend.train import table_from_sweeps

    rows = table_from_sweeps([sweep])
    assert len(rows) == 8 and {r["workload"] for r in rows} == {"read"}
    assert {r["pattern"] for r in rows} == {"point", "slice"} and {r["shape"] for r in rows} == {"3x2x10x20"}
    assert all(r["time_s"] > 0 for r in rows)
    with pytest.raises(InputNotFound, match="no sweep.json"):
        table_from_sweeps([data])
