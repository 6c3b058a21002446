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
    OPC, RECORD_DTYPE, RF_FAILED, RF_MEM_UNALIGNED, RF_OFFSET_UNKNOWN,
)
from ...collectors.embedded.format import read_names as _read_names
from ...errors import InputNotFound
from ...profile import OP, OPS_MODULE, JobInfo, JobProfile, LoadIssue, ProgramInfo, Table
from ..batches import OpsBuilder, OpsSource, chunks, streams

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

SIZE_BUCKETS = ("0_100", "100_1K", "1K_10K", "10K_100K", "100K_1M", "1M_4M", "4M_10M", "10M_100M", "100M_1G", "1G_PLUS")
# Darshan's bucket upper bounds are inclusive: size <= 100 goes to 0_100, etc.
_SIZE_EDGES = np.array([101, 1025, 10241, 102401, 1048577, 4194305, 10485761, 104857601, 1073741825], dtype="i8")
FILE_ALIGNMENT = 4096
MEM_ALIGNMENT = 8


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
# grouped reductions over rows sorted by group
# ---------------------------------------------------------------------------
def _group_reduce(ufunc, g: np.ndarray, vals: np.ndarray, ngroups: int, fill) -> np.ndarray:
    out = np.full(ngroups, fill, dtype=np.result_type(vals.dtype, np.asarray(fill).dtype))
    if len(g):
        starts = np.flatnonzero(np.r_[True, g[1:] != g[:-1]])
        out[g[starts]] = ufunc.reduceat(vals, starts)
    return out


def _first_in_group(g: np.ndarray) -> np.ndarray:
    return np.r_[True, g[1:] != g[:-1]] if len(g) else np.zeros(0, bool)


def _top4(g: np.ndarray, vals: np.ndarray, ngroups: int) -> tuple[np.ndarray, np.ndarray]:
    """Per group, the 4 most common values and their counts (Darshan's ACCESS/STRIDE counters)."""
    values = np.zeros((ngroups, 4), "i8")
    counts = np.zeros((ngroups, 4), "i8")
    if not len(g):
        return values, counts
    if ngroups == 1:  # one group: the distinct values and their counts, no (group, value) sort
        pv, cnt = np.unique(vals, return_counts=True)
        order = np.lexsort((-pv, -cnt))[:4]  # Darshan: higher count first, then larger value
        values[0, :len(order)] = pv[order]
        counts[0, :len(order)] = cnt[order]
        return values, counts
    # distinct (group, value) pairs with their counts, without sorting a structured array (slow in NumPy)
    o = np.lexsort((vals, g))
    gs, vs = g[o], vals[o]
    start = np.flatnonzero(np.r_[True, (gs[1:] != gs[:-1]) | (vs[1:] != vs[:-1])])
    pg, pv = gs[start], vs[start]
    cnt = np.diff(np.r_[start, len(gs)])
    order = np.lexsort((-pv, -cnt, pg))  # Darshan: higher count first, then larger value
    ug, uv, uc = pg[order], pv[order], cnt[order]
    first = np.flatnonzero(_first_in_group(ug))
    rank = np.arange(len(ug)) - np.repeat(first, np.diff(np.r_[first, len(ug)]))
    keep = rank < 4
    values[ug[keep], rank[keep]] = uv[keep]
    counts[ug[keep], rank[keep]] = uc[keep]
    return values, counts


def _picker(mask: np.ndarray):
    """``a[mask]`` as a function; a view (no copy) when the mask keeps every row."""
    if mask.all():
        return lambda a: a
    return lambda a: a[mask]


def _sorted_by(g: np.ndarray, t: np.ndarray) -> bool:
    """Whether rows already run in (g, t) order, so that a stable lexsort by (g, t) would move nothing."""
    if len(g) < 2:
        return True
    for sl in _pair_chunks(len(g)):
        g0, g1 = g[sl], g[sl.start + 1: sl.stop + 1]
        if np.any(g1 < g0):
            return False
        same = g1 == g0
        if np.any(t[sl.start + 1: sl.stop + 1][same] < t[sl][same]):
            return False
    return True


def _pair_chunks(n: int, size: int = 1 << 20):
    """Slices over the n - 1 adjacent pairs of n rows (pair k is rows k, k + 1), at most ``size`` at a time."""
    for lo in range(0, n - 1, size):
        yield slice(lo, min(lo + size, n - 1))


