"""Operations in (process, file, op, start) group order, batch by batch.

Several detectors walk the POSIX reads and writes of the ``ops`` table grouped by (process, file, op) in time
order (sequential runs, strides, small requests).  ``ops_group_chunks`` gives them those rows in bounded batches
with a "same group as the row before" mask; the sort order is computed once per profile (``_group_order``) and,
for a held table of one batch, the selected rows themselves are kept (``_group_rows``).
"""

from __future__ import annotations

from typing import Iterator

import numpy as np

from ..profile import OP, JobProfile, Table
from . import batches
from .counters import memo
from .nputil import stable_argsort_small


def _lex_sorted(t: Table) -> bool:
    """Whether rows already run in (proc, file_id, op, start_s) order, so that the stable lexsort is the identity.
    Checked over bounded batches of adjacent pairs (a few bytes per row of the batch, not copies of the columns)."""
    n = len(t)
    if n < 2:
        return True
    keys = [t["proc"], t["file_id"], t["op"], t["start_s"]]
    step = batches.CHUNK_OPS
    for lo in range(0, n - 1, step):
        hi = min(lo + step, n - 1)
        undecided = None  # pairs of this batch equal on every key so far (None: all of them)
        for k, a in enumerate(keys):
            x, y = a[lo:hi], a[lo + 1:hi + 1]
            if undecided is not None:
                x, y = x[undecided], y[undecided]
            if k == len(keys) - 1:
                if not np.all(y >= x):
                    return False
                break
            if np.any(y < x):
                return False
            eq = y == x
            if undecided is None:
                undecided = eq
            else:
                undecided[undecided] = eq
            if not undecided.any():
                break
    return True


def _group_order(profile: JobProfile, o: Table) -> np.ndarray | None:
    """The stable (proc, file_id, op, start_s) order of a table of ``process_tables`` (None when the rows already
    run in it).  Several detectors group the same operations with different selections: for a held ``ops``
    table the order is computed once and kept (4 or 8 bytes per operation); a source's tables are one process
    each and are sorted as they come."""
    d = memo(profile) if o is profile.ops else {}  # a held table is given whole (process_tables)
    if "ops_group_order" not in d:
        if _lex_sorted(o):
            order = None
        else:
            order = _keyed_group_order(profile, o)
            if order is None:
                order = np.lexsort((o["start_s"], o["op"], o["file_id"], o["proc"]))
            if len(order) < 2**31:
                order = order.astype(np.int32)
        d["ops_group_order"] = order
    return d["ops_group_order"]


def _keyed_group_order(profile: JobProfile, o: Table) -> np.ndarray | None:
    """The stable (proc, file_id, op, start_s) order of a table already in time order, by radix passes: rows in
    time order sorted stably by one integer key (proc, file, op) keep time order inside each group, which is the
    lexsort's order, at a quarter of its cost (16-bit keys are radix-sorted).  None when the table is not in time
    order, a process number is negative or a file is missing from the profile's files table."""
    st, proc, op, fid = o["start_s"], o["proc"], o["op"], o["file_id"]
    files = profile.files["file_id"] if profile.files is not None and "file_id" in profile.files else None
    if files is None or not len(files) or not bool(np.all(st[1:] >= st[:-1])):
        return None
    if int(proc.min()) < 0 or int(op.min()) < 0:
        return None
    fi = np.searchsorted(files, fid)
    fi = np.minimum(fi, len(files) - 1)
    if not bool(np.all(files[fi] == fid)):
        return None
    nop = int(op.max()) + 1
    if (int(proc.max()) + 1) * len(files) * nop >= 2**62:
        return None
    key = (proc.astype(np.int64) * len(files) + fi) * nop + op
    idx = stable_argsort_small(key & 0xFFFF)
    hi = key >> 16
    if int(hi.max()) > 0:
        idx = idx[stable_argsort_small(hi[idx])]
    return idx


