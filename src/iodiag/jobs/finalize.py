"""The end of ``iodiag run``: what the run left, and whether the job is complete.

:func:`finalize_job` gathers the artefacts of a supervised run (Dask capture files, Darshan logs and the mmap
logs of processes that died before writing one, embedded-collector traces), names the processes whose logs are
missing and why, decides complete/partial with reasons, and writes ``job.json``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from ..collectors import darshan as dcol
from ..collectors.supervise import KEEP_DIR, RunOutcome
from .exec_images import Image, Successor, Verdict, exec_prone, match_by_time
from .store import COMPLETE, PARTIAL, JobRecord

LOG_PID_RE = re.compile(r"_id(?P<jobid>-?\d+)-(?P<pid>\d+)_")
# a final log's name: <user>_<exe>_id<jobid>-<pid>_<date>-<seconds>-<hash>_<n>.darshan (Darshan's non-MPI naming)
LOG_EXE_RE = re.compile(r"^(?P<user>[^_]+)_(?P<exe>.+)_id(?P<jobid>-?\d+)-(?P<pid>\d+)_\d+-\d+-\d+-\d+_\d+\.darshan$")

# when each log's image ran (darshan-util's reader, given by the caller: jobs/ does not import the analyzers):
# path -> {"start_s", "last_s", ...}; see analyzers/readers/darshan_logmeta.log_times
LogTimes = Callable[[Sequence[str]], Mapping[str, Mapping[str, Any]]]


@dataclass
class _Run:
    """What finalize_job gathers about a finished run, section by section (Dask, then the collector's files)."""

    record: JobRecord
    outcome: RunOutcome
    workers: list[dict[str, Any]]
    clients: list[dict[str, Any]]
    reasons: list[str] = field(default_factory=list)
    run_notes: list[str] = field(default_factory=list)
    artefacts: dict[str, Any] = field(default_factory=dict)
    missing: list[dict[str, Any]] = field(default_factory=list)
    recovered: list[dict[str, Any]] = field(default_factory=list)
    log_times: LogTimes | None = None

    def __post_init__(self) -> None:
        self.folder = self.record.folder
        self.procs = self.outcome.processes
        self.worker_pids = {int(w["pid"]): w for w in self.workers if w.get("pid")}
        self.client_pids = {int(c["pid"]): c for c in self.clients if c.get("pid")}

    def role(self, pid) -> str:
        return _role(pid, self.outcome, self.worker_pids, self.client_pids, self.procs)


def finalize_job(record: JobRecord, outcome: RunOutcome, *, collector: str, darshan_jobid: int | None,
                 log_times: LogTimes | None = None) -> None:
    """Gather the artefacts the run left, decide complete/partial, write job.json.  ``log_times`` (darshan-util's
    reader of the logs' job records) tells the images exec replaced when the process watch did not see them."""
    run = _dask_side(record, outcome)
    run.log_times = log_times
    if collector == "darshan":
        _darshan_logs(run)
    elif collector == "embedded":
        _embedded_traces(run)
    reasons = run.reasons
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
        "artefacts": run.artefacts,
        "processes": [p.to_dict() | {"role": run.role(p.pid)}
                      for p in sorted(run.procs.values(), key=lambda p: p.first_seen_s)],
        "dask_workers": run.workers,
        "dask_clients": run.clients,
        "missing_processes": run.missing,
        "recovered_logs": run.recovered,
        "run_notes": run.run_notes,
    })
    if darshan_jobid is not None:
        record.data.setdefault("darshan", {})["jobid"] = darshan_jobid
    record.save()


def _dask_side(record: JobRecord, outcome: RunOutcome) -> _Run:
    """The Dask capture's files: clients that did not end cleanly and workers that left mid-run are reasons."""
    dask_dir = record.folder / "dask"
    workers = read_dask_workers(dask_dir) if dask_dir.is_dir() else []
    clients = read_dask_clients(dask_dir) if dask_dir.is_dir() else []
    run = _Run(record, outcome, workers, clients)
    if dask_dir.is_dir():
        run.artefacts["dask"] = sorted(p.name for p in dask_dir.iterdir() if p.is_file() and not p.name.endswith(".tmp"))
    for c in clients:
        if c.get("ended_by") in (None, "sigterm") or c.get("interrupted_by"):
            how = c.get("interrupted_by") or c.get("ended_by") or "an unexpected exit"
            run.reasons.append(f"Dask client (pid {c.get('pid')}) ended by {how}; "
                               "the task stream holds what finished until then")
        for err in c.get("errors") or []:
            run.run_notes.append(f"Dask capture: {err}")
    interrupted = bool(outcome.signal) and any(c.get("interrupted_by") for c in clients)
    for w in workers:
        if w.get("gone") and not interrupted:  # (after Ctrl-C/SIGTERM to the group the workers end too)
            left = w.get("gone_at")
            run.reasons.append(f"Dask worker {w.get('address')} (pid {w.get('pid')}) left the cluster mid-run"
                               + (f" at {time.strftime('%H:%M:%S', time.localtime(left))}" if left else ""))
    return run


