"""The JSON report contract (schema ``iodiag.report/1``): ``render_json`` only formats.

The report dict is built once, by ``iodiag.analyzers.report.build_report`` (imported here too, for the callers
that take both from one place).
"""

from __future__ import annotations

import json
import math
from typing import Any

from ..analyzers.report import SCHEMA, build_report, iso, job_dict, processes_list, program_name

__all__ = ["SCHEMA", "build_report", "iso", "job_dict", "processes_list", "program_name", "render_json"]


def _default(o: Any) -> Any:
    import numpy as np

    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, (set, tuple)):
        return list(o)
    raise TypeError(f"not JSON serializable: {type(o).__name__}")


def _clean(o: Any) -> Any:
    """NaN and infinities are not JSON: they become null."""
    if isinstance(o, float):
        return o if math.isfinite(o) else None
    if isinstance(o, dict):
        return {k: _clean(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_clean(v) for v in o]
    return o


def render_json(report: dict[str, Any], *, indent: int | None = 2) -> str:
    return json.dumps(_clean(report), indent=indent, default=_default, allow_nan=False)
