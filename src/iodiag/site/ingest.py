"""Ingest a Darshan archive into a site dataset, in parallel on Dask.

The driver walks the archive one directory at a time, groups logs into jobs,
packs jobs into tasks of about ``config.site.batch_logs`` logs and keeps at
most ``in_flight_per_worker`` tasks per worker queued: finished tasks are
collected, their rows buffered as Arrow tables and written as a parquet row
group every ``row_group_rows`` jobs, to a part that is closed every
``part_rows`` jobs.  Memory therefore depends on the batch sizes, not on the
size of the archive.

Incremental: a directory whose signature (names, sizes, mtimes of its logs)
is unchanged since the last run is skipped without reading anything; in a
changed directory only jobs with a new or rewritten log are read again.
"""

from __future__ import annotations

import os
import time
import contextlib
import signal
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from ..config import Config
from ..errors import DependencyMissing, InputNotFound, InputUnreadable, Interrupted, UsageError
from .store import SiteStore
from .walk import DirListing, Unit, group_units, iter_dirs
from .worker import pack_units, process_packed, process_units

# progress(kind, n): kind is "total" (logs in the archive), "skipped" (already
# ingested, nothing to read) or "read" (logs read by a finished task)
Progress = Callable[[str, int], None]


@dataclass
class IngestSummary:
    out: str
    run: int
    logs_total: int = 0
    logs_skipped: int = 0
    logs_read: int = 0
    jobs: int = 0
    programs: int = 0
    errors: int = 0
    tasks: int = 0
    workers: int = 0
    seconds: float = 0.0
    dirs_changed: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d["dirs_changed"] = len(self.dirs_changed)
        d["logs_per_s"] = self.logs_read / self.seconds if self.seconds > 0 else None
        return d


def _plan(store: SiteStore, listings: list[tuple[str, str, int]]):
    """Which directories need reading, and which of their logs are already known."""
    sigs = store.dir_signatures()
    changed = [rel for rel, sig, _ in listings if sigs.get(rel) != sig]
    return set(changed), store.known_logs(changed)


def _units_to_read(archive: str, listing: DirListing, known: dict[str, tuple[int, int]]) -> list[Unit]:
    if not known:
        return group_units(archive, listing)
    fresh = {e.name for e in listing.entries if known.get(e.name) != (e.size, e.mtime_ns)}
    if not fresh:
        return []
    return group_units(archive, listing, only=fresh)


def _batches(units: Iterator[Unit], batch_logs: int) -> Iterator[list[Unit]]:
    batch: list[Unit] = []
    n = 0
    for u in units:
        if batch and n + len(u.paths) > batch_logs:
            yield batch
            batch, n = [], 0
        batch.append(u)
        n += len(u.paths)
    if batch:
        yield batch


class _Sink:
    """Buffers finished tasks' Arrow tables, writes them as a row group every row_group_rows jobs
    and starts a new part every part_rows jobs: the driver holds at most one row group's rows."""

    def __init__(self, store: SiteStore, summary: IngestSummary, part_rows: int, row_group_rows: int) -> None:
        self.store, self.summary, self.part_rows = store, summary, part_rows
        self.group_rows = max(min(row_group_rows, part_rows), 1)
        self.buf: dict[str, list] = {"jobs": [], "programs": [], "errors": [], "logs": []}
        self.rows = 0
        self.part = store.part_writer()

    def add(self, result: dict[str, Any]) -> None:
        for k in self.buf:
            self.buf[k].append(result[k])
        n = result["jobs"].num_rows
        self.summary.jobs += n
        self.summary.programs += result["programs"].num_rows
        self.summary.errors += result["errors"].num_rows
        self.rows += n + result["errors"].num_rows
        if self.rows >= self.group_rows:
            self._write_group()

    def _write_group(self) -> None:
        import pyarrow as pa

        if any(self.buf.values()):
            self.part.write({k: pa.concat_tables(v) for k, v in self.buf.items() if v})
            self.part.rows += self.rows
        self.buf = {k: [] for k in self.buf}
        self.rows = 0
        if self.part.rows >= self.part_rows:
            self.part.close()

    def flush(self) -> None:
        self._write_group()
        self.part.close()


