"""CPU affinity while a reader child runs: the parent keeps the CPU it is on, the child gets the others.

Speed tuning only (measured on the 2-CPU VMs the benchmarks ran on, see the note below): ``isolate.py`` calls
``_split_cpus`` before it forks a reader child and ``_unsplit`` when the read is over; with one CPU allowed, off
Linux, or off the main thread, both do nothing.
"""

from __future__ import annotations

import os

# -- the reader child and its parent on different CPUs ----------------------------------------------------------
#
# Linux places a forked child on its parent's CPU and may leave it there: on the 2-CPU VMs the benchmarks ran on,
# a child decoding while its parent imports NumPy shared one CPU for the whole read (the parent's imports took
# twice as long, and both used ~20 % more CPU time).  So while a reader child runs, the parent keeps to the CPU
# it is on and the child gets the others; the parent's own CPU set comes back when the read is over
# (``_unsplit``).  With a single CPU allowed, nothing changes.  Only a process's main thread splits (affinity is
# per thread on Linux): threads reading side by side, as a Dask worker's may, would otherwise pile onto one CPU.

_SPLIT: dict[int, tuple[set[int], set[int]]] = {}  # thread -> (its CPU set, the CPUs left to its children)


def _split_cpus() -> set[int] | None:
    """Narrow the calling thread to the CPU it is on; the CPUs left for a child (None: no split)."""
    import _thread

    me = _thread.get_ident()
    if me in _SPLIT:  # a second child of the same read: the same halves
        return _SPLIT[me][1]
    if _thread.get_native_id() != os.getpid():  # not the main thread (e.g. one of a Dask worker's): left as it is
        return None
    try:
        allowed = os.sched_getaffinity(0)
        if len(allowed) < 2:
            return None
        with open("/proc/thread-self/stat", "rb") as fh:  # field 39: the CPU this thread last ran on
            cur = int(fh.read().rsplit(b")", 1)[1].split()[36])
        if cur not in allowed:
            return None
        os.sched_setaffinity(0, {cur})
    except (AttributeError, OSError, ValueError, IndexError):
        return None
    _SPLIT[me] = (allowed, allowed - {cur})
    return allowed - {cur}


def _unsplit() -> None:
    """Give the calling thread back the CPUs it had before ``_split_cpus``."""
    import _thread

    got = _SPLIT.pop(_thread.get_ident(), None)
    if got is not None:
        try:
            os.sched_setaffinity(0, got[0])
        except OSError:
            pass
