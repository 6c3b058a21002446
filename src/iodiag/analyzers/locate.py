"""Find the Darshan logs that make up one job: a log, a folder, or a job id in a site tree."""

from __future__ import annotations

import glob
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from ..config import Config
from ..errors import AmbiguousInput, InputNotFound, InputUnreadable, UsageError
from .load import parse_log_name, read_headers

LOG_SUFFIXES = (".darshan", ".darshan_partial")


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
    return name.endswith(LOG_SUFFIXES) or ".darshan" in name


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
        raise InputNotFound(f"{folder}: the folder holds no Darshan logs (*.darshan)", hint="point at a folder of .darshan files, or at one log")
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


def resolve_target(target: str, *, log_tree: str | None = None, pick: str | None = None, take_all: bool = False, config: Config | None = None) -> LogSet | None:
    """A Darshan log, a folder of logs, or a scheduler job id in a log tree.

    Returns None when ``target`` is none of these, so the caller can try the job store.
    """
    p = Path(target)
    if p.exists():
        if p.is_dir():
            if not os.access(p, os.R_OK | os.X_OK):
                raise InputUnreadable(f"{p}: folder cannot be read (permission denied)", hint="check its permissions")
            return resolve_folder(p, pick=pick, take_all=take_all, config=config)
        if not os.access(p, os.R_OK):
            raise InputUnreadable(f"{p}: cannot be read (permission denied)", hint="check the file's permissions (chmod +r)")
        if pick or take_all:
            raise UsageError("--job and --all apply to folders of logs, not to one log file")
        return LogSet(paths=[str(p)], source=str(p))
    tree = log_tree or default_log_tree(config)
    if target.isdigit() and tree:
        return resolve_tree_job(target, tree)
    if log_tree:
        raise InputNotFound(f"{target}: not a scheduler job id", hint="--log-tree takes a numeric job id")
    if os.sep in target or target.endswith(LOG_SUFFIXES):
        raise InputNotFound(f"{target}: no such file or folder", hint="check the path")
    return None