def _failed_task(units: list[Unit], exc: BaseException, run: int) -> dict[str, Any]:
    """Rows for a task whose worker died (e.g. killed for memory): every log an error."""
    from .worker import TABLE_COLUMNS, failed_job_rows, to_table

    cause = f"the Dask task reading this log failed: {type(exc).__name__}: {exc}"
    rows: dict[str, list] = {k: [] for k in TABLE_COLUMNS}
    for u in units:
        for k, v in failed_job_rows(u, "task-failed", cause, run).items():
            rows[k].extend(v)
    return {k: to_table(v, TABLE_COLUMNS[k]) for k, v in rows.items()}


def check_dataset_path(out: str | os.PathLike) -> None:
    """Refuse, before any log is listed, a site dataset path that cannot be one: a file, a path under a file, a
    folder that cannot be written."""
    p = Path(out)
    if p.exists() and not p.is_dir():
        raise UsageError(f"--out {p}: is a file, not a site dataset (a folder)", hint="choose a new --out path")
    anc = p if p.exists() else p.parent
    while not anc.exists() and anc != anc.parent:
        anc = anc.parent
    if not anc.is_dir():
        raise UsageError(f"--out {p}: {anc} is a file, not a folder, so the site dataset cannot be made under it",
                         hint="choose a path whose folders are folders")
    if not os.access(anc, os.W_OK | os.X_OK):
        raise UsageError(f"--out {p}: cannot write into {anc} (permission denied)", hint="choose a folder you can write to")


def ingest_archive(
    archive: str | os.PathLike,
    out: str | os.PathLike,
    *,
    config: Config | None = None,
    scheduler: str | None = None,
    workers: int | None = None,
    client: Any = None,
    cluster: str | None = None,
    cluster_options: dict[str, Any] | None = None,
    progress: Progress | None = None,
) -> IngestSummary:
    """Read every new log of ``archive`` into the site dataset ``out``.

    ``client``: an existing ``distributed.Client``; else ``scheduler`` (address
    of a running scheduler); else ``cluster`` ("slurm", "lsf", "pbs": worker
    jobs submitted through dask-jobqueue, ``cluster_options`` as for
    ``jobqueue_options``, cancelled at the end); else a local
    cluster of ``workers`` processes (one thread each).  ``workers=0`` works
    in this process, without Dask (logs are still decoded in a reader process;
    building and diagnosing happen here, where Dask workers leave it to the reader).
    """
    cfg = config or Config()
    archive = os.fspath(archive)
    if os.path.exists(archive) and not os.path.isdir(archive):
        raise InputUnreadable(f"{archive}: is a file, not the folder of a Darshan log tree",
                              hint="give the root of the log tree (the folder holding YYYY/M/D); to read one log: iodiag report " + archive)
    if not os.path.isdir(archive):
        raise InputNotFound(f"{archive}: no such folder", hint="give the root of the Darshan log tree (the folder holding YYYY/M/D)")
    check_dataset_path(out)
    if workers is not None and workers < 0:
        raise UsageError(f"--workers {workers}: must be 0 (no Dask) or more")
    if cluster == "local":
        cluster = None
    if cluster is not None and (scheduler or client is not None or workers is not None):
        raise UsageError(f"--cluster {cluster} starts its own workers: leave out --scheduler and --workers")
    if cluster is not None:
        from ..jobqueue import KINDS

        if cluster not in KINDS:
            raise UsageError(f"--cluster {cluster}: expected one of local, {', '.join(KINDS)}")
    emit = progress or (lambda kind, n: None)
    t0 = time.perf_counter()
    listings = [(d.rel, d.signature, len(d.entries)) for d in iter_dirs(archive)]
    if not any(n for _, _, n in listings):  # before anything is written: an empty dataset helps no one
        raise InputNotFound(f"{archive}: no Darshan logs found (*.darshan under YYYY/M/D/ folders)",
                            hint="give the root of the site's Darshan log tree (the folder holding YYYY/)")
    try:
        store = SiteStore(out, archive)
        summary = IngestSummary(out=str(out), run=store.run)
        return _ingest_into(store, summary, archive, out, listings, cfg, emit, t0, client=client, scheduler=scheduler,
                            workers=workers, cluster=cluster, cluster_options=cluster_options)
    except KeyboardInterrupt:
        raise Interrupted(f"interrupted before any log was read: nothing was added to {out}",
                          hint="run the same command again") from None


