"""``module_counters`` of one process folded over bounded chunks of its records, with the same numbers.

A process of tens of millions of operations cannot hold its records (48 bytes each) and their sorted
temporaries at once.  ``ModuleFold`` takes the records of one module of one process **in time order** (the
stable start-time order of the ``ops`` table), chunk by chunk, and carries per group (file) what a counter needs
from earlier chunks: the last byte of the previous access (sequential / consecutive / stride), the previous
direction (read/write switches), the slowest operation so far, the first open's mode, the counts of each
(value) for the four most common access sizes and strides.  Sums of seconds are numpy's pairwise sums
(``np.add.reduceat``) in ``module_counters``: ``PairwiseSum`` rebuilds exactly that sum from a stream whose
length is known in advance (counted by the reader's first pass), so no float changes.  Only the (value, count)
tables of access sizes and strides grow with the data (one entry per distinct value per file).
"""

from __future__ import annotations

import numpy as np

from ...collectors.embedded.format import OPC, RF_MEM_UNALIGNED, RF_OFFSET_UNKNOWN
from .embedded_counters import FILE_ALIGNMENT, MEM_ALIGNMENT, SIZE_BUCKETS, _SIZE_EDGES, module_counters

__all__ = ["ModuleFold", "PairwiseSum", "sum_counts"]

_LEAF = 1 << 16  # values summed by one numpy call: a subtree of numpy's pairwise recursion (>= 128)


def _split(n: int) -> int:
    """Where numpy's pairwise sum of n > 128 values splits them (``n2 = n / 2; n2 -= n2 % 8``)."""
    n2 = n // 2
    return n2 - n2 % 8


def _leaves(lo: int, n: int, out: list) -> None:
    """The ranges (start, length) of numpy's pairwise recursion over ``n`` values from ``lo``, cut down to at most
    ``_LEAF`` values each, left to right."""
    if n <= _LEAF:
        out.append((lo, n))
        return
    n2 = _split(n)
    _leaves(lo, n2, out)
    _leaves(lo + n2, n - n2, out)


class PairwiseSum:
    """``np.add.reduceat(v, [0])[0]`` of ``n`` values given in pieces: the first value plus numpy's pairwise sum of
    the others, rebuilt leaf by leaf (each leaf a subtree of numpy's recursion, summed by numpy itself) and the
    leaves combined in numpy's tree.  Holds at most one leaf of values."""

    __slots__ = ("n", "first", "buf", "sums", "leaves", "seen")

    def __init__(self, n: int) -> None:
        self.n = int(n)
        self.first = None
        self.buf: list[np.ndarray] = []
        self.sums: list[float] = []
        self.leaves: list[tuple[int, int]] = []
        if self.n > 1:
            _leaves(0, self.n - 1, self.leaves)
        self.seen = 0  # values of the rest (after the first) buffered or summed

    def push(self, v: np.ndarray) -> None:
        if not len(v):
            return
        if self.first is None:
            self.first = float(v[0])
            v = v[1:]
        self.buf.append(v)
        self.seen += len(v)
        self._drain()

    def _drain(self) -> None:
        done = sum(n for _, n in self.leaves[:len(self.sums)])
        while len(self.sums) < len(self.leaves) and self.seen - done >= self.leaves[len(self.sums)][1]:
            k = self.leaves[len(self.sums)][1]
            flat = np.concatenate(self.buf) if len(self.buf) > 1 else self.buf[0]
            # -0.0 + pairwise(leaf) is exactly pairwise(leaf): reduceat adds the rest to its first value
            self.sums.append(float(np.add.reduceat(np.r_[-0.0, flat[:k]], [0])[0]))
            self.buf = [flat[k:]] if len(flat) > k else []
            done += k

    def value(self) -> float:
        if self.first is None:
            return 0.0
        if self.n == 1:
            return self.first
        assert len(self.sums) == len(self.leaves), "fewer values than counted"
        it = iter(self.sums)

        def tree(n: int) -> float:
            if n <= _LEAF:
                return next(it)
            n2 = _split(n)
            left = tree(n2)
            return left + tree(n - n2)

        return self.first + tree(self.n - 1)


