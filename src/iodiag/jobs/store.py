"""The job store: one folder per run of ``iodiag run``.

Layout (``<root>`` is the store, see :func:`store_root`)::

    <root>/jobs/<id>/job.json        the job record (written atomically)
    <root>/jobs/<id>/logs/           Darshan logs (+ logs/mmap for mmap-log remnants)
    <root>/jobs/<id>/traces/         embedded-collector traces
    <root>/jobs/<id>/dask/           performance-report*.html, tasks*.jsonl, workers*.json
    <root>/jobs/<id>/meta/snapshot.json  array metadata, mounts, Lustre layouts of the paths the job touched

Ids are human readable and unique even for concurrent runs:
``2026-11-22-convert-7f3a`` (local date, a slug of the job name, 4 random hex
digits).  A job folder is claimed with ``mkdir`` (atomic: two runs can never
get the same folder) and ``job.json`` is only ever replaced with ``os.replace``
of a fully written and fsynced temporary file, so a crash leaves either the old
record or the new one, never half of one.

Nothing here prints; errors are :class:`~iodiag.errors.JobStoreError`,
:class:`~iodiag.errors.InputNotFound` and :class:`~iodiag.errors.AmbiguousInput`.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from ..errors import AmbiguousInput, InputNotFound, JobStoreError

SCHEMA_VERSION = 1
RECORD_NAME = "job.json"
ENV_HOME = "IODIAG_HOME"

# statuses of a job record
RUNNING = "running"  # iodiag is (or was, if it crashed) supervising the workload
COMPLETE = "complete"  # the workload ended and every expected artefact is there
PARTIAL = "partial"  # the workload ended but something is missing (killed process, lost logs)
ABANDONED = "abandoned"  # reported for RUNNING records whose supervisor is gone
FAILED = "failed"  # the workload could not be started (the record says why)


def store_root(root: str | os.PathLike | None = None) -> Path:
    """Where jobs live: ``root`` (the ``--store`` flag), else ``$IODIAG_HOME``,
    else ``$XDG_DATA_HOME/iodiag``, else ``~/.local/share/iodiag``."""
    if root:
        return Path(root).expanduser()
    env = os.environ.get(ENV_HOME)
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_DATA_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".local" / "share"
    return base / "iodiag"


def jobs_dir(root: str | os.PathLike | None = None) -> Path:
    return store_root(root) / "jobs"


_SLUG_RE = re.compile(r"[^a-z0-9]+")


def slugify(name: str, *, max_len: int = 24) -> str:
    """``convert.py`` -> ``convert``; ``My Run #3`` -> ``my-run-3``."""
    stem = name.rsplit("/", 1)[-1]
    for ext in (".py", ".sh", ".exe"):
        if stem.endswith(ext):
            stem = stem[: -len(ext)]
    slug = _SLUG_RE.sub("-", stem.lower()).strip("-")
    return (slug[:max_len].strip("-") or "job")


