"""Counter columns of a profile's module tables, derived once per profile.

A report reads the same Darshan counters many times: ``pcol`` gives a module's counter column with negatives
(Darshan's "not measured" -1) as 0, taken from the loader's 2-D counter arrays by one ``where`` per array;
``module_sums`` gives their column sums, which detectors use to exit early when a job total proves that no
file can reach their threshold, and which site features share; ``level_rows`` puts the POSIX-level counters
(POSIX and STDIO, the calls that reach the file system) of both modules into one table with common names.
Everything derived is kept in ``memo(profile)``, the dict that lives and dies with the profile's tables.
"""

from __future__ import annotations

import functools

import numpy as np

from ..profile import JobProfile, Table


# Darshan access-size buckets: suffix and upper edge in bytes
SIZE_BUCKETS: tuple[tuple[str, float], ...] = (
    ("0_100", 100), ("100_1K", 1024), ("1K_10K", 10 * 1024), ("10K_100K", 100 * 1024),
    ("100K_1M", 1024 ** 2), ("1M_4M", 4 * 1024 ** 2), ("4M_10M", 10 * 1024 ** 2),
    ("10M_100M", 100 * 1024 ** 2), ("100M_1G", 1024 ** 3), ("1G_PLUS", float("inf")),
)
META_OPS = ("open", "close", "stat", "seek", "fsync", "readdir", "mkdir", "rename", "unlink")


# POSIX-level counter names per module (missing ones read as zero)
_LEVEL = {
    "POSIX": dict(reads="POSIX_READS", writes="POSIX_WRITES", bytes_read="POSIX_BYTES_READ",
                  bytes_written="POSIX_BYTES_WRITTEN", read_s="POSIX_F_READ_TIME", write_s="POSIX_F_WRITE_TIME",
                  meta_s="POSIX_F_META_TIME", opens="POSIX_OPENS", stats="POSIX_STATS", seeks="POSIX_SEEKS",
                  fsyncs="POSIX_FSYNCS", fdsyncs="POSIX_FDSYNCS", max_read="POSIX_MAX_BYTE_READ",
                  max_written="POSIX_MAX_BYTE_WRITTEN", first_s="POSIX_F_OPEN_START_TIMESTAMP",
                  last_s="POSIX_F_CLOSE_END_TIMESTAMP", read_end_s="POSIX_F_READ_END_TIMESTAMP",
                  write_end_s="POSIX_F_WRITE_END_TIMESTAMP", slow_rank="POSIX_SLOWEST_RANK",
                  slow_bytes="POSIX_SLOWEST_RANK_BYTES", slow_s="POSIX_F_SLOWEST_RANK_TIME"),
    "STDIO": dict(reads="STDIO_READS", writes="STDIO_WRITES", bytes_read="STDIO_BYTES_READ",
                  bytes_written="STDIO_BYTES_WRITTEN", read_s="STDIO_F_READ_TIME", write_s="STDIO_F_WRITE_TIME",
                  meta_s="STDIO_F_META_TIME", opens="STDIO_OPENS", stats=None, seeks="STDIO_SEEKS",
                  fsyncs=None, fdsyncs=None, max_read="STDIO_MAX_BYTE_READ",
                  max_written="STDIO_MAX_BYTE_WRITTEN", first_s="STDIO_F_OPEN_START_TIMESTAMP",
                  last_s="STDIO_F_CLOSE_END_TIMESTAMP", read_end_s="STDIO_F_READ_END_TIMESTAMP",
                  write_end_s="STDIO_F_WRITE_END_TIMESTAMP", slow_rank="STDIO_SLOWEST_RANK",
                  slow_bytes="STDIO_SLOWEST_RANK_BYTES", slow_s="STDIO_F_SLOWEST_RANK_TIME"),
}
_FLOAT = ("read_s", "write_s", "meta_s", "first_s", "last_s", "slow_s", "read_end_s", "write_end_s")


def col(t: Table, name: str | None, dtype: str = "i8") -> np.ndarray:
    """A counter column, or zeros when the module does not have it; negatives (Darshan's -1) as 0."""
    if name is None or name not in t:
        return np.zeros(len(t), dtype=dtype)
    a = t[name]
    return np.where(a > 0, a, 0).astype(dtype, copy=False)


def memo(profile: JobProfile) -> dict:
    """A dict kept on the profile object for data derived from it once (metrics, positive counter columns,
    sums, paths); replacing one of the profile's tables drops it (``JobProfile.__setattr__``).  Tables are
    not changed in place after loading, and arrays stored here are read-only."""
    d = profile.__dict__.get("_derived")
    if d is None:
        d = profile.__dict__["_derived"] = {}
    return d


