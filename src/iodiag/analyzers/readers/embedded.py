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

from ..nputil import unique
from ...collectors.embedded.format import (
    HEADER_DTYPE, HEADER_SIZE, HF_CAPPED, HF_EXEC, HF_EXITED, MAGIC, MODULE_POSIX, MODULE_STDIO,
    OPC, RECORD_DTYPE, RF_FAILED, RF_OFFSET_UNKNOWN,
)
from ...collectors.embedded.format import read_names as _read_names
from ...errors import InputNotFound
from ...profile import OP, OPS_MODULE, JobInfo, JobProfile, LoadIssue, ProgramInfo, Table
from ..batches import OpsBuilder, OpsSource, chunks, streams
from .embedded_counters import module_counters

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

# raw code -> ops-table code
_OPC_TO_OP = np.full(256, OP["other"], dtype="i1")
for _raw, _op in (("read", "read"), ("write", "write"), ("open", "open"), ("fdopen", "open"), ("opendir", "open"),
                  ("close", "close"), ("closedir", "close"), ("stat", "stat"), ("seek", "seek"), ("fsync", "fsync"),
                  ("fdatasync", "fsync"), ("readdir", "readdir"), ("mkdir", "mkdir"), ("rename", "rename"),
                  ("unlink", "unlink"), ("rmdir", "unlink")):
    _OPC_TO_OP[OPC[_raw]] = OP[_op]


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


def _capped_issue(path: Path, h: np.void, recs: np.ndarray, dropped: int) -> LoadIssue:
    """What a record cap dropped, and where: every operation after the last one recorded."""
    where = ""
    if len(recs):
        last = (int((recs["start_ns"] + recs["dur_ns"]).max()) - int(h["start_ns"])) * 1e-9
        where = f" (every operation after {last:.3f} s into process {int(h['pid'])}; its trace is {path.name})"
    return LoadIssue(
        path=str(path), kind="partial-module", module="POSIX",
        cause=f"the record cap of {int(h['cap'])} per process was reached: {dropped} later operations were not recorded"
              + where,
        next_step="counts are lower bounds; raise the cap (IODIAG_MAX_RECORDS, or max_records= when preparing the run)")


def _ops_batch(proc: int, r: np.ndarray, columns=None) -> dict[str, np.ndarray]:
    """ops columns (all, or only ``columns``) of a chunk of one process's successful records."""
    want = (lambda c: True) if columns is None else columns.__contains__
    out: dict[str, Any] = {}
    op = _OPC_TO_OP[r["op"]]
    if want("offset") or want("length"):
        is_rw = (op == OP["read"]) | (op == OP["write"])
        if want("offset"):
            off = r["offset"]
            offset = np.where(is_rw & ((r["flags"] & RF_OFFSET_UNKNOWN) == 0), off, -1)
            seek = op == OP["seek"]
            if seek.any():
                offset[seek] = off[seek]
            out["offset"] = offset
        if want("length"):
            is_rw |= op == OP["readdir"]
            out["length"] = np.where(is_rw, r["length"], 0)
    make = {
        "proc": lambda: proc, "thread": lambda: r["tid"], "file_id": lambda: r["file_id"],
        "module": lambda: np.where(r["module"] == MODULE_STDIO, OPS_MODULE["STDIO"], OPS_MODULE["POSIX"]),
        "op": lambda: op, "start_s": lambda: r["start_ns"].astype("f8") * 1e-9,
        "end_s": lambda: (r["start_ns"] + r["dur_ns"]).astype("f8") * 1e-9,
    }
    out.update({c: f() for c, f in make.items() if want(c)})
    return out


