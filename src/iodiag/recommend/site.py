"""What a site config (``[site]`` of the Config, written by ``iodiag site defaults``) adds to a user's findings.

The one place site advice meets a report: ``apply_site_advice`` appends the site's text for a finding id to
that finding's recommendation ("… Site advice (NAME): …").  Site thresholds need nothing here: they are ordinary Config
keys the detectors already read.
"""

from __future__ import annotations

from typing import Sequence

from ..analyzers.detectors import SPEC_BY_ID
from ..config import Config
from ..findings import Finding


def site_advice(finding_id: str, config: Config) -> str | None:
    """The site's advice for a finding id, prefixed with the site's name; None when the site says nothing."""
    text = config.site.advice.get(finding_id)
    if not text:
        return None
    who = f"Site advice ({config.site.name})" if config.site.name else "Site advice"
    return f"{who}: {text.strip()}"


def in_scope(profile, scope: str | None) -> bool:
    """Whether a job is one a site advice of ``scope`` (``[site.advice_scope]``) is for: serial-read, reads through
    POSIX without MPI-IO; serial-write, writes the same way; no scope (advice written by hand): every job.  The
    same test as the site report's (site/sweeps.py ``scope_mask``), on the job's counters."""
    if not scope or profile is None:
        return True
    import numpy as np

    if profile.module("MPI-IO") is not None:
        return False
    t = profile.module("POSIX")
    if t is None:
        return False
    col = {"serial-read": "POSIX_READS", "serial-write": "POSIX_WRITES"}.get(scope)
    return True if col is None else float(np.clip(t[col], 0, None).sum()) > 0


def apply_site_advice(findings: Sequence[Finding], config: Config, profile=None) -> list[Finding]:
    """The findings with the site's advice appended to their recommendations, as its own sentence (in place;
    returned for chaining); with ``profile``, only where the advice's scope matches the job."""
    for f in findings:
        extra = site_advice(f.id, config)
        if not extra or extra in f.recommendation or not in_scope(profile, config.site.advice_scope.get(f.id)):
            continue
        base = f.recommendation.rstrip()
        if base and not base.endswith((".", "!", "?", ")")):
            base += "."
        f.recommendation = f"{base} {extra}" if base else extra
    return list(findings)


def admin_action(finding_id: str) -> str:
    """What an admin can change about a finding across the site (the site report's recommendation): the
    ``admin_action`` of its spec; a site config's advice replaces it."""
    spec = SPEC_BY_ID.get(finding_id)
    return spec.admin_action if spec is not None else "See the finding's recommendation in users' reports."
