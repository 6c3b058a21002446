"""A 2×2 sweep through a real single-node Slurm (Debian's slurm-wlm + munge, started here as root):
the dependency chain is visible to the scheduler, one run fails on purpose, and resubmitting retries
it while the succeeded runs are skipped.

Needs root and the packages (installed with apt-get when missing, unless IODIAG_TEST_NO_APT=1);
otherwise the tests skip with the reason."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from slurm.cluster import LocalSlurm, Unavailable, ensure_packages  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slurm


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    try:
        ensure_packages(allow_apt=os.environ.get("IODIAG_TEST_NO_APT") != "1")
        cluster = LocalSlurm(tmp_path_factory.mktemp("slurm")).start()
    except Unavailable as exc:
        pytest.skip(f"no local Slurm: {exc}")
    yield cluster
    cluster.stop()


SPEC = """
[sweep]
name = "slurm2x2"
workload = "read"
repetitions = 1
chain = "afterany"
launcher = "direct"

[vars]
data = "{data}"

[params]
path = "{{data}}/in-{{api}}-{{patterns}}.nc"
repeat = 1

[grid]
api = ["xarray", "native"]
patterns = ["point", "slice"]

[prepare]
workload = "gen"
params = {{ out = "{{sweep_dir}}/made-{{api}}.nc", time = 2, plev = 2, lat = 5, lon = 8 }}

[resources]
cpus = 1
walltime = "00:10:00"
directives = ["#SBATCH --begin=now+8"]
"""


def _cli(slurm, *args, cwd):
    env = {**slurm.env(), "PYTHONPATH": str(REPO / "src")}
    return subprocess.run([sys.executable, "-m", "iodiag", *args], env=env, capture_output=True, text=True,
                          cwd=cwd, timeout=300)


def _wait_markers(dirs, timeout=400):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all((d / "SUCCESS").exists() or (d / "FAILED").exists() for d in dirs):
            return
        time.sleep(1)
    raise AssertionError(f"runs did not finish within {timeout} s: "
                         + ", ".join(d.name for d in dirs if not ((d / "SUCCESS").exists() or (d / "FAILED").exists())))


def test_sweep_through_slurm_with_chain_failure_and_resume(slurm, tmp_path):
    from iodiag.workloads.gen import generate

    data = tmp_path / "data"
    first = generate(out=data / "in-xarray-point.nc", time=3, plev=2, lat=5, lon=8)["params"]["out"]
    for name in ("in-xarray-slice.nc", "in-native-point.nc"):  # in-native-slice.nc is missing on purpose
        (data / name).write_bytes(Path(first).read_bytes())
    spec = tmp_path / "s.toml"
    spec.write_text(SPEC.format(data=data))
    sweep = tmp_path / "sw"

    p = _cli(slurm, "sweep", "submit", str(spec), "--scheduler", "slurm", "--dir", str(sweep), "--json", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    ids = out["job_ids"]
    assert len(ids) == 6  # 2 prepare steps + 4 runs, all known to Slurm at once
    runs = ["read_api=xarray_patterns=point_r1", "read_api=xarray_patterns=slice_r1",
            "read_api=native_patterns=point_r1", "read_api=native_patterns=slice_r1"]

    # the scheduler sees every job and the chain (jobs are held by --begin, so nothing ran yet)
    q = slurm.run("squeue", "-h", "-o", "%i %j %T %E")
    listed = {line.split()[0]: line for line in q.stdout.strip().splitlines()}
    assert set(ids.values()) <= set(listed), q.stdout
    show = slurm.run("scontrol", "show", "job", ids[runs[1]]).stdout
    dep = re.search(r"Dependency=(\S+)", show).group(1)
    assert f"afterok:{ids['prepare_gen_api=xarray']}" in dep and f"afterany:{ids[runs[0]]}" in dep, dep
    show = slurm.run("scontrol", "show", "job", ids[runs[2]]).stdout
    dep = re.search(r"Dependency=(\S+)", show).group(1)
    assert f"afterok:{ids['prepare_gen_api=native']}" in dep and f"afterany:{ids[runs[1]]}" in dep, dep
    script = (sweep / "runs" / runs[0] / "run.sh").read_text()
    assert "#SBATCH --job-name=read_api=xarray_patterns=point_r1" in script and "#SBATCH --begin=now+8" in script

    dirs = [sweep / "runs" / r for r in runs] + [sweep / "prepare" / n for n in ("prepare_gen_api=xarray",
                                                                                "prepare_gen_api=native")]
    _wait_markers(dirs)
    failed = sweep / "runs" / runs[3]
    assert (failed / "FAILED").read_text().strip() == "3", (failed / "stderr.log").read_text()
    for d in dirs:
        if d != failed:
            assert (d / "SUCCESS").exists(), (d / "stderr.log").read_text()
    show = slurm.run("scontrol", "show", "job", ids[runs[3]]).stdout
    assert "JobState=FAILED" in show and "ExitCode=3:0" in show
    assert (sweep / "made-native.nc").exists()  # prepare steps ran on the node

    # resume: the failed run is retried, everything else is skipped
    (data / "in-native-slice.nc").write_bytes(Path(first).read_bytes())
    p = _cli(slurm, "sweep", "submit", str(spec), "--scheduler", "slurm", "--dir", str(sweep), "--json",
             cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    again = json.loads(p.stdout)
    assert again["ran"] == [runs[3]]
    assert sorted(again["skipped"]) == sorted(n for n in ids if n != runs[3])
    assert again["job_ids"][runs[3]] != ids[runs[3]]
    assert again["dependencies"][runs[3]] == []  # its prepare step and predecessor already succeeded
    _wait_markers([failed])
    assert (failed / "SUCCESS").exists() and not (failed / "FAILED").exists()
    assert len((failed / "attempts.jsonl").read_text().splitlines()) == 2

    p = _cli(slurm, "sweep", "collect", str(sweep), "--json", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    rows = json.loads(p.stdout)["rows"]
    assert {r["status"] for r in rows} == {"succeeded"} and len({r["run"] for r in rows}) == 4
    assert {r["scheduler_job_id"] for r in rows} == {*(ids[r] for r in runs[:3]), again["job_ids"][runs[3]]}


AFTEROK = """
[sweep]
name = "afterok"
workload = "read"
chain = "afterok"
launcher = "direct"

