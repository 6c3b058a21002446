"""The trained recommender, applied: load a model file and turn a job's features into a ``Recommendation``.

``load_model()`` reads the shipped model (``recommend/data/model.json``, trained on the default sweep measured on
this project's machine) or a site's own (``iodiag recommend train``).  The file is plain JSON holding two trees per
workload (``recommend.tree.Tree``): applying them needs neither scikit-learn nor pandas, so a report pays a few
milliseconds, not the half second of scikit-learn's import.

``Model.advise(features)`` takes what ``features.job_features`` / ``planned_features`` give:

* the scenario (workload, access pattern, array size, leading steps, bytes per step) goes down the classifier to
  the setting that was best in the most similar measured scenarios;
* that setting becomes concrete for this array (a chunk shape, a flag of the workload, an xarray snippet);
* the regressor predicts the relative performance of that setting and of the job's current one: their ratio is
  the expected speedup, its band from the leaves' spread and the cross-validated error;
* outside what the model was trained on (a pattern or file system it never saw, an array far outside the trained
  sizes, a feature nobody could measure) it abstains and says why.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any, Mapping

from ..analyzers.detectors.access import REDUNDANT_READ
from ..analyzers.detectors.metadata import MANY_SMALL_FILES, METADATA_STORM
from ..analyzers.detectors.smallio import SMALL_IO
from ..analyzers.detectors.tasks import TASK_OVERHEAD
from ..errors import ModelUnusable, UsageError
from ..units import fmt_bytes, fmt_pct
from .features import (BASED_ON_PARAMS, FEATURES_VERSION, SCENARIO_INPUTS, SETTING_INPUTS, chunks_for_mb,
                       layout_chunks, nbytes)
from .recommendation import Change, Recommendation
from .shipped import MODEL_SCHEMA, RETRAIN, SHIPPED_MODEL, SHIPPED_TABLE, sha256_of
from .tree import Leaf, Tree

RANGE_MARGIN = 2.0  # sizes up to 2x beyond the trained range count as covered; further out the model abstains
ADDRESSES = (SMALL_IO.id, MANY_SMALL_FILES.id, METADATA_STORM.id, TASK_OVERHEAD.id, REDUNDANT_READ.id)
NOT_TRAINED = ("shards (the workloads write none)", "threads per worker", "Lustre stripe count and size "
               "(no Lustre here: train on a site's sweeps with striping set by a prepare step)")


def _retrain(path: Path | None) -> str:
    return RETRAIN if path is None else f"iodiag recommend train SWEEP_DIR... --out {path}"


def _new_model_path(path: Path) -> Path:
    """A file name next to ``path`` that does not exist yet: where to train a model when ``path`` holds something
    else (a report, a sweep folder), which the retrain command must not overwrite."""
    stem = path.stem or path.name or "iodiag"
    new = path.with_name(f"{stem}-model.json")
    n = 2
    while new.exists() or new == path:
        new = path.with_name(f"{stem}-model-{n}.json")
        n += 1
    return new


def load_model(path: str | os.PathLike | None = None) -> "Model":
    """The shipped model (``path`` None) or the one at ``path``; ``ModelUnusable`` (with the retrain command) when
    the file is missing, not a model, untrained, of another schema or stale."""
    p = Path(path) if path is not None else SHIPPED_MODEL
    shipped = path is None
    how = _retrain(None if shipped else p)

    def other() -> str:
        """The hint for a file that is no model (another program's JSON, a folder, binary data): it is the user's,
        so the command trains a model beside it instead of overwriting it (the shipped model's path is iodiag's)."""
        if shipped:
            return f"retrain it: {how}"
        return f"{p} is left as it is; train a model into a new file: {_retrain(_new_model_path(p))}"

    try:
        text = p.read_text()
    except FileNotFoundError:
        raise ModelUnusable(f"no recommender model at {p}", hint=f"train one: {how}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ModelUnusable(f"recommender model {p} cannot be read: {exc}", hint=other()) from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ModelUnusable(f"{p} is not a recommender model (not JSON: {exc})", hint=other()) from None
    if not isinstance(data, dict) or not str(data.get("schema", "")).startswith("iodiag.recommend-model/"):
        raise ModelUnusable(f"{p} is not a recommender model (no schema {MODEL_SCHEMA!r})", hint=other())
    if data["schema"] != MODEL_SCHEMA:
        raise ModelUnusable(f"{p} is a model of schema {data['schema']!r}; this iodiag reads {MODEL_SCHEMA!r}",
                            hint=f"retrain it with this iodiag: {how}")
    if not data.get("workloads"):
        raise ModelUnusable(f"{p} is an untrained model (no trees in it)", hint=f"train it: {how}")
    if data.get("features_version") != FEATURES_VERSION:
        raise ModelUnusable(f"{p} is stale: trained on features of version {data.get('features_version')}, "
                            f"this iodiag computes version {FEATURES_VERSION}", hint=f"retrain it: {how}")
    if shipped and _table_newer(p) and data.get("table_sha256") != sha256_of(SHIPPED_TABLE):
        raise ModelUnusable(f"{p} is stale: the training table {SHIPPED_TABLE.name} changed since it was built",
                            hint=f"rebuild it: {how}")
    try:
        return Model(data, path=p)
    except (UsageError, KeyError, TypeError, ValueError) as exc:
        raise ModelUnusable(f"{p} is damaged ({exc})", hint=f"retrain it: {how}") from None


_SAME_WRITE_S = 2.0  # a checkout or an install writes both files within this of each other


def _table_newer(model_path: Path) -> bool:
    """Whether the shipped training table may have changed after the model was built: only then is it hashed
    (hashing means importing OpenSSL's hashlib, ~4 ms of every report's start-up, for a file that an installed
    package never changes; a test rebuilds the shipped model from the table bit for bit).  Files written by one
    checkout or install land within a fraction of a second of each other, in either order: only a table edited
    later than that counts."""
    try:
        return SHIPPED_TABLE.stat().st_mtime > Path(model_path).stat().st_mtime + _SAME_WRITE_S
    except OSError:
        return False


class _Part:
    """The trees and coverage of one workload."""

    def __init__(self, workload: str, d: Mapping[str, Any]):
        self.workload = workload
        self.classifier = Tree.from_dict(d["classifier"])
        self.regressor = Tree.from_dict(d["regressor"])
        if self.classifier.kind != "classifier" or self.regressor.kind != "regressor":
            raise ValueError(f"{workload}: tree kinds are {self.classifier.kind}/{self.regressor.kind}")
        self.candidates: dict[str, dict[str, Any]] = {k: dict(v) for k, v in d["candidates"].items()}
        self.completion: dict[str, str] = dict(d["completion"])  # classifier answer -> full setting label
        if not set(self.completion.values()) <= set(self.candidates) or \
                not set(map(str, self.classifier.classes)) <= set(self.completion):
            raise ValueError(f"{workload}: the classifier's answers and the settings do not match")
        self.ranges: dict[str, tuple[float, float]] = {k: (float(a), float(b)) for k, (a, b) in d["ranges"].items()}
        self.patterns = tuple(d.get("patterns") or ())
        self.scales = tuple(d.get("scales") or ())
        self.cv_mae = float(d["cv_log_mae"]) if d.get("cv_log_mae") is not None else None


class Model:
    """A trained recommender (two trees per workload) with what it knows."""

    settings: tuple[str, ...]
    scenarios_known: str

    def __init__(self, data: Mapping[str, Any], *, path: Path | None = None):
        self.path = path
        self.data = data
        self.parts = {wl: _Part(wl, d) for wl, d in data["workloads"].items()}
        keys: list[str] = []
        for part in self.parts.values():
            for cand in part.candidates.values():
                keys += [k for k in cand if k not in keys]
        self.settings = tuple(keys)
        self.scenarios_known = str(data.get("trained_on") or "")
        self.fs_types = tuple(data.get("fs_types") or ())
        self.not_trained = NOT_TRAINED

    def rules(self, workload: str, *, highlight: Mapping[str, Any] | None = None) -> list[str]:
        """The classifier of ``workload`` as if/else text, the path of ``highlight`` (scenario inputs) marked."""
        part = self.parts[workload]
        return part.classifier.rules(highlight=highlight, fmt=_fmt,
                                     answer=lambda lf: _answer(lf, part.completion[str(lf.answer)]))

    # ------------------------------------------------------------------------------------------- advise
    def advise(self, features: Mapping[str, Any]) -> Recommendation:
        f = features
        based_on = str(f.get("based_on") or BASED_ON_PARAMS)
        wl = f.get("workload")
        if wl not in self.parts:
            why = (f"the workload kind is not known ({f.get('why_unknown') or 'no results record and no Zarr writes or reads measured'})"
                   if wl is None else f"the model was not trained on {wl} workloads (it knows: {', '.join(self.parts)})")
            return self._abstain(why, based_on)
        part = self.parts[wl]
        missing = [k for k in SCENARIO_INPUTS[wl] if f.get(k) is None]
        if missing:
            extra = f" ({f['why_unknown']})" if f.get("why_unknown") else ""
            return self._abstain(f"the job's {', '.join(missing)} cannot be told{extra}", based_on)
        row = {k: f[k] for k in SCENARIO_INPUTS[wl]}
        why = part.classifier.known(row) + self._out_of_range(part, row)
        fs = f.get("fs_type")
        if fs and self.fs_types and str(fs) not in self.fs_types:
            why.append(f"the files are on {fs}; the model was measured on {', '.join(self.fs_types)} only "
                       f"(retrain it on sweeps run there: iodiag recommend train SWEEP_DIR...)")
        if why:
            return self._abstain("; ".join(why), based_on)

        label = part.completion[str(part.classifier.predict(row))]
        setting = dict(part.candidates[label])
        shape, itemsize = tuple(f.get("shape") or ()), int(f.get("itemsize") or 4)
        concrete = self._concrete(wl, setting, shape, itemsize)
        current = self._current_label(wl, f)
        notes: list[str] = [f"model: {self.scenarios_known}"]
        if f.get("other_patterns"):
            notes.append(f"advice for the job's slowest read pattern ({f['pattern']}); it also read: "
                         f"{', '.join(f['other_patterns'])}")
        if f.get("lustre_stripe_count") is not None:
            notes.append(f"Lustre striping ({f['lustre_stripe_count']} OSTs) is not a setting this model was trained "
                         "on")
        same = current == label
        if same:
            speed, lo, hi = 1.0, None, None
            notes.append("the job already uses the model's choice for this scenario")
        else:
            speed, lo, hi = self._expected(part, wl, row, f, concrete, notes)
        changes = () if same else self._changes(wl, setting, concrete, f)
        title = self._title(wl, setting, concrete, same)
        rules = tuple(self.rules(wl, highlight=row))
        return Recommendation(
            id="chunking", title=title, settings={**setting, **concrete}, changes=changes, source="tree",
            rules=rules, expected_speedup=speed, speedup_low=lo, speedup_high=hi, addresses=ADDRESSES,
            based_on=based_on, abstain=None, notes=tuple(notes))

    def _abstain(self, why: str, based_on: str) -> Recommendation:
        return Recommendation(id="chunking", title="No trained recommendation for this job", settings={},
                              source="tree", based_on=based_on, abstain=why,
                              notes=(f"model: {self.scenarios_known}",))

    @staticmethod
    def _out_of_range(part: _Part, row: Mapping[str, Any]) -> list[str]:
        out = []
        for k, (a, b) in part.ranges.items():
            v = float(row[k])
            if not (a / RANGE_MARGIN <= v <= b * RANGE_MARGIN):
                out.append(f"{k} = {_fmt(k, v)} is outside the trained range {_fmt(k, a)} – {_fmt(k, b)} "
                           f"(x{RANGE_MARGIN:g} margin)")
        return out

    @staticmethod
    def _concrete(wl: str, setting: Mapping[str, Any], shape: tuple, itemsize: int) -> dict[str, Any]:
        if not shape:
            return {}
        if wl == "convert":
            ch = chunks_for_mb(shape, itemsize, float(setting["chunk_mb"]))
        else:
            ch = layout_chunks(str(setting["chunk_layout"]), shape, itemsize)
        return {"chunks": ch, "chunk_bytes": nbytes(ch, itemsize)}

    @staticmethod
    def _current_label(wl: str, f: Mapping[str, Any]) -> str | None:
        try:
            if wl == "convert":
                target = f.get("chunk_mb_target")
                return None if target is None else (
                    f"chunk_mb={float(target):g}/{f['compressor']}/{int(f['workers'])} workers")
            return f"{f['layout']}/{f['compressor']}/v{int(f['zarr_format'])}"
        except (KeyError, TypeError, ValueError):
            return None

    def _expected(self, part: _Part, wl: str, row: Mapping[str, Any], f: Mapping[str, Any],
                  concrete: Mapping[str, Any], notes: list[str]) -> tuple[float | None, float | None, float | None]:
        cur_in = {k: f.get(k) for k in SETTING_INPUTS[wl]}
        if any(v is None for v in cur_in.values()) or not concrete:
            notes.append("no expected gain: the job's current " + ", ".join(k for k, v in cur_in.items() if v is None)
                         + " is not known")
            return None, None, None
        if wl == "read" and str(f.get("layout")) not in part.regressor.categories.get("layout", ()):
            notes.append(f"the job's current layout ({f.get('layout')}) was never measured in training: the expected "
                         "gain is extrapolated")
        new_in = dict(cur_in)
        new_in["chunk_mb"] = concrete["chunk_bytes"] / 1e6
        cand = part.candidates[part.completion[str(part.classifier.predict(row))]]
        for k, v in cand.items():
            if k != "chunk_mb":  # the regressor takes the chunk size this array gets, not the target
                new_in["layout" if k == "chunk_layout" else k] = v
        a = part.regressor.leaf({**row, **cur_in})
        b = part.regressor.leaf({**row, **new_in})
        return _ratio(b, a, part.cv_mae)

    @staticmethod
    def _changes(wl: str, setting: Mapping[str, Any], concrete: Mapping[str, Any],
                 f: Mapping[str, Any]) -> tuple[Change, ...]:
        dims = f.get("dims") or [f"dim_{i}" for i in range(len(concrete.get("chunks") or ()))]
        ch = tuple(concrete.get("chunks") or ())
        comp = str(setting["compressor"])
        workers = None
        if wl == "convert":
            mb, workers, fmt = float(setting["chunk_mb"]), int(setting["workers"]), int(f.get("zarr_format") or 3)
            cur_mb = None if f.get("chunk_mb_target") is None else float(f["chunk_mb_target"])
            # the workload takes --chunks or --chunk-mb, never both: a job that gave a size gets a size, one that
            # gave a shape (or nothing) gets the shape the size class comes to for this array
            size = (("--chunks", ",".join(map(str, ch)), None) if ch and cur_mb is None else ("--chunk-mb", mb, cur_mb))
            args = [size, ("--compressor", comp, f.get("compressor")), ("--workers", workers, f.get("workers"))]
        else:
            fmt = int(setting["zarr_format"])
            args = [("--chunks", ",".join(map(str, ch)), None), ("--compressor", comp, f.get("compressor")),
                    ("--zarr-format", fmt, f.get("zarr_format"))]
        out = [Change("arg", f"{flag} {v:g}" if isinstance(v, float) else f"{flag} {v}", flag, v)
               for flag, v, cur in args if cur != v]
        out.append(Change("snippet", _snippet(dims, ch, comp, fmt, workers=workers)))
        return tuple(out)

    @staticmethod
    def _title(wl: str, setting: Mapping[str, Any], concrete: Mapping[str, Any], same: bool) -> str:
        ch = concrete.get("chunks")
        size = f" ≈ {fmt_bytes(concrete['chunk_bytes'], si=True, sig=True)}" if concrete.get("chunk_bytes") else ""
        chunks = f"chunks of {tuple(ch)}{size}" if ch else "the trained chunking"
        comp = setting["compressor"] if setting["compressor"] != "none" else "no compression"
        if wl == "convert":
            what = f"{chunks}, {comp}, {setting['workers']} Dask worker{'s' if setting['workers'] != 1 else ''}"
            return (f"Keep converting with {what}: the model's choice for this scenario" if same
                    else f"Convert with {what}")
        what = f"{chunks} ({setting['chunk_layout']} layout), {comp}, Zarr v{setting['zarr_format']}"
        return (f"Keep the store's {what}: the model's choice for this read" if same
                else f"Rewrite the store with {what} for this read")


def _ratio(new: Leaf, cur: Leaf, cv: float | None) -> tuple[float, float, float]:
    """Expected speedup (time now / time after) from two leaves of the log-relative-performance regressor, with a
    band of one combined standard deviation (each leaf's spread, at least the cross-validated error)."""
    d = float(new.answer) - float(cur.answer)
    sd = math.hypot(max(new.spread, cv or 0.0), max(cur.spread, cv or 0.0))
    return math.exp(d), math.exp(d - sd), math.exp(d + sd)


def _snippet(dims, chunks, comp: str, fmt: int, *, workers: int | None = None) -> str:
    ch = ", ".join(f'"{d}": {c}' for d, c in zip(dims, chunks))
    codec = {"none": "None", "zstd": "zarr.codecs.ZstdCodec()" if fmt == 3 else "numcodecs.Zstd()",
             "zlib": "zarr.codecs.GzipCodec()" if fmt == 3 else "numcodecs.Zlib()",
             "blosc": "zarr.codecs.BloscCodec()" if fmt == 3 else "numcodecs.Blosc()"}.get(comp, repr(comp))
    lines = []
    if workers:
        lines.append(f"client = distributed.Client(n_workers={workers}, threads_per_worker=1)")
    lines += [f"ds = ds.chunk({{{ch}}})",
              f"enc = {{v: {{\"chunks\": {tuple(chunks)}, \"compressors\": {codec}}} for v in ds.data_vars "
              f"if ds[v].ndim == {len(chunks)}}}",
              f"ds.to_zarr(store, mode=\"w\", zarr_format={fmt}, encoding=enc)"]
    return "\n".join(lines)


def _fmt(feature: str, v: float) -> str:
    if feature.endswith("_mb"):
        return fmt_bytes(v * 1e6, si=True, sig=True)
    if feature in ("n_lead", "workers", "zarr_format"):
        return f"{v:.0f}" if float(v).is_integer() else f"{v:.1f}"
    return f"{v:.4g}"


def _answer(leaf: Leaf, full: str) -> str:
    n = leaf.samples
    return (f"{full}  ({leaf.answer} best in {fmt_pct(leaf.share)} of {n:g} measured scenario{'s' if n != 1 else ''})")


__all__ = ["load_model", "Model", "RANGE_MARGIN", "ADDRESSES"]
