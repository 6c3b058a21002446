"""Messages between a reader process and its parent: length-prefixed pickles on a pipe, large results out of band.

Both transports of ``isolate.py`` (a forked child per read, a long-lived reader server) speak this: ``_send``
writes one message, ``_Reader.recv`` reads one with a deadline (so a hung reader is noticed), and a result of
several MB crosses as a memfd passed over a Unix socket instead of through the pipe (``_oob_payload`` /
``_oob_load``).  Nothing here knows what a message means (``child.py`` and ``isolate.py`` do), and nothing here
imports NumPy: a reader child starts decoding before its parent has imported it.
"""

from __future__ import annotations

import os
import pickle
import select
import struct
import time
from typing import Any

_HDR = struct.Struct("<Q")


def _send(fd: int, obj: Any, fdsock: Any = None) -> None:
    payload = _oob_payload(obj, fdsock) if fdsock is not None else None
    if payload is None:
        payload = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    head = _HDR.pack(len(payload))
    if len(payload) < 65536:
        parts = [memoryview(head + payload)]
    else:  # no concatenated copy of a large result
        parts = [memoryview(head), memoryview(payload)]
    for view in parts:
        while view:
            n = os.write(fd, view)
            view = view[n:]


# -- large results out of band ---------------------------------------------------------------------------------
#
# A decoded DXT log is tens of MB of NumPy columns.  Pickled in band it is copied four times (pickle, pipe write,
# pipe read, unpickle) and the parent faults in fresh pages for two of them: ~30 ms of a report on a 15 MB log.
# Instead the child pickles the columns out of band (protocol 5), writes them once into a memfd and passes that
# descriptor over a Unix socket (SCM_RIGHTS); the parent maps it copy-on-write and the arrays are views of the
# mapping.  The pipe still carries the message itself, so a crash or a hang is detected exactly as before.
# Linux only (memfd_create, send_fds); elsewhere, and for small results, everything goes in band.

_OOB = "__oob__"
OOB_MIN_BYTES = 1 << 20  # below this in all, in band costs less than a memfd and mappings
OOB_MIN_BUFFER = 64 << 10  # smaller arrays stay in band (a page and a mapping each would cost more)
_PAGE = 4096


def _oob_channel():
    """(parent end, child end) of a socket for passing memfds, or (None, None) where that is not available."""
    try:
        import socket

        if not (hasattr(os, "memfd_create") and hasattr(socket, "send_fds")):
            return None, None
        return socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    except (ImportError, OSError):
        return None, None


