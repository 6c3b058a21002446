"""Dask workers as batch jobs (Slurm, LSF, PBS) through dask-jobqueue, with errors a user can act on.

``start_jobqueue_cluster`` submits the worker jobs when it is called (so a
missing submit command or a refused job is an error here, not a silent
empty cluster); ``wait_for_workers`` waits for them to join.  The scheduler
runs in the calling process; every worker job runs one Dask worker process of
``cores`` threads and imports the same iodiag as the caller (its source
directory is put first on the job's PYTHONPATH).
"""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path
from typing import Any, Sequence

from .errors import DependencyMissing, UsageError

# kind -> (dask_jobqueue class, submit command, how to see the queue)
KINDS = {"slurm": ("SLURMCluster", "sbatch", "squeue"), "lsf": ("LSFCluster", "bsub", "bjobs"),
         "pbs": ("PBSCluster", "qsub", "qstat")}


def _stderr_of(exc: BaseException) -> str:
    """The batch system's own words from dask-jobqueue's 'Command exited with non-zero exit code' error."""
    text = str(exc)
    m = re.search(r"stderr:\n(.*)", text, re.S)
    said = (m.group(1) if m else text).strip()
    return " ".join(said.split())[:300] or type(exc).__name__


def jobqueue_kwargs(*, cores: int, memory: str, walltime: str, queue: str | None = None,
                    account: str | None = None, log_directory: str | None = None,
                    env: dict[str, str] | None = None, directives: Sequence[str] = ()) -> dict[str, Any]:
    """Keyword arguments of a dask-jobqueue cluster whose workers import this iodiag."""
    import iodiag

    src = str(Path(iodiag.__file__).resolve().parent.parent)
    prologue = [f"export PYTHONPATH={shlex.quote(src)}" "${PYTHONPATH:+:$PYTHONPATH}"]
    prologue += [f"export {k}={shlex.quote(v)}" for k, v in (env or {}).items()]
    kwargs: dict[str, Any] = dict(cores=cores, processes=1, memory=memory, walltime=walltime,
                                  job_script_prologue=prologue, scheduler_options={"dashboard_address": ":0"})
    if queue:
        kwargs["queue"] = queue
    if account:
        kwargs["account"] = account
    if log_directory:  # worker jobs' stdout/stderr (else they land in the current folder)
        kwargs["log_directory"] = log_directory
    if directives:
        kwargs["job_extra_directives"] = list(directives)
    return kwargs


def start_jobqueue_cluster(kind: str, *, jobs: int, **kwargs: Any):
    """A dask-jobqueue cluster of ``kind`` with ``jobs`` worker jobs submitted; see ``jobqueue_kwargs``."""
    if kind not in KINDS:
        raise UsageError(f"--cluster {kind}: expected one of local, {', '.join(KINDS)}")
    if jobs < 1:
        raise UsageError(f"--jobs {jobs}: at least one worker job is needed")
    cls_name, submit, _ = KINDS[kind]
    try:
        import dask_jobqueue
    except ImportError:
        raise DependencyMissing(f"--cluster {kind} needs dask-jobqueue, which is not installed",
                                hint="pip install 'iodiag[jobqueue]'") from None
    if shutil.which(submit) is None:
        raise UsageError(f"--cluster {kind}: {submit} not found on PATH, so no worker job can be submitted",
                         hint=f"run on a node where {submit} works (a login node), or use --workers N / --scheduler ADDRESS")
    import logging

    # dask-jobqueue logs the failed submission with a traceback before raising it; the error below says it once
    quiet = [logging.getLogger(n) for n in ("distributed.deploy.spec", "distributed.deploy.cluster", "dask_jobqueue",
                                            "tornado.application", "asyncio")]
    levels = [lg.level for lg in quiet]
    for lg in quiet:
        lg.setLevel(logging.CRITICAL)
    cluster = None
    try:
        cluster = getattr(dask_jobqueue, cls_name)(**kwargs)
        cluster.scale(jobs=jobs)
        # scale() only schedules the submissions (their errors go to a log): wait for them here
        cluster.sync(cluster._correct_state)
        refused = [job for job in cluster.workers.values() if getattr(job, "job_id", None) is None]
        if refused:  # submit one again, in the open, for the batch system's own words
            cluster.sync(refused[0].start)
            raise RuntimeError(f"{len(refused)} of {jobs} worker jobs were not accepted")
        return cluster
    except (RuntimeError, ValueError, OSError) as exc:
        if cluster is not None:
            from distributed.core import Status

            for name, job in list(cluster.workers.items()):
                if getattr(job, "job_id", None) is None:  # never submitted: nothing to cancel
                    job.status = Status.failed  # (close() insists that every job it made has ended)
                    del cluster.workers[name]
            cluster.close()
        import gc

        gc.collect()  # the failed submissions' tasks are reported (to the quiet asyncio log) now, not at exit
        raise UsageError(f"--cluster {kind}: {submit} refused the Dask worker job: {_stderr_of(exc)}",
                         hint="check --queue, --account, --walltime and --memory against the site's limits") from None
    finally:
        for lg, lv in zip(quiet, levels):
            lg.setLevel(lv)


def wait_for_workers(client: Any, cluster: Any, kind: str, *, jobs: int, timeout_s: float,
                     log_directory: str | None = None) -> int:
    """Wait until all ``jobs`` workers joined, or ``timeout_s``; go on with those there (at least one)."""
    import time

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        n = len(client.scheduler_info().get("workers", {}))
        if n >= jobs:
            return n
        time.sleep(0.5)
    n = len(client.scheduler_info().get("workers", {}))
    if n == 0:
        ids = [getattr(w, "job_id", None) for w in getattr(cluster, "workers", {}).values()]
        ids = [str(i) for i in ids if i]
        logs = log_directory or "the current directory"
        raise UsageError(f"--cluster {kind}: no Dask worker joined within {timeout_s:.0f} s "
                         f"(worker jobs {', '.join(ids) or '?'} still queued, or failed at start)",
                         hint=f"see `{KINDS[kind][2]}` and the jobs' output in {logs}; a busy queue needs a longer "
                              "[site] jobqueue_wait_s")
    return n
