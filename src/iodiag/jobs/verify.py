"""``iodiag verify``: re-run a recorded workload as it was and with changed settings, interleaved, and measure.

A job recorded by ``iodiag run`` keeps its command, working folder and the environment variables that matter
(``job.json``).  :func:`plan_verify` turns that command plus plain settings into the two commands to compare:
command-line flags (only those on the recorded command line, or in an iodiag workload's PARAMS: the program is
never run to ask it), positional values (``argv[N]``), environment variables, MPI-IO hints (a ROMIO hints file
and ``MPICH_MPIIO_HINTS``), xarray/Dask/Zarr settings applied inside an unmodified Python program by the
``collectors/verify_site`` preload, an explicit changed command, and shell commands to run once before (e.g.
making a rechunked copy of a store).  :func:`run_verify` checks every output path, then runs them A B A B ...
(``reps`` each, so drifting load hits both alike), times each run (wall seconds, CPU seconds of the process
tree, and the workload's own timed section when it writes an iodiag results record), and :func:`speedup_band`
turns paired runs into a speedup with a confidence band against the run-to-run noise.

This module knows nothing of recommendations: it takes settings as data.  Runs go without a collector (no
Darshan, no Dask capture), so what is measured is the workload, not the instrumentation.  Outputs a known iodiag
workload writes (``--dst``/``--out``) go to scratch paths next to the original (same file system) and are removed
afterwards; a foreign script's outputs are rewritten as the script decides (said in the notes).  The program is
executed for the timed runs and for nothing else.  Nothing here prints; ``progress`` is called after each run.
"""

from __future__ import annotations

import json
import math
import os
import re
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from ..errors import UsageError
from .store import JobRecord

SCHEMA = "iodiag.verify/1"
MIN_REPS = 2
OUTPUT_PARAMS = ("dst", "out")  # iodiag workload parameters naming what the run writes
SITE_DIR = Path(__file__).resolve().parents[1] / "collectors" / "verify_site"  # its sitecustomize.py: the preload
OVERRIDES_VAR, RECORD_VAR = "IODIAG_VERIFY_OVERRIDES", "IODIAG_VERIFY_RECORD"
# settings the preload applies inside a Python program (see collectors/verify_site/sitecustomize.py)
PRELOAD_SETTINGS = ("chunks", "workers", "threads", "compressor", "zarr_format", "open_once")
PRELOAD_WHERE = {"chunks": "xarray open_dataset/open_mfdataset (with chunks)/open_zarr, Dataset.chunk, to_zarr",
                 "workers": "distributed.LocalCluster (Client() without an address)",
                 "threads": "distributed.LocalCluster (Client() without an address)",
                 "compressor": "Dataset.to_zarr", "zarr_format": "Dataset.to_zarr",
                 "paths": "xarray open_dataset/open_mfdataset/open_zarr",
                 "open_once": "netCDF4.Dataset / h5py.File opened again (r, a, r+)"}
ARRAY_FILE = re.compile(r"\.(nc|nc4|cdf|netcdf|h5|hdf5|he5|hdf)$", re.I)  # files open_once keeps open (netCDF4/h5py)
_DROP_ENV = re.compile(r"^(DARSHAN_\w+|DXT_\w+|IODIAG_\w+|LD_PRELOAD|DASK_DISTRIBUTED__CLIENT__PRELOAD|"
                       r"DASK_DISTRIBUTED__SCHEDULER__DASHBOARD__\w+)$")
_DATA_PATH = re.compile(r"(/|\.(zarr|nc|nc4|h5|hdf5|he5|grib2?|bin|dat|out|csv|json|txt|html|png|npy|npz|parquet))$",
                       re.I)
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
         2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)


@dataclass(frozen=True)
class WorkloadCommand:
    """A recorded command, read as a workload with parameters."""

    argv: tuple[str, ...]
    cwd: str
    env: Mapping[str, str]  # recorded variables worth re-applying (collector variables dropped)
    workload: str | None  # "convert" / "read" / "gen" for iodiag's own workloads, else None
    params: Mapping[str, Any]  # parameter name -> value as the command line gave it
    start: int  # index in argv where the workload's own arguments start


