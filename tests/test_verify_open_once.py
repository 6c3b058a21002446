"""Open once, applied to an unmodified script: a NetCDF file re-opened for every time step (to append a step, or
to read one) is kept open by iodiag verify's preload (``open_once``): the program's later opens of that file get
the first handle back, its ``close()`` only syncs, the real close is at exit.  Real netCDF4/h5py files, real
scripts in a temporary folder, recorded with the embedded collector and verified with no ``--set``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import require_embedded
from iodiag.config import Config
from iodiag.errors import UsageError

PY = sys.executable
SITE = Path(__file__).resolve().parents[1] / "src" / "iodiag" / "collectors" / "verify_site"

APPEND = '''"""append.py OUT N [RESTART]: create OUT (time unlimited), then re-open it for each of N steps to
append one; with RESTART, re-create OUT ("w", truncating it) half-way and go on."""
import json
import os
import sys

import netCDF4
import numpy as np
from netCDF4 import Dataset

if os.environ.get("PROBE_LOG"):
    with open(os.environ["PROBE_LOG"], "a") as fh:
        fh.write(json.dumps(sys.argv) + "\\n")
out, n, restart = sys.argv[1], int(sys.argv[2]), len(sys.argv) > 3


def create():
    with netCDF4.Dataset(out, "w") as nc:
        nc.createDimension("time", None)
        nc.createDimension("lat", 8)
        nc.createDimension("lon", 16)
        nc.createVariable("time", "f8", ("time",))
        nc.createVariable("ta", "f4", ("time", "lat", "lon"))


create()
rng = np.random.default_rng(0)
t0 = 0
for t in range(n):
    if restart and t == n // 2:
        create()
        t0 = t
    nc = Dataset(out, "a")
    nc["time"][t - t0] = t
    nc["ta"][t - t0] = rng.random((8, 16), dtype="float32")
    nc.steps = t + 1
    nc.close()
with Dataset(out) as nc:
    print(isinstance(nc, Dataset), isinstance(nc, netCDF4.Dataset), nc["ta"].shape, nc.steps)
'''

READ = '''import sys
import netCDF4
total = 0.0
for t in range(int(sys.argv[2])):
    with netCDF4.Dataset(sys.argv[1]) as ds:  # re-opened for every time step
        total += float(ds["ta"][t].mean())
print(total)
'''

XREAD = '''import sys
import xarray as xr
total = 0.0
for t in range(int(sys.argv[2])):
    with xr.open_dataset(sys.argv[1], engine="netcdf4") as ds:  # xarray opens it through netCDF4.Dataset
        total += float(ds["ta"][t].mean())
print(total)
'''

H5 = '''import sys
import h5py
import numpy as np
out, n = sys.argv[1], int(sys.argv[2])
with h5py.File(out, "w") as h5:
    h5.create_dataset("ta", (0, 4), maxshape=(None, 4), dtype="f8")
for t in range(n):
    with h5py.File(out, "a") as h5:
        d = h5["ta"]
        d.resize((t + 1, 4))
        d[t] = np.arange(4) * t
with h5py.File(out, "r") as h5:
    print(isinstance(h5, h5py.File), h5["ta"].shape)
'''

XLIB = '''import sys
import h5py
import netCDF4
out = sys.argv[1]
with netCDF4.Dataset(out, "w") as nc:
    nc.createDimension("t", None)
    nc.createVariable("v", "f8", ("t",))
for t in range(20):
    with netCDF4.Dataset(out, "a") as nc:
        nc["v"][t] = t
with h5py.File(out, "r") as h5:  # the same file through another library (and its own HDF5)
    print(type(h5).__name__, float(h5["v"][:].sum()))
with netCDF4.Dataset(out, "a") as nc:
    nc["v"][20] = 20
with netCDF4.Dataset(out) as nc:
    print(type(nc).__name__, nc["v"].shape, float(nc["v"][:].sum()))
'''


def _run(tmp_path: Path, script: str, args: list[str], settings: dict | None) -> tuple[str, list[dict]]:
    """Run ``script`` with the preload on PYTHONPATH (as verify's runs have it), the settings given or none;
    (its output, what the preload recorded)."""
    record = tmp_path / "applied.jsonl"
    record.unlink(missing_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("IODIAG_")}
    env["PYTHONPATH"] = str(SITE) + os.pathsep + env.get("PYTHONPATH", "")
    if settings is not None:
        env.update({"IODIAG_VERIFY_OVERRIDES": json.dumps(settings), "IODIAG_VERIFY_RECORD": str(record)})
    p = subprocess.run([PY, script, *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "Exception ignored" not in p.stderr and "Traceback" not in p.stderr, p.stderr[-2000:]
    recs = [json.loads(x) for x in record.read_text().splitlines()] if record.exists() else []
    return p.stdout, recs


def _data(path: Path) -> dict:
    netCDF4 = pytest.importorskip("netCDF4")
    with netCDF4.Dataset(path) as nc:
        return {"vars": {k: v[:].filled() for k, v in nc.variables.items()},
                "attrs": {k: nc.getncattr(k) for k in nc.ncattrs()}}


def _same(a: dict, b: dict) -> bool:
    import numpy as np

    return a["attrs"] == b["attrs"] and a["vars"].keys() == b["vars"].keys() and all(
        np.array_equal(a["vars"][k], b["vars"][k]) for k in a["vars"])


def test_open_once_keeps_one_handle_and_writes_the_same_data_and_a_w_reopen_is_not_kept(tmp_path):
    """The append script re-creates its file ("w") half-way: that open is the program's own (the kept handle is
    really closed first, the file truncated), the appends after it get a new kept handle.  The file it leaves
    holds the same variables and attributes as the plain run's."""
    pytest.importorskip("netCDF4")
    (tmp_path / "append.py").write_text(APPEND)
    out0, recs0 = _run(tmp_path, "append.py", ["plain.nc", "60", "restart"], None)
    out1, recs = _run(tmp_path, "append.py", ["kept.nc", "60", "restart"], {"open_once": True})
    assert recs0 == []  # no settings: the preload does nothing (the before side of verify)
    assert out1.split()[:2] == ["True", "True"] and out1 == out0  # isinstance(h, Dataset) holds; 30 steps left
    assert "(30, 8, 16)" in out1
    assert _same(_data(tmp_path / "plain.nc"), _data(tmp_path / "kept.nc"))
    (fired,) = [r for r in recs if r.get("setting") == "open_once"]
    assert fired["where"] == "netCDF4.Dataset"
    # 60 appends and the final read: 61 opens served by 2 real ones (the "w" re-open closed the first handle)
    assert fired["files"] == [{"path": str((tmp_path / "kept.nc").resolve()), "opens": 61, "real_opens": 2}]
    assert fired["value"] == "kept.nc: 61 opens -> 2"
    # open_once naming another file keeps nothing: the script runs as written
    out2, recs2 = _run(tmp_path, "append.py", ["other.nc", "20"], {"open_once": str(tmp_path / "kept.nc")})
    assert not any(r.get("setting") == "open_once" for r in recs2) and "(20, 8, 16)" in out2