def _reload_ops(path: Path, n: int, i: int, columns=None):
    """The ops batches (all columns, or only ``columns``) of process i re-read from its trace: the records
    ``load_traces`` kept (recorded, not failed), converted chunk by chunk as on the first reading."""
    recs = np.fromfile(path, dtype=RECORD_DTYPE, count=n, offset=HEADER_SIZE)
    keep = (recs["op"] != 0) & ((recs["flags"] & RF_FAILED) == 0)
    ok = recs if bool(keep.all()) else recs[keep]
    del recs, keep
    for sl in chunks(len(ok)):
        yield _ops_batch(i, ok[sl], columns)


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
    opc = ok["op"]
    ids.update(unique(ok["file_id"]).tolist())
    ren = opc == OPC["rename"]
    if ren.any():
        ids.update(unique(ok["offset"][ren].view("u8")).tolist())
    for mod, code in (("POSIX", MODULE_POSIX), ("STDIO", MODULE_STDIO)):
        sel = ok["module"] == code
        if not sel.any():
            continue
        r = ok if sel.all() else ok[sel]  # one module: no copy of the records
        extra = None
        if mod == "POSIX":
            rn = (r["op"] == OPC["rename"]) & (r["offset"] != 0)
            extra = (np.full(int(rn.sum()), i, "i8"), r["offset"][rn].view("u8"), r["file_id"][rn])
        t0 = r["start_ns"].astype("f8") * 1e-9
        t1 = (r["start_ns"] + r["dur_ns"]).astype("f8") * 1e-9
        counter_parts[mod].append(Table(module_counters(mod, np.full(len(r), i, "i8"), r["file_id"], r["op"], r["flags"],
                                                        r["offset"], r["length"], t0, t1, proc_start, extra)))
        del r, t0, t1


def load_traces(trace_dir: Path, *, job_id: str) -> JobProfile:
    """Read every process trace in ``trace_dir`` into one ``JobProfile``."""
    trace_dir = Path(trace_dir)
    if not trace_dir.is_dir():
        raise InputNotFound(f"{trace_dir}: no such trace folder",
                            hint="pass the traces/ folder of a job run with the embedded collector")
    meta = _collector_meta(trace_dir)
    issues: list[LoadIssue] = []
    headers, counts, paths = _trace_headers(trace_dir, issues)
    names: dict[int, str] = {}
    for p in paths:
        names.update(_read_names(p.with_suffix(".names")))
    procs = _Processes([int(h["start_ns"]) * 1e-9 for h in headers])
    # the batch contract (analyzers/batches.py): one process at a time, its ops converted in bounded chunks into
    # columns allocated once; counters and file ids folded per process
    # a job too large to hold keeps its ops as a source re-read one process at a time (batches.OpsSource)
    builder = OpsSource() if streams(sum(counts)) else OpsBuilder(sum(counts))
    counter_parts: dict[str, list[Table]] = {"POSIX": [], "STDIO": []}
    ids: set[int] = set()
    for i, (h, n, p) in enumerate(zip(headers, counts, paths)):
        ok, n = procs.add(i, h, n, p, issues)
        _fold_process(i, ok, procs.start, builder, counter_parts, ids, reload=partial(_reload_ops, p, n, i))
        del ok

    ops = builder if isinstance(builder, OpsSource) else builder.finish()
    counters = {mod: (parts[0] if len(parts) == 1 else Table.concat(parts)) for mod, parts in counter_parts.items() if parts}
    mounts = _mounts(trace_dir)
    files = _files_table(ids, names, mounts)
    job = _job_info(job_id, trace_dir, meta, headers, paths, procs, [m for m in ("POSIX", "STDIO") if m in counters],
                    mounts)
    return JobProfile(job=job, processes=procs.table(), files=files, counters=counters, ops=ops, issues_seen=issues)


def _collector_meta(trace_dir: Path) -> dict[str, Any]:
    """What the collector wrote about the run (``collector.json``: version, record cap); {} without one."""
    meta_path = trace_dir / "collector.json"
    if meta_path.is_file():
        try:
            return json.loads(meta_path.read_text())
        except (OSError, ValueError):
            return {}
    return {}