def _iodiag_workload(argv: Sequence[str]) -> tuple[str | None, int]:
    """("convert", index of its first argument) for ``python -m iodiag.workloads.convert ...`` or
    ``iodiag workload convert ...``; (None, index after the program) otherwise."""
    for i, a in enumerate(argv):
        if a == "-m" and i + 1 < len(argv) and argv[i + 1].startswith("iodiag.workloads."):
            return argv[i + 1].rsplit(".", 1)[-1], i + 2
        if a == "workload" and i + 1 < len(argv) and i > 0 and "iodiag" in argv[i - 1]:
            return argv[i + 1], i + 2
    # python script.py args / ./app args: the arguments start after the script (or the program)
    for i, a in enumerate(argv):
        if a.endswith(".py"):
            return None, i + 1
    return None, 1


def parse_params(argv: Sequence[str]) -> tuple[str | None, dict[str, Any], int]:
    """(workload, parameters, start) of a command line: ``--name value`` / ``--name=value`` / ``--flag``."""
    workload, start = _iodiag_workload(argv)
    params: dict[str, Any] = {}
    args = list(argv[start:])
    i = 0
    while i < len(args):
        a = args[i]
        if a.startswith("--") and len(a) > 2:
            if "=" in a:
                k, v = a[2:].split("=", 1)
                params[k.replace("-", "_")] = v
            elif i + 1 < len(args) and not args[i + 1].startswith("--"):
                params[a[2:].replace("-", "_")] = args[i + 1]
                i += 1
            else:
                params[a[2:].replace("-", "_")] = True
        i += 1
    return workload, params, start


def command_of(record: JobRecord) -> WorkloadCommand:
    """The job's command as a workload; a job without a recorded command is a usage error."""
    argv = record.data.get("command") or []
    if not argv:
        raise UsageError(f"job {record.id} has no recorded command ({record.path / 'job.json'})",
                         hint="verify re-runs a workload recorded by `iodiag run`; run it that way first")
    env = {k: str(v) for k, v in (record.data.get("env") or {}).items() if not _DROP_ENV.match(k)}
    workload, params, start = parse_params(argv)
    return WorkloadCommand(tuple(argv), str(record.data.get("cwd") or os.getcwd()), env, workload, params, start)


def _params_of(workload: str) -> tuple:
    """The PARAMS of an iodiag workload (empty when there is no such workload)."""
    import importlib

    try:
        mod = importlib.import_module(f"iodiag.workloads.{workload}")
    except ImportError:
        return ()
    return tuple(getattr(mod, "PARAMS", ()))


def known_flags(workload: str) -> dict[str, str]:
    """flag -> parameter name of an iodiag workload (its PARAMS)."""
    return {p.flag: p.name for p in _params_of(workload)}


def _replaced_flags(workload: str) -> dict[str, tuple[str, ...]]:
    """flag -> the flags it replaces (``--chunk-mb`` replaces ``--chunks``: the workload takes one, not both)."""
    return {p.flag: tuple("--" + n.replace("_", "-") for n in p.instead_of) for p in _params_of(workload)}


def _without_flag(argv: list[str], start: int, flag: str) -> list[str]:
    """``argv`` with ``flag`` (``--flag value`` or ``--flag=value``) taken out after position ``start``."""
    out = list(argv[:start])
    i = start
    while i < len(argv):
        a = argv[i]
        if a == flag:
            i += 2 if i + 1 < len(argv) and not argv[i + 1].startswith("--") else 1
            continue
        if not a.startswith(flag + "="):
            out.append(a)
        i += 1
    return out


def _with_flag(argv: list[str], start: int, flag: str, value: Any) -> list[str]:
    out = list(argv)
    for i in range(start, len(out)):
        if out[i] == flag:
            if value is True:
                return out
            if i + 1 < len(out) and not out[i + 1].startswith("--"):
                out[i + 1] = str(value)
            else:
                out.insert(i + 1, str(value))
            return out
        if out[i].startswith(flag + "="):
            out[i] = f"{flag}={value}"
            return out
    return out + ([flag] if value is True else [flag, str(value)])


def is_python(cmd: WorkloadCommand) -> bool:
    """Whether the program is a Python interpreter (the preload can apply settings inside it)."""
    head = cmd.argv[: max(cmd.start, 1)]
    return any(os.path.basename(a).startswith("python") or a.endswith(".py") or a == "-m" for a in head)


