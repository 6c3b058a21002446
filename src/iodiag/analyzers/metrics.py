"""Derived numbers shared by the detectors (NumPy group-bys over profile tables).

Every detector needs the same few aggregates: per-file and per-process op
counts, bytes and I/O seconds, the access-size histogram, and the job's total
I/O time that cost shares are divided by.  ``metrics_of(profile)`` computes
them once per profile (cached while the profile lives) so that twenty
detectors do not each regroup 600k DXT segments.  Cheaper pieces are kept on
the profile too (``memo``): counter columns and module sums (``counters.py``),
the group order of the operations (``opgroups.py``), file paths and Lustre
layouts (here).  The names detectors import from those modules are re-exported
here, so ``from ..metrics import pcol`` keeps working.

Conventions
-----------
* "POSIX level" rows are POSIX and STDIO counter records together: the calls
  that reach the file system.  MPI-IO time includes the POSIX time beneath it,
  so it is never added to the total.
* ``total_io_s`` (process-seconds) = read + write + metadata seconds at the
  POSIX level.  When a profile has no POSIX/STDIO counters (embedded collector
  with ops only), it is the summed duration of the ``ops`` rows instead.
* Shared-file records (``rank == -1``) sum their counters over all ranks of
  their log.  Per-process arrays give the record's slowest rank
  (``*_SLOWEST_RANK``) its own bytes and seconds and spread the rest evenly
  over the other ranks of that log (``shared_spread_s`` says how much).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from ..profile import OP, JobProfile, Table
from . import batches
# re-exported: the detectors import these from here
from .counters import (SIZE_BUCKETS, col, level_rows, level_total, memo, module_sums, pcol, size_hist,  # noqa: F401
                       small_bucket_count)
from .nputil import isin, median, unique  # noqa: F401  (median, isin: detectors import them from here)
from .opgroups import _group_order, merge_counts, mode_of, ops_group_chunks, previous_rows  # noqa: F401


def nprocs_of(profile: JobProfile) -> int:
    """Processes of the job as the detectors count them: the header's count or the processes seen, at least 1."""
    return max(int(profile.job.nprocs), len(profile.processes), 1)


def posix_reopens(profile: JobProfile) -> np.ndarray:
    """Per POSIX record: its opens beyond each process's first open of the file (a record Darshan reduced over
    all ranks, rank -1, had one first open per process).  Darshan restarts its offset at each open, so as many
    accesses as there are re-opens can look like backward steps without any random access."""
    t = profile.module("POSIX")
    opens = pcol(profile, "POSIX", "POSIX_OPENS", "f8").clip(0)
    firsts = np.where(t["proc"] >= 0, 1.0, float(nprocs_of(profile)))
    return np.maximum(opens - firsts, 0.0)


_FEW_FILES = 64  # up to this many files, a Python loop over them costs less than a dozen NumPy calls


def file_paths(profile: JobProfile) -> tuple[np.ndarray, np.ndarray]:
    """(path of each ``metrics_of(profile).file_ids`` entry ("" when unnamed), whether it is stdin/stdout/stderr),
    once per profile."""
    d = memo(profile)
    if "file_paths" not in d:
        fids = metrics_of(profile).file_ids
        if len(fids) <= _FEW_FILES:
            paths = profile.path_of()
            p = np.array([paths.get(f, "") for f in fids.tolist()], dtype=object)
            std = np.isin(p, ("<STDIN>", "<STDOUT>", "<STDERR>")) if len(p) else np.zeros(0, bool)
        else:  # many files: one search of the files table; the few std ids compared
            p, found = files_column(profile, fids, "path")
            if not found.all():
                p[~found] = ""
            std = isin(fids, std_file_ids(profile))
        p.flags.writeable = std.flags.writeable = False
        d["file_paths"] = (p, std)
    return d["file_paths"]


def files_column(profile: JobProfile, fids: np.ndarray, column: str) -> tuple[np.ndarray, np.ndarray]:
    """(``profile.files[column]`` of each file id (a copy; the first row where an id is missing), whether the id
    is in the files table) by a search of the file ids instead of a dict lookup per id."""
    ft = profile.files
    ids = ft["file_id"]
    if not len(ids):
        out = np.empty(len(fids), dtype=object)
        out[:] = None
        return out, np.zeros(len(fids), bool)
    order = None if len(ids) < 2 or bool(np.all(ids[1:] > ids[:-1])) else np.argsort(ids, kind="stable")
    srt = ids if order is None else ids[order]
    k = np.minimum(np.searchsorted(srt, fids), len(ids) - 1)
    found = srt[k] == fids
    rows = k if order is None else order[k]
    return ft[column][rows], found


