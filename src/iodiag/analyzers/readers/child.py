"""What runs in a reader process: decode logs with darshan-util and send the results to the parent.

Two bodies, one per transport of ``isolate.py``: ``_child`` (a forked child reading one batch of logs in
sequence) and ``_serve`` (the long-lived reader server: requests on stdin, outcomes back in batches).  Both set
themselves up the same way (``_child_setup``: default signals, no faulthandler, a memory limit, stderr closed)
and read a log with ``_read_one``.  The messages are ``wire.py``'s; what they mean is written here and read by
``isolate.py``.  No NumPy at import: the parent makes the arrays (``_arrays``).
"""

from __future__ import annotations

import os
import pickle
import signal
import struct
import time
from dataclasses import dataclass
from typing import Any, Callable

from .darshan_decode import LogReadError, decode_log
from .wire import _HDR, _read_exact, _send

CHILD_MEMORY_LIMIT = 16 << 30  # bytes of address space a reader child may use


@dataclass
class LogResult:
    path: str
    data: dict[str, Any] | None = None
    error_kind: str | None = None  # unreadable | crashed | timeout
    error: str | None = None
    next_step: str | None = None  # what to do about the error, when its cause calls for something specific


def _child_setup() -> None:
    # reset signal handling inherited from the parent's CLI
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    # darshan-util prints its own complaints on stderr; the parent reports them as per-log errors
    import faulthandler

    faulthandler.disable()  # a crash here is expected and reported by the parent
    try:  # a damaged record count must not let darshan-util eat the machine's memory
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (CHILD_MEMORY_LIMIT, CHILD_MEMORY_LIMIT))
    except (ImportError, ValueError, OSError):
        pass
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)


def _child(paths: list[str], modules: tuple[str, ...], names: bool, wfd: int, fdsock: Any = None) -> None:
    _child_setup()
    for i, path in enumerate(paths):
        _send(wfd, ("start", i))
        r = _read_one(path, modules, names, raw=True)  # NumPy arrays are the parent's to make (see _arrays)
        _send(wfd, ("ok", i, r.data) if r.data is not None else ("err", i, r.error, r.next_step), fdsock)
    _send(wfd, ("done",))


def _describe_status(status: int) -> str:
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = f"signal {sig}"
        return f"darshan-util crashed on this log ({name}); the log is damaged or truncated"
    return f"the reader exited with status {os.WEXITSTATUS(status)} while decoding this log"


def _lost_cause(kind: str, status: int | None, timeout_s: float, *, job: bool = False) -> str:
    if kind == "timeout" and job:
        return f"the job's analysis did not finish within {timeout_s:.0f} s"
    if kind == "timeout":
        return f"decoding did not finish within {timeout_s:.0f} s; the log is probably damaged"
    code = (-status) if status < 0 else (status << 8)  # Popen reports a signal as a negative return code
    return _describe_status(code)


def _mark_lost(job: tuple[Any, list[str], dict], i: int, lost: str, status: int, timeout_s: float,
               job_timeout_s: float) -> None:
    """The reader server died or hung on log ``i`` of ``job`` (-1: in the job's function): the jobs done but not
    yet sent are done again by a fresh server; this one gets the failure filled in, a log lost or the job itself."""
    paths, pre = job[1], job[2]
    cause = _lost_cause(lost, status, timeout_s if i >= 0 else job_timeout_s, job=i < 0)
    if i >= 0:
        pre[i] = LogResult(paths[i], error_kind=lost, error=cause)
    else:
        what = "hung" if lost == "timeout" else "died"
        pre[_FAILED] = f"the reader process {what} while processing this job: {cause}"


# Where the server is, in a small block of memory it shares with its parent:
# (sequence number, job, log) - log -1 while the function runs on the job.
# Written before each step (a few hundred ns), read by the parent only when
# the server died or seems hung, so no message per log crosses the pipe.
_POS = struct.Struct("<qqqd")  # (sequence, job, log or -1 for the job function, monotonic start)


def _shared_fd(size: int) -> int:
    """A file descriptor of ``size`` zero bytes that a child can map (memfd on Linux, else an unlinked file)."""
    try:
        fd = os.memfd_create("iodiag-reader-pos", 0)
    except (AttributeError, OSError):
        import tempfile

        fd, name = tempfile.mkstemp(prefix="iodiag-reader-")
        os.unlink(name)
    os.ftruncate(fd, size)
    return fd


def resolve(fn_path: str) -> Callable[..., Any]:
    """'package.module:function' -> the function."""
    import importlib

    mod, _, name = fn_path.partition(":")
    return getattr(importlib.import_module(mod), name)


def _read_one(path: str, modules: tuple[str, ...], names: bool, *, raw: bool = False) -> LogResult:
    """One log decoded; as arrays (``darshan.read_log``), or ``raw`` as the decoder's buffers (``decode_log``: no
    NumPy, for a reader child whose parent makes the arrays)."""
    try:
        data = decode_log(path, modules, names=names)
    except LogReadError as exc:
        return LogResult(path, error_kind="unreadable", error=str(exc), next_step=exc.next_step)
    except Exception as exc:  # noqa: BLE001 - anything inside the reader becomes a per-log error
        return LogResult(path, error_kind="unreadable", error=f"{type(exc).__name__}: {exc}")
    return LogResult(path, data=data) if raw else _arrays(path, data)