def _darshan_logs(run: _Run) -> None:
    """Darshan's logs: mmap logs of processes that died (or exec'd) recovered, processes without a log named."""
    folder, outcome = run.folder, run.outcome
    logs_dir = folder / "logs"
    mmap_dir = Path((run.record.data.get("darshan") or {}).get("mmap_dir") or logs_dir / "mmap")
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
    expected: set[int] = set(run.worker_pids) | {outcome.pid}
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
    _recover_mmap_logs(run, found, logs_dir, candidates, expected, logged_pids, interrupted)
    shutil.rmtree(keep_dir, ignore_errors=True)
    _name_missing_logs(run, found, expected, logged_pids, interrupted)
    if folder not in mmap_dir.parents:  # the node-local mmap folder: what was needed is recovered by now
        shutil.rmtree(mmap_dir, ignore_errors=True)
    run.artefacts["logs"] = sorted(_rel(folder, found["logs"]))
    if not found["logs"]:
        run.reasons.append("Darshan wrote no log at all (was the program dynamically linked? see `darshan-config --all`)")


class _ExecImages:
    """A process whose image was replaced by exec (a batch script's `exec prog`): Darshan's shutdown never runs
    for the first image, so its mmap log stays; the same pid then writes the next image's log under another
    program name.  Not a kill: its records are kept, its end is the exec."""

    def __init__(self, logs: Sequence[Path], procs) -> None:
        self.procs = procs
        self.log_exes: dict[int, set[str]] = {}
        for p in logs:
            m = LOG_EXE_RE.match(p.name)
            if m:
                self.log_exes.setdefault(int(m["pid"]), set()).add(m["exe"])
        self.given: set[int] = set()  # processes already given a pre-exec image by the name-only match

    def images(self, q: int) -> set[str]:
        """Program names process ``q`` ran as: its command lines seen, and its parent's (a forked child runs
        its parent's program until it execs)."""
        procs = self.procs
        seen = procs.get(q)
        if seen is None:
            return set()
        lines = [*seen.earlier, seen.cmdline]
        if seen.ppid in procs:
            lines += [*procs[seen.ppid].earlier, procs[seen.ppid].cmdline]
        return {os.path.basename(c.split(" ", 1)[0]) for c in lines if c}

    def match(self, name: str, pid: int | None) -> tuple[int | None, str] | None:
        """(pid or None when several processes fit, the program it exec'd) for an mmap log left by an image
        that exec replaced; None when no process fits (then it is a process that died)."""
        m = dcol.MMAP_RE.match(name)
        if not m:
            return None
        exe = m["exe"]

        def after(q: int) -> str | None:
            others = sorted(e for e in self.log_exes.get(q, ()) if e != exe)
            return others[0] if others else None

        if pid is not None:
            return (pid, after(pid)) if after(pid) else None
        cands = [q for q in sorted(self.log_exes) if after(q) and exe in self.images(q)]
        if not cands:
            return None
        left = [q for q in cands if q not in self.given]
        if len(left) == 1:
            self.given.add(left[0])
            return left[0], after(left[0])
        return None, after(cands[0])


