"""An embedded trace's records as ops batches: whole (``_reload_ops``), or in chunks and in time order for a process
too large to hold (``Scan``: the first reading; ``ordered_records`` / ``ordered_ops``: the re-readings in the ops
table's order; ``fold_counters``: its Darshan counters folded over them, see ``embedded_fold``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ...collectors.embedded.format import (
    HEADER_SIZE, MODULE_POSIX, MODULE_STDIO, OPC, RECORD_DTYPE, RF_FAILED, RF_OFFSET_UNKNOWN,
)
from ...profile import OP, OPS_MODULE, Table
from ..batches import chunks
from ..nputil import unique
from .embedded_fold import ModuleFold, sum_counts

__all__ = ["Scan", "fold_counters", "ordered_ops", "ordered_records"]

# raw code -> ops-table code
_OPC_TO_OP = np.full(256, OP["other"], dtype="i1")
for _raw, _op in (("read", "read"), ("write", "write"), ("open", "open"), ("fdopen", "open"), ("opendir", "open"),
                  ("close", "close"), ("closedir", "close"), ("stat", "stat"), ("seek", "seek"), ("fsync", "fsync"),
                  ("fdatasync", "fsync"), ("readdir", "readdir"), ("mkdir", "mkdir"), ("rename", "rename"),
                  ("unlink", "unlink"), ("rmdir", "unlink")):
    _OPC_TO_OP[OPC[_raw]] = OP[_op]



def note_file_ids(ok: np.ndarray, ids: set[int]) -> None:
    """The file ids a process's records name, rename targets included, added to ``ids``."""
    ids.update(unique(ok["file_id"]).tolist())
    ren = ok["op"] == OPC["rename"]
    if ren.any():
        ids.update(unique(ok["offset"][ren].view("u8")).tolist())


def module_rows(ok: np.ndarray):
    """(module, its records) for POSIX and STDIO, the records themselves when one module has them all (no copy)."""
    for mod, code in (("POSIX", MODULE_POSIX), ("STDIO", MODULE_STDIO)):
        sel = ok["module"] == code
        if sel.any():
            yield mod, (ok if sel.all() else ok[sel])

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


def _raw_chunks(path: Path, n: int, size: int):
    """The first ``n`` records of a trace, ``size`` at a time."""
    for lo in range(0, n, size):
        yield np.fromfile(path, dtype=RECORD_DTYPE, count=min(size, n - lo), offset=HEADER_SIZE + lo * RECORD_DTYPE.itemsize)


def _kept(recs: np.ndarray) -> np.ndarray:
    keep = (recs["op"] != 0) & ((recs["flags"] & RF_FAILED) == 0)
    return recs if bool(keep.all()) else recs[keep]


def _starts(recs: np.ndarray) -> np.ndarray:
    return recs["start_ns"].astype("f8") * 1e-9  # the ops table's start_s, bit for bit


def ordered_records(path: Path, n: int, plan: tuple[int, bool, list[float]]):
    """The kept records (recorded, not failed) of a trace in the ops table's order (a stable sort by start time),
    in chunks of at most ``size``, never all at once.  ``plan`` comes from the first reading: the chunk size, whether
    the records are in time order already (one thread: nothing moves) and, per raw chunk, the smallest start of the
    kept records of it and every later chunk.  Records come in completion order, so a record may start before
    one written earlier (threads overlap): each chunk is merged with the rows held back from the chunks before,
    and only rows that start no later than every later chunk are given; the rest wait (a window of the operations
    in flight together, not the process)."""
    size, in_order, suffix = plan
    carry = None
    for k, raw in enumerate(_raw_chunks(path, n, size)):
        ok = _kept(raw)
        del raw
        if in_order:
            if len(ok):
                yield ok
            continue
        buf = ok if carry is None or not len(carry) else np.concatenate([carry, ok])
        del ok
        key = _starts(buf)
        order = np.argsort(key, kind="stable")
        buf, key = buf[order], key[order]
        del order
        later = suffix[k + 1] if k + 1 < len(suffix) else np.inf
        cut = int(np.searchsorted(key, later, side="right"))
        for sl in chunks(cut, size):
            yield buf[sl]
        carry = buf[cut:]
        del buf, key
    if carry is not None and len(carry):
        raise ValueError("the trace changed while it was read (records held back at its end)")


def ordered_ops(path: Path, n: int, i: int, plan, columns=None):
    """The ops batches (all columns, or only ``columns``) of process i in table order (``ordered_records``)."""
    for recs in ordered_records(path, n, plan):
        yield _ops_batch(i, recs, columns)


