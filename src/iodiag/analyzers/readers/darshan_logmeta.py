"""What ``iodiag run`` reads of the Darshan logs a run left, beside the report's own reading: the file names the
logs hold (what the job's snapshot records the metadata of) and when each log's image ran (what tells an image
exec replaced from a process that died).  darshan-util decodes both (``darshan_decode``); the CLI calls these in a
forked child, as darshan-util can abort on a damaged log.
"""

from __future__ import annotations

import os
import struct
from typing import Any, Iterable

from .darshan_decode import LogReadError, _names, decode_log
from .darshan_lib import lib


def log_names(paths: Iterable[str]) -> list[str]:
    """Every file name the name records of these logs hold (no module is decoded); a log darshan-util cannot
    open gives none.  What ``iodiag run`` snapshots the metadata of (see ``jobs/snapshot.py``)."""
    ffi, L = lib()
    out: dict[str, None] = {}
    for path in paths:
        if not os.path.isfile(path) or os.path.getsize(path) == 0:
            continue
        handle = L.darshan_log_open(os.fsencode(path))
        if handle == ffi.NULL:
            continue
        try:
            out.update(dict.fromkeys(_names(handle).values()))
        finally:
            L.darshan_log_close(handle)
    return list(out)


def log_times(paths: Iterable[str]) -> dict[str, dict[str, Any]]:
    """When each log's image ran, from its job record and its records (darshan-util decodes both): ``start_s``
    (the job record's start: when Darshan started in that image), ``end_s`` (its end; None in an mmap log, whose
    shutdown never ran), ``last_s`` (epoch seconds by which the image was surely still running: its end, or in a
    log without one the end of its latest record, the start when it holds none; only such logs have their records
    decoded), ``exe`` (the command line Darshan saw) and ``jobid``.  A log darshan-util cannot read is left out.
    What ``iodiag run`` tells an image exec replaced from a process that died by (see ``jobs/finalize.py``).

    Darshan stamps records relative to the moment its start-up began, a little before the start it writes in the
    job record (by tens of milliseconds when the process was preempted in between), so ``start_s`` + a record's
    time would put the record late.  Every record is made after that start was stamped, so the earliest record
    time is at least the difference: ``last_s`` = ``start_s`` + (latest record end - earliest record start) is
    never later than the image's true last activity."""
    out: dict[str, dict[str, Any]] = {}
    for path in paths:
        try:
            h = decode_log(path, (), names=False)["header"]
            ended = bool(h["end_sec"])
            raw = {"mods": {}} if ended else decode_log(path, ("POSIX", "STDIO", "H5F", "H5D", "MPI-IO"), names=False)
        except (LogReadError, OSError):
            continue
        start = h["start_sec"] + h["start_nsec"] / 1e9
        end = h["end_sec"] + h["end_nsec"] / 1e9 if ended else None
        first, last = None, 0.0
        for rec in raw["mods"].values():
            lay = rec.get("layout")
            if rec.get("kind") != "fixed" or not rec["n"] or lay is None:
                continue
            names = lay["fcounter_names"]
            ends = [i for i, n in enumerate(names) if n.endswith("_END_TIMESTAMP")]
            starts = [i for i, n in enumerate(names) if n.endswith("_START_TIMESTAMP")]
            buf, size, off = rec["records"].raw(), lay["itemsize"], lay["fcounters"]
            for r in range(rec["n"]):  # (the float counters where darshan-util's C struct puts them)
                for i in ends:
                    last = max(last, struct.unpack_from("=d", buf, r * size + off + 8 * i)[0])
                for i in starts:
                    v = struct.unpack_from("=d", buf, r * size + off + 8 * i)[0]
                    if v > 0 and (first is None or v < first):
                        first = v
        span = max(0.0, last - first) if first is not None else 0.0
        out[path] = {"start_s": start, "end_s": end, "last_s": end if end is not None else start + span,
                     "exe": h["exe"], "jobid": h["jobid"]}
    return out
