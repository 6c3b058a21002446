"""The reader contract: a trace is read in bounded batches, never as one whole-job array.

A reader of a trace format (embedded collector, Darshan DXT, ...) walks the job **one process at a time**
and, inside a process, **one chunk of at most** :data:`CHUNK_OPS` operations at a time:

1. ``OpsBuilder(capacity)`` is made once, with an upper bound of the job's operations (the sum of the
   record counts in the trace headers), so the ``ops`` columns are allocated once, at their final size
   (the ``OPS_COLUMNS`` dtypes of :mod:`iodiag.profile`) and never concatenated;
2. for each process the reader converts its raw records chunk by chunk into ops columns (a dict of equal-length
   arrays, see ``OpsBuilder.add``): the temporaries of a conversion are bounded by the chunk, not by the trace;
3. whatever is kept per (process, file) — Darshan-style counters — is computed from that process's records
   alone (every such summary is keyed by the process, so a per-process fold is exact) and appended to a list of
   small per-process tables, concatenated at the end (rows in (process, file) order, as a whole-job pass would
   give);
4. ``OpsBuilder.finish()`` returns the ``ops`` Table in time order (stable, so equal start times keep the order
   in which they were added: process order, then record order).  When the operations were added in time order
   already (one process, or processes that did not overlap) nothing moves; otherwise the table is permuted
   **one column at a time**, so the peak is the table plus one column and the permutation, never two tables.

Peak memory of a reader following this contract is therefore about the final ``ops`` table (58 bytes per
operation) plus one process's raw records and the per-process summary temporaries, instead of several
whole-job copies of every column.  The metrics, time model and detectors read the finished table.
"""

from __future__ import annotations

from typing import Iterator, Mapping

import numpy as np

from ..profile import OPS_COLUMNS, Table, empty_table

__all__ = ["CHUNK_OPS", "OpsBuilder", "chunks"]

CHUNK_OPS = 1 << 20  # operations converted at a time: bounds a conversion's temporaries (~100 MB at most)


def chunks(n: int, size: int | None = None) -> Iterator[slice]:
    """Slices covering ``range(n)`` in pieces of at most ``size`` (default: ``CHUNK_OPS``, read at call time)."""
    size = size or CHUNK_OPS
    for lo in range(0, n, size):
        yield slice(lo, min(lo + size, n))


class OpsBuilder:
    """The ``ops`` table of a job, filled batch by batch into columns allocated once (see the module docstring)."""

    def __init__(self, capacity: int) -> None:
        self._cols = {name: np.empty(int(capacity), dtype) for name, dtype in OPS_COLUMNS.items()}
        self._n = 0
        self._sorted = True  # every batch so far continued the time order
        self._last_start = -np.inf

    def __len__(self) -> int:
        return self._n

    def add(self, batch: Mapping[str, np.ndarray]) -> None:
        """Append a batch: one array per ops column, equal lengths (values are cast to the column's dtype)."""
        k = len(batch["start_s"])
        if not k:
            return
        lo, hi = self._n, self._n + k
        for name, col in self._cols.items():
            col[lo:hi] = batch[name]
        st = self._cols["start_s"][lo:hi]
        if self._sorted:
            self._sorted = bool(st[0] >= self._last_start) and bool(np.all(st[1:] >= st[:-1]))
        self._last_start = float(st[-1]) if self._sorted else self._last_start
        self._n = hi

    def finish(self) -> Table:
        """The table in stable time order; the builder is empty afterwards."""
        n = self._n
        cols, self._cols = self._cols, {}
        if not n:
            return empty_table("ops")
        for name in cols:  # drop the unused tail of the allocation (a copy of one column at a time)
            if len(cols[name]) != n:
                cols[name] = cols[name][:n].copy()
        if not self._sorted:
            order = np.argsort(cols["start_s"], kind="stable")
            for name in list(cols):
                cols[name] = cols[name][order]  # the unsorted column is freed as soon as it is replaced
            del order
        return Table._trusted(cols)