def _trace_headers(trace_dir: Path, issues: list[LoadIssue]) -> tuple[list[np.void], list[int], list[Path]]:
    """(header, records to read, path) of every readable trace, in process start order (then pid); unreadable
    traces and a folder without any become issues."""
    traces = sorted(trace_dir.glob("*.iot"))
    headers: list[np.void] = []
    counts: list[int] = []
    paths: list[Path] = []
    for p in traces:
        try:
            hdr, n = trace_header(p)
        except (OSError, ValueError) as exc:
            issues.append(LoadIssue(path=str(p), kind="unreadable", cause=str(exc),
                                    next_step="this process's I/O is missing from the job; the trace file is damaged"))
            continue
        headers.append(hdr)
        counts.append(n)
        paths.append(p)
    order = sorted(range(len(headers)), key=lambda i: (int(headers[i]["start_ns"]), int(headers[i]["pid"])))
    headers = [headers[i] for i in order]
    counts = [counts[i] for i in order]
    paths = [paths[i] for i in order]
    if not traces:
        issues.append(LoadIssue(path=str(trace_dir), kind="missing-log",
                                cause="no process left a trace: the workload did no traced I/O, or LD_PRELOAD was dropped (setuid or static binaries)",
                                next_step="check that the workload reads or writes files outside the excluded system paths"))
    return headers, counts, paths


class _Processes:
    """The processes table of a job, one row per trace as it is read, and the job's tallies of what was lost."""

    _COLUMNS = ("proc", "log", "rank", "pid", "ppid", "host", "exe", "args", "log_path", "start_s", "end_s", "partial",
                "end_kind", "exit_status", "records", "dropped")

    def __init__(self, start_s: list[float]) -> None:
        self.start = np.array(start_s, dtype="f8")  # each process's start (its counters' timestamps are relative to it)
        self.cols: dict[str, list] = {k: [] for k in self._COLUMNS}
        self.failed = self.inflight = self.dropped = 0
        self.capped = False

    def add(self, i: int, h: np.void, n: int, p: Path, issues: list[LoadIssue]) -> tuple[np.ndarray, int]:
        """Read process i's records, add its row and its issues (killed, capped, unreadable); (its successful
        records, the number of records its trace holds, 0 when they could not be read)."""
        try:
            recs = np.fromfile(p, dtype=RECORD_DTYPE, count=n, offset=HEADER_SIZE)
        except (OSError, ValueError) as exc:  # vanished or shrank between the header and the records
            issues.append(LoadIssue(path=str(p), kind="unreadable", cause=str(exc),
                                    next_step="this process's I/O is missing from the job; the trace file is damaged"))
            recs = np.zeros(0, RECORD_DTYPE)
            n = 0
        valid = recs["op"] != 0
        inflight = int((~valid).sum())
        recs = recs[valid] if inflight else recs
        failed = (recs["flags"] & RF_FAILED) != 0
        n_failed = int(failed.sum())
        self.failed += n_failed
        self.inflight += inflight
        flags = int(h["flags"])
        dropped = int(h["dropped"])
        self.dropped += dropped
        capped = bool(flags & HF_CAPPED) or dropped > 0
        self.capped |= capped
        killed = not (flags & (HF_EXITED | HF_EXEC))
        self._row(i, h, p, recs, killed or capped, dropped)
        if killed:
            issues.append(LoadIssue(
                path=str(p), kind="killed",
                cause=(f"process {int(h['pid'])} ended without running its exit handlers (a signal such as SIGTERM or SIGKILL, or "
                       "os._exit as multiprocessing pool workers do); "
                       f"its trace holds {len(recs)} operations up to the kill"
                       + (f", {inflight} in flight were lost" if inflight else "")),
                next_step="numbers for this process stop at the kill; the rest of the job is complete"))
        if capped:
            issues.append(_capped_issue(p, h, recs, dropped))
        return (recs[~failed] if n_failed else recs), n

    def _row(self, i: int, h: np.void, p: Path, recs: np.ndarray, partial: bool, dropped: int) -> None:
        flags = int(h["flags"])
        last_ns = int((recs["start_ns"] + recs["dur_ns"]).max()) if len(recs) else int(h["start_ns"])
        end_ns = max(int(h["end_ns"]), last_ns)  # atexit handlers may still do I/O after exit() was called
        argv = bytes(h["cmdline"])[: int(h["cmdline_len"])].split(b"\0")
        argv = [a.decode("utf-8", "surrogateescape") for a in argv if a]
        row = {"proc": i, "log": i, "rank": 0, "pid": int(h["pid"]), "ppid": int(h["ppid"]), "host": _cstr(h["host"]),
               "exe": _cstr(h["exe"]), "args": " ".join(argv[1:]), "log_path": str(p), "start_s": self.start[i],
               "end_s": end_ns * 1e-9, "partial": partial,
               "end_kind": "exec" if flags & HF_EXEC else ("exit" if flags & HF_EXITED else "killed"),
               "exit_status": int(h["exit_status"]), "records": len(recs), "dropped": dropped}
        for k, v in row.items():
            self.cols[k].append(v)

    def table(self) -> Table:
        return Table({
            k: np.asarray(v, dtype=object if k in ("host", "exe", "args", "log_path", "end_kind") else
                          ("?" if k == "partial" else ("f8" if k in ("start_s", "end_s") else "i8")))
            for k, v in self.cols.items()
        })


