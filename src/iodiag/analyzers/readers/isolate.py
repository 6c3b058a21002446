"""Read logs in a forked child so that a damaged log cannot take iodiag down.

darshan-util can segfault, abort or hang on damaged logs (a truncated log
kills the interpreter when its handle is freed).  ``read_logs`` forks one
child that decodes the logs in sequence and streams each result back over a
pipe.  When the child dies or stops answering, the log it was on becomes a
per-log error (``crashed`` / ``timeout``) and a fresh child carries on with
the next log.  Nothing the child does can crash or hang the parent.
"""

from __future__ import annotations

import os
import pickle
import select
import signal
import struct
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator

from .darshan import ALL_MODULES, LogReadError, read_log

_HDR = struct.Struct("<Q")
CHILD_MEMORY_LIMIT = 16 << 30  # bytes of address space a reader child may use


@dataclass
class LogResult:
    path: str
    data: dict[str, Any] | None = None
    error_kind: str | None = None  # unreadable | crashed | timeout
    error: str | None = None


def _send(fd: int, obj: Any) -> None:
    payload = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    view = memoryview(_HDR.pack(len(payload)) + payload)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _child(paths: list[str], modules: tuple[str, ...], names: bool, wfd: int) -> None:
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
    for i, path in enumerate(paths):
        _send(wfd, ("start", i))
        try:
            data = read_log(path, modules, names=names)
            _send(wfd, ("ok", i, data))
        except LogReadError as exc:
            _send(wfd, ("err", i, str(exc)))
        except Exception as exc:  # noqa: BLE001 - anything inside the child becomes a per-log error
            _send(wfd, ("err", i, f"{type(exc).__name__}: {exc}"))
    _send(wfd, ("done",))


class _Reader:
    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buf = bytearray()

    def recv(self, deadline: float) -> Any:
        """One message, or None on EOF, or raises TimeoutError."""
        while True:
            if len(self.buf) >= _HDR.size:
                (n,) = _HDR.unpack_from(self.buf)
                if len(self.buf) >= _HDR.size + n:
                    payload = bytes(self.buf[_HDR.size:_HDR.size + n])
                    del self.buf[:_HDR.size + n]
                    return pickle.loads(payload)
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            r, _, _ = select.select([self.fd], [], [], min(left, 1.0))
            if not r:
                continue
            chunk = os.read(self.fd, 1 << 20)
            if not chunk:
                return None
            self.buf += chunk


def _describe_status(status: int) -> str:
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = f"signal {sig}"
        return f"darshan-util crashed on this log ({name}); the log is damaged or truncated"
    return f"the reader exited with status {os.WEXITSTATUS(status)} while decoding this log"


def read_logs(
    paths: Iterable[str],
    modules: Iterable[str] = ALL_MODULES,
    *,
    names: bool = True,
    timeout_s: float = 120.0,
    isolate: bool = True,
    progress: Callable[[int], None] | None = None,
) -> Iterator[LogResult]:
    """Yield one LogResult per path, in order; never raises for a bad log."""
    paths = [os.fspath(p) for p in paths]
    modules = tuple(modules)
    if not isolate:
        for p in paths:
            try:
                yield LogResult(p, data=read_log(p, modules, names=names))
            except LogReadError as exc:
                yield LogResult(p, error_kind="unreadable", error=str(exc))
            if progress:
                progress(1)
        return
    start = 0
    while start < len(paths):
        batch = paths[start:]
        rfd, wfd = os.pipe()
        pid = os.fork()
        if pid == 0:  # child
            try:
                os.close(rfd)
                _child(batch, modules, names, wfd)
            finally:
                os._exit(0)  # never run the parent's cleanup (or free a damaged handle)
        os.close(wfd)
        reader = _Reader(rfd)
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
                    yield LogResult(batch[i], error_kind="timeout", error=f"decoding did not finish within {timeout_s:.0f} s; the log is probably damaged")
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
                    yield LogResult(batch[msg[1]], data=msg[2])
                    current, next_index = None, msg[1] + 1
                    if progress:
                        progress(1)
                elif kind == "err":
                    yield LogResult(batch[msg[1]], error_kind="unreadable", error=msg[2])
                    current, next_index = None, msg[1] + 1
                    if progress:
                        progress(1)
                elif kind == "done":
                    start = len(paths)
                    break
        finally:
            os.close(rfd)
            if pid is not None:
                try:
                    os.waitpid(pid, 0)
                except ChildProcessError:
                    pass