@functools.lru_cache(maxsize=256)
def _name_index(names: tuple) -> dict[str, int]:
    return {n: i for i, n in enumerate(names)}


class _PosCols:
    """Name -> positive column (as ``col`` gives it, before the cast) of a module's 2-D counter arrays:
    one ``where`` per array; a column's view is made when first asked for."""

    __slots__ = ("_blocks", "_views")

    def __init__(self, blocks: list) -> None:
        self._blocks = blocks  # [(name -> row, positive array transposed: one contiguous row per column)]
        self._views: dict[str, np.ndarray] = {}

    def get(self, name: str) -> np.ndarray | None:
        v = self._views.get(name)
        if v is None:
            for index, pos in self._blocks:
                j = index.get(name)
                if j is not None:
                    v = self._views[name] = pos[j]
                    break
        return v


def _pos_blocks(profile: JobProfile, mod: str) -> list[tuple[tuple, np.ndarray]] | None:
    """(names, the loader's 2-D counter array with negatives as 0) per non-empty array of a module, once per
    profile; None when the table has no such arrays."""
    d = memo(profile)
    key = ("posraw", mod)
    if key not in d:
        t = profile.module(mod)
        blocks = t.blocks() if t is not None else None
        parts: list | None = [] if blocks else None
        for names, arr in blocks or ():
            if not len(names):
                continue
            if arr.ndim != 2 or arr.shape != (len(t), len(names)) or arr.dtype.kind not in "iuf":
                parts = None
                break
            # integers: maximum(arr, 0) is where(arr > 0, arr, 0) (same values and dtype) in one pass; floats
            # keep where (NaN and -0.0 become 0 there, not with maximum)
            parts.append((tuple(names), np.maximum(arr, 0) if arr.dtype.kind in "iu" else np.where(arr > 0, arr, 0)))
        if parts is not None and sum(a.size for _, a in parts) > _RAW_KEEP_MAX:
            # a large module (a report on a million-record log): the transposed copy that pcol keeps is
            # enough to hold alive; module sums and that copy each derive this one when first asked
            return parts
        d[key] = parts
    return d[key]


_RAW_KEEP_MAX = 1 << 20  # counter values (8 MiB) up to which the positive 2-D copy stays cached


def _pos_block_cols(profile: JobProfile, mod: str) -> _PosCols | None:
    """The positive counter columns of a module from the loader's 2-D arrays (once per profile);
    None when the table has no such arrays."""
    d = memo(profile)
    key = ("pos", mod)
    if key not in d:
        raw = _pos_blocks(profile, mod)
        parts = None
        if raw is not None:
            parts = []
            for names, p in raw:
                pos = np.ascontiguousarray(p.T)  # rows: contiguous columns, as col() gives
                pos.flags.writeable = False
                parts.append((_name_index(names), pos))
        d[key] = _PosCols(parts) if parts is not None else None
    return d[key]


def pcol(profile: JobProfile, mod: str, name: str | None, dtype: str = "i8") -> np.ndarray:
    """``col(profile.module(mod), name, dtype)`` computed once per profile; read-only (copy before changing it)."""
    d = profile.__dict__.get("_derived") or memo(profile)
    key = (mod, name, dtype)
    a = d.get(key)
    if a is None:
        t = profile.module(mod)
        cols = _pos_block_cols(profile, mod) if name is not None else None
        got = cols.get(name) if cols is not None else None
        if t is None:
            a = np.zeros(0, dtype=dtype)
        elif got is not None:
            a = got.astype(dtype, copy=False)
        else:
            a = col(t, name, dtype)
        a.flags.writeable = False
        d[key] = a
    return a


