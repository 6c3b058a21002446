"""Dask client preload used by ``iodiag run`` (loaded by path, in the workload's interpreter).

``iodiag run`` names this file in ``DASK_DISTRIBUTED__CLIENT__PRELOAD``, so
every ``distributed.Client`` the unmodified script creates calls
``dask_setup(client)`` when it starts and ``dask_teardown(client)`` when it
closes.  The file is self-contained (standard library and ``distributed``
only): the workload may run in an interpreter where iodiag is not installed.

What it saves into ``$IODIAG_DASK_DIR`` (the job's ``dask/`` folder), one set
per client (``<tag>`` = ``<pid>-<n>``, the n-th client of that process):

- ``tasks-<tag>.jsonl``: the scheduler's task stream, one JSON object per
  finished task (key, prefix, worker, thread, status, startstops), appended
  every ``$IODIAG_DASK_POLL_S`` seconds (default 1) using the stream's index
  cursor, so a run that dies keeps what finished so far;
- ``workers-<tag>.json``: every worker seen (address, name, pid, host,
  hostname, nthreads, nanny, first/last seen, gone), rewritten atomically when
  it changes;
- ``performance-report-<tag>.html``: the scheduler's ``performance_report``
  (what ``distributed.performance_report`` writes; it needs bokeh; only when
  ``$IODIAG_DASK_REPORT=1`` (``iodiag run --dask-report``): it is the one
  fixed cost of the capture, 1-3.5 s at client close; never after a signal);
- ``client-<tag>.json``: client pid/host, scheduler address, start/end, how
  capture ended (``teardown``, ``cluster-close``, ``atexit``, ``sigterm``),
  ``interrupted_by`` (``SIGINT`` after Ctrl-C, ``SIGTERM``), any capture
  error, and the run's ``timeline`` (scheduler start, client start, the
  capture's setup and final seconds, every compute call and graph sent: see
  ``_time_calls``).

After Ctrl-C or SIGTERM (a terminal or a batch system signals the whole
process group: the workers are ending too) the final capture asks only the
scheduler for the rest of the task stream: a call to the workers waits for
dead ones (30 s seen).

The final capture runs once, from whichever comes first: the client's
teardown, the close of the client's own cluster (a script that closes the
cluster before the client), interpreter exit (a client never closed; our
``atexit`` hook is registered after distributed's, so it runs before the
cluster is torn down), or SIGTERM (the handler captures, then re-delivers the
signal with its default action so the exit status is unchanged).
Clients created inside Dask workers are skipped.
"""

import asyncio
import atexit
import itertools
import json
import os
import signal
import socket
import sys
import threading
import time

OUT_VAR = "IODIAG_DASK_DIR"
_captures = {}
_counter = itertools.count()
_lock = threading.Lock()


def _scheduler_delay(dask_worker=None):
    """Run on a worker: the offset it adds to the task times it reports (0 when unknown)."""
    return float(getattr(dask_worker, "scheduler_delay", 0.0) or 0.0)


def _thread_ids(dask_worker=None):
    """Run on a worker: Python thread ident (what Dask's task stream reports, pthread_self()) -> OS thread id
    (gettid(), what the collectors record per operation) of every thread alive now."""
    import threading

    return {str(t.ident): int(t.native_id) for t in threading.enumerate() if t.ident and t.native_id}


def _by_value(fn):
    """This module is loaded as a client preload by file path (module ``dask_capture``), which workers cannot
    import: functions sent to them are pickled by value."""
    try:
        import cloudpickle

        cloudpickle.register_pickle_by_value(sys.modules[fn.__module__])
    except Exception:  # noqa: BLE001 - an old cloudpickle: the call fails and is recorded as an error
        pass
    return fn


def _out_dir():
    return os.environ.get(OUT_VAR)


def _in_worker():
    try:
        from distributed import get_worker

        get_worker()
        return True
    except Exception:
        return False


def _atomic_write(path, text):
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.replace(tmp, path)


def _key_text(key):
    if isinstance(key, bytes):
        return key.decode(errors="replace")
    return key if isinstance(key, str) else str(key)


def _prefix(key):
    try:
        from dask.utils import key_split

        return key_split(key)
    except Exception:
        return _key_text(key)


def _jsonable(value):
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return str(value)


class _Skipped(Exception):
    """The performance report was turned off ($IODIAG_DASK_REPORT=0)."""