def ops_group_chunks(profile: JobProfile, mask=None,
                     columns: tuple[str, ...] = ("proc", "file_id", "op", "offset", "length"),
                     chunk: int | None = None) -> Iterator[tuple[Table, np.ndarray, dict | None]]:
    """POSIX read/write ops (optionally only rows where ``mask(table)`` holds, a per-row test) in (proc, file, op,
    start) order, in batches of at most ``chunk`` rows: ``(table, same, prev)`` where ``same[k]`` says row k is in
    the same (proc, file, op) group as the row before it (for the first row of a batch: the last row of the
    previous batch) and ``prev`` holds that previous row's ``columns`` (None for the first batch).

    The rows are selected before they are sorted and only ``columns`` are copied, batch by batch: the memory is the
    sort order of the selected rows (8 bytes each) plus one batch, never a sorted copy of the ops table.  The order
    is that of sorting every read/write and filtering (the sort is stable).  ``mask`` reads only the columns of
    ``_GROUP_COLUMNS`` (on a held table of one batch it is given those rows, already gathered: ``_group_rows``)."""
    chunk = chunk or batches.CHUNK_OPS
    cols = tuple(dict.fromkeys(("proc", "file_id", "op") + tuple(columns)))
    prev = None
    # a stable lexsort with the process as first key keeps processes apart: sorting whole processes at a time
    # (one table each when the ops are a source) gives the order of sorting the whole table
    # the sort keys, the selection's columns (a mask reads offsets, lengths or files) and ``columns``
    need = ("proc", "file_id", "op", "module", "start_s", "offset", "length") + tuple(columns)
    shared = _group_rows(profile, chunk) if set(cols) <= set(_GROUP_COLUMNS) else None
    if shared is not None:  # one batch: the selection from the POSIX reads/writes already in group order
        keep = None if mask is None else mask(shared)
        t = shared if keep is None or bool(keep.all()) else Table._trusted({c: shared[c][keep] for c in cols})
        if len(t):
            yield t, _same_group(t, None), None
        return
    src = profile.ops if batches.is_source(profile.ops) else None
    for i, o in _process_parts(profile.ops, need):
        if o is None:  # a process given in bounded batches: its groups are gathered a few at a time
            for t in _streamed_groups(src, i, need, mask, cols, chunk):
                yield t, _same_group(t, prev), prev
                prev = {c: t[c][-1] for c in cols}
            continue
        keep = (o["op"] <= OP["write"]) & (o["module"] == 0)
        if mask is not None:
            keep &= mask(o)
        everything = bool(keep.all())
        # the order of the selected rows is their order in a stable sort of all rows: sort (or check) the columns
        # themselves, then drop the rows not selected (no copy of the key columns)
        order = _group_order(profile, o)
        if order is None:
            idx = None if everything else np.flatnonzero(keep)
        else:
            idx = order if everything else order[keep[order]]
        del keep
        n = len(o) if idx is None else len(idx)
        for lo in range(0, n, chunk):
            rows = slice(lo, min(lo + chunk, n)) if idx is None else idx[lo:lo + chunk]
            t = Table._trusted({c: o[c][rows] for c in cols})
            yield t, _same_group(t, prev), prev
            prev = {c: t[c][-1] for c in cols}


_GROUP_COLUMNS = ("proc", "file_id", "op", "offset", "length")


def _process_parts(ops, need):
    """(process index, its table) for each process of a held table or a source; (index, None) for a process that a
    source gives in bounded batches (``OpsSource.batches_of``): it is never built whole."""
    if not batches.is_source(ops):
        for o in batches.process_tables(ops):
            yield -1, o
        return
    for i, (_, k) in enumerate(ops.counts()):
        if k:
            yield (i, None) if ops._ordered[i] else (i, ops.process(i, need))


def _selected(o: Table, mask) -> np.ndarray:
    keep = (o["op"] <= OP["write"]) & (o["module"] == 0)
    if mask is not None:
        keep &= mask(o)
    return keep