def _oob_payload(obj: Any, fdsock: Any) -> bytes | None:
    """The message pickled with its large buffers in a memfd sent on ``fdsock``; None to send it in band.

    Each large buffer starts on its own page and the parent maps it on its own, so an array the parent keeps
    (a small per-record column in its profile) keeps its own pages alive, not the whole log's."""
    bufs: list = []

    def take(pb: pickle.PickleBuffer) -> bool:
        if pb.raw().nbytes < OOB_MIN_BUFFER:
            return True  # in band
        bufs.append(pb)
        return False

    meta = pickle.dumps(obj, protocol=5, buffer_callback=take)
    views = [b.raw() for b in bufs]
    if sum(v.nbytes for v in views) < OOB_MIN_BYTES:
        return None
    import socket

    layout, at = [], 0
    for v in views:
        layout.append((at, v.nbytes))
        at += -(-v.nbytes // _PAGE) * _PAGE
    try:
        mfd = os.memfd_create("iodiag-log", getattr(os, "MFD_CLOEXEC", 0))
    except OSError:
        return None
    try:
        os.ftruncate(mfd, max(at, 1))
        for (off, _), v in zip(layout, views):
            while v.nbytes:
                n = os.pwrite(mfd, v, off)
                v, off = v[n:], off + n
        socket.send_fds(fdsock, [b"m"], [mfd])
    except OSError:  # no room for the memfd, or the socket is gone: in band, as without one
        return None
    finally:
        os.close(mfd)
    head = obj[:2] if isinstance(obj, tuple) else None  # ("ok", log index): what a failed mapping costs
    return pickle.dumps((_OOB, meta, layout, at, head), protocol=pickle.HIGHEST_PROTOCOL)


def _oob_load(msg: tuple, fdsock: Any) -> Any:
    import mmap
    import socket

    _, meta, layout, size, _head = msg
    fdsock.settimeout(30.0)  # sent before the message: already there
    _, fds, _, _ = socket.recv_fds(fdsock, 1, 1)
    if not fds:
        raise OSError("the reader sent a result without its memory descriptor")
    views = []
    try:
        if os.fstat(fds[0]).st_size != max(size, 1):  # not this message's memory: never map another log's
            raise OSError(f"the reader's memory descriptor does not match its message ({os.fstat(fds[0]).st_size} "
                          f"bytes, {max(size, 1)} expected)")
        for off, n in layout:
            # private and writable: the arrays behave as freshly allocated ones (a write copies that page only);
            # one mapping per buffer, so each array's pages live as long as that array
            mm = mmap.mmap(fds[0], n, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE, offset=off)
            views.append(memoryview(mm))
    finally:
        for f in fds:
            os.close(f)
    return pickle.loads(meta, buffers=views)


_F_SETPIPE_SZ = 1031  # Linux fcntl: pipe capacity


def _widen_pipe(fd: int) -> None:
    """Ask for a 1 MiB pipe (Linux; 64 KiB by default): a 1 MB result then crosses in one read, not sixteen."""
    try:
        import fcntl

        fcntl.fcntl(fd, _F_SETPIPE_SZ, 1 << 20)
    except (ImportError, OSError):
        pass


class _Reader:
    def __init__(self, fd: int, fdsock: Any = None) -> None:
        self.fd = fd
        self.fdsock = fdsock  # where out-of-band results' memfds arrive (see _oob_payload)
        self.buf = bytearray()
        _widen_pipe(fd)

    def recv(self, deadline: float) -> Any:
        """One message, or None on EOF, or raises TimeoutError."""
        msg = self._recv(deadline)
        if self.fdsock is not None and type(msg) is tuple and msg and msg[0] == _OOB:
            try:
                return _oob_load(msg, self.fdsock)
            except (OSError, ValueError) as exc:  # no memory to map it, or the descriptor never came
                head = msg[4]
                if head and head[0] == "ok":  # that log's error, not the whole run's
                    return ("err", head[1], f"the reader's result could not be received ({exc})")
                raise
        return msg

    def _recv(self, deadline: float) -> Any:
        while True:
            if len(self.buf) >= _HDR.size:
                (n,) = _HDR.unpack_from(self.buf)
                end = _HDR.size + n
                if len(self.buf) >= end:
                    with memoryview(self.buf) as view:
                        msg = pickle.loads(view[_HDR.size:end])
                    del self.buf[:end]
                    return msg
                if n > (1 << 20) and len(self.buf) < end:
                    return self._recv_large(end, deadline)
            if not self._wait(deadline):
                continue
            chunk = os.read(self.fd, 1 << 20)
            if not chunk:
                return None
            self.buf += chunk

    def _wait(self, deadline: float) -> bool:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        r, _, _ = select.select([self.fd], [], [], min(left, 1.0))
        return bool(r)

    def _recv_large(self, end: int, deadline: float) -> Any:
        """A message of several MB: read it into place (no growing buffer, no copies)."""
        out = bytearray(end)
        have = len(self.buf)
        out[:have] = self.buf
        self.buf = bytearray()
        with memoryview(out) as view:
            while have < end:
                if not self._wait(deadline):
                    continue
                k = os.readv(self.fd, [view[have:end]])
                if not k:
                    return None
                have += k
            return pickle.loads(view[_HDR.size:end])


def _read_exact(fd: int, n: int) -> bytes | None:
    chunks, left = [], n
    while left:
        b = os.read(fd, left)
        if not b:
            return None
        chunks.append(b)
        left -= len(b)
    return b"".join(chunks)
