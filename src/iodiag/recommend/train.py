"""Train the recommender on measured sweeps: the training table, the trees, and their validation.

1. ``table_from_sweeps``: every succeeded run of ``iodiag sweep`` folders (conversion and read workloads) as one row
   per (run, read pattern) with the scenario (workload, pattern, array geometry), the setting (chunk layout and
   size, compressor, Zarr format, workers) and the time the setting governs (a conversion's write phase, a read
   pattern's median open + read).  Nothing but measurements goes in; the table is a CSV that can be committed.
2. ``train``: per workload, the median time of every (scenario, setting) over its repetitions, relative performance
   ``best / time`` in each scenario, then two trees of depth <= 4 (``recommend.tree``): a classifier from the
   scenario to the best setting (Kunkel's per-scenario choice) and a regressor from scenario and setting to the
   log of the relative performance (the expected gain of a change is the exp of a difference of two predictions;
   logs because gains are ratios).  The model is plain JSON: rebuilt bit for bit from the
   same table, applied without scikit-learn (``recommend.model``).
3. ``evaluate``: Kunkel's comparison (every single default vs the tree vs the oracle, arithmetic / geometric /
   harmonic means of relative performance, the tree's regret as a share of the oracle's gain over the best
   default), with the tree's choices made without the scenario being judged: leave one scenario out, leave one
   access pattern out, leave one array scale out.  ``evaluation_markdown`` (recommend/evalreport.py) renders it
   for docs/.

A sweep too small to train raises ``UsageError`` naming how many scenarios and runs are missing.
"""

from __future__ import annotations

import io
import json
import math
import os
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from ..errors import InputNotFound, InputUnreadable, UsageError
from .evalreport import calibration_markdown, evaluation_markdown
from .features import (FEATURES_VERSION, SCENARIO_INPUTS, SETTING_INPUTS, layout_of, n_chunks, nbytes)
from .shipped import MODEL_SCHEMA, RETRAIN, SHIPPED_MODEL, SHIPPED_TABLE, sha256_of  # shared with model.py
from .tree import MAX_DEPTH, Tree, fit_tree

MIN_SCENARIOS = 2  # per workload: grouped cross-validation needs one to hold out
MIN_REPS = 3  # runs of every setting in every scenario (medians over interleaved repetitions)
TIE = 0.9  # settings within 10 % of a scenario's best time are tied for the classifier (see _best_per_scenario)

TABLE_COLUMNS = ("sweep", "run", "rep", "workload", "pattern", "shape", "itemsize", "array_mb", "n_lead",
                 "step_mb", "chunks", "chunk_mb", "n_chunks", "layout", "chunk_mb_target", "compressor",
                 "zarr_format", "workers", "threads", "scenario", "setting", "time_s", "host", "fs_type")


# ----------------------------------------------------------------------------------------------- labels
def setting_label(workload: str, s: Mapping[str, Any]) -> str:
    if workload == "convert":
        return f"chunk_mb={float(s['chunk_mb_target']):g}/{s['compressor']}/{int(s['workers'])} workers"
    return f"{s['layout']}/{s['compressor']}/v{int(s['zarr_format'])}"


def setting_of_label(workload: str, label: str) -> dict[str, Any]:
    a, comp, c = label.split("/")
    if workload == "convert":
        return {"chunk_mb": float(a.split("=", 1)[1]), "compressor": comp, "workers": int(c.split()[0])}
    return {"chunk_layout": a, "compressor": comp, "zarr_format": int(c[1:])}


def scenario_label(workload: str, pattern: str, shape: Sequence[int]) -> str:
    return f"{workload}:{pattern}:{'x'.join(str(int(s)) for s in shape)}"


# ----------------------------------------------------------------------------------------------- the table
def _fs_type(path: str) -> str:
    """The file-system type holding ``path`` (longest mount point in /proc/mounts), '' when unknown."""
    try:
        mounts = [ln.split() for ln in Path("/proc/mounts").read_text().splitlines()]
    except OSError:
        return ""
    best, kind = "", ""
    real = os.path.realpath(path)
    for parts in mounts:
        if len(parts) < 3:
            continue
        mp = parts[1]
        if (real == mp or real.startswith(mp.rstrip("/") + "/")) and len(mp) > len(best):
            best, kind = mp, parts[2]
    return kind