def _streamed_groups(src, i: int, need, mask, cols, chunk: int) -> Iterator[Table]:
    """The selected POSIX reads/writes of the i-th process of a source, in (file, op, start) order, in batches, without
    holding the process: a first pass over its batches counts the rows of each (file, op) group; then groups are
    gathered in buckets of whole groups of at most ``4 * chunk`` rows (one pass over the batches each) and each
    bucket sorted stably by (file, op), while a group larger than that is given as it comes (its rows come in time
    order, which is its order).  A process's rows in time order sorted stably by (file, op) are in the order of the
    stable (proc, file, op, start) sort, so the rows and their order are those of the held table's path."""
    parts = []
    for o in src.batches_of(i, need):
        keep = _selected(o, mask)
        if keep.any():
            f, op = o["file_id"][keep], o["op"][keep].astype("i8")
            parts.append(_pair_counts(f, op, np.ones(len(f), "i8")))
    if not parts:
        return
    f = np.concatenate([p[0] for p in parts])
    op = np.concatenate([p[1] for p in parts])
    n = np.concatenate([p[2] for p in parts])
    f, op, n = _pair_counts(f, op, n)
    cap = 4 * chunk
    lo = 0
    while lo < len(f):
        hi, total = lo + 1, int(n[lo])
        while hi < len(f) and total + int(n[hi]) <= cap:
            total += int(n[hi])
            hi += 1
        kf, ko, jf, jo = f[lo], op[lo], f[hi - 1], op[hi - 1]

        def inside(o):
            fo, oo = o["file_id"], o["op"]
            return (((fo > kf) | ((fo == kf) & (oo >= ko))) & ((fo < jf) | ((fo == jf) & (oo <= jo))))

        got = []
        for o in src.batches_of(i, need):
            keep = _selected(o, mask) & inside(o)
            if not keep.any():
                continue
            t = Table._trusted({c: o[c][keep] for c in cols})
            if total > cap:  # one group: in time order already
                yield t
            else:
                got.append(t)
        if got:
            t = Table.concat(got) if len(got) > 1 else got[0]
            if hi - lo > 1:
                order = np.lexsort((t["op"], t["file_id"]))
                t = t.take(order)
            for sl in batches.chunks(len(t), chunk):
                yield Table._trusted({c: t[c][sl] for c in cols})
        lo = hi


def _pair_counts(f: np.ndarray, op: np.ndarray, n: np.ndarray):
    """Distinct (file, op) pairs, sorted, with the sum of ``n`` of each."""
    o = np.lexsort((op, f))
    fs, ops, ns = f[o], op[o], n[o]
    start = np.flatnonzero(np.r_[True, (fs[1:] != fs[:-1]) | (ops[1:] != ops[:-1])])
    return fs[start], ops[start], np.add.reduceat(ns, start)


def _same_group(t: Table, prev: dict | None) -> np.ndarray:
    """Per row of a batch in group order: whether it is in the (proc, file, op) group of the row before it (for the
    first row, the previous batch's last row ``prev``; None: a new group)."""
    p, f, op = t["proc"], t["file_id"], t["op"]
    same = np.zeros(len(t), bool)
    same[1:] = (p[1:] == p[:-1]) & (f[1:] == f[:-1]) & (op[1:] == op[:-1])
    if prev is not None:
        same[0] = prev["proc"] == p[0] and prev["file_id"] == f[0] and prev["op"] == op[0]
    return same


def _group_rows(profile: JobProfile, chunk: int) -> Table | None:
    """The POSIX reads and writes of a held ``ops`` table of at most ``chunk`` of them, in (proc, file, op, start)
    order, columns ``_GROUP_COLUMNS``: gathered once and kept (~29 bytes per operation) for the detectors that
    each select some of them (small ops, ops on some files), which then only filter; None for a source or more
    rows (those are selected and gathered batch by batch)."""
    o = profile.ops
    if batches.is_source(o):
        return None
    d = memo(profile)
    if "ops_group_rows" not in d:
        rw = (o["op"] <= OP["write"]) & (o["module"] == 0)
        rows = None
        if int(np.count_nonzero(rw)) <= chunk:
            order = _group_order(profile, o)
            idx = (np.flatnonzero(rw) if not bool(rw.all()) else None) if order is None else order[rw[order]]
            rows = Table._trusted({c: (o[c] if idx is None else o[c][idx]) for c in _GROUP_COLUMNS})
        d["ops_group_rows"] = rows
    return d["ops_group_rows"]


def previous_rows(t: Table, prev: dict | None, column: str) -> np.ndarray:
    """``column`` of the row before each row of a batch from ``ops_group_chunks`` (0 before the very first row)."""
    a = t[column]
    out = np.empty_like(a)
    if len(a):
        out[0] = prev[column] if prev is not None else 0
        out[1:] = a[:-1]
    return out


def merge_counts(acc: dict, values: np.ndarray) -> None:
    """Add the occurrences of each value to ``acc`` (value -> count)."""
    if len(values):
        u, c = np.unique(values, return_counts=True)
        for v, k in zip(u.tolist(), c.tolist()):
            acc[v] = acc.get(v, 0) + k


def mode_of(counts: dict) -> tuple[int, int]:
    """(most common value, its count); the smallest such value on a tie (as ``np.unique`` + ``argmax``)."""
    best = max(counts.values())
    return min(v for v, k in counts.items() if k == best), best