def test_open_once_serves_h5py_reopens_and_read_loops(tmp_path):
    pytest.importorskip("h5py")
    pytest.importorskip("netCDF4")
    import h5py
    import numpy as np

    (tmp_path / "h5.py").write_text(H5)
    out0, _ = _run(tmp_path, "h5.py", ["a.h5", "40"], None)
    out1, recs = _run(tmp_path, "h5.py", ["b.h5", "40"], {"open_once": True})
    assert out0 == out1 and out1.startswith("True (40, 4)")
    with h5py.File(tmp_path / "a.h5", "r") as a, h5py.File(tmp_path / "b.h5", "r") as b:
        assert np.array_equal(a["ta"][:], b["ta"][:])
    assert [r["value"] for r in recs if r.get("setting") == "open_once"] == ["b.h5: 41 opens -> 1"]
    # a NetCDF file kept open by netCDF4, then opened by h5py: each library gets its own handle, the one the
    # program closed is closed for real first (HDF5 would refuse a file another library holds open)
    (tmp_path / "xlib.py").write_text(XLIB)
    x0, _ = _run(tmp_path, "xlib.py", ["x0.nc"], None)
    x1, recs = _run(tmp_path, "xlib.py", ["x1.nc"], {"open_once": True})
    assert x0 == x1 == "File 190.0\nDataset (21,) 210.0\n"
    assert [r["value"] for r in recs if r.get("setting") == "open_once"] == ["x1.nc: 22 opens -> 2"]
    # a read loop: each step's "r" open gets the kept handle back; the sums are the same
    (tmp_path / "append.py").write_text(APPEND)
    _run(tmp_path, "append.py", ["steps.nc", "30"], None)
    (tmp_path / "read.py").write_text(READ)
    r0, _ = _run(tmp_path, "read.py", ["steps.nc", "30"], None)
    r1, recs = _run(tmp_path, "read.py", ["steps.nc", "30"], {"open_once": "steps.nc"})
    assert r0 == r1
    assert [r["value"] for r in recs if r.get("setting") == "open_once"] == ["steps.nc: 30 opens -> 1"]
    # the same loop through xarray (its netCDF4 backend checks isinstance(..., netCDF4.Dataset))
    pytest.importorskip("xarray")
    (tmp_path / "xread.py").write_text(XREAD)
    r2, recs = _run(tmp_path, "xread.py", ["steps.nc", "10"], {"open_once": "steps.nc"})
    r3, _ = _run(tmp_path, "xread.py", ["steps.nc", "10"], None)
    assert r2 == r3
    assert [r["value"] for r in recs if r.get("setting") == "open_once"] == ["steps.nc: 10 opens -> 1"]