def _ingest_into(store, summary, archive, out, listings, cfg, emit, t0, *, client, scheduler, workers, cluster,
                 cluster_options) -> IngestSummary:

    # pass 1 (above): cheap listing (names, sizes, mtimes) to size the progress bar and
    # find what changed; only per-directory signatures are kept
    summary.logs_total = sum(n for _, _, n in listings)
    emit("total", summary.logs_total)
    changed, known = _plan(store, listings)
    summary.dirs_changed = sorted(changed)
    day_rows = []

    def units() -> Iterator[Unit]:
        for listing in iter_dirs(archive):
            if listing.rel not in changed:
                summary.logs_skipped += len(listing.entries)
                emit("skipped", len(listing.entries))
                continue
            todo = _units_to_read(archive, listing, known.get(listing.rel, {}))
            n_todo = sum(len(u.paths) for u in todo)
            if len(listing.entries) > n_todo:
                summary.logs_skipped += len(listing.entries) - n_todo
                emit("skipped", len(listing.entries) - n_todo)
            day_rows.append({"dir": listing.rel, "n_logs": len(listing.entries), "signature": listing.signature, "run": store.run})
            yield from todo

    sink = _Sink(store, summary, cfg.site.part_rows, cfg.site.row_group_rows)
    try:
        _ingest(store, sink, summary, units, listings, changed, day_rows, cfg, emit, client=client, scheduler=scheduler,
                workers=workers, cluster=cluster, cluster_options=cluster_options)
    except KeyboardInterrupt:
        with no_interrupts():  # a second Ctrl-C must not cut the dataset's state file in half
            sink.flush()  # what finished tasks returned: the next run skips those logs
            summary.seconds = time.perf_counter() - t0
            store.finish({**{k: v for k, v in summary.to_dict().items() if k not in ("out",)}, "interrupted": True})
        if not summary.logs_read:
            raise Interrupted(f"interrupted before any log was read: nothing was added to {out}",
                              hint="run the same command again") from None
        raise Interrupted(f"interrupted: {out} keeps the {summary.logs_read} logs read so far ({summary.jobs} jobs, "
                          f"{summary.errors} damaged-log entries)",
                          hint="run the same command again to read the rest (logs already read are skipped)") from None
    summary.seconds = time.perf_counter() - t0
    store.finish({k: v for k, v in summary.to_dict().items() if k not in ("out",)})
    return summary