def parse_value(name: str, text: Any) -> Any:
    """A preload setting's value from its text: ``chunks`` ``24,10,90,180`` (a list, matched to the dims in the
    program) or ``time=24,plev=10`` (a mapping); ``workers``/``threads``/``zarr_format`` integers; ``open_once``
    ``1`` (every file the program opens again through netCDF4/h5py) or a file's path (that file only)."""
    if not isinstance(text, str):
        if name == "chunks" and isinstance(text, (list, tuple)):
            return [int(x) for x in text]
        return text
    if name == "open_once":
        t = text.strip()
        if t.lower() in ("1", "true", "yes", "on"):
            return True
        if not t or t.lower() in ("0", "false", "no", "off"):
            raise UsageError(f"open_once={text}: nothing to apply",
                             hint="open_once=1 (every NetCDF/HDF5 file opened again) or open_once=PATH (that file)")
        return t
    t = text.strip().strip("()[]{}")
    try:
        if name == "chunks":
            if "=" in t or ":" in t:
                pairs = [p.replace(":", "=").split("=", 1) for p in t.split(",") if p.strip()]
                return {k.strip().strip("'\""): int(v) for k, v in pairs}
            return [int(x) for x in t.split(",") if x.strip()]
        if name in ("workers", "threads", "zarr_format"):
            return int(t)
    except ValueError:
        raise UsageError(f"{name}={text}: not a valid value",
                         hint="chunks=24,10,90,180 or chunks=time=24,plev=10; workers, threads, zarr_format: integers")\
            from None
    return t


@dataclass
class VerifyPlan:
    job: str
    before: list[str]
    after: list[str]
    cwd: str
    env_before: dict[str, str]
    env_after: dict[str, str]
    prepare: list[str]  # shell commands run once before the timed runs
    scratch: list[Path]  # outputs to remove afterwards
    results_record: bool  # the workload writes an iodiag results record (its own timed section)
    notes: list[str] = field(default_factory=list)
    overrides: dict[str, Any] = field(default_factory=dict)  # preload settings of the after runs
    hints: dict[str, str] = field(default_factory=dict)  # MPI-IO hints of the after runs
    outputs: list[Path] = field(default_factory=list)  # every path verify or its runs write, checked first
    changed: list[str] = field(default_factory=list)  # what the after command changes, as words ("--chunks", "argv[3]")
    direct: bool = True  # something besides the preload's settings changes (flags, argv, env, hints, a layout)


def plan_verify(cmd: WorkloadCommand, *, job: str, args: Mapping[str, Any] | None = None,
                env: Mapping[str, str] | None = None, prepare: Sequence[str] = (),
                base_env: Mapping[str, str] | None = None, overrides: Mapping[str, Any] | None = None,
                positional: Mapping[int, str] | None = None, after: Sequence[str] | None = None,
                hints: Mapping[str, Any] | None = None, outputs: Sequence[str | Path] = ()) -> VerifyPlan:
    """The two commands to compare.  ``args``: flag -> value (``{"--chunks": "24,10,90,180"}``); ``env``:
    variable -> value; ``overrides``: preload settings (``{"chunks": [24, 10, 90, 180], "workers": 1, "paths":
    {old: new}}``); ``positional``: N -> value replacing the program's ``argv[N]`` (``sys.argv[N]`` of a Python
    script); ``after``: the whole changed command; ``hints``: MPI-IO hints; ``prepare``: shell commands run once,
    before the timed runs; ``outputs``: more paths to check before the first run (an HTML page).  Flags come from
    the recorded command line only (an iodiag workload: its PARAMS): a flag it does not show is a usage error."""
    args, env, overrides = dict(args or {}), dict(env or {}), dict(overrides or {})
    positional, hints = dict(positional or {}), {k: str(v) for k, v in (hints or {}).items()}
    if not (args or env or overrides or positional or after or hints):
        raise UsageError(f"nothing to verify for job {job}: no setting to change",
                         hint="give --set name=value, --arg N=VALUE or --after 'COMMAND'")
    if after is not None and (args or positional):
        raise UsageError("--after gives the whole changed command: it does not combine with flags or --arg",
                         hint="put the changed flags and arguments into the --after command itself")
    base = {k: v for k, v in (base_env if base_env is not None else os.environ).items() if not _DROP_ENV.match(k)}
    base.update(cmd.env)
    before = list(cmd.argv)
    known = known_flags(cmd.workload) if cmd.workload else {}
    _check_flags(cmd, job, args, known)
    if overrides and not is_python(cmd):
        raise UsageError(f"{', '.join(overrides)}: settings applied inside a Python program, and "
                         f"{cmd.argv[0]} is not one",
                         hint="give the changed command with --after '...' or an environment variable")
    after_argv, changed = _after_argv(cmd, before, args, positional, after)
    before, after_argv, scratch, notes = _scratch_copies(cmd, known, before, after_argv, after)
    env_before, env_after, overrides = _run_envs(base, env, overrides, hints, changed, notes)
    outs = _outputs_to_check(cmd, scratch, outputs, prepare, before, after_argv)
    return VerifyPlan(job=job, before=before, after=after_argv, cwd=cmd.cwd, env_before=env_before,
                      env_after=env_after, prepare=list(prepare), scratch=scratch,
                      results_record=cmd.workload is not None and after is None, notes=notes, overrides=overrides,
                      hints=hints, outputs=outs, changed=changed,
                      direct=bool(args or env or positional or after is not None or hints or prepare))