def _access_stats(g, off, ln, is_write, t0, t1, ngroups, prefix) -> dict[str, np.ndarray]:
    """Darshan's per-file access counters for one module, rows sorted by (group, start)."""
    out: dict[str, np.ndarray] = {}
    known = off >= 0
    stride_g, stride_v = [], []
    for kind, sel in (("READ", ~is_write), ("WRITE", is_write)):
        pick = _picker(sel)
        gg, oo, ll = pick(g), pick(off), pick(ln)
        dur = (pick(t1) - pick(t0))
        label = "READS" if kind == "READ" else "WRITES"
        out[f"{prefix}_{label}"] = np.bincount(gg, minlength=ngroups).astype("i8")
        out[f"{prefix}_BYTES_{'READ' if kind == 'READ' else 'WRITTEN'}"] = np.bincount(gg, weights=ll, minlength=ngroups).astype("i8")
        kk = pick(known)
        last = np.where(kk, oo + ll - 1, -1)
        # Darshan starts MAX_BYTE_* at 0 (a file never read shows 0)
        out[f"{prefix}_MAX_BYTE_{'READ' if kind == 'READ' else 'WRITTEN'}"] = _group_reduce(np.maximum, gg, last, ngroups, 0)
        out[f"_{kind}_TIME"] = _group_reduce(np.add, gg, dur, ngroups, 0.0)
        out[f"_MAX_{kind}_TIME"] = _group_reduce(np.maximum, gg, dur, ngroups, 0.0)
        if prefix == "POSIX":
            # Darshan: last byte starts at 0; sequential when offset > last byte, consecutive when == last byte + 1
            prev_last = np.r_[0, last[:-1]]
            prev_last[_first_in_group(gg)] = 0
            seq = kk & (oo > prev_last)
            consec = kk & (oo == prev_last + 1)
            # Darshan's stride: the gap after the previous op of the same direction, when moving forward
            fwd = kk & (oo > 0) & (oo > prev_last) & (prev_last != 0)
            gap = oo - prev_last - 1
            fwd &= gap != 0  # a stride of 0 is never among the common values: dropped here rather than later
            stride_g.append(gg[fwd])
            stride_v.append(gap[fwd])
            del gap, fwd
            out[f"POSIX_SEQ_{label}"] = np.bincount(gg[seq], minlength=ngroups).astype("i8")
            out[f"POSIX_CONSEC_{label}"] = np.bincount(gg[consec], minlength=ngroups).astype("i8")
            bucket = np.searchsorted(_SIZE_EDGES, ll, side="right")
            flat = bucket if ngroups == 1 else gg * len(SIZE_BUCKETS) + bucket  # one group (one file): its buckets
            hist = np.bincount(flat, minlength=ngroups * len(SIZE_BUCKETS)).reshape(ngroups, len(SIZE_BUCKETS))
            del bucket, flat
            for j, name in enumerate(SIZE_BUCKETS):
                out[f"POSIX_SIZE_{kind}_{name}"] = hist[:, j].astype("i8")
            # size of the slowest operation
            if len(gg) and ngroups == 1:  # the slowest op; on a tie the last one (as the stable sort below)
                sz = np.zeros(1, "i8")
                sz[0] = ll[len(dur) - 1 - int(np.argmax(dur[::-1]))]
            elif len(gg):
                order = np.lexsort((dur, gg))
                lastrow = np.r_[gg[order][1:] != gg[order][:-1], True]
                sz = np.zeros(ngroups, "i8")
                sz[gg[order][lastrow]] = ll[order][lastrow]
            else:
                sz = np.zeros(ngroups, "i8")
            out[f"POSIX_MAX_{kind}_TIME_SIZE"] = sz
            del prev_last, seq, consec
        del gg, oo, ll, dur, kk, last  # one direction's temporaries at a time
    if prefix == "POSIX":
        kind = is_write.astype("i1")
        sw = np.zeros(len(kind), bool)  # (np.r_[False, ...] would be one element long for no operations)
        sw[1:] = kind[1:] != kind[:-1]
        sw[_first_in_group(g)] = False
        out["POSIX_RW_SWITCHES"] = np.bincount(g[sw], minlength=ngroups).astype("i8")
        out["POSIX_FILE_NOT_ALIGNED"] = np.bincount(g[known & (off % FILE_ALIGNMENT != 0)], minlength=ngroups).astype("i8")
        nz = ln != 0  # Darshan never counts a value of 0 among the common values
        av, ac = _top4(g[nz], ln[nz], ngroups)
        sv, sc = _top4(np.concatenate(stride_g), np.concatenate(stride_v), ngroups)  # (zero strides dropped above)
        for j in range(4):
            out[f"POSIX_ACCESS{j + 1}_ACCESS"] = av[:, j]
            out[f"POSIX_ACCESS{j + 1}_COUNT"] = ac[:, j]
            out[f"POSIX_STRIDE{j + 1}_STRIDE"] = sv[:, j]
            out[f"POSIX_STRIDE{j + 1}_COUNT"] = sc[:, j]
    return out