def table_from_sweeps(sweep_dirs: Iterable[str | os.PathLike]) -> list[dict[str, Any]]:
    """Rows of the training table from sweep folders (succeeded convert and read runs; others are skipped)."""
    from ..analyzers.readers.arrays import array_meta
    from ..jobs.sweep.collect import succeeded_runs

    rows: list[dict[str, Any]] = []
    for d in sweep_dirs:
        d = Path(d)
        meta, runs = succeeded_runs(d)
        for name, rdir, run, rec in runs:
            run = run or {}
            if not rec or rec.get("workload") not in ("convert", "read") or not rec.get("shape"):
                continue
            shape = [int(s) for s in rec["shape"]]
            chunks = rec.get("chunks")
            params = rec.get("params") or {}
            base = {"sweep": meta.get("name") or d.name, "run": f"{d.name}/{name}", "rep": run.get("rep"),
                    "workload": rec["workload"], "shape": "x".join(map(str, shape)), "host": rec.get("host", "")}
            if rec["workload"] == "convert":
                itemsize = max(1, round(float(rec["chunk_MB"]) * 1e6 / math.prod(chunks))) if chunks else 4
                if params.get("chunk_mb") is None:
                    continue  # the settings are trained as target chunk sizes; explicit chunk shapes are not
                t = (rec.get("timings_s") or {}).get("write")
                sett = {"compressor": params.get("compressor") or "none", "zarr_format": int(params.get("zarr_format") or 2),
                        "workers": int(params.get("workers") or 1), "threads": int(params.get("threads") or 1),
                        "chunk_mb_target": float(params["chunk_mb"])}
                pats = [("conversion", t)]
                where = params.get("dst") or str(rdir)
            else:
                # the workload's own record of the array; runs recorded before it kept one: the store as it is now
                am = (rec.get("array")
                      or array_meta(os.path.join(params.get("path", ""), params.get("variable") or "")) or {})
                itemsize = int(am.get("itemsize") or 4)
                sett = {"compressor": am.get("compressor") or "none",
                        "zarr_format": int(am.get("zarr_format") or str(rec.get("format", "zarr2"))[-1]),
                        "workers": 1, "threads": 1, "chunk_mb_target": None}
                pats = [(p, v.get("total_s")) for p, v in (rec.get("patterns") or {}).items()]
                where = params.get("path") or str(rdir)
            ch = [min(int(c), s) for c, s in zip(chunks, shape)] if chunks else shape
            geo = {"itemsize": itemsize, "array_mb": nbytes(shape, itemsize) / 1e6, "n_lead": shape[0],
                   "step_mb": nbytes(shape[1:], itemsize) / 1e6, "chunks": "x".join(map(str, ch)),
                   "chunk_mb": nbytes(ch, itemsize) / 1e6, "n_chunks": n_chunks(shape, ch),
                   "layout": layout_of(shape, ch), "fs_type": _fs_type(where)}
            for pattern, t in pats:
                if t is None or not (float(t) > 0):
                    continue
                row = {**base, "pattern": pattern, **geo, **sett, "time_s": float(t)}
                row["scenario"] = scenario_label(rec["workload"], pattern, shape)
                row["setting"] = setting_label(rec["workload"], row)
                rows.append({c: row.get(c) for c in TABLE_COLUMNS})
    if not rows:
        raise UsageError("the sweep folders hold no succeeded conversion or read run to train on",
                         hint="run the training sweep first (scripts/recommender_sweep.sh), then collect it")
    rows.sort(key=lambda r: (r["workload"], r["scenario"], r["setting"], str(r["run"])))
    return rows


