"""Site defaults: which single setting to make the site's default, weighted by the site's own workload mix.

``site_defaults(dataset, sweeps)`` returns one plain dict (JSON-ready, no formatting here):

* per tunable the sweeps cover: Kunkel's default-vs-best table (each setting as the single default: how often it
  is the best and the worst, arithmetic, geometric and harmonic mean of its relative performance) twice, once
  over the sweep's scenarios as measured (uniform) and once **weighted by the site's jobs** mapped onto those
  scenarios (``sweeps.map_jobs``); the default chosen by each; a depth-≤4 tree trained on the site's mapped jobs
  (features: the job counters the mapping reads; label: the best setting of the job's scenario; weight: the job's
  weight), with its rules as text and its score as a policy; the rules for users that beat the default;
* ``config``: the proposed site configuration (``[site]`` name, defaults, rules, advice per finding id) that
  ``render_site_toml`` writes as TOML for ``load_config``.
"""

from __future__ import annotations

import math
import os
from typing import Any, Sequence

import numpy as np

from ..analyzers.detectors.access import RANDOM_ACCESS, REDUNDANT_READ
from ..analyzers.detectors.smallio import SMALL_IO
from ..errors import NoUsableData, UsageError
from ..recommend.kunkel import MEANS, DefaultsTable, Score, defaults_table
from ..units import fmt_bytes, fmt_pct
from .store import load_site
from .sweeps import JobMix, SweepTable, load_sweeps, map_jobs

# findings whose advice a tunable's default speaks to (the site advice text is appended to them)
ADVICE_FOR = {"read-pattern": (SMALL_IO.id, RANDOM_ACCESS.id, REDUNDANT_READ.id), "write-size": (), "descriptors": ()}
# no rule of the tree serves less than this share of the site's weight (a rule for a sliver is not worth telling users)
MIN_LEAF_WEIGHT_SHARE = 0.01
# the job columns site defaults needs from the dataset
NEEDED_COLUMNS = ("job_key", "core_hours", "io_time_s", "read_time_s", "write_time_s", "posix_reads", "posix_writes",
                  "posix_bytes_read", "posix_bytes_written", "n_files_read", "max_file_bytes")


def _score(s: Score) -> dict[str, Any]:
    return {"setting": s.name, "scenarios": s.scenarios, "best_share": s.best_share, "worst_share": s.worst_share,
            "arithmetic": s.arithmetic, "geometric": s.geometric, "harmonic": s.harmonic}


def _table(tab: DefaultsTable, mean: str) -> dict[str, Any]:
    return {"scenarios": list(tab.scenarios), "weights": [float(w) for w in tab.weights],
            "rel": [[None if not math.isfinite(v) else float(v) for v in row] for row in tab.rel],
            "settings": list(tab.settings), "defaults": [_score(s) for s in tab.defaults],
            "oracle": _score(tab.oracle), "best_default": tab.best_default(mean).name}


# how the mapping's derived features read in rules for users
FEATURE_LABELS = {
    "read_request_bytes": "read request size", "read_requests_per_file": "read requests per file",
    "read_file_coverage": "share of each file read", "write_request_bytes": "write request size",
    "max_file_bytes": "largest file", "nprocs": "processes", "posix_mean_write_bytes": "mean write size",
    "posix_mean_read_bytes": "mean read size", "n_files": "files",
}


def condition_text(c) -> str:
    """A tree condition in words: "share of each file read <= 5 %"."""
    if c.op in ("is", "is not"):
        return f"{FEATURE_LABELS.get(c.feature, c.feature)} {c.op} {c.value}"
    return f"{FEATURE_LABELS.get(c.feature, c.feature)} {'≤' if c.op == '<=' else '>'} {fmt_feature(c.feature, c.value)}"


def fmt_feature(name: str, value: float) -> str:
    """A tree threshold in the unit its feature name says."""
    if name.endswith("_bytes"):
        return fmt_bytes(value)
    if name.endswith("_coverage") or name.endswith("_share"):
        return fmt_pct(value)
    return f"{value:,.0f}" if abs(value) >= 10 else f"{value:.3g}"