class Capture:
    def __init__(self, client, out):
        self.client = client
        self.out = out
        self.tag = f"{os.getpid()}-{next(_counter)}"
        self.t0 = time.time()
        self.cursor = 0
        self.count = 0
        self.workers = {}
        self.last_count = 0
        self.done = False
        self.poll_task = None
        self.final_lock = None
        self.errors = []
        self.ended_by = None
        self.scheduler_address = None
        self.final_s = None
        self.interrupted = None  # "SIGINT" / "SIGTERM" when the capture ended after that signal
        # the run's timeline, from clocks read in this process (time.time(): the task stream's clock on one host)
        self.scheduler_started = None  # the scheduler's own start time (identity()["started"])
        self.setup_s = None  # this capture's own cost when the client started
        self.final_start = None  # when the final capture began (the client or its cluster closing)
        self.computes = []  # [call, return] of each Client.get (dask.compute / .compute() / to_zarr)
        self.submits = []  # [start, end, tasks] of each graph sent (Client._graph_to_futures), the first MAX_EVENTS
        self.n_submits = 0
        self.poll_s = float(os.environ.get("IODIAG_DASK_POLL_S", "1") or 1)

    def path(self, stem, ext):
        return os.path.join(self.out, f"{stem}-{self.tag}.{ext}")

    # -- incremental collection -----------------------------------------------
    async def collect(self, workers=True):
        """Append the task stream's new records; with ``workers``, first refresh what is known of the workers
        (identity, pid, host, clock offset, thread ids: calls that wait for every worker to answer)."""
        if workers:
            await self.collect_workers()
        await self.collect_tasks()

    async def collect_workers(self):
        sched = self.client.scheduler
        info = await sched.identity()
        self.scheduler_address = info.get("address")
        if isinstance(info.get("started"), (int, float)):
            self.scheduler_started = float(info["started"])
        now = time.time()
        current = info.get("workers", {}) or {}
        new = [a for a in current if a not in self.workers]
        changed = bool(new)
        for addr, w in current.items():
            rec = self.workers.setdefault(addr, {"address": addr, "first_seen": now})
            rec.update(name=_jsonable(w.get("name")), host=w.get("host"), nthreads=w.get("nthreads"),
                       nanny=w.get("nanny"), memory_limit=w.get("memory_limit"), last_seen=now, gone=False)
        for addr, rec in self.workers.items():
            if addr not in current and not rec.get("gone"):
                rec["gone"] = True
                rec["gone_at"] = now
                changed = True
        if new:
            for fn, field in ((os.getpid, "pid"), (socket.gethostname, "hostname")):
                for addr, val in (await self._on_workers(fn, new, field)).items():
                    if addr in self.workers and not isinstance(val, BaseException):
                        self.workers[addr][field] = val
        # each worker adds its estimate of the scheduler's clock offset to the task times it reports
        # (Worker.scheduler_delay), and Dask names threads by Python ident: keep both, so that analyzers can
        # join task times to the I/O of the same OS thread (seen 1-7 ms offsets on one host: longer than a task)
        live = [a for a, r in self.workers.items() if not r.get("gone")]
        if live:
            for addr, val in (await self._on_workers(_by_value(_scheduler_delay), live, "scheduler_delay")).items():
                if addr in self.workers and isinstance(val, (int, float)):
                    changed |= self.workers[addr].get("scheduler_delay") != val
                    self.workers[addr]["scheduler_delay"] = float(val)
            for addr, val in (await self._on_workers(_by_value(_thread_ids), live, "threads")).items():
                if addr in self.workers and isinstance(val, dict):
                    known = self.workers[addr].setdefault("threads", {})
                    if any(known.get(k) != v for k, v in val.items()):
                        known.update(val)
                        changed = True
        if changed:
            self.write_workers()

    async def collect_tasks(self):
        recs = await self.client.scheduler.get_task_stream(start_index=self.cursor)
        if recs:
            lines = []
            for r in recs:
                key = r.get("key")
                lines.append(json.dumps({
                    "key": _key_text(key),
                    "prefix": _prefix(key),
                    "worker": r.get("worker"),
                    "thread": r.get("thread"),
                    "status": r.get("status"),
                    "nbytes": r.get("nbytes"),
                    "typename": r.get("typename"),
                    "startstops": [_jsonable(s) for s in r.get("startstops", ())],
                }))
            with open(self.path("tasks", "jsonl"), "a", encoding="utf-8") as fh:
                fh.write("\n".join(lines) + "\n")
            self.cursor += len(recs)
            self.count += len(recs)

    async def _on_workers(self, fn, workers, what: str) -> dict:
        """``fn`` run on ``workers``: address -> result ({} and an error noted when that fails)."""
        try:
            try:
                res = await self.client._run(fn, workers=workers, on_error="return")
            except TypeError:  # older distributed without on_error
                res = await self.client._run(fn, workers=workers)
        except Exception as exc:  # noqa: BLE001 - a worker died between identity() and run()
            self.errors.append(f"worker {what}: {exc!r}")
            return {}
        return res or {}

    def write_workers(self):
        _atomic_write(self.path("workers", "json"), json.dumps(list(self.workers.values()), indent=1))

    def write_meta(self):
        meta = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "argv": list(sys.argv),
            "scheduler_address": self.scheduler_address,
            "start_s": self.t0,
            "end_s": time.time(),
            "ended_by": self.ended_by,
            "tasks": self.count,
            "report": os.path.basename(self.path("performance-report", "html"))
            if os.path.exists(self.path("performance-report", "html")) else None,
            "errors": self.errors,
            "final_capture_s": self.final_s,
            "interrupted_by": self.interrupted,
            "timeline": {"scheduler_started_s": self.scheduler_started, "client_start_s": self.t0,
                         "setup_s": self.setup_s, "computes": self.computes, "submits": self.submits,
                         "submits_total": self.n_submits, "final_start_s": self.final_start,
                         "final_s": self.final_s},
        }
        try:
            import distributed

            meta["distributed_version"] = distributed.__version__
        except Exception:
            pass
        _atomic_write(self.path("client", "json"), json.dumps(meta, indent=1))

    async def poll(self):
        while not self.done:
            await asyncio.sleep(self.poll_s)
            if self.done:
                break
            try:
                await self.collect()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # scheduler gone: stop polling quietly
                self.errors.append(f"poll: {exc!r}")
                break

    async def final(self, ended_by):
        if self.final_lock is None:
            self.final_lock = asyncio.Lock()
        async with self.final_lock:
            if self.done:
                return
            self.done = True
            self.ended_by = ended_by
            t_final = self.final_start = time.time()
            if self.poll_task is not None and not self.poll_task.done():
                self.poll_task.cancel()
            # the workload has ended: every wait from here is bounded by a short probe of the scheduler, so a
            # scheduler that is already gone (client.shutdown() of an external cluster) costs ~2 s, not 30 + 60
            alive = True
            try:
                await asyncio.wait_for(self.client.scheduler.identity(), 2)
            except Exception as exc:  # noqa: BLE001
                alive = False
                self.errors.append(f"scheduler gone at the end ({exc!r}): task stream kept up to the last poll")
            # after Ctrl-C or SIGTERM (to the whole process group: the workers are ending too) only the
            # scheduler's own task stream is asked for; a call to the workers would wait for dead ones (30 s
            # connect timeout seen, past a batch system's grace time before SIGKILL)
            interrupted = _signalled() is not None or ended_by == "sigterm"
            try:
                if alive:
                    await asyncio.wait_for(self.collect_tasks(), 10 if interrupted else 30)
            except Exception as exc:
                self.errors.append(f"final task stream: {exc!r}")
            try:  # (after a signal what the polls learnt of the workers stands: they are ending)
                if alive and not interrupted:
                    await asyncio.wait_for(self.collect_workers(), 15)
            except Exception as exc:
                self.errors.append(f"final worker refresh: {exc!r}")
            self.interrupted = _signalled() or ("SIGTERM" if ended_by == "sigterm" else None)
            try:
                if os.environ.get("IODIAG_DASK_REPORT", "0") != "1" or not alive or interrupted:
                    raise _Skipped()
                code = ""
                main = sys.argv[0] if sys.argv else ""
                if main.endswith(".py") and os.path.isfile(main) and os.path.getsize(main) < 1_000_000:
                    with open(main, encoding="utf-8", errors="replace") as fh:
                        code = fh.read()
                # the report is rendered through a temporary HTML file (in this process when the scheduler is
                # local): put it in the job folder, which the collectors exclude, so it is not the workload's I/O
                import tempfile

                old_tmp, tempfile.tempdir = tempfile.tempdir, self.out
                try:
                    html = await asyncio.wait_for(
                        self.client.scheduler.performance_report(start=self.t0, last_count=self.last_count, code=code),
                        float(os.environ.get("IODIAG_DASK_REPORT_TIMEOUT_S", "60")))
                finally:
                    tempfile.tempdir = old_tmp
                _atomic_write(self.path("performance-report", "html"), html)
            except _Skipped:
                pass
            except Exception as exc:
                self.errors.append(f"performance report: {exc!r}")
            for rec in self.workers.values():
                rec.setdefault("pid", None)
            try:
                self.write_workers()
            except Exception as exc:
                self.errors.append(f"workers: {exc!r}")
            self.final_s = time.time() - t_final
            self.write_meta()