def angle_file_ids(profile: JobProfile) -> np.ndarray:
    """Ids of the files table's rows whose path starts with "<" (<STDOUT>, <unnamed ...>), in table order, once
    per profile; for many files from the first byte of each path in one encoded string, not a test per path."""
    d = memo(profile)
    if "angle_ids" not in d:
        ft = profile.files
        paths = ft["path"].tolist()
        hit = None
        if len(paths) > _FEW_FILES and all(type(x) is str for x in paths[:1]):
            try:
                joined = "\0" + "\0".join(paths) + "\0"
            except TypeError:
                joined = ""
            if joined.count("\0") == len(paths) + 1:  # no NUL inside a path: one separator per path
                b = np.frombuffer(joined.encode("utf-8", "surrogatepass"), "u1")
                starts = np.flatnonzero(b == 0)[:-1] + 1  # "<" is one byte in UTF-8, never part of a longer character
                hit = b[starts] == 60
        if hit is None:
            hit = np.array([x.startswith("<") for x in paths], dtype=bool)
        d["angle_ids"] = ft["file_id"][hit] if len(paths) else np.zeros(0, "u8")
    return d["angle_ids"]


def std_file_ids(profile: JobProfile) -> np.ndarray:
    """File ids named <STDIN>, <STDOUT> or <STDERR>, once per profile."""
    d = memo(profile)
    if "std_ids" not in d:
        std = ("<STDIN>", "<STDOUT>", "<STDERR>")
        if len(profile.files) <= _FEW_FILES:
            d["std_ids"] = np.array([f for f, p in profile.path_of().items() if p in std], dtype="u8")
        else:  # the few "<...>" ids, in table order
            ids = angle_file_ids(profile)
            d["std_ids"] = ids[np.isin(files_column(profile, ids, "path")[0], std)] if len(ids) else np.zeros(0, "u8")
    return d["std_ids"]


# files of the tools around the workload, not of the workload: Dask's scratch space and worker folders, the
# performance report Dask writes at client close (iodiag's own job folder is excluded by the collectors)
_TOOL_PARTS = ("/dask-scratch-space", "/dask-worker-space", "/dask-performance-report")


def tool_file(path: str) -> bool:
    """Whether a path belongs to the tools around the workload (never named in findings or top files)."""
    return any(part in path for part in _TOOL_PARTS)


_TEMP_SUFFIX = re.compile(r"\.[0-9a-f]{16,}\.partial$")


def final_name(path: str) -> str:
    """The name a writer's temporary file ends up with: zarr-python writes ``<chunk>.<uuid hex>.partial`` and
    renames it to ``<chunk>``; a report names the chunk, not the temp file.  zarr-python makes the temp name with
    ``Path.with_suffix``, so Zarr v3's ``zarr.json`` is written as ``zarr.<uuid hex>.partial``: its name gets its
    ``.json`` back (without it, reports named a file ``…/tas/zarr`` that does not exist)."""
    if not path.endswith(".partial"):
        return path
    out = _TEMP_SUFFIX.sub("", path)
    return out + ".json" if out != path and out.rsplit("/", 1)[-1] == "zarr" else out


def paths_of_ids(profile: JobProfile, ids: np.ndarray) -> list:
    """``[profile.path_of().get(int(i)) for i in ids]`` (None when the files table lacks the id); for a few ids
    of a large table by a search of its ids, without building the path dict."""
    if len(profile.files) <= _FEW_FILES or not len(ids):
        paths = profile.path_of()
        return [paths.get(i) for i in np.asarray(ids).tolist()]
    p, found = files_column(profile, np.asarray(ids), "path")
    return [x if ok else None for x, ok in zip(p.tolist(), found.tolist())]


def group_sum(keys: np.ndarray, values: np.ndarray, n: int | None = None) -> np.ndarray:
    return np.bincount(keys, weights=values, minlength=n or 0).astype("f8", copy=False)


