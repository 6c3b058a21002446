"""Sweep specs and plans: validation before anything runs, templating, names, commands."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from iodiag.errors import ConfigError, InputNotFound, UsageError
from iodiag.jobs.sweep import load_spec, make_plan, spec_from_dict
from iodiag.jobs.sweep import plan as plan_mod

REPO = Path(__file__).resolve().parents[1]

BASE = {
    "sweep": {"name": "weak", "workload": "convert", "repetitions": 2},
    "vars": {"data": "/data"},
    "params": {"src": "{data}/cube-w{workers}.nc", "dst": "{run_dir}/out.zarr"},
    "grid": {"workers": [1, 2], "compressor": ["none", "zstd"]},
    "prepare": {"workload": "gen", "params": {"kind": "cube", "workers": "{workers}",
                                              "out": "{data}/cube-w{workers}.nc"}},
}


def _spec(**over):
    data = {k: (dict(v) if isinstance(v, dict) else v) for k, v in BASE.items()}
    for k, v in over.items():
        data[k] = v
    return spec_from_dict(data, source="weak.toml")


def test_plan_expands_grid_with_prepare_steps(tmp_path):
    plan = make_plan(_spec(), sweep_dir=tmp_path, python="py")
    assert len(plan.runs) == 8 and len(plan.prepare) == 2  # prepare deduplicated per rendering
    r = plan.runs[0]
    assert r.name == "convert_workers=1_compressor=none_r1"
    assert r.dir == tmp_path.resolve() / "runs" / r.name
    assert r.params["src"] == "/data/cube-w1.nc" and r.params["dst"] == f"{r.dir}/out.zarr"
    assert r.depends_on == ["prepare_gen_workers=1"]
    p = plan.by_name()["prepare_gen_workers=2"]
    assert p.params["workers"] == 2 and isinstance(p.params["workers"], int)  # "{workers}" keeps the type
    assert {x.rep for x in plan.runs} == {1, 2}
    # repetitions round-robin over the grid points: every point once, then every point again
    assert [x.rep for x in plan.runs] == [1, 1, 1, 1, 2, 2, 2, 2]
    assert [x.name.rsplit("_r", 1)[0] for x in plan.runs[:4]] == [x.name.rsplit("_r", 1)[0] for x in plan.runs[4:]]


def test_command_is_iodiag_run_or_direct(tmp_path, monkeypatch):
    monkeypatch.setattr(plan_mod, "iodiag_run_available", lambda: True)
    plan = make_plan(_spec(sweep={**BASE["sweep"], "collector": "embedded"}), sweep_dir=tmp_path, python="py")
    argv = plan.runs[0].argv
    assert argv[:8] == ["py", "-m", "iodiag", "run", "--name", plan.runs[0].name, "--collector", "embedded"]
    assert argv[8:12] == ["--", "py", "-m", "iodiag.workloads.convert"]
    assert "--compressor" in argv and argv[argv.index("--workers") + 1] == "1"
    assert plan.launcher == "iodiag-run" and plan.notes == []
    monkeypatch.setattr(plan_mod, "iodiag_run_available", lambda: False)
    plan = make_plan(_spec(), sweep_dir=tmp_path, python="py")
    assert plan.launcher == "direct" and plan.runs[0].argv[:3] == ["py", "-m", "iodiag.workloads.convert"]
    assert "not be iodiag jobs" in plan.notes[0]
    with pytest.raises(UsageError, match="iodiag run"):
        make_plan(_spec(sweep={**BASE["sweep"], "launcher": "iodiag-run"}), sweep_dir=tmp_path)


def test_grid_values_are_rendered(tmp_path):
    spec = _spec(params={"dst": "{run_dir}/o.zarr"}, grid={"workers": [1], "src": ["{data}/a.nc", "{data}/b.nc"]})
    plan = make_plan(spec, sweep_dir=tmp_path, python="py")
    assert [r.grid["src"] for r in plan.runs[:2]] == ["/data/a.nc", "/data/b.nc"]  # (repetition 1 of each point first)
    assert plan.runs[0].name == "convert_workers=1_src=a.nc_r1"


def test_bool_params_render_as_flags(tmp_path):
    plan = make_plan(_spec(grid={"workers": [1], "consolidated": [True, False]}), sweep_dir=tmp_path, python="py")
    assert "--consolidated" in plan.runs[0].argv and "--no-consolidated" in plan.runs[-1].argv


@pytest.mark.parametrize("over,match", [
    ({"params": {**BASE["params"], "chunk_size": 5}}, "unknown parameter 'chunk_size' for workload 'convert'"),
    ({"grid": {"wrokers": [1]}}, "unknown parameter 'wrokers'"),
    ({"grid": {"workers": ["two"]}}, "is not a int"),
    ({"grid": {"compressor": ["lz4"]}}, "not one of"),
    ({"grid": {"workers": []}}, "non-empty list"),
    ({"grid": {"workers": [1, 1]}}, "repeats a value"),
    ({"sweep": {"workload": "convert", "reps": 3}}, "unknown key 'reps'"),
    ({"sweep": {"workload": "simulate"}}, "workload = 'simulate'"),
    ({"sweep": {"workload": "convert", "chain": "afternotok"}}, "chain"),
    ({"resources": {"walltime": "1h"}}, "HH:MM"),
    ({"resources": {"gpus": 1}}, "unknown key 'gpus'"),
    ({"extra": {}}, "unknown key 'extra'"),
    ({"prepare": {"workload": "gen", "params": {"outt": "x"}}}, "unknown parameter 'outt'"),
])
def test_spec_errors_name_the_cause(over, match):
    with pytest.raises(ConfigError, match=match):
        _spec(**over)


def test_templates_and_required_params_checked_at_plan_time(tmp_path):
    with pytest.raises(ConfigError, match="unknown name {scratch}"):
        make_plan(_spec(params={"src": "{scratch}/a.nc", "dst": "x"}), sweep_dir=tmp_path)
    with pytest.raises(ConfigError, match="needs parameter 'dst'"):
        make_plan(_spec(params={"src": "a.nc"}), sweep_dir=tmp_path)


def test_run_limit_needs_yes(tmp_path):
    spec = _spec(grid={"workers": list(range(1, 11)), "threads": [1, 2, 4]})  # 10*3*2 = 60 runs
    with pytest.raises(UsageError, match="60 runs, more than the limit of 50"):
        make_plan(spec, sweep_dir=tmp_path, max_runs=50)
    assert len(make_plan(spec, sweep_dir=tmp_path, max_runs=50, yes=True).runs) == 60


def test_load_spec_from_file_and_cli_errors(tmp_path):
    with pytest.raises(InputNotFound):
        load_spec(tmp_path / "none.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("[sweep]\nworkload = 'read'\n[params]\npath = 'x'\nspeed = 3\n")
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    p = subprocess.run([sys.executable, "-m", "iodiag", "sweep", "plan", str(bad)], env=env, capture_output=True,
                       text=True, cwd=tmp_path)
    assert p.returncode == 7
    assert "unknown parameter 'speed' for workload 'read'" in p.stderr and "Traceback" not in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1
    big = tmp_path / "big.toml"
    big.write_text("[sweep]\nworkload = 'read'\nrepetitions = 30\n[params]\npath = 'x.zarr'\n"
                   "[grid]\nnslices = [1, 2, 3]\n")
    p = subprocess.run([sys.executable, "-m", "iodiag", "sweep", "plan", str(big), "--json"], env=env,
                       capture_output=True, text=True, cwd=tmp_path)
    assert p.returncode == 2 and "90 runs" in p.stderr and "--yes" in p.stderr
    assert not (tmp_path / "sweeps").exists()
    p = subprocess.run([sys.executable, "-m", "iodiag", "sweep", "plan", str(big), "--json", "--yes"], env=env,
                       capture_output=True, text=True, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    import json

    assert len(json.loads(p.stdout)["runs"]) == 90
