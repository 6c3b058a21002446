"""A stored job (``iodiag run``) -> one JobProfile.

:func:`load_job_record` reads whatever the job's collector left — Darshan logs
(``logs/``, through :func:`iodiag.analyzers.load.load_job`) or embedded traces
(``traces/``, through ``iodiag.analyzers.readers.embedded.load_traces``) —,
attaches the Dask task stream (``dask/``) as the ``tasks`` table, and turns
what the run lost (processes without logs, recovered mmap logs, workers that
left the cluster, a killed workload) into ``issues_seen`` entries so that
reports never hide it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..config import Config
from ..errors import DependencyMissing, NoUsableData
from ..profile import JobInfo, JobProfile, LoadIssue
from .readers.dask import load_tasks

if TYPE_CHECKING:  # pragma: no cover
    from ..jobs.store import JobRecord


def _darshan_logs(record: "JobRecord") -> list[str]:
    folder = Path(record.folder)
    listed = (record.data.get("artefacts") or {}).get("logs")
    if listed:
        paths = [str(folder / p) for p in listed if (folder / p).is_file()]
        if paths:
            return paths
    logs = folder / "logs"
    if not logs.is_dir():
        return []
    return sorted(str(p) for p in logs.rglob("*.darshan") if p.parent.name != "mmap" and p.is_file())


def _bare_profile(record: "JobRecord", collector: str) -> JobProfile:
    d = record.data
    start, end = d.get("workload_start_s") or d.get("start_s"), d.get("end_s")
    info = JobInfo(job_id=record.id, exe=" ".join((d.get("command") or [])[:1]),
                   args=" ".join((d.get("command") or [])[1:]), start_s=start, end_s=end,
                   runtime_s=(end - start) if (start and end) else None, collector=collector)
    return JobProfile(job=info)


def _snapshot(folder: Path, issues: list[LoadIssue]) -> dict | None:
    """The job's metadata snapshot (``meta/snapshot.json``, written by ``iodiag run``), None when it has none
    (a job recorded before snapshots, or whose snapshot failed: array metadata is then read live and the
    recommendations say so).  A damaged one is an issue, and the job is read as one without a snapshot."""
    from ..collectors.snapshot import SCHEMA
    from ..jobs.snapshot import SNAPSHOT_FILE

    path = folder / SNAPSHOT_FILE
    try:
        snap = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        issues.append(LoadIssue(path=str(path), kind="unreadable", cause=f"the metadata snapshot cannot be read: {exc}",
                                next_step="array metadata is read live from the stores, where they still exist"))
        return None
    if not isinstance(snap, dict) or snap.get("schema") != SCHEMA:
        issues.append(LoadIssue(path=str(path), kind="unreadable",
                                cause=f"not a metadata snapshot of schema {SCHEMA}",
                                next_step="array metadata is read live from the stores, where they still exist"))
        return None
    return snap


def _recorded_glibc(snapshot: dict | None) -> str | None:
    """The C library version of the machine that ran the job, as its snapshot recorded it ("" when not glibc);
    None without a snapshot (a job recorded before snapshots: this host's is taken)."""
    libc = (snapshot or {}).get("libc")
    if not isinstance(libc, list) or len(libc) != 2:
        return None
    return str(libc[1]) if libc[0] == "glibc" else ""


def darshan_blind_spots(version: str | None, glibc: str | None = None) -> list[str]:
    """What a Darshan runtime of ``version`` cannot see on this machine's C library (``glibc``: this host's
    when not given; a job recorded by ``iodiag run`` ran here).  Darshan up to 3.5 wraps ``__xstat``/``__lxstat``/
    ``__fxstat`` for stat calls, which glibc 2.33+ no longer routes through: every ``stat()`` is then uncounted
    (POSIX_STATS stays 0), so a stat storm cannot show as metadata-storm."""
    import platform

    if glibc is None:
        lib, glibc = platform.libc_ver()
        if lib != "glibc":
            return []
    try:
        major, minor = (int(x) for x in str(glibc).split(".")[:2])
        dv = tuple(int(x) for x in str(version or "0").split(".")[:2])
    except ValueError:
        return []
    if (major, minor) >= (2, 33) and dv <= (3, 5):
        return [f"stat()/fstat()/lstat() calls (Darshan {version} wraps the __xstat family, which glibc {glibc} no "
                "longer uses: POSIX_STATS stays 0 and a stat storm cannot show as metadata-storm; "
                "iodiag run --collector embedded counts them)"]
    return []


def darshan_copy_blind_spot(version: str | None) -> list[str]:
    """Darshan (3.5.0's runtime has no wrapper for them) does not see copy_file_range(), sendfile() or splice():
    GNU cat and cp (coreutils 9) copy file to file with copy_file_range, so neither side of such a copy is
    counted: a batch script's ``cat in > out`` shows 0 bytes read."""
    try:
        dv = tuple(int(x) for x in str(version or "0").split(".")[:2])
    except ValueError:
        return []
    if dv > (3, 5):
        return []
    return ["copy_file_range()/sendfile()/splice() (GNU cat and cp copy file to file with copy_file_range: Darshan "
            "counts neither the read nor the write of such a copy; iodiag run --collector embedded counts them)"]


def role_of(pid: int, *, workers: set, clients: set, main: int | None, cmdline: str) -> str:
    """A process's role in a job recorded by ``iodiag run``: worker, client, scheduler, nanny or child."""
    if pid in workers:
        return "worker"
    if pid in clients or pid == main:
        return "client" if pid in clients else "main"
    c = cmdline.replace("_", " ")
    if "dask scheduler" in c or "dask-scheduler" in c:
        return "scheduler"
    if "dask worker" in c or "dask-worker" in c or "nanny" in c:
        return "nanny"
    return "child"


def _set_roles(profile: JobProfile, d: dict) -> None:
    """The ``role`` column of the processes table, from what ``iodiag run`` saw (process tree, Dask capture)."""
    pr = profile.processes
    if not len(pr) or "pid" not in pr:
        return
    workers = {int(w["pid"]) for w in d.get("dask_workers") or [] if isinstance(w.get("pid"), int)}
    workers |= {int(x) for x in profile.tasks["pid"].tolist() if int(x) >= 0} if len(profile.tasks) else set()
    clients = {int(c["pid"]) for c in d.get("dask_clients") or [] if isinstance(c, dict) and isinstance(c.get("pid"), int)}
    cmd = {int(p["pid"]): str(p.get("cmdline") or p.get("comm") or "") for p in d.get("processes") or []
           if isinstance(p.get("pid"), int)}
    roles = [role_of(int(pid), workers=workers, clients=clients, main=d.get("pid"), cmdline=cmd.get(int(pid), ""))
             for pid in pr["pid"].tolist()]
    profile.processes = pr.with_columns(role=np.asarray(roles, dtype=object))


def _exec_images(profile: JobProfile, folder: Path, recovered: list[dict]) -> None:
    """Images that exec replaced (``iodiag run`` recovered their mmap logs): not killed processes.  Their logs have
    no end time because Darshan's shutdown never runs for such an image; the image ended when the same process
    started its next program, whose log begins then.  That start becomes the image's end, and the log is not
    reported as a process without an end."""
    logs = {str(folder / r["log"]) for r in recovered if r.get("when") == "replaced by exec"}
    if not logs:
        return
    profile.issues_seen[:] = [i for i in profile.issues_seen if not (i.kind == "no-end-time" and i.path in logs)]
    pr = profile.processes
    if not len(pr):
        return
    paths = np.asarray([str(p) for p in pr["log_path"].tolist()], dtype=object)
    execd = np.fromiter((p in logs for p in paths), bool, len(paths))
    pr = _one_image_per_pid(pr, execd)
    end = pr["end_s"].copy()
    for i in np.flatnonzero(execd & (pr["pid"] >= 0)):
        nxt = pr["start_s"][(pr["pid"] == pr["pid"][i]) & ~execd & (pr["start_s"] >= pr["start_s"][i])]
        if len(nxt):
            end[i] = max(end[i], float(nxt.min()))
    profile.processes = pr.with_columns(end_s=end)
    if not any(i.kind == "no-end-time" for i in profile.issues_seen):
        profile.job.runtime_derived = False


def _one_image_per_pid(pr, execd: np.ndarray):
    """The process watch can tie two exec-replaced images of one program to one pid: a shell's forked child maps
    what its parent mapped until it execs, and a poll may see it then.  Of such images the parent's started first
    (a forked child's Darshan starts after the fork), so the pid stays with the earliest; the others become
    unknown processes (-1) rather than a second image of the same process.  (A process that exec'd the same
    program twice would be misread so; the watch cannot tell the two apart.)"""
    pid = pr["pid"].copy()
    exe = [str(x) for x in pr["exe"].tolist()] if "exe" in pr.columns else [""] * len(pid)
    first: dict[tuple[int, str], int] = {}
    for i in sorted(np.flatnonzero(execd & (pid >= 0)).tolist(), key=lambda k: float(pr["start_s"][k])):
        key = (int(pid[i]), exe[i])
        if key in first:
            pid[i] = -1
        else:
            first[key] = i
    return pr.with_columns(pid=pid) if (pid != pr["pid"]).any() else pr


def load_job_record(record: "JobRecord | str | os.PathLike", *, config: Config | None = None) -> JobProfile:
    """Load one stored job into a profile.

    ``record`` is a :class:`iodiag.jobs.store.JobRecord` (from
    ``iodiag.jobs.store.find_job``) or the path of a job folder.  ``config``
    is passed to the Darshan loader (reader timeout, isolation).

    - collector ``darshan``: ``load_job(<logs>, job_id=<job id>)``;
    - collector ``embedded``: ``load_traces(<job>/traces, job_id=<job id>)``
      (raises ``DependencyMissing`` when this iodiag has no embedded reader);
    - collector ``none``: a profile with job metadata only (and the blind spot
      said);
    then ``tasks`` from ``<job>/dask`` and the run's losses in ``issues_seen``.
    Raises ``NoUsableData`` when the job has logs but none can be read.
    """
    if not hasattr(record, "data"):
        from ..jobs.store import read_job

        record = read_job(record)
    cfg = config or Config()
    d = record.data
    folder = Path(record.folder)
    collector = d.get("collector") or "darshan"
    issues: list[LoadIssue] = []
    if collector == "darshan":
        profile = _darshan_profile(record, cfg, issues)
    elif collector == "embedded":
        profile = _embedded_profile(record)
    else:
        profile = _bare_profile(record, collector)
        profile.job.blind_spots.append("no file-level I/O collector ran (no Darshan runtime, no embedded collector): "
                                       "only the Dask task stream is known")
    profile.tasks = load_tasks(folder / "dask")
    _set_roles(profile, d)
    _record_job_info(profile, record, collector, issues)
    _record_losses(profile, record, collector, issues)
    profile.issues_seen.extend(issues)
    return profile


def _darshan_profile(record, cfg: Config, issues: list[LoadIssue]) -> JobProfile:
    """The job's Darshan logs loaded; without a log (or none readable, when the job kept something else), a profile
    of the job's own metadata and an issue saying what was lost."""
    from .load import load_job

    folder = Path(record.folder)
    d = record.data
    logs = _darshan_logs(record)
    profile = None
    if logs:
        try:
            profile = load_job(logs, config=cfg, job_id=record.id)
        except NoUsableData as exc:
            # every log is damaged (e.g. the only process was killed mid-shutdown): keep what the
            # job itself knows (command, exit, Dask tasks) and say what was lost
            if not (folder / "dask").is_dir() and not d.get("recovered_logs"):
                raise
            profile = _bare_profile(record, "darshan")
            issues.append(LoadIssue(path=str(folder / "logs"), kind="unreadable", cause=exc.message,
                                    next_step="no file-level numbers for this job; re-run it to completion"))
    elif not logs:
        profile = _bare_profile(record, "darshan")
        issues.append(LoadIssue(path=str(folder / "logs"), kind="missing-log",
                                cause="Darshan wrote no log for this run",
                                next_step="check that the program is dynamically linked and that libdarshan.so "
                                          "loads (DARSHAN_DUMP_CONFIG=1 prints its settings)"))
    return profile


def _embedded_profile(record) -> JobProfile:
    """The job's embedded-collector traces loaded."""
    folder = Path(record.folder)
    try:
        from .readers.embedded import load_traces
    except ImportError:
        raise DependencyMissing(
            f"job {record.id} was recorded with the embedded collector, but this iodiag has no reader for its traces",
            hint="install an iodiag that includes the embedded collector (iodiag.analyzers.readers.embedded)",
        ) from None
    return load_traces(folder / "traces", job_id=record.id)


def _record_job_info(profile: JobProfile, record, collector: str, issues: list[LoadIssue]) -> None:
    """What job.json says about the run, onto the profile's job info: folder, snapshot, blind spots, arrays, versions,
    command, exit and the reasons the job is partial."""
    d = record.data
    folder = Path(record.folder)
    info = profile.job
    info.folder = str(folder)
    info.snapshot = _snapshot(folder, issues)
    if collector == "darshan":
        version = info.collector_version or (d.get("versions") or {}).get("darshan_runtime")
        info.blind_spots.extend(darshan_blind_spots(version, _recorded_glibc(info.snapshot))
                                + darshan_copy_blind_spot(version))
    if len(profile.files):
        from .readers.arrays import job_arrays

        info.arrays, info.arrays_from = job_arrays(profile.files["path"].tolist(), info.snapshot)
    info.job_id = record.id
    info.collector = collector
    versions = d.get("versions") or {}
    if collector == "darshan" and not info.collector_version:
        info.collector_version = versions.get("darshan_runtime")
    elif collector == "embedded" and not info.collector_version:
        info.collector_version = versions.get("embedded")
    meta = {
        "iodiag_job": record.id,
        "name": d.get("name"),
        "command": " ".join(d.get("command") or []),
        "cwd": d.get("cwd"),
        "status": record.status,
        "exit_code": d.get("exit_code"),
        "signal": d.get("signal_name"),
        "wall_s": d.get("wall_s"),
        "dxt": d.get("dxt"),
    }
    info.metadata.update({k: str(v) for k, v in meta.items() if v is not None})
    if d.get("signal"):
        info.exit_status, info.exit_signal = 128 + int(d["signal"]), d.get("signal_name") or str(d["signal"])
    elif d.get("exit_code") is not None:
        info.exit_status = int(d["exit_code"])
    info.partial_reasons = [str(r) for r in d.get("partial_reasons") or []]
    info.dask_timelines = [dict(c["timeline"], pid=c.get("pid"), end_s=c.get("end_s"))
                           for c in d.get("dask_clients") or [] if isinstance(c.get("timeline"), dict)]


def _record_losses(profile: JobProfile, record, collector: str, issues: list[LoadIssue]) -> None:
    """The run's losses as issues: processes without a log, logs recovered from mmap files, workers lost, the
    workload killed, a run never finalised, Dask tasks that could not be read."""
    d = record.data
    folder = Path(record.folder)
    job_json = str(folder / "job.json")
    for m in d.get("missing_processes") or []:
        where = str(folder / m["file"]) if m.get("file") else job_json
        issues.append(LoadIssue(path=where, kind="missing-log",
                                cause=f"process {m.get('pid') or '?'} ({m.get('role')}): {m.get('cause')}",
                                next_step="its I/O is absent from every table; numbers are a lower bound"))
    _exec_images(profile, folder, d.get("recovered_logs") or [])
    for r in d.get("recovered_logs") or []:
        if r.get("when") == "replaced by exec":
            continue  # not a loss: the image ended by exec, its records are whole (_exec_images)
        issues.append(LoadIssue(path=str(folder / r["log"]), kind="recovered-mmap",
                                cause=f"process {r.get('pid') or '?'} ({r.get('role')}) ended without Darshan's shutdown (a signal, or os._exit as pool workers do); its records come "
                                      "from the mmap log Darshan keeps while running (no end time)",
                                next_step="counters are complete up to the kill (DXT traces are not kept in mmap logs); "
                                          + ("the end time is the start of its shutdown" if r.get("when") == "during shutdown"
                                             else "run time is derived from the last I/O")))
    for w in d.get("dask_workers") or []:
        if w.get("gone"):
            issues.append(LoadIssue(path=job_json, kind="worker-lost",
                                    cause=f"Dask worker {w.get('address')} (pid {w.get('pid')}) left the cluster mid-run",
                                    next_step="tasks it was running were recomputed elsewhere; look for its restart"))
    if d.get("signal"):
        issues.append(LoadIssue(path=job_json, kind="killed",
                                cause=f"the workload was killed by {d.get('signal_name') or d['signal']}",
                                next_step="the job is partial: what ran before the signal is kept"))
    if d.get("status") == "running" and record.status == "abandoned":
        issues.append(LoadIssue(path=job_json, kind="abandoned",
                                cause="iodiag stopped before the run ended (the record was never finalised)",
                                next_step="re-run the workload with iodiag run"))
    if collector == "darshan" and not len(profile.tasks) and (folder / "dask").is_dir() and any((folder / "dask").iterdir()):
        issues.append(LoadIssue(path=str(folder / "dask"), kind="unreadable", cause="no Dask task could be read"))


__all__ = ["load_job_record", "NoUsableData"]