def _arrays(path: str, data: dict[str, Any]) -> LogResult:
    """A decoded log (``decode_log``'s buffers) with its arrays made (``darshan.as_arrays``)."""
    from .darshan import as_arrays  # NumPy: imported by whoever makes arrays, never by a reader child

    try:
        return LogResult(path, data=as_arrays(data))
    except Exception as exc:  # noqa: BLE001 - a result that makes no sense is that log's error
        return LogResult(path, error_kind="unreadable", error=f"{type(exc).__name__}: {exc}")


def _apply(fn: Callable[..., Any] | None, spec: Any, results: list[LogResult], args: tuple) -> tuple[bool, Any]:
    if fn is None:
        return True, results
    try:
        return True, fn(spec, results, *args)
    except Exception as exc:  # noqa: BLE001 - one job's failure is that job's error
        return False, f"{type(exc).__name__}: {exc}"


# A blocked process woken by a pipe write costs far more CPU than the write:
# measured at 70-170 us per wake-up on the 2-core VM the benchmarks ran on,
# as much as building a small job's profile.  So the server sends its
# outcomes in batches: when FLUSH_S has passed since the last batch, when
# FLUSH_BYTES are waiting, and at the end of a request.
FLUSH_S = 0.25
FLUSH_BYTES = 256 << 10
_FAILED = -1  # key in a job's prefailed dict: the cause that job already failed with (not run again)


def _read_job(pos, seq: int, j: int, paths: list[str], prefailed: dict, modules: tuple[str, ...],
              names: bool) -> tuple[int, list[LogResult]]:
    """(sequence number, LogResults) of job j's logs, each but those that failed before read here; the position
    (seq, j, log) is written to the shared block before each read."""
    results = []
    for i, path in enumerate(paths):
        r = prefailed.get(i)
        if r is None:
            seq += 1
            _POS.pack_into(pos, 0, seq, j, i, time.monotonic())
            r = _read_one(path, modules, names)
        results.append(r)
    return seq, results


def _serve(wfd: int, posfd: int) -> None:
    """Body of the reader server: requests on stdin, messages on ``wfd``, position in ``posfd``.

    Request: ``(fn_path or None, args, modules, names, jobs)``, jobs a list of
    ``(spec, paths, prefailed)`` (prefailed: index -> LogResult of a log not to
    read again; ``_FAILED`` -> the cause the job failed with before).
    Messages: ``("jobs", outcomes)`` and, at the end of the request,
    ``("done", outcomes)``; an outcome is ``("job", j, pickled value)``,
    ``("fail", j, cause)`` or, without a function, ``("obj", j, LogResults)``
    (sent at once).  ``("unavailable", cause)`` when the function cannot
    be imported here.  Before reading log i of job j the server writes
    (seq, j, i) to the shared block, and (seq, j, -1) before running the
    function on job j.
    """
    _child_setup()
    import gc
    import mmap

    pos = mmap.mmap(posfd, _POS.size)
    seq = 0
    fns: dict[str, Callable[..., Any]] = {}
    while True:
        head = _read_exact(0, _HDR.size)
        if head is None:  # the parent closed the pipe (or died): nothing more to do
            return
        (n,) = _HDR.unpack(head)
        payload = _read_exact(0, n)
        if payload is None:
            return
        fn_path, args, modules, names, jobs = pickle.loads(payload)
        fn = None
        if fn_path is not None:
            fn = fns.get(fn_path)
            if fn is None:
                try:
                    fn = fns[fn_path] = resolve(fn_path)
                except Exception as exc:  # noqa: BLE001 - the parent runs the jobs itself
                    _send(wfd, ("unavailable", f"{type(exc).__name__}: {exc}"))
                    continue
                # what the imports built lives as long as the server: keep it out of every collection
                gc.collect()
                gc.freeze()
        pending: list[tuple] = []
        size = 0
        flushed = time.monotonic()
        for j, (spec, paths, prefailed) in enumerate(jobs):
            failed = prefailed.get(_FAILED)
            if failed is not None:
                pending.append(("fail", j, failed))
                continue
            seq, results = _read_job(pos, seq, j, paths, prefailed, modules, names)
            if fn is not None:
                seq += 1
                _POS.pack_into(pos, 0, seq, j, -1, time.monotonic())
            ok, value = _apply(fn, spec, results, args)
            del results
            if fn is None:  # the decoded logs themselves: large; sent at once and pickled once
                try:
                    _send(wfd, ("jobs", [*pending, ("obj", j, value)]))
                except Exception as exc:  # noqa: BLE001 - e.g. a result too large to pickle
                    _send(wfd, ("jobs", [*pending, ("fail", j, f"the result could not be sent back: {type(exc).__name__}: {exc}")]))
                pending, size, flushed = [], 0, time.monotonic()
                continue
            if ok:
                try:
                    value = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
                    size += len(value)
                except Exception as exc:  # noqa: BLE001 - e.g. a value that cannot be pickled
                    ok, value = False, f"the result could not be sent back: {type(exc).__name__}: {exc}"
            pending.append(("job", j, value) if ok else ("fail", j, value))
            now = time.monotonic()
            if size >= FLUSH_BYTES or now - flushed >= FLUSH_S:
                _send(wfd, ("jobs", pending))
                pending, size, flushed = [], 0, now
        _send(wfd, ("done", pending))