def _recover_mmap_logs(run: _Run, found: dict, logs_dir: Path, candidates: list[tuple[Path, bool]],
                       expected: set[int], logged_pids: set[int], interrupted: dict[int, str]) -> None:
    """Each left mmap log (``remnant``) or kept link of an interrupted shutdown turned into a log when its process
    needs one: an image exec replaced (a run note), a process that died or was killed while writing (a reason)."""
    folder, outcome, procs = run.folder, run.outcome, run.procs
    leader_exe = os.path.basename(run.record.data.get("command", [""])[0])
    execs = _ExecImages(found["logs"], procs)

    def infer_pid(name: str) -> int | None:
        # died before the watch saw it: tie it to the one expected, log-less process of that program
        m = dcol.MMAP_RE.match(name)
        exe = m["exe"] if m else ""
        cands = [q for q in expected - logged_pids
                 if (procs[q].comm if q in procs else (leader_exe if q == outcome.pid else "")).startswith(exe[:15])
                 and q not in outcome.mapped.values()]
        return cands[0] if len(cands) == 1 else None

    by_time, timed = _exec_by_time(run, found, candidates)
    for path, remnant in candidates:
        pid = outcome.mapped.get(path.name)
        verdict: Verdict | None = None
        if not remnant:
            replaced = None
        elif pid is not None or path.name not in timed:  # the watch tied it to its process (exact), or no times
            replaced = execs.match(path.name, pid)
        else:  # the watch did not see it: the logs' own times decide
            verdict = by_time.get(path.name)
            replaced = (verdict.pid, verdict.exec) if verdict is not None else None
        if replaced is not None:
            pid, image = replaced
            new = dcol.recover_mmap_log(path, dest_dir=logs_dir, pid=pid)
            if new is None:
                continue
            several = (f" (pids {', '.join(map(str, verdict.fits))})" if verdict is not None and verdict.fits else "")
            role = run.role(pid) if pid is not None else f"a process that exec'd; several fit{several}, which one is not recorded"
            role = "a process the watch did not see" if role == "process" else role
            found["logs"].append(new)
            entry = {"pid": pid, "log": str(new.relative_to(folder)), "from": path.name, "role": role,
                     "when": "replaced by exec", "exec": image,
                     "told_by": "the log times" if verdict is not None else "the process watch"}
            if verdict is not None and verdict.gap_s is not None:
                entry["gap_s"] = round(verdict.gap_s, 6)
            run.recovered.append(entry)
            how = ("" if verdict is None else
                   f" (told by the logs' times: its last record ended {verdict.gap_s * 1e3:.1f} ms before the "
                   f"{image} of process {pid} started)" if verdict.gap_s is not None else
                   " (told by the logs' times; several processes fit)")
            run.run_notes.append(f"process {pid or '?'} ({role}) replaced its image ({dcol.MMAP_RE.match(path.name)['exe']}) "
                                 f"by exec ({image}): Darshan's shutdown never runs for an image exec replaces; its "
                                 f"records were recovered from its mmap log{how}")
            continue
        pid = pid or infer_pid(path.name)
        if pid in logged_pids:  # the process finished its log: nothing to recover
            continue
        if not remnant and pid not in expected and pid not in interrupted:
            continue  # a helper process that ended cleanly without a log
        new = dcol.recover_mmap_log(path, dest_dir=logs_dir, pid=pid)
        if new is None:
            continue
        role = run.role(pid)
        when = ("ended before Darshan's shutdown could write its log (killed by a signal, or left through "
                "os._exit as multiprocessing pool workers do); its mmap log was recovered" if remnant
                else "was killed while Darshan was writing its log" + (f" ({interrupted[pid]})" if pid in interrupted else "")
                + "; its mmap log was kept (readable when the kill came before Darshan rewrote the log header)")
        found["logs"].append(new)
        run.recovered.append({"pid": pid, "log": str(new.relative_to(folder)), "from": path.name, "role": role,
                              "when": "before shutdown" if remnant else "during shutdown"})
        run.reasons.append(f"process {pid or '?'} ({role}) {when}")
        if pid:
            logged_pids.add(pid)