[params]
path = "{data}/in-{{nslices}}.nc"
patterns = "point"
repeat = 1

[grid]
nslices = [1, 2, 3]

[resources]
walltime = "00:10:00"
"""


@pytest.mark.slow
def test_afterok_chain_stops_and_resume_replaces_blocked_jobs(slurm, tmp_path):
    """With chain = afterok a failure blocks the rest (Slurm: DependencyNeverSatisfied); resubmitting
    cancels the blocked jobs and submits them again behind the retried run."""
    from iodiag.workloads.gen import generate

    data = tmp_path / "data"
    src = generate(out=data / "in-1.nc", time=2, plev=2, lat=5, lon=8)["params"]["out"]
    (data / "in-3.nc").write_bytes(Path(src).read_bytes())  # in-2.nc is missing on purpose
    spec = tmp_path / "s.toml"
    spec.write_text(AFTEROK.format(data=data))
    sweep = tmp_path / "sw"
    p = _cli(slurm, "sweep", "submit", str(spec), "--scheduler", "slurm", "--dir", str(sweep), "--json", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    ids = json.loads(p.stdout)["job_ids"]
    r1, r2, r3 = (f"read_nslices={i}_r1" for i in (1, 2, 3))
    _wait_markers([sweep / "runs" / r1, sweep / "runs" / r2])
    assert (sweep / "runs" / r2 / "FAILED").exists()
    deadline = time.monotonic() + 60
    reason = ""
    while time.monotonic() < deadline and reason != "DependencyNeverSatisfied":
        reason = slurm.run("squeue", "-h", "-j", ids[r3], "-o", "%r").stdout.strip()
        time.sleep(1)
    assert reason == "DependencyNeverSatisfied"
    assert not (sweep / "runs" / r3 / "SUCCESS").exists()

    (data / "in-2.nc").write_bytes(Path(src).read_bytes())
    p = _cli(slurm, "sweep", "submit", str(spec), "--scheduler", "slurm", "--dir", str(sweep), "--json", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    again = json.loads(p.stdout)
    assert again["skipped"] == [r1] and again["ran"] == [r2, r3]
    assert again["dependencies"][r3] == [f"afterok:{again['job_ids'][r2]}"]
    assert "CANCELLED" in slurm.run("scontrol", "show", "job", ids[r3]).stdout  # the blocked job is gone
    _wait_markers([sweep / "runs" / r2, sweep / "runs" / r3])
    assert all((sweep / "runs" / r / "SUCCESS").exists() for r in (r1, r2, r3))


@pytest.mark.slow
def test_convert_with_dask_jobqueue_workers_as_slurm_jobs(slurm, tmp_path, monkeypatch):
    pytest.importorskip("dask_jobqueue")
    import numpy as np
    import xarray as xr

    from iodiag.workloads.convert import convert
    from iodiag.workloads.gen import generate

    monkeypatch.setenv("SLURM_CONF", str(slurm.conf))
    src = generate(out=tmp_path / "a.nc", time=4, plev=2, lat=10, lon=20)["params"]["out"]
    rec = convert(src=src, dst=tmp_path / "o.zarr", strategy="region", cluster="slurm", workers=1, threads=1,
                  memory="1GiB", walltime="00:05:00")
    with xr.open_dataset(src) as a, xr.open_dataset(tmp_path / "o.zarr", engine="zarr") as b:
        np.testing.assert_array_equal(a["ta"].values, b["ta"].values)
    assert "#SBATCH --mem=1G" in rec["jobqueue_script"] and "dask_worker" in rec["jobqueue_script"]
    assert rec["cluster"]["cluster"] == "slurm" and len(rec["cluster"]["worker_pids"]) == 1
    names = slurm.run("squeue", "-h", "-t", "all", "-o", "%j").stdout.split()
    assert "dask-worker" in names  # the worker was a Slurm job
    logs = list((tmp_path / "o.zarr.worker-logs").glob("*.err"))
    assert logs and "Registered to" in logs[0].read_text()  # its log sits next to the output
