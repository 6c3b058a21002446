"""Detectors: small pure functions JobProfile + Config -> list[Finding], one ``FindingSpec`` per finding id.

Each detector module declares ``SPECS`` (its findings' ``FindingSpec``s: id, detector, cost model, config keys,
docs text, site admin action); this package collects them, in the order of the stable vocabulary (``seq``).
Adding a detector is one new module here with a ``SPECS`` tuple (plus its advice in recommend/rules.py, which
the completeness test asks for, and its tests).  ``diagnose`` runs every registered detector and returns ranked
findings.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Callable

from ...config import Config
from ...findings import Finding, FindingSpec, rank_findings
from ...profile import JobProfile

Detector = Callable[[JobProfile, Config], list[Finding]]


def _collect() -> tuple[FindingSpec, ...]:
    """The ``SPECS`` of every public module of this package, by ``seq``; an id or seq declared twice is an error."""
    specs: list[FindingSpec] = []
    for mod in sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_")):
        specs.extend(getattr(importlib.import_module(f"{__name__}.{mod}"), "SPECS", ()))
    for what in ("id", "seq"):
        seen = [getattr(s, what) for s in specs]
        dup = sorted({x for x in seen if seen.count(x) > 1})
        if dup:
            raise RuntimeError(f"finding spec {what} declared twice: {dup}")
    return tuple(sorted(specs, key=lambda s: s.seq))


SPECS: tuple[FindingSpec, ...] = _collect()
SPEC_BY_ID: dict[str, FindingSpec] = {s.id: s for s in SPECS}
# The stable vocabulary of finding ids (add freely; never rename), in the order of ``seq``.
FINDING_IDS: tuple[str, ...] = tuple(s.id for s in SPECS)
# what ``diagnose`` runs (a list, so a test can put its own detectors in)
DETECTORS: list[Detector] = [s.detect for s in SPECS if s.detect is not None]


def diagnose(profile: JobProfile, config: Config | None = None) -> list[Finding]:
    cfg = config or Config()
    out: list[Finding] = []
    for det in DETECTORS:
        out.extend(det(profile, cfg))
    muted = set(cfg.report.mute)
    return rank_findings([f for f in out if f.id not in muted])