def _record_delays(worker, out):
    """Worker preload: log every change of ``worker.scheduler_delay`` with the worker's own time, and the value
    each task was given.

    A worker adds its current estimate of the scheduler's clock offset to the start/stop times of each task it
    reports (the estimate is read when the task is handed to its thread, and renewed at each heartbeat).
    With the history of the estimate an analyzer puts every task back on the worker's own clock, the clock of
    its I/O records, instead of searching for the shift (a search that can land a whole task off under load).
    The history alone is ambiguous where the estimate fell near a task's start: both the old and the new value
    give a start consistent with it (under load average 14 on 2 cores a 50 ms drop put a task's first 21
    writes before its window), so the read ``Worker.execute`` makes for each task is logged with that task's key.
    Lines: {"worker": address, "pid", "t": local epoch seconds, "delay": seconds} on each change, the same plus
    "key" for each task's read.
    """
    cls = type(worker)
    if getattr(cls, "_iodiag_delays", False):
        return
    path = os.path.join(out, f"delays-{os.getpid()}-{next(_counter)}.jsonl")
    state = {"v": float(worker.__dict__.pop("scheduler_delay", 0.0) or 0.0), "fh": None}

    def _log(self, rec):
        try:
            addr = str(getattr(self, "address", "") or "")
        except Exception:  # noqa: BLE001 - not started yet
            addr = ""
        try:
            if state["fh"] is None:  # line-buffered: a killed worker loses no line
                state["fh"] = open(path, "a", encoding="utf-8", buffering=1)
            state["fh"].write(json.dumps({"worker": addr, "pid": os.getpid(), "t": time.time(), **rec}) + "\n")
        except Exception:  # noqa: BLE001 - never disturb the worker
            pass

    def _get(self):
        value = state["v"]
        try:  # Worker.execute reads it once per task, just before handing the task to its thread
            caller = sys._getframe(1)
            if caller.f_code.co_name == "execute":
                key = caller.f_locals.get("key")
                if key is not None:
                    _log(self, {"delay": float(value), "key": _key_text(key)})
        except Exception:  # noqa: BLE001 - never disturb the worker
            pass
        return value

    def _set(self, value):
        state["v"] = value
        _log(self, {"delay": float(value)})

    worker.__class__ = type(cls.__name__, (cls,), {"scheduler_delay": property(_get, _set), "_iodiag_delays": True,
                                                   "__module__": cls.__module__, "__qualname__": cls.__qualname__})
    _set(worker, state["v"])


