"""A real single-node Slurm for tests, from Debian's packages (slurm-wlm, munge).

Everything lives in one temporary folder: a private munge key, socket and
daemon, a slurm.conf with proctrack/linuxproc, task/none, no accounting,
state/spool/logs/pid files, and free ports, so that nothing on the machine is
touched and several test sessions never collide.  Commands find it through
``SLURM_CONF``, which ``env()`` returns.

Requirements: root (slurmd runs jobs as their user; munged and slurmd want
root here) and the packages; ``ensure_packages()`` installs them with apt-get
when allowed, otherwise the caller skips with ``Unavailable``'s message.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

BINARIES = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "scontrol", "sinfo")


class Unavailable(RuntimeError):
    """Slurm cannot be started here; the message says why (tests skip with it)."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def missing_binaries() -> list[str]:
    return [b for b in BINARIES if shutil.which(b) is None and not Path("/usr/sbin", b).exists()]


def ensure_packages(*, allow_apt: bool = True) -> None:
    if os.geteuid() != 0:
        raise Unavailable("a local Slurm needs root (munged/slurmd); run the slurm tests as root")
    if not missing_binaries():
        return
    if not allow_apt or shutil.which("apt-get") is None:
        raise Unavailable(f"Slurm binaries missing ({', '.join(missing_binaries())}); "
                          "install the Debian packages: apt-get install slurm-wlm munge")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    p = subprocess.run(["apt-get", "install", "-y", "-q", "slurm-wlm", "munge"], env=env,
                       capture_output=True, text=True, timeout=900)
    if p.returncode != 0:
        p = subprocess.run("apt-get update -q && apt-get install -y -q slurm-wlm munge", shell=True, env=env,
                           capture_output=True, text=True, timeout=1200)
    if p.returncode != 0 or missing_binaries():
        raise Unavailable(f"apt-get could not install slurm-wlm/munge: {p.stderr.strip()[-300:]}")


def _sbin(name: str) -> str:
    return shutil.which(name) or str(Path("/usr/sbin", name))


class LocalSlurm:
    def __init__(self, root: Path, *, cpus: int | None = None):
        self.root = Path(root)
        self.cpus = cpus or os.cpu_count() or 1
        self.host = socket.gethostname().split(".")[0]
        self.procs: list[subprocess.Popen] = []
        self.conf = self.root / "slurm.conf"

    # -------------------------------------------------------------- set-up
    def env(self) -> dict[str, str]:
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    def _munge(self) -> None:
        d = self.root / "munge"
        d.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(self.root, 0o755)
        key = d / "munge.key"
        key.write_bytes(os.urandom(1024))
        os.chmod(key, 0o600)
        self.munge_socket = d / "munge.socket"
        cmd = [_sbin("munged"), "--force", f"--socket={self.munge_socket}", f"--key-file={key}",
               f"--pid-file={d / 'munged.pid'}", f"--log-file={d / 'munged.log'}", f"--seed-file={d / 'seed'}"]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
        if p.returncode != 0:
            raise Unavailable(f"munged did not start: {p.stderr.strip() or p.stdout.strip()}")
        self.munged_pid = int((d / "munged.pid").read_text().strip())

    def _write_conf(self) -> None:
        for sub in ("state", "spool", "log"):
            (self.root / sub).mkdir(exist_ok=True)
        self.ctld_port, self.slurmd_port = _free_port(), _free_port()
        mem_mb = int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**20 * 0.5)
        r = self.root
        self.conf.write_text("\n".join([
            "ClusterName=iodiagtest",
            f"SlurmctldHost={self.host}",
            f"SlurmctldPort={self.ctld_port}",
            f"SlurmdPort={self.slurmd_port}",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            f"AuthInfo=socket={self.munge_socket}",
            "SlurmUser=root",
            "SlurmdUser=root",
            f"StateSaveLocation={r / 'state'}",
            f"SlurmdSpoolDir={r / 'spool'}",
            f"SlurmctldPidFile={r / 'slurmctld.pid'}",
            f"SlurmdPidFile={r / 'slurmd.pid'}",
            f"SlurmctldLogFile={r / 'log' / 'slurmctld.log'}",
            f"SlurmdLogFile={r / 'log' / 'slurmd.log'}",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "SchedulerType=sched/backfill",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core",
            "MpiDefault=none",
            "ReturnToService=2",
            "MinJobAge=3600",
            "SlurmctldTimeout=30",
            "SlurmdTimeout=30",
            "InactiveLimit=0",
            "KillWait=5",
            "SchedulerParameters=sched_interval=1",
            f"NodeName={self.host} CPUs={self.cpus} RealMemory={mem_mb} State=UNKNOWN",
            f"PartitionName=debug Nodes={self.host} Default=YES MaxTime=INFINITE State=UP",
            "",
        ]))

    def start(self, timeout: float = 60.0) -> "LocalSlurm":
        self.root.mkdir(parents=True, exist_ok=True)
        self._munge()
        self._write_conf()
        env = self.env()
        for daemon in ("slurmctld", "slurmd"):
            log = open(self.root / "log" / f"{daemon}.stdout", "wb")
            args = [_sbin(daemon), "-D", "-f", str(self.conf)]
            if daemon == "slurmctld":
                args.append("-i")  # ignore (absent) saved state
            else:
                args += ["-N", self.host]
            self.procs.append(subprocess.Popen(args, env=env, stdout=log, stderr=subprocess.STDOUT,
                                               start_new_session=True))
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            for p in self.procs:
                if p.poll() is not None:
                    self.stop()
                    raise Unavailable(f"a Slurm daemon exited with {p.returncode}; see {self.root / 'log'}: "
                                      + self._log_tail())
            q = subprocess.run(["sinfo", "-h", "-o", "%T"], env=env, capture_output=True, text=True)
            last = (q.stdout + q.stderr).strip()
            if q.returncode == 0 and last in ("idle", "mixed", "allocated"):
                return self
            time.sleep(0.5)
        self.stop()
        raise Unavailable(f"Slurm did not become ready in {timeout:.0f} s (sinfo: {last!r}): " + self._log_tail())

    def _log_tail(self) -> str:
        out = []
        for name in ("slurmctld.log", "slurmd.log"):
            f = self.root / "log" / name
            if f.exists():
                out.append(name + ": " + " | ".join(f.read_text().strip().splitlines()[-3:]))
        return "; ".join(out)

    # -------------------------------------------------------------- teardown
    def stop(self) -> None:
        for p in reversed(self.procs):
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        for p in self.procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(timeout=10)
        self.procs.clear()
        pid = getattr(self, "munged_pid", None)
        if pid:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            self.munged_pid = None

    # -------------------------------------------------------------- helpers
    def run(self, *argv: str) -> subprocess.CompletedProcess:
        return subprocess.run(list(argv), env=self.env(), capture_output=True, text=True, timeout=60)
