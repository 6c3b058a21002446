"""What a command's TARGET names, resolved in one place (``resolve``): an iodiag job (its folder, its job.json,
its id / unique prefix / name, or 'last'), or the Darshan logs of one job (a log, a folder of logs, or a scheduler
job id in a site tree)."""

from __future__ import annotations

import glob
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from ..config import Config
from ..errors import AmbiguousInput, InputNotFound, InputUnreadable, UsageError
from .load import parse_log_name, read_headers

LOG_SUFFIXES = (".darshan", ".darshan_partial")
# whole-file compressed logs: gzip and bzip2 are read as logs (readers/container.py decompresses them); these
# others are recognised, not read yet -> how to decompress one
COMPRESSED_LOG_SUFFIXES = {".darshan.xz": "unxz -k", ".darshan.zst": "unzstd"}
DARSHAN_MAGIC = 6567223  # DARSHAN_MAGIC_NR: the int64 after the 8-byte version string of every log's header
JOB_RECORD = "job.json"  # = jobs.store.RECORD_NAME (not imported: the job store is only needed for jobs)
ACCEPTED = ("a Darshan log, a folder of logs, an iodiag job folder or job id / name / 'last' (`iodiag jobs`), or a "
            "scheduler job id with --log-tree")


@dataclass
class JobChoice:
    """One job found in a folder (for listing and picking)."""

    job_id: str
    exes: list[str]
    processes: int
    start_s: float | None
    paths: list[str] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)


@dataclass
class LogSet:
    """The logs of one job, ready for load_job."""

    paths: list[str]
    job_id: str | None = None
    source: str = ""


def _is_log(name: str) -> bool:
    return (name.endswith(LOG_SUFFIXES) or ".darshan" in name) and not name.endswith(tuple(COMPRESSED_LOG_SUFFIXES))


def logs_in_folder(folder: Path) -> list[str]:
    files = sorted(str(p) for p in folder.iterdir() if p.is_file() and _is_log(p.name))
    if not files:
        files = sorted(str(p) for p in folder.rglob("*") if p.is_file() and _is_log(p.name))
    return files


def group_jobs(paths: Sequence[str], *, config: Config | None = None) -> list[JobChoice]:
    """Group logs by Darshan job id (headers only). Unreadable logs join the job their file name names."""
    groups: dict[str, JobChoice] = {}
    orphans: list[tuple[str, str]] = []
    for r in read_headers(paths, config=config):
        if r.data is None:
            jid = parse_log_name(r.path).get("jobid")
            orphans.append((r.path, jid or ""))
            continue
        h = r.data["header"]
        jid = str(h["jobid"])
        g = groups.setdefault(jid, JobChoice(job_id=jid, exes=[], processes=0, start_s=None))
        exe = h["exe"].split(" ", 1)[0]
        if exe not in g.exes:
            g.exes.append(exe)
        g.processes += max(int(h["nprocs"]), 1)
        start = h["start_sec"] + h["start_nsec"] * 1e-9
        g.start_s = start if g.start_s is None else min(g.start_s, start)
        g.paths.append(r.path)
    for path, jid in orphans:
        if jid in groups:
            groups[jid].paths.append(path)
            groups[jid].unreadable.append(path)
        elif len(groups) == 1:
            g = next(iter(groups.values()))
            g.paths.append(path)
            g.unreadable.append(path)
        else:
            groups.setdefault(jid or "unknown", JobChoice(job_id=jid or "unknown", exes=[], processes=0, start_s=None))
            groups[jid or "unknown"].paths.append(path)
            groups[jid or "unknown"].unreadable.append(path)
    return sorted(groups.values(), key=lambda g: (g.start_s or 0, g.job_id))


def resolve_folder(folder: Path, *, pick: str | None = None, take_all: bool = False, config: Config | None = None) -> LogSet:
    paths = logs_in_folder(folder)
    if not paths:
        what, hint = _what_folder(folder)
        raise InputNotFound(f"{folder}: the folder holds no Darshan logs (*.darshan){what}", hint=hint)
    if take_all:
        return LogSet(paths=paths, source=str(folder))
    jobs = group_jobs(paths, config=config)
    if pick is not None:
        for g in jobs:
            if g.job_id == pick:
                return LogSet(paths=g.paths, job_id=g.job_id, source=str(folder))
        raise InputNotFound(f"{folder}: no job with id {pick} in this folder", hint="run without --job to list the jobs it holds")
    if len(jobs) == 1:
        return LogSet(paths=jobs[0].paths, job_id=jobs[0].job_id, source=str(folder))
    raise AmbiguousInput(
        f"{folder} holds {len(jobs)} jobs",
        hint="pick one with --job ID, or take every log as one job with --all",
        choices=jobs,
    )


