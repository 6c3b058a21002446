"""Darshan's POSIX and STDIO counters derived from the embedded collector's raw records.

One counter row per (process, file), with Darshan's names and semantics (sequential and consecutive
accesses, the four most common access sizes and strides, the size histogram, first/last timestamps relative
to the process's start), so that every detector reads a trace like a Darshan log.  The records of a group
are reduced in (group, start) order.
"""

from __future__ import annotations

import numpy as np

from ...collectors.embedded.format import OPC, RF_MEM_UNALIGNED, RF_OFFSET_UNKNOWN

SIZE_BUCKETS = ("0_100", "100_1K", "1K_10K", "10K_100K", "100K_1M", "1M_4M", "4M_10M", "10M_100M", "100M_1G", "1G_PLUS")
# Darshan's bucket upper bounds are inclusive: size <= 100 goes to 0_100, etc.
_SIZE_EDGES = np.array([101, 1025, 10241, 102401, 1048577, 4194305, 10485761, 104857601, 1073741825], dtype="i8")
FILE_ALIGNMENT = 4096
MEM_ALIGNMENT = 8


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


def module_counters(mod: str, proc, fid, opc, flags, off, ln, t0, t1, proc_start, extra_rows=None) -> dict[str, np.ndarray]:
    """Darshan counters of one module from its (successful) raw records."""
    g_all, g_tgt, tsrc, gproc, gfile = _group_keys(proc, fid, extra_rows)
    ngroups = len(gproc)
    if not _sorted_by(g_all, t0):  # records of one process come nearly in time order: often nothing moves
        order = np.lexsort((t0, g_all))
        g, opc, flags, off, ln, t0, t1 = g_all[order], opc[order], flags[order], off[order], ln[order], t0[order], t1[order]
        del order
    else:
        g = g_all
    base = proc_start[gproc] if len(gproc) else np.zeros(0)
    groups = _Groups(g, ngroups, t0, t1, base)
    dur = t1 - t0
    is_rw = (opc == OPC["read"]) | (opc == OPC["write"])
    pick = _picker(is_rw)
    rw = _access_stats(pick(g), np.where(pick(flags) & RF_OFFSET_UNKNOWN, -1, pick(off)), pick(ln),
                       pick(opc) == OPC["write"], pick(t0), pick(t1), ngroups, mod)
    c: dict[str, np.ndarray] = {"log": gproc.astype("i8"), "proc": gproc.astype("i8"), "rank": np.zeros(ngroups, "i8"),
                                "file_id": gfile}
    if mod == "POSIX":
        c.update(_posix_values(groups, opc, flags, ln, dur, is_rw, rw, g_tgt, tsrc))
    else:
        c.update(_stdio_values(groups, opc, dur, is_rw, rw))
    return c


def _group_keys(proc, fid, extra_rows):
    """Records (and rename-target rows, ``extra_rows``: rows that only carry RENAME_TARGETS / RENAMED_FROM) grouped
    by (process, file): (group of each record, group of each target row, the target rows' sources, process of
    each group, file of each group), groups in (process, file) order."""
    if extra_rows is not None:
        tproc, tfid, tsrc = extra_rows
    else:
        tproc = tfid = tsrc = np.zeros(0, "i8")
    kp = np.r_[proc, tproc].astype("i8")
    kf = np.r_[fid.astype("u8"), tfid.astype("u8")]
    if len(kp) and kp.min() == kp.max():  # one process (the reader folds process by process): groups are its files
        uf, ginv = np.unique(kf, return_inverse=True)
        ginv = ginv.astype("i8", copy=False)
        gproc, gfile = np.full(len(uf), kp[0], "i8"), uf
    else:
        o = np.lexsort((kf, kp))
        ps, fs = kp[o], kf[o]
        new = np.r_[True, (ps[1:] != ps[:-1]) | (fs[1:] != fs[:-1])] if len(ps) else np.zeros(0, bool)
        ginv = np.empty(len(kp), "i8")
        ginv[o] = np.cumsum(new) - 1
        gproc, gfile = ps[new], fs[new]
    return ginv[: len(proc)], ginv[len(proc):], tsrc, gproc, gfile


