"""`iodiag run` on a terminal: the workload gets the terminal's foreground (so Ctrl-C, reads and
job control reach it), and the terminal is handed back to iodiag afterwards."""

from __future__ import annotations

import sys

from conftest import cli_env
from ptyrun import run_on_pty

PROBE = "import os; print('FOREGROUND', os.tcgetpgrp(0) == os.getpgrp(), os.getpgrp() != os.getsid(0), flush=True)"


def _run_on_pty(argv: list[str], env: dict[str, str], timeout: float = 120.0) -> tuple[int, str]:
    code, out, _ = run_on_pty(argv, env, timeout=timeout)
    return code, out


def test_workload_gets_the_terminal_foreground(tmp_path):
    env = cli_env({"IODIAG_HOME": str(tmp_path / "store")})
    code, out = _run_on_pty(
        [sys.executable, "-m", "iodiag", "run", "--collector", "none", "--", sys.executable, "-c", PROBE], env)
    assert code == 0, out
    # the workload runs in its own process group (not the session leader's) and owns the terminal
    assert "FOREGROUND True True" in out, out
    assert "iodiag: job" in out, out  # iodiag got the terminal back and finished the job