def default_log_tree(config: Config | None = None) -> str | None:
    return os.environ.get("IODIAG_LOG_TREE") or (config.report.log_tree if config else None)


def resolve_tree_job(jobid: str, tree: str | os.PathLike) -> LogSet:
    root = Path(tree)
    if not root.is_dir():
        raise InputNotFound(f"log tree {root} does not exist or is not a folder", hint="pass the site archive root (YYYY/M/D/...) with --log-tree or $IODIAG_LOG_TREE")
    if not os.access(root, os.R_OK | os.X_OK):
        raise InputUnreadable(f"log tree {root} cannot be read (permission denied)", hint="ask your site admins for read access to the Darshan archive")
    hits: set[str] = set()
    for pat in (f"*_id{jobid}_*", f"*_id{jobid}-*"):
        hits.update(glob.glob(str(root / "*" / "*" / "*" / pat)))
        hits.update(glob.glob(str(root / pat)))
    if not hits:  # trees that are not exactly YYYY/M/D
        for dirpath, _, files in os.walk(root):
            for f in files:
                if f"_id{jobid}_" in f or f"_id{jobid}-" in f:
                    hits.add(os.path.join(dirpath, f))
    if not hits:
        raise InputNotFound(f"job {jobid}: no log named *_id{jobid}_* under {root}", hint="check the job id (scheduler job id), or the archive root given with --log-tree")
    return LogSet(paths=sorted(hits), job_id=jobid, source=str(root))


@dataclass
class Resolved:
    """What a TARGET names: an iodiag job (``record``, a jobs.store.JobRecord) or Darshan logs (``logs``)."""

    kind: str  # "job" or "logs"
    logs: LogSet | None = None
    record: Any = None
    how: str = ""  # how it was found: "job folder", "job id", "log", "folder of logs", "log tree"


def resolve(target: str, *, log_tree: str | None = None, pick: str | None = None, take_all: bool = False,
            config: Config | None = None, store: str | os.PathLike | None = None) -> Resolved:
    """The one dispatcher of TARGET for every command that takes a job (report, compare, recommend, verify).

    In this order: an existing path is a job folder (it holds job.json; or that job.json itself), a folder of
    Darshan logs, or a log (named *.darshan*, gzip'd or bzip2'd ones too, or any file with a Darshan header); a
    log compressed otherwise (.darshan.xz, .zst) is recognised and said to need decompressing.  A path that exists but is none of these is an
    error that says what it is and what is accepted (exit 3).  Otherwise: a numeric id with a log tree
    (--log-tree or $IODIAG_LOG_TREE) is a scheduler job id, looked up there; anything else is an iodiag job id,
    unique prefix, name or 'last' in the job store ``store`` (None: ``jobs.store.store_root``'s default).
    ``pick`` (--job) and ``take_all`` (--all) choose among the jobs of a folder of logs; a job folder is one job.
    """
    target = str(target)
    p = Path(target).expanduser()
    if p.exists():
        if p.is_dir() and (p / JOB_RECORD).is_file() or p.name == JOB_RECORD and p.is_file():
            return _job_at(p if p.is_dir() else p.parent, pick=pick)
        if p.is_dir():
            if not os.access(p, os.R_OK | os.X_OK):
                raise InputUnreadable(f"{p}: folder cannot be read (permission denied)", hint="check its permissions")
            return Resolved("logs", logs=resolve_folder(p, pick=pick, take_all=take_all, config=config),
                            how="folder of logs")
        if not os.access(p, os.R_OK):
            raise InputUnreadable(f"{p}: cannot be read (permission denied)", hint="check the file's permissions (chmod +r)")
        if pick or take_all:
            raise UsageError("--job and --all apply to folders of logs, not to one log file")
        for suffix, tool in COMPRESSED_LOG_SUFFIXES.items():
            if p.name.endswith(suffix):
                raise InputUnreadable(f"{p}: a compressed Darshan log ({suffix.rsplit('.', 1)[1]}), not read yet",
                                      hint=f"decompress it first ({tool} {p}) and report the .darshan file")
        if not (_is_log(p.name) or _has_darshan_header(p)):
            raise InputNotFound(f"{p}: {_what_file(p)}: not a Darshan log (no Darshan header) nor an iodiag job",
                                hint=f"give {ACCEPTED}")
        return Resolved("logs", logs=LogSet(paths=[str(p)], source=str(p)), how="log")
    tree = log_tree or default_log_tree(config)
    if target.isdigit() and tree:
        return Resolved("logs", logs=resolve_tree_job(target, tree), how="log tree")
    if log_tree:
        raise InputNotFound(f"{target}: not a scheduler job id", hint="--log-tree takes a numeric job id")
    if os.sep in target or target.endswith(LOG_SUFFIXES) or any(target.endswith(s) for s in COMPRESSED_LOG_SUFFIXES):
        raise InputNotFound(f"{target}: no such file or folder", hint="check the path")
    from ..jobs.store import find_job, jobs_dir

    try:
        record = find_job(target, root=store)
    except InputNotFound:
        if target == "last":
            raise
        raise InputNotFound(f"{target}: no such file or folder, and no job {target!r} in {jobs_dir(store)}",
                            hint=f"give {ACCEPTED}") from None
    if pick is not None and pick != record.id:
        raise UsageError(f"--job {pick}: {target} is the iodiag job {record.id}, not a folder of several jobs",
                         hint="leave out --job")
    return Resolved("job", record=record, how="job id")