class _GroupSums:
    """Per group, the ``reduceat`` sum of the values of its rows (in their order), given chunk by chunk; groups whose
    rows all come in one chunk are summed by numpy directly."""

    def __init__(self, counts: np.ndarray) -> None:
        self.counts = np.asarray(counts, "i8")
        self.out = np.zeros(len(self.counts))
        self.seen = np.zeros(len(self.counts), "i8")
        self.open: dict[int, PairwiseSum] = {}

    def add(self, g: np.ndarray, v: np.ndarray) -> None:
        """Rows of this chunk, sorted by group (time order inside each)."""
        if not len(g):
            return
        starts = np.flatnonzero(np.r_[True, g[1:] != g[:-1]])
        groups = g[starts]
        sizes = np.diff(np.r_[starts, len(g)])
        whole = (self.seen[groups] == 0) & (sizes == self.counts[groups])
        if whole.any():
            sums = np.add.reduceat(v, starts)
            self.out[groups[whole]] = sums[whole]
        for k in np.flatnonzero(~whole).tolist():
            gi = int(groups[k])
            s = self.open.get(gi)
            if s is None:
                s = self.open[gi] = PairwiseSum(int(self.counts[gi]))
            s.push(v[starts[k]:starts[k] + sizes[k]])
            if self.seen[gi] + sizes[k] == self.counts[gi]:
                self.out[gi] = s.value()
                del self.open[gi]
        self.seen[groups] += sizes

    def result(self) -> np.ndarray:
        if self.open:
            raise ValueError("a group's rows ended before its count: the trace changed while it was read")
        return self.out


class _Pairs:
    """Counts of (group, value) pairs over chunks: the exact input of ``_top4``, merged as it grows."""

    def __init__(self) -> None:
        self.parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self.size = 0
        self.merged = 0

    def add(self, g: np.ndarray, v: np.ndarray) -> None:
        if len(g):
            self.parts.append(self._count(g, v, np.ones(len(g), "i8")))
            self.size += len(self.parts[-1][0])
            if len(self.parts) > 1 and self.size > max(1 << 20, 2 * self.merged):
                self._merge()

    @staticmethod
    def _count(g, v, c):
        o = np.lexsort((v, g))
        gs, vs, cs = g[o], v[o], c[o]
        start = np.flatnonzero(np.r_[True, (gs[1:] != gs[:-1]) | (vs[1:] != vs[:-1])])
        return gs[start], vs[start], np.add.reduceat(cs, start)

    def _merge(self):
        g = np.concatenate([p[0] for p in self.parts])
        v = np.concatenate([p[1] for p in self.parts])
        c = np.concatenate([p[2] for p in self.parts])
        self.parts = [self._count(g, v, c)]
        self.size = self.merged = len(self.parts[0][0])

    def top4(self, ngroups: int) -> tuple[np.ndarray, np.ndarray]:
        """``_top4`` of every pair added: per group the 4 most common values (higher count, then larger value)."""
        values = np.zeros((ngroups, 4), "i8")
        counts = np.zeros((ngroups, 4), "i8")
        if not self.parts:
            return values, counts
        self._merge()
        pg, pv, cnt = self.parts[0]
        order = np.lexsort((-pv, -cnt, pg))
        ug, uv, uc = pg[order], pv[order], cnt[order]
        first = np.flatnonzero(np.r_[True, ug[1:] != ug[:-1]])
        rank = np.arange(len(ug)) - np.repeat(first, np.diff(np.r_[first, len(ug)]))
        keep = rank < 4
        values[ug[keep], rank[keep]] = uv[keep]
        counts[ug[keep], rank[keep]] = uc[keep]
        return values, counts


