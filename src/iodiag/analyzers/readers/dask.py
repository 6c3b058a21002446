"""Dask artefacts of a job (``dask/`` folder written by ``iodiag run``) -> the ``tasks`` table.

One row per phase of each finished task, as the scheduler's task stream
records them (``startstops``): ``compute``, ``transfer``, ``disk-read``,
``disk-write``, ``deserialize``.  Columns (profile contract):
key, prefix, worker, pid, thread, phase, start_s, end_s.

``pid`` comes from the workers file (-1 when the worker was never
identified); ``thread`` is Python's thread ident on the worker (not the OS
thread id), -1 when absent.  Times are epoch seconds on the workers' clocks
(when the capture's worker preload logged each worker's clock-offset estimates, the offset Dask adds to the
compute and transfer times it reports is taken off again: the value each task was given where it was logged,
``load_task_delays``, else the estimate in force, ``load_delays``),
the same clock as Darshan's on one host, so I/O ops join tasks by pid and
time window (Zarr 3 writes chunks from its own asyncio threads, so thread ids
do not match).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ...profile import TASK_COLUMNS, Table, empty_table


def load_workers(dask_dir: str | Path) -> dict[str, dict]:
    """worker address -> its record (pid, host, hostname, nthreads, gone, ...)."""
    out: dict[str, dict] = {}
    for path in sorted(Path(dask_dir).glob("workers-*.json")):
        try:
            data = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        for w in data if isinstance(data, list) else []:
            if isinstance(w, dict) and w.get("address"):
                prev = out.get(w["address"], {})
                out[w["address"]] = {**prev, **{k: v for k, v in w.items() if v is not None}}
    return out


def _records(path: Path):
    try:
        fh = open(path, encoding="utf-8", errors="replace")
    except OSError:
        return
    with fh:
        for line in fh:
            line = line.strip()
            if not line:
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:  # a line cut by a kill: skip it
                continue
            if isinstance(rec, dict):
                yield rec


def _delay_lines(dask_dir: str | Path):
    """(worker address, record) of every line of the capture's delays files; a file's first lines may predate
    the worker's address (one file per worker): they get the address its later lines carry."""
    for path in sorted(Path(dask_dir).glob("delays-*.jsonl")):
        pending: list[dict] = []
        addr = ""
        for rec in _records(path):
            try:
                rec["t"], rec["delay"] = float(rec["t"]), float(rec["delay"])
            except (KeyError, TypeError, ValueError):
                continue
            pending.append(rec)
            addr = str(rec.get("worker") or "") or addr
        if addr:
            for rec in pending:
                yield addr, rec


def load_delays(dask_dir: str | Path) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Worker address -> (local times, clock-offset estimates) in time order: every change of the worker's
    ``scheduler_delay`` as the capture's worker preload logged it (none for jobs recorded without it)."""
    hist: dict[str, list[tuple[float, float]]] = {}
    for addr, rec in _delay_lines(dask_dir):
        if "key" not in rec:
            hist.setdefault(addr, []).append((rec["t"], rec["delay"]))
    out = {}
    for addr, rows in hist.items():
        rows.sort()
        out[addr] = (np.array([r[0] for r in rows]), np.array([r[1] for r in rows]))
    return out


def load_task_delays(dask_dir: str | Path) -> dict[tuple[str, str], list[float]]:
    """(worker address, task key) -> the clock-offset estimate the worker gave each run of that task (in run
    order), as its preload logged them: exactly what Dask added to the task's compute start and stop.  The
    history of changes (``load_delays``) cannot tell it where the estimate changed near the task's start."""
    out: dict[tuple[str, str], list[float]] = {}
    for addr, rec in sorted(_delay_lines(dask_dir), key=lambda ar: ar[1]["t"]):
        if "key" in rec:
            out.setdefault((addr, str(rec["key"])), []).append(rec["delay"])
    return out


def to_local_clock(start: np.ndarray, history: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """The offsets a worker added to task times reported at ``start``: the estimate in force when each task was
    handed to its thread (at local time ``start - offset``; found by fixed-point iteration)."""
    t, d = history
    off = np.full(len(start), d[-1])
    for _ in range(3):
        i = np.searchsorted(t, start - off, "right") - 1
        off = d[np.maximum(i, 0)]
    return off


def load_tasks(dask_dir: str | Path) -> Table:
    """The ``tasks`` table of every client's task stream under ``dask_dir`` (empty when none)."""
    dask_dir = Path(dask_dir)
    if not dask_dir.is_dir():
        return empty_table("tasks")
    # times are as Dask reports them: compute/transfer include the worker's estimate of the scheduler's clock
    # offset (recorded by the capture as scheduler_delay); analyzers/tasktime.py aligns them with the I/O
    workers = load_workers(dask_dir)
    pids = {addr: int(w["pid"]) for addr, w in workers.items() if isinstance(w.get("pid"), int)}
    tids = {addr: {int(k): int(v) for k, v in (w.get("threads") or {}).items()} for addr, w in workers.items()}
    cols: dict[str, list] = {name: [] for name in TASK_COLUMNS}
    seen: set[tuple] = set()
    for path in sorted(dask_dir.glob("tasks-*.jsonl")):
        for rec in _records(path):
            key = str(rec.get("key", ""))
            worker = str(rec.get("worker") or "")
            thread = rec.get("thread")
            for ss in rec.get("startstops") or ():
                if not isinstance(ss, dict):
                    continue
                try:
                    start, stop = float(ss["start"]), float(ss["stop"])
                except (KeyError, TypeError, ValueError):
                    continue
                phase = str(ss.get("action", "compute"))
                ident = (key, worker, phase, start)
                if ident in seen:
                    continue
                seen.add(ident)
                cols["key"].append(key)
                cols["prefix"].append(str(rec.get("prefix") or key))
                cols["worker"].append(worker)
                cols["pid"].append(pids.get(worker, -1))
                cols["thread"].append(int(thread) if isinstance(thread, int) else -1)
                cols["tid"].append(tids.get(worker, {}).get(thread, -1) if isinstance(thread, int) else -1)
                cols["phase"].append(phase)
                cols["start_s"].append(start)
                cols["end_s"].append(stop)
    if not cols["key"]:
        return empty_table("tasks")
    arrays = {name: np.asarray(vals, dtype=TASK_COLUMNS[name]) for name, vals in cols.items()}
    delays = load_delays(dask_dir)
    given = load_task_delays(dask_dir)
    if delays or given:  # back on each worker's own clock: the clock of its I/O records
        wk, ph = arrays["worker"], arrays["phase"]
        shifted = ~np.isin(ph, ("disk-read", "disk-write"))  # Dask reports spilling on the worker's clock
        for addr in set(delays) | {a for a, _ in given}:
            sel = np.flatnonzero((wk == addr) & shifted)
            if not len(sel):
                continue
            history = delays.get(addr)
            off = to_local_clock(arrays["start_s"][sel], history) if history else np.zeros(len(sel))
            runs: dict[str, int] = {}
            for j, i in enumerate(sel.tolist()):  # compute rows whose task's own estimate was logged
                if ph[i] != "compute":
                    continue
                got = given.get((addr, arrays["key"][i]))
                if got:
                    n = runs.get(arrays["key"][i], 0)
                    runs[arrays["key"][i]] = n + 1
                    off[j] = got[min(n, len(got) - 1)]
            arrays["start_s"][sel] -= off
            arrays["end_s"][sel] -= off
    table = Table(arrays)
    return table.take(np.argsort(table["start_s"], kind="stable"))
