"""Read logs in another process so that a damaged log cannot take iodiag down.

darshan-util can segfault, abort or hang on damaged logs (a truncated log
kills the interpreter when its handle is freed).  ``read_logs`` forks one
child that decodes the logs in sequence and streams each result back over a
pipe.  When the child dies or stops answering, the log it was on becomes a
per-log error (``crashed`` / ``timeout``) and a fresh child carries on with
the next log.  Nothing the child does can crash or hang the parent.

This module is the parent's side of the two transports (``read_logs``: a forked child per read;
``ReaderServer`` / ``run_jobs_served``: one long-lived reader process per thread) and the one place callers
import from.  The rest lives in its own module: ``child.py`` (what runs in the reader process, ``LogResult``),
``wire.py`` (the messages on the pipe, large results out of band), ``affinity.py`` (CPU placement of a forked
child).
"""

from __future__ import annotations

import os
import pickle
import signal
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator

from .affinity import _split_cpus, _unsplit
from .child import (_FAILED, _POS, CHILD_MEMORY_LIMIT, LogResult, _apply, _arrays, _child, _describe_status,
                    _lost_cause, _mark_lost, _read_one, _shared_fd, resolve)
from .darshan_decode import ALL_MODULES, BLOCKS, NAMES
from .wire import _HDR, OOB_MIN_BUFFER, OOB_MIN_BYTES, _oob_channel, _Reader

__all__ = ["CHILD_MEMORY_LIMIT", "JobOutcome", "LogResult", "OOB_MIN_BUFFER", "OOB_MIN_BYTES", "Prefetch",
           "ReaderServer", "close_reader_servers", "prefetch", "read_logs", "resolve", "run_jobs_served"]


def read_logs(
    paths: Iterable[str],
    modules: Iterable[str] = ALL_MODULES,
    *,
    names: bool = True,
    timeout_s: float = 120.0,
    isolate: bool = True,
    progress: Callable[[int], None] | None = None,
    while_reading: Callable[[], None] | None = None,
    prefetched: Prefetch | None = None,
) -> Iterator[LogResult]:
    """Yield one LogResult per path, in order; never raises for a bad log.  A log that crashed or hung the
    reader is read again one module at a time (``_salvage``); the modules that still fail are reported as lost
    for that log instead of the whole log.

    ``while_reading`` is called once, in this process, while the first reader child decodes (a caller's work
    that does not need the logs, e.g. its imports: it then costs no wall time); what it raises is ignored.
    ``prefetched`` (from ``prefetch``) is adopted when it reads these very logs; the caller closes it after."""
    modules = tuple(modules)
    for res in _read_logs(paths, modules, names=names, timeout_s=timeout_s, isolate=isolate, progress=progress,
                          while_reading=while_reading, prefetched=prefetched):
        if res.error_kind in ("crashed", "timeout") and (modules or names) and isolate:
            res = _salvage(res, modules, names=names, timeout_s=timeout_s)
        yield res


def _salvage(res: LogResult, modules: tuple, *, names: bool, timeout_s: float) -> LogResult:
    """Read a log that crashed or hung the reader one region at a time, each in a reader of its own: the header,
    then each module, then the record names.  A region darshan-util crashes on is decoded once more from its
    intact compressed streams only (``BLOCKS``); what still fails is reported lost, with the cause, and the rest
    of the log is kept."""
    hangs = [1 if res.error_kind == "timeout" else 0]

    def one(mods: tuple, with_names: bool = False) -> LogResult:
        if hangs[0] >= 2:  # a log that hangs the reader again and again: no more timeouts spent on it
            return LogResult(res.path, error_kind="timeout", error="not tried: the reader hung on this log twice")
        got = next(iter(_read_logs([res.path], mods, names=with_names, timeout_s=timeout_s, isolate=True)))
        hangs[0] += got.error_kind == "timeout"
        return got

    head = one(())
    if head.data is None:
        return res
    data = head.data
    for m in (m for m in modules if m in data["header"]["modules"]):
        got = one((m,))
        if got.data is None and got.error_kind in ("crashed", "timeout"):
            got = one((m, BLOCKS))
        if got.data is None:
            data["losses"].append((m, f"this module's region could not be decoded ({got.error}); every other module "
                                      "of the log is reported"))
            continue
        data["mods"].update(got.data["mods"])
        data["losses"].extend(got.data["losses"])
        data.setdefault("lost_records", {}).update(got.data.get("lost_records", {}))
    if not any(len(m.get("file_id", m.get("rec_rank", ()))) for m in data["mods"].values()):
        return res  # not one record of any module: nothing of the log is usable, its first error stands
    if names and modules:
        got = one((NAMES,), True)
        if got.data is None and got.error_kind in ("crashed", "timeout"):
            got = one((NAMES, BLOCKS), True)
        if got.data is None:
            data["names"] = {}
            data["losses"].append((NAMES, f"the record names could not be decoded ({got.error}): files are shown "
                                          "unnamed; their numbers are complete"))
        else:
            data["names"] = got.data.get("names", {})
            data["losses"].extend(got.data["losses"])
    return LogResult(res.path, data=data)