async def dask_setup(client):
    out = _out_dir()
    if out and hasattr(client, "scheduler_delay") and not hasattr(client, "submit"):  # a worker preload
        try:
            os.makedirs(out, exist_ok=True)
            _record_delays(client, out)
        except Exception:  # noqa: BLE001 - the capture never stops a worker
            pass
        return
    if not out or _in_worker():
        return
    os.makedirs(out, exist_ok=True)
    cap = Capture(client, out)
    with _lock:
        _captures[id(client)] = cap
    try:  # the report's counters start from here (what performance_report.__aenter__ does)
        cap.last_count = await asyncio.wait_for(
            client._run_on_scheduler(lambda dask_scheduler: dask_scheduler.monitor.count), 10)
    except Exception:
        cap.last_count = 0
    try:
        await client.scheduler.get_task_stream_index()  # creates the task-stream plugin now
        cap.cursor = await client.scheduler.get_task_stream_index()
    except Exception as exc:
        cap.errors.append(f"task stream index: {exc!r}")
    try:
        await cap.collect()
    except Exception as exc:
        cap.errors.append(f"first collect: {exc!r}")
    _time_calls(client, cap)
    cap.setup_s = time.time() - cap.t0
    cap.write_meta()
    cap.poll_task = asyncio.ensure_future(cap.poll())
    _capture_before(client, "_shutdown", cap, "client-shutdown")  # client.shutdown() stops the scheduler
    cluster = getattr(client, "cluster", None)
    if cluster is not None:
        _capture_before(cluster, "_close", cap, "cluster-close")


