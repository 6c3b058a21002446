"""One process's DXT operations re-made from the decoded segments, in the ops table's order, in bounded batches.

The Darshan reader's child decodes a log's DXT segments into a block (32 bytes per segment) that the parent maps;
a job kept as an ``OpsSource`` registers each process with a ``DxtProcessOps``: at registration the start times of
the process's segments (in the order the table builder would have been given them: POSIX records, then MPI-IO, each
in record order, each record's writes then reads) are sorted once, stably, and only that order is kept (4 bytes per
segment).  Each reading then gives at most ``CHUNK_OPS`` operations at a time, in table order, gathered from the
block: a consumer folding over them never holds the process (``batches.process_batches``).
"""

from __future__ import annotations

from typing import Any, Iterator

import numpy as np

from ...profile import OP
from ..batches import chunks
from ..nputil import stable_argsort_times
from .darshan import dxt_columns

__all__ = ["DxtProcessOps"]


class DxtProcessOps:
    """The ``load`` of one process of a DXT source (see the module docstring).  ``parts``: per module, (ops module
    code, the module's record, the process's record indices, their first segment rows); ``start``: the log's start
    (epoch seconds), added to the segments' times as the table's builder adds it."""

    def __init__(self, parts: list, proc: int, start: float) -> None:
        self.proc, self.start = int(proc), float(start)
        self.parts = []
        lo = 0
        for code, rec, idx, first in parts:
            w = rec["rec_writes"][idx].astype("i8")
            n = w + rec["rec_reads"][idx].astype("i8")
            self.parts.append({"code": code, "seg": dxt_columns(rec), "fid": rec["rec_file_id"][idx], "first": first,
                               "w": w, "cum": np.cumsum(n), "n": n, "lo": lo})
            lo += int(n.sum())
        self.total = lo
        self.bounds = np.asarray([p["lo"] for p in self.parts] + [lo], "i8")
        keys = np.empty(self.total)
        for p in self.parts:
            for sl in chunks(int(p["n"].sum())):
                keys[p["lo"] + sl.start:p["lo"] + sl.stop] = p["seg"]["start"][self._rows(p, np.arange(sl.start, sl.stop))[0]] + self.start
        in_order = self.total < 2 or bool(np.all(keys[1:] >= keys[:-1]))
        order = None if in_order else stable_argsort_times(keys)
        del keys
        self.order = None if order is None else order.astype(np.int32 if self.total < 2**31 else np.int64)

    @staticmethod
    def _rows(p: dict, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(segment rows, record positions) of positions ``q`` among the part's segments."""
        r = np.searchsorted(p["cum"], q, side="right")
        within = q - (p["cum"][r] - p["n"][r])
        return p["first"][r] + within, r

    def __call__(self, columns=None) -> Iterator[dict[str, Any]]:
        want = None if columns is None else set(columns)
        for sl in chunks(self.total):
            pos = np.arange(sl.start, sl.stop, dtype="i8") if self.order is None else self.order[sl].astype("i8")
            yield self._batch(pos, want)

    def _batch(self, pos: np.ndarray, want) -> dict[str, Any]:
        k = len(pos)
        out: dict[str, Any] = {"proc": self.proc, "thread": -1}
        cols = {"file_id": np.empty(k, "u8"), "module": np.empty(k, "i1"), "op": np.empty(k, "i1"),
                "offset": np.empty(k, "i8"), "length": np.empty(k, "i8"), "start_s": np.empty(k), "end_s": np.empty(k)}
        cols = {c: a for c, a in cols.items() if want is None or c in want or c == "start_s"}
        part = np.searchsorted(self.bounds, pos, side="right") - 1
        for j, p in enumerate(self.parts):
            sel = part == j if len(self.parts) > 1 else slice(None)
            q = pos[sel] - p["lo"]
            if not len(q):
                continue
            rows, r = self._rows(p, q)
            seg = p["seg"]
            fill = {
                "file_id": lambda: p["fid"][r], "module": lambda: p["code"],
                "op": lambda: np.where((rows - p["first"][r]) < p["w"][r], OP["write"], OP["read"]),
                "offset": lambda: seg["offset"][rows], "length": lambda: seg["length"][rows],
                "start_s": lambda: seg["start"][rows] + self.start, "end_s": lambda: seg["end"][rows] + self.start,
            }
            for c, a in cols.items():
                a[sel] = fill[c]()
        out.update(cols)
        return out
