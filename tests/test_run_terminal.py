"""`iodiag run` on a terminal: the workload gets the terminal's foreground (so Ctrl-C, reads and
job control reach it), and the terminal is handed back to iodiag afterwards."""

from __future__ import annotations

import os
import pty
import select
import sys
import time

from conftest import cli_env

PROBE = "import os; print('FOREGROUND', os.tcgetpgrp(0) == os.getpgrp(), os.getpgrp() != os.getsid(0), flush=True)"


def _run_on_pty(argv: list[str], env: dict[str, str], timeout: float = 120.0) -> tuple[int, str]:
    pid, fd = pty.fork()
    if pid == 0:  # child: a session leader with the pty as its controlling terminal
        os.execvpe(argv[0], argv, env)
    out = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        r, _, _ = select.select([fd], [], [], 0.5)
        if r:
            try:
                chunk = os.read(fd, 4096)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            out += chunk
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            try:
                while True:
                    r, _, _ = select.select([fd], [], [], 0.2)
                    if not r:
                        break
                    chunk = os.read(fd, 4096)
                    if not chunk:
                        break
                    out += chunk
            except OSError:
                pass
            os.close(fd)
            return os.waitstatus_to_exitcode(status), out.decode(errors="replace")
    else:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        raise AssertionError(f"timed out; output so far: {out!r}")
    _, status = os.waitpid(pid, 0)  # the terminal closed: the child has exited
    os.close(fd)
    return os.waitstatus_to_exitcode(status), out.decode(errors="replace")


def test_workload_gets_the_terminal_foreground(tmp_path):
    env = cli_env({"IODIAG_HOME": str(tmp_path / "store")})
    code, out = _run_on_pty(
        [sys.executable, "-m", "iodiag", "run", "--collector", "none", "--", sys.executable, "-c", PROBE], env)
    assert code == 0, out
    # the workload runs in its own process group (not the session leader's) and owns the terminal
    assert "FOREGROUND True True" in out, out
    assert "iodiag: job" in out, out  # iodiag got the terminal back and finished the job
