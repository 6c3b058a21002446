"""Read the embedded collector's traces into a ``JobProfile``.

A job's trace folder holds one ``<host>-<pid>-<start_ns>.iot`` (fixed-size records,
read with one ``np.fromfile``) and one ``.names`` file per process.  The
result carries the same tables as a Darshan log with DXT: ``ops`` (one row
per operation), ``counters["POSIX"]`` / ``counters["STDIO"]`` derived from
the ops with Darshan's counter names and semantics, ``processes`` and
``files``, so every detector works on either collector.

Counter timestamps (``*_F_*_TIMESTAMP``) are seconds since the start of the
process that made the record, as Darshan's are relative to its log's start
(each process here is its own log).
"""

from __future__ import annotations

import json
import os
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from ...collectors.embedded.format import (
    HEADER_DTYPE, HEADER_SIZE, HF_CAPPED, HF_EXEC, HF_EXITED, MAGIC, OPC, RECORD_DTYPE, RF_FAILED,
)
from ...collectors.embedded.format import read_names as _read_names
from ...errors import InputNotFound
from ...profile import JobInfo, JobProfile, LoadIssue, ProgramInfo, Table
from .. import batches as _batches
from ..batches import OpsBuilder, OpsSource, chunks, streams
from .embedded_counters import module_counters
from .embedded_ops import Scan, _ops_batch, _reload_ops, fold_counters, module_rows, note_file_ids, ordered_ops

__all__ = ["load_traces", "BLIND_SPOTS", "raw_records"]

BLIND_SPOTS = [
    "memory-mapped I/O (mmap): page faults are not calls; POSIX_MMAPS stays 0",
    "statically linked programs and raw syscall() / io_uring / libaio I/O: nothing to interpose",
    "glibc-internal calls: STDIO buffers flushed by glibc are counted as the fread/fwrite calls the program made, not as syscalls",
    "paths under the excluded prefixes (system trees and the Python installation), like Darshan's default exclusions",
    "readdir is one record per directory listing (opendir..end), not one per getdents64 syscall",
    "file offsets of O_APPEND writes and fseek(SEEK_END) are unknown until the next seek",
    "fscanf byte counts",
    "access()/faccessat existence checks, chmod/utime/truncate and other calls outside open/stat/read/write/seek/"
    "fsync/readdir/mkdir/rename/unlink (Darshan does not count them either)",
    "processes that make no traced call (they leave no trace file), children started without LD_PRELOAD "
    "in their environment, and setuid programs",
    "MPI-IO, HDF5 and PnetCDF library-level modules (only POSIX and STDIO)",
]

