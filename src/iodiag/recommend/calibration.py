"""The trained model's predicted gains, calibrated on (job, change) pairs measured here and never used to train it.

``data/calibration.csv`` holds pairs measured by ``scripts/recommender_calibrate.py``: an iodiag conversion or
read at an array scale absent from the training table, run with a "before" setting and with the model's
recommendation, interleaved; its ``#`` lines (one per batch of runs) say where, when and under which load.
Each row has the model's raw prediction (the regressor's ratio of relative performances, trained on the
conversions' write phase and the reads' pattern time), the measured times of both sides (the whole command's
wall time, the workload's own section, the trained phase) and the load.

What a user gets from a change is the whole run's time, so the gain shown is for the **wall time of the command**,
and the model's raw ratio only speaks for the phase it was trained on.  The prediction is Amdahl's, with the job's
own measured times: ``A = W / (W - P + P / raw)``, ``W`` the job's wall time and ``P`` the time of its trained phase
(the conversion's write phase or the read's pattern time: from the workload's results record in the job folder,
else estimated from the profile: ``recommend.features.estimated_phase``).  No fitted slope: the residual of a pair is
``log(measured) - log(A)``, and the band is ``A`` times ``exp(±q)``, ``q`` the split-conformal half-width: the
``ceil(COVERAGE (n + 1))``-th smallest absolute residual of the ``n`` pairs.  Whether that band can be believed is
checked three ways without leaking a pair (``evaluate``): *leave one out* (each pair in turn held out, ``q`` taken
from the others; with nothing fitted but ``q`` this holds for ``ceil(COVERAGE n) / n`` of ``n`` pairs by
construction, so it says how wide the band must be, not that it holds), *by array scale* (each scale's pairs
judged by the band from the other scales, as the training is validated), and *forward* (the pairs of each later
batch of runs judged by the band taken from the earlier batches alone: pairs that did not exist when the band was
made).  The band is shown only when all three held for at least ``COVERAGE`` of their pairs; otherwise the gain is
"unknown — measure it", the prediction named in the notes.

(The first form, ``log(measured) = slope * log(raw)`` with no phase, held for 75 % of the held-out conversions and
put iodiag's own 1-step conversion at 1.7x where verify measured 4.64x: it ignored how much of the run the trained
phase is.  ``evaluate`` still reports its held-out coverage beside the new form's, for comparison.)

Pure apart from reading the CSV once (cached); nothing prints.
"""

from __future__ import annotations

from ..units import fmt_pct

import csv
import math
from dataclasses import replace
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping, Sequence

from .recommendation import Recommendation

CALIBRATION_TABLE = Path(__file__).with_name("data") / "calibration.csv"
COVERAGE = 0.8  # the band must hold on at least this share of held-out measured pairs to be shown
MIN_PAIRS = 8  # fewer measured pairs of a workload: no calibration for it


def amdahl(wall_s: float, phase_s: float, raw: float) -> float:
    """The whole run's speedup when a phase of ``phase_s`` of ``wall_s`` seconds gets ``raw`` times faster and the
    rest stays (the phase clipped to the run)."""
    w = float(wall_s)
    p = min(max(float(phase_s), 0.0), w)
    return w / (w - p + p / float(raw))


def read_pairs(path: str | Path | None = None) -> tuple[list[dict[str, Any]], str]:
    """The measured pairs (skipped ones left out) and the table's provenance (its ``#`` lines, one per batch)."""
    p = Path(path) if path is not None else CALIBRATION_TABLE
    try:
        text = p.read_text().splitlines()
    except OSError:
        return [], ""
    head = "; ".join(t.lstrip("# ").strip() for t in text if t.startswith("#"))
    # each "#" line opens a batch of runs (measured later than the one before): the pair's batch is its number
    batch_of, b, n = [], 0, 0
    for t in text:
        if t.startswith("#"):
            b += 1
        elif n == 0:
            n = 1  # the header row
        else:
            batch_of.append(max(b, 1))
    rows = []
    for r, batch in zip(csv.DictReader([t for t in text if not t.startswith("#")]), batch_of):
        if r.get("skipped") or not r.get("predicted"):
            continue
        try:
            w, ph, raw = float(r["wall_before_s"]), float(r["model_before_s"]), float(r["predicted"])
            rows.append({**r, "batch": batch, "predicted": raw, "wall_s": w, "phase_s": ph,
                         "amdahl": amdahl(w, ph, raw),
                         "measured": w / float(r["wall_after_s"]),
                         "measured_trained_phase": ph / float(r["model_after_s"]),
                         "load1": float(r["load1"]) if r.get("load1") else None})
        except (TypeError, ValueError, ZeroDivisionError):
            continue
    return rows, head


