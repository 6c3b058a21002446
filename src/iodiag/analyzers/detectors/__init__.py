"""Detectors: small pure functions JobProfile + Config -> list[Finding].

``diagnose`` runs every registered detector and returns ranked findings.
"""

from __future__ import annotations

from typing import Callable

from ...config import Config
from ...findings import Finding, rank_findings
from ...profile import JobProfile

Detector = Callable[[JobProfile, Config], list[Finding]]
DETECTORS: list[Detector] = []


def diagnose(profile: JobProfile, config: Config | None = None) -> list[Finding]:
    cfg = config or Config()
    out: list[Finding] = []
    for det in DETECTORS:
        out.extend(det(profile, cfg))
    muted = set(cfg.report.mute)
    return rank_findings([f for f in out if f.id not in muted])