def _tree(table: SweepTable, mix: JobMix, tab: DefaultsTable, mean: str, default: str) -> dict[str, Any] | None:
    """A depth-≤4 tree over the site's mapped jobs; None when there is nothing to split."""
    from ..recommend.tree import fit_tree

    rows = mix.rows[mix.rows["scenario"].isin(tab.scenarios) & (mix.rows["weight"] > 0)]
    feats = [f for f in table.features if f in rows]
    if not len(rows) or not feats:
        return None
    best = {sc: tab.settings[int(np.nanargmax(r))] for sc, r in zip(tab.scenarios, tab.rel)}
    label = rows["scenario"].map(best)
    X = rows[feats].astype("f8")
    ok = np.all(np.isfinite(X.to_numpy()), axis=1)
    if not ok.any():
        return None
    tree = fit_tree(X[ok].reset_index(drop=True), label[ok].tolist(), sample_weight=rows["weight"][ok].tolist(),
                    min_weight_fraction_leaf=MIN_LEAF_WEIGHT_SHARE)
    # the tree as a policy: in each scenario the setting it gives most of that scenario's (weighted) jobs
    pred = [tree.predict(r) for r in X[ok].to_dict("records")]
    votes: dict[str, dict[str, float]] = {}
    for sc, p, w in zip(rows["scenario"][ok], pred, rows["weight"][ok]):
        votes.setdefault(sc, {}).setdefault(p, 0.0)
        votes[sc][p] += float(w)
    choice = {sc: max(v, key=lambda k: (v[k], k)) for sc, v in votes.items()}
    for sc in tab.scenarios:
        choice.setdefault(sc, default)
    policy = tab.score_policy("tree (depth ≤ 4)", choice)
    regret = tab.regret_share(policy, mean)
    beats = policy.mean(mean) > tab.best_default(mean).mean(mean) + 1e-9
    user_rules = []
    if beats:
        for conds, leaf in tree.leaves(collapse=True):
            if leaf.answer != default and leaf.samples > 0:
                when = " and ".join(condition_text(c) for c in conds) or "always"
                user_rules.append({"when": when, "setting": leaf.answer, "weight": leaf.samples,
                                   "weight_share": leaf.samples / (tree.weight[0] or 1.0)})
        user_rules.sort(key=lambda r: -r["weight"])
    return {
        "features": feats, "depth": tree.depth(), "rules": tree.rules(fmt=fmt_feature, answer=lambda lf: f"{lf.answer}", collapse=True),
        "policy": _score(policy), "choice": choice, "regret_share": regret, "beats_default": beats,
        "user_rules": user_rules, "model": tree.to_dict(),
    }


def tunable_defaults(table: SweepTable, jobs, *, weight: str = "io", mean: str = "harmonic", uniform: bool = False) -> dict[str, Any]:
    f = table.frame
    measured = defaults_table(f["scenario"], f["setting"], f["time_s"])
    mix = None
    site_tab = None
    if not uniform:
        mix = map_jobs(jobs, table, weight=weight)
        w = mix.rows.groupby("scenario")["weight"].sum().to_dict() if len(mix.rows) else {}
        if not any(v > 0 for v in w.values()):
            raise NoUsableData(f"no job of the site dataset maps onto a scenario of the {table.tunable} sweep "
                               f"({mix.jobs_total} jobs: " + ", ".join(f"{k}: {v}" for k, v in mix.unmapped.items()) + ")",
                               hint="ingest an archive whose jobs do that kind of I/O, or pass --uniform to weigh the scenarios alike")
        site_tab = defaults_table(f["scenario"], f["setting"], f["time_s"], weights=w)
    tab = site_tab or measured
    default = tab.best_default(mean).name
    out: dict[str, Any] = {
        "tunable": table.tunable, "kind": table.kind, "sources": table.sources, "io": table.io,
        "settings": table.settings, "runs": int(len(f)), "mean": mean, "weight": "uniform" if uniform else weight,
        "measured": _table(measured, mean), "site": _table(site_tab, mean) if site_tab is not None else None,
        "default": default, "default_measured": measured.best_default(mean).name,
    }
    if mix is not None:
        per = mix.rows.groupby("scenario").agg(jobs=("job_key", "nunique"), weight=("weight", "sum")) if len(mix.rows) else None
        out["mix"] = {
            "jobs_total": mix.jobs_total, "jobs_mapped": mix.jobs_mapped, "unmapped": mix.unmapped,
            "weight_unmapped": mix.weight_unmapped, "weight_unit": {"io": "core-hours in that I/O", "core-hours": "core-hours",
                                                                     "jobs": "jobs"}[weight],
            "scenarios": [{"scenario": s, "jobs": int(per.loc[s, "jobs"]) if per is not None and s in per.index else 0,
                           "weight": float(per.loc[s, "weight"]) if per is not None and s in per.index else 0.0}
                          for s in measured.scenarios],
        }
        out["tree"] = _tree(table, mix, site_tab, mean, default)
    else:
        out["mix"] = None
        out["tree"] = None
    return out