def _exec_by_time(run: _Run, found: dict, candidates: list[tuple[Path, bool]]) -> tuple[dict[str, Verdict], set[str]]:
    """The left mmap logs the process watch did not tie to a process, judged by the logs' times (``exec_images``):
    (image name -> Verdict for those exec replaced, the names whose times could be read)."""
    outcome, procs = run.outcome, run.procs
    remnants = [p for p, remnant in candidates if remnant]
    left = [p for p in remnants if p.name not in outcome.mapped]
    if not left or run.log_times is None:
        return {}, set()
    finals = [(p, m) for p in found["logs"] if (m := LOG_EXE_RE.match(p.name))]
    try:
        times = run.log_times([str(p) for p in remnants] + [str(p) for p, _ in finals])
    except Exception:  # noqa: BLE001 - a reader that fails costs this evidence only (the name rule stands in)
        return {}, set()
    images = []
    for p in left:
        m, t = dcol.MMAP_RE.match(p.name), times.get(str(p))
        if m and t:
            images.append(Image(p.name, m["exe"], m["jobid"], float(t["start_s"]), float(t["last_s"])))
    # a process whose earlier image the watch tied to its mmap log has its predecessor already
    claimed = {pid for name, pid in outcome.mapped.items() if any(p.name == name for p, remnant in candidates if remnant)}
    succs = [Successor(p.name, int(m["pid"]), m["exe"], m["jobid"], float(times[str(p)]["start_s"]))
             for p, m in finals if str(p) in times and int(m["pid"]) not in claimed]
    # the watch saw the process run that program already before the image started: not its predecessor
    excluded: dict[int, list[str]] = {}
    for s in succs:
        seen = procs.get(s.pid)
        first = (seen.earlier[0] if seen is not None and seen.earlier else seen.cmdline if seen is not None else "")
        if first and os.path.basename(first.split(" ", 1)[0]) == s.exe:
            excluded[s.pid] = [i.name for i in images if seen.first_seen_s < i.start_s]
    # the earliest of all the job's logs, when it is a left image, is the main process's first one
    starts = [(float(times[str(p)]["start_s"]), p.name) for p in remnants + [p for p, _ in finals] if str(p) in times]
    earliest = min(starts, default=(0.0, ""))[1]
    main = (earliest, outcome.pid) if any(i.name == earliest for i in images) else None
    # other than the main process's first image, images of shells and exec-only wrappers (see EXEC_PRONE), and of
    # another program only before a process the watch saw run that program and then another (its command lines)
    def ran(pid: int) -> set[str]:
        seen = procs.get(pid)
        return {os.path.basename(c.split(" ", 1)[0]) for c in seen.earlier if c} if seen is not None else set()

    witnessed = {s.pid: ran(s.pid) for s in succs}
    judged = []
    for i in images:
        if i.name == earliest or exec_prone(i.exe):
            judged.append(i)
        elif any(i.exe in w for w in witnessed.values()):
            judged.append(i)
            for pid, w in witnessed.items():
                if i.exe not in w:
                    excluded.setdefault(pid, []).append(i.name)
    return match_by_time(judged, succs, main=main, excluded=excluded), {i.name for i in images}


def _name_missing_logs(run: _Run, found: dict, expected: set[int], logged_pids: set[int],
                       interrupted: dict[int, str]) -> None:
    """Processes left without a log after recovery (killed while writing it, or no log at all): each is missing
    and a reason; a worker on another host writes its log there."""
    folder, outcome, procs = run.folder, run.outcome, run.procs
    missing = run.missing
    for pid, what in sorted(interrupted.items()):
        if pid not in logged_pids:
            missing.append({"pid": pid, "role": run.role(pid),
                            "cause": f"killed while writing its log ({what}) and no mmap log was left",
                            "file": next(str(p.relative_to(folder)) for p in found["partial"] if f"-{pid}_" in p.name)})
    for pid in sorted(expected - logged_pids - set(interrupted)):
        if pid in run.worker_pids and pid not in procs and pid not in outcome.mapped:
            host = run.worker_pids[pid].get("hostname")
            if host and host != socket.gethostname():
                continue  # a worker on another host writes its log there
        missing.append({"pid": pid, "role": run.role(pid),
                        "cause": "no Darshan log and no mmap log left (killed, or the runtime was not loaded)"})
    for m in missing:
        run.reasons.append(f"process {m['pid'] or '?'} ({m['role']}) has no Darshan log: {m['cause']}")


def _embedded_traces(run: _Run) -> None:
    """The embedded collector's traces: one per process, named <pid>-<...>.iot; expected processes without one
    are missing."""
    folder = run.folder
    traces = folder / "traces"
    run.artefacts["traces"] = sorted(str(p.relative_to(folder)) for p in traces.rglob("*") if p.is_file()) if traces.is_dir() else []
    traced = {int(m.group(1)) for t in run.artefacts["traces"] if (m := re.match(r"(\d+)-", os.path.basename(t)))}
    if traced:
        for pid in sorted((set(run.worker_pids) | {run.outcome.pid}) - traced):
            role = run.role(pid)
            run.missing.append({"pid": pid, "role": role, "cause": "no embedded-collector trace"})
            run.reasons.append(f"process {pid} ({role}) has no embedded-collector trace")


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