def _reduce_into(ufunc, out: np.ndarray, g: np.ndarray, vals: np.ndarray) -> None:
    """``ufunc.at(out, g, vals)`` for rows sorted by group (one ``reduceat``, much faster than ``ufunc.at``)."""
    if not len(g):
        return
    starts = np.flatnonzero(np.r_[True, g[1:] != g[:-1]])
    grp = g[starts]
    out[grp] = ufunc(out[grp], ufunc.reduceat(vals, starts))


def sum_counts(mod: str, fid: np.ndarray, opc: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(file ids, per file the rows of each summed class: read, write, metadata) of a chunk of one module's records,
    for the reader's first pass (``ModuleFold`` needs each group's count before its seconds can be summed)."""
    cls = np.where(opc == OPC["read"], 0, np.where(opc == OPC["write"], 1, 2)).astype("i8")
    uf, inv = np.unique(fid, return_inverse=True)
    return uf, np.bincount(inv.astype("i8") * 3 + cls, minlength=3 * len(uf)).reshape(len(uf), 3)


class ModuleFold:
    """Darshan counters of one module of one process (``module_counters``' numbers) from its records given chunk by
    chunk in time order.  ``keys`` are the process's files for this module (sorted, rename targets included) and
    ``sums`` per file its rows of each summed class (``sum_counts``); ``extra`` the rename rows of
    ``module_counters`` (process, target, source) in record order."""

    def __init__(self, mod: str, proc: int, keys: np.ndarray, sums: np.ndarray, base: float, extra=None) -> None:
        self.mod, self.proc, self.keys, self.base = mod, int(proc), np.asarray(keys, "u8"), float(base)
        self.extra = extra
        G = self.ngroups = len(self.keys)
        z = lambda dt="i8": np.zeros(G, dt)  # noqa: E731
        self.n: dict[str, np.ndarray] = {}  # counts per group, by name
        self.first: dict[str, np.ndarray] = {}  # first start per group (inf: none)
        self.last: dict[str, np.ndarray] = {}  # last end per group (-inf: none)
        self.meta = _GroupSums(sums[:, 2])
        self.time = {"READ": _GroupSums(sums[:, 0]), "WRITE": _GroupSums(sums[:, 1])}
        self.bytes = {k: z() for k in ("READ", "WRITE")}
        self.max_byte = {k: np.full(G, np.iinfo("i8").min, "i8") for k in ("READ", "WRITE")}  # (0 when no rows)
        self.max_time = {k: z("f8") for k in ("READ", "WRITE")}
        self.prev_last = {k: z() for k in ("READ", "WRITE")}  # Darshan's last byte of the previous access
        self.started = {k: z(bool) for k in ("READ", "WRITE")}
        self.seq = {k: z() for k in ("READ", "WRITE")}
        self.consec = {k: z() for k in ("READ", "WRITE")}
        self.hist = {k: np.zeros((G, len(SIZE_BUCKETS)), "i8") for k in ("READ", "WRITE")}
        self.slow = {k: np.full(G, -np.inf) for k in ("READ", "WRITE")}
        self.slow_size = {k: z() for k in ("READ", "WRITE")}
        self.last_kind = np.full(G, -1, "i1")
        self.switches = z()
        self.not_aligned = z()
        self.mode = z()
        self.has_mode = z(bool)
        self.access = _Pairs()
        self.stride = _Pairs()

    def _count(self, name: str, g: np.ndarray, mask: np.ndarray) -> None:
        c = np.bincount(g[mask], minlength=self.ngroups)
        self.n[name] = self.n[name] + c if name in self.n else c.astype("i8")

    def _span(self, name: str, g: np.ndarray, mask: np.ndarray, t0: np.ndarray, t1: np.ndarray) -> None:
        if name not in self.first:
            self.first[name] = np.full(self.ngroups, np.inf)
            self.last[name] = np.full(self.ngroups, -np.inf)
        if mask.any():
            gm = g[mask]
            _reduce_into(np.minimum, self.first[name], gm, t0[mask])
            _reduce_into(np.maximum, self.last[name], gm, t1[mask])

    def add(self, fid, opc, flags, off, ln, t0, t1) -> None:
        """A chunk of the module's records (columns of equal length), in time order after the chunks before."""
        if not len(fid):
            return
        g = np.searchsorted(self.keys, fid).astype("i8")
        if len(g) > 1 and bool(np.any(g[1:] < g[:-1])):  # stable: time order inside each group
            order = np.argsort(g, kind="stable")
            g, opc, flags, off, ln, t0, t1 = g[order], opc[order], flags[order], off[order], ln[order], t0[order], t1[order]
            del order
        dur = t1 - t0
        is_rw = (opc == OPC["read"]) | (opc == OPC["write"])
        posix = self.mod == "POSIX"
        opens = np.isin(opc, [OPC["open"], OPC["opendir"]]) if posix else opc == OPC["open"]
        fdopens = opc == OPC["fdopen"]
        closes = np.isin(opc, [OPC["close"], OPC["closedir"]]) if posix else opc == OPC["close"]
        if posix:
            dup = opc == OPC["dup"]
            self._count("opens", g, opens | dup)
            self._count("dups", g, dup)
            for name in ("seek", "stat", "fsync", "fdatasync", "rename"):
                self._count(name, g, opc == OPC[name])
            self._count("mem", g, is_rw & ((flags & RF_MEM_UNALIGNED) != 0))
            mode_rows = np.flatnonzero((opc == OPC["open"]) & ~self.has_mode[g])
            if len(mode_rows):
                mg = g[mode_rows]
                firsts = mode_rows[np.r_[True, mg[1:] != mg[:-1]]]
                self.mode[g[firsts]] = ln[firsts]
                self.has_mode[g[firsts]] = True
        else:
            self._count("opens", g, opens | fdopens)
            self._count("fdopens", g, fdopens)
            self._count("seek", g, opc == OPC["seek"])
            self._count("flush", g, opc == OPC["flush"])
            opens = opens | fdopens
        for name, mask in (("open", opens), ("read", opc == OPC["read"]), ("write", opc == OPC["write"]),
                           ("close", closes)):
            self._span(name, g, mask, t0, t1)
        meta = ~is_rw
        self.meta.add(g[meta], dur[meta])
        if is_rw.any():
            self._rw(g[is_rw], np.where(flags[is_rw] & RF_OFFSET_UNKNOWN, -1, off[is_rw]), ln[is_rw],
                     opc[is_rw] == OPC["write"], dur[is_rw])

    def _rw(self, g, off, ln, is_write, dur) -> None:
        posix = self.mod == "POSIX"
        known = off >= 0
        for kind, sel in (("READ", ~is_write), ("WRITE", is_write)):
            gg, oo, ll, dd, kk = g[sel], off[sel], ln[sel], dur[sel], known[sel]
            if not len(gg):
                continue
            self._count(kind, gg, np.ones(len(gg), bool))
            self.bytes[kind] += np.bincount(gg, weights=ll, minlength=self.ngroups).astype("i8")
            last = np.where(kk, oo + ll - 1, -1)
            _reduce_into(np.maximum, self.max_byte[kind], gg, last)
            self.time[kind].add(gg, dd)
            _reduce_into(np.maximum, self.max_time[kind], gg, dd)
            if not posix:
                continue
            first = np.r_[True, gg[1:] != gg[:-1]]
            prev_last = np.r_[0, last[:-1]]
            fg = gg[first]
            prev_last[first] = np.where(self.started[kind][fg], self.prev_last[kind][fg], 0)
            ends = np.r_[np.flatnonzero(first)[1:] - 1, len(gg) - 1]
            self.prev_last[kind][fg] = last[ends]
            self.started[kind][fg] = True
            self._count(f"seq_{kind}", gg, kk & (oo > prev_last))
            self._count(f"consec_{kind}", gg, kk & (oo == prev_last + 1))
            gap = oo - prev_last - 1
            fwd = kk & (oo > 0) & (oo > prev_last) & (prev_last != 0) & (gap != 0)
            self.stride.add(gg[fwd], gap[fwd])
            bucket = np.searchsorted(_SIZE_EDGES, ll, side="right")
            self.hist[kind] += np.bincount(gg * len(SIZE_BUCKETS) + bucket,
                                           minlength=self.ngroups * len(SIZE_BUCKETS)).reshape(self.ngroups, -1)
            # the slowest operation's size, on a tie the last one: the last row of each group by (dur, position)
            starts = np.flatnonzero(first)
            top = np.repeat(np.maximum.reduceat(dd, starts), np.diff(np.r_[starts, len(gg)]))
            rows = np.flatnonzero(dd == top)  # (no NaN: durations are differences of integer times)
            rows = rows[np.r_[gg[rows][1:] != gg[rows][:-1], True]]
            del top
            rg = gg[rows]
            later = dd[rows] >= self.slow[kind][rg]
            self.slow[kind][rg[later]] = dd[rows][later]
            self.slow_size[kind][rg[later]] = ll[rows][later]
        if posix:
            kind = is_write.astype("i1")
            first = np.r_[True, g[1:] != g[:-1]]
            prev = np.r_[np.int8(0), kind[:-1]]
            fg = g[first]
            prev[first] = self.last_kind[fg]
            sw = (kind != prev) & (prev >= 0)
            ends = np.r_[np.flatnonzero(first)[1:] - 1, len(g) - 1]
            self.last_kind[fg] = kind[ends]
            self.switches += np.bincount(g[sw], minlength=self.ngroups)
            self.not_aligned += np.bincount(g[known & (off % FILE_ALIGNMENT != 0)], minlength=self.ngroups)
            nz = ln != 0
            self.access.add(g[nz], ln[nz])

    # ------------------------------------------------------------------ the counters
    def _n(self, name: str) -> np.ndarray:
        return self.n.get(name, np.zeros(self.ngroups, "i8")).astype("i8")

    def _first(self, name: str) -> np.ndarray:
        f = self.first.get(name)
        return np.zeros(self.ngroups) if f is None else np.where(np.isfinite(f), f - self.base, 0.0)

    def _last(self, name: str) -> np.ndarray:
        f = self.last.get(name)
        return np.zeros(self.ngroups) if f is None else np.where(np.isfinite(f), f - self.base, 0.0)

    def finish(self) -> dict[str, np.ndarray]:
        G, mod = self.ngroups, self.mod
        zero_i, zero_f = np.zeros(G, "i8"), np.zeros(G)
        v: dict[str, np.ndarray] = {"log": np.full(G, self.proc, "i8"), "proc": np.full(G, self.proc, "i8"),
                                    "rank": np.zeros(G, "i8"), "file_id": self.keys}
        for kind, label, by in (("READ", "READS", "READ"), ("WRITE", "WRITES", "WRITTEN")):
            v[f"{mod}_{label}"] = self._n(kind)
            v[f"{mod}_BYTES_{by}"] = self.bytes[kind]
            v[f"{mod}_MAX_BYTE_{by}"] = np.where(v[f"{mod}_{label}"] > 0, self.max_byte[kind], 0)
            v[f"{mod}_F_{kind}_TIME"] = self.time[kind].result()
            if mod == "POSIX":  # (STDIO has no MAX_*_TIME counters)
                v[f"{mod}_F_MAX_{kind}_TIME"] = self.max_time[kind]
            v[f"{mod}_F_{kind}_START_TIMESTAMP"] = self._first(kind.lower())
            v[f"{mod}_F_{kind}_END_TIMESTAMP"] = self._last(kind.lower())
        for which in ("OPEN", "CLOSE"):
            v[f"{mod}_F_{which}_START_TIMESTAMP"] = self._first(which.lower())
            v[f"{mod}_F_{which}_END_TIMESTAMP"] = self._last(which.lower())
        v[f"{mod}_F_META_TIME"] = self.meta.result()
        v[f"{mod}_OPENS"] = self._n("opens")
        v[f"{mod}_SEEKS"] = self._n("seek")
        for name in ("FASTEST_RANK", "FASTEST_RANK_BYTES", "SLOWEST_RANK", "SLOWEST_RANK_BYTES"):
            v[f"{mod}_{name}"] = zero_i
        for name in ("FASTEST_RANK_TIME", "SLOWEST_RANK_TIME", "VARIANCE_RANK_TIME", "VARIANCE_RANK_BYTES"):
            v[f"{mod}_F_{name}"] = zero_f
        if mod == "STDIO":
            v["STDIO_FDOPENS"] = self._n("fdopens")
            v["STDIO_FLUSHES"] = self._n("flush")
        else:
            self._posix(v)
        # the columns in ``module_counters``' order
        order = list(module_counters(mod, *self._empty()))
        assert set(order) == set(v), set(order) ^ set(v)
        return {k: v[k] for k in order}

    def _posix(self, v: dict) -> None:
        G = self.ngroups
        rename_targets, renamed_from = np.zeros(G, "i8"), np.zeros(G, "i8")
        if self.extra is not None and len(self.extra[1]):
            g_tgt = np.searchsorted(self.keys, self.extra[1].astype("u8"))
            rename_targets = np.bincount(g_tgt, minlength=G).astype("i8")
            renamed_from[g_tgt] = self.extra[2].astype("u8").view("i8")
        v.update({
            "POSIX_FILENOS": np.zeros(G, "i8"), "POSIX_DUPS": self._n("dups"), "POSIX_STATS": self._n("stat"),
            "POSIX_MMAPS": np.full(G, -1, "i8"), "POSIX_FSYNCS": self._n("fsync"),
            "POSIX_FDSYNCS": self._n("fdatasync"), "POSIX_RENAME_SOURCES": self._n("rename"),
            "POSIX_RENAME_TARGETS": rename_targets, "POSIX_RENAMED_FROM": renamed_from, "POSIX_MODE": self.mode,
            "POSIX_CONSEC_READS": self._n("consec_READ"), "POSIX_CONSEC_WRITES": self._n("consec_WRITE"),
            "POSIX_SEQ_READS": self._n("seq_READ"), "POSIX_SEQ_WRITES": self._n("seq_WRITE"),
            "POSIX_RW_SWITCHES": self.switches.astype("i8"), "POSIX_MEM_NOT_ALIGNED": self._n("mem"),
            "POSIX_MEM_ALIGNMENT": np.full(G, MEM_ALIGNMENT, "i8"),
            "POSIX_FILE_NOT_ALIGNED": self.not_aligned.astype("i8"),
            "POSIX_FILE_ALIGNMENT": np.full(G, FILE_ALIGNMENT, "i8"),
            "POSIX_MAX_READ_TIME_SIZE": self.slow_size["READ"], "POSIX_MAX_WRITE_TIME_SIZE": self.slow_size["WRITE"],
        })
        for kind in ("READ", "WRITE"):
            for j, name in enumerate(SIZE_BUCKETS):
                v[f"POSIX_SIZE_{kind}_{name}"] = self.hist[kind][:, j].copy()
        av, ac = self.access.top4(G)
        sv, sc = self.stride.top4(G)
        for j in range(4):
            v[f"POSIX_ACCESS{j + 1}_ACCESS"] = av[:, j]
            v[f"POSIX_ACCESS{j + 1}_COUNT"] = ac[:, j]
            v[f"POSIX_STRIDE{j + 1}_STRIDE"] = sv[:, j]
            v[f"POSIX_STRIDE{j + 1}_COUNT"] = sc[:, j]

    def _empty(self):
        e = np.zeros(0, "i8")
        return (e, e.astype("u8"), e.astype("u1"), e.astype("u2"), e, e, e.astype("f8"), e.astype("f8"),
                np.zeros(1))