def module_sums(profile: JobProfile, mod: str) -> dict[str, float]:
    """Column sums of a module's upper-case numeric (counter) columns, negatives (Darshan's 'not measured')
    as 0, once per profile; {} when the job has no such module.  Each column adds up row by row in float64."""
    d = profile.__dict__.get("_derived") or memo(profile)
    key = ("sums", mod)
    got = d.get(key)
    if got is not None:
        return got
    t = profile.module(mod)
    sums: dict[str, float] = {}
    blocks = t.blocks() if t is not None else None
    raw = _pos_blocks(profile, mod) if blocks and _blocks_are_counters(t, blocks) else None
    if raw is not None:
        # the columns are those of the loader's 2-D arrays: reduce those (same sums, no stacking)
        for bn, p in raw:
            if p.dtype.kind in "iu" and int(p.max()) * len(p) < 2 ** 53:
                # integer counts: every partial sum is an integer below 2**53, so the float64 row-by-row
                # sum is exact and equals the integer sum
                vals = p.sum(axis=0).astype("f8").tolist()
            else:  # as np.where(m > 0, m, 0.0) of the float64 array: same values, same layout, same sums
                vals = p.astype("f8", copy=False).sum(axis=0).tolist()
            sums.update(zip(bn, vals))
    elif t is not None:
        names = [n for n, a in t.items() if n.isupper() and a.dtype.kind in "iuf"]
        if names:
            m = np.stack([t[n] for n in names], axis=1).astype("f8", copy=False)
            sums = dict(zip(names, np.where(m > 0, m, 0.0).sum(axis=0).tolist()))
    d[key] = sums
    return sums


def level_total(profile: JobProfile, key: str) -> float:
    """Job total of one POSIX-level quantity (e.g. "writes", "opens") over POSIX and STDIO, from
    ``module_sums``: the sum of ``metrics_of(profile).level[key]`` without building the level table."""
    d = profile.__dict__.get("_derived") or memo(profile)
    k = ("level_total", key)
    if k not in d:
        d[k] = sum(module_sums(profile, mod).get(_LEVEL[mod][key], 0.0) for mod in ("POSIX", "STDIO")
                   if _LEVEL[mod][key] is not None)
    return d[k]


def _blocks_are_counters(t: Table, blocks: tuple) -> bool:
    """Whether the upper-case numeric columns of ``t`` are exactly the blocks' columns, in order (checked on the
    few leading columns instead of all of them: the loader puts the blocks' columns last)."""
    names: tuple = ()
    for bn, a in blocks:
        if len(bn) == 1 or (len(bn) and a.dtype.kind not in "iuf"):
            return False
        names += tuple(bn)
    keys = tuple(t.columns)
    k = len(keys) - len(names)
    return bool(names) and k >= 0 and keys[k:] == names and not any(n.isupper() and t[n].dtype.kind in "iuf" for n in keys[:k])


def _level_cols(profile: JobProfile, t: Table, mod: str) -> dict[str, np.ndarray]:
    """``col`` for every POSIX-level name of a module (positive columns computed once per profile)."""
    n = len(t)
    pos = _pos_block_cols(profile, mod) or _PosCols([])
    out: dict[str, np.ndarray] = {}
    for k, name in _LEVEL[mod].items():
        dtype = "f8" if k in _FLOAT else "i8"
        a = pos.get(name) if name is not None else None
        if a is not None and a.dtype == dtype:
            out[k] = a
        else:
            out[k] = pcol(profile, mod, name, dtype) if name is not None and name in t else np.zeros(n, dtype=dtype)
    return out


_INT_KEYS = tuple(k for k in _LEVEL["POSIX"] if k not in _FLOAT)
_FLT_KEYS = tuple(k for k in _LEVEL["POSIX"] if k in _FLOAT)


@functools.lru_cache(maxsize=64)
def _level_index(mod: str, layout: tuple) -> tuple | None:
    """Where a module's POSIX-level names sit in its positive counter arrays (``layout``: (names, dtype kind)
    per array): for the integer and the float keys, (array number, column per key, positions of keys whose
    name the arrays lack); None when a kind's keys are spread over arrays or sit in an array of the other kind."""
    plan = []
    for keys, kinds in ((_INT_KEYS, "iu"), (_FLT_KEYS, "f")):
        blk, idx, missing = None, [], []
        for i, k in enumerate(keys):
            name = _LEVEL[mod][k]
            where = [(b, names.index(name)) for b, (names, _) in enumerate(layout) if name is not None and name in names]
            if not where:
                idx.append(0)
                missing.append(i)
                continue
            b, j = where[0]
            if layout[b][1] not in kinds or blk not in (None, b):
                return None
            blk = b
            idx.append(j)
        if blk is None:
            return None
        plan.append((blk, np.array(idx), missing))
    return tuple(plan)


