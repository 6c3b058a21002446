"""Derived numbers shared by the detectors (NumPy group-bys over profile tables).

Every detector needs the same few aggregates: per-file and per-process op
counts, bytes and I/O seconds, the access-size histogram, and the job's total
I/O time that cost shares are divided by.  ``metrics_of(profile)`` computes
them once per profile (cached while the profile lives) so that twenty
detectors do not each regroup 600k DXT segments.  Cheaper pieces are kept on
the profile too (``memo``): counter columns with negatives as 0 (``pcol``, one
``where`` per loader counter array) and column sums per module
(``module_sums``), which detectors use to exit early when a job total proves
that no file can reach their threshold, and which site features share.

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

import functools
import re
from dataclasses import dataclass, field
from typing import Iterator

import numpy as np

from .nputil import median, stable_argsort_small, unique  # noqa: F401  (median: detectors import it from here)

from ..profile import OP, JobProfile, Table
from . import batches

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


def nprocs_of(profile: JobProfile) -> int:
    """Processes of the job as the detectors count them: the header's count or the processes seen, at least 1."""
    return max(int(profile.job.nprocs), len(profile.processes), 1)


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
    renames it to ``<chunk>``; a report names the chunk, not the temp file."""
    return _TEMP_SUFFIX.sub("", path) if path.endswith(".partial") else path


def paths_of_ids(profile: JobProfile, ids: np.ndarray) -> list:
    """``[profile.path_of().get(int(i)) for i in ids]`` (None when the files table lacks the id); for a few ids
    of a large table by a search of its ids, without building the path dict."""
    if len(profile.files) <= _FEW_FILES or not len(ids):
        paths = profile.path_of()
        return [paths.get(i) for i in np.asarray(ids).tolist()]
    p, found = files_column(profile, np.asarray(ids), "path")
    return [x if ok else None for x, ok in zip(p.tolist(), found.tolist())]


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
    ranks = np.bincount(fidx[own], minlength=nf).astype("i8") if nf else np.zeros(0, "i8")
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


def isin(a: np.ndarray, values: np.ndarray) -> np.ndarray:
    """``np.isin(a, values)``; for a handful of values, by comparisons (no sort of a large ``a``)."""
    values = np.asarray(values)
    if values.ndim == 1 and len(values) <= 8 and a.dtype.kind in "iu" and values.dtype == a.dtype:
        out = np.zeros(len(a), bool)
        for v in values.tolist():
            out |= a == v
        return out
    return np.isin(a, values)


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


def ops_procs_per_file(profile: JobProfile) -> tuple[np.ndarray, np.ndarray]:
    """(sorted file ids, number of distinct processes with ops on each) from the ops table, once per profile."""
    m = metrics_of(profile)
    if m.ops_file_procs is None:
        per_pair = []  # per batch of whole processes: the file of each distinct (file, process) pair
        for o in batches.process_tables(profile.ops, ("file_id", "proc")):
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
    for o in batches.process_tables(profile.ops, need if batches.is_source(profile.ops) else None):
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
