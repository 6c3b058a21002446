"""Helpers shared by detectors: findings costed in job seconds, top files and processes."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...config import Config
from ...findings import Finding, severity_from_share
from ...profile import JobProfile
from ..metrics import final_name, paths_of_ids, tool_file
from ..timemodel import time_model_of, wall_cost_of_files


def finding(cfg: Config, profile: JobProfile, id: str, title: str, *, wall_s: float | None,
            process_s: float | None = None, evidence: dict[str, Any], facts: dict[str, Any] | None = None,
            files: list[str] | None = None, processes: list[int] | None = None, severity: str | None = None) -> Finding:
    """A Finding costed in the job's wall seconds (``wall_s``, see analyzers/timemodel.py), with its severity
    from the share of the run time that cost is (unless given).  ``process_s`` (the summed process-seconds a
    detector measured) is kept in the evidence, labelled, with its share of the job's summed I/O time."""
    tm = time_model_of(profile)
    wall = None if wall_s is None else tm.cap(wall_s)
    share = tm.share(wall)
    if share is None and wall is not None and tm.io_wall_s > 0:  # no run time known: judge against the I/O time
        share = float(min(wall / tm.io_wall_s, 1.0))
    sev = severity or severity_from_share(share, cfg.severity)
    if severity is None and wall is not None and wall < cfg.severity.min_cost_s and sev in ("high", "medium"):
        sev = "low"
    ev = {k: _plain(v) for k, v in evidence.items()}
    if process_s is not None:
        ev["cost_process_s"] = _plain(float(process_s))
        if tm.io_process_s > 0:
            ev["cost_share_of_io_process_s"] = _plain(float(min(process_s / tm.io_process_s, 1.0)))
    return Finding(id=id, severity=sev, title=title, evidence=ev, facts=dict(facts or {}),
                   files=files or [], processes=[int(p) for p in (processes or [])],
                   est_cost_s=None if wall is None else round(float(wall), 6),
                   cost_share=None if share is None else round(share, 6))


def file_cost(profile: JobProfile, fids: np.ndarray, cost_f: np.ndarray,
              shared_cap: np.ndarray | None = None) -> dict[str, float]:
    """``wall_s`` and ``process_s`` of per-file process-seconds ``cost_f`` (aligned with ``fids``), for finding();
    ``shared_cap``: per POSIX-level row, the most one process can spend of a shared record's cost."""
    cost_f = np.asarray(cost_f, "f8")
    return {"wall_s": wall_cost_of_files(profile, np.asarray(fids), cost_f, shared_cap), "process_s": float(cost_f.sum())}


def _plain(v: Any) -> Any:
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, float):
        return round(v, 6)
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    return v


def top_files(profile: JobProfile, file_ids: np.ndarray, weights: np.ndarray, k: int) -> list[str]:
    """Paths of the k file ids with the largest weights (weight > 0 only); weights of an id given on several
    rows (one record per process or per log) add up, so a file is named once."""
    if not len(file_ids):
        return []
    if len(file_ids) > 1:
        uniq, first, inv = np.unique(file_ids, return_index=True, return_inverse=True)
        if len(uniq) < len(file_ids):
            w = np.bincount(inv, weights=np.asarray(weights, "f8"), minlength=len(uniq))
            keep = np.argsort(first, kind="stable")  # ties stay in the order the ids came
            file_ids, weights = uniq[keep], w[keep]
    order = np.argsort(-weights, kind="stable")[: k + 8]
    order = order[weights[order] > 0]
    ids = file_ids[order]
    named = [final_name(p) if p is not None else f"<unnamed {int(f):016x}>"
             for f, p in zip(ids.tolist(), paths_of_ids(profile, ids))]
    return list(dict.fromkeys(p for p in named if not tool_file(p)))[:k]  # a temp name and its file: once



def proc_weights(profile: JobProfile, table, rows: np.ndarray | None, weights: np.ndarray, n: int) -> np.ndarray:
    """Per-process sums of row ``weights`` of a counters ``table`` (``rows``: a mask or None for all rows).  A
    shared record (rank -1: Darshan reduced it over every rank of its log) names no process and is left out (as
    read-modify-write does; clipped to 0 it named process 0 alone for work every rank did), unless its log has
    one process: then it is that process's."""
    proc = np.asarray(table["proc"] if rows is None else table["proc"][rows])
    w = np.asarray(weights, "f8")
    proc = proc.copy()
    pr = profile.processes
    shared = proc < 0
    if shared.any() and len(pr):
        log = table["log"] if "log" in table else np.zeros(len(table["proc"]), "i8")
        log = np.asarray(log if rows is None else log[rows])[shared]
        nlog = int(pr["log"].max()) + 1
        size = np.bincount(pr["log"], minlength=nlog)
        first = np.full(nlog, -1, "i8")
        first[pr["log"][::-1]] = pr["proc"][::-1]  # each log's first process
        log = np.clip(log, 0, nlog - 1)
        proc[shared] = np.where(size[log] == 1, first[log], -1)
    own = proc >= 0
    return np.bincount(np.clip(proc[own], 0, max(n - 1, 0)), weights=w[own], minlength=n)[:n].astype("f8")


def top_procs(weights: np.ndarray, k: int) -> list[int]:
    order = np.argsort(-weights, kind="stable")[:k]
    return [int(p) for p in order if weights[p] > 0]