def robust_z(x: np.ndarray) -> tuple[np.ndarray, float, float]:
    """Robust z-score (0.6745 (x - median) / MAD); MAD floored so equal peers do not divide by zero."""
    med = median(x) if len(x) else 0.0
    mad = median(np.abs(x - med)) if len(x) else 0.0
    floor = max(mad, 1e-3 * abs(med), 1e-9)
    return 0.6745 * (x - med) / floor, med, mad


@dataclass
class Metrics:
    nprocs: int
    level: Table  # POSIX-level rows (POSIX + STDIO), common names
    total_io_s: float  # process-seconds of read + write + metadata
    rw_s: float
    meta_s: float
    proc_io_s: np.ndarray  # per process (index = proc)
    proc_bytes: np.ndarray
    proc_ops: np.ndarray
    shared_spread_s: float
    file_ids: np.ndarray  # unique file ids with POSIX-level records
    file_idx: np.ndarray  # row of level -> index into file_ids
    file_stats: dict[str, np.ndarray] = field(default_factory=dict)  # per-file sums
    file_ranks: np.ndarray = field(default_factory=lambda: np.zeros(0, "i8"))  # processes touching each file
    dxt_complete: bool = False
    ops_file_procs: tuple | None = None  # (file ids, distinct processes per file) from ops; see ops_procs_per_file
    peers: np.ndarray | None = None  # see peer_mask

    def share(self, cost_s: float) -> float | None:
        return float(cost_s / self.total_io_s) if self.total_io_s > 0 else None


def _attribute_shared(profile, lv, t_row, bytes_row, ops_row, proc_io, proc_bytes, proc_ops, n) -> None:
    """Add shared records to per-process arrays: the slowest rank gets its share, the rest spread evenly."""
    pr = profile.processes
    if not len(pr):
        return
    nlog = int(pr["log"].max()) + 1
    first = np.full(nlog, np.iinfo("i8").max, "i8")
    np.minimum.at(first, pr["log"], pr["proc"])
    size = np.bincount(pr["log"], minlength=nlog)
    idx = np.flatnonzero(lv["proc"] < 0)
    log = np.minimum(np.maximum(lv["log"][idx], 0), nlog - 1)  # clip (integers)
    lo, k, slow = first[log], size[log], lv["slow_rank"][idx]
    multi = k > 1
    if not multi.any():  # only 1-process logs: each record is all its process's (what the general case gives)
        for arr, val in ((proc_io, t_row[idx]), (proc_bytes, bytes_row[idx]), (proc_ops, ops_row[idx])):
            np.add.at(arr, lo, val)
        return
    if len(idx) <= _FEW_SHARED:
        _attribute_few(pr, lv, idx, log, lo, k, slow, (t_row, bytes_row, ops_row), (proc_io, proc_bytes, proc_ops), nlog, n)
        return
    every = bool(multi.all())  # then np.where(multi, a, b) below is a: skip it (same values)
    ok = multi & (slow >= 0) & (slow < k)
    all_ok = bool(ok.all())
    others = np.maximum(k - 1, 1)
    even = 1.0 / np.maximum(k, 1)
    target = lo + slow if all_ok else np.where(ok, lo + slow, lo)
    proc_log = np.zeros(n, "i8")
    proc_log[pr["proc"]] = pr["log"]
    for arr, val, part in ((proc_io, t_row[idx], lv["slow_s"][idx]), (proc_bytes, bytes_row[idx], lv["slow_bytes"][idx].astype("f8")),
                           (proc_ops, ops_row[idx], None)):
        if part is None:  # ops follow the bytes split
            part = val * np.divide(lv["slow_bytes"][idx], bytes_row[idx], out=np.zeros(len(idx)), where=bytes_row[idx] > 0)
        frac = np.clip(np.divide(part, val, out=np.zeros(len(idx)), where=val > 0), 0, 1)
        frac = frac if all_ok else np.where(ok, frac, even)
        spread = val * (1 - frac) / others if every else np.where(multi, val * (1 - frac) / others, 0.0)
        arr += np.bincount(log, weights=spread, minlength=nlog)[proc_log]
        np.add.at(arr, target, val * frac - spread if every else np.where(multi, val * frac - spread, val))


_FEW_SHARED = 16  # shared records up to which _attribute_few does the arithmetic in Python floats


