"""Walk a site's Darshan archive and group its logs into jobs.

Sites keep logs as ``ROOT/YYYY/M/D/<user>_<exe>_id<jobid>_....darshan``.  Any
other tree is accepted too: every directory holding logs is walked, and the
day then comes from each log's header instead of its path.

A *unit* is what one worker reads together: every log of one job in one
directory, grouped by the user and job id in the log names (logs whose name
does not follow Darshan's pattern are jobs on their own).  The walk is lazy:
one directory listing at a time, so memory does not grow with the archive.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass, field
from typing import Iterator

from ..analyzers.load import parse_log_name

LOG_SUFFIXES = (".darshan", ".darshan_partial")
_DAY_RE = re.compile(r"(?:^|/)(\d{4})/(\d{1,2})/(\d{1,2})$")


def _natural(name: str):
    return (0, int(name), "") if name.isdigit() else (1, 0, name)


def is_log_name(name: str) -> bool:
    return name.endswith(LOG_SUFFIXES)


def day_of_dir(rel: str) -> str | None:
    """'2017/3/20' -> '2017-03-20'; None when the directory is not a day folder."""
    m = _DAY_RE.search(rel.replace(os.sep, "/"))
    if not m:
        return None
    y, mo, d = (int(g) for g in m.groups())
    if not (1 <= mo <= 12 and 1 <= d <= 31):
        return None
    return f"{y:04d}-{mo:02d}-{d:02d}"


@dataclass(frozen=True)
class LogEntry:
    name: str
    size: int
    mtime_ns: int


@dataclass
class DirListing:
    rel: str  # path relative to the archive root, '/'-separated ('.' for the root)
    day: str | None
    entries: list[LogEntry]

    @property
    def signature(self) -> str:
        """Changes when a log is added, removed, grows or is rewritten."""
        h = hashlib.blake2b(digest_size=16)
        for e in self.entries:
            h.update(f"{e.name}\0{e.size}\0{e.mtime_ns}\n".encode("utf-8", "surrogateescape"))
        return h.hexdigest()


def iter_dirs(root: str | os.PathLike) -> Iterator[DirListing]:
    """Every directory under root that holds logs, in calendar order for day trees."""
    root = os.fspath(root)
    stack = [""]
    while stack:
        rel = stack.pop()
        path = os.path.join(root, rel) if rel else root
        try:
            with os.scandir(path) as it:
                items = list(it)
        except OSError:
            continue  # vanished or unreadable directory: nothing to ingest there
        subdirs, entries = [], []
        for de in items:
            try:
                if de.is_dir(follow_symlinks=False):
                    subdirs.append(de.name)
                elif is_log_name(de.name) and de.is_file():
                    st = de.stat()
                    entries.append(LogEntry(de.name, int(st.st_size), int(st.st_mtime_ns)))
            except OSError:
                continue
        if entries:
            entries.sort(key=lambda e: e.name)
            r = rel or "."
            yield DirListing(rel=r, day=day_of_dir(r), entries=entries)
        # depth-first, natural order (2017/3/9 before 2017/3/10)
        for name in sorted(subdirs, key=_natural, reverse=True):
            stack.append(f"{rel}/{name}" if rel else name)


@dataclass
class Unit:
    """All logs of one job in one directory: read together, one job row."""

    job_key: str
    dir: str
    day: str | None
    user: str
    job_id: str  # from the log names ('' when the name is not Darshan's pattern)
    paths: list[str] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)
    mtimes_ns: list[int] = field(default_factory=list)


def group_units(root: str, listing: DirListing, only: set[str] | None = None) -> list[Unit]:
    """Group a directory's logs into jobs; keep only the names in ``only`` when given
    (then every log of a job that has at least one such name is kept)."""
    units: dict[tuple[str, str], Unit] = {}
    base = root if listing.rel == "." else os.path.join(root, listing.rel)
    for e in listing.entries:
        parsed = parse_log_name(e.name)
        if parsed.get("jobid"):
            key = (parsed["user"], parsed["jobid"])
            user, jobid = parsed["user"], parsed["jobid"]
            job_key = f"{listing.rel}:{user}:{jobid}"
        else:
            key = ("", e.name)
            user, jobid = "", ""
            job_key = f"{listing.rel}:{e.name}"
        u = units.get(key)
        if u is None:
            u = units[key] = Unit(job_key=job_key, dir=listing.rel, day=listing.day, user=user, job_id=jobid)
        u.paths.append(os.path.join(base, e.name))
        u.names.append(e.name)
        u.sizes.append(e.size)
        u.mtimes_ns.append(e.mtime_ns)
    out = list(units.values())
    if only is not None:
        out = [u for u in out if any(n in only for n in u.names)]
    return out


def count_logs(root: str | os.PathLike) -> int:
    return sum(len(d.entries) for d in iter_dirs(root))
