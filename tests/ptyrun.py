"""Run a command as a session leader on a pseudo-terminal (an interactive shell's job), optionally acting on the
terminal once its output shows something: type Ctrl-C, signal the foreground process group."""

from __future__ import annotations

import os
import pty
import re
import select
import time
from typing import Callable

ANSI = re.compile(rb"\x1b\[[0-9;?]*[A-Za-z]")


def run_on_pty(argv: list[str], env: dict[str, str], *, timeout: float = 120.0,
               when: "re.Pattern[bytes] | None" = None, act: Callable[[int], None] | None = None,
               delay: float = 0.0) -> tuple[int, str, float | None]:
    """-> (wait status as an exit code, output, monotonic time ``act`` ran or None).  Once ``when`` matches the
    output (colour codes removed), ``delay`` seconds later ``act(fd)`` runs once with the terminal's fd."""
    pid, fd = pty.fork()
    if pid == 0:  # child: a session leader with the pty as its controlling terminal
        os.execvpe(argv[0], argv, env)
    out, acted, status, reading = b"", None, None, True
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if reading and select.select([fd], [], [], 0.2)[0]:
            try:
                chunk = os.read(fd, 4096)
            except OSError:  # the child closed the terminal
                chunk = b""
            reading = bool(chunk)
            out += chunk
        elif not reading:
            time.sleep(0.05)
        if acted is None and when is not None and act is not None and when.search(ANSI.sub(b"", out)):
            time.sleep(delay)
            acted = time.monotonic()
            act(fd)
        done, st = os.waitpid(pid, os.WNOHANG)
        if done:
            status = st
            break
    if status is None:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        raise AssertionError(f"timed out; output so far: {out.decode(errors='replace')[-3000:]}")
    try:  # what the child wrote just before it ended
        while reading and select.select([fd], [], [], 0.2)[0]:
            chunk = os.read(fd, 4096)
            if not chunk:
                break
            out += chunk
    except OSError:
        pass
    os.close(fd)
    return os.waitstatus_to_exitcode(status), out.decode(errors="replace"), acted