class _Groups:
    """Per-group reductions over records sorted by (group, start): counts, sums and first/last times of a selection."""

    __slots__ = ("g", "n", "t0", "t1", "base")

    def __init__(self, g: np.ndarray, n: int, t0: np.ndarray, t1: np.ndarray, base: np.ndarray) -> None:
        self.g, self.n, self.t0, self.t1, self.base = g, n, t0, t1, base  # base: start of each group's process

    def count(self, mask) -> np.ndarray:
        return np.bincount(self.g[mask], minlength=self.n).astype("i8")

    def sum(self, mask, vals: np.ndarray) -> np.ndarray:
        return _group_reduce(np.add, self.g[mask], vals[mask], self.n, 0.0)

    def first_start(self, mask) -> np.ndarray:
        """Start of the first selected record of each group, relative to its process's start (0 without one)."""
        return np.where(self.count(mask) > 0,
                        _group_reduce(np.minimum, self.g[mask], self.t0[mask], self.n, np.inf) - self.base, 0.0)

    def last_end(self, mask) -> np.ndarray:
        """End of the last selected record of each group, relative to its process's start (0 without one)."""
        return np.where(self.count(mask) > 0,
                        _group_reduce(np.maximum, self.g[mask], self.t1[mask], self.n, -np.inf) - self.base, 0.0)


def _posix_values(groups: _Groups, opc, flags, ln, dur, is_rw, rw: dict, g_tgt, tsrc) -> dict[str, np.ndarray]:
    """The POSIX module's counters per group, in Darshan's column order (``rw``: from ``_access_stats``)."""
    ngroups, g, cnt = groups.n, groups.g, groups.count
    isop = lambda *names: np.isin(opc, [OPC[n] for n in names])  # noqa: E731
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
        "POSIX_F_OPEN_START_TIMESTAMP": groups.first_start(opens), "POSIX_F_READ_START_TIMESTAMP": groups.first_start(reads),
        "POSIX_F_WRITE_START_TIMESTAMP": groups.first_start(writes), "POSIX_F_CLOSE_START_TIMESTAMP": groups.first_start(closes),
        "POSIX_F_OPEN_END_TIMESTAMP": groups.last_end(opens), "POSIX_F_READ_END_TIMESTAMP": groups.last_end(reads),
        "POSIX_F_WRITE_END_TIMESTAMP": groups.last_end(writes), "POSIX_F_CLOSE_END_TIMESTAMP": groups.last_end(closes),
        "POSIX_F_READ_TIME": rw["_READ_TIME"], "POSIX_F_WRITE_TIME": rw["_WRITE_TIME"],
        "POSIX_F_META_TIME": groups.sum(meta, dur),
        "POSIX_F_MAX_READ_TIME": rw["_MAX_READ_TIME"], "POSIX_F_MAX_WRITE_TIME": rw["_MAX_WRITE_TIME"],
        "POSIX_F_FASTEST_RANK_TIME": zero_f, "POSIX_F_SLOWEST_RANK_TIME": zero_f,
        "POSIX_F_VARIANCE_RANK_TIME": zero_f, "POSIX_F_VARIANCE_RANK_BYTES": zero_f,
    })
    return vals


def _stdio_values(groups: _Groups, opc, dur, is_rw, rw: dict) -> dict[str, np.ndarray]:
    """The STDIO module's counters per group, in Darshan's column order (``rw``: from ``_access_stats``)."""
    ngroups, cnt = groups.n, groups.count
    opens, fdopens = opc == OPC["open"], opc == OPC["fdopen"]
    reads, writes, closes = opc == OPC["read"], opc == OPC["write"], opc == OPC["close"]
    meta = ~is_rw
    meta_time = groups.sum(meta, dur)
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
        "STDIO_F_OPEN_START_TIMESTAMP": groups.first_start(opens | fdopens), "STDIO_F_CLOSE_START_TIMESTAMP": groups.first_start(closes),
        "STDIO_F_WRITE_START_TIMESTAMP": groups.first_start(writes), "STDIO_F_READ_START_TIMESTAMP": groups.first_start(reads),
        "STDIO_F_OPEN_END_TIMESTAMP": groups.last_end(opens | fdopens), "STDIO_F_CLOSE_END_TIMESTAMP": groups.last_end(closes),
        "STDIO_F_WRITE_END_TIMESTAMP": groups.last_end(writes), "STDIO_F_READ_END_TIMESTAMP": groups.last_end(reads),
        "STDIO_F_FASTEST_RANK_TIME": zero_f, "STDIO_F_SLOWEST_RANK_TIME": zero_f,
        "STDIO_F_VARIANCE_RANK_TIME": zero_f, "STDIO_F_VARIANCE_RANK_BYTES": zero_f,
    }
    return vals
