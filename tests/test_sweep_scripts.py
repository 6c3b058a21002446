"""Batch scripts: exact directives and dependency syntax as Slurm, LSF and PBS document them;
a missing scheduler command stops submission before anything is written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from iodiag.errors import DependencyMissing
from iodiag.jobs.sweep import make_plan, spec_from_dict, submit
from iodiag.jobs.sweep.schedulers import LSF, PBS, Dep, Slurm
from iodiag.jobs.sweep.spec import Resources

REPO = Path(__file__).resolve().parents[1]
RES = Resources(nodes=1, cpus=2, memory="4G", walltime="01:30:00", queue="debug", account="abc123",
                setup=("module load python",), directives=())
RUN = Path("/scratch/s/runs/convert_workers=2_r1")
ARGV = ["python", "-m", "iodiag.workloads.convert", "--src", "a b.nc"]


def _directives(text: str, prefix: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith(prefix)]


def test_slurm_script_and_dependencies():
    s = Slurm()
    text = s.script(job_name="convert_workers=2_r1", run_dir=RUN, res=RES, argv=ARGV, env={"X": "1"})
    assert text.startswith("#!/bin/bash\n")
    assert _directives(text, "#SBATCH") == [
        "#SBATCH --job-name=convert_workers=2_r1",
        f"#SBATCH --output={RUN}/stdout.log",
        f"#SBATCH --error={RUN}/stderr.log",
        "#SBATCH --nodes=1",
        "#SBATCH --ntasks=1",
        "#SBATCH --cpus-per-task=2",
        "#SBATCH --mem=4G",
        "#SBATCH --time=01:30:00",
        "#SBATCH --partition=debug",
        "#SBATCH --account=abc123",
    ]
    assert "python -m iodiag.workloads.convert --src 'a b.nc'" in text  # shell-quoted
    assert text.index("module load python") < text.index("python -m iodiag")
    assert s.submit_argv(Path("r.sh"), []) == ["sbatch", "--parsable", "r.sh"]
    assert s.submit_argv(Path("r.sh"), [Dep("11", "afterok"), Dep("12", "afterok"), Dep("13", "afterany")]) == \
        ["sbatch", "--parsable", "--dependency=afterok:11:12,afterany:13", "r.sh"]
    assert s.parse_job_id("4242\n") == "4242" and s.parse_job_id("4242;cluster\n") == "4242"
    assert s.is_alive(0, "PENDING Dependency") and not s.is_alive(0, "PENDING DependencyNeverSatisfied")
    assert not s.is_alive(1, "") and not s.is_alive(0, "COMPLETED None")


def test_lsf_script_and_dependencies():
    s = LSF()
    text = s.script(job_name="convert_workers=2_r1", run_dir=RUN, res=RES, argv=ARGV, env={})
    assert _directives(text, "#BSUB") == [
        "#BSUB -J convert_workers=2_r1",
        f"#BSUB -o {RUN}/stdout.log",
        f"#BSUB -e {RUN}/stderr.log",
        "#BSUB -n 2",
        '#BSUB -R "span[hosts=1]"',
        "#BSUB -W 1:30",  # LSF run limit is [hour:]minute
        '#BSUB -R "rusage[mem=4GB]"',
        "#BSUB -q debug",
        "#BSUB -P abc123",
    ]
    # bsub reads #BSUB lines only from a script on stdin: `bsub -w '...' < run.sh`
    assert s.submit_stdin(Path("r.sh")) == Path("r.sh")
    assert s.submit_argv(Path("r.sh"), [Dep("11", "afterok"), Dep("13", "afterany")]) == \
        ["bsub", "-w", "done(11) && ended(13)"]
    assert s.submit_argv(Path("r.sh"), []) == ["bsub"]
    assert s.parse_job_id("Job <5151> is submitted to queue <debug>.\n") == "5151"
    two = Resources(nodes=2, cpus=4, walltime="00:10:30")
    assert '#BSUB -R "span[ptile=4]"' in s.script(job_name="j", run_dir=RUN, res=two, argv=ARGV, env={})
    assert "#BSUB -n 8" in s.script(job_name="j", run_dir=RUN, res=two, argv=ARGV, env={})
    assert "#BSUB -W 0:11" in s.script(job_name="j", run_dir=RUN, res=two, argv=ARGV, env={})


def test_pbs_script_and_dependencies():
    s = PBS()
    text = s.script(job_name="convert_workers=2_r1", run_dir=RUN, res=RES, argv=ARGV, env={})
    assert _directives(text, "#PBS") == [
        "#PBS -N convert_workers-2_r1",  # '=' is not allowed in PBS job names
        f"#PBS -o {RUN}/stdout.log",
        f"#PBS -e {RUN}/stderr.log",
        "#PBS -l select=1:ncpus=2:mem=4gb",
        "#PBS -l walltime=01:30:00",
        "#PBS -q debug",
        "#PBS -A abc123",
    ]
    assert s.submit_argv(Path("r.sh"), [Dep("11.pbs01", "afterok"), Dep("12.pbs01", "afterok"),
                                        Dep("13.pbs01", "afterany")]) == \
        ["qsub", "-W", "depend=afterok:11.pbs01:12.pbs01,afterany:13.pbs01", "r.sh"]
    assert s.parse_job_id("16394.pbs01\n") == "16394.pbs01"
    assert s.is_alive(0, "Job Id: 1.x\n    job_state = Q\n") and not s.is_alive(0, "    job_state = F\n")


def test_marker_logic_runs_in_bash(tmp_path):
    """The script body writes SUCCESS on exit 0 and FAILED with the code otherwise."""
    s = Slurm()
    for code, marker in ((0, "SUCCESS"), (5, "FAILED")):
        d = tmp_path / str(code)
        d.mkdir()
        (d / "FAILED").write_text("1\n")  # stale marker of an earlier attempt
        script = d / "run.sh"
        script.write_text(s.script(job_name="t", run_dir=d, res=RES.__class__(), env={"A": "x y"},
                                   argv=["bash", "-c", f'test "$A" = "x y" && exit {code}']))
        assert subprocess.call(["bash", str(script)]) == code
        assert (d / marker).exists() and not (d / ("FAILED" if code == 0 else "SUCCESS")).exists()
        if code:
            assert (d / "FAILED").read_text().strip() == "5"


SPEC = {"sweep": {"name": "s", "workload": "read", "repetitions": 1, "launcher": "direct"},
        "params": {"path": "{sweep_dir}/in.zarr"}, "grid": {"nslices": [1, 2]},
        "prepare": {"workload": "gen", "params": {"out": "{sweep_dir}/in.zarr", "format": "zarr2"}}}


@pytest.mark.parametrize("sched", ["slurm", "lsf", "pbs"])
def test_dry_run_chains_prepare_and_runs(tmp_path, sched):
    plan = make_plan(spec_from_dict(SPEC), sweep_dir=tmp_path / "sw", python="py")
    out = submit(plan, scheduler=sched, dry_run=True)
    prep, r1, r2 = "prepare_gen", "read_nslices=1_r1", "read_nslices=2_r1"
    assert out.dependencies == {prep: [], r1: [f"afterok:<{prep}>"], r2: [f"afterok:<{prep}>", f"afterany:<{r1}>"]}
    for r in plan.all:
        assert (r.dir / "run.sh").is_file() and json.loads((r.dir / "run.json").read_text())["name"] == r.name
        assert not (r.dir / "submit.json").exists()


def test_missing_scheduler_command_stops_before_anything(tmp_path):
    plan = make_plan(spec_from_dict(SPEC), sweep_dir=tmp_path / "sw", python="py")
    env_path = os.environ["PATH"]
    try:
        os.environ["PATH"] = str(tmp_path)  # no bsub here
        with pytest.raises(DependencyMissing, match="'bsub' not found"):
            submit(plan, scheduler="lsf")
    finally:
        os.environ["PATH"] = env_path
    assert not (tmp_path / "sw").exists()
    spec = tmp_path / "s.toml"
    spec.write_text('[sweep]\nworkload = "read"\n[params]\npath = "x.zarr"\n')
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "PATH": str(Path(sys.executable).parent)}
    p = subprocess.run([sys.executable, "-m", "iodiag", "sweep", "submit", str(spec), "--scheduler", "pbs"],
                       env=env, capture_output=True, text=True, cwd=tmp_path)
    assert p.returncode == 10 and "'qsub' not found" in p.stderr and "nothing was submitted" in p.stderr
    assert "Traceback" not in p.stderr and not (tmp_path / "sweeps").exists()


def test_one_writer_per_sweep_folder(tmp_path):
    import fcntl

    from iodiag.errors import JobStoreError

    plan = make_plan(spec_from_dict(SPEC), sweep_dir=tmp_path / "sw", python="py")
    (tmp_path / "sw").mkdir()
    with open(tmp_path / "sw" / ".lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        with pytest.raises(JobStoreError, match="another iodiag sweep"):
            submit(plan, scheduler="slurm", dry_run=True)
    assert submit(plan, scheduler="slurm", dry_run=True).ran  # free again
