"""The Finding contract shared by detectors, the recommender and reports."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from .config import Severity

SEVERITIES = ("high", "medium", "low", "info")

@dataclass(frozen=True)
class FindingSpec:
    """Everything one finding id is: declared once, in its detector module (``SPECS`` of a module in
    ``analyzers/detectors/``), collected by ``analyzers.detectors.SPECS``.  ``recommend/`` reads the specs (the
    advice function of each id is registered against its spec in recommend/rules.py); the docs table in
    docs/detectors.md is generated from them.  A completeness test (tests/test_finding_specs.py) checks every
    spec has all its parts.

    - ``id``: the stable vocabulary (never rename one); ``seq``: its place in that vocabulary (the order of
      ``FINDING_IDS``: site dataset columns, the ``--mute`` hint); a new id takes the next number, none is reused.
    - ``detect``: the pure function (JobProfile, Config) -> list[Finding] that ``diagnose`` runs; None for a
      finding over several profiles (weak-scaling-loss: ``compare_scaling``), named in ``runs_over``.
    - ``fires``, ``cost``: the docs table's "fires when" and "cost" cells (``cost`` is the cost model: what
      ``est_cost_s`` measures); ``notes``: further docs rows (details of the detection or of the advice).
    - ``config_keys``: the Config keys (``section.key``) the detector reads.
    - ``admin_action``: what a site admin can do about the finding across the site (site report).
    - ``outside_io``: ``est_cost_s`` is time outside the I/O calls (counted on top of the I/O in the explained total).
    """

    id: str
    seq: int
    detect: Callable[..., list["Finding"]] | None
    fires: str
    cost: str
    admin_action: str
    config_keys: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    runs_over: str = ""
    # the cost is time outside the I/O calls (idle Dask threads, a task's excess, time lost scaling out): the
    # report's explained total adds it to the findings' union over the I/O (analyzers.timemodel.explained_union)
    outside_io: bool = False


@dataclass
class Finding:
    """One diagnosed problem, with the numbers that prove it and what to change."""

    id: str
    severity: str
    title: str
    evidence: dict[str, Any]
    recommendation: str = ""  # what to change: filled by recommend/ (rules.advise), never by a detector
    files: list[str] = field(default_factory=list)
    processes: list[int] = field(default_factory=list)
    est_cost_s: float | None = None  # estimated I/O seconds this problem costs
    cost_share: float | None = None  # est_cost_s / total I/O time of the job
    # what a detector measured that the advice needs but the evidence does not show (a path, a kind of
    # program, a computed plan's inputs): read by recommend/rules.py, never serialised
    facts: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ValueError(f"severity {self.severity!r} not in {SEVERITIES}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "severity": self.severity,
            "title": self.title,
            "evidence": self.evidence,
            "files": list(self.files),
            "processes": [int(p) for p in self.processes],
            "est_cost_s": self.est_cost_s,
            "cost_share": self.cost_share,
            "recommendation": self.recommendation,
        }


def severity_from_share(share: float | None, thresholds: Severity) -> str:
    """Severity from the share of the run a problem costs, on the Config's ``[severity]`` thresholds (the one
    source of them: no defaults here)."""
    if share is None:
        return "info"
    if share >= thresholds.high:
        return "high"
    if share >= thresholds.medium:
        return "medium"
    if share >= thresholds.low:
        return "low"
    return "info"


def rank_findings(findings: list[Finding]) -> list[Finding]:
    """Order findings by severity, then by estimated cost (largest first)."""
    order = {s: i for i, s in enumerate(SEVERITIES)}
    return sorted(findings, key=lambda f: (order[f.severity], -(f.est_cost_s or 0.0), f.id))