class Scan:
    """What the first reading of a process in chunks learns: counts for its row, its file ids, per module its files
    and the rows of each summed class per file (``sum_counts``), its rename rows, and the ``ordered_records``
    plan (time order, smallest later start per chunk)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.n_recs = self.inflight = self.n_failed = 0
        self.last_ns: int | None = None
        self.in_order, self.last_start = True, -np.inf
        self.chunk_min: list[float] = []
        self.files: dict[str, list] = {"POSIX": [], "STDIO": []}  # (file ids, counts) per chunk
        self.renames: list[tuple[np.ndarray, np.ndarray]] = []  # (target, source) of POSIX renames, record order

    def batches(self, i: int, path: Path, n: int, ids: set[int]):
        """Read the trace once, chunk by chunk, learning all of the above; yields the ops batches of the kept
        records (record order) for ``OpsSource.add``'s job-wide summaries."""
        for raw in _raw_chunks(path, n, self.size):
            valid = raw["op"] != 0
            self.inflight += int((~valid).sum())
            recs = raw[valid] if not bool(valid.all()) else raw
            del raw, valid
            self.n_recs += len(recs)
            if len(recs):
                end = int((recs["start_ns"] + recs["dur_ns"]).max())
                self.last_ns = end if self.last_ns is None else max(self.last_ns, end)
            failed = (recs["flags"] & RF_FAILED) != 0
            self.n_failed += int(failed.sum())
            ok = recs[~failed] if failed.any() else recs
            del recs, failed
            st = _starts(ok)
            self.chunk_min.append(float(st.min()) if len(st) else np.inf)
            if len(st) and self.in_order:
                self.in_order = bool(st[0] >= self.last_start) and bool(np.all(st[1:] >= st[:-1]))
                self.last_start = float(st[-1])
            del st
            if len(ok):
                note_file_ids(ok, ids)
                for mod, r in module_rows(ok):
                    self.files[mod].append(sum_counts(mod, r["file_id"], r["op"]))
                    if mod == "POSIX":
                        rn = (r["op"] == OPC["rename"]) & (r["offset"] != 0)
                        if rn.any():
                            self.renames.append((r["offset"][rn].view("u8"), r["file_id"][rn]))
                    del r
            yield _ops_batch(i, ok)

    def plan(self) -> tuple[int, bool, list[float]]:
        suffix = np.minimum.accumulate(np.asarray(self.chunk_min[::-1] or [np.inf]))[::-1].tolist()
        return self.size, self.in_order, suffix

    def module_files(self, mod: str) -> tuple[np.ndarray, np.ndarray, tuple | None]:
        """(sorted files of the module, rename targets included; rows of each summed class per file; rename rows)."""
        parts = self.files[mod]
        fid = np.concatenate([f for f, _ in parts])
        cnt = np.concatenate([c for _, c in parts])
        extra = None
        tgt = np.zeros(0, "u8")
        if mod == "POSIX":
            tgt = np.concatenate([t for t, _ in self.renames]) if self.renames else np.zeros(0, "u8")
            src = np.concatenate([s for _, s in self.renames]) if self.renames else np.zeros(0, "u8")
            extra = (None, tgt, src)
        keys, inv = np.unique(np.r_[fid.astype("u8"), tgt.astype("u8")], return_inverse=True)
        sums = np.zeros((len(keys), 3), "i8")
        np.add.at(sums, inv[:len(fid)], cnt)
        return keys, sums, extra


def fold_counters(path: Path, n: int, i: int, plan, scan: "Scan", base: float) -> list[tuple[str, Table]]:
    """Process i's counter tables per module (``module_counters``' numbers), folded by ``ModuleFold`` over its kept
    records read again in time order (``ordered_records``), never all at once."""
    folds = {}
    for mod in ("POSIX", "STDIO"):
        if scan.files[mod]:
            keys, sums, extra = scan.module_files(mod)
            folds[mod] = ModuleFold(mod, i, keys, sums, base, extra)
    if not folds:
        return []
    for recs in ordered_records(path, n, plan):
        for mod, code in (("POSIX", MODULE_POSIX), ("STDIO", MODULE_STDIO)):
            if mod not in folds:
                continue
            sel = recs["module"] == code
            if not sel.any():
                continue
            r = recs if sel.all() else recs[sel]
            folds[mod].add(r["file_id"], r["op"], r["flags"], r["offset"], r["length"], _starts(r),
                           (r["start_ns"] + r["dur_ns"]).astype("f8") * 1e-9)
            del r
    return [(mod, Table(f.finish())) for mod, f in folds.items()]
