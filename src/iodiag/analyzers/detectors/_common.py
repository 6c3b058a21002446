"""Helpers shared by detectors: severity from cost share, top files and processes."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...config import Config
from ...findings import Finding, severity_from_share
from ...profile import JobProfile
from ..metrics import paths_of_ids


def finding(cfg: Config, id: str, title: str, *, cost_s: float | None, total_s: float | None,
            evidence: dict[str, Any], recommendation: str, files: list[str] | None = None,
            processes: list[int] | None = None, severity: str | None = None) -> Finding:
    """A Finding whose severity follows its estimated share of I/O time (unless given)."""
    share = None
    if cost_s is not None and total_s:
        share = float(min(cost_s / total_s, 1.0))
    sev = severity or severity_from_share(share, high=cfg.severity.high, medium=cfg.severity.medium,
                                          low=cfg.severity.low)
    if severity is None and cost_s is not None and cost_s < cfg.severity.min_cost_s and sev in ("high", "medium"):
        sev = "low"
    ev = {k: _plain(v) for k, v in evidence.items()}
    return Finding(id=id, severity=sev, title=title, evidence=ev, recommendation=recommendation,
                   files=files or [], processes=[int(p) for p in (processes or [])],
                   est_cost_s=None if cost_s is None else round(float(cost_s), 6),
                   cost_share=None if share is None else round(share, 4))


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
    order = np.argsort(-weights, kind="stable")[:k]
    order = order[weights[order] > 0]
    ids = file_ids[order]
    return [p if p is not None else f"<unnamed {int(f):016x}>" for f, p in zip(ids.tolist(), paths_of_ids(profile, ids))]


def top_procs(weights: np.ndarray, k: int) -> list[int]:
    order = np.argsort(-weights, kind="stable")[:k]
    return [int(p) for p in order if weights[p] > 0]


def pct(x: float) -> str:
    if 0.995 <= x < 1:
        return f"{100 * x:.3f}%"
    return f"{100 * x:.0f}%" if x >= 0.01 or x == 0 else f"{100 * x:.2f}%"