def _check_flags(cmd: WorkloadCommand, job: str, args: Mapping[str, Any], known: Mapping[str, Any]) -> None:
    """Every flag to change is one the program takes: an iodiag workload's own (its PARAMS), else one on the
    recorded command line (verify never runs the program to ask it)."""
    for flag in args:
        if not flag.startswith("--"):
            raise UsageError(f"setting {flag!r} is not a command-line flag", hint="flags start with --, e.g. --chunks")
        name = flag[2:].replace("-", "_")
        if cmd.workload:
            if flag not in known:
                raise UsageError(f"the workload iodiag.workloads.{cmd.workload} takes no {flag}",
                                 hint="its flags: " + " ".join(sorted(known)))
        elif name not in cmd.params:
            raise UsageError(f"{flag} is not on the recorded command line of job {job} ({shlex.join(cmd.argv)}); "
                             "verify takes flags from that line only and never runs the program to ask it",
                             hint="give the changed command with --after '...', a positional value with --arg "
                                  "N=VALUE" + (", or an xarray/Dask setting (" + ", ".join(PRELOAD_SETTINGS) +
                                               ") that applies inside the program" if is_python(cmd) else ""))


def _after_argv(cmd: WorkloadCommand, before: list[str], args: Mapping[str, Any], positional: Mapping[int, str],
                after: Sequence[str] | None) -> tuple[list[str], list[str]]:
    """The changed command (the one given with --after, or the recorded one with the flags and argv[N] values
    replaced) and what it changes, as words."""
    changed: list[str] = []
    if after is not None:
        after_argv = list(after)
        if not after_argv:
            raise UsageError("--after '': an empty command", hint="give the whole changed command")
        changed.append("the command given with --after")
        return after_argv, changed
    after_argv = list(before)
    replaced = _replaced_flags(cmd.workload) if cmd.workload else {}
    for flag, value in args.items():
        for other in replaced.get(flag, ()):  # e.g. --chunk-mb 64 on a job recorded with --chunks 1,1,90,180
            if other not in args:
                after_argv = _without_flag(after_argv, cmd.start, other)
        after_argv = _with_flag(after_argv, cmd.start, flag, value)
        changed.append(flag)
    zero = max(cmd.start - 1, 0)  # where the program's own argv[0] is in the recorded command
    for n, value in sorted(positional.items()):
        if n < 1 or zero + n >= len(before):
            raise UsageError(f"--arg {n}={value}: the program's arguments are argv[1]..argv[{len(before) - 1 - zero}]"
                             f" ({shlex.join(before[zero + 1:]) or 'none'})",
                             hint="argv[N] counts as the program sees it: argv[1] is its first argument")
        after_argv[zero + n] = str(value)
        changed.append(f"argv[{n}] {before[zero + n]!r} -> {value!r}")
    return after_argv, changed


def _scratch_copies(cmd: WorkloadCommand, known: Mapping[str, Any], before: list[str], after_argv: list[str],
                    after: Sequence[str] | None) -> tuple[list[str], list[str], list[Path], list[str]]:
    """An iodiag workload's outputs redirected to scratch copies (before, after, the copies, notes saying so);
    any other program re-runs as recorded."""
    scratch: list[Path] = []
    notes: list[str] = []
    if cmd.workload and after is None:
        for name in OUTPUT_PARAMS:
            flag = "--" + name
            if name in cmd.params and flag in known:
                orig = Path(cmd.cwd, str(cmd.params[name]))
                a, b = (orig.with_name(orig.name + f".verify-{s}{orig.suffix}") for s in ("before", "after"))
                before, after_argv = (_with_flag(before, cmd.start, flag, str(a)),
                                      _with_flag(after_argv, cmd.start, flag, str(b)))
                scratch += [a, b]
                notes.append(f"the runs write {flag} to scratch copies next to {orig} (removed afterwards)")
    else:
        notes.append("the runs re-execute the program as recorded: files it writes are rewritten by each run")
    return before, after_argv, scratch, notes