def write_table(rows: Sequence[Mapping[str, Any]], path: str | os.PathLike) -> Path:
    """The training table as CSV (floats as Python's repr: read back exactly)."""
    import csv

    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(TABLE_COLUMNS)
    for r in rows:
        w.writerow(["" if r.get(c) is None else (repr(r[c]) if isinstance(r[c], float) else r[c])
                    for c in TABLE_COLUMNS])
    p.write_text(buf.getvalue())
    return p


_INT_COLS = {"rep", "itemsize", "n_lead", "n_chunks", "zarr_format", "workers", "threads"}
_FLOAT_COLS = {"array_mb", "step_mb", "chunk_mb", "chunk_mb_target", "time_s"}


def read_table(path: str | os.PathLike) -> list[dict[str, Any]]:
    """Rows of a training table CSV, typed (floats exactly as written)."""
    import csv

    p = Path(path)
    try:
        text = p.read_text()
    except FileNotFoundError:
        raise InputNotFound(f"training table {p} not found",
                            hint="build one from sweeps: iodiag recommend train SWEEP_DIR... --table-out FILE") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputUnreadable(f"training table {p} cannot be read: {exc}") from None
    reader = csv.DictReader(io.StringIO(text))
    missing = [c for c in TABLE_COLUMNS if c not in (reader.fieldnames or [])]
    if missing:
        raise InputUnreadable(f"{p} is not a recommender training table (no column {', '.join(missing)})",
                              hint="build one with iodiag recommend train SWEEP_DIR... --table-out FILE")
    rows = []
    for r in reader:
        out: dict[str, Any] = {}
        for c in TABLE_COLUMNS:
            v = r.get(c, "")
            if v == "":
                out[c] = None
            elif c in _INT_COLS:
                out[c] = int(v)
            elif c in _FLOAT_COLS:
                out[c] = float(v)
            else:
                out[c] = v
        rows.append(out)
    return rows


# ----------------------------------------------------------------------------------------------- cells
def cells_of(rows: Sequence[Mapping[str, Any]], workload: str) -> list[dict[str, Any]]:
    """One cell per (scenario, setting): the median time over its runs, the run count, and its inputs."""
    import statistics

    groups: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for r in rows:
        if r["workload"] == workload:
            groups.setdefault((r["scenario"], r["setting"]), []).append(r)
    cells = []
    for (sc, st), rs in sorted(groups.items()):
        first = rs[0]
        cell = {"scenario": sc, "setting": st, "runs": len(rs),
                "time_s": float(statistics.median(float(r["time_s"]) for r in rs)),
                "scale": first["shape"], "pattern": first["pattern"]}
        for k in (*SCENARIO_INPUTS[workload], *SETTING_INPUTS[workload], "chunk_mb_target", "compressor",
                  "zarr_format", "workers", "layout"):
            cell[k] = first[k]
        cells.append(cell)
    best: dict[str, float] = {}
    for c in cells:
        best[c["scenario"]] = min(best.get(c["scenario"], math.inf), c["time_s"])
    for c in cells:
        c["rel"] = best[c["scenario"]] / c["time_s"]
    return cells


