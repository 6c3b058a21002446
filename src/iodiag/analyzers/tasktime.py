"""Where a Dask job's wall time goes: each worker thread's run split into task compute, I/O inside tasks,
gaps between tasks (inside compute calls: task overhead), cluster start-up, graph building and submission,
shutdown, iodiag's own capture and other (see ``_phases``); operations joined to tasks.

The task stream (``tasks`` table, phase ``compute``) says when each task ran on which worker thread; the
operation trace (``ops``) says when each process and OS thread did I/O.  Dask reports a task's thread as
Python's ``threading.get_ident()`` (``pthread_self()``), the collectors record ``gettid()``
(``threading.get_native_id()``); the Dask capture records each worker's map from one to the other, so an
operation of a thread that runs tasks joins that thread's task at that time: *exact*.  Operations of a worker
process's other threads (Zarr 3 / fsspec / asyncio I/O threads) and operations without a thread (Darshan DXT)
join by process and time window; where several tasks of that worker overlap the operation it is *ambiguous*
(the share of such I/O is reported).  I/O of a worker process outside every task (after a task ended,
spilling, imports) is reported as such.

Shares are of *thread time*: every worker thread is available for the whole run, so the parts add up to
``threads x run_s``.  Transfer and spilling run on the worker's event loop, beside its threads: they are given
in wall seconds, not as shares.  Computed once per profile (``dask_time_of``), read-only.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .nputil import median, unique
from ..profile import OP, JobProfile
from ..units import fmt_pct
from .batches import is_source
from .counters import memo


@dataclass(frozen=True)
class DaskTime:
    run_s: float
    tasks: int
    task_median_s: float
    workers: int
    threads: int
    split_s: dict[str, float]  # thread-seconds: task_compute, task_io, between_tasks + the PHASES
    transfer_s: float  # wall seconds any worker spent receiving data for tasks
    spill_s: float  # wall seconds in disk-read/disk-write (spilling)
    io_in_tasks_s: float  # I/O seconds joined to a task
    io_outside_tasks_s: float  # I/O seconds of worker processes outside every task
    ambiguous_io_share: float  # share of the in-task I/O seconds that overlap several tasks of the process
    per_worker: list[dict] = field(default_factory=list)
    prefixes: list[dict] = field(default_factory=list)
    task_io_s: dict = field(default_factory=dict)  # task key -> I/O seconds joined to it
    task_bytes: dict = field(default_factory=dict)  # task key -> bytes read + written by it
    clock_offsets_s: dict = field(default_factory=dict)  # worker pid -> shift that aligned its I/O with its tasks
    exact_io_share: float = 0.0  # share of the in-task I/O seconds joined by thread (the rest: by time window)
    io_traced: bool = True  # False: no operation of a worker was recorded (no DXT / counters only)
    timeline: dict = field(default_factory=dict)  # wall seconds per phase and how they were found (_phases)

    @property
    def between_share_of_span(self) -> float:
        """Share of the worker threads' time inside compute calls spent between tasks (start-up, graph building
        between computes, shutdown and the capture left out: they do not grow with the number of tasks)."""
        span = self.split_s["task_compute"] + self.split_s["task_io"] + self.split_s["between_tasks"]
        return float(self.split_s["between_tasks"] / span) if span > 0 else 0.0

    def per_thread_s(self) -> dict[str, float]:
        """The split in wall seconds of an average worker thread (thread-seconds / threads): adds up to run_s."""
        n = max(self.threads, 1)
        return {k: float(v) / n for k, v in self.split_s.items()}

    def share(self, key: str) -> float:
        cap = self.threads * self.run_s
        return float(self.split_s.get(key, 0.0) / cap) if cap > 0 else 0.0

    @property
    def headline(self) -> str:
        pct = lambda k: fmt_pct(self.share(k))  # noqa: E731
        med = self.task_median_s
        med_txt = f"{med * 1000:.0f} ms" if med < 1 else f"{med:.1f} s"
        io = (f"{pct('task_io')} in tasks' I/O, {pct('task_compute')} compute" if self.io_traced else
              f"{pct('task_compute')} in tasks (their I/O not traced: --dxt or the embedded collector splits it)")
        rest = ", ".join(f"{pct(k)} {PHASE_WORDS[k]}" for k in PHASES if k != "other" or self.share(k) >= 0.005)
        return (f"{self.run_s:.1f} s run on {self.threads} worker thread{'s' if self.threads != 1 else ''}: "
                f"{io}, {pct('between_tasks')} between tasks, {rest} ({self.tasks:,} tasks, median {med_txt})"
                + (f"; other is {OTHER_WHY}" if self.share("other") > 0.10 else ""))

    def to_dict(self) -> dict:
        r = lambda x: round(float(x), 6)  # noqa: E731
        return {"tasks": self.tasks, "task_median_s": r(self.task_median_s), "workers": self.workers,
                "threads": self.threads, "run_s": r(self.run_s), "split_s": {k: r(v) for k, v in self.split_s.items()},
                "split_share": {k: r(self.share(k)) for k in self.split_s},
                "between_share_of_span": r(self.between_share_of_span),
                "transfer_s": r(self.transfer_s), "spill_s": r(self.spill_s), "io_in_tasks_s": r(self.io_in_tasks_s),
                "io_outside_tasks_s": r(self.io_outside_tasks_s), "ambiguous_io_share": r(self.ambiguous_io_share),
                "join": "by thread where the capture mapped Dask's thread idents to OS thread ids, else by process "
                        "and time window",
                "exact_io_share": r(self.exact_io_share), "io_traced": self.io_traced,
                "clock_offsets_ms": {str(k): round(v * 1000, 3) for k, v in self.clock_offsets_s.items()},
                "timeline": self.timeline,
                "per_worker": self.per_worker, "prefixes": self.prefixes[:20], "headline": self.headline}


def task_stragglers(dur: np.ndarray, cfg) -> tuple[np.ndarray, float, np.ndarray]:
    """The straggler rule for the tasks of one prefix (``cfg``: ``Config.stragglers``), shared by the
    straggler-task detector and the HTML plot: (robust z, median, mask of stragglers)."""
    from .metrics import robust_z

    z, med, _mad = robust_z(dur)
    if len(dur) < cfg.task_min_tasks:
        return z, med, np.zeros(len(dur), bool)
    slow = (z > cfg.mad_factor) & (dur - med >= max(cfg.task_min_excess_s, cfg.min_excess_share * med))
    return z, med, slow


def _union_len(start: np.ndarray, end: np.ndarray) -> float:
    if not len(start):
        return 0.0
    o = np.argsort(start, kind="stable")
    s, e = start[o], np.maximum(end[o], start[o])
    cm = np.maximum.accumulate(e)
    new = np.ones(len(s), bool)
    new[1:] = s[1:] > cm[:-1]
    run = np.cumsum(new) - 1
    ends = np.zeros(int(run[-1]) + 1)
    np.maximum.at(ends, run, cm)
    return float((ends - s[new]).sum())


def _inside(x: np.ndarray, st: np.ndarray, en_sorted: np.ndarray) -> np.ndarray:
    """How many [start, end] intervals contain each time of x (starts and ends each sorted)."""
    return np.searchsorted(st, x, "right") - np.searchsorted(en_sorted, x, "left")


def _clock_offset(s: np.ndarray, e: np.ndarray, st: np.ndarray, en: np.ndarray) -> float:
    """The shift that puts a worker's data operations (starts ``s``, ends ``e``) inside its tasks.

    Dask reports a task's compute start/stop plus the worker's current estimate of the scheduler's clock
    offset (``Worker.scheduler_delay``, re-estimated at each heartbeat): on one host the reported times were
    seen 2-7 ms later than the task's own reads and writes, longer than a small task.  The shift within +-20 ms
    that places the most operation starts inside tasks is searched on a 50 us grid, then a 2.5 us grid; of the
    best shifts the smallest is taken (a larger one can slide operations into long neighbouring tasks), and
    then centred so that the operations sit as far from their tasks' edges on both sides.
    """
    en_sorted = np.sort(en)

    def best(grid):
        sc = np.array([np.count_nonzero(_inside(s + d, st, en_sorted) > 0) for d in grid])
        top = grid[sc == sc.max()]
        return float(top[np.argmin(np.abs(top))]), int(sc.max())

    base = int(np.count_nonzero(_inside(s, st, en_sorted) > 0))
    d, _ = best(np.arange(-0.02, 0.0200001, 0.00005))
    if _ < len(s):  # under CPU load the estimate lags further (21.5 ms seen with load average 5 on 2 cores)
        far, far_score = best(np.arange(-0.25, 0.2500001, 0.001))
        if far_score > _:
            d, _ = best(far + np.arange(-0.001, 0.0010001, 0.00005))
    d, score = best(d + np.arange(-0.00005, 0.0000501, 0.0000025))
    if score <= base:
        return 0.0
    idx = np.searchsorted(st, s + d, "right") - 1
    ok = (idx >= 0) & (en[np.maximum(idx, 0)] >= s + d)
    if ok.any():
        lead = float((s + d - st[idx])[ok].min())
        tail = float((en[idx] - (e + d))[ok].min())
        if tail > lead:
            d += (tail - lead) / 2
    return d


def _thread_lanes(start, end, ts, te, ops_thread, t_tid, sel_o, order, near):
    """Starts/ends of a worker's task-thread operations and of their threads' tasks, each thread moved onto a
    lane of its own on the time axis, so that the clock-offset search counts an operation as placed only inside a
    task *of its own thread*.  With several threads per worker the union of all tasks covers nearly the whole
    run, and any shift looks as good as another (a -11 ms shift that swapped whole tasks' bytes was seen); on
    lanes one thread's sequence of tasks pins the shift.  None when no thread is known or < 2 such operations."""
    if ops_thread is None or t_tid is None:
        return None
    tid_t = t_tid[order]
    tids = unique(tid_t[tid_t >= 0])
    if not len(tids):
        return None
    th = ops_thread[sel_o]
    pick = near & np.isin(th, tids)
    if pick.sum() < 2:
        return None
    keep_t = tid_t >= 0
    t0 = float(min(ts[order][keep_t].min(), start[sel_o][pick].min()))
    big = float(max(te[order][keep_t].max(), end[sel_o][pick].max()) - t0) + 10.0
    # tids is sorted and unique: a thread's lane is its index there (no Python loop over the operations)
    o_lane = np.searchsorted(tids, th[pick]).astype("f8") * big
    t_lane = np.searchsorted(tids, tid_t[keep_t]).astype("f8") * big
    st = ts[order][keep_t] - t0 + t_lane
    en = te[order][keep_t] - t0 + t_lane
    o = np.argsort(st, kind="stable")
    return (start[sel_o][pick] - t0 + o_lane, end[sel_o][pick] - t0 + o_lane, st[o], en[o])


_THREAD_SLACK_S = 0.05  # how far outside its thread's task windows an op may lie and still join the nearer task


def _join(ops_pid, ops_start, t_pid, t_start, t_end, ops_end=None, data=None, ops_thread=None,
          t_tid=None) -> tuple[np.ndarray, np.ndarray, dict, np.ndarray]:
    """For each op: the index of the compute interval it belongs to (-1: none), how many intervals of its
    process contain it (ambiguity of a time-window join), the clock offset applied per pid, and whether the
    join was exact.  Exact: the op's OS thread is the thread a task of its process ran on (the capture maps
    Dask's thread idents to OS thread ids), so it joins that thread's task at that time.  Else (no thread
    known: Darshan DXT; or another thread of the worker: Zarr 3 / fsspec I/O threads) the op joins by process
    and time window.  Each worker's operations are first aligned with its tasks by ``_clock_offset`` (Dask's
    task times carry a clock-offset estimate that changes between heartbeats)."""
    task = np.full(len(ops_pid), -1, "i8")
    active = np.zeros(len(ops_pid), "i8")
    exact = np.zeros(len(ops_pid), bool)
    offsets: dict[int, float] = {}
    for pid in unique(t_pid):
        sel_t = np.flatnonzero(t_pid == pid)
        sel_o = np.flatnonzero(ops_pid == pid)
        if not len(sel_o):
            continue
        order = sel_t[np.argsort(t_start[sel_t], kind="stable")]
        st, en = t_start[order], t_end[order]
        en_sorted = np.sort(en)
        s = ops_start[sel_o]
        if ops_end is not None and data is not None:  # align the worker's clock with its tasks' (see above)
            near = data[sel_o] & (s > st[0] - 0.05) & (s < en_sorted[-1] + 0.05)
            lanes = _thread_lanes(ops_start, ops_end, t_start, t_end, ops_thread, t_tid, sel_o, order, near)
            if lanes is not None:  # the ops of task threads against their own thread's tasks (see _thread_lanes)
                off = _clock_offset(*lanes)
                offsets[int(pid)] = off
                s = s + off
            elif near.sum() >= 2:
                off = _clock_offset(s[near], ops_end[sel_o][near], st, en)
                offsets[int(pid)] = off
                s = s + off
        active[sel_o] = _inside(s, st, en_sorted)
        idx = np.searchsorted(st, s, "right") - 1
        ok = (idx >= 0) & (en[np.maximum(idx, 0)] >= s)
        task[sel_o[ok]] = order[idx[ok]]
        if ops_thread is None or t_tid is None:
            continue
        tids = unique(t_tid[order][t_tid[order] >= 0])
        th = ops_thread[sel_o]
        for tid in tids:  # ops of a task thread: that thread's tasks only (they never overlap)
            mine = th == tid
            if not mine.any():
                continue
            o_t = order[t_tid[order] == tid]
            st_t, en_t = t_start[o_t], t_end[o_t]
            x = s[mine]
            j = np.searchsorted(st_t, x, "right") - 1
            hit = (j >= 0) & (en_t[np.maximum(j, 0)] >= x)
            # a task thread does no data I/O between its tasks: an op just outside every window (the offset is
            # an estimate) belongs to the nearer of the two tasks around it, within a bound
            jj = np.maximum(j, 0)
            after = np.minimum(j + 1, len(st_t) - 1)
            d_prev = np.where(j >= 0, x - en_t[jj], np.inf)
            d_next = np.where(j + 1 < len(st_t), st_t[after] - x, np.inf)
            near = np.where(d_next < d_prev, after, jj)
            close = ~hit & (np.minimum(d_prev, d_next) <= _THREAD_SLACK_S)
            pick = np.where(hit, jj, near)
            rows = sel_o[mine]
            task[rows] = np.where(hit | close, o_t[pick], -1)
            active[rows] = (hit | close).astype("i8")
            exact[rows] = True
    return task, active, offsets, exact


PHASES = ("cluster_startup", "graph_submit", "shutdown", "iodiag_capture", "other")
PHASE_WORDS = {"cluster_startup": "start-up", "graph_submit": "graph building and submission",
               "shutdown": "shutdown", "iodiag_capture": "iodiag's capture", "other": "other"}
OTHER_WHY = ("the script's own code after its last compute call and before its Dask client closed (results "
             "handling, writing outside Dask), or the end of a run whose client never closed")


def _merge(iv: list[tuple[float, float]]) -> list[list[float]]:
    out: list[list[float]] = []
    for a, b in sorted(iv):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return out


def _phases(t0: float, t1: float, timelines: list[dict], cs: np.ndarray, ce: np.ndarray):
    """The run [t0, t1] cut into labelled pieces: (edges, labels, info).

    With the capture's timeline (``iodiag run``): before the client is ready -> ``cluster_startup`` (the process
    start, imports, the script's code before the cluster, scheduler and workers starting); inside a compute call
    before its first task starts -> ``graph_submit`` (optimisation, packing, the scheduler taking the graph);
    inside a compute call after that -> ``tasks`` (idle thread time there is task overhead); between compute
    calls and before the first -> ``graph_submit`` (the script building the next graph); the capture's own work
    at client start and close -> ``iodiag_capture``; after the final capture -> ``shutdown``; after the last
    compute call and before the close -> ``other``.  Without a timeline (a job recorded before the capture kept
    one) the first task's start and the last task's end stand for the client's start and close."""
    first_task, last_task = float(cs.min()), float(ce.max())
    clip = lambda x: min(max(float(x), t0), t1)  # noqa: E731
    ok = lambda x: isinstance(x, (int, float)) and x > 0  # noqa: E731
    tl = [t for t in timelines if ok(t.get("client_start_s"))]
    capture: list[tuple[float, float]] = []
    if tl:
        basis = "capture"
        ready = min(clip(t["client_start_s"] + (t.get("setup_s") or 0.0)) for t in tl)
        sched = [t["scheduler_started_s"] for t in tl if ok(t.get("scheduler_started_s"))]
        for t in tl:
            capture.append((clip(t["client_start_s"]), clip(t["client_start_s"] + (t.get("setup_s") or 0.0))))
            if ok(t.get("final_start_s")):
                capture.append((clip(t["final_start_s"]), clip(t["final_start_s"] + (t.get("final_s") or 0.0))))
        calls = [(clip(a), clip(b)) for t in tl for a, b in (t.get("computes") or []) if b >= a]
        if not calls:  # futures (submit/map/gather): from the first graph sent to the last task
            sends = [a for t in tl for a, _ in (t.get("submits") or [])]
            calls = [(clip(min(sends) if sends else first_task), clip(last_task))]
        finals = [t["final_start_s"] for t in tl if ok(t.get("final_start_s"))]
        close = clip(min(finals)) if finals else None
        before_cluster = clip(min(sched)) - t0 if sched else None
    else:
        basis = "inferred"
        ready, calls, close, before_cluster = first_task, [(first_task, last_task)], last_task, None
    windows = _merge([c for c in calls if c[1] > c[0]] or [(first_task, last_task)])
    starts = np.sort(cs)
    firsts = []
    for a, b in windows:  # each call's first task start (none started in it: the whole call is graph/submission)
        i = int(np.searchsorted(starts, a, "left"))
        firsts.append(float(starts[i]) if i < len(starts) and starts[i] <= b else b)
    last_call = windows[-1][1]
    if close is not None:
        close_end = max([b for a, b in capture if a >= close] + [close])
    edges = sorted({t0, t1, ready, *[x for w in windows for x in w], *firsts, *[x for c in capture for x in c],
                    *([close, close_end] if close is not None else [])})
    edges = [e for e in edges if t0 <= e <= t1]
    labels = []
    w_start = np.array([a for a, _ in windows])
    for x, y in zip(edges[:-1], edges[1:]):
        m = (x + y) / 2
        k = int(np.searchsorted(w_start, m, "right")) - 1  # the (merged, sorted) call that may hold m
        if any(a <= m < b for a, b in capture):
            lab = "iodiag_capture"
        elif k >= 0 and m < windows[k][1]:
            lab = "graph_submit" if m < firsts[k] else "tasks"
        elif m < ready:
            lab = "cluster_startup"
        elif close is not None and m >= close:
            lab = "shutdown"
        elif m < last_call:
            lab = "graph_submit"
        else:
            lab = "other"
        labels.append(lab)
    wall = {k: 0.0 for k in ("tasks", *PHASES)}
    for x, y, lab in zip(edges[:-1], edges[1:], labels):
        wall[lab] += y - x
    info = {"basis": basis, "compute_calls": len(windows),
            "wall_s": {k: round(v, 6) for k, v in wall.items()},
            "before_cluster_s": None if before_cluster is None else round(before_cluster, 6),
            "other_is": OTHER_WHY}
    return np.asarray(edges, "f8"), labels, info


def _busy_until(cs: np.ndarray, ce: np.ndarray, x: np.ndarray) -> np.ndarray:
    """For one worker thread's tasks: busy seconds (union of its task intervals) before each time of ``x``."""
    m = _merge(list(zip(cs.tolist(), np.maximum(ce, cs).tolist())))
    s = np.array([a for a, _ in m])
    e = np.array([b for _, b in m])
    cum = np.concatenate([[0.0], np.cumsum(e - s)])
    k = np.searchsorted(s, x, "right") - 1
    inside = np.clip(x - s[np.maximum(k, 0)], 0.0, (e - s)[np.maximum(k, 0)])
    return np.where(k >= 0, cum[np.maximum(k, 0)] + inside, 0.0)


def _compute(profile: JobProfile) -> DaskTime | None:
    t = profile.tasks
    if not len(t):
        return None
    phase = t["phase"].astype(str)
    comp = phase == "compute"
    if not comp.any():
        return None
    job = profile.job
    t0 = job.start_s if job.start_s else float(t["start_s"].min())
    t1 = job.end_s if job.end_s and job.end_s > t0 else float(t["end_s"].max())
    run_s = max(t1 - t0, float(t["end_s"].max() - t["start_s"].min()), 1e-9)
    cs, ce = t["start_s"][comp], t["end_s"][comp]
    dur = np.maximum(ce - cs, 0.0)
    pid = t["pid"][comp]
    prefix = t["prefix"][comp].astype(str)
    edges, labels, timeline = _phases(t0, t1, getattr(job, "dask_timelines", []) or [], cs, ce)
    nthreads, busy, idle, per_worker = _thread_time(t["worker"][comp].astype(str), t["thread"][comp], pid, cs, ce,
                                                    edges, labels)
    uniq_prefix, pidx = np.unique(prefix, return_inverse=True)
    io = _TaskIO(len(uniq_prefix))
    io.join(profile, comp, pid, cs, ce, pidx, per_worker)
    io_in = min(io.io_in, busy)
    # every thread's time outside its tasks, by what the run was doing then (see _phases); the parts add up to
    # threads x run_s (the run_s beyond [t0, t1], a task stream outlasting the job's clock, is task overhead)
    outside = max(nthreads * run_s - busy - sum(idle.values()), 0.0)
    split = {"task_compute": busy - io_in, "task_io": io_in, "between_tasks": idle["tasks"] + outside,
             **{k: idle[k] for k in PHASES}}
    wall = lambda p: _union_len(t["start_s"][phase == p], t["end_s"][phase == p])  # noqa: E731
    spill = _union_len(t["start_s"][np.isin(phase, ("disk-read", "disk-write"))],
                       t["end_s"][np.isin(phase, ("disk-read", "disk-write"))])
    prefixes = []
    for i, name in enumerate(uniq_prefix.tolist()):
        d = dur[pidx == i]
        prefixes.append({"prefix": name, "tasks": int(len(d)), "total_s": round(float(d.sum()), 6),
                         "median_s": round(median(d), 6), "max_s": round(float(d.max()), 6),
                         "io_s": round(float(io.pref_io[i]), 6), "bytes": int(io.pref_bytes[i]), "ops": int(io.pref_ops[i]),
                         "io_share_of_task_time": round(float(io.pref_io[i] / d.sum()), 6) if d.sum() > 0 else 0.0})
    prefixes.sort(key=lambda p: -p["total_s"])
    for pw in per_worker.values():
        pw["busy_s"] = round(pw["busy_s"], 6)
    return DaskTime(run_s=run_s, tasks=int(len(unique(t["key"][comp].astype(str)))), task_median_s=median(dur),
                    workers=len(per_worker), threads=nthreads, split_s=split, transfer_s=wall("transfer"),
                    spill_s=spill, io_in_tasks_s=io_in, io_outside_tasks_s=io.io_out,
                    ambiguous_io_share=io.amb / io_in if io_in > 0 else 0.0, per_worker=list(per_worker.values()),
                    prefixes=prefixes, task_io_s=io.task_io, task_bytes=io.task_bytes, clock_offsets_s=io.offsets,
                    exact_io_share=io.exact_s / io_in if io_in > 0 else 0.0, io_traced=io.traced, timeline=timeline)


def _thread_time(worker: np.ndarray, thread: np.ndarray, pid: np.ndarray, cs: np.ndarray, ce: np.ndarray,
                 edges: np.ndarray, labels: list) -> tuple[int, float, dict[str, float], dict[str, dict]]:
    """(worker threads, seconds they ran tasks, each phase's idle thread-seconds, per worker: pid, threads, tasks and
    busy seconds), over the (worker, thread) lanes in sorted order."""
    lanes = sorted({(w, int(th)) for w, th in zip(worker.tolist(), thread.tolist())})
    busy = 0.0
    idle = {k: 0.0 for k in ("tasks", *PHASES)}
    per_worker: dict[str, dict] = {}
    for w, th in lanes:
        sel = (worker == w) & (thread == th)
        b = _union_len(cs[sel], ce[sel])
        busy += b
        bu = _busy_until(cs[sel], ce[sel], edges)
        for lab, gap in zip(labels, np.maximum(np.diff(edges) - np.diff(bu), 0.0).tolist()):
            idle[lab] += gap
        pw = per_worker.setdefault(w, {"worker": w, "pid": int(pid[sel][0]), "threads": 0, "tasks": 0, "busy_s": 0.0,
                                       "io_s": 0.0})
        pw["threads"] += 1
        pw["tasks"] += int(sel.sum())
        pw["busy_s"] += b
    return len(lanes), busy, idle, per_worker


class _TaskIO:
    """The worker processes' operations joined to the compute tasks (see ``_join``): I/O seconds inside and
    outside tasks, ambiguous and exact shares, per prefix and per task sums, the clock offsets found."""

    def __init__(self, n_prefixes: int) -> None:
        self.io_in = self.io_out = self.amb = self.exact_s = 0.0
        self.offsets: dict = {}
        self.task_io: dict = {}
        self.task_bytes: dict = {}
        self.pref_io = np.zeros(n_prefixes)
        self.pref_bytes = np.zeros(n_prefixes)
        self.pref_ops = np.zeros(n_prefixes)
        self.traced = False

    def join(self, profile: JobProfile, comp: np.ndarray, pid: np.ndarray, cs: np.ndarray, ce: np.ndarray,
             pidx: np.ndarray, per_worker: dict[str, dict]) -> None:
        t = profile.tasks
        o = profile.ops
        pr = profile.processes
        if is_source(o) and len(pr):  # only the worker processes' operations, in their order in the table
            workers_pids = unique(pid[pid >= 0])
            o = o.table(("proc", "op", "thread", "length", "start_s", "end_s"),
                        procs=pr["proc"][np.isin(pr["pid"], workers_pids)].tolist())
        if not (len(o) and len(pr)):
            return
        proc_pid = np.full(int(pr["proc"].max()) + 1, -1, "i8")
        proc_pid[pr["proc"]] = pr["pid"]
        opid = proc_pid[np.clip(o["proc"], 0, len(proc_pid) - 1)]
        on_worker = np.isin(opid, unique(pid[pid >= 0]))
        self.traced = bool(on_worker.any())
        if not on_worker.any():
            return
        ow = np.flatnonzero(on_worker)
        odur = np.maximum(o["end_s"][ow] - o["start_s"][ow], 0.0)
        rw = o["op"][ow] <= OP["write"]
        tid = t["tid"][comp] if "tid" in t else None
        task, active, self.offsets, exact = _join(opid[ow], o["start_s"][ow], pid, cs, ce, ops_end=o["end_s"][ow],
                                                  data=rw, ops_thread=o["thread"][ow], t_tid=tid)
        self.exact_s = float(odur[exact & (task >= 0)].sum())
        inside = active > 0
        self.io_in = float(odur[inside].sum())
        self.io_out = float(odur[~inside].sum())
        self.amb = float(odur[active > 1].sum())
        hit = task >= 0
        np.add.at(self.pref_io, pidx[task[hit]], odur[hit])
        np.add.at(self.pref_bytes, pidx[task[hit & rw]], o["length"][ow][hit & rw].astype("f8"))
        np.add.at(self.pref_ops, pidx[task[hit]], 1)
        keys = t["key"][comp].astype(str)
        kio = np.zeros(len(cs))
        kby = np.zeros(len(cs))
        np.add.at(kio, task[hit], odur[hit])
        np.add.at(kby, task[hit & rw], o["length"][ow][hit & rw].astype("f8"))
        nz = np.flatnonzero(kio > 0)
        self.task_io = dict(zip(keys[nz].tolist(), kio[nz].tolist()))
        self.task_bytes = dict(zip(keys[nz].tolist(), kby[nz].tolist()))
        for w, pw in per_worker.items():
            pw["io_s"] = round(float(odur[inside & (opid[ow] == pw["pid"])].sum()), 6)


def dask_time_of(profile: JobProfile) -> DaskTime | None:
    """The job's Dask time split (None without a task stream), computed once per profile."""
    d = memo(profile)
    if "dasktime" not in d:
        d["dasktime"] = _compute(profile)
    return d["dasktime"]
