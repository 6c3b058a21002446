"""``iodiag run``: one workload -> one job in the store.

:func:`run_job` picks the collector, claims a job folder, builds the
workload's environment (Darshan or embedded collector, Dask capture),
supervises the command (see ``collectors.supervise``) and writes the final
``job.json``: exit code or signal, artefacts, processes seen, processes whose
logs are missing, recovered mmap logs and the ``partial`` flag with reasons;
then the job's metadata snapshot (``meta/snapshot.json``, see ``jobs.snapshot``).

Nothing here prints or exits; the CLI reports :class:`RunResult`.
"""

from __future__ import annotations

import ast
import json
import os
import platform
import re
import secrets
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from .. import __version__
from ..collectors import darshan as dcol
from ..collectors.supervise import RunOutcome, run_supervised
from ..errors import CollectorError, UsageError
from .finalize import LogTimes, finalize_job
from .snapshot import write_snapshot
from .store import JobRecord, create_job

COLLECTORS = ("auto", "darshan", "embedded", "none")
DASK_PRELOAD_VAR = "DASK_DISTRIBUTED__CLIENT__PRELOAD"
DASK_WORKER_PRELOAD_VAR = "DASK_DISTRIBUTED__WORKER__PRELOAD"
DASK_STREAM_VARS = ("DASK_DISTRIBUTED__SCHEDULER__DASHBOARD__STATUS__TASK_STREAM_LENGTH",
                    "DASK_DISTRIBUTED__SCHEDULER__DASHBOARD__TASKS__TASK_STREAM_LENGTH")
TASK_STREAM_LENGTH = 1_000_000
PRELOAD_FILE = Path(__file__).resolve().parents[1] / "collectors" / "dask_capture.py"

# environment variables worth keeping in job.json (never the whole environment: it may hold secrets)
ENV_KEEP = re.compile(
    r"^(DARSHAN_\w+|DXT_\w+|IODIAG_\w+|DASK_\w+|SLURM_(JOB_ID|JOBID|NNODES|NTASKS|CPUS_PER_TASK|JOB_NAME)|"
    r"PBS_JOBID|PBS_JOBNAME|LSB_JOBID|LSB_JOBNAME|COBALT_JOBID|OMP_NUM_THREADS|MKL_NUM_THREADS|"
    r"OPENBLAS_NUM_THREADS|HDF5_\w+|NETCDF_\w+|LD_PRELOAD|LD_LIBRARY_PATH|PYTHONPATH|VIRTUAL_ENV|"
    r"CONDA_PREFIX|TMPDIR|ZARR_\w+)$"
)
SCHEDULER_IDS = ("SLURM_JOB_ID", "PBS_JOBID", "LSB_JOBID", "COBALT_JOBID")


@dataclass
class RunOptions:
    command: Sequence[str]
    collector: str = "auto"
    dxt: bool = False
    name: str | None = None
    darshan_lib: str | None = None
    store: str | None = None
    dask: bool = True
    dask_report: bool = False  # the performance report HTML (opt-in: 1-3 s at client close, see benchmarks/README.md)
    settings: dcol.DarshanSettings = field(default_factory=dcol.DarshanSettings)
    grace_s: float = 10.0
    tick_s: float = 1.0
    max_records: int | None = None  # --max-records as given (None: each collector's default)
    mmap_dir: str | None = None  # where Darshan's mmap logs go while the run lasts (default: node-local temp)
    # the file names in Darshan logs (darshan-util's reader, given by the caller: jobs/ does not import the
    # analyzers); without it a Darshan job's snapshot holds the mount table only
    log_names: Callable[[Sequence[str]], Iterable[str]] | None = None
    # when each Darshan log's image ran (darshan-util's reader of job records, given by the caller likewise): tells
    # the images exec replaced when the process watch missed them; without it only the watch's evidence counts
    log_times: LogTimes | None = None


@dataclass
class RunResult:
    record: JobRecord
    outcome: RunOutcome
    notes: list[str] = field(default_factory=list)  # what the CLI should tell the user