def _run_envs(base: Mapping[str, str], env: Mapping[str, str], overrides: dict[str, Any], hints: Mapping[str, str],
              changed: list[str], notes: list[str]) -> tuple[dict[str, str], dict[str, str], dict[str, Any]]:
    """The before and after runs' environments (the after side's variables, preload settings and MPI-IO hints)
    and the parsed preload settings; ``changed`` and ``notes`` grow with what they change."""
    env_after = {**base, **{k: str(v) for k, v in env.items()}}
    changed += [f"{k}={v}" for k, v in env.items()]
    env_before = dict(base)
    if overrides:
        overrides = {k: parse_value(k, v) for k, v in overrides.items()}
        # the preload's folder on PYTHONPATH of both sides (the same start-up); the settings on the after side only
        for e in (env_before, env_after):
            e["PYTHONPATH"] = str(SITE_DIR) + (os.pathsep + e["PYTHONPATH"] if e.get("PYTHONPATH") else "")
        env_after[OVERRIDES_VAR] = json.dumps(overrides)
        notes.append(f"settings applied inside the program by iodiag's preload: {SITE_DIR} first on PYTHONPATH of "
                     f"both sides (the same start-up), the settings in {OVERRIDES_VAR} of the after side; the "
                     "program itself is not edited")
        changed += [f"{k} (set inside the program at {PRELOAD_WHERE.get(k, k)})" for k in overrides]
    if hints:
        env_after["MPICH_MPIIO_HINTS"] = "*:" + ":".join(f"{k}={v}" for k, v in hints.items())
        changed.append("MPI-IO hints " + ", ".join(f"{k}={v}" for k, v in hints.items()))
        notes.append("MPI-IO hints are given through ROMIO_HINTS (a hints file, ROMIO/MPICH/Open MPI's ROMIO) and "
                     "MPICH_MPIIO_HINTS (Cray MPICH); whether the MPI library took them is not observed "
                     "(MPICH_MPIIO_HINTS_DISPLAY=1 prints them on Cray)")
    return env_before, env_after, overrides


def _outputs_to_check(cmd: WorkloadCommand, scratch: list[Path], outputs: Sequence[str | Path],
                      prepare: Sequence[str], before: list[str], after_argv: list[str]) -> list[Path]:
    """Every path the verify or its runs are likely to write (check_outputs checks them before the first run)."""
    outs = list(scratch) + [Path(cmd.cwd, str(o)) for o in outputs]
    # the program's own outputs are its business, but an argument naming a path that does not exist yet is one it
    # is likely to create: its folder must be writable (checked now, not after the first runs)
    for a in dict.fromkeys(before[max(cmd.start - 1, 1):] + after_argv[max(cmd.start - 1, 1):]):
        if _DATA_PATH.search(a) and not a.startswith("-") and "=" not in a and not Path(cmd.cwd, a).exists():
            outs.append(Path(cmd.cwd, a))
    for o in outputs:
        if Path(cmd.cwd, str(o)).is_dir():
            raise UsageError(f"{o}: is a folder, not a file to write", hint="give a file name, e.g. verify.html")
    for p in prepare:
        m = re.search(r"--dst\s+(\S+)", p)
        if m:
            outs.append(Path(cmd.cwd, m.group(1)))
    return outs


def check_outputs(plan: VerifyPlan) -> None:
    """Every path the verify writes, checked before anything runs: its folder exists and is writable, and it is
    not a folder where a file is meant (or the other way round: the scratch stores are folders or files alike)."""
    if not os.path.isdir(plan.cwd):
        raise UsageError(f"the job's working folder {plan.cwd} does not exist any more",
                         hint="verify re-runs the command where it ran; recreate the folder or run the job again")
    for p in plan.outputs:
        parent = p.parent
        while not parent.exists() and parent != parent.parent:  # a folder the program makes itself
            parent = parent.parent
        if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
            raise UsageError(f"{p}: cannot write there ({parent} is not a writable folder)",
                             hint="check the permissions, or run verify where the job's outputs can be written")
    tmp = Path(tempfile.gettempdir())
    if not os.access(tmp, os.W_OK | os.X_OK):
        raise UsageError(f"{tmp}: the temporary folder is not writable (verify keeps its run log there)",
                         hint="set TMPDIR to a writable folder")