def _counters(mod: str, proc, fid, opc, flags, off, ln, t0, t1, proc_start, extra_rows=None) -> dict[str, np.ndarray]:
    """Darshan counters of one module from its (successful) raw records."""
    if extra_rows is not None:  # rename targets: rows that only carry RENAME_TARGETS / RENAMED_FROM
        tproc, tfid, tsrc = extra_rows
    else:
        tproc = tfid = tsrc = np.zeros(0, "i8")
    kp = np.r_[proc, tproc].astype("i8")
    kf = np.r_[fid.astype("u8"), tfid.astype("u8")]
    if len(kp) and kp.min() == kp.max():  # one process (the reader folds process by process): groups are its files
        uf, ginv = np.unique(kf, return_inverse=True)
        ginv = ginv.astype("i8", copy=False)
        ukeys = {"p": np.full(len(uf), kp[0], "i8"), "f": uf}
        ngroups = len(uf)
        del uf
    else:
        o = np.lexsort((kf, kp))
        ps, fs = kp[o], kf[o]
        new = np.r_[True, (ps[1:] != ps[:-1]) | (fs[1:] != fs[:-1])] if len(ps) else np.zeros(0, bool)
        ginv = np.empty(len(kp), "i8")
        ginv[o] = np.cumsum(new) - 1
        ukeys = {"p": ps[new], "f": fs[new]}
        ngroups = int(new.sum())
        del o, ps, fs, new
    del kp, kf
    g_all = ginv[: len(proc)]
    g_tgt = ginv[len(proc):]
    if not _sorted_by(g_all, t0):  # records of one process come nearly in time order: often nothing moves
        order = np.lexsort((t0, g_all))
        g, opc, flags, off, ln, t0, t1 = g_all[order], opc[order], flags[order], off[order], ln[order], t0[order], t1[order]
        del order
    else:
        g = g_all
    gproc = ukeys["p"]
    base = proc_start[gproc] if len(gproc) else np.zeros(0)
    cnt = lambda mask: np.bincount(g[mask], minlength=ngroups).astype("i8")  # noqa: E731
    dur = t1 - t0
    is_rw = (opc == OPC["read"]) | (opc == OPC["write"])
    pick = _picker(is_rw)
    rw = _access_stats(pick(g), np.where(pick(flags) & RF_OFFSET_UNKNOWN, -1, pick(off)), pick(ln),
                       pick(opc) == OPC["write"], pick(t0), pick(t1), ngroups, mod)

    def first_start(mask):
        return np.where(cnt(mask) > 0, _group_reduce(np.minimum, g[mask], t0[mask], ngroups, np.inf) - base, 0.0)

    def last_end(mask):
        return np.where(cnt(mask) > 0, _group_reduce(np.maximum, g[mask], t1[mask], ngroups, -np.inf) - base, 0.0)

    isop = lambda *names: np.isin(opc, [OPC[n] for n in names])  # noqa: E731
    c: dict[str, np.ndarray] = {"log": gproc.astype("i8"), "proc": gproc.astype("i8"), "rank": np.zeros(ngroups, "i8"),
                                "file_id": ukeys["f"]}
    if mod == "POSIX":
        opens, reads, writes = isop("open", "opendir"), opc == OPC["read"], opc == OPC["write"]
        closes = isop("close", "closedir")
        meta = ~is_rw
        mode_rows = opc == OPC["open"]
        mode = np.zeros(ngroups, "i8")
        if mode_rows.any():
            mg, ml = g[mode_rows], ln[mode_rows]
            firsts = np.flatnonzero(_first_in_group(mg))
            mode[mg[firsts]] = ml[firsts]
        renamed_from = np.zeros(ngroups, "i8")
        rename_targets = np.bincount(g_tgt, minlength=ngroups).astype("i8") if len(g_tgt) else np.zeros(ngroups, "i8")
        if len(g_tgt):
            renamed_from[g_tgt] = tsrc.astype("u8").view("i8")
        vals = {
            # Darshan counts a dup as an open too (POSIX_OPENS and POSIX_DUPS)
            "POSIX_OPENS": cnt(opens | (opc == OPC["dup"])), "POSIX_FILENOS": np.zeros(ngroups, "i8"),
            "POSIX_DUPS": cnt(opc == OPC["dup"]),
            "POSIX_READS": rw["POSIX_READS"], "POSIX_WRITES": rw["POSIX_WRITES"], "POSIX_SEEKS": cnt(opc == OPC["seek"]),
            "POSIX_STATS": cnt(opc == OPC["stat"]), "POSIX_MMAPS": np.full(ngroups, -1, "i8"),
            "POSIX_FSYNCS": cnt(opc == OPC["fsync"]), "POSIX_FDSYNCS": cnt(opc == OPC["fdatasync"]),
            "POSIX_RENAME_SOURCES": cnt(opc == OPC["rename"]), "POSIX_RENAME_TARGETS": rename_targets,
            "POSIX_RENAMED_FROM": renamed_from, "POSIX_MODE": mode,
            "POSIX_BYTES_READ": rw["POSIX_BYTES_READ"], "POSIX_BYTES_WRITTEN": rw["POSIX_BYTES_WRITTEN"],
            "POSIX_MAX_BYTE_READ": rw["POSIX_MAX_BYTE_READ"], "POSIX_MAX_BYTE_WRITTEN": rw["POSIX_MAX_BYTE_WRITTEN"],
            "POSIX_CONSEC_READS": rw["POSIX_CONSEC_READS"], "POSIX_CONSEC_WRITES": rw["POSIX_CONSEC_WRITES"],
            "POSIX_SEQ_READS": rw["POSIX_SEQ_READS"], "POSIX_SEQ_WRITES": rw["POSIX_SEQ_WRITES"],
            "POSIX_RW_SWITCHES": rw["POSIX_RW_SWITCHES"],
            "POSIX_MEM_NOT_ALIGNED": cnt(is_rw & ((flags & RF_MEM_UNALIGNED) != 0)), "POSIX_MEM_ALIGNMENT": np.full(ngroups, MEM_ALIGNMENT, "i8"),
            "POSIX_FILE_NOT_ALIGNED": rw["POSIX_FILE_NOT_ALIGNED"], "POSIX_FILE_ALIGNMENT": np.full(ngroups, FILE_ALIGNMENT, "i8"),
            "POSIX_MAX_READ_TIME_SIZE": rw["POSIX_MAX_READ_TIME_SIZE"], "POSIX_MAX_WRITE_TIME_SIZE": rw["POSIX_MAX_WRITE_TIME_SIZE"],
        }
        for kind in ("READ", "WRITE"):
            for name in SIZE_BUCKETS:
                vals[f"POSIX_SIZE_{kind}_{name}"] = rw[f"POSIX_SIZE_{kind}_{name}"]
        for j in range(1, 5):
            vals[f"POSIX_STRIDE{j}_STRIDE"] = rw[f"POSIX_STRIDE{j}_STRIDE"]
        for j in range(1, 5):
            vals[f"POSIX_STRIDE{j}_COUNT"] = rw[f"POSIX_STRIDE{j}_COUNT"]
        for j in range(1, 5):
            vals[f"POSIX_ACCESS{j}_ACCESS"] = rw[f"POSIX_ACCESS{j}_ACCESS"]
        for j in range(1, 5):
            vals[f"POSIX_ACCESS{j}_COUNT"] = rw[f"POSIX_ACCESS{j}_COUNT"]
        # the rank extremes and variances only exist for records shared by several ranks: 0 here, as in Darshan
        zero_i, zero_f = np.zeros(ngroups, "i8"), np.zeros(ngroups)
        vals.update({"POSIX_FASTEST_RANK": zero_i, "POSIX_FASTEST_RANK_BYTES": zero_i,
                     "POSIX_SLOWEST_RANK": zero_i, "POSIX_SLOWEST_RANK_BYTES": zero_i})
        vals.update({
            "POSIX_F_OPEN_START_TIMESTAMP": first_start(opens), "POSIX_F_READ_START_TIMESTAMP": first_start(reads),
            "POSIX_F_WRITE_START_TIMESTAMP": first_start(writes), "POSIX_F_CLOSE_START_TIMESTAMP": first_start(closes),
            "POSIX_F_OPEN_END_TIMESTAMP": last_end(opens), "POSIX_F_READ_END_TIMESTAMP": last_end(reads),
            "POSIX_F_WRITE_END_TIMESTAMP": last_end(writes), "POSIX_F_CLOSE_END_TIMESTAMP": last_end(closes),
            "POSIX_F_READ_TIME": rw["_READ_TIME"], "POSIX_F_WRITE_TIME": rw["_WRITE_TIME"],
            "POSIX_F_META_TIME": _group_reduce(np.add, g[meta], dur[meta], ngroups, 0.0),
            "POSIX_F_MAX_READ_TIME": rw["_MAX_READ_TIME"], "POSIX_F_MAX_WRITE_TIME": rw["_MAX_WRITE_TIME"],
            "POSIX_F_FASTEST_RANK_TIME": zero_f, "POSIX_F_SLOWEST_RANK_TIME": zero_f,
            "POSIX_F_VARIANCE_RANK_TIME": zero_f, "POSIX_F_VARIANCE_RANK_BYTES": zero_f,
        })
    else:
        opens, fdopens = opc == OPC["open"], opc == OPC["fdopen"]
        reads, writes, closes = opc == OPC["read"], opc == OPC["write"], opc == OPC["close"]
        meta = ~is_rw
        meta_time = _group_reduce(np.add, g[meta], dur[meta], ngroups, 0.0)
        zero_i, zero_f = np.zeros(ngroups, "i8"), np.zeros(ngroups)
        vals = {
            # Darshan counts an fdopen in STDIO_OPENS too
            "STDIO_OPENS": cnt(opens | fdopens), "STDIO_FDOPENS": cnt(fdopens), "STDIO_READS": rw["STDIO_READS"],
            "STDIO_WRITES": rw["STDIO_WRITES"], "STDIO_SEEKS": cnt(opc == OPC["seek"]), "STDIO_FLUSHES": cnt(opc == OPC["flush"]),
            "STDIO_BYTES_WRITTEN": rw["STDIO_BYTES_WRITTEN"], "STDIO_BYTES_READ": rw["STDIO_BYTES_READ"],
            "STDIO_MAX_BYTE_READ": rw["STDIO_MAX_BYTE_READ"], "STDIO_MAX_BYTE_WRITTEN": rw["STDIO_MAX_BYTE_WRITTEN"],
            "STDIO_FASTEST_RANK": zero_i, "STDIO_FASTEST_RANK_BYTES": zero_i,
            "STDIO_SLOWEST_RANK": zero_i, "STDIO_SLOWEST_RANK_BYTES": zero_i,
            "STDIO_F_META_TIME": meta_time, "STDIO_F_WRITE_TIME": rw["_WRITE_TIME"], "STDIO_F_READ_TIME": rw["_READ_TIME"],
            "STDIO_F_OPEN_START_TIMESTAMP": first_start(opens | fdopens), "STDIO_F_CLOSE_START_TIMESTAMP": first_start(closes),
            "STDIO_F_WRITE_START_TIMESTAMP": first_start(writes), "STDIO_F_READ_START_TIMESTAMP": first_start(reads),
            "STDIO_F_OPEN_END_TIMESTAMP": last_end(opens | fdopens), "STDIO_F_CLOSE_END_TIMESTAMP": last_end(closes),
            "STDIO_F_WRITE_END_TIMESTAMP": last_end(writes), "STDIO_F_READ_END_TIMESTAMP": last_end(reads),
            "STDIO_F_FASTEST_RANK_TIME": zero_f, "STDIO_F_SLOWEST_RANK_TIME": zero_f,
            "STDIO_F_VARIANCE_RANK_TIME": zero_f, "STDIO_F_VARIANCE_RANK_BYTES": zero_f,
        }
    c.update(vals)
    return c


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
        counter_parts[mod].append(Table(_counters(mod, np.full(len(r), i, "i8"), r["file_id"], r["op"], r["flags"],
                                                  r["offset"], r["length"], t0, t1, proc_start, extra)))
        del r, t0, t1


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

    names: dict[int, str] = {}
    for p in paths:
        names.update(_read_names(p.with_suffix(".names")))

    nproc = len(headers)
    proc_start = np.array([int(h["start_ns"]) * 1e-9 for h in headers], dtype="f8")
    pids = [int(h["pid"]) for h in headers]
    proc_cols: dict[str, list] = {k: [] for k in ("proc", "log", "rank", "pid", "ppid", "host", "exe", "args", "log_path",
                                                   "start_s", "end_s", "partial", "end_kind", "exit_status", "records",
                                                   "dropped")}
    failed_total = inflight_total = dropped_total = 0
    capped_any = False
    # the batch contract (analyzers/batches.py): one process at a time, its ops converted in bounded chunks into
    # columns allocated once; counters and file ids folded per process
    # a job too large to hold keeps its ops as a source re-read one process at a time (batches.OpsSource)
    builder = OpsSource() if streams(sum(counts)) else OpsBuilder(sum(counts))
    counter_parts: dict[str, list[Table]] = {"POSIX": [], "STDIO": []}
    ids: set[int] = set()
    for i, (h, n, p) in enumerate(zip(headers, counts, paths)):
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
        failed_total += n_failed
        inflight_total += inflight
        flags = int(h["flags"])
        dropped = int(h["dropped"])
        dropped_total += dropped
        capped = bool(flags & HF_CAPPED) or dropped > 0
        capped_any |= capped
        killed = not (flags & (HF_EXITED | HF_EXEC))
        last_ns = int((recs["start_ns"] + recs["dur_ns"]).max()) if len(recs) else int(h["start_ns"])
        end_ns = max(int(h["end_ns"]), last_ns)  # atexit handlers may still do I/O after exit() was called
        argv = bytes(h["cmdline"])[: int(h["cmdline_len"])].split(b"\0")
        argv = [a.decode("utf-8", "surrogateescape") for a in argv if a]
        proc_cols["proc"].append(i)
        proc_cols["log"].append(i)
        proc_cols["rank"].append(0)
        proc_cols["pid"].append(int(h["pid"]))
        proc_cols["ppid"].append(int(h["ppid"]))
        proc_cols["host"].append(_cstr(h["host"]))
        proc_cols["exe"].append(_cstr(h["exe"]))
        proc_cols["args"].append(" ".join(argv[1:]))
        proc_cols["log_path"].append(str(p))
        proc_cols["start_s"].append(proc_start[i])
        proc_cols["end_s"].append(end_ns * 1e-9)
        proc_cols["partial"].append(killed or capped)
        proc_cols["end_kind"].append("exec" if flags & HF_EXEC else ("exit" if flags & HF_EXITED else "killed"))
        proc_cols["exit_status"].append(int(h["exit_status"]))
        proc_cols["records"].append(len(recs))
        proc_cols["dropped"].append(dropped)
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
        ok = recs[~failed] if n_failed else recs
        del recs, valid, failed
        _fold_process(i, ok, proc_start, builder, counter_parts, ids, reload=partial(_reload_ops, p, n, i))
        del ok

    ops = builder if isinstance(builder, OpsSource) else builder.finish()
    counters = {mod: (parts[0] if len(parts) == 1 else Table.concat(parts)) for mod, parts in counter_parts.items() if parts}

    # ---- files ---------------------------------------------------------------
    ids.discard(0)
    fid = sorted(ids)
    fpaths = [names.get(i, f"<unnamed {i:016x}>") for i in fid]
    mounts = _mounts(trace_dir)
    mnt, fst = _fs_of(fpaths, mounts)
    files = Table({"file_id": np.asarray(fid, dtype="u8"), "path": np.asarray(fpaths, dtype=object),
                   "mount": np.asarray(mnt, dtype=object), "fs_type": np.asarray(fst, dtype=object)})

    # ---- job -----------------------------------------------------------------
    pidset = set(pids)
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
    job = JobInfo(
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
        partial_modules=list(modules) if capped_any else [],
        mounts=mounts,
        metadata={
            "collector": "embedded", "max_records": str(meta.get("max_records", "")),
            "failed_ops": str(failed_total), "dropped_records": str(dropped_total), "inflight_lost": str(inflight_total),
            "hostname": proc_cols["host"][root] if root is not None else "",
        },
        programs=list(programs.values()),
        logs=[str(p) for p in paths],
        blind_spots=list(BLIND_SPOTS),
    )
    processes = Table({
        k: np.asarray(v, dtype=object if k in ("host", "exe", "args", "log_path", "end_kind") else
                      ("?" if k == "partial" else ("f8" if k in ("start_s", "end_s") else "i8")))
        for k, v in proc_cols.items()
    })
    return JobProfile(job=job, processes=processes, files=files, counters=counters, ops=ops, issues_seen=issues)


def _current_version() -> str:
    from ...collectors.embedded import version

    return version()