def resolve_command(command: Sequence[str]) -> list[str]:
    """``convert.py args`` runs with this Python; anything else runs as given."""
    argv = [a for a in command]
    if argv and argv[0] == "--":
        argv = argv[1:]
    if not argv:
        raise UsageError("no command to run", hint="usage: iodiag run [OPTIONS] script.py [ARGS] or iodiag run -- ./app [ARGS]")
    first = argv[0]
    if first.endswith(".py"):
        if not Path(first).is_file():
            raise UsageError(f"{first}: no such script", hint="check the path (relative to the current folder)")
        return [sys.executable, *argv]
    if "/" not in first and shutil.which(first) is None:
        raise UsageError(f"{first}: command not found on PATH", hint="give a path (./app) or a script ending in .py")
    return argv


PYTHON_VALUE_OPTIONS = ("-W", "-X", "--check-hash-based-pycs")  # options whose value is the next word


def _job_name(argv: Sequence[str], name: str | None) -> str:
    if name:
        return name
    python, skip = False, False
    for a in argv:
        if skip:  # the value of an interpreter option (python -W ignore script.py)
            skip = False
            continue
        base = os.path.basename(a)
        if base.startswith("python") or base in ("env", "bash", "sh"):
            python = python or base.startswith("python")
            continue
        if a.startswith("-"):
            skip = python and a in PYTHON_VALUE_OPTIONS
            continue
        return base
    return os.path.basename(argv[0])


def _with_preload(env: Mapping[str, str], var: str) -> str:
    """``var``'s preload list with the capture file appended (the user's own preloads kept first)."""
    preload = [str(PRELOAD_FILE)]
    old = env.get(var)
    if old:
        try:
            val = ast.literal_eval(old)
        except (ValueError, SyntaxError):
            val = old
        olds = [val] if isinstance(val, str) else [str(v) for v in val]
        preload = [v for v in olds if v != str(PRELOAD_FILE)] + preload
    return json.dumps(preload)


def _dask_env(env: Mapping[str, str], dask_dir: Path, *, report: bool = False) -> dict[str, str]:
    # the client preload captures the task stream; the same file as a worker preload logs each worker's clock
    # offset estimate (see dask_capture._record_delays)
    out = {DASK_PRELOAD_VAR: _with_preload(env, DASK_PRELOAD_VAR),
           DASK_WORKER_PRELOAD_VAR: _with_preload(env, DASK_WORKER_PRELOAD_VAR),
           "IODIAG_DASK_DIR": str(dask_dir), "IODIAG_DASK_REPORT": "1" if report else "0"}
    for var in DASK_STREAM_VARS:
        out[var] = str(max(TASK_STREAM_LENGTH, int(env.get(var, "0") or 0) if str(env.get(var, "0")).isdigit() else 0))
    return out


def _embedded():
    try:
        from ..collectors import embedded  # noqa: PLC0415  (built on its own branch)
    except ImportError:
        return None
    if not hasattr(embedded, "prepare"):
        return None
    return embedded


def choose_collector(opts: RunOptions, env: Mapping[str, str]) -> tuple[str, Any, list[str]]:
    """-> (collector name, runtime object or module, notes)."""
    notes: list[str] = []
    if opts.collector not in COLLECTORS:
        raise UsageError(f"--collector {opts.collector}: unknown collector", hint="choose auto, darshan, embedded or none")
    if opts.collector == "none":
        return "none", None, notes
    if opts.collector == "darshan":
        return "darshan", dcol.find_runtime(opts.darshan_lib, env=env), notes
    if opts.collector == "embedded":
        mod = _embedded()
        if mod is None:
            raise CollectorError("the embedded collector is not available in this iodiag",
                                 hint="use --collector darshan with a Darshan runtime, or --collector none for Dask capture only")
        return "embedded", mod, notes
    # auto
    try:
        return "darshan", dcol.find_runtime(opts.darshan_lib, env=env), notes
    except CollectorError as exc:
        if opts.darshan_lib:
            raise
        reason = exc.message
    mod = _embedded()
    if mod is not None:
        notes.append("no Darshan runtime found; using the embedded collector")
        return "embedded", mod, notes
    notes.append("no Darshan runtime found and the embedded collector is not available: "
                 "running with Dask capture only (no file-level I/O data)")
    notes.append(reason)
    return "none", None, notes


def _versions(collector: str, runtime: Any) -> dict[str, Any]:
    v: dict[str, Any] = {"iodiag": __version__, "python": platform.python_version(), "platform": platform.platform()}
    if collector == "darshan" and runtime is not None:
        v["darshan_runtime"] = runtime.version
    elif collector == "embedded" and runtime is not None:
        try:
            v["embedded"] = runtime.version()
        except Exception:  # noqa: BLE001 - a version string is not worth failing the run
            v["embedded"] = None
    return v