def _start_child(batch: list[str], modules: tuple[str, ...], names: bool) -> tuple[int, int, Any]:
    """Fork a reader child for ``batch``: (pid, read end of its pipe, socket of its memfds or None)."""
    rfd, wfd = os.pipe()
    psock, csock = _oob_channel()
    others = _split_cpus()
    pid = os.fork()
    if pid == 0:  # child
        try:
            os.close(rfd)
            if psock is not None:
                psock.close()
            _child(batch, modules, names, wfd, csock)
        finally:
            os._exit(0)  # never run the parent's cleanup (or free a damaged handle)
    if others:
        try:
            os.sched_setaffinity(pid, others)  # (set here, not in the child: in place when fork returns)
        except OSError:  # the child is gone already
            pass
    os.close(wfd)
    if csock is not None:
        csock.close()
    return pid, rfd, psock


class Prefetch:
    """A reader child started before the caller knows it will read these logs (``prefetch``): ``read_logs``
    adopts it when asked for the same logs, modules and names; otherwise ``close`` stops it.  The child does
    nothing a normal reader child would not; the timeout starts when ``read_logs`` waits on it."""

    def __init__(self, paths: list[str], modules: tuple[str, ...], names: bool) -> None:
        self.key = ([os.path.realpath(p) for p in paths], modules, names)
        self._child: tuple[int, int, Any] | None = _start_child(list(paths), modules, names)

    def serves(self, paths: list[str], modules: tuple[str, ...], names: bool) -> bool:
        return self._child is not None and self.key == ([os.path.realpath(p) for p in paths], tuple(modules), names)

    def take(self) -> tuple[int, int, Any]:
        child, self._child = self._child, None
        assert child is not None
        return child

    def close(self) -> None:
        """Stop the child if nobody adopted it (idempotent)."""
        child, self._child = self._child, None
        if child is None:
            return
        _unsplit()
        pid, rfd, psock = child
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass
        os.close(rfd)
        if psock is not None:
            psock.close()


def prefetch(paths: Iterable[str], modules: Iterable[str] = ALL_MODULES, *, names: bool = True) -> Prefetch | None:
    """Start reading ``paths`` now, in a reader child, for a ``read_logs`` call to come (None where reading is
    not isolated in a child: no fork)."""
    if not hasattr(os, "fork"):
        return None
    return Prefetch([os.fspath(p) for p in paths], tuple(modules), names)


def _read_here(paths: list[str], modules: tuple[str, ...], names: bool,
               progress: Callable[[int], None] | None) -> Iterator[LogResult]:
    """``_read_logs`` without a child (isolate=False): each log decoded in this process."""
    for p in paths:
        yield _read_one(p, modules, names)
        if progress:
            progress(1)


def _head_start(work: Callable[[], None]) -> None:
    """The caller's ``while_reading`` work, run while the first reader child decodes; what it raises is ignored."""
    try:
        work()
    except Exception:  # noqa: BLE001 - only a head start: the caller's own path meets any real error
        pass


