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
whole-job copies of every column.

A job of more than ``2 * CHUNK_OPS`` operations (:func:`streams`) does not build the table at all: the reader
registers each process with an :class:`OpsSource` (how to re-read its operations from the trace, plus job-wide
summaries taken on the first reading) and the consumers on the report path fold over
:func:`process_tables` (one process at a time, in its order in the table: exact for per-process sums, unions
and distinct pairs), :func:`table_batches` (the raster: each process's operations in the ``chunks`` of the
table they would be in) or ``OpsSource.table(columns, procs)`` (a few processes, e.g. the Dask workers).  Memory
is then one process's operations, whatever the job; ``profile.ops[...]`` on a source still works (it builds the
whole table once) for code that has not been converted.

A process can be registered as **ordered** (``OpsSource.add(..., ordered=True)``, issue 29): its ``load`` yields
batches of at most about ``CHUNK_OPS`` operations already in table order, and :func:`process_batches` gives the
consumers those batches instead of the process's table.  A consumer that folds over them carrying its state from
batch to batch (a running interval union, the previous operation of a file, per-group counts) holds one batch, not
the process: the embedded reader registers every process of more than ``CHUNK_OPS`` records this way (read in
chunks, see ``readers/embedded_ops.py``), so one process of 50M operations reports in ~310 MiB.
"""

from __future__ import annotations

from typing import Callable, Iterable, Iterator, Mapping, Protocol, runtime_checkable

import numpy as np

from .nputil import stable_argsort_times, unique
from ..profile import OP, OPS_COLUMNS, Table, empty_table

__all__ = ["CHUNK_OPS", "OpsBuilder", "OpsSource", "ProcessOps", "ProfileOps", "chunks", "process_batches",
           "process_tables", "streams", "table_batches"]

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
            order = stable_argsort_times(cols["start_s"])
            for name in list(cols):
                cols[name] = cols[name][order]  # the unsorted column is freed as soon as it is replaced
            del order
        return Table._trusted(cols)


class ProcessOps(Protocol):
    """What a reader registers per process with :meth:`OpsSource.add`: a callable that re-reads that process's
    operations as an iterator of ops batches (dicts of equal-length columns) holding at least ``columns`` (all
    when None).  With ``ordered=True`` at registration the reader promises that the batches come in the
    process's order in the time-sorted ``ops`` table (a stable sort by start time) and that each holds at most
    about ``CHUNK_OPS`` operations: consumers then fold over them without ever holding the process."""

    def __call__(self, columns: Iterable[str] | None = None) -> Iterator[Mapping[str, np.ndarray]]: ...


@runtime_checkable
class ProfileOps(Protocol):
    """The read interface of a job's operations, whatever holds them (a ``Table`` in memory, an ``OpsSource``
    re-read from the traces or from a forked decoder's block): the consumers on the report path read through
    :func:`process_batches` (each process's operations in bounded batches, in table order) and
    :func:`process_tables` (whole processes), never by indexing the whole table, so their memory is one batch
    plus the state their fold carries."""

    def __len__(self) -> int: ...

    def counts(self) -> list[tuple[int, int]]: ...

    def batches_of(self, i: int, columns: Iterable[str] | None = None) -> Iterator[Table]: ...


class OpsSource:
    """The ``ops`` of a job too large to hold at once, kept as a re-readable source, one process at a time.

    A reader registers each process with :meth:`add`: a ``load(columns=None)`` callable that re-reads that process's
    operations from its trace (an iterator of ops batches holding at least ``columns``, all when None, in the order
    :class:`OpsBuilder` would have been given them), and
    the batches of the reader's own pass, from which the job-wide summaries are taken now (``t_min``, ``t_max``,
    ``has_rw``, the count).  Consumers fold over :func:`process_tables` (one table per process, its rows in the
    order they have in the time-sorted ``ops`` table): memory is one process's operations, never the job's.

    It also answers as a table (``len``, ``source["start_s"]``, ...) for code that has not been converted: the
    first column access builds the whole ``ops`` table through ``OpsBuilder`` (exactly the table the reader would
    have built) and keeps it.
    """

    def __init__(self) -> None:
        self._procs: list[tuple[int, int, Callable[..., Iterator[Mapping[str, np.ndarray]]]]] = []
        self._ordered: list[bool] = []  # per registered process: its loader yields bounded batches in table order
        self._n = 0
        self._table: Table | None = None
        self.t_min = np.inf  # smallest start_s
        self.t_max = -np.inf  # largest of start_s and end_s
        self.has_rw = False  # some operation is a read or a write
        self.all_rw = True  # every operation is a read or a write
        self.end_max = -np.inf  # largest end_s
        self.rw_modules: set[int] = set()  # modules of the reads and writes of processes >= 0

    def add(self, proc: int, load: ProcessOps, batches: Iterator[Mapping[str, np.ndarray]], *,
            ordered: bool = False) -> None:
        k = 0
        for b in batches:
            m = len(b["start_s"])
            if not m:
                continue
            k += m
            st, en = b["start_s"], b["end_s"]
            self.t_min = min(self.t_min, float(st.min()))
            self.t_max = max(self.t_max, float(st.max()), float(en.max()))
            rw = b["op"] <= OP["write"]
            self.has_rw = self.has_rw or bool(rw.any())
            self.all_rw = self.all_rw and bool(rw.all())
            self.end_max = max(self.end_max, float(en.max()))
            own = rw & (np.asarray(b["proc"]) >= 0)
            if own.any():
                self.rw_modules.update(unique(np.broadcast_to(b["module"], own.shape)[own]).tolist())
        self._procs.append((proc, k, load))
        self._ordered.append(bool(ordered))
        self._n += k

    def __len__(self) -> int:
        return self._n

    def counts(self) -> list[tuple[int, int]]:
        """(process, operations) per registered process, in registration order."""
        return [(p, k) for p, k, _ in self._procs]

    def process(self, i: int, columns: Iterable[str] | None = None) -> Table:
        """The operations of the i-th registered process (``columns`` only), in stable time order."""
        return self._build([i], columns)

    def batches_of(self, i: int, columns: Iterable[str] | None = None) -> Iterator[Table]:
        """The operations of the i-th registered process (``columns`` only) in batches, in their order in the
        table: bounded batches straight from the reader when it registered the process as ``ordered``, else the
        whole process as one batch (the reader's batches may need a sort)."""
        if not self._procs[i][1]:
            return
        if not self._ordered[i]:
            yield self.process(i, columns)
            return
        want = list(OPS_COLUMNS) if columns is None else list(dict.fromkeys(columns))
        proc, k, load = self._procs[i]
        seen = 0
        for b in load(tuple(dict.fromkeys(want + ["start_s"]))):
            m = len(b["start_s"])
            if not m:
                continue
            seen += m
            yield Table._trusted({c: _column(b[c], m, c) for c in want})
        if seen != k:
            from ..errors import InputUnreadable

            raise InputUnreadable(f"process {proc}: its trace changed while the job was being read (not the "
                                  f"{k} operations read first)",
                                  hint="report the job again once nothing writes its traces")

    def table(self, columns: Iterable[str] | None = None, procs: Iterable[int] | None = None) -> Table:
        """The ``ops`` table, or its ``columns`` and the rows of ``procs`` only, in the order they have in the
        whole table (a stable time sort of some processes keeps their relative order in the sort of all).
        The whole table is built once and kept; a part is built on each call."""
        if columns is None and procs is None:
            if self._table is None:
                b = OpsBuilder(self._n)
                for _, _, load in self._procs:
                    for batch in load():
                        b.add(batch)
                self._table = b.finish()
            return self._table
        keep = None if procs is None else set(int(p) for p in procs)
        return self._build([i for i, (p, _, _) in enumerate(self._procs) if keep is None or p in keep], columns)

    def _build(self, which: list[int], columns: Iterable[str] | None) -> Table:
        want = list(OPS_COLUMNS) if columns is None else list(dict.fromkeys(columns))
        total = sum(self._procs[i][1] for i in which)
        cols = {c: np.empty(total, OPS_COLUMNS[c]) for c in dict.fromkeys(want + ["start_s"])}
        lo = 0
        for i in which:
            proc, k, load = self._procs[i]
            top = lo + k
            for b in load(tuple(cols)):
                m = len(b["start_s"])
                if lo + m > top:
                    lo = top + 1
                    break
                for c, col in cols.items():
                    col[lo:lo + m] = b[c]
                lo += m
            if lo != top:
                from ..errors import InputUnreadable

                raise InputUnreadable(f"process {proc}: its trace changed while the job was being read (not the "
                                      f"{k} operations read first)",
                                      hint="report the job again once nothing writes its traces")
        st = cols["start_s"]
        if total > 1 and not bool(np.all(st[1:] >= st[:-1])):
            order = stable_argsort_times(st)
            for c in list(cols):
                cols[c] = cols[c][order]
            del order
        return Table._trusted({c: cols[c] for c in want})

    # -- the Table interface, through the whole table (for consumers that need every operation at once)
    @property
    def columns(self) -> list[str]:
        return list(OPS_COLUMNS)

    def __contains__(self, name: object) -> bool:
        return name in OPS_COLUMNS

    def __getitem__(self, name: str) -> np.ndarray:
        return self.table()[name]

    def get(self, name: str, default=None):
        return self.table().get(name, default)

    def items(self):
        return self.table().items()

    def blocks(self):
        return None

    def filter(self, mask: np.ndarray) -> Table:
        return self.table().filter(mask)

    def take(self, index: np.ndarray) -> Table:
        return self.table().take(index)

    def __repr__(self) -> str:
        return f"OpsSource({self._n} operations in {len(self._procs)} processes)"


def table_batches(source: OpsSource, columns: Iterable[str], chunk: int | None = None) -> Iterator[tuple[int, Table]]:
    """``(batch number, rows)`` of an ``OpsSource``, one process at a time, where the batch number of an operation
    is the ``chunks`` slice of the whole time-sorted ``ops`` table that it would be in: a fold that adds each
    batch's sums per process (a raster with one row per process) adds the same numbers in the same order as
    over ``chunks`` of the table.  Holds the start times of the other processes' operations (8 bytes each; none
    when one process has operations) and one table chunk of one process."""
    chunk = chunk or CHUNK_OPS
    live = [i for i in range(len(source._procs)) if source._procs[i][1]]
    starts = {i: source.process(i, ("start_s",))["start_s"] for i in live} if len(live) > 1 else {}
    cols = list(dict.fromkeys(columns))
    for i in live:
        held: list[Table] = []  # rows of the current table chunk, not yet given
        current = -1
        seen = 0
        for t in source.batches_of(i, tuple(dict.fromkeys(cols + ["start_s"]))):
            s = t["start_s"]
            # rank in the stable time sort of the table: processes were added in order, so an equal start of an
            # earlier process comes first, of a later one after
            rank = np.arange(seen, seen + len(s), dtype="i8")
            seen += len(s)
            for j, other in starts.items():
                if j != i and len(other):
                    rank += np.searchsorted(other, s, side="right" if j < i else "left")
            first, last = int(rank[0] // chunk), int(rank[-1] // chunk)
            cut = np.searchsorted(rank, np.arange(first + 1, last + 1) * chunk)
            bounds = [0, *cut.tolist(), len(s)]
            del rank
            for k in range(len(bounds) - 1):
                lo, hi = bounds[k], bounds[k + 1]
                if hi <= lo:
                    continue
                if first + k != current and held:
                    yield current, _joined(held, cols)
                    held = []
                current = first + k
                held.append(Table._trusted({c: t[c][lo:hi] for c in cols}))
        if held:
            yield current, _joined(held, cols)


def _joined(parts: list[Table], cols: list[str]) -> Table:
    if len(parts) == 1:
        return parts[0]
    return Table._trusted({c: np.concatenate([p[c] for p in parts]) for c in cols})


def _column(a, m: int, name: str) -> np.ndarray:
    """One batch column as an array of the ops dtype (a reader may give a scalar for a constant column)."""
    a = np.asarray(a)
    if a.ndim == 0:
        return np.full(m, a, OPS_COLUMNS[name])
    return a if a.dtype == OPS_COLUMNS[name] else a.astype(OPS_COLUMNS[name])


def process_batches(ops: "Table | ProfileOps", columns: Iterable[str] | None = None) -> Iterator[Iterator[Table]]:
    """For each process of ``ops`` (in table order), an iterator of its operations in bounded batches, each batch's
    rows in their order in the ``ops`` table: a fold that resets per process and carries its state from batch to
    batch (a running union, the previous operation of a file) gives the same result as over the whole process.
    A held table is given as one "process" of one batch (the consumers' whole-table path)."""
    if isinstance(ops, OpsSource):
        for i in range(len(ops._procs)):
            if ops._procs[i][1]:
                yield ops.batches_of(i, columns)
    elif len(ops):
        yield iter((ops if columns is None else Table._trusted({c: ops[c] for c in dict.fromkeys(columns)}),))


def process_tables(ops: "Table | OpsSource", columns: Iterable[str] | None = None) -> Iterator[Table]:
    """Tables that each hold whole processes of ``ops``, each process's rows in their order in the ``ops`` table:
    a fold that is exact per process (per-process sums, unions, distinct pairs) gives the same result over these
    as over the whole table.  An ``OpsSource`` gives one process at a time; a held table is given whole."""
    if isinstance(ops, OpsSource):
        for i in range(len(ops._procs)):
            if ops._procs[i][1]:
                yield ops.process(i, columns)
    elif len(ops):
        yield ops if columns is None else Table._trusted({c: ops[c] for c in dict.fromkeys(columns)})


def is_source(ops: object) -> bool:
    return isinstance(ops, OpsSource)


def streams(n_ops: int) -> bool:
    """Whether a reader keeps a job of ``n_ops`` operations as an :class:`OpsSource` instead of a table."""
    return n_ops > 2 * CHUNK_OPS