def _attribute_few(pr, lv, idx, log, lo, k, slow, vals, arrs, nlog, n) -> None:
    """The vector code of _attribute_shared for a few records, record by record in Python floats: the same
    IEEE double operations on each element, the same per-log sums in the same order (bincount adds records
    in order from 0.0), the same sequential adds (np.add.at); ~40 NumPy calls on 1-element arrays saved."""
    recs = list(zip(idx.tolist(), log.tolist(), lo.tolist(), k.tolist(), slow.tolist()))
    slow_s, slow_b, bytes_row = lv["slow_s"], lv["slow_bytes"], vals[1]
    if nlog > 1:
        proc_log = np.zeros(n, "i8")
        proc_log[pr["proc"]] = pr["log"]
    for which, (arr, val_a) in enumerate(zip(arrs, vals)):
        tots, adds = [0.0] * nlog, []
        for i, lg, l0, kk, sl in recs:
            val = float(val_a[i])
            if which == 0:
                part = float(slow_s[i])
            elif which == 1:
                part = float(slow_b[i])
            else:  # ops follow the bytes split
                br = float(bytes_row[i])
                part = val * (float(slow_b[i]) / br if br > 0 else 0.0)
            ok = kk > 1 and 0 <= sl < kk
            frac = min(max(part / val if val > 0 else 0.0, 0.0), 1.0) if ok else 1.0 / max(kk, 1)
            spread = val * (1 - frac) / max(kk - 1, 1) if kk > 1 else 0.0
            tots[lg] += spread
            adds.append((l0 + sl if ok else l0, val * frac - spread if kk > 1 else val))
        if nlog == 1:
            arr += tots[0]
        else:
            arr += np.array(tots)[proc_log]
        for target, x in adds:
            arr[target] += x