# the jobs a sweep kind's advice is for (``[site.advice_scope]``; the site report matches them with ``scope_mask``)
ADVICE_SCOPE = {"read-pattern": "serial-read", "write-size": "serial-write"}


def _advice(res: dict[str, Any], site: str | None) -> str:
    """The advice as a user reads it: what to do, how much it is worth, where it was measured (no tunable names)."""
    tab = res["site"] or res["measured"]
    sc = next(s for s in tab["defaults"] if s["setting"] == res["default"])
    m = res["mean"]
    over = "this site's jobs" if res["site"] else "the measured cases"
    worth = f"{fmt_pct(sc[m])} of the best choice for each case, {m} mean over {over}, measured on this system"
    if res["kind"] == "read-pattern":
        text = f"Data read here is read fastest when stored as {res['default']} ({worth})."
    elif res["kind"] == "write-size":
        text = f"Writes here are fastest with {res['default']} ({worth})."
    else:
        text = f"The best single choice of {res['tunable'].replace('_', ' ')} here is {res['default']} ({worth})."
    rules = (res.get("tree") or {}).get("user_rules") or []
    if rules:
        r = rules[0]
        more = f" (+{len(rules) - 1} more in the site rules)" if len(rules) > 1 else ""
        text += f" Better when {r['when']}: {r['setting']}{more}."
    return text


def site_defaults(dataset: str | os.PathLike, sweeps: Sequence[str | os.PathLike], *, weight: str = "io",
                  mean: str = "harmonic", uniform: bool = False, site_name: str | None = None,
                  scenario: str | None = None, setting: str | None = None, time: str | None = None,
                  tunable: str | None = None) -> dict[str, Any]:
    if mean not in MEANS:
        raise UsageError(f"unknown mean {mean!r}; use one of {', '.join(MEANS)}")
    data = load_site(dataset, tables=("jobs",))
    jobs = data["jobs"]
    if jobs is None or not len(jobs):
        raise NoUsableData(f"{dataset}: the site dataset holds no job (empty archive, or every log damaged)",
                           hint="ingest an archive with readable Darshan logs: iodiag site ingest ARCHIVE --out " + os.fspath(dataset))
    missing = [c for c in NEEDED_COLUMNS if c not in jobs or jobs[c].isna().all()]
    if missing:
        raise UsageError(f"{dataset}: the site dataset has no values in column(s) {', '.join(missing)}",
                         hint="re-ingest it with this version of iodiag (iodiag site ingest ARCHIVE --out NEW)")
    tables = load_sweeps(sweeps, scenario=scenario, setting=setting, time=time, tunable=tunable)
    results = [tunable_defaults(t, jobs, weight=weight, mean=mean, uniform=uniform) for t in tables]
    name = site_name or None
    advice: dict[str, list[str]] = {}
    scope: dict[str, str] = {}
    for r, t in zip(results, tables):
        for fid in ADVICE_FOR.get(t.kind, ()):
            advice.setdefault(fid, []).append(_advice(r, name))
            if t.kind in ADVICE_SCOPE:
                scope[fid] = ADVICE_SCOPE[t.kind]
    config = {
        "name": name,
        "defaults": {r["tunable"]: r["default"] for r in results},
        "rules": [f"{r['tunable']}: if {u['when']}: {u['setting']}" for r in results for u in ((r.get("tree") or {}).get("user_rules") or [])],
        "advice": {k: " ".join(v) for k, v in advice.items()},
        "advice_scope": scope,
    }
    return {
        "dataset": os.fspath(dataset), "jobs": int(len(jobs)), "core_hours": float(jobs["core_hours"].sum()),
        "sweeps": [os.fspath(s) for s in sweeps], "tunables": results, "config": config,
    }
