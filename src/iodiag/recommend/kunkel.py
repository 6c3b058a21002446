"""Default-vs-best tables (Kunkel's comparison of single defaults against per-scenario choices).

Input is a tidy table of measurements: one row per (scenario, setting) with the time it took (lower is better).
A *scenario* is one situation a default must serve (a workload at one scale, an access pattern on one file layout);
a *setting* is one candidate configuration (a chunk shape, a stripe count, a hint set).  Relative performance of a
setting in a scenario is ``best time in that scenario / its time``: 1.0 for the best setting, 0.5 for one that takes
twice as long.

For each setting taken as a single site-wide default the table gives how often it is the best and the worst, and the
arithmetic, geometric and harmonic means of its relative performance over the scenarios.  Means are weighted when
the scenarios carry weights (e.g. a site's workload mix: core-hours spent in each scenario), so the default chosen
is the one that serves the jobs the site actually runs.  A *policy* (one setting chosen per scenario, such as a
decision tree's choice) is scored the same way, and ``regret_share`` says how much of the oracle's gain over the
best single default the policy leaves on the table (0 = as good as the oracle, 1 = no better than the default).

Everything here is pure: NumPy in, dataclasses out; nothing prints.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from ..errors import UsageError

MEANS = ("arithmetic", "geometric", "harmonic")


@dataclass(frozen=True)
class Score:
    """How one single default (or one policy) performs over the scenarios."""

    name: str
    scenarios: int
    best_share: float  # fraction of (weighted) scenarios where it is the best
    worst_share: float  # fraction where it is the worst
    arithmetic: float  # weighted arithmetic mean of relative performance (best = 1)
    geometric: float
    harmonic: float

    def mean(self, kind: str) -> float:
        return float(getattr(self, kind))


@dataclass(frozen=True)
class DefaultsTable:
    """Every single default scored, the best default per mean, and the relative-performance matrix behind them."""

    scenarios: tuple[str, ...]
    settings: tuple[str, ...]
    weights: np.ndarray  # per scenario, sums to 1
    rel: np.ndarray  # scenarios x settings relative performance, NaN where not measured
    defaults: tuple[Score, ...]  # one per setting, in ``settings`` order
    oracle: Score  # the best setting in every scenario (1.0 everywhere)

    def best_default(self, mean: str = "harmonic") -> Score:
        """The single default with the highest ``mean`` (ties: the earlier setting)."""
        if mean not in MEANS:
            raise UsageError(f"unknown mean {mean!r}; use one of {', '.join(MEANS)}")
        return max(self.defaults, key=lambda s: (s.mean(mean), -self.settings.index(s.name)))

    def score_policy(self, name: str, choice: Mapping[str, str]) -> Score:
        """Score a policy that picks ``choice[scenario]`` in each scenario."""
        idx = {s: i for i, s in enumerate(self.settings)}
        cols = []
        for sc in self.scenarios:
            pick = choice.get(sc)
            if pick not in idx:
                raise UsageError(f"the policy {name!r} picks {pick!r} for scenario {sc!r}, which was not measured",
                                 hint="score policies only on settings that the measurements cover")
            cols.append(idx[pick])
        vals = self.rel[np.arange(len(self.scenarios)), np.asarray(cols, dtype=np.intp)]
        return _score(name, vals, self.weights, self.rel)

    def regret_share(self, policy: Score, mean: str = "harmonic") -> float | None:
        """(oracle − policy) / (oracle − best single default) for ``mean``; None when no default loses anything."""
        base = self.best_default(mean).mean(mean)
        gain = self.oracle.mean(mean) - base
        if gain <= 1e-12:
            return None
        return float((self.oracle.mean(mean) - policy.mean(mean)) / gain)


def _score(name: str, vals: np.ndarray, w: np.ndarray, rel: np.ndarray) -> Score:
    ok = np.isfinite(vals)
    v, ww = vals[ok], w[ok]
    if not len(v):
        nan = float("nan")
        return Score(name, 0, nan, nan, nan, nan, nan)
    ww = ww / ww.sum()
    best = np.nanmax(rel[ok], axis=1)
    worst = np.nanmin(rel[ok], axis=1)
    tol = 1e-9
    return Score(
        name=name,
        scenarios=int(ok.sum()),
        best_share=float(ww[v >= best - tol].sum()),
        worst_share=float(ww[(v <= worst + tol) & (best - worst > tol)].sum()),
        arithmetic=float(np.sum(ww * v)),
        geometric=float(np.exp(np.sum(ww * np.log(v)))),
        harmonic=float(1.0 / np.sum(ww / v)),
    )


def defaults_table(scenario: Sequence[str], setting: Sequence[str], time_s: Sequence[float], *,
                   weights: Mapping[str, float] | None = None, complete_only: bool = True) -> DefaultsTable:
    """Build the default-vs-best table from measurements (one row per run; repeated runs are averaged).

    ``weights`` maps scenario -> weight (e.g. core-hours of the site's jobs in that scenario); scenarios without a
    weight get 0 and drop out.  With ``complete_only`` scenarios where some setting was not measured are dropped, so
    every default is judged on the same scenarios.
    """
    sc = np.asarray(list(scenario), dtype=object)
    st = np.asarray(list(setting), dtype=object)
    t = np.asarray(list(time_s), dtype="f8")
    if not (len(sc) == len(st) == len(t)):
        raise UsageError("scenario, setting and time columns have different lengths")
    good = np.isfinite(t) & (t > 0)
    sc, st, t = sc[good], st[good], t[good]
    if not len(t):
        raise UsageError("no measurement with a positive time", hint="check that the sweep's runs succeeded")
    scen = sorted(set(sc.tolist()), key=str)
    sets = sorted(set(st.tolist()), key=str)
    si = {s: i for i, s in enumerate(scen)}
    ti = {s: i for i, s in enumerate(sets)}
    rows = np.fromiter((si[s] for s in sc), dtype=np.intp, count=len(sc))
    cols = np.fromiter((ti[s] for s in st), dtype=np.intp, count=len(st))
    tot = np.zeros((len(scen), len(sets)))
    cnt = np.zeros((len(scen), len(sets)))
    np.add.at(tot, (rows, cols), t)
    np.add.at(cnt, (rows, cols), 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_t = np.where(cnt > 0, tot / np.maximum(cnt, 1), np.nan)
    w = np.ones(len(scen)) if weights is None else np.asarray([float(weights.get(s, 0.0)) for s in scen])
    if np.any(w < 0) or not np.all(np.isfinite(w)):
        raise UsageError("scenario weights must be finite and non-negative")
    keep = w > 0
    if complete_only:
        keep &= np.all(np.isfinite(mean_t), axis=1)
    if not keep.any():
        raise UsageError("no scenario has every setting measured and a positive weight",
                         hint="measure every setting in at least one scenario, or weight the scenarios you measured")
    scen = [s for s, k in zip(scen, keep) if k]
    mean_t, w = mean_t[keep], w[keep]
    rel = np.nanmin(mean_t, axis=1, keepdims=True) / mean_t
    w = w / w.sum()
    defaults = tuple(_score(name, rel[:, j], w, rel) for j, name in enumerate(sets))
    oracle = _score("best per scenario", np.nanmax(rel, axis=1), w, rel)
    return DefaultsTable(tuple(scen), tuple(sets), w, rel, defaults, oracle)