def _record_embedded(tmp_path: Path, argv: list[str], name: str):
    from iodiag.jobs.run import RunOptions, run_job

    res = run_job(RunOptions(command=argv, collector="embedded", dask=False, name=name,
                             store=str(tmp_path / "store")), cwd=str(tmp_path))
    assert res.outcome.exit_code == 0
    return res.record


def _calls(log: Path) -> list[list[str]]:
    return [json.loads(x) for x in log.read_text().splitlines()] if log.exists() else []


def test_verify_with_no_set_applies_open_once_to_an_unmodified_append_script(tmp_path, monkeypatch):
    """`iodiag verify JOB` with no --set on a per-step NetCDF append: the top recommendation (open the file once)
    is applied inside the unmodified script, the script runs for the timed runs only (it logs its argv), and the
    file the after runs leave holds the same data as a plain run's."""
    pytest.importorskip("netCDF4")
    require_embedded()
    from iodiag.reports.verify import render_verify_text
    from iodiag.service import verify_job

    (tmp_path / "append.py").write_text(APPEND)
    log = tmp_path / "argv.jsonl"
    monkeypatch.setenv("PROBE_LOG", str(log))
    rec = _record_embedded(tmp_path, [PY, "append.py", "steps.nc", "200"], "append")
    monkeypatch.setenv("IODIAG_HOME", str(tmp_path / "store"))
    log.unlink()  # the recording's own run
    d = verify_job(target=rec.id, config=Config(), reps=2)
    assert d["recommendation"]["id"] == "open-once" and d["not_applied"] == []
    assert d["recommendation"]["settings"]["open_once"] == str(tmp_path / "steps.nc")
    (a,) = d["applied"]
    assert (a["setting"], a["where"], a["value"], a["runs"]) == ("open_once", "netCDF4.Dataset",
                                                                 "steps.nc: 201 opens -> 1", 2)
    assert _calls(log) == [["append.py", "steps.nc", "200"]] * 4  # 2 runs per side, nothing else
    assert {"wall_s", "cpu_s"} <= set(d["speedup"])
    text = render_verify_text(d)
    assert "applied: open_once at netCDF4.Dataset (steps.nc: 201 opens -> 1), in 2 of 2 after runs" in text
    # the last run was an after run: its file against a plain run's
    after = _data(tmp_path / "steps.nc")
    _run(tmp_path, "append.py", ["ref.nc", "200"], None)
    assert _same(after, _data(tmp_path / "ref.nc"))
    # the same by hand
    d = verify_job(target=rec.id, config=Config(), reps=2, sets=["open_once=1"])
    assert d["recommendation"] is None and [x["value"] for x in d["applied"]] == ["steps.nc: 201 opens -> 1"]
    assert len(_calls(log)) == 4 + 4 + 1  # + the reference run above


def test_open_once_is_applied_to_python_programs_on_netcdf_hdf5_files_only(tmp_path):
    """A C program (or a shell) re-opening the file keeps the snippet: verify cannot apply it and says to use
    --after; a Python program re-opening a plain file (open()) too; --set open_once needs a Python program."""
    from iodiag.jobs.verify import WorkloadCommand, parse_params, parse_value
    from iodiag.recommend.recommendation import Change, Recommendation
    from iodiag.service import _applicable, parse_sets

    def cmd(*argv):
        w, params, start = parse_params(argv)
        return WorkloadCommand(tuple(argv), str(tmp_path), {}, w, params, start)

    def rec(path):
        return Recommendation(id="open-once", title="Open it once", settings={"open_once": path},
                              changes=(Change("snippet", "f = open(p)"),))

    py = cmd(PY, "append.py", "steps.nc", "1000")
    assert _applicable(rec(str(tmp_path / "steps.nc")), py)["overrides"] == {"open_once": str(tmp_path / "steps.nc")}
    assert _applicable(rec(str(tmp_path / "s.h5")), py)["overrides"] == {"open_once": str(tmp_path / "s.h5")}
    assert _applicable(rec(str(tmp_path / "log.txt")), py) is None  # open(): not the preload's
    assert _applicable(rec(True), py) is None  # which files is not known: --set open_once=1
    assert _applicable(rec(str(tmp_path / "steps.nc")), cmd("./append", "steps.nc")) is None
    assert _applicable(rec(str(tmp_path / "steps.nc")), cmd("/bin/sh", "-c", "python append.py steps.nc")) is None
    assert parse_sets(["open_once=1"], py)[2] == {"open_once": "1"} and parse_value("open_once", "1") is True
    assert parse_value("open_once", "steps.nc") == "steps.nc"
    with pytest.raises(UsageError, match="nothing to apply"):
        parse_value("open_once", "0")