def check_enough(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The workloads with enough measurements to train; UsageError naming what is missing otherwise."""
    ok, problems = [], []
    for wl in ("convert", "read"):
        cells = cells_of(rows, wl)
        if not cells:
            continue
        scen = sorted({c["scenario"] for c in cells})
        sets = sorted({c["setting"] for c in cells})
        have = {(c["scenario"], c["setting"]): c["runs"] for c in cells}
        short = sum(max(0, MIN_REPS - have.get((s, t), 0)) for s in scen for t in sets)
        complete = [s for s in scen if all(have.get((s, t), 0) >= MIN_REPS for t in sets)]
        if len(sets) < 2:
            problems.append(f"{wl}: only one setting ({sets[0]}) was measured; a recommendation needs at least two")
        elif len(complete) < MIN_SCENARIOS or short:
            more = max(0, MIN_SCENARIOS - len(scen))
            need = short + more * len(sets) * MIN_REPS
            parts = [f"{short} runs to measure each setting {MIN_REPS} times in the {len(scen)} scenario(s) there"] \
                if short else []
            if more:
                parts.append(f"{more * len(sets) * MIN_REPS} runs for {more} more scenario(s)")
            problems.append(f"{wl}: {len(complete)} of {len(scen)} scenarios have each of the {len(sets)} settings "
                            f"measured {MIN_REPS} times, training needs {MIN_SCENARIOS}: {need} runs missing "
                            f"({' and '.join(parts)})")
        else:
            ok.append(wl)
    if problems or not ok:
        raise UsageError("the sweep is too small to train: " + ("; ".join(problems) or "no conversion or read runs"),
                         hint=f"run the missing runs (each setting {MIN_REPS} times in every scenario) and "
                              "train again")
    return ok


# ----------------------------------------------------------------------------------------------- fitting
def _frame(records: Sequence[Mapping[str, Any]], cols: Sequence[str]):
    import pandas as pd

    df = pd.DataFrame([{c: r[c] for c in cols} for r in records], columns=list(cols))
    for c in cols:
        if c in ("pattern", "layout", "compressor"):
            df[c] = df[c].astype(str)
        else:
            df[c] = df[c].astype("f8")
    return df


def primary_of(workload: str, c: Mapping[str, Any]) -> str:
    """The setting the classifier decides: the chunk layout of a read's store, the target chunk size of a
    conversion (the order-of-magnitude effects in the sweep); compressor, Zarr format and workers complete it."""
    return f"chunk_mb={float(c['chunk_mb_target']):g}" if workload == "convert" else str(c["layout"])


def _targets(cells: Sequence[Mapping[str, Any]], workload: str) -> list[dict[str, Any]]:
    """Per scenario (its inputs) the primary setting the classifier learns: among the primaries within ``TIE`` of
    the scenario's best time (differences below the run-to-run noise of a shared machine), the one that is among
    the best in the most scenarios of ``cells``, then the one of highest geometric mean, then by name."""
    prel: dict[str, dict[str, float]] = {}
    first: dict[str, Mapping[str, Any]] = {}
    for c in cells:
        p = primary_of(workload, c)
        d = prel.setdefault(c["scenario"], {})
        d[p] = max(d.get(p, 0.0), c["rel"])
        first.setdefault(c["scenario"], c)
    good_in: dict[str, int] = {}
    logs: dict[str, list[float]] = {}
    for d in prel.values():
        for p, r in d.items():
            logs.setdefault(p, []).append(math.log(r))
            good_in[p] = good_in.get(p, 0) + (r >= TIE)
    geo = {p: sum(v) / len(v) for p, v in logs.items()}
    out = []
    for sc in sorted(prel):
        pick = min((p for p, r in prel[sc].items() if r >= TIE), key=lambda p: (-good_in[p], -geo[p], p))
        out.append({**{k: first[sc][k] for k in SCENARIO_INPUTS[workload]}, "scenario": sc, "target": pick})
    return out


def _completion(cells: Sequence[Mapping[str, Any]], workload: str) -> dict[str, str]:
    """Primary setting -> the full setting: with that primary, the compressor/format/workers of the highest
    geometric mean of relative performance over every scenario of ``cells``.  (Over only the scenarios where the
    primary is the target, the choice between compressors flipped with the noise of one or two scenarios: the
    leave-one-scenario-out rows of docs/recommender/validation.md were worse that way.)"""
    out: dict[str, str] = {}
    logs: dict[str, dict[str, list[float]]] = {}
    for c in cells:
        logs.setdefault(primary_of(workload, c), {}).setdefault(c["setting"], []).append(math.log(c["rel"]))
    for p, by in sorted(logs.items()):
        out[p] = min(by, key=lambda s: (-sum(by[s]) / len(by[s]), s))
    return out


def fit_classifier(cells: Sequence[Mapping[str, Any]], workload: str,
                   *, max_depth: int = MAX_DEPTH) -> tuple[Tree, dict[str, str]]:
    """The classifier (scenario -> primary setting) and the completion of each primary to a full setting."""
    tg = _targets(cells, workload)
    tree = fit_tree(_frame(tg, SCENARIO_INPUTS[workload]), [t["target"] for t in tg], kind="classifier",
                    max_depth=max_depth)
    return tree, _completion(cells, workload)


def _choices(tree: Tree, completion: Mapping[str, str], cells: Sequence[Mapping[str, Any]],
             workload: str) -> dict[str, str]:
    """The full setting the policy picks in each scenario of ``cells``."""
    return {t["scenario"]: completion[str(tree.predict({k: t[k] for k in SCENARIO_INPUTS[workload]}))]
            for t in _targets(cells, workload)}


def fit_regressor(cells: Sequence[Mapping[str, Any]], workload: str, *, max_depth: int = MAX_DEPTH) -> Tree:
    cols = (*SCENARIO_INPUTS[workload], *SETTING_INPUTS[workload])
    return fit_tree(_frame(cells, cols), [math.log(c["rel"]) for c in cells], kind="regressor", max_depth=max_depth)


def _folds(cells: Sequence[Mapping[str, Any]], key: str) -> list[tuple[str, list, list]]:
    groups = sorted({str(c[key]) for c in cells})
    return [(g, [c for c in cells if str(c[key]) != g], [c for c in cells if str(c[key]) == g]) for g in groups]


def held_out_choices(cells: Sequence[Mapping[str, Any]], workload: str, key: str,
                     *, max_depth: int = MAX_DEPTH) -> dict[str, str] | None:
    """The classifier's choice in each scenario when trained without the scenarios sharing its ``key``
    (scenario, pattern or scale); None when there are fewer than two groups."""
    folds = _folds(cells, key)
    if len(folds) < 2:
        return None
    out: dict[str, str] = {}
    for _, train, test in folds:
        tree, comp = fit_classifier(train, workload, max_depth=max_depth)
        out.update(_choices(tree, comp, test, workload))
    return out


def held_out_regression(cells: Sequence[Mapping[str, Any]], workload: str, key: str,
                        *, max_depth: int = MAX_DEPTH) -> tuple[dict[str, str], float] | None:
    """The regressor's best-predicted setting per scenario and its mean absolute error of log relative
    performance, each scenario judged by a tree trained without the scenarios sharing its ``key``."""
    folds = _folds(cells, key)
    if len(folds) < 2:
        return None
    cols = (*SCENARIO_INPUTS[workload], *SETTING_INPUTS[workload])
    choice: dict[str, str] = {}
    err = []
    for _, train, test in folds:
        tree = fit_regressor(train, workload, max_depth=max_depth)
        pred: dict[str, list[tuple[float, str]]] = {}
        for c in test:
            p = float(tree.predict({k: c[k] for k in cols}))
            err.append(abs(p - math.log(c["rel"])))
            pred.setdefault(c["scenario"], []).append((-p, c["setting"]))
        for sc, ps in pred.items():
            choice[sc] = min(ps)[1]
    return choice, float(sum(err) / len(err))


def _ranges(cells: Sequence[Mapping[str, Any]], workload: str) -> dict[str, list[float]]:
    return {k: [min(float(c[k]) for c in cells), max(float(c[k]) for c in cells)]
            for k in SCENARIO_INPUTS[workload] if k != "pattern"}


def train(rows: Sequence[Mapping[str, Any]], *, table_sha256: str, max_depth: int = MAX_DEPTH) -> dict[str, Any]:
    """The model (a JSON-able dict) from training-table rows."""
    if not 1 <= max_depth <= MAX_DEPTH:
        raise UsageError(f"--max-depth {max_depth}: trees are kept readable at depth 1 to {MAX_DEPTH}")
    workloads = check_enough(rows)
    out: dict[str, Any] = {}
    for wl in workloads:
        cells = cells_of(rows, wl)
        cls, comp = fit_classifier(cells, wl, max_depth=max_depth)
        reg = fit_regressor(cells, wl, max_depth=max_depth)
        cv = held_out_regression(cells, wl, "scenario", max_depth=max_depth)
        labels = sorted({c["setting"] for c in cells})
        out[wl] = {
            "classifier": cls.to_dict(),
            "regressor": reg.to_dict(),
            "candidates": {lb: setting_of_label(wl, lb) for lb in labels},
            "completion": comp,
            "ranges": _ranges(cells, wl),
            "patterns": sorted({c["pattern"] for c in cells}),
            "scales": sorted({c["scale"] for c in cells}),
            "scenarios": len({c["scenario"] for c in cells}),
            "runs": int(sum(c["runs"] for c in cells)),
            "cv_log_mae": cv[1] if cv else None,
        }
    wl_rows = [r for r in rows if r["workload"] in workloads]
    hosts = sorted({str(r["host"]) for r in wl_rows if r.get("host")})
    fs = sorted({str(r["fs_type"]) for r in wl_rows if r.get("fs_type")})
    known = "; ".join(
        f"{wl}: {out[wl]['scenarios']} scenarios ({', '.join(out[wl]['patterns'])} on arrays "
        f"{', '.join(out[wl]['scales'])}), {len(out[wl]['candidates'])} settings, {out[wl]['runs']} runs"
        for wl in workloads)
    return {
        "schema": MODEL_SCHEMA,
        "features_version": FEATURES_VERSION,
        "table_sha256": table_sha256,
        "max_depth": max_depth,
        "hosts": hosts,
        "fs_types": fs,
        # host names stay in "hosts" (for whoever trains) but out of the text every report shows (--obfuscate)
        "trained_on": f"{known}; measured on {len(hosts) or '?'} host(s) ({', '.join(fs) or '?'})",
        "workloads": out,
    }


def model_text(model: Mapping[str, Any]) -> str:
    """The model file's text: the same model gives the same bytes."""
    return json.dumps(model, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def train_files(*, table: str | os.PathLike, out: str | os.PathLike, max_depth: int = MAX_DEPTH) -> dict[str, Any]:
    """Train from a table CSV and write the model JSON; returns the model."""
    rows = read_table(table)
    model = train(rows, table_sha256=sha256_of(table), max_depth=max_depth)
    p = Path(out)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(model_text(model))
    return model


def train_command(*, sweeps: Sequence[str | os.PathLike] = (), table: str | os.PathLike | None = None,
                  out: str | os.PathLike, table_out: str | os.PathLike | None = None,
                  max_depth: int = MAX_DEPTH) -> tuple[dict[str, Any], Path]:
    """What ``iodiag recommend train`` does: sweeps -> table CSV (``table_out``, default next to the model as
    ``<model>.training.csv``) -> model JSON, or a given table -> model.  Returns (model, table used)."""
    if bool(sweeps) == bool(table):
        raise UsageError("give sweep folders or --table, not both" if sweeps else "nothing to train on",
                         hint="iodiag recommend train SWEEP_DIR... --out model.json, or --table training.csv")
    if sweeps:
        rows = table_from_sweeps(sweeps)
        check_enough(rows)  # before writing anything
        used = write_table(rows, table_out or Path(out).with_suffix(".training.csv"))
    else:
        used = Path(table)
    return train_files(table=used, out=out, max_depth=max_depth), used


# ----------------------------------------------------------------------------------------------- evaluation
def evaluate(rows: Sequence[Mapping[str, Any]], *, max_depth: int = MAX_DEPTH) -> dict[str, Any]:
    """Kunkel's comparison per workload, with the tree's choices held out by scenario, pattern and scale."""
    from .kunkel import MEANS, defaults_table

    res: dict[str, Any] = {}
    for wl in check_enough(rows):
        cells = cells_of(rows, wl)
        dt = defaults_table([c["scenario"] for c in cells], [c["setting"] for c in cells],
                            [c["time_s"] for c in cells])
        policies = []
        cls, comp = fit_classifier(cells, wl, max_depth=max_depth)
        policies.append(("tree, trained on all scenarios (in-sample)", _choices(cls, comp, cells, wl)))
        for key, what in (("scenario", "leave one scenario out"), ("pattern", "leave one access pattern out"),
                          ("scale", "leave one array scale out")):
            ch = held_out_choices(cells, wl, key, max_depth=max_depth)
            if ch is not None:
                policies.append((f"tree, {what}", ch))
        rg = held_out_regression(cells, wl, "scenario", max_depth=max_depth)
        if rg is not None:
            policies.append(("regression tree's best, leave one scenario out", rg[0]))
        scored = []
        for name, choice in policies:
            sc = dt.score_policy(name, choice)
            scored.append((sc, {m: dt.regret_share(sc, m) for m in MEANS}))
        best = {m: dt.best_default(m).name for m in MEANS}
        res[wl] = {"table": dt, "policies": scored, "best_default": best, "cells": cells,
                   "scales": sorted({c["scale"] for c in cells}), "patterns": sorted({c["pattern"] for c in cells}),
                   "reg_mae": rg[1] if rg else None}
    res["pathologies"] = _pathologies(rows, max_depth=max_depth)
    return res


# The pathologies of the thesis behind iodiag, reproduced small in the training sweep: (what, scenario, setting)
PATHOLOGIES = (
    ("whole-variable read from a Zarr store chunked (1, ·, ·, ·)", "read:whole:1024x2x46x90", "step/none/v3"),
    ("conversion writing thousands of tiny chunks (2,736 of 49 kB)", "convert:conversion:24x19x181x360",
     "chunk_mb=0.05/none/1 workers"),
    ("Dask conversion with 1-step chunks (1,024 of 33 kB)", "convert:conversion:1024x2x46x90",
     "chunk_mb=0.05/none/2 workers"),
)


def _pathologies(rows: Sequence[Mapping[str, Any]], *, max_depth: int) -> list[dict[str, Any]]:
    """The model (trained on every row: in-sample) applied to each pathology's measured features: its advice,
    its expected speedup and band, and the speedup the table measured for that advice."""
    from .model import Model

    model = Model(train(rows, table_sha256="", max_depth=max_depth))
    out = []
    for what, sc, st in PATHOLOGIES:
        wl = sc.split(":")[0]
        cells = {c["setting"]: c for c in cells_of(rows, wl) if c["scenario"] == sc}
        r = next((r for r in rows if r["scenario"] == sc and r["setting"] == st), None)
        if r is None or st not in cells:
            continue
        f = dict(r, shape=tuple(int(x) for x in r["shape"].split("x")))
        rec = model.advise(f)
        label = setting_label(wl, {**{k: rec.settings.get(k) for k in ("compressor", "workers", "zarr_format")},
                                   "chunk_mb_target": rec.settings.get("chunk_mb"),
                                   "layout": rec.settings.get("chunk_layout")}) if rec.settings else None
        out.append({"what": what, "scenario": sc, "setting": st, "advice": label,
                    "expected": rec.expected_speedup, "low": rec.speedup_low, "high": rec.speedup_high,
                    "measured": (cells[st]["time_s"] / cells[label]["time_s"]) if label in cells else None})
    return out


def evaluate_files(*, table: str | os.PathLike, markdown: str | os.PathLike | None = None,
                   max_depth: int = MAX_DEPTH, shown_path: str | None = None) -> tuple[dict[str, Any], str]:
    rows = read_table(table)
    res = evaluate(rows, max_depth=max_depth)
    text = evaluation_markdown(res, table_path=shown_path or str(table), rows=len(rows))
    if Path(table).resolve() == SHIPPED_TABLE.resolve():  # the measured pairs calibrate the shipped model only
        from .calibration import evaluate as evaluate_calibration

        res["calibration"] = evaluate_calibration()
        text += calibration_markdown(res["calibration"])
    if markdown:
        Path(markdown).parent.mkdir(parents=True, exist_ok=True)
        Path(markdown).write_text(text)
    return res, text


__all__ = ["MODEL_SCHEMA", "SHIPPED_TABLE", "SHIPPED_MODEL", "RETRAIN", "MIN_SCENARIOS", "MIN_REPS",
           "table_from_sweeps", "write_table", "read_table", "cells_of", "check_enough", "train", "train_files",
           "train_command",
           "model_text", "evaluate", "evaluate_files", "evaluation_markdown", "setting_label", "setting_of_label"]
