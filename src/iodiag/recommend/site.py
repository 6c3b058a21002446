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


def apply_site_advice(findings: Sequence[Finding], config: Config) -> list[Finding]:
    """The findings with the site's advice appended to their recommendations (in place; returned for chaining)."""
    for f in findings:
        extra = site_advice(f.id, config)
        if extra and extra not in f.recommendation:
            f.recommendation = f"{f.recommendation.rstrip()} {extra}" if f.recommendation else extra
    return list(findings)


def admin_action(finding_id: str) -> str:
    """What an admin can change about a finding across the site (the site report's recommendation): the
    ``admin_action`` of its spec; a site config's advice replaces it."""
    spec = SPEC_BY_ID.get(finding_id)
    return spec.admin_action if spec is not None else "See the finding's recommendation in users' reports."
