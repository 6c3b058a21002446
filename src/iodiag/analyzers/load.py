"""Darshan logs of one job -> one JobProfile (times on one epoch clock)."""

from __future__ import annotations

import operator
import os
import re
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from .nputil import unique
from ..config import Config
from ..errors import NoUsableData
from ..profile import (
    OP,
    OPS_MODULE,
    JobInfo,
    JobProfile,
    LoadIssue,
    ProgramInfo,
    Table,
    empty_table,
)
from .batches import OpsBuilder, OpsSource, chunks, streams
from .readers.darshan import ALL_MODULES, COUNTER_MODULES, dxt_columns, dxt_segment_keys
from .readers.darshan_decode import MAP, NAMES
from .readers.dxt_ops import DxtProcessOps
from .readers.isolate import LogResult, read_logs
from .log_loss import module_loss, partial_issue, plausible_nprocs

# <user>_<exe>_id<jobid>[-<pid>]_<date>-<secs>-<hash>_<n>.darshan
LOG_NAME_RE = re.compile(r"^(?P<user>.+?)_(?P<exe>[^_]+(?:_[^_]+)*?)_id(?P<jobid>\d+)(?:-(?P<pid>\d+))?_(?P<rest>.*)$")


def parse_log_name(path: str) -> dict[str, str]:
    m = LOG_NAME_RE.match(os.path.basename(path))
    return m.groupdict() if m else {}


_first, _second = operator.itemgetter(0), operator.itemgetter(1)
_LOOKUPS: dict[tuple, Callable[[list[str]], tuple[np.ndarray, np.ndarray]]] = {}


