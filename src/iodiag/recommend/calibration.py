"""The trained model's predicted gains, calibrated on (job, change) pairs measured here and never used to train it.

``data/calibration.csv`` holds pairs measured by ``scripts/recommender_calibrate.py``: an iodiag conversion or
read at an array scale absent from the training table, run with a "before" setting and with the model's
recommendation, interleaved; its first line says where, when and under which load.  Each row has the model's raw
prediction (the regressor's ratio of relative performances, trained on the conversions' write phase and the
reads' pattern time) and the measured speedups of the whole command's wall time, the workload's own section and
the trained phase.

What a user gets from a change is the whole run's time, so the gain shown is calibrated against the **wall time of
the command**: ``log(measured) = slope * log(raw prediction)`` (least squares through the origin: no change, no
gain), and the band is the calibrated value times ``exp(±q)``, ``q`` the smallest half-width that holds the
measured speedup of at least ``COVERAGE`` of the pairs.  Whether that band can be believed is checked without
leaking a pair: each pair in turn is held out, slope and ``q`` are fitted on the others, and the held-out pair's
measured speedup is inside its band or not (``evaluate``).  The band is shown only when it held for at least
``COVERAGE`` of the held-out pairs; otherwise the point value is shown without one, saying so.

Pure apart from reading the CSV once (cached); nothing prints.
"""

from __future__ import annotations

from ..units import fmt_pct

import csv
import math
from dataclasses import replace
from functools import lru_cache
from pathlib import Path
from typing import Any, Sequence

from .recommendation import Recommendation

CALIBRATION_TABLE = Path(__file__).with_name("data") / "calibration.csv"
COVERAGE = 0.8  # the band must hold on at least this share of held-out measured pairs to be shown
MIN_PAIRS = 8  # fewer measured pairs of a workload: no calibration for it


def read_pairs(path: str | Path | None = None) -> tuple[list[dict[str, Any]], str]:
    """The measured pairs (skipped ones left out) and the table's provenance line."""
    p = Path(path) if path is not None else CALIBRATION_TABLE
    try:
        text = p.read_text().splitlines()
    except OSError:
        return [], ""
    head = text[0].lstrip("# ").strip() if text and text[0].startswith("#") else ""
    rows = []
    for r in csv.DictReader([t for t in text if not t.startswith("#")]):
        if r.get("skipped") or not r.get("predicted"):
            continue
        try:
            rows.append({**r, "predicted": float(r["predicted"]),
                         "measured": float(r["wall_before_s"]) / float(r["wall_after_s"]),
                         "measured_trained_phase": float(r["model_before_s"]) / float(r["model_after_s"])})
        except (TypeError, ValueError, ZeroDivisionError):
            continue
    return rows, head


def fit(pairs: Sequence[dict[str, Any]]) -> tuple[float, float]:
    """(slope, q): ``log m = slope * log p`` through the origin, and the half-width (in log) that holds
    ``COVERAGE`` of the pairs' measured speedups."""
    xs = [math.log(r["predicted"]) for r in pairs]
    ys = [math.log(r["measured"]) for r in pairs]
    sxx = sum(x * x for x in xs)
    slope = sum(x * y for x, y in zip(xs, ys)) / sxx if sxx > 0 else 0.0
    res = sorted(abs(y - slope * x) for x, y in zip(xs, ys))
    # the split-conformal rank: the ceil(COVERAGE * (n + 1))-th smallest residual, so that a new pair falls inside
    # with probability at least COVERAGE (an in-sample quantile is too narrow for pairs it has not seen)
    k = min(len(res) - 1, max(0, math.ceil(COVERAGE * (len(res) + 1)) - 1))
    return slope, res[k] if res else float("inf")


def held_out(pairs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each pair judged by the calibration fitted on the others: its band and whether it held."""
    out = []
    for i, r in enumerate(pairs):
        slope, q = fit([p for j, p in enumerate(pairs) if j != i])
        c = math.exp(slope * math.log(r["predicted"]))
        lo, hi = c * math.exp(-q), c * math.exp(q)
        out.append({**r, "calibrated": c, "low": lo, "high": hi, "held": lo <= r["measured"] <= hi})
    return out


@lru_cache(maxsize=4)
def _state(path: str | None = None) -> dict[str, Any]:
    pairs, head = read_pairs(path)
    by: dict[str, Any] = {"provenance": head}
    for wl in sorted({r["workload"] for r in pairs}):
        mine = [r for r in pairs if r["workload"] == wl]
        if len(mine) < MIN_PAIRS:
            by[wl] = {"pairs": len(mine)}
            continue
        slope, q = fit(mine)
        judged = held_out(mine)
        cov = sum(j["held"] for j in judged) / len(judged)
        by[wl] = {"pairs": len(mine), "slope": slope, "q": q, "coverage": cov, "judged": judged}
    return by


def evaluate(path: str | Path | None = None) -> dict[str, Any]:
    """Per workload: the measured pairs, the calibration and how often its band held on held-out pairs."""
    return _state(None if path is None else str(path))


def calibrated(rec: Recommendation, path: str | None = None) -> Recommendation:
    """The tree's recommendation with its gain calibrated (``gain`` "predicted", with its band) when the band held
    on ``COVERAGE`` of the held-out measured pairs of its workload; otherwise "unknown" (too few pairs, or a band
    that did not hold: then the calibrated value is only named in the notes)."""
    if rec.expected_speedup is None or rec.abstain is not None:
        return replace(rec, gain="unknown")
    wl = "convert" if "workers" in rec.settings or "chunk_mb" in rec.settings else "read"
    st = _state(path).get(wl) or {}
    if "slope" not in st:
        return replace(rec, gain="unknown", expected_speedup=None, speedup_low=None, speedup_high=None,
                       notes=rec.notes + (f"the model's raw ratio {rec.expected_speedup:.1f}x is not shown: too few "
                                          f"measured {wl} pairs ({st.get('pairs', 0)}) to calibrate it",))
    raw = rec.expected_speedup
    c = math.exp(st["slope"] * math.log(raw))
    note = (f"predicted for the whole run's wall time: the model's raw {raw:.1f}x (its training phase) calibrated "
            f"on {st['pairs']} measured {wl} pairs it never saw; the band held for {fmt_pct(st['coverage'])} of them "
            "held out one at a time")
    if st["coverage"] >= COVERAGE:
        return replace(rec, gain="predicted", expected_speedup=round(c, 3), speedup_low=round(c * math.exp(-st["q"]), 3),
                       speedup_high=round(c * math.exp(st["q"]), 3), notes=rec.notes + (note,))
    # a band that did not hold is no band, and a point without one is no prediction: the gain is unknown (measured
    # here: a 1-step conversion calibrated to 1.7x that verify measured at 4.64x, docs/recommender-verify.md)
    return replace(rec, gain="unknown", expected_speedup=None, speedup_low=None, speedup_high=None,
                   notes=rec.notes + (note + f"; under {fmt_pct(COVERAGE)}, so neither the band nor the calibrated "
                                             f"{c:.1f}x is shown as a gain: measure it with iodiag verify",))


__all__ = ["CALIBRATION_TABLE", "COVERAGE", "read_pairs", "fit", "held_out", "evaluate", "calibrated"]