def _files_table(ids: set[int], names: dict[int, str], mounts: list[tuple[str, str]]) -> Table:
    """The files the job's records name (file id 0 is none), with their paths and the mount each is under."""
    ids.discard(0)
    fid = sorted(ids)
    fpaths = [names.get(i, f"<unnamed {i:016x}>") for i in fid]
    mnt, fst = _fs_of(fpaths, mounts)
    return Table({"file_id": np.asarray(fid, dtype="u8"), "path": np.asarray(fpaths, dtype=object),
                  "mount": np.asarray(mnt, dtype=object), "fs_type": np.asarray(fst, dtype=object)})


def _job_info(job_id: str, trace_dir: Path, meta: dict, headers: list[np.void], paths: list[Path], procs: _Processes,
              modules: list[str], mounts: list[tuple[str, str]]) -> JobInfo:
    """The job: its root process (the first whose parent is not traced) gives the program, the processes span
    its time, programs group the processes by executable."""
    cols = procs.cols
    nproc = len(headers)
    pidset = {int(h["pid"]) for h in headers}
    roots = [i for i in range(nproc) if int(headers[i]["ppid"]) not in pidset] or list(range(nproc))
    root = roots[0] if roots else None
    programs: dict[str, ProgramInfo] = {}
    for i in range(nproc):
        exe = cols["exe"][i]
        prog = programs.setdefault(exe, ProgramInfo(exe=exe, args=cols["args"][i], nprocs=0, logs=[]))
        prog.nprocs += 1
        prog.logs.append(cols["log_path"][i])
    start = float(min(cols["start_s"])) if nproc else None
    end = float(max(cols["end_s"])) if nproc else None
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
        exe=cols["exe"][root] if root is not None else "",
        args=cols["args"][root] if root is not None else "",
        nprocs=nproc,
        start_s=start,
        end_s=end,
        runtime_s=(end - start) if nproc else None,
        runtime_derived=any(k == "killed" for k in cols["end_kind"]),
        collector="embedded",
        collector_version=str(meta.get("collector_version") or _current_version()),
        log_format=f"iodiag-embedded-{int(headers[0]['version'])}" if headers else None,
        modules=modules,
        partial_modules=list(modules) if procs.capped else [],
        mounts=mounts,
        metadata={
            "collector": "embedded", "max_records": str(meta.get("max_records", "")),
            "failed_ops": str(procs.failed), "dropped_records": str(procs.dropped), "inflight_lost": str(procs.inflight),
            "hostname": cols["host"][root] if root is not None else "",
        },
        programs=list(programs.values()),
        logs=[str(p) for p in paths],
        blind_spots=list(BLIND_SPOTS),
    )


def _current_version() -> str:
    from ...collectors.embedded import version

    return version()