def run_job(opts: RunOptions, *, env: Mapping[str, str] | None = None, cwd: str | None = None) -> RunResult:
    """Run the workload under the chosen collector and store it as a job (see module docstring)."""
    base_env = dict(os.environ if env is None else env)
    argv = resolve_command(opts.command)
    collector, runtime, notes = choose_collector(opts, base_env)
    name = _job_name(list(opts.command), opts.name)
    cwd = cwd or os.getcwd()
    record = create_job(name=name, root=opts.store, record={
        "command": argv, "cwd": cwd, "collector": collector, "dxt": bool(opts.dxt), "dask_capture": bool(opts.dask),
        "user": _user(), "versions": _versions(collector, runtime), "notes": list(notes),
        "scheduler_job": {k: base_env[k] for k in SCHEDULER_IDS if base_env.get(k)},
    })
    try:
        return _run_in(record, opts, argv, collector, runtime, notes, base_env, cwd)
    except BaseException as exc:  # the job never ran (or iodiag itself broke): say so in the record
        if record.data.get("status") == "running":
            try:
                record.update(status="failed", partial=True,
                              partial_reasons=[f"iodiag could not run the workload: {exc}"], end_s=time.time())
            except Exception:  # noqa: BLE001 - keep the original error
                pass
        raise


def _run_in(record: JobRecord, opts: RunOptions, argv: list[str], collector: str, runtime: Any, notes: list[str],
            base_env: dict[str, str], cwd: str) -> RunResult:
    folder = record.folder
    child_env = dict(base_env)
    watch = None
    darshan_jobid = None
    if collector == "darshan":
        darshan_jobid = secrets.randbelow(2**31 - 2) + 1
        for var in dcol.REMOVE_VARS:
            child_env.pop(var, None)
        watch = Path(opts.mmap_dir or tempfile.gettempdir()) / f"iodiag-mmap-{record.id}"
        child_env.update(dcol.darshan_environment(runtime, job_dir=folder, darshan_jobid=darshan_jobid, dxt=opts.dxt,
                                                  settings=opts.settings, env=base_env,
                                                  extra_exclude=[str(PRELOAD_FILE.parent)], mmap_dir=watch))
        record.data["darshan"] = {**runtime.to_dict(), "jobid": darshan_jobid, "config": "darshan.conf",
                                  "mmap_dir": str(watch),
                                  "settings": opts.settings.__dict__ if hasattr(opts.settings, "__dict__") else {}}
    elif collector == "embedded":
        traces = folder / "traces"
        traces.mkdir(exist_ok=True)
        # the embedded collector's own default cap unless the user gave --max-records
        # like Darshan's NAME_EXCLUDE above: iodiag's own job folder (task-stream capture) and capture code are not the workload's I/O
        own = [str(folder).rstrip("/") + "/", str(PRELOAD_FILE.parent).rstrip("/") + "/"]
        exclude = runtime.default_excludes() + [p for p in own if ":" not in p]
        child_env.update({k: str(v) for k, v in runtime.prepare(traces, max_records=opts.max_records, exclude=exclude).items()})
    if opts.dask:
        dask_dir = folder / "dask"
        dask_dir.mkdir(exist_ok=True)
        child_env.update(_dask_env(base_env, dask_dir, report=opts.dask_report))
    child_env["IODIAG_JOB_ID"] = record.id
    child_env["IODIAG_JOB_DIR"] = str(folder)
    record.data["env"] = {k: v for k, v in sorted(child_env.items()) if ENV_KEEP.match(k)}
    record.save()

    outcome = run_supervised(argv, env=child_env, cwd=cwd, watch_folder=watch, tick_s=opts.tick_s, grace_s=opts.grace_s)
    finalize_job(record, outcome, collector=collector, darshan_jobid=darshan_jobid, log_times=opts.log_times)
    write_snapshot(record, log_names=opts.log_names)  # array metadata, mounts, layouts: the report reads the job only
    return RunResult(record=record, outcome=outcome, notes=notes + record.data.get("run_notes", []))


def _user() -> str:
    try:
        import pwd

        return pwd.getpwuid(os.getuid()).pw_name
    except Exception:  # noqa: BLE001
        return os.environ.get("USER", "")
