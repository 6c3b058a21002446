"""A NetCDF file re-opened for every time step (many opens of one file, one read of a step each): the change is to
open it once, and that one change addresses everything the re-opening shows — the metadata storm, the file read
over and over (its header and index again at every open) and the accesses that jump back to the header.  Run for
real under Darshan on a small file made by ``iodiag workload gen``."""

from __future__ import annotations

import json

import pytest

from conftest import require_darshan_runtime, run_cli

SCRIPT = '''import sys
import netCDF4
total = 0.0
for t in range(200):
    with netCDF4.Dataset(sys.argv[1]) as ds:  # re-opened for every time step
        total += float(ds["ta"][t].mean())
print(total)
'''


def test_a_netcdf_file_reopened_every_step_is_told_to_open_it_once(tmp_path):
    pytest.importorskip("netCDF4")
    require_darshan_runtime()
    env = {"IODIAG_HOME": str(tmp_path / "home")}
    nc = tmp_path / "s.nc"
    g = run_cli("workload", "gen", "--out", str(nc), "--time", "200", "--plev", "2", "--lat", "20", "--lon", "30",
                env=env)
    assert g.returncode == 0, g.stderr.decode()[-2000:]
    (tmp_path / "steps.py").write_text(SCRIPT)
    r = run_cli("run", "--darshan", "--no-dask-report", str(tmp_path / "steps.py"), str(nc), env=env, cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr.decode()[-2000:]
    rep = json.loads(run_cli("report", "last", "--json", env=env).stdout)
    found = {f["id"]: f for f in rep["findings"]}
    assert "metadata-storm" in found and "redundant-read" in found
    top = next(x for x in rep["recommendations"] if x.get("abstain") is None)
    assert top["id"] == "open-once" and top["settings"]["open_once"] == str(nc)
    assert {"metadata-storm", "redundant-read"} <= set(top["addresses"])
    (code,) = [c["text"] for c in top["changes"]]
    assert code.startswith(f'ds = xr.open_dataset("{nc}")') and "for t in range" in code
    compile(code, "<snippet>", "exec")  # pasteable Python
    # opening a NetCDF file also decodes its header outside the I/O calls: no bound, the gain is to be measured
    assert top["gain"] == "unknown" and top["speedup_high"] is None
    # nothing else proposes reading the same file differently: the re-opening was the cause
    others = [x for x in rep["recommendations"] if x.get("abstain") is None and x is not top]
    assert not any(set(x["addresses"]) & {"redundant-read", "random-access"} for x in others)
