"""Run one workload command and pass everything through.

- stdin, stdout and stderr are inherited file descriptors: the workload reads
  and writes exactly what it would without iodiag (no pipes, no copies);
- the workload runs in its own process group.  SIGINT, SIGTERM, SIGHUP,
  SIGQUIT, SIGUSR1, SIGUSR2 received by iodiag are forwarded to that group
  (a scheduler's SIGTERM reaches Dask workers too).  When iodiag owns the
  terminal (interactive stdin), the workload's group is made the foreground
  group so that Ctrl-C and terminal reads go straight to it, and the terminal
  is handed back afterwards;
- the outcome holds the exit code, or the signal that killed the workload; the
  CLI turns it into the same exit status (7 stays 7, SIGKILL -> 137, SIGINT
  and SIGTERM are re-delivered to iodiag itself).

While the workload runs, a light watch (every ``tick_s``) notes its
descendant processes and, when a watched folder (Darshan's mmap-log folder)
gains files, which process maps each of them, so that a process killed before
writing its log can be named and its mmap log recovered.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

from ..errors import CollectorError

KEEP_DIR = ".keep"  # inside the watched folder: hard links to every file seen there
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)


@dataclass
class ProcessSeen:
    pid: int
    ppid: int
    comm: str
    cmdline: str
    first_seen_s: float
    last_seen_s: float
    earlier: list[str] = field(default_factory=list)  # command lines of images it replaced by exec, oldest first

    def to_dict(self) -> dict:
        out = dict(self.__dict__)
        if not out["earlier"]:
            del out["earlier"]
        return out


@dataclass
class RunOutcome:
    pid: int
    start_s: float
    end_s: float
    exit_code: int | None  # None when killed by a signal
    signal: int | None
    forwarded: list[int] = field(default_factory=list)
    processes: dict[int, ProcessSeen] = field(default_factory=dict)
    mapped: dict[str, int] = field(default_factory=dict)  # file name in watched folder -> pid
    lingering: list[int] = field(default_factory=list)  # group members still alive after the grace period

    @property
    def wall_s(self) -> float:
        return self.end_s - self.start_s

    @property
    def status_code(self) -> int:
        """The shell's view of the outcome: exit code, or 128 + signal."""
        if self.signal:
            return 128 + self.signal
        return int(self.exit_code or 0)


def _read_stat(pid: int) -> tuple[int, str] | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            data = fh.read().decode(errors="replace")
    except OSError:
        return None
    r = data.rfind(")")
    comm = data[data.find("(") + 1 : r]
    rest = data[r + 2 :].split()
    try:
        return int(rest[1]), comm
    except (IndexError, ValueError):
        return None


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read(512).replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def descendants(root: int) -> dict[int, tuple[int, str]]:
    """pid -> (ppid, comm) of every live descendant of ``root`` (Linux /proc)."""
    table: dict[int, tuple[int, str]] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return {}
    for n in names:
        if n.isdigit():
            st = _read_stat(int(n))
            if st:
                table[int(n)] = st
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    out: dict[int, tuple[int, str]] = {}
    stack = [root]
    while stack:
        p = stack.pop()
        if p in table:
            out[p] = table[p]
        stack.extend(children.get(p, ()))
    return out


def _maps_files(pid: int, prefix: str) -> list[str]:
    hits = []
    try:
        with open(f"/proc/{pid}/maps", "r", errors="replace") as fh:
            for line in fh:
                i = line.find(prefix)
                if i >= 0:
                    hits.append(os.path.basename(line[i:].rstrip("\n").replace(" (deleted)", "")))
    except OSError:
        pass
    return hits