def job_folder(profile) -> Path | None:
    """The folder of the iodiag job a profile was read from: its own, else the one its logs name
    (``iodiag_job`` in their metadata) when that id still resolves in the job store."""
    if profile.job.folder:  # loaded from its folder: never look the id up in a store (it may be another job's)
        return Path(profile.job.folder)
    jid = (profile.job.metadata or {}).get("iodiag_job")
    if not jid:
        return None
    try:
        from ..jobs.store import find_job

        return Path(find_job(jid).folder)
    except Exception:  # noqa: BLE001 - a job id that no longer resolves just means no record
        return None


def _job_at(folder: Path, *, pick: str | None) -> Resolved:
    from ..jobs.store import read_job

    record = read_job(folder)
    if pick is not None and pick != record.id:
        raise UsageError(f"--job {pick}: {folder} is the folder of the iodiag job {record.id} (one job)",
                         hint="leave out --job")
    return Resolved("job", record=record, how="job folder")


def _has_darshan_header(p: Path) -> bool:
    try:
        with open(p, "rb") as fh:
            head = fh.read(16)
    except OSError:
        return False
    return len(head) == 16 and DARSHAN_MAGIC in (int.from_bytes(head[8:], "little"), int.from_bytes(head[8:], "big"))


def _job_folder_above(p: Path) -> Path | None:
    for up in list(p.resolve().parents)[:3]:
        if (up / JOB_RECORD).is_file():
            return up
    return None


def _what_folder(folder: Path) -> tuple[str, str]:
    """What a folder without logs is (said after the error) and what to give instead."""
    packed = sorted(q.name for q in folder.iterdir() if q.is_file() and q.name.endswith(tuple(COMPRESSED_LOG_SUFFIXES)))
    if packed:
        tool = next(t for suf, t in COMPRESSED_LOG_SUFFIXES.items() if packed[0].endswith(suf))
        return (f"; it holds {len(packed)} compressed log{'s' if len(packed) != 1 else ''} ({packed[0]}"
                f"{', ...' if len(packed) > 1 else ''}), not read yet", f"decompress them first ({tool} {folder}/*)")
    job = _job_folder_above(folder)
    if job is not None:
        return f"; it is inside the iodiag job folder {job}", f"report the job: iodiag report {job}"
    try:
        inner = sum(1 for q in (folder / "jobs").iterdir() if (q / JOB_RECORD).is_file()) if (folder / "jobs").is_dir() else 0
    except OSError:
        inner = 0
    if inner:
        return (f"; it is an iodiag job store ({inner} job{'s' if inner != 1 else ''})",
                f"give one of its jobs: its folder under {folder / 'jobs'}, or its id with IODIAG_HOME={folder}")
    return ", and it is not an iodiag job folder (no job.json)", f"give {ACCEPTED}"


def _what_file(p: Path) -> str:
    """What a file that is not a log is, in a few words."""
    try:
        with open(p, "rb") as fh:
            head = fh.read(512)
        size = p.stat().st_size
    except OSError:
        return "a file"
    from ..collectors.embedded.format import MAGIC

    if head.startswith(MAGIC):
        job = _job_folder_above(p)
        return "an iodiag embedded trace" + (f" of the job folder {job}" if job else "")
    if not head:
        return "an empty file"
    kind = "a text file" if b"\0" not in head else "a file"
    return f"{kind} of {size:,} bytes"