MAX_EVENTS = 2000  # submissions kept per client (a loop of client.submit calls makes one each)


def _time_calls(client, cap) -> None:
    """Note when each compute call (``Client.get``: what dask.compute, ``.compute()`` and ``to_zarr`` use) runs
    and when each graph is sent (``Client._graph_to_futures``: also ``submit``/``map``/``persist``), as
    [start, end] pairs in this process's clock: what tells graph building and submission from the time
    workers spend between tasks.  Two ``time.time()`` calls per call; a synchronous client only."""
    if getattr(client, "_asynchronous", False):  # (``asynchronous`` is True in the event loop's thread, here)
        return
    get, send = getattr(client, "get", None), getattr(client, "_graph_to_futures", None)

    def timed_get(*args, **kwargs):
        t = time.time()
        try:
            return get(*args, **kwargs)
        finally:
            if len(cap.computes) < MAX_EVENTS:
                cap.computes.append([t, time.time()])

    def timed_send(*args, **kwargs):
        t = time.time()
        try:
            return send(*args, **kwargs)
        finally:
            cap.n_submits += 1
            if len(cap.submits) < MAX_EVENTS:
                cap.submits.append([t, time.time()])

    try:
        if get is not None:
            client.get = timed_get
        if send is not None:
            client._graph_to_futures = timed_send
    except Exception as exc:  # noqa: BLE001 - the timeline is then inferred from the task stream
        cap.errors.append(f"timeline: {exc!r}")


def _capture_before(obj, method: str, cap, ended_by: str) -> None:
    """Run the final capture before ``obj.method`` (an async shutdown of the client or its cluster) runs."""
    orig = getattr(obj, method, None)
    if orig is None:
        return

    async def wrapped(*args, **kwargs):
        try:
            await asyncio.wait_for(cap.final(ended_by), 120)
        except Exception:
            pass
        return await orig(*args, **kwargs)

    try:
        setattr(obj, method, wrapped)
    except Exception:
        pass


async def dask_teardown(client):
    with _lock:
        cap = _captures.pop(id(client), None)
    if cap is not None:
        await cap.final("teardown")


def _finish_all(ended_by, timeout=120):
    with _lock:
        caps = list(_captures.items())
        _captures.clear()
    for _, cap in caps:
        if cap.done:
            continue
        client = cap.client
        try:
            if getattr(client, "asynchronous", False):
                continue
            client.sync(cap.final, ended_by, callback_timeout=timeout)
        except Exception:
            try:
                cap.write_meta()
            except Exception:
                pass


_exit_signal = {"v": None}  # set at interpreter exit when the script died of Ctrl-C (KeyboardInterrupt)


def _signalled():
    """"SIGINT" when the script is ending on Ctrl-C: the main thread is handling a KeyboardInterrupt (a
    ``with Client(...)`` block closing on its way out) or died of one (interpreter exit), else None.  Read from
    the interpreter, so no signal handler of ours changes what the script sees."""
    if _exit_signal["v"]:
        return _exit_signal["v"]
    cur = None
    try:
        cur = sys._current_exceptions().get(threading.main_thread().ident)
    except Exception:  # noqa: BLE001 - not CPython
        pass
    if isinstance(cur, tuple):  # Python < 3.12: exc_info triples
        cur = cur[1]
    return "SIGINT" if isinstance(cur, KeyboardInterrupt) else None


def _atexit():
    # the uncaught exception that ended the script is kept in sys.last_value (sys.last_exc from 3.12) by then;
    # only read here: an interactive session keeps an old one there while it goes on
    last = getattr(sys, "last_exc", None) or getattr(sys, "last_value", None)
    if isinstance(last, KeyboardInterrupt):
        _exit_signal["v"] = "SIGINT"
    _finish_all("atexit")


def _on_sigterm(signum, frame):
    try:
        _finish_all("sigterm", timeout=60)
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)


if _out_dir() and not _in_worker():
    atexit.register(_atexit)
    if threading.current_thread() is threading.main_thread():
        try:
            if signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None):
                signal.signal(signal.SIGTERM, _on_sigterm)
        except (ValueError, OSError):
            pass