class _Watch:
    def __init__(self, root_pid: int, folder: Path | None) -> None:
        self.root = root_pid
        self.folder = folder
        self.prefix = (str(folder.resolve()).rstrip("/") + "/") if folder else None
        self.attempts: dict[str, int] = {}
        self.linked: set[str] = set()
        self.processes: dict[int, ProcessSeen] = {}
        self.mapped: dict[str, int] = {}

    def tick(self) -> None:
        now = time.time()
        procs = descendants(self.root)
        for pid, (ppid, comm) in procs.items():
            seen = self.processes.get(pid)
            if seen is None:
                self.processes[pid] = ProcessSeen(pid, ppid, comm, _cmdline(pid), now, now)
            else:
                seen.last_seen_s = now
                if seen.comm != comm:  # exec'd since
                    seen.comm = comm
                    seen.earlier.append(seen.cmdline)
                    seen.cmdline = _cmdline(pid)
        if self.folder is None:
            return
        try:
            files = {f for f in os.listdir(self.folder) if not f.startswith(".")}
        except OSError:
            return
        # keep a second name (hard link) of every new file: Darshan unlinks its mmap log when its
        # shutdown starts, so a process killed mid-shutdown would otherwise leave nothing behind;
        # the link keeps the inode, which the process's shared mapping keeps updating
        keep = self.folder / KEEP_DIR
        for f in files - self.linked:
            self.linked.add(f)
            try:
                keep.mkdir(exist_ok=True)
                os.link(self.folder / f, keep / f)
            except OSError:
                pass
        # look up which process maps each new file; give up on a file after a few tries
        pending = [f for f in files if f not in self.mapped and self.attempts.get(f, 0) < 3]
        if not pending:
            return
        for f in pending:
            self.attempts[f] = self.attempts.get(f, 0) + 1
        for pid in procs:
            for name in _maps_files(pid, self.prefix):
                self.mapped.setdefault(name, pid)