def _read_logs(
    paths: Iterable[str],
    modules: Iterable[str] = ALL_MODULES,
    *,
    names: bool = True,
    timeout_s: float = 120.0,
    isolate: bool = True,
    progress: Callable[[int], None] | None = None,
    while_reading: Callable[[], None] | None = None,
    prefetched: "Prefetch | None" = None,
) -> Iterator[LogResult]:
    paths = [os.fspath(p) for p in paths]
    modules = tuple(modules)
    if not isolate:
        yield from _read_here(paths, modules, names, progress)
        return
    start = 0
    while start < len(paths):
        batch = paths[start:]
        adopt = prefetched is not None and start == 0 and prefetched.serves(batch, modules, names)
        pid, rfd, psock = prefetched.take() if adopt else _start_child(batch, modules, names)
        reader = _Reader(rfd, psock)
        if while_reading is not None:
            _idle, while_reading = while_reading, None
            _head_start(_idle)
        current = None
        next_index = 0
        try:
            while True:
                try:
                    msg = reader.recv(time.monotonic() + timeout_s)
                except TimeoutError:
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
                    pid = None
                    i = current if current is not None else next_index
                    yield LogResult(batch[i], error_kind="timeout", error=_lost_cause("timeout", None, timeout_s))
                    if progress:
                        progress(1)
                    start += i + 1
                    break
                if msg is None:  # child died
                    _, status = os.waitpid(pid, 0)
                    pid = None
                    lost = current if current is not None else next_index
                    if lost >= len(batch):
                        start = len(paths)
                        break
                    yield LogResult(batch[lost], error_kind="crashed", error=_describe_status(status))
                    if progress:
                        progress(1)
                    start += lost + 1
                    break
                kind = msg[0]
                if kind == "start":
                    current = msg[1]
                elif kind == "ok":
                    yield _arrays(batch[msg[1]], msg[2])
                    current, next_index = None, msg[1] + 1
                    if progress:
                        progress(1)
                elif kind == "err":
                    yield LogResult(batch[msg[1]], error_kind="unreadable", error=msg[2],
                                    next_step=msg[3] if len(msg) > 3 else None)
                    current, next_index = None, msg[1] + 1
                    if progress:
                        progress(1)
                elif kind == "done":
                    start = len(paths)
                    break
        finally:
            _unsplit()
            os.close(rfd)
            if psock is not None:
                psock.close()
            if pid is not None:
                try:
                    os.waitpid(pid, 0)
                except ChildProcessError:
                    pass


# -- a long-lived reader process ---------------------------------------------
#
# ``read_logs`` forks a child per call.  Forked from a large process (a Dask
# worker holding distributed, pandas and pyarrow), every page either side
# touches afterwards is copied: measured at ~275 page faults per log and
# about twice the CPU of the same reads forked from a small process.
# ``ReaderServer`` is instead a fresh interpreter (exec, not fork: it shares
# no pages with its parent) that decodes the logs of every request it gets
# over a pipe until its parent goes away.
#
# A request is a list of *jobs* (some logs each) and optionally a function,
# named by a dotted path ("package.module:function"), that the server applies
# to each job's LogResults as soon as they are read: ``fn(spec, results,
# *args)``.  Only its (small) return value crosses the pipe, not the decoded
# arrays: a caller that needs a few numbers per job pays neither the pickling
# nor the copy of every log.  Without a function the LogResults themselves
# are sent (``read``).  The server imports the function's module itself, so
# this module depends on nothing of its callers.
#
# Failures cost what they hit.  A crash or hang of darshan-util costs the log
# it was on: that log becomes a ``crashed`` / ``timeout`` LogResult, a fresh
# server reads the job again with that result filled in, and carries on with
# the rest.  An exception raised by the function costs its job (an error
# outcome for that job); so does a crash or hang while the function runs.

_SERVE = (
    "import sys\n"
    "from iodiag.analyzers.readers.child import _serve\n"
    "_serve(int(sys.argv[1]), int(sys.argv[2]))\n"
)

@dataclass
class JobOutcome:
    """What the server gave for one job: the function's value, or why there is none."""

    spec: Any
    value: Any = None
    error: str | None = None  # the function raised, or the reader died or hung while it ran


def _run_local(jobs: list[tuple[Any, list[str], dict[int, LogResult]]], fn_path: str | None, args: tuple,
               modules: tuple[str, ...], names: bool, timeout_s: float, isolate: bool,
               progress: Callable[[int], None] | None) -> Iterator[JobOutcome]:
    """The same outcomes computed in this process (reads forked unless isolate is False)."""
    fn = resolve(fn_path) if fn_path is not None else None
    todo = [p for _, paths, pre in jobs if _FAILED not in pre for i, p in enumerate(paths) if i not in pre]
    stream = read_logs(todo, modules, names=names, timeout_s=timeout_s, isolate=isolate)
    try:
        for spec, paths, pre in jobs:
            if _FAILED in pre:
                ok, value = False, pre[_FAILED]
            else:
                results = [pre[i] if i in pre else next(stream) for i in range(len(paths))]
                ok, value = _apply(fn, spec, results, args)
                del results
            yield JobOutcome(spec, value=value) if ok else JobOutcome(spec, error=value)
            if progress:
                progress(len(paths))
    finally:
        stream.close()