def _conformal(res: Sequence[float]) -> float:
    """The split-conformal half-width: the ceil(COVERAGE * (n + 1))-th smallest absolute residual, so that a new
    pair falls inside with probability at least COVERAGE (an in-sample quantile is too narrow for pairs it has not
    seen)."""
    r = sorted(abs(x) for x in res)
    if not r:
        return float("inf")
    return r[min(len(r) - 1, max(0, math.ceil(COVERAGE * (len(r) + 1)) - 1))]


def residual(pair: Mapping[str, Any]) -> float:
    """log(measured) - log(A): how far the whole run's measured speedup is from the Amdahl prediction."""
    return math.log(pair["measured"]) - math.log(pair["amdahl"])


def fit(pairs: Sequence[Mapping[str, Any]]) -> float:
    """``q``: the half-width (in log) of the band around the Amdahl prediction, from these pairs."""
    return _conformal([residual(r) for r in pairs])


def held_out(pairs: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Each pair judged by the band taken from the others: its band and whether it held."""
    return _judged_by(pairs, lambda r: [p for p in pairs if p is not r], min_pairs=0)


def _judged_by(pairs: Sequence[Mapping[str, Any]], band_from, min_pairs: int = MIN_PAIRS) -> list[dict[str, Any]]:
    """Each pair judged by the band fitted on ``band_from(pair)`` (the pairs it may be judged by); pairs with
    fewer than ``min_pairs`` of those are left out."""
    out = []
    for r in pairs:
        others = band_from(r)
        if len(others) < min_pairs:
            continue
        q = fit(others)
        lo, hi = r["amdahl"] * math.exp(-q), r["amdahl"] * math.exp(q)
        out.append({**r, "low": lo, "high": hi, "held": lo <= r["measured"] <= hi})
    return out


def forward(pairs: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Each pair of a later batch judged by the band taken from the earlier batches only: the pairs that were not
    measured when the band was first made (a check leave-one-out cannot give, see ``_state``)."""
    return _judged_by(pairs, lambda r: [p for p in pairs if p["batch"] < r["batch"]])


def by_scale(pairs: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Each pair judged by the band taken from the pairs at the other array scales only (as the training is
    validated: leave one array scale out)."""
    return _judged_by(pairs, lambda r: [p for p in pairs if p["shape"] != r["shape"]])


def slope_form_coverage(pairs: Sequence[Mapping[str, Any]]) -> float:
    """The held-out coverage of the first form (``log m = slope * log raw`` through the origin, no phase), for
    comparison only: nothing shown uses it."""
    held = 0
    for i, r in enumerate(pairs):
        rest = [p for j, p in enumerate(pairs) if j != i]
        xs = [math.log(p["predicted"]) for p in rest]
        ys = [math.log(p["measured"]) for p in rest]
        sxx = sum(x * x for x in xs)
        slope = sum(x * y for x, y in zip(xs, ys)) / sxx if sxx > 0 else 0.0
        q = _conformal([y - slope * x for x, y in zip(xs, ys)])
        held += abs(math.log(r["measured"]) - slope * math.log(r["predicted"])) <= q
    return held / len(pairs) if pairs else 0.0


@lru_cache(maxsize=4)
def _state(path: str | None = None) -> dict[str, Any]:
    pairs, head = read_pairs(path)
    by: dict[str, Any] = {"provenance": head}
    for wl in sorted({r["workload"] for r in pairs}):
        mine = [r for r in pairs if r["workload"] == wl]
        if len(mine) < MIN_PAIRS:
            by[wl] = {"pairs": len(mine)}
            continue
        judged = held_out(mine)
        loo = sum(j["held"] for j in judged) / len(judged)
        later = forward(mine)
        fwd = sum(j["held"] for j in later) / len(later) if later else None
        scales = by_scale(mine)
        sc = sum(j["held"] for j in scales) / len(scales) if scales else None
        loads = [r["load1"] for r in mine if r.get("load1") is not None]
        # Leave-one-out of a band with no fitted parameter holds for ceil(COVERAGE n) / n of n distinct residuals
        # by construction (>= COVERAGE): it says how wide the band must be, not that it holds.  What can fail is
        # the band taken from other array scales, or from earlier batches on pairs measured later: the coverage
        # that gates the band is the lowest of the three.
        by[wl] = {"pairs": len(mine), "q": fit(mine), "loo_coverage": loo, "judged": judged,
                  "scale_coverage": sc, "by_scale": scales, "forward_coverage": fwd, "forward": later,
                  "coverage": min(c for c in (loo, sc, fwd) if c is not None),
                  "slope_form_coverage": slope_form_coverage(mine),
                  "load1": (min(loads), max(loads)) if loads else None}
    return by


def evaluate(path: str | Path | None = None) -> dict[str, Any]:
    """Per workload: the measured pairs, the band's half-width and how often it held on held-out pairs."""
    return _state(None if path is None else str(path))


def workload_of(rec: Recommendation) -> str:
    return "convert" if "workers" in rec.settings or "chunk_mb" in rec.settings else "read"


def calibrated(rec: Recommendation, path: str | None = None, *, wall_s: float | None = None,
               phase_s: float | None = None, phase_from: str = "") -> Recommendation:
    """The tree's recommendation with its gain for the whole run: ``gain`` "predicted", ``A`` (Amdahl with the
    job's wall time ``wall_s`` and trained-phase time ``phase_s``, found as ``phase_from`` says) with its band,
    when the band held on ``COVERAGE`` of the held-out measured pairs of its workload; otherwise "unknown" (too few
    pairs, a band that did not hold, or the job's times not known: the notes say which, and name ``A``)."""
    if rec.expected_speedup is None or rec.abstain is not None:
        return replace(rec, gain="unknown")
    wl = workload_of(rec)
    st = _state(path).get(wl) or {}
    raw = rec.expected_speedup
    unknown = dict(gain="unknown", expected_speedup=None, speedup_low=None, speedup_high=None)
    if "q" not in st:
        return replace(rec, **unknown, notes=rec.notes + (
            f"the model's raw ratio {raw:.1f}x (its training phase) is not shown: too few measured {wl} pairs "
            f"({st.get('pairs', 0)}) to validate a band for the whole run",))
    if not wall_s or wall_s <= 0 or phase_s is None or phase_s <= 0:
        return replace(rec, **unknown, notes=rec.notes + (
            f"the model's raw ratio {raw:.1f}x is for its training phase "
            f"({'the write phase' if wl == 'convert' else 'the read pattern'}); "
            "the job's wall time or that phase's time is not known, so no gain for the whole run is shown: "
            "measure it with iodiag verify",))
    a = amdahl(wall_s, phase_s, raw)
    p = min(phase_s, wall_s)
    note = (f"predicted for the whole run's wall time: the model's raw {raw:.1f}x on the "
            f"{'write phase' if wl == 'convert' else 'read pattern'} ({p:.3g} s of the run's {wall_s:.3g} s, "
            f"{phase_from or 'measured'}) gives {a:.2f}x by Amdahl; its band (×/÷ {math.exp(st['q']):.2f}) held for "
            f"{fmt_pct(st['coverage'])} of the {wl} pairs measured here that the model never saw, held out "
            "(iodiag recommend evaluate)")
    if st["coverage"] >= COVERAGE:
        return replace(rec, gain="predicted", expected_speedup=round(a, 3),
                       speedup_low=round(a * math.exp(-st["q"]), 3), speedup_high=round(a * math.exp(st["q"]), 3),
                       notes=rec.notes + (note,))
    # a band that did not hold is no band, and a point without one is no prediction: the gain is unknown
    return replace(rec, **unknown, notes=rec.notes + (
        note + f"; under {fmt_pct(COVERAGE)}, so neither the band nor the {a:.1f}x is shown as a gain: measure it "
               "with iodiag verify",))


__all__ = ["CALIBRATION_TABLE", "COVERAGE", "amdahl", "read_pairs", "residual", "fit", "held_out", "by_scale",
           "forward", "slope_form_coverage", "evaluate", "workload_of", "calibrated"]