@dataclass
class Run:
    side: str  # "before" / "after"
    rep: int
    wall_s: float
    cpu_s: float
    workload_s: float | None
    exit_code: int

    def to_dict(self) -> dict[str, Any]:
        return {"side": self.side, "rep": self.rep, "wall_s": round(self.wall_s, 6), "cpu_s": round(self.cpu_s, 6),
                "workload_s": None if self.workload_s is None else round(self.workload_s, 6),
                "exit_code": self.exit_code}


def _workload_seconds(path: Path) -> float | None:
    """The workload's own timed section from its results record: convert/gen ``timings_s.total``, read the sum
    of its patterns' median seconds."""
    try:
        rec = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    t = (rec.get("timings_s") or {}).get("total")
    if t is not None:
        return float(t)
    pats = rec.get("patterns") or {}
    vals = [p.get("total_s") for p in pats.values() if isinstance(p, dict) and p.get("total_s") is not None]
    return float(sum(vals)) if vals else None


def _run_once(argv: list[str], cwd: str, env: dict[str, str], results: Path | None, timeout_s: float,
              log: Path) -> tuple[float, float, float | None, int]:
    env = dict(env)
    if results is not None:
        results.unlink(missing_ok=True)
        env["IODIAG_RESULTS"] = str(results)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    with open(log, "ab") as out:
        try:
            p = subprocess.run(argv, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, timeout=timeout_s,
                               check=False)
            code = p.returncode
        except subprocess.TimeoutExpired:
            code = -9
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, _workload_seconds(results) if results is not None and code == 0 else None, code


@dataclass
class VerifyRuns:
    plan: VerifyPlan
    runs: list[Run]
    prepare_s: list[float]
    log: str
    applied: list[list[dict[str, Any]]] = field(default_factory=list)  # per after run: what the preload recorded


def _read_record(path: Path) -> list[dict[str, Any]]:
    out = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return out
    for line in lines:
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


def run_verify(plan: VerifyPlan, *, reps: int = 5, timeout_s: float = 3600.0,
               progress: Callable[[int, int], None] | None = None) -> VerifyRuns:
    """Check every output path, prepare once, then run before/after interleaved ``reps`` times each (the only
    times the program is executed); a failed run stops with an error naming the command and the log of its
    output."""
    if reps < MIN_REPS:
        raise UsageError(f"--reps {reps}: at least {MIN_REPS} repetitions per side are needed for a band",
                         hint="use --reps 5 or more")
    check_outputs(plan)
    work = Path(tempfile.mkdtemp(prefix="iodiag-verify-"))
    log = work / "runs.log"
    if plan.hints:
        hints_file = work / "romio-hints"
        hints_file.write_text("".join(f"{k} {v}\n" for k, v in plan.hints.items()))
        plan.env_after["ROMIO_HINTS"] = str(hints_file)
    prep_s = []
    applied: list[list[dict[str, Any]]] = []
    try:
        for cmd in plan.prepare:
            if cmd.startswith("iodiag "):  # the iodiag of this Python, whatever is on PATH
                cmd = shlex.quote(sys.executable) + " -m iodiag " + cmd[len("iodiag "):]
            t0 = time.perf_counter()
            with open(log, "ab") as out:
                p = subprocess.run(cmd, shell=True, cwd=plan.cwd, env=plan.env_before, stdout=out,
                                   stderr=subprocess.STDOUT, timeout=timeout_s, check=False)
            prep_s.append(time.perf_counter() - t0)
            if p.returncode:
                raise UsageError(f"preparing the changed layout failed (exit {p.returncode}): {cmd}",
                                 hint=f"see {log}")
        runs: list[Run] = []
        total = 2 * reps
        for i in range(reps):
            for side, argv, env in (("before", plan.before, plan.env_before), ("after", plan.after, plan.env_after)):
                res = work / f"{side}-{i}.json" if plan.results_record else None
                record = work / f"applied-{i}.jsonl"
                if side == "after" and plan.overrides:
                    env = {**env, RECORD_VAR: str(record)}
                wall, cpu, wl, code = _run_once(argv, plan.cwd, env, res, timeout_s, log)
                if code != 0:
                    raise UsageError(f"the {side} run {i + 1} of job {plan.job} failed (exit {code}): "
                                     f"{shlex.join(argv)}", hint=f"its output is in {log}")
                runs.append(Run(side, i, wall, cpu, wl, code))
                if side == "after" and plan.overrides:
                    applied.append(_read_record(record))
                if progress is not None:
                    progress(len(runs), total)
        return VerifyRuns(plan, runs, prep_s, str(log), applied)
    finally:
        for p in plan.scratch:
            shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink(missing_ok=True)