class ReaderServer:
    """A reader process started once and fed many requests (see the note above)."""

    def __init__(self) -> None:
        self.proc = None
        self.rfd: int | None = None
        self.reader: _Reader | None = None
        self.pos = None  # the shared position block (mmap)

    def _start(self) -> None:
        import subprocess
        import sys

        import mmap

        rfd, wfd = os.pipe()
        posfd = _shared_fd(_POS.size)
        self.pos = mmap.mmap(posfd, _POS.size)
        env = dict(os.environ)
        # Dask's nanny sets this for its workers (so that freed memory goes back to the OS); it also
        # turns off glibc's adaptive mmap threshold, and a reader then maps and unmaps every large
        # buffer it decodes: measured at 1.75x the reader's CPU time.  A reader's memory lives for one log.
        env.pop("MALLOC_TRIM_THRESHOLD_", None)
        pkg_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
        env["PYTHONPATH"] = pkg_root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", _SERVE, str(wfd), str(posfd)], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL, pass_fds=(wfd, posfd), env=env, close_fds=True,
            )
        finally:
            os.close(wfd)
            os.close(posfd)
        self.rfd = rfd
        self.reader = _Reader(rfd)

    def close(self) -> None:
        proc, self.proc = self.proc, None
        if self.pos is not None:
            self.pos.close()
            self.pos = None
        if self.rfd is not None:
            os.close(self.rfd)
            self.rfd, self.reader = None, None
        if proc is not None:
            try:
                proc.stdin.close()
            except OSError:
                pass
            try:
                proc.wait(timeout=5)
            except Exception:  # noqa: BLE001 - a server that will not exit is killed
                proc.kill()
                proc.wait()

    def _kill(self) -> int:
        status = self._kill_keep_pos()
        self._drop_pos()
        return status

    def _kill_keep_pos(self) -> int:
        """Kill and reap the server; its position block stays readable until _drop_pos."""
        proc = self.proc
        try:
            proc.kill()
        except OSError:
            pass
        status = proc.wait()
        pos, self.pos = self.pos, None
        self.close()
        self.pos = pos
        return status

    def _drop_pos(self) -> None:
        if self.pos is not None:
            self.pos.close()
            self.pos = None

    def read(self, paths: list[str], modules: tuple[str, ...], *, names: bool, timeout_s: float,
             progress: Callable[[int], None] | None = None) -> Iterator[LogResult]:
        """Yield one LogResult per path, in order; never raises for a bad log."""
        for out in self.run([(p, [p]) for p in paths], None, modules=modules, names=names, timeout_s=timeout_s,
                            progress=progress):
            if out.error is not None:  # e.g. a result too large to pickle
                yield LogResult(out.spec, error_kind="unreadable", error=out.error)
            else:
                yield from out.value

    def run(self, jobs: Iterable[tuple[Any, list[str]]], fn: str | None, args: tuple = (), *,
            modules: tuple[str, ...], names: bool, timeout_s: float, job_timeout_s: float | None = None,
            progress: Callable[[int], None] | None = None) -> Iterator[JobOutcome]:
        """One JobOutcome per ``(spec, paths)`` job, in order; never raises for a bad log or job.

        ``fn``: "package.module:function" applied in the server as ``fn(spec, results, *args)``;
        None sends the LogResults back.  ``progress(n)`` gets the number of logs of each finished job.
        ``timeout_s`` bounds each log's decoding, ``job_timeout_s`` (default: ``timeout_s``) each ``fn`` call.
        """
        work = [(spec, [os.fspath(p) for p in paths], {}) for spec, paths in jobs]
        try:
            yield from self._run(work, fn, tuple(args), tuple(modules), names, timeout_s, progress, job_timeout_s)
        except BaseException:
            # abandoned mid-request (the caller stopped iterating, a progress callback or an unpickling
            # raised, Ctrl-C): the server may still be sending this request's messages, which the next
            # request would take for its own; a fresh server serves the next request
            if self.proc is not None and self._busy:
                self._kill()
            self._busy = False
            raise

    _busy = False

    def _run(self, jobs, fn, args, modules, names, timeout_s, progress, job_timeout_s=None):
        job_timeout_s = timeout_s if job_timeout_s is None else job_timeout_s
        start = 0
        while start < len(jobs):
            batch = jobs[start:]
            fresh = self.proc is None
            if fresh:
                self._start()
            payload = pickle.dumps((fn, args, modules, names, batch), protocol=pickle.HIGHEST_PROTOCOL)
            _POS.pack_into(self.pos, 0, 0, -1, -1, 0.0)  # the server writes here only once it has the request
            try:
                self.proc.stdin.write(_HDR.pack(len(payload)) + payload)
                self.proc.stdin.flush()
            except OSError:  # the server died between requests: start another
                self._kill()
                continue
            nj = 0  # jobs answered
            heard = False
            last = None
            self._busy = True
            poll = min(timeout_s, job_timeout_s)  # silence after which the server's position is looked at
            sent = time.monotonic()
            deadline = sent + poll
            while True:
                try:
                    msg = self.reader.recv(deadline)
                    lost = None if msg is not None else "crashed"
                except TimeoutError:
                    # quiet for a while: the step the server is on (a log, or the job function) has its
                    # own limit from the moment the server started it (one monotonic clock for both)
                    seq, _, i, began = _POS.unpack_from(self.pos)
                    end = began + (timeout_s if i >= 0 else job_timeout_s) if seq else sent + timeout_s
                    if time.monotonic() < end:
                        deadline = end
                        continue
                    msg, lost = None, "timeout"
                if lost is not None:
                    self._busy = False
                    status = self._kill_keep_pos()
                    seq, j, i, _ = _POS.unpack_from(self.pos)
                    self._drop_pos()
                    if fresh and not heard and seq == 0:
                        # a new server that died before doing anything cannot start at all (e.g. the
                        # package is not importable from a fresh interpreter): work in this process instead
                        yield from _run_local(batch, fn, args, modules, names, timeout_s, True, progress)
                        return
                    yield from self._flush(last, progress)
                    if seq != 0 and j >= nj:
                        _mark_lost(batch[j], i, lost, status, timeout_s, job_timeout_s)
                    start += nj
                    break
                heard = True
                deadline = time.monotonic() + poll
                kind = msg[0]
                if kind in ("jobs", "done"):
                    for what, j, value in msg[1]:
                        spec, paths, _ = batch[j]
                        if what == "fail":
                            out = JobOutcome(spec, error=value)
                        else:
                            out = JobOutcome(spec, value=pickle.loads(value) if what == "job" else value)
                        nj = j + 1
                        yield from self._flush(last, progress)
                        # the last outcome is handed out after "done", so that the server is idle when the caller stops
                        last = (out, len(paths))
                    if kind == "done":
                        self._busy = False
                        yield from self._flush(last, progress)
                        start = len(jobs)
                        break
                    if nj < len(batch):
                        yield from self._flush(last, progress)
                        last = None
                elif kind == "unavailable":  # the server cannot import fn: work in this process instead
                    self._busy = False
                    yield from _run_local(batch, fn, args, modules, names, timeout_s, True, progress)
                    return

    @staticmethod
    def _flush(last, progress) -> Iterator[JobOutcome]:
        if last is not None:
            yield last[0]
            if progress:
                progress(last[1])