def _level_mats(profile: JobProfile, mod: str, t: Table) -> list[np.ndarray] | None:
    """(rows, integer keys) and (rows, float keys) matrices of ``col`` values of a module's POSIX-level names,
    taken from its positive counter arrays by one fancy index each; None when that does not apply."""
    raw = _pos_blocks(profile, mod)
    if raw is None:
        return None
    plan = _level_index(mod, tuple((names, p.dtype.kind) for names, p in raw))
    if plan is None:
        return None
    mats = []
    for (blk, idx, missing), keys, dtype in zip(plan, (_INT_KEYS, _FLT_KEYS), ("i8", "f8")):
        if any(_LEVEL[mod][keys[i]] is not None and _LEVEL[mod][keys[i]] in t for i in missing):
            return None  # a level name outside the counter arrays: let col() read it
        m = raw[blk][1][:, idx].astype(dtype, copy=False)
        if missing:
            m[:, missing] = 0
        mats.append(m)
    return mats


def level_rows(profile: JobProfile, modules: tuple[str, ...] = ("POSIX", "STDIO")) -> Table:
    """POSIX-level counter rows of several modules in one table with common names."""
    tabs = [(mod, t) for mod in modules if (t := profile.module(mod)) is not None]
    mats = [_level_mats(profile, mod, t) for mod, t in tabs]
    if tabs and all(m is not None for m in mats):
        # same columns as the general path below, built as two matrices (no per-column concatenation)
        one = len(tabs) == 1
        cat = (lambda arrs: arrs[0]) if one else np.concatenate  # noqa: E731
        cols = {c: cat([t[c] for _, t in tabs]) for c in ("proc", "rank", "file_id")}
        cols["log"] = cat([t["log"] if "log" in t else np.zeros(len(t), "i8") for _, t in tabs])
        cols["module"] = np.repeat(np.array([mod for mod, _ in tabs], dtype=object), [len(t) for _, t in tabs])
        for j, keys in enumerate((_INT_KEYS, _FLT_KEYS)):
            m = mats[0][j] if one else np.concatenate([x[j] for x in mats])
            cols.update(zip(keys, np.ascontiguousarray(m.T)))  # rows of the transposed copy: contiguous columns
        return Table._trusted({**{c: cols[c] for c in ("proc", "rank", "file_id", "log", "module")},
                               **{k: cols[k] for k in _LEVEL["POSIX"]}})
    parts = []
    for mod in modules:
        t = profile.module(mod)
        if t is None:
            continue
        cols = {"proc": t["proc"], "rank": t["rank"], "file_id": t["file_id"],
                "log": t["log"] if "log" in t else np.zeros(len(t), "i8"),
                "module": np.full(len(t), mod, dtype=object)}
        cols.update(_level_cols(profile, t, mod))
        parts.append(Table._trusted(cols))
    if not parts:
        z = np.zeros(0)
        return Table({"proc": z.astype("i8"), "rank": z.astype("i8"), "file_id": z.astype("u8"), "log": z.astype("i8"),
                      "module": z.astype(object), **{k: z.astype("f8" if k in _FLOAT else "i8") for k in _LEVEL["POSIX"]}})
    return Table.concat(parts)


def size_hist(t: Table, prefix: str) -> np.ndarray:
    """(rows, 10) access-size histogram, e.g. prefix 'POSIX_SIZE_READ_' or 'MPIIO_SIZE_WRITE_AGG_'."""
    return np.stack([col(t, prefix + s) for s, _ in SIZE_BUCKETS], axis=1) if len(t) else np.zeros((0, 10), "i8")


def access_size_table(profile: JobProfile, by: str = "file_id", module: str = "POSIX") -> Table:
    """Read/write access-size histograms grouped by ``file_id`` or ``proc`` (shared records: proc -1).

    Columns: the key, then read_<bucket> and write_<bucket> counts for Darshan's ten size buckets.
    """
    t = profile.module(module)
    pre = "MPIIO" if module == "MPI-IO" else module
    if t is None:
        return Table()
    keys, idx = np.unique(t[by], return_inverse=True)
    cols: dict[str, np.ndarray] = {by: keys}
    for kind in ("READ", "WRITE"):
        agg = "_AGG" if module == "MPI-IO" else ""
        h = size_hist(t, f"{pre}_SIZE_{kind}{agg}_")
        for j, (name, _) in enumerate(SIZE_BUCKETS):
            cols[f"{kind.lower()}_{name}"] = np.bincount(idx, weights=h[:, j], minlength=len(keys)).astype("i8")
    return Table(cols)


def small_bucket_count(size_bytes: int) -> tuple[int, int]:
    """How many leading buckets lie wholly below size_bytes, and the edge that makes them small."""
    n = 0
    for _, edge in SIZE_BUCKETS:
        if edge <= size_bytes:
            n += 1
    return n, int(SIZE_BUCKETS[n - 1][1]) if n else 0