def applied_overrides(runs: VerifyRuns) -> tuple[list[dict[str, Any]], list[str], list[str]]:
    """(what fired: setting, where, value, asked, runs it fired in), settings that never fired, notes."""
    want = list(runs.plan.overrides)
    if not want:
        return [], [], []
    n = len(runs.applied)
    seen: dict[tuple[str, str], dict[str, Any]] = {}
    loaded, errors = 0, []
    for i, recs in enumerate(runs.applied):
        loaded += any(r.get("event") == "loaded" for r in recs)
        errors += [r["error"] for r in recs if r.get("event") == "error" and r.get("error") not in errors]
        for r in recs:
            if "setting" not in r:
                continue
            key = (r["setting"], r.get("where", "?"))
            e = seen.setdefault(key, {"setting": r["setting"], "where": r.get("where"), "value": r.get("value"),
                                      "asked": r.get("asked"), "runs": set()})
            e["runs"].add(i)
        # open_once's counts are written at exit: a run that ended without exit handlers (os._exit) only left
        # the event of its first re-open
        if not any(r.get("setting") == "open_once" for r in recs):
            for r in recs:
                if r.get("event") == "open_once":
                    e = seen.setdefault(("open_once", r.get("where", "?")), {
                        "setting": "open_once", "where": r.get("where"), "asked": None, "runs": set(),
                        "value": f"{os.path.basename(str(r.get('path')))} kept open (the counts were not recorded: "
                                 "the program ended without running its exit handlers)"})
                    e["runs"].add(i)
    fired = [{**e, "runs": len(e["runs"])} for e in seen.values()]
    missing = [k for k in want if not any(f["setting"] == k for f in fired)]
    notes = []
    if loaded < n:
        notes.append(f"the preload loaded in {loaded} of {n} after runs (python -I/-E or -S ignore it)")
    for f in fired:
        if f["runs"] < n:
            notes.append(f"{f['setting']} at {f['where']} fired in {f['runs']} of {n} after runs only")
    notes += [f"preload error: {e}" for e in errors[:3]]
    return fired, missing, notes


def speedup_band(before: Sequence[float], after: Sequence[float], confidence: float = 0.95) -> dict[str, Any]:
    """Speedup (before / after) of paired runs, with a t-interval on the mean log ratio, and the run-to-run
    noise of each side (the standard deviation of its log times, as a ± share)."""
    if confidence != 0.95:
        raise UsageError("only 95 % bands are computed")
    n = min(len(before), len(after))
    if n < MIN_REPS or min(before[:n] + after[:n]) <= 0:
        raise UsageError("a speedup band needs at least two positive times per side")
    r = [math.log(b / a) for b, a in zip(before[:n], after[:n])]
    mean = statistics.fmean(r)
    sd = statistics.stdev(r) if n > 1 else 0.0
    t = _T975[min(n - 1, len(_T975)) - 1] if n - 1 <= len(_T975) else 1.96
    half = t * sd / math.sqrt(n)

    def noise(xs: Sequence[float]) -> float:
        lx = [math.log(x) for x in xs]
        return math.expm1(statistics.stdev(lx)) if len(lx) > 1 else 0.0

    low, high = math.exp(mean - half), math.exp(mean + half)
    verdict = ("faster" if low > 1 else "slower" if high < 1 else "no measurable change")
    return {"estimate": math.exp(mean), "low": low, "high": high, "confidence": confidence, "pairs": n,
            "median_before_s": statistics.median(before), "median_after_s": statistics.median(after),
            "noise_before": noise(before), "noise_after": noise(after), "verdict": verdict}