# ---------------------------------------------------------------------------
# raw trace files
# ---------------------------------------------------------------------------
def trace_header(path: Path) -> tuple[np.void, int]:
    """(header, number of records to read) of one ``.iot`` trace, without reading the records."""
    size = path.stat().st_size
    if size < HEADER_SIZE:
        raise ValueError(f"{size} bytes, shorter than the {HEADER_SIZE}-byte header")
    hdr = np.fromfile(path, dtype=HEADER_DTYPE, count=1)[0]
    if bytes(hdr["magic"]) != MAGIC:
        raise ValueError("not an iodiag embedded trace (bad magic)")
    if int(hdr["rec_size"]) != RECORD_DTYPE.itemsize:
        raise ValueError(f"record size {int(hdr['rec_size'])} is not {RECORD_DTYPE.itemsize}: written by another collector version")
    return hdr, min(int(hdr["count"]), int(hdr["cap"]), (size - HEADER_SIZE) // RECORD_DTYPE.itemsize)


def raw_records(path: Path) -> tuple[np.void, np.ndarray]:
    """(header, records) of one ``.iot`` trace; records still in flight at a kill are dropped."""
    hdr, n = trace_header(path)
    return hdr, np.fromfile(path, dtype=RECORD_DTYPE, count=n, offset=HEADER_SIZE)


def _cstr(b: bytes) -> str:
    return bytes(b).split(b"\0", 1)[0].decode("utf-8", "surrogateescape")


# ---------------------------------------------------------------------------
# the job
# ---------------------------------------------------------------------------
def _mounts(trace_dir: Path) -> list[tuple[str, str]]:
    try:
        lines = (trace_dir / "mounts.txt").read_text().splitlines()
    except OSError:
        return []
    out = []
    for line in lines:
        parts = line.split()
        if len(parts) >= 3:
            out.append((parts[1].replace("\\040", " "), parts[2]))
    return out


def _fs_of(paths: list[str], mounts: list[tuple[str, str]]) -> tuple[list[str], list[str]]:
    ordered = sorted(mounts, key=lambda m: len(m[0]), reverse=True)
    mnt, fst = [], []
    for p in paths:
        for mp, ft in ordered:
            if p == mp or p.startswith(mp.rstrip("/") + "/"):
                mnt.append(mp)
                fst.append(ft)
                break
        else:
            mnt.append("")
            fst.append("")
    return mnt, fst


def _capped_issue(path: Path, h: np.void, n_recs: int, last_ns: int | None, dropped: int) -> LoadIssue:
    """What a record cap dropped, and where: every operation after the last one recorded (ending at ``last_ns``)."""
    where = ""
    if n_recs and last_ns is not None:
        last = (last_ns - int(h["start_ns"])) * 1e-9
        where = f" (every operation after {last:.3f} s into process {int(h['pid'])}; its trace is {path.name})"
    return LoadIssue(
        path=str(path), kind="partial-module", module="POSIX",
        cause=f"the record cap of {int(h['cap'])} per process was reached: {dropped} later operations were not recorded"
              + where,
        next_step="counts are lower bounds; raise the cap (IODIAG_MAX_RECORDS, or max_records= when preparing the run)")


def _fold_process(i: int, ok: np.ndarray, proc_start: np.ndarray, builder: OpsBuilder | OpsSource,
                  counter_parts: dict[str, list[Table]], ids: set[int], reload=None) -> None:
    """One process's successful records into the job: its ops (in bounded chunks, into the table's builder, or
    only their summaries into the source, which re-reads them with ``reload`` when a consumer asks), its counters
    per module (exact per process: every counter row is one (process, file)) and the file ids it names."""
    if isinstance(builder, OpsSource):
        builder.add(i, reload, (_ops_batch(i, ok[sl]) for sl in chunks(len(ok))))
    else:
        for sl in chunks(len(ok)):
            builder.add(_ops_batch(i, ok[sl]))
    if not len(ok):
        return
    note_file_ids(ok, ids)
    for mod, r in module_rows(ok):
        extra = None
        if mod == "POSIX":
            rn = (r["op"] == OPC["rename"]) & (r["offset"] != 0)
            extra = (np.full(int(rn.sum()), i, "i8"), r["offset"][rn].view("u8"), r["file_id"][rn])
        t0 = r["start_ns"].astype("f8") * 1e-9
        t1 = (r["start_ns"] + r["dur_ns"]).astype("f8") * 1e-9
        counter_parts[mod].append(Table(module_counters(mod, np.full(len(r), i, "i8"), r["file_id"], r["op"], r["flags"],
                                                  r["offset"], r["length"], t0, t1, proc_start, extra)))
        del r, t0, t1


_PROC_COLUMNS = ("proc", "log", "rank", "pid", "ppid", "host", "exe", "args", "log_path", "start_s", "end_s", "partial",
                 "end_kind", "exit_status", "records", "dropped")
_UNREADABLE_TRACE = "this process's I/O is missing from the job; the trace file is damaged"


def load_traces(trace_dir: Path, *, job_id: str) -> JobProfile:
    """Read every process trace in ``trace_dir`` into one ``JobProfile``."""
    trace_dir = Path(trace_dir)
    if not trace_dir.is_dir():
        raise InputNotFound(f"{trace_dir}: no such trace folder",
                            hint="pass the traces/ folder of a job run with the embedded collector")
    meta_path = trace_dir / "collector.json"
    meta: dict[str, Any] = {}
    if meta_path.is_file():
        try:
            meta = json.loads(meta_path.read_text())
        except (OSError, ValueError):
            meta = {}
    issues: list[LoadIssue] = []
    headers, counts, paths = _trace_headers(trace_dir, issues)
    names: dict[int, str] = {}
    for p in paths:
        names.update(_read_names(p.with_suffix(".names")))

    proc_start = np.array([int(h["start_ns"]) * 1e-9 for h in headers], dtype="f8")
    proc_cols: dict[str, list] = {k: [] for k in _PROC_COLUMNS}
    totals = {"failed": 0, "inflight": 0, "dropped": 0, "capped": False}
    # the batch contract (analyzers/batches.py): one process at a time, its ops converted in bounded chunks into
    # columns allocated once; counters and file ids folded per process
    # a job too large to hold keeps its ops as a source re-read one process at a time (batches.OpsSource)
    builder = OpsSource() if streams(sum(counts)) else OpsBuilder(sum(counts))
    counter_parts: dict[str, list[Table]] = {"POSIX": [], "STDIO": []}
    ids: set[int] = set()
    for i, (h, n, p) in enumerate(zip(headers, counts, paths)):
        _read_process(i, h, n, p, proc_start, builder, counter_parts, ids, proc_cols, issues, totals)

    ops = builder if isinstance(builder, OpsSource) else builder.finish()
    counters = {mod: (parts[0] if len(parts) == 1 else Table.concat(parts)) for mod, parts in counter_parts.items() if parts}
    mounts = _mounts(trace_dir)
    files = _files_table(ids, names, mounts)
    job = _job_info(trace_dir, job_id, meta, headers, paths, proc_cols, counters, mounts, totals)
    processes = Table({
        k: np.asarray(v, dtype=object if k in ("host", "exe", "args", "log_path", "end_kind") else
                      ("?" if k == "partial" else ("f8" if k in ("start_s", "end_s") else "i8")))
        for k, v in proc_cols.items()
    })
    return JobProfile(job=job, processes=processes, files=files, counters=counters, ops=ops, issues_seen=issues)


def _trace_headers(trace_dir: Path, issues: list[LoadIssue]) -> tuple[list[np.void], list[int], list[Path]]:
    """(headers, record counts, paths) of the readable traces in ``trace_dir``, by process start (then pid); an
    unreadable trace, or none at all, is an issue."""
    traces = sorted(trace_dir.glob("*.iot"))
    found = []
    for p in traces:
        try:
            hdr, n = trace_header(p)
        except (OSError, ValueError) as exc:
            issues.append(LoadIssue(path=str(p), kind="unreadable", cause=str(exc), next_step=_UNREADABLE_TRACE))
            continue
        found.append((hdr, n, p))
    found.sort(key=lambda t: (int(t[0]["start_ns"]), int(t[0]["pid"])))
    if not traces:
        issues.append(LoadIssue(path=str(trace_dir), kind="missing-log",
                                cause="no process left a trace: the workload did no traced I/O, or LD_PRELOAD was dropped (setuid or static binaries)",
                                next_step="check that the workload reads or writes files outside the excluded system paths"))
    return [t[0] for t in found], [t[1] for t in found], [t[2] for t in found]


def _read_process(i: int, h: np.void, n: int, p: Path, proc_start: np.ndarray, builder: OpsBuilder | OpsSource,
                  counter_parts: dict[str, list[Table]], ids: set[int], proc_cols: dict[str, list],
                  issues: list[LoadIssue], totals: dict[str, Any]) -> None:
    """Process i's trace into the job: its row of ``proc_cols``, its ops, counters and file ids (``_fold_process``),
    what it lost (``issues``) and the job's counts of failed, in-flight and dropped operations (``totals``).
    A process of more than ``CHUNK_OPS`` records in a job kept as a source is read in chunks (``_stream_process``):
    its records are never held at once."""
    if isinstance(builder, OpsSource) and n > _batches.CHUNK_OPS:
        try:
            _stream_process(i, h, n, p, proc_start, builder, counter_parts, ids, proc_cols, issues, totals)
            return
        except (OSError, ValueError) as exc:  # vanished or shrank while it was read: no partial process is kept
            from ...errors import InputUnreadable

            raise InputUnreadable(f"{p}: {exc}", hint="report the job again once nothing writes its traces") from None
    try:
        recs = np.fromfile(p, dtype=RECORD_DTYPE, count=n, offset=HEADER_SIZE)
    except (OSError, ValueError) as exc:  # vanished or shrank between the header and the records
        issues.append(LoadIssue(path=str(p), kind="unreadable", cause=str(exc), next_step=_UNREADABLE_TRACE))
        recs = np.zeros(0, RECORD_DTYPE)
        n = 0
    valid = recs["op"] != 0
    inflight = int((~valid).sum())
    recs = recs[valid] if inflight else recs
    failed = (recs["flags"] & RF_FAILED) != 0
    n_failed = int(failed.sum())
    last_ns = int((recs["start_ns"] + recs["dur_ns"]).max()) if len(recs) else None
    _process_row(i, h, p, proc_start, len(recs), inflight, n_failed, last_ns, proc_cols, issues, totals)
    ok = recs[~failed] if n_failed else recs
    del recs, valid, failed
    _fold_process(i, ok, proc_start, builder, counter_parts, ids, reload=partial(_reload_ops, p, n, i))


def _stream_process(i: int, h: np.void, n: int, p: Path, proc_start: np.ndarray, builder: OpsSource,
                    counter_parts: dict[str, list[Table]], ids: set[int], proc_cols: dict[str, list],
                    issues: list[LoadIssue], totals: dict[str, Any]) -> None:
    """``_read_process`` of a process too large to hold: one reading in chunks for its row, its file ids and the
    job-wide summaries of its ops, a second in time order for its counters (``embedded_ops.fold_counters``); its ops
    are registered with the source as bounded batches in table order."""
    scan = Scan(_batches.CHUNK_OPS)
    ids_here: set[int] = set()
    plan_box: list = []

    def reload(columns=None):
        return ordered_ops(p, n, i, plan_box[0], columns)

    builder.add(i, reload, scan.batches(i, p, n, ids_here), ordered=True)
    plan_box.append(scan.plan())
    _process_row(i, h, p, proc_start, scan.n_recs, scan.inflight, scan.n_failed, scan.last_ns, proc_cols, issues, totals)
    ids.update(ids_here)
    for mod, table in fold_counters(p, n, i, plan_box[0], scan, float(proc_start[i])):
        counter_parts[mod].append(table)


def _process_row(i: int, h: np.void, p: Path, proc_start: np.ndarray, n_recs: int, inflight: int, n_failed: int,
                 last_ns: int | None, proc_cols: dict[str, list], issues: list[LoadIssue],
                 totals: dict[str, Any]) -> None:
    """Process i's row of ``proc_cols``, its issues (killed, capped) and its part of the job's ``totals``, from the
    counts of its records: recorded (``n_recs``), lost in flight, failed, and the end of its last record."""
    totals["failed"] += n_failed
    totals["inflight"] += inflight
    flags = int(h["flags"])
    dropped = int(h["dropped"])
    totals["dropped"] += dropped
    capped = bool(flags & HF_CAPPED) or dropped > 0
    totals["capped"] |= capped
    killed = not (flags & (HF_EXITED | HF_EXEC))
    end_ns = max(int(h["end_ns"]), int(h["start_ns"]) if last_ns is None else last_ns)  # atexit handlers may do I/O
    argv = bytes(h["cmdline"])[: int(h["cmdline_len"])].split(b"\0")
    argv = [a.decode("utf-8", "surrogateescape") for a in argv if a]
    row = {"proc": i, "log": i, "rank": 0, "pid": int(h["pid"]), "ppid": int(h["ppid"]), "host": _cstr(h["host"]),
           "exe": _cstr(h["exe"]), "args": " ".join(argv[1:]), "log_path": str(p), "start_s": proc_start[i],
           "end_s": end_ns * 1e-9, "partial": killed or capped,
           "end_kind": "exec" if flags & HF_EXEC else ("exit" if flags & HF_EXITED else "killed"),
           "exit_status": int(h["exit_status"]), "records": n_recs, "dropped": dropped}
    for k in _PROC_COLUMNS:
        proc_cols[k].append(row[k])
    if killed:
        issues.append(LoadIssue(
            path=str(p), kind="killed",
            cause=(f"process {int(h['pid'])} ended without running its exit handlers (a signal such as SIGTERM or SIGKILL, or "
                   "os._exit as multiprocessing pool workers do); "
                   f"its trace holds {n_recs} operations up to the kill"
                   + (f", {inflight} in flight were lost" if inflight else "")),
            next_step="numbers for this process stop at the kill; the rest of the job is complete"))
    if capped:
        issues.append(_capped_issue(p, h, n_recs, last_ns, dropped))


def _files_table(ids: set[int], names: dict[int, str], mounts: list[tuple[str, str]]) -> Table:
    ids.discard(0)
    fid = sorted(ids)
    fpaths = [names.get(i, f"<unnamed {i:016x}>") for i in fid]
    mnt, fst = _fs_of(fpaths, mounts)
    return Table({"file_id": np.asarray(fid, dtype="u8"), "path": np.asarray(fpaths, dtype=object),
                  "mount": np.asarray(mnt, dtype=object), "fs_type": np.asarray(fst, dtype=object)})


def _job_info(trace_dir: Path, job_id: str, meta: dict[str, Any], headers: list[np.void], paths: list[Path],
              proc_cols: dict[str, list], counters: dict[str, Table], mounts: list[tuple[str, str]],
              totals: dict[str, Any]) -> JobInfo:
    """The job's metadata: its root process (the first whose parent left no trace), its programs, run time and
    what the collector lost."""
    nproc = len(headers)
    pidset = set(proc_cols["pid"])
    roots = [i for i in range(nproc) if int(headers[i]["ppid"]) not in pidset] or list(range(nproc))
    root = roots[0] if roots else None
    programs: dict[str, ProgramInfo] = {}
    for i in range(nproc):
        exe = proc_cols["exe"][i]
        prog = programs.setdefault(exe, ProgramInfo(exe=exe, args=proc_cols["args"][i], nprocs=0, logs=[]))
        prog.nprocs += 1
        prog.logs.append(proc_cols["log_path"][i])
    start = float(min(proc_cols["start_s"])) if nproc else None
    end = float(max(proc_cols["end_s"])) if nproc else None
    modules = [m for m in ("POSIX", "STDIO") if m in counters]
    uid = os.stat(trace_dir).st_uid
    try:
        import pwd

        user = pwd.getpwuid(uid).pw_name
    except (ImportError, KeyError):
        user = None
    return JobInfo(
        job_id=job_id,
        uid=uid,
        user=user,
        exe=proc_cols["exe"][root] if root is not None else "",
        args=proc_cols["args"][root] if root is not None else "",
        nprocs=nproc,
        start_s=start,
        end_s=end,
        runtime_s=(end - start) if nproc else None,
        runtime_derived=any(k == "killed" for k in proc_cols["end_kind"]),
        collector="embedded",
        collector_version=str(meta.get("collector_version") or _current_version()),
        log_format=f"iodiag-embedded-{int(headers[0]['version'])}" if headers else None,
        modules=modules,
        partial_modules=list(modules) if totals["capped"] else [],
        mounts=mounts,
        metadata={
            "collector": "embedded", "max_records": str(meta.get("max_records", "")),
            "failed_ops": str(totals["failed"]), "dropped_records": str(totals["dropped"]),
            "inflight_lost": str(totals["inflight"]), "hostname": proc_cols["host"][root] if root is not None else "",
        },
        programs=list(programs.values()),
        logs=[str(p) for p in paths],
        blind_spots=list(BLIND_SPOTS),
    )


def _current_version() -> str:
    from ...collectors.embedded import version

    return version()