@contextlib.contextmanager
def no_interrupts():
    """SIGINT ignored inside (in the main thread; elsewhere nothing changes): child processes started here inherit
    that (a terminal's Ctrl-C reaches only this process, which then stops them in order), and cleanup is not cut
    short by a second Ctrl-C."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)


@contextlib.contextmanager
def held_interrupts():
    """SIGINT held inside, in the main thread, and delivered when the block ends.  Child processes started inside
    ignore it for good: a terminal's Ctrl-C then reaches only this process, which stops them in order, instead of
    every Dask worker printing its own traceback."""
    import threading

    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "pthread_sigmask"):
        yield
        return
    # blocked: a Ctrl-C typed meanwhile waits (Linux never discards a blocked signal, even an ignored one);
    # ignored: what child processes inherit across exec (Python then installs no KeyboardInterrupt of its own)
    old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)
        signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)  # the waiting Ctrl-C, if any, is raised here


def _ingest(store, sink, summary, units, listings, changed, day_rows, cfg, emit, *, client, scheduler, workers, cluster,
            cluster_options) -> None:
    upper = sum(n for rel, _, n in listings if rel in changed)  # logs in changed directories

    def make_batches(nworkers: int) -> Iterator[list[Unit]]:
        # A task costs little beyond its logs (the reader process lives across tasks), so
        # tasks are small enough that the workers finish together: [site] tasks_per_worker per worker
        # (the last task of one worker is the others' idle time).
        size = max(min(cfg.site.batch_logs, -(-upper // (cfg.site.tasks_per_worker * max(nworkers, 1)))),
                   min(cfg.site.min_batch_logs, cfg.site.batch_logs), 1)
        return _batches(units(), size)

    if upper == 0:
        for _ in units():  # nothing changed: count the skipped logs, start no cluster
            pass
    elif client is None and scheduler is None and cluster is None and workers == 0:
        summary.workers = 0
        for batch in make_batches(1):
            # no other process does the diagnosis: debuggers, profilers and patched detectors see it
            res = process_units(batch, config=cfg, run=store.run, in_reader=False)
            summary.tasks += 1
            summary.logs_read += res["n_logs"]
            sink.add(res)
            emit("read", res["n_logs"])
    else:
        _run_dask(make_batches, cfg, store.run, sink, summary, emit, client=client, scheduler=scheduler, workers=workers,
                  cluster=cluster, cluster_options=cluster_options)
    sink.flush()
    if day_rows:
        from .features import DAY_COLUMNS
        from .worker import to_table

        store.write_part({"days": to_table(day_rows, DAY_COLUMNS)})


# What the local cluster of an ingest leaves out.  Its workers spend their
# time waiting on their reader processes, and each periodic wake-up of an idle
# process is expensive (70-170 us of CPU on the VM the benchmarks ran on):
# an idle worker cost 53 ms of CPU per second with Dask's defaults, 9 ms
# with these (the scheduler in this process: 38 -> 15 ms per second).
# The statistical profiler samples the task thread every 10 ms (it would only
# ever see it waiting on a pipe); the event-loop tick every 20 ms and the
# system monitor every 0.5 s only feed diagnostics and the dashboard's plots.
QUIET_DASK = {
    "distributed.worker.profile.enabled": False,
    "distributed.admin.tick.interval": "1s",
    "distributed.admin.system-monitor.interval": "2s",
}


def jobqueue_options(*, jobs: int = 1, cores: int = 1, memory: str = "4GiB", walltime: str = "01:00:00",
                     queue: str | None = None, account: str | None = None, log_directory: str | None = None) -> dict[str, Any]:
    """What an ingest asks of each worker job: ``cores`` threads (each with its own reader process) and ``memory``
    (a reader holds one job's decoded logs: a 2,048-rank log takes about 100 MB)."""
    return {"jobs": jobs, "cores": cores, "memory": memory, "walltime": walltime, "queue": queue, "account": account,
            "log_directory": log_directory}


def _jobqueue_cluster(kind: str, cfg: Config, options: dict[str, Any] | None):
    """Worker jobs on the batch system, as quiet as the local cluster's workers (QUIET_DASK, as environment variables)."""
    import dask

    from ..jobqueue import jobqueue_kwargs, start_jobqueue_cluster

    opts = jobqueue_options(**(options or {}))
    env = {"DASK_" + k.upper().replace(".", "__").replace("-", "_"): str(v) for k, v in QUIET_DASK.items()}
    kwargs = jobqueue_kwargs(cores=opts["cores"], memory=opts["memory"], walltime=opts["walltime"], queue=opts["queue"],
                             account=opts["account"], log_directory=opts["log_directory"], env=env)
    with dask.config.set(QUIET_DASK), held_interrupts():  # the scheduler, in this process
        return start_jobqueue_cluster(kind, jobs=opts["jobs"], **kwargs), opts


def local_cluster(n_workers: int):
    """The LocalCluster ``ingest_archive`` starts: n processes of one thread, without Dask's own sampling."""
    import logging

    import dask
    from distributed import LocalCluster

    # silence_logs=CRITICAL: a worker that misses a heartbeat under load logs a traceback at ERROR level though the
    # ingest goes on (a task that fails comes back to the driver, which records its logs as error rows)
    cluster = None
    try:
        with dask.config.set(QUIET_DASK), held_interrupts():  # read when the scheduler and the workers start
            cluster = LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True,
                                   dashboard_address=":0", silence_logs=logging.CRITICAL)
    except KeyboardInterrupt:  # typed while the workers started: stop them before saying so
        _quiet_interrupted(None, cluster)
        raise
    return cluster