_SERVERS: dict[tuple[int, int], ReaderServer] = {}


def close_reader_servers() -> None:
    """Stop this process's reader servers (they are waited for, so their CPU time shows in RUSAGE_CHILDREN)."""
    for srv in list(_SERVERS.values()):
        srv.close()
    _SERVERS.clear()


def _server() -> ReaderServer:
    import atexit
    import threading

    key = (os.getpid(), threading.get_ident())
    srv = _SERVERS.get(key)
    if srv is None:
        if not _SERVERS:
            atexit.register(close_reader_servers)
        srv = _SERVERS[key] = ReaderServer()
    return srv


def run_jobs_served(
    jobs: Iterable[tuple[Any, list[str]]],
    fn: str,
    args: tuple = (),
    *,
    modules: Iterable[str] = ALL_MODULES,
    names: bool = True,
    timeout_s: float = 120.0,
    job_timeout_s: float | None = None,
    isolate: bool = True,
    in_reader: bool = True,
    progress: Callable[[int], None] | None = None,
) -> Iterator[JobOutcome]:
    """``fn(spec, results, *args)`` for every ``(spec, paths)`` job, in this thread's ReaderServer.

    ``fn`` ("package.module:function") runs where the logs are read, so only its return value
    crosses a pipe.  ``in_reader=False``: the reader sends the LogResults and fn runs in this
    process (where a debugger, a profiler or a patched function sees it).  ``isolate=False``
    reads and runs everything in this process.
    """
    if not isolate:
        work = [(spec, [os.fspath(p) for p in paths], {}) for spec, paths in jobs]
        yield from _run_local(work, fn, tuple(args), tuple(modules), names, timeout_s, False, progress)
        return
    if not in_reader:  # the server sends the LogResults; fn runs here
        f = resolve(fn)
        for out in _server().run(jobs, None, modules=tuple(modules), names=names, timeout_s=timeout_s, progress=progress):
            if out.error is None:
                ok, value = _apply(f, out.spec, out.value, tuple(args))
                out = JobOutcome(out.spec, value=value) if ok else JobOutcome(out.spec, error=value)
            yield out
        return
    yield from _server().run(jobs, fn, args, modules=tuple(modules), names=names, timeout_s=timeout_s,
                             job_timeout_s=job_timeout_s, progress=progress)
