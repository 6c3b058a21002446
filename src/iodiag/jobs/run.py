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
import socket
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from .. import __version__
from ..collectors import darshan as dcol
from ..collectors.supervise import KEEP_DIR, RunOutcome, run_supervised
from ..errors import CollectorError, UsageError
from .snapshot import write_snapshot
from .store import COMPLETE, PARTIAL, JobRecord, create_job

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
LOG_PID_RE = re.compile(r"_id(?P<jobid>-?\d+)-(?P<pid>\d+)_")
# a final log's name: <user>_<exe>_id<jobid>-<pid>_<date>-<seconds>-<hash>_<n>.darshan (Darshan's non-MPI naming)
LOG_EXE_RE = re.compile(r"^(?P<user>[^_]+)_(?P<exe>.+)_id(?P<jobid>-?\d+)-(?P<pid>\d+)_\d+-\d+-\d+-\d+_\d+\.darshan$")


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


def _job_name(argv: Sequence[str], name: str | None) -> str:
    if name:
        return name
    for a in argv:
        base = os.path.basename(a)
        if base.startswith("python") or base in ("env", "bash", "sh"):
            continue
        if a.startswith("-"):
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
    finalize_job(record, outcome, collector=collector, darshan_jobid=darshan_jobid)
    write_snapshot(record, log_names=opts.log_names)  # array metadata, mounts, layouts: the report reads the job only
    return RunResult(record=record, outcome=outcome, notes=notes + record.data.get("run_notes", []))


def _user() -> str:
    try:
        import pwd

        return pwd.getpwuid(os.getuid()).pw_name
    except Exception:  # noqa: BLE001
        return os.environ.get("USER", "")


def _rel(folder: Path, paths: Sequence[Path]) -> list[str]:
    return [str(p.relative_to(folder)) for p in paths]


def read_dask_workers(dask_dir: Path) -> list[dict[str, Any]]:
    """Every worker recorded by the Dask capture (all clients), as saved."""
    out: list[dict[str, Any]] = []
    for path in sorted(dask_dir.glob("workers-*.json")):
        try:
            data = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        if isinstance(data, list):
            out.extend(d for d in data if isinstance(d, dict))
    return out


def read_dask_clients(dask_dir: Path) -> list[dict[str, Any]]:
    out = []
    for path in sorted(dask_dir.glob("client-*.json")):
        try:
            d = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        d["file"] = path.name
        out.append(d)
    return out


