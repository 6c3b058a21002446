"""One list of recommendations per job: the trained tree where it applies, the rules elsewhere, never both.

``recommend`` asks the trained model (``recommend/model.py``: a small decision tree kept as plain data, applied
without scikit-learn) for the settings it was trained on, and the rules (``recommend/rules.py``) for what the
findings show.  Where the tree gives a setting (it does not abstain), its value wins: a rule's recommendation
for the same setting is dropped and the tree's says so in its notes, so the two never contradict each other.
Where the tree abstains (outside its training coverage, no model, no features) the rules still apply and the
abstention is listed with its reason.

The model module is imported lazily, inside ``recommend``: a report pays for it only when it runs, and an iodiag
without a trained model (the module missing) still gives rule-based advice, saying so.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping, Sequence

from ..analyzers.detectors.metadata import MANY_SMALL_FILES
from ..analyzers.detectors.tasks import TASK_OVERHEAD
from ..config import Config
from ..errors import IodiagError, UsageError
from ..findings import Finding
from .recommendation import Change, Recommendation
from .rules import rule_recommendations

NOT_APPLICABLE = "not applicable (it covers xarray/Dask/Zarr jobs; this one has no Zarr array or Dask task)"
NO_MODEL = "no trained model is available in this iodiag (recommend/model.py is not installed): rules only"


def load_tree(path: str | None = None, *, strict: bool = False) -> tuple[Any, str | None]:
    """(model, None) or (None, why not).  ``strict``: a missing, stale or incompatible model file raises the
    model's own error (it names the retrain command) instead of becoming a reason."""
    try:
        from .model import load_model  # noqa: PLC0415 - lazy: the report path pays only when it recommends
    except ImportError:
        if strict and path is not None:
            raise UsageError(f"{path}: this iodiag cannot read trained models (recommend/model.py is missing)",
                             hint="install an iodiag with the recommender, or leave out --model") from None
        return None, NO_MODEL
    try:
        return load_model(path), None
    except IodiagError as exc:
        if strict:
            raise
        return None, str(exc)


def _tree_advice(model: Any, profile, metrics, params) -> tuple[Recommendation, dict]:
    """The tree's advice and the features it was given (the job's wall time and trained-phase time among them)."""
    try:
        from .features import job_features  # noqa: PLC0415
    except ImportError:
        return _abstain("the trained model's features module is not installed: rules only"), {}
    feats = job_features(profile, metrics=metrics, params=params)
    return model.advise(feats), feats


def _with_args(rec: Recommendation, params: Mapping[str, Any] | None) -> Recommendation:
    """A tree setting the workload takes as a flag becomes an ``arg`` change (what ``iodiag verify`` applies):
    ``chunks=(73, 90, 180)`` for a command with ``--chunks`` -> ``--chunks 73,90,180``."""
    if not params or rec.abstain is not None:
        return rec
    have = {c.name for c in rec.changes if c.kind == "arg"}
    extra = []
    for k, v in rec.settings.items():
        flag = "--" + k.replace("_", "-")
        if k in params and flag not in have and not (flag == "--chunks" and "--chunk-mb" in have):
            val = ",".join(str(x) for x in v) if isinstance(v, (list, tuple)) else v
            if str(params[k]) == str(val):
                continue  # the job's current value: never proposed
            extra.append(Change("arg", f"{flag} {val}", flag, val))
    return replace(rec, changes=tuple(extra) + tuple(rec.changes)) if extra else rec


def _abstain(why: str, based_on: str = "") -> Recommendation:
    return Recommendation(id="model", title="No model-based advice", settings={}, source="tree", abstain=why,
                          based_on=based_on)


def recommend(profile, *, metrics=None, findings: Sequence[Finding], config: Config | None = None,
              params: Mapping[str, Any] | None = None, model: Any = None,
              model_error: str | None = None) -> list[Recommendation]:
    """The job's recommendations, best first: the tree's (when it applies), then the rules' by the cost of the
    findings they address, then the tree's abstention (why it gave none).  ``model`` is a loaded model (see
    ``load_tree``) or None; ``model_error`` says why there is none."""
    cfg = config or Config()
    based = "workload parameters and measured features" if params else "measured features only"
    rules = rule_recommendations(profile, findings, cfg, params)
    feats: dict = {}
    if model is None:
        tree = _abstain(model_error or NO_MODEL, based)
    else:
        if metrics is None:
            from ..analyzers.metrics import metrics_of

            metrics = metrics_of(profile)
        tree, feats = _tree_advice(model, profile, metrics, params)
        tree = _with_args(tree, params)
        if not tree.based_on:
            tree = replace(tree, based_on=based)
    if tree.abstain is not None and not params and not profile.job.arrays and not len(profile.tasks):
        # not a Dask/xarray/Zarr job: the model's silence is not news; the findings' changes are the advice
        tree = replace(tree, abstain=NOT_APPLICABLE)
    elif tree.abstain is None and tree.settings:
        from .calibration import calibrated

        phase, how = feats.get("phase_s"), str(feats.get("phase_from") or "")
        if phase is None:  # no results record: the phase as the profile shows it (the note says it is an estimate)
            from .features import estimated_phase

            phase, how = estimated_phase(profile)
        tree = calibrated(tree, wall_s=feats.get("wall_s"), phase_s=phase, phase_from=how)
    if tree.abstain is not None or not tree.settings:
        return rules + [tree]
    return combine(tree, rules, findings)


def combine(tree: Recommendation, rules: Sequence[Recommendation],
            findings: Sequence[Finding] = ()) -> list[Recommendation]:
    """The tree's recommendation first; a rule that sets any of the same settings defers to it (dropped, and
    the tree's notes say so); the other rules follow."""
    keys = set(tree.settings)
    kept, deferred = [], []
    for r in rules:
        (deferred if keys & set(r.settings) or (r.id == tree.id) else kept).append(r)
    notes = list(tree.notes)
    found = {f.id for f in findings}  # the findings of this job the tree's change bears on, not all it could
    addresses = [a for a in tree.addresses if a in found]
    for r in deferred:
        same = ", ".join(sorted(keys & set(r.settings))) or r.id
        notes.append(f"the rule-based advice on {same} ({', '.join(r.addresses) or 'measured features'}: "
                     f"{_settings_text(r.settings)}) defers to the trained model's {_settings_text(tree.settings)}")
        addresses += [a for a in r.addresses if a not in addresses]
    if not addresses:  # the findings the tree's settings bear on: those a rule for the same setting addressed
        addresses = [f.id for f in findings if f.id in {TASK_OVERHEAD.id, MANY_SMALL_FILES.id} and "chunks" in keys]
    return [replace(tree, notes=tuple(notes), addresses=tuple(addresses))] + kept


def _settings_text(settings: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in settings.items())


def reconcile(findings: Sequence[Finding], recs: Sequence[Recommendation]) -> list[Finding]:
    """Findings whose advice a tree recommendation overrides say so at the end of their recommendation text,
    so the report's finding and its "What to change" never contradict each other."""
    tree = next((r for r in recs if r.source == "tree" and r.abstain is None and r.settings), None)
    if tree is None:
        return list(findings)
    out = []
    for f in findings:
        if f.id in tree.addresses and f.recommendation:
            f = replace(f, recommendation=f.recommendation + "; where they differ, the trained model's advice "
                        f"wins: {tree.title[:1].lower() + tree.title[1:]} (see What to change)")
        out.append(f)
    return out