def atomic_write_json(path: Path, data: Any) -> None:
    """Write JSON to ``path`` so that readers see the old or the new file, never a mix."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(3)}.tmp")
    text = json.dumps(data, indent=2, sort_keys=False, default=str) + "\n"
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        try:
            tmp.unlink()
        except OSError:
            pass
        raise JobStoreError(f"cannot write {path}: {exc.strerror or exc}",
                            hint="check that the job store is writable (set --store or $IODIAG_HOME)") from None
    try:  # make the rename durable; not fatal when the directory cannot be opened
        fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:
        pass


@dataclass
class JobRecord:
    """The content of ``job.json`` plus the folder it lives in.

    ``data`` holds the JSON document; the properties below are conveniences.
    Keys (schema 1): schema, id, name, command, cwd, env, host, user, collector,
    collector_version, versions, dask, status, partial, partial_reasons,
    start_s, end_s, wall_s, exit_code, signal, supervisor_pid, darshan,
    artefacts, processes, missing_processes, recovered_logs, notes.
    """

    path: Path
    data: dict[str, Any] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return self.data.get("id", self.path.name)

    @property
    def folder(self) -> Path:
        return self.path

    @property
    def status(self) -> str:
        st = self.data.get("status", RUNNING)
        if st == RUNNING and not _supervisor_alive(self.data):
            return ABANDONED
        return st

    @property
    def partial(self) -> bool:
        return bool(self.data.get("partial")) or self.status in (ABANDONED,)

    @property
    def start_s(self) -> float:
        return float(self.data.get("start_s") or 0.0)

    def logs_dir(self) -> Path:
        return self.path / "logs"

    def traces_dir(self) -> Path:
        return self.path / "traces"

    def dask_dir(self) -> Path:
        return self.path / "dask"

    def save(self) -> None:
        atomic_write_json(self.path / RECORD_NAME, self.data)

    def update(self, **values: Any) -> None:
        self.data.update(values)
        self.save()


def _supervisor_alive(data: dict[str, Any]) -> bool:
    pid = data.get("supervisor_pid")
    if not pid or data.get("host") != socket.gethostname():
        return True  # cannot tell from here; trust the record
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def create_job(*, name: str, root: str | os.PathLike | None = None, when: float | None = None,
               record: dict[str, Any] | None = None) -> JobRecord:
    """Claim a new, unique job folder and write its first ``job.json`` (status running)."""
    base = jobs_dir(root)
    try:
        base.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise JobStoreError(f"cannot create the job store {base}: {exc.strerror or exc}",
                            hint="set --store or $IODIAG_HOME to a writable folder") from None
    when = time.time() if when is None else when
    day = time.strftime("%Y-%m-%d", time.localtime(when))
    slug = slugify(name)
    for _ in range(64):
        job_id = f"{day}-{slug}-{secrets.token_hex(2)}"
        folder = base / job_id
        try:
            folder.mkdir()
        except FileExistsError:
            continue
        except OSError as exc:
            raise JobStoreError(f"cannot create job folder {folder}: {exc.strerror or exc}",
                                hint="set --store or $IODIAG_HOME to a writable folder") from None
        break
    else:  # pragma: no cover - 64 collisions in a 65,536 space
        raise JobStoreError(f"could not find a free job id under {base}", hint="remove old jobs")
    data = {"schema": SCHEMA_VERSION, "id": job_id, "name": name, "status": RUNNING, "partial": False,
            "start_s": when, "host": socket.gethostname(), "supervisor_pid": os.getpid()}
    data.update(record or {})
    data["id"] = job_id
    rec = JobRecord(path=folder, data=data)
    rec.save()
    return rec


def read_job(folder: str | os.PathLike) -> JobRecord:
    """Read the record of one job folder."""
    folder = Path(folder)
    path = folder / RECORD_NAME
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputNotFound(f"{path} does not exist", hint="this folder is not an iodiag job; list jobs with `iodiag jobs`") from None
    except OSError as exc:
        raise JobStoreError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise JobStoreError(f"{path} is not valid JSON ({exc.msg} at line {exc.lineno})",
                            hint="the record is damaged; remove the job folder or restore job.json") from None
    if not isinstance(data, dict) or "id" not in data:
        raise JobStoreError(f"{path} is not an iodiag job record", hint="remove the job folder")
    return JobRecord(path=folder, data=data)


def iter_jobs(root: str | os.PathLike | None = None, *, damaged: list | None = None) -> Iterator[JobRecord]:
    """Every readable job of the store, unordered.  Damaged records are skipped; with ``damaged`` (a list) each is
    appended to it as (folder, the error reading it), so a caller can say what it left out."""
    base = jobs_dir(root)
    try:
        entries = list(os.scandir(base))
    except FileNotFoundError:
        return
    except NotADirectoryError:
        raise JobStoreError(f"{base} is a file, not the job store folder",
                            hint="point --store or $IODIAG_HOME at a folder") from None
    except OSError as exc:
        raise JobStoreError(f"cannot list {base}: {exc.strerror or exc}") from None
    for entry in entries:
        if not entry.is_dir() or entry.name.startswith("."):
            continue
        try:
            yield read_job(entry.path)
        except InputNotFound:
            continue  # a folder without job.json: not a job (e.g. being created)
        except JobStoreError as exc:
            if damaged is not None:
                damaged.append((Path(entry.path), exc))


def list_jobs(root: str | os.PathLike | None = None, *, damaged: list | None = None) -> list[JobRecord]:
    """Jobs of the store, newest first (``damaged``: as for ``iter_jobs``)."""
    return sorted(iter_jobs(root, damaged=damaged), key=lambda r: (r.start_s, r.id), reverse=True)


def find_job(ref: str, *, root: str | os.PathLike | None = None) -> JobRecord:
    """Resolve what a user typed to one job record.

    ``ref`` is ``last`` (the newest job), a full job id, a unique prefix of
    one, a job name given to ``iodiag run --name`` (the newest job of that name), or the path of a job
    folder (one holding ``job.json``).  ``root`` is
    the store (default: :func:`store_root`).

    Raises ``InputNotFound`` when nothing matches (exit 3) and
    ``AmbiguousInput`` (exit 5, ``choices`` = the matching ids) when a
    prefix names several jobs.
    """
    ref = ref.strip()
    p = Path(ref).expanduser()
    if (p / RECORD_NAME).is_file():
        return read_job(p)
    base = jobs_dir(root)
    if ref == "last":
        bad = []
        jobs = list_jobs(root, damaged=bad)
        if not jobs and bad:
            raise bad[0][1]
        if not jobs:
            raise InputNotFound(f"no jobs in {base}", hint="run a workload first: iodiag run script.py")
        return jobs[0]
    if ref and "/" not in ref and (base / ref / RECORD_NAME).is_file():
        return read_job(base / ref)
    bad: list = []
    jobs = list_jobs(root, damaged=bad) if ref else []
    matches = [r for r in jobs if r.id.startswith(ref)]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        named = [r for r in jobs if r.data.get("name") == ref]  # `iodiag run --name NAME`: the newest of that name
        if named:
            return named[0]
        hit = [exc for folder, exc in bad if folder.name.startswith(ref)]
        if len(hit) == 1 or (hit and ref == "last"):
            raise hit[0]  # the job is there but its record is damaged: say so, not "no job"
        raise InputNotFound(f"no job {ref!r} in {base}", hint="list jobs with `iodiag jobs` (or use `last`)")
    ids = [r.id for r in matches]
    shown = ", ".join(ids[:5]) + (" ..." if len(ids) > 5 else "")
    raise AmbiguousInput(f"{ref!r} matches {len(ids)} jobs in {base}: {shown}",
                         hint="type more of the id", choices=ids)