def _group_alive(pgid: int) -> bool:
    """Whether a process of the group still runs.  A zombie (exited, not yet reaped: an orphan such as
    multiprocessing's resource tracker, whose new parent reaps late or never in a container) answers
    ``killpg(pgid, 0)`` but will write nothing more, so it does not count (seen: +1.3 s per run)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        pids = [int(d) for d in os.listdir("/proc") if d.isdigit()]
    except OSError:
        return True  # no /proc: trust killpg
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        # pid (comm) state ppid pgrp ...: comm may hold spaces and parentheses, so split after the last ')'
        fields = stat[stat.rfind(b")") + 2:].split()
        if len(fields) >= 3 and int(fields[2]) == pgid and fields[0] != b"Z":
            return True
    return False


def _take_terminal() -> None:
    """Make the calling process's group the terminal's foreground group (SIGTTOU ignored meanwhile)."""
    old = signal.signal(signal.SIGTTOU, signal.SIG_IGN)
    try:
        os.tcsetpgrp(0, os.getpgrp())
    except OSError:
        pass
    signal.signal(signal.SIGTTOU, old)


def run_supervised(argv: Sequence[str], *, env: Mapping[str, str], cwd: str | None = None,
                   watch_folder: Path | None = None, tick_s: float = 1.0, grace_s: float = 10.0) -> RunOutcome:
    """Run ``argv`` with ``env``; return when it (and its process group, up to ``grace_s``) has ended."""
    interactive = False
    try:
        interactive = os.isatty(0) and os.tcgetpgrp(0) == os.getpgrp()
    except OSError:
        interactive = False

    def _child_setup() -> None:  # runs in the child between fork and exec
        os.setpgid(0, 0)
        if interactive:
            _take_terminal()

    forwarded: list[int] = []
    group: list[int] = []  # the workload's process group, once it exists
    # handlers first: a signal that arrives while the workload starts is kept and forwarded once it runs,
    # instead of killing iodiag (default action) and leaving the workload orphaned
    previous = _forward_signals(forwarded, group)
    start = time.time()
    proc = _start(argv, env, cwd, _child_setup, previous)
    pgid = proc.pid
    early = list(forwarded)  # arrived while the workload was starting (taken before the handler can forward)
    group.append(pgid)
    for sig in early:
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            pass
    watch = _Watch(proc.pid, watch_folder)
    try:
        rc, end, lingering = _wait(proc, watch, tick_s, grace_s)
    finally:
        if interactive:
            _take_terminal()
        _restore(previous)
    code, sig = (rc, None) if rc >= 0 else (None, -rc)
    return RunOutcome(pid=proc.pid, start_s=start, end_s=end, exit_code=code, signal=sig, forwarded=forwarded,
                      processes=watch.processes, mapped=watch.mapped, lingering=lingering)


def _forward_signals(forwarded: list[int], group: list[int]) -> dict:
    """Handlers for ``FORWARDED`` that record each signal and pass it to the workload's process group (``group``,
    once it exists); the handlers they replace (none set outside the main thread)."""

    def _forward(signum, frame):  # noqa: ARG001
        forwarded.append(signum)
        if group:
            try:
                os.killpg(group[0], signum)
            except ProcessLookupError:
                pass

    previous = {}
    for sig in FORWARDED:
        try:
            previous[sig] = signal.signal(sig, _forward)
        except (ValueError, OSError):  # not the main thread
            pass
    return previous


def _restore(previous: dict) -> None:
    for sig, handler in previous.items():
        try:
            signal.signal(sig, handler)
        except (ValueError, OSError):
            pass


def _start(argv: Sequence[str], env: Mapping[str, str], cwd: str | None, child_setup, previous: dict) -> subprocess.Popen:
    """The workload started in its own process group; a command that cannot start is a ``CollectorError`` (the
    signal handlers restored first)."""
    try:
        return subprocess.Popen(list(argv), env=dict(env), cwd=cwd, preexec_fn=child_setup, close_fds=False)
    except FileNotFoundError:
        _restore(previous)
        raise CollectorError(f"{argv[0]}: command not found", hint="check the path, or run a script as `iodiag run script.py`") from None
    except PermissionError:
        _restore(previous)
        raise CollectorError(f"{argv[0]}: permission denied", hint="make it executable (chmod +x) or run it with its interpreter") from None
    except OSError as exc:
        _restore(previous)
        raise CollectorError(f"{argv[0]}: cannot start ({exc.strerror or exc})", hint="check the command") from None


def _wait(proc: subprocess.Popen, watch: "_Watch", tick_s: float, grace_s: float) -> tuple[int, float, list[int]]:
    """Watch the workload until its leader ends, then its process group for up to ``grace_s`` (workers writing
    their logs): (the leader's return code, when it ended, processes still running after the grace)."""
    pgid = proc.pid
    lingering: list[int] = []
    ramp = [0.02, 0.05, 0.1, 0.2, 0.5]  # look early: short-lived processes map their mmap log at start
    while True:
        try:
            watch.tick()
        except Exception:  # the watch must never take the run down
            pass
        try:
            rc = proc.wait(timeout=min(ramp.pop(0), tick_s) if ramp else tick_s)
            break
        except subprocess.TimeoutExpired:
            continue
    end = time.time()
    # the leader is gone; wait a little for the rest of its group (workers writing their logs)
    deadline = time.time() + grace_s
    while _group_alive(pgid) and time.time() < deadline:
        try:
            watch.tick()
        except Exception:
            pass
        time.sleep(0.1)
    if _group_alive(pgid):
        lingering = [p for p in descendants(os.getpid()) if p != os.getpid()]
    return rc, end, lingering


def exit_like(outcome: RunOutcome) -> int:
    """Make the calling process end the way the workload did.

    Catchable terminating signals without a core dump are re-delivered to the
    caller (so shells and schedulers see "killed by SIGINT/SIGTERM"); for the
    others the shell convention 128 + signal is returned (SIGKILL -> 137).
    Only the CLI calls this.
    """
    if outcome.signal in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGPIPE, signal.SIGUSR1,
                          signal.SIGUSR2, signal.SIGALRM):
        sys.stdout.flush()
        sys.stderr.flush()
        signal.signal(outcome.signal, signal.SIG_DFL)
        os.kill(os.getpid(), outcome.signal)
        time.sleep(1)  # pragma: no cover - the signal ends us
    return outcome.status_code