def _fs_lookup(mounts: list[tuple[str, str]]):
    """A function: paths -> (mount point, file-system type) object columns, longest mount first.

    Kept per mount table: in a site ingest consecutive logs (and every log of a job) come
    from machines with the same 20-60 mounts, so the ordering and the per-directory
    answers are reused instead of rebuilt for each profile.
    """
    key = tuple(mounts)
    hit = _LOOKUPS.get(key)
    if hit is not None:
        return hit
    if len(_LOOKUPS) >= 16:
        _LOOKUPS.clear()
    ordered = [(mnt, mnt.rstrip("/") + "/", fstype) for mnt, fstype in sorted(mounts, key=lambda m: len(m[0]), reverse=True)]
    by_dir: dict[str, tuple[str, str]] = {}
    mount_paths = {m for m, _, _ in ordered}

    # by_dir: directory key ("dir/" for "dir/name", "" for a name without a slash) -> (mount, type)
    def find(path: str) -> tuple[str, str]:
        for mnt, prefix, fstype in ordered:
            if path == mnt or path.startswith(prefix) or mnt == "/":
                return mnt, fstype
        return "", ""

    def lookup(paths: list[str]) -> tuple[np.ndarray, np.ndarray]:
        if len(by_dir) >= 4096:
            by_dir.clear()
        if not mount_paths.intersection(paths):
            return lookup_dirs(paths)
        get = by_dir.get
        mnt_col = np.empty(len(paths), dtype=object)
        fs_col = np.empty(len(paths), dtype=object)
        for k, path in enumerate(paths):
            # files of one directory share a mount (site ingest: 2,048 files per log are common);
            # so do names without a directory (records whose name the log lacks: "<unnamed ...>")
            d, sep, _ = path.rpartition("/")
            if path in mount_paths:
                hit = find(path)
            else:
                key = d + sep  # "dir/", or "" without a slash (the keys lookup_dirs uses)
                hit = get(key)
                if hit is None:
                    hit = by_dir[key] = find(path)
            mnt_col[k], fs_col[k] = hit
        return mnt_col, fs_col

    def lookup_dirs(paths: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """``lookup`` when no path is a mount point, with C-level maps instead of a Python step per path: the
        directory key of each path, find() for the first path of each directory not seen before, then one
        dict lookup per path."""
        keys = [p[:p.rfind("/") + 1] for p in paths]
        new = set(keys).difference(by_dir)
        if new:
            first = dict(zip(reversed(keys), reversed(paths)))  # key -> its first path
            for k in new:  # find() is pure: the order does not matter
                by_dir[k] = find(first[k])
        hits = list(map(by_dir.__getitem__, keys))
        return _objects(list(map(_first, hits))), _objects(list(map(_second, hits)))

    _LOOKUPS[key] = lookup
    return lookup


def _log_start(h: dict[str, Any]) -> float:
    return h["start_sec"] + h["start_nsec"] * 1e-9


def _derived_end(data: dict[str, Any], start: float) -> float | None:
    """Latest time any record saw I/O (for logs whose header has no end time)."""
    latest = 0.0
    for mod in ("POSIX", "STDIO", "MPI-IO"):
        rec = data["mods"].get(mod)
        if rec is None or not len(rec["file_id"]):
            continue
        names = rec["fcounter_names"]
        cols = [i for i, n in enumerate(names) if n.endswith("_END_TIMESTAMP")]
        if cols:
            latest = max(latest, float(np.max(rec["fcounters"][:, cols])))
    for mod in ("DXT_POSIX", "DXT_MPIIO"):
        rec = data["mods"].get(mod)
        if rec is not None and len(rec["segments"]):
            latest = max(latest, float(dxt_columns(rec)["end"].max()))
    return start + latest if latest > 0 else None


def build_profile(results: Sequence[LogResult], *, job_id: str | None = None, obfuscated_names: bool = False) -> JobProfile:
    """Merge per-log results into one profile; raise NoUsableData when none loaded.

    The logs are folded one at a time (``_JobFold``, the reader contract of ``analyzers/batches.py``): each adds its
    processes, counter rows, DXT operations (into ops columns allocated once) and heatmap bins; the job's files
    table and metadata are made once at the end."""
    issues: list[LoadIssue] = [
        LoadIssue(path=r.path, kind=r.error_kind or "unreadable", cause=r.error or "unknown",
                  next_step=r.next_step or "the log is damaged; re-run the job or recover it with darshan-util")
        for r in results if r.data is None]
    good = [r for r in results if r.data is not None]
    if not good:
        first = issues[0] if issues else None
        where = first.path if first else "(no logs)"
        specific = next((r.next_step for r in results if r.data is None and r.next_step), None)
        raise NoUsableData(
            f"no log of this job could be read: {where}: {first.cause if first else 'nothing to read'}",
            hint=specific or "check the file is a complete Darshan log (darshan-parser FILE); logs of killed processes may be empty",
        )
    n_ops = sum(len(rec["segments"]) for r in good for mod in ("DXT_POSIX", "DXT_MPIIO")
                if (rec := r.data["mods"].get(mod)) is not None)
    # a job too large to hold keeps its DXT operations as a source: each process re-made from the decoded segments in
    # table order, in bounded batches, at each reading (readers/dxt_ops.py), one process or many
    stream = streams(n_ops)
    fold = _JobFold(issues, n_ops=n_ops, stream=stream)
    for li, r in enumerate(good):
        fold.add_log(li, r)
    return fold.profile(results, good, job_id)


class _JobFold:
    """The pieces of one job's profile, accumulated log by log."""

    def __init__(self, issues: list[LoadIssue], n_ops: int, stream: bool = False) -> None:
        self.issues = issues
        self.proc_cols: dict[str, list[np.ndarray]] = {k: [] for k in ("proc", "log", "rank", "pid", "host", "exe", "log_path",
                                                                       "start_s", "end_s", "partial")}
        self.counters: dict[str, list[dict[str, np.ndarray]]] = {}
        self.blocks: dict[str, list[tuple]] = {}  # module -> the 2-D counter arrays its columns are taken from, per log
        # a job too large to hold keeps its DXT operations as a source, re-made one process at a time from the
        # decoded segments (batches.OpsSource): 32 bytes per segment held instead of a ~58-byte ops row plus sorts
        self.ops: OpsBuilder | OpsSource = OpsSource() if stream else OpsBuilder(n_ops)
        self.dxt_file_ids: list[np.ndarray] = []  # files with DXT segments (a source has no ops["file_id"] to read)
        self.heat_parts: list[dict[str, np.ndarray]] = []
        self.names: dict[int, str] = {}
        self.mounts: list[tuple[str, str]] = []
        self.seen_mounts: set[tuple[str, str]] = set()
        self.modules: list[str] = []
        self.partial_modules: list[str] = []
        self.programs: dict[str, ProgramInfo] = {}
        self.starts: list[float] = []
        self.ends: list[float] = []
        self.runtime_derived = False
        self.proc_offset = 0
        self.versions: set[str] = set()
        self.formats: set[str] = set()
        self.jobids: set[int] = set()
        self.users: set[str] = set()
        self.uids: set[int] = set()
        self.metadata: dict[str, str] = {}

    # -- one log ----------------------------------------------------------------------------------------
    def add_log(self, li: int, r: LogResult) -> None:
        d = r.data
        nprocs = plausible_nprocs(d, r.path, self.issues)
        start, end = self._times(r)
        exe, pid = self._header_facts(r, nprocs)
        partial = self._module_status(r)
        self._processes(li, r, nprocs, start, end, exe, pid, partial)
        self._check_ranks(r, nprocs)
        offset = self.proc_offset

        def to_proc(ranks: np.ndarray) -> np.ndarray:
            return np.where((ranks >= 0) & (ranks < nprocs), ranks + offset, -1)

        self._counter_rows(li, d, to_proc)
        self._dxt_ops(d, to_proc, start)
        self._heatmap(d, to_proc, start)
        self.proc_offset += nprocs

    def _times(self, r: LogResult) -> tuple[float, float]:
        d, h = r.data, r.data["header"]
        start = _log_start(h)
        end = h["end_sec"] + h["end_nsec"] * 1e-9
        if h["end_sec"] <= 0 or end < start:
            derived = _derived_end(d, start)
            end = derived if derived is not None else start
            self.runtime_derived = True
            self.issues.append(LoadIssue(path=r.path, kind="no-end-time", cause="the log header has no end time (the process was "
                                         "killed); run time is derived from the last recorded I/O"))
        self.starts.append(start)
        self.ends.append(end)
        return start, end

    def _header_facts(self, r: LogResult, nprocs: int) -> tuple[str, int]:
        d, h = r.data, r.data["header"]
        self.names.update(d.get("names", {}))
        for m in h["mounts"]:
            if m not in self.seen_mounts:  # a set: real logs list 20-60 mounts
                self.seen_mounts.add(m)
                self.mounts.append(m)
        if h["metadata"].get("lib_ver"):
            self.versions.add(h["metadata"]["lib_ver"])
        self.formats.add(h["log_format"])
        self.jobids.add(h["jobid"])
        self.uids.add(h["uid"])
        self.metadata.update(h["metadata"])
        parsed = parse_log_name(r.path)
        if parsed.get("user") and not parsed["user"].isdigit():
            self.users.add(parsed["user"])
        pid = int(parsed["pid"]) if parsed.get("pid") else -1
        exe_full = h["exe"]
        exe = exe_full.split(" ", 1)[0] if exe_full else ""
        args = exe_full.split(" ", 1)[1] if " " in exe_full else ""
        prog = self.programs.setdefault(exe, ProgramInfo(exe=exe, args=args, nprocs=0, logs=[]))
        prog.nprocs += nprocs
        prog.logs.append(r.path)
        return exe, pid

    def _module_status(self, r: LogResult) -> bool:
        """Modules present and partial; whether this log lost anything."""
        d, h = r.data, r.data["header"]
        log_partial = False
        for mod, info in h["modules"].items():
            if mod not in self.modules:
                self.modules.append(mod)
            if info["partial"]:
                log_partial = True
                if mod not in self.partial_modules:
                    self.partial_modules.append(mod)
                self.issues.append(partial_issue(r.path, mod))
        for mod, cause in d["losses"]:
            if mod == NAMES:  # names only: every number is there, some files are unnamed
                self.issues.append(LoadIssue(path=r.path, kind="names-lost", cause=cause,
                                             next_step="files whose names were lost are shown as <unnamed ...>"))
                continue
            if mod == MAP:  # the container's map, repaired; what it cost any module is that module's own issue
                self.issues.append(LoadIssue(path=r.path, kind="damaged-header", cause=cause,
                                             next_step="the modules listed as lost, if any, say what it cost"))
                continue
            log_partial = True
            if mod not in self.partial_modules:
                self.partial_modules.append(mod)
            self.issues.append(module_loss(r.path, h, mod, cause))
        return log_partial

    def _processes(self, li: int, r: LogResult, nprocs: int, start: float, end: float, exe: str, pid: int,
                   partial: bool) -> None:
        d, h = r.data, r.data["header"]
        # hosts per rank from DXT records, when present
        hosts = None
        for mod in ("DXT_POSIX", "DXT_MPIIO"):
            rec = d["mods"].get(mod)
            if rec is not None:
                hosts = hosts or [""] * nprocs
                for rk, host in zip(rec["rec_rank"].tolist(), rec["rec_host"].tolist()):
                    if 0 <= rk < nprocs and not hosts[rk]:
                        hosts[rk] = host
        if nprocs == 1 and not (hosts and hosts[0]):
            hosts = [h["metadata"].get("hostname", "")]
        pc = self.proc_cols
        rank_ids = np.arange(nprocs, dtype="i8")
        pc["proc"].append(rank_ids + self.proc_offset)
        pc["log"].append(np.full(nprocs, li, "i8"))
        pc["rank"].append(rank_ids)
        pc["pid"].append(np.full(nprocs, pid if nprocs == 1 else -1, "i8"))
        pc["host"].append(_objects(hosts) if hosts is not None else _filled(nprocs, ""))
        pc["exe"].append(_filled(nprocs, exe))
        pc["log_path"].append(_filled(nprocs, r.path))
        pc["start_s"].append(np.full(nprocs, start, "f8"))
        pc["end_s"].append(np.full(nprocs, end, "f8"))
        pc["partial"].append(np.full(nprocs, partial, "?"))

    def _check_ranks(self, r: LogResult, nprocs: int) -> None:
        d = r.data
        bad_ranks = [int(x) for mod in COUNTER_MODULES if (rec := d["mods"].get(mod)) is not None
                     for x in rec["rank"][(rec["rank"] < -1) | (rec["rank"] >= nprocs)][:1].tolist()]
        if bad_ranks:
            n_bad = sum(int(((rec["rank"] < -1) | (rec["rank"] >= nprocs)).sum()) for mod in COUNTER_MODULES
                        if (rec := d["mods"].get(mod)) is not None)
            self.issues.append(LoadIssue(path=r.path, kind="damaged-record",
                                         cause=f"{n_bad:,} record(s) carry a rank outside 0..{nprocs - 1} (e.g. {bad_ranks[0]:,}); "
                                               "they are counted as records shared by all ranks of the log",
                                         next_step="per-process numbers for those records are spread evenly"))

    def _counter_rows(self, li: int, d: dict[str, Any], to_proc: Callable[[np.ndarray], np.ndarray]) -> None:
        for mod in COUNTER_MODULES:
            rec = d["mods"].get(mod)
            if rec is None:
                continue
            cols = {"log": np.full(len(rec["file_id"]), li, "i8"), "proc": to_proc(rec["rank"]), "rank": rec["rank"], "file_id": rec["file_id"]}
            if "file_rec_id" in rec:
                cols["file_rec_id"] = rec["file_rec_id"]
            cols.update(zip(rec["counter_names"], rec["counters"].T))
            cols.update(zip(rec["fcounter_names"], rec["fcounters"].T))
            self.counters.setdefault(mod, []).append(cols)
            self.blocks.setdefault(mod, []).append(((tuple(rec["counter_names"]), rec["counters"]),
                                                    (tuple(rec["fcounter_names"]), rec["fcounters"])))
        lus = d["mods"].get("LUSTRE")
        if lus is not None:
            self.counters.setdefault("LUSTRE", []).append({
                "log": np.full(len(lus["file_id"]), li, "i8"), "proc": to_proc(lus["rank"]), "rank": lus["rank"],
                "file_id": lus["file_id"], "stripe_size": lus["stripe_size"], "stripe_count": lus["stripe_count"], "osts": lus["osts"],
            })

    def _dxt_ops(self, d: dict[str, Any], to_proc: Callable[[np.ndarray], np.ndarray], start: float) -> None:
        """DXT segments into the ops columns, in bounded batches (the segments' times are relative to the log); for
        a source, each process's segments registered to be re-made when asked (``_dxt_source``)."""
        if isinstance(self.ops, OpsSource):
            self._dxt_source(d, to_proc, start)
            return
        for mod, code in (("DXT_POSIX", OPS_MODULE["POSIX"]), ("DXT_MPIIO", OPS_MODULE["MPIIO"])):
            rec = d["mods"].get(mod)
            if rec is None or not len(rec["segments"]):
                continue
            seg, keys = dxt_columns(rec), dxt_segment_keys(rec)
            for sl in chunks(len(rec["segments"])):
                fid, rank, is_write = keys(sl.start, sl.stop)
                self.ops.add(_dxt_batch(seg, sl, to_proc(rank), fid, is_write, code, start))

    def _dxt_source(self, d: dict[str, Any], to_proc: Callable[[np.ndarray], np.ndarray], start: float) -> None:
        """Register each process of the log with the ops source: its DXT records (POSIX, then MPI-IO, each in record
        order), whose segments ``_dxt_process_batches`` makes into ops batches on each reading."""
        parts: dict[int, list] = {}
        for mod, code in (("DXT_POSIX", OPS_MODULE["POSIX"]), ("DXT_MPIIO", OPS_MODULE["MPIIO"])):
            rec = d["mods"].get(mod)
            if rec is None or not len(rec["segments"]):
                continue
            per = rec["rec_writes"] + rec["rec_reads"]
            has = per > 0
            self.dxt_file_ids.append(unique(rec["rec_file_id"][has]))
            first = np.cumsum(per) - per  # each record's first segment row
            procs = to_proc(rec["rec_rank"])
            order = np.argsort(procs, kind="stable")  # records of one process together, in record order
            order = order[has[order]]
            ps = procs[order]
            cut = np.flatnonzero(ps[1:] != ps[:-1]) + 1
            for idx in np.split(order, cut):
                parts.setdefault(int(procs[idx[0]]), []).append((code, rec, idx, first[idx]))
        for proc in sorted(parts):  # re-made in table order, in bounded batches, at each reading
            self.ops.add(proc, DxtProcessOps(parts[proc], proc, start), _dxt_process_batches(parts[proc], proc, start),
                         ordered=True)

    def _heatmap(self, d: dict[str, Any], to_proc: Callable[[np.ndarray], np.ndarray], start: float) -> None:
        hm = d["mods"].get("HEATMAP")
        if hm is None or not len(hm["nbins"]):
            return
        nb = hm["nbins"]
        rec_mod = []
        for fid in hm["rec_file_id"].tolist():
            name = d.get("names", {}).get(fid, "")
            m = name.split(":", 1)[1] if name.startswith("heatmap:") else "POSIX"
            rec_mod.append(OPS_MODULE.get(m.replace("-", ""), OPS_MODULE["POSIX"]))
        rec_idx = np.repeat(np.arange(len(nb)), nb)
        first = np.concatenate([[0], np.cumsum(nb)[:-1]])
        bins = np.arange(int(nb.sum())) - np.repeat(first, nb)
        width = hm["bin_width_s"][rec_idx]
        self.heat_parts.append({
            "proc": to_proc(hm["rec_rank"])[rec_idx], "module": np.asarray(rec_mod, "i1")[rec_idx], "bin": bins.astype("i8"),
            "start_s": start + bins * width, "end_s": start + (bins + 1) * width,
            "read_bytes": hm["read_bins"], "write_bytes": hm["write_bins"],
        })

    # -- the job ----------------------------------------------------------------------------------------
    def _files(self, ops: Table) -> Table:
        """Every id seen in a counters/ops table, with its path and file system."""
        id_parts = [c["file_id"] for parts in self.counters.values() for c in parts]
        if isinstance(ops, OpsSource):
            id_parts += self.dxt_file_ids
        elif len(ops):
            id_parts.append(unique(ops["file_id"]))
        fid_arr = unique(np.concatenate(id_parts).astype("u8", copy=False)) if id_parts else np.zeros(0, "u8")
        get_name = self.names.get
        ids = fid_arr.tolist()
        paths = list(map(get_name, ids))  # C-level; the few unnamed ids (None) are fixed below
        if None in paths:
            paths = [n if n is not None else f"<unnamed {i:016x}>" for i, n in zip(ids, paths)]
        mount_col, fs_col = _fs_lookup(self.mounts)(paths)
        return Table._trusted({"file_id": fid_arr, "path": _objects(paths), "mount": mount_col, "fs_type": fs_col})

    def _job(self, results: Sequence[LogResult], good: Sequence[LogResult], job_id: str | None) -> JobInfo:
        first = good[0].data["header"]
        start, end = min(self.starts), max(self.ends)
        prog_list = list(self.programs.values())
        main = max(prog_list, key=lambda p: p.nprocs)
        if job_id is None:
            job_id = str(next(iter(self.jobids))) if len(self.jobids) == 1 else "+".join(str(j) for j in sorted(self.jobids))
        users = self.users
        return JobInfo(
            job_id=job_id,
            uid=next(iter(self.uids)) if len(self.uids) == 1 else None,
            user=next(iter(users)) if len(users) == 1 else (",".join(sorted(users)) or None),
            exe=main.exe if len(prog_list) == 1 else " + ".join(p.exe for p in prog_list),
            args=main.args if len(prog_list) == 1 else "",
            nprocs=int(self.proc_offset),
            start_s=start,
            end_s=end,
            runtime_s=max(end - start, 0.0) if len(good) > 1 or self.runtime_derived else float(first["runtime_s"]),
            runtime_derived=self.runtime_derived,
            darshan_version=",".join(sorted(self.versions)) or None,
            log_format=",".join(sorted(self.formats)),
            collector="darshan",
            modules=self.modules,
            partial_modules=self.partial_modules,
            mounts=self.mounts,
            metadata=self.metadata,
            programs=prog_list,
            logs=[r.path for r in results],
            blind_spots=[],
        )

    def profile(self, results: Sequence[LogResult], good: Sequence[LogResult], job_id: str | None) -> JobProfile:
        ops = self.ops if isinstance(self.ops, OpsSource) else self.ops.finish()
        return JobProfile(
            job=self._job(results, good, job_id),
            processes=Table._trusted({k: np.concatenate(v) if len(v) > 1 else v[0] for k, v in self.proc_cols.items()}),
            files=self._files(ops),
            counters={m: _counter_table(parts, self.blocks.get(m)) for m, parts in self.counters.items()},
            ops=ops,
            heatmap=Table.concat(Table(h) for h in self.heat_parts) if self.heat_parts else empty_table("heatmap"),
            issues_seen=self.issues,
        )


def _dxt_process_batches(parts: list, proc: int, start: float):
    """One process's DXT operations, in bounded batches: for each module part (code, module record, the process's
    record indices, their first segment rows), every record's segments in order (its writes, then its reads)."""
    for code, rec, idx, first in parts:
        w, n = rec["rec_writes"][idx], rec["rec_writes"][idx] + rec["rec_reads"][idx]
        total = int(n.sum())
        before = np.cumsum(n) - n  # each record's first position among this process's segments
        pos = np.arange(total, dtype=np.int64)
        within = pos - np.repeat(before, n)  # position inside its record
        rows = np.repeat(first, n) + within
        is_write = within < np.repeat(w, n)
        fid = np.repeat(rec["rec_file_id"][idx], n)
        del pos, within
        seg = dxt_columns(rec)
        for sl in chunks(total):
            yield _dxt_batch(seg, rows[sl], proc, fid[sl], is_write[sl], code, start)


def _dxt_batch(seg: dict[str, np.ndarray], rows, proc, fid: np.ndarray, is_write: np.ndarray, code: int,
               start: float) -> dict[str, Any]:
    """Ops columns of DXT segments ``rows`` (a slice or indices) of a module's segment columns ``seg``, with their
    process, file and direction; times from the log's start ``start``."""
    return {
        "proc": proc, "thread": -1, "file_id": fid, "module": code,
        "op": np.where(is_write, OP["write"], OP["read"]),
        "offset": seg["offset"][rows], "length": seg["length"][rows],
        "start_s": seg["start"][rows] + start, "end_s": seg["end"][rows] + start,
    }


def _counter_table(parts: list[dict[str, np.ndarray]], blocks: list[tuple] | None) -> Table:
    if len(parts) > 1:
        return Table.concat(Table._trusted(c) for c in parts)
    t = Table._trusted(parts[0])
    if blocks and len(blocks) == 1:
        t._blocks = blocks[0]
    return t


def _filled(n: int, value: Any) -> np.ndarray:
    """A 1-D object array of n times value (np.full with dtype=object is ~10x slower)."""
    out = np.empty(n, dtype=object)
    out.fill(value)
    return out


def _objects(values: list) -> np.ndarray:
    """A 1-D object array of the values (np.asarray would make a 2-D array of tuples or a str dtype)."""
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out


def load_job(
    paths: Sequence[str],
    *,
    config: Config | None = None,
    modules: Iterable[str] = ALL_MODULES,
    job_id: str | None = None,
    progress: Callable[[int], None] | None = None,
    while_reading: Callable[[], None] | None = None,
    prefetched=None,
) -> JobProfile:
    """Read every log of one job (isolated, with a timeout each) into a profile (``while_reading``,
    ``prefetched``: see ``read_logs``)."""
    cfg = config or Config()
    results = list(read_logs(paths, modules, timeout_s=cfg.reader.timeout_s, isolate=cfg.reader.isolate, progress=progress,
                             while_reading=while_reading, prefetched=prefetched))
    return build_profile(results, job_id=job_id)


def read_headers(paths: Sequence[str], *, config: Config | None = None) -> list[LogResult]:
    """Headers only: for listing the jobs in a folder."""
    cfg = config or Config()
    return list(read_logs(paths, (), names=False, timeout_s=cfg.reader.timeout_s, isolate=cfg.reader.isolate))