def finalize_job(record: JobRecord, outcome: RunOutcome, *, collector: str, darshan_jobid: int | None) -> None:
    """Gather the artefacts the run left, decide complete/partial, write job.json."""
    folder = record.folder
    reasons: list[str] = []
    run_notes: list[str] = []
    artefacts: dict[str, Any] = {}
    missing: list[dict[str, Any]] = []
    recovered: list[dict[str, Any]] = []
    procs = outcome.processes

    # --- Dask -----------------------------------------------------------------------------
    dask_dir = folder / "dask"
    workers = read_dask_workers(dask_dir) if dask_dir.is_dir() else []
    clients = read_dask_clients(dask_dir) if dask_dir.is_dir() else []
    if dask_dir.is_dir():
        artefacts["dask"] = sorted(p.name for p in dask_dir.iterdir() if p.is_file() and not p.name.endswith(".tmp"))
    for c in clients:
        if c.get("ended_by") in (None, "sigterm") or c.get("interrupted_by"):
            how = c.get("interrupted_by") or c.get("ended_by") or "an unexpected exit"
            reasons.append(f"Dask client (pid {c.get('pid')}) ended by {how}; "
                           "the task stream holds what finished until then")
        for err in c.get("errors") or []:
            run_notes.append(f"Dask capture: {err}")
    interrupted = bool(outcome.signal) and any(c.get("interrupted_by") for c in clients)
    for w in workers:
        if w.get("gone") and not interrupted:  # (after Ctrl-C/SIGTERM to the group the workers end too)
            left = w.get("gone_at")
            reasons.append(f"Dask worker {w.get('address')} (pid {w.get('pid')}) left the cluster mid-run"
                           + (f" at {time.strftime('%H:%M:%S', time.localtime(left))}" if left else ""))
    worker_pids = {int(w["pid"]): w for w in workers if w.get("pid")}
    client_pids = {int(c["pid"]): c for c in clients if c.get("pid")}

    # --- Darshan ----------------------------------------------------------------------------
    if collector == "darshan":
        logs_dir = folder / "logs"
        mmap_dir = Path((record.data.get("darshan") or {}).get("mmap_dir") or logs_dir / "mmap")
        keep_dir = mmap_dir / KEEP_DIR
        found = dcol.find_logs(logs_dir, mmap_dir)
        logged_pids: set[int] = set()
        for p in found["logs"]:
            m = LOG_PID_RE.search(p.name)
            if m:
                logged_pids.add(int(m["pid"]))
        # processes that must have a log (``expected``): the workload's main process and the Dask
        # client/workers.  Other children that mapped an mmap log and removed it exited cleanly
        # (excluded by APP_EXCLUDE, or nothing to record).
        expected: set[int] = set(worker_pids) | {outcome.pid}
        leader_exe = os.path.basename(record.data.get("command", [""])[0])

        def infer_pid(name: str) -> int | None:
            # died before the watch saw it: tie it to the one expected, log-less process of that program
            m = dcol.MMAP_RE.match(name)
            exe = m["exe"] if m else ""
            cands = [q for q in expected - logged_pids
                     if (procs[q].comm if q in procs else (leader_exe if q == outcome.pid else "")).startswith(exe[:15])
                     and q not in outcome.mapped.values()]
            return cands[0] if len(cands) == 1 else None

        # mmap logs left in place: the process died before its shutdown started.  Kept links whose
        # original is gone: the shutdown started (Darshan unlinks the file first) — if no log came
        # out, the process was killed while writing it.
        candidates = [(p, True) for p in found["mmap"]]
        if keep_dir.is_dir():
            candidates += [(k, False) for k in sorted(keep_dir.iterdir()) if not (mmap_dir / k.name).exists()]
        interrupted: dict[int, str] = {}
        for p in found["partial"]:
            m = LOG_PID_RE.search(p.name)
            if m:
                interrupted[int(m["pid"])] = f"{p.name}, {p.stat().st_size} bytes"
        # a process whose image was replaced by exec (a batch script's `exec prog`): Darshan's shutdown never runs
        # for the first image, so its mmap log stays; the same pid then writes the next image's log under another
        # program name.  Not a kill: its records are kept, its end is the exec.
        log_exes: dict[int, set[str]] = {}
        for p in found["logs"]:
            m = LOG_EXE_RE.match(p.name)
            if m:
                log_exes.setdefault(int(m["pid"]), set()).add(m["exe"])

        def images(q: int) -> set[str]:
            """Program names process ``q`` ran as: its command lines seen, and its parent's (a forked child runs
            its parent's program until it execs)."""
            seen = procs.get(q)
            if seen is None:
                return set()
            lines = [*seen.earlier, seen.cmdline]
            if seen.ppid in procs:
                lines += [*procs[seen.ppid].earlier, procs[seen.ppid].cmdline]
            return {os.path.basename(c.split(" ", 1)[0]) for c in lines if c}

        given: set[int] = set()  # processes already given a pre-exec image by the name-only match

        def exec_pid(name: str, pid: int | None) -> tuple[int | None, str] | None:
            """(pid or None when several processes fit, the program it exec'd) for an mmap log left by an image
            that exec replaced; None when no process fits (then it is a process that died)."""
            m = dcol.MMAP_RE.match(name)
            if not m:
                return None
            exe = m["exe"]

            def after(q: int) -> str | None:
                others = sorted(e for e in log_exes.get(q, ()) if e != exe)
                return others[0] if others else None

            if pid is not None:
                return (pid, after(pid)) if after(pid) else None
            cands = [q for q in sorted(log_exes) if after(q) and exe in images(q)]
            if not cands:
                return None
            left = [q for q in cands if q not in given]
            if len(left) == 1:
                given.add(left[0])
                return left[0], after(left[0])
            return None, after(cands[0])

        for path, remnant in candidates:
            pid = outcome.mapped.get(path.name)
            replaced = exec_pid(path.name, pid) if remnant else None
            if replaced is not None:
                pid, image = replaced
                new = dcol.recover_mmap_log(path, dest_dir=logs_dir, pid=pid)
                if new is None:
                    continue
                role = (_role(pid, outcome, worker_pids, client_pids, procs) if pid is not None else
                        "a process that exec'd; several fit, which one is not recorded")
                found["logs"].append(new)
                recovered.append({"pid": pid, "log": str(new.relative_to(folder)), "from": path.name, "role": role,
                                  "when": "replaced by exec", "exec": image})
                run_notes.append(f"process {pid or '?'} ({role}) replaced its image ({dcol.MMAP_RE.match(path.name)['exe']}) "
                                 f"by exec ({image}): Darshan's shutdown never runs for an image exec replaces; its "
                                 "records were recovered from its mmap log")
                continue
            pid = pid or infer_pid(path.name)
            if pid in logged_pids:  # the process finished its log: nothing to recover
                continue
            if not remnant and pid not in expected and pid not in interrupted:
                continue  # a helper process that ended cleanly without a log
            new = dcol.recover_mmap_log(path, dest_dir=logs_dir, pid=pid)
            if new is None:
                continue
            role = _role(pid, outcome, worker_pids, client_pids, procs)
            when = ("ended before Darshan's shutdown could write its log (killed by a signal, or left through "
                    "os._exit as multiprocessing pool workers do); its mmap log was recovered" if remnant
                    else "was killed while Darshan was writing its log" + (f" ({interrupted[pid]})" if pid in interrupted else "")
                    + "; its mmap log was kept (readable when the kill came before Darshan rewrote the log header)")
            found["logs"].append(new)
            recovered.append({"pid": pid, "log": str(new.relative_to(folder)), "from": path.name, "role": role,
                              "when": "before shutdown" if remnant else "during shutdown"})
            reasons.append(f"process {pid or '?'} ({role}) {when}")
            if pid:
                logged_pids.add(pid)
        shutil.rmtree(keep_dir, ignore_errors=True)
        for pid, what in sorted(interrupted.items()):
            if pid not in logged_pids:
                missing.append({"pid": pid, "role": _role(pid, outcome, worker_pids, client_pids, procs),
                                "cause": f"killed while writing its log ({what}) and no mmap log was left",
                                "file": next(str(p.relative_to(folder)) for p in found["partial"] if f"-{pid}_" in p.name)})
        for pid in sorted(expected - logged_pids - set(interrupted)):
            if pid in worker_pids and pid not in procs and pid not in outcome.mapped:
                host = worker_pids[pid].get("hostname")
                if host and host != socket.gethostname():
                    continue  # a worker on another host writes its log there
            missing.append({"pid": pid, "role": _role(pid, outcome, worker_pids, client_pids, procs),
                            "cause": "no Darshan log and no mmap log left (killed, or the runtime was not loaded)"})
        for m in missing:
            reasons.append(f"process {m['pid'] or '?'} ({m['role']}) has no Darshan log: {m['cause']}")
        if folder not in mmap_dir.parents:  # the node-local mmap folder: what was needed is recovered by now
            shutil.rmtree(mmap_dir, ignore_errors=True)
        artefacts["logs"] = sorted(_rel(folder, found["logs"]))
        if not found["logs"]:
            reasons.append("Darshan wrote no log at all (was the program dynamically linked? see `darshan-config --all`)")
    elif collector == "embedded":
        traces = folder / "traces"
        artefacts["traces"] = sorted(str(p.relative_to(folder)) for p in traces.rglob("*") if p.is_file()) if traces.is_dir() else []
        # one trace per process, named <pid>-<...>.iot: name the expected processes that left none
        traced = {int(m.group(1)) for t in artefacts["traces"] if (m := re.match(r"(\d+)-", os.path.basename(t)))}
        if traced:
            for pid in sorted((set(worker_pids) | {outcome.pid}) - traced):
                role = _role(pid, outcome, worker_pids, client_pids, procs)
                missing.append({"pid": pid, "role": role, "cause": "no embedded-collector trace"})
                reasons.append(f"process {pid} ({role}) has no embedded-collector trace")

    if outcome.signal:
        reasons.append(f"the workload was killed by signal {outcome.signal} ({_signame(outcome.signal)})")
    if outcome.lingering:
        reasons.append(f"{len(outcome.lingering)} process(es) of the workload were still running when iodiag finished")

    record.data.update({
        "status": PARTIAL if reasons else COMPLETE,
        "partial": bool(reasons),
        "partial_reasons": reasons,
        "end_s": outcome.end_s,
        "wall_s": outcome.wall_s,
        "workload_start_s": outcome.start_s,
        "pid": outcome.pid,
        "exit_code": outcome.exit_code,
        "signal": outcome.signal,
        "signal_name": _signame(outcome.signal) if outcome.signal else None,
        "forwarded_signals": [_signame(s) for s in outcome.forwarded],
        "artefacts": artefacts,
        "processes": [p.to_dict() | {"role": _role(p.pid, outcome, worker_pids, client_pids, procs)}
                      for p in sorted(procs.values(), key=lambda p: p.first_seen_s)],
        "dask_workers": workers,
        "dask_clients": clients,
        "missing_processes": missing,
        "recovered_logs": recovered,
        "run_notes": run_notes,
    })
    if darshan_jobid is not None:
        record.data.setdefault("darshan", {})["jobid"] = darshan_jobid
    record.save()


def _signame(sig: int | None) -> str:
    import signal as _s

    try:
        return _s.Signals(sig).name
    except (ValueError, TypeError):
        return str(sig)


def _role(pid, outcome: RunOutcome, worker_pids, client_pids, procs) -> str:
    if pid is None:
        return "a process the watch did not see (short-lived, e.g. a pool worker)"
    if pid in worker_pids:
        return f"Dask worker {worker_pids[pid].get('address')}"
    if pid in client_pids or pid == outcome.pid:
        return "workload main process" + (" (Dask client)" if pid in client_pids else "")
    p = procs.get(pid)
    if p is not None:
        return f"{p.comm} (child of {p.ppid})"
    return "process"