def _run_dask(make_batches, cfg: Config, run: int, sink: _Sink, summary: IngestSummary, emit: Progress, *,
              client=None, scheduler=None, workers=None, cluster=None, cluster_options=None) -> None:
    try:
        from distributed import Client, as_completed
    except ImportError:
        raise DependencyMissing("site ingest needs dask.distributed", hint="pip install 'iodiag[site]'  (or use --workers 0)") from None
    own_cluster = own_client = None
    try:
        if client is None:
            if scheduler:
                try:
                    client = own_client = Client(scheduler, timeout="30s")
                except (OSError, TimeoutError) as exc:
                    raise UsageError(f"cannot reach the Dask scheduler at {scheduler}: {exc}",
                                     hint="check the address (tcp://host:8786) and that the scheduler runs") from None
            elif cluster is not None:
                from ..jobqueue import wait_for_workers

                own_cluster, opts = _jobqueue_cluster(cluster, cfg, cluster_options)
                client = own_client = Client(own_cluster)
                wait_for_workers(client, own_cluster, cluster, jobs=opts["jobs"], timeout_s=cfg.site.jobqueue_wait_s,
                                 log_directory=opts["log_directory"])
            else:
                own_cluster = local_cluster(workers or os.cpu_count() or 1)
                client = own_client = Client(own_cluster)
        # one task runs per worker thread (each thread has its own reader process)
        nworkers = max(sum(w.get("nthreads", 1) for w in client.scheduler_info().get("workers", {}).values()), 1)
        summary.workers = nworkers
        limit = max(cfg.site.in_flight_per_worker * nworkers, 1)
        ac = as_completed()
        pending: dict[Any, list[Unit]] = {}

        def collect(fut) -> None:
            units = pending.pop(fut)
            try:
                res = fut.result()
            except Exception as exc:  # noqa: BLE001 - a lost worker turns its logs into error rows
                res = _failed_task(units, exc, run)
            n = sum(len(u.paths) for u in units)
            summary.tasks += 1
            summary.logs_read += n
            sink.add(res)
            fut.release()
            emit("read", n)

        for batch in make_batches(nworkers):
            while len(pending) >= limit:
                collect(next(ac))
            fut = client.submit(process_packed, pack_units(batch), config=cfg, run=run, pure=False)
            pending[fut] = batch
            ac.add(fut)
        for fut in ac:
            collect(fut)
    except KeyboardInterrupt:
        # Ctrl-C: stop our workers in order and without their shutdown noise, then say what was kept
        _quiet_interrupted(own_client, own_cluster)
        own_client = own_cluster = None
        raise
    finally:
        _close_quietly(own_client, own_cluster)


def _quiet_interrupted(client, cluster) -> None:
    """After a Ctrl-C: Dask's loggers silenced (a cluster stopped mid-task logs every cancelled task), then
    ``_close_quietly``, immune to a second Ctrl-C."""
    import logging

    with no_interrupts():
        for name in ("distributed", "tornado", "asyncio"):
            logging.getLogger(name).setLevel(logging.CRITICAL)
        _close_quietly(client, cluster)


def _close_quietly(client, cluster) -> None:
    """Close what ``_run_dask`` started; errors of a cluster already going down are not the user's business."""
    for thing in (client, cluster):
        if thing is None:
            continue
        try:
            thing.close()
        except Exception:  # noqa: BLE001 - closing after an interrupt: whatever Dask's state, the ingest is over
            pass