def _compute(profile: JobProfile) -> Metrics:
    n = nprocs_of(profile)
    lv = level_rows(profile)
    rw = lv["read_s"] + lv["write_s"]
    t_row = rw + lv["meta_s"]
    bytes_row = (lv["bytes_read"] + lv["bytes_written"]).astype("f8")
    ops_row = (lv["reads"] + lv["writes"]).astype("f8")
    own = lv["proc"] >= 0
    proc = np.where(own, lv["proc"], 0)
    proc_io = group_sum(proc[own], t_row[own], n)[:n]
    proc_bytes = group_sum(proc[own], bytes_row[own], n)[:n]
    proc_ops = group_sum(proc[own], ops_row[own], n)[:n]
    spread = float(t_row[~own].sum())
    if spread or (~own).any():
        _attribute_shared(profile, lv, t_row, bytes_row, ops_row, proc_io, proc_bytes, proc_ops, n)
    total = float(t_row.sum())
    rw_s, meta_s = float(rw.sum()), float(lv["meta_s"].sum())
    ops = profile.ops
    if not len(lv) and len(ops):  # ops-only profile (embedded collector)
        dur = ops["end_s"] - ops["start_s"]
        is_rw = ops["op"] <= OP["write"]
        rw_s, meta_s = float(dur[is_rw].sum()), float(dur[~is_rw].sum())
        total = rw_s + meta_s
        p = np.clip(ops["proc"], 0, None)
        proc_io = group_sum(p, dur, n)[:n]
        proc_bytes = group_sum(p[is_rw], ops["length"][is_rw].astype("f8"), n)[:n]
        proc_ops = np.bincount(p[is_rw], minlength=n)[:n].astype("f8")
    fids, fidx = np.unique(lv["file_id"], return_inverse=True) if len(lv) else (np.zeros(0, "u8"), np.zeros(0, "i8"))
    nf = len(fids)
    keys = ("reads", "writes", "bytes_read", "bytes_written", "read_s", "write_s", "meta_s", "opens", "stats", "seeks", "fsyncs")
    if nf and nf == len(lv):  # one row per file: each sum is 0.0 + the row's value (>= +0.0), i.e. the value
        mat = np.empty((len(keys), nf))
        mat[:, fidx] = np.stack([lv[k] for k in keys])
        fs = dict(zip(keys, mat))
    else:
        fs = {k: group_sum(fidx, lv[k].astype("f8"), nf) for k in keys}
    fs["size_bytes"] = np.zeros(nf)
    if nf:
        np.maximum.at(fs["size_bytes"], fidx, np.maximum(lv["max_read"], lv["max_written"]) + 1.0)
        fs["size_bytes"][(fs["bytes_read"] + fs["bytes_written"]) == 0] = 0
    # processes per file: a shared record counts every process
    # (a file's POSIX and STDIO rows of one process are one process: count distinct (file, process) pairs)
    pairs = unique(fidx[own] * (n + 1) + proc[own]) if nf else np.zeros(0, "i8")
    ranks = np.bincount(pairs // (n + 1), minlength=nf).astype("i8") if nf else np.zeros(0, "i8")
    if nf and (~own).any():
        ranks[unique(fidx[~own])] = n
    partial = set(profile.job.partial_modules)
    dxt = bool(len(ops)) and not ({"DXT_POSIX", "DXT_MPIIO"} & partial)
    return Metrics(nprocs=n, level=lv, total_io_s=total, rw_s=rw_s, meta_s=meta_s, proc_io_s=proc_io,
                   proc_bytes=proc_bytes, proc_ops=proc_ops, shared_spread_s=spread, file_ids=fids, file_idx=fidx,
                   file_stats=fs, file_ranks=np.minimum(ranks, n), dxt_complete=dxt)


def peer_mask(profile: JobProfile, m: Metrics) -> np.ndarray:
    """Processes that should do comparable I/O: a Dask job's worker processes; the ranks of the largest MPI
    log; or, for a job made of 1-process logs (multiprocessing), the processes with I/O running the most
    common executable."""
    if m.peers is None:
        m.peers = _peer_mask(profile, m)
        m.peers.flags.writeable = False
    return m.peers


def _peer_mask(profile: JobProfile, m: Metrics) -> np.ndarray:
    pr, n = profile.processes, m.nprocs
    mask = np.zeros(n, bool)
    if not len(pr):
        return mask
    t = profile.tasks
    if len(t) and "pid" in pr:  # a Dask job: the workers are peers (not the client, scheduler or nannies)
        workers = unique(t["pid"][t["pid"] >= 0])
        is_worker = np.isin(pr["pid"], workers)
        if is_worker.sum() >= 2:
            mask[pr["proc"][is_worker]] = True
            return mask
    sizes = np.bincount(pr["log"])
    big = int(np.argmax(sizes))
    if sizes[big] >= 2:
        mask[pr["proc"][pr["log"] == big]] = True
        return mask
    busy = m.proc_bytes[pr["proc"]] > 0
    if not busy.any():
        return mask
    exes, counts = np.unique(pr["exe"][busy].astype(str), return_counts=True)
    mask[pr["proc"][busy & (pr["exe"].astype(str) == exes[np.argmax(counts)])]] = True
    return mask


def metrics_of(profile: JobProfile) -> Metrics:
    """Metrics of a profile, computed once (kept with the rest of its derived data, see ``memo``)."""
    d = profile.__dict__.get("_derived") or memo(profile)
    m = d.get("metrics")
    if m is None:
        m = d["metrics"] = _compute(profile)
    return m


def ops_procs_per_file(profile: JobProfile) -> tuple[np.ndarray, np.ndarray]:
    """(sorted file ids, number of distinct processes with ops on each) from the ops table, once per profile."""
    m = metrics_of(profile)
    if m.ops_file_procs is None:
        per_pair = []  # per batch of whole processes: the file of each distinct (file, process) pair
        if batches.is_source(profile.ops):  # each process's distinct files, folded over its bounded batches
            for parts in batches.process_batches(profile.ops, ("file_id",)):
                per_pair.append(unique(np.concatenate([unique(o["file_id"]) for o in parts])))
        for o in () if batches.is_source(profile.ops) else batches.process_tables(profile.ops, ("file_id", "proc")):
            # ops come in runs of one (file, process) (a DXT record each): the distinct pairs are
            # those at the start of a run, so only the runs need sorting, not every op
            fid, pr = o["file_id"], o["proc"]
            held = not batches.is_source(profile.ops)
            if held:  # in the (proc, file, op, start) order the detectors share, each distinct pair is one run
                order = _group_order(profile, profile.ops)
                if order is not None:
                    fid, pr = fid[order], pr[order]
            run = np.ones(len(fid), bool)
            run[1:] = (fid[1:] != fid[:-1]) | (pr[1:] != pr[:-1])
            fid, pr = fid[run], pr[run]
            if held:  # the runs are the distinct pairs already: their files are all that is counted
                per_pair.append(fid)
                continue
            fu, fi = np.unique(fid, return_inverse=True)
            n = int(pr.max()) + 2
            pairs = unique(fi.astype("i8") * n + (pr + 1))
            per_pair.append(fu[pairs // n])
        if not per_pair:
            m.ops_file_procs = (np.zeros(0, "u8"), np.zeros(0, "i8"))
        else:  # a process is in one batch only: its pairs are distinct across batches
            m.ops_file_procs = np.unique(np.concatenate(per_pair), return_counts=True)
    return m.ops_file_procs


def lustre_osts(profile: JobProfile) -> tuple[np.ndarray, np.ndarray]:
    """(LUSTRE row, OST index) of every OST the rows' ``osts`` strings list (comma-separated integers; tokens
    that are not integers skipped), parsed once per profile: one split of all rows joined instead of one per row."""
    d = memo(profile)
    if "lustre_osts" not in d:
        lus = profile.module("LUSTRE")
        d["lustre_osts"] = _parse_osts(lus["osts"].tolist() if lus is not None else [])
    return d["lustre_osts"]


def _parse_osts(texts: list) -> tuple[np.ndarray, np.ndarray]:
    try:
        joined = ",".join(texts)
    except TypeError:
        texts = [str(t) for t in texts]
        joined = ",".join(texts)
    full = ",".join(filter(None, texts))  # the non-empty rows
    if (full.isascii() and full.replace(",", "").isdigit() and full[0] != "," and full[-1] != ","
            and ",," not in full):
        # ASCII digits and commas, no empty token in a non-empty row: a row's OSTs are its tokens
        vals = np.fromstring(full, dtype="i8", sep=",")
        lens = np.fromiter(map(len, texts), "i8", len(texts))
        start = np.cumsum(lens + 1) - (lens + 1)
        commas = np.zeros(len(joined) + 1, "i8")
        np.cumsum(np.frombuffer(joined.encode("ascii"), "u1") == 44, out=commas[1:])
        per_row = np.where(lens > 0, commas[start + lens] - commas[start] + 1, 0)
        if len(vals) == int(per_row.sum()) and int(vals.max()) < 2 ** 62:  # (larger: int() would not clip)
            return np.repeat(np.arange(len(texts)), per_row), vals
    pairs = [(i, int(o)) for i, txt in enumerate(texts) for o in str(txt).split(",") if o.strip().lstrip("-").isdigit()]
    return np.array([p[0] for p in pairs], dtype="i8"), np.array([p[1] for p in pairs], dtype="i8")


def lustre_stripe(profile: JobProfile, fids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(stripe size of each file id's last LUSTRE row as float, 0.0 without one; whether the id has a LUSTRE
    row): ``dict(zip(file_id, stripe_size))`` lookups, by a search of the ids."""
    fids = np.asarray(fids)
    lus = profile.module("LUSTRE")
    if lus is None or not len(lus) or not len(fids):
        return np.zeros(len(fids)), np.zeros(len(fids), bool)
    d = memo(profile)
    if "lustre_last" not in d:
        ids = lus["file_id"]
        order = np.argsort(ids, kind="stable")
        srt = ids[order]
        last = np.ones(len(srt), bool)
        last[:-1] = srt[1:] != srt[:-1]  # the last row of each id in table order (stable sort keeps it last)
        d["lustre_last"] = (srt[last], lus["stripe_size"][order[last]])
    u, size = d["lustre_last"]
    k = np.minimum(np.searchsorted(u, fids), len(u) - 1)
    has = u[k] == fids
    return np.where(has, size[k], 0).astype("f8"), has


def on_parallel_fs(profile: JobProfile, fids: np.ndarray, parallel_fs) -> np.ndarray:
    """Per file id: ``str(fs_type).lower() in parallel_fs`` ("" when the files table lacks the id) or a LUSTRE
    row names it; the test runs once per distinct file-system type, not once per file."""
    fids = np.asarray(fids)
    fs, found = files_column(profile, fids, "fs_type")
    out = np.zeros(len(fids), bool)
    if not found.all():
        fs = fs.copy() if fs.dtype == object else fs.astype(object)
        fs[~found] = ""
    for v in set(fs.tolist()):
        if str(v).lower() in parallel_fs:
            out |= fs == v
    return out | lustre_stripe(profile, fids)[1]
