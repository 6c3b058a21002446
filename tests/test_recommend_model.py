"""The trained recommender on real measurements: the committed training table (the default sweep measured on
this machine), the shipped model rebuilt from it bit for bit, advice and abstention, bad model files, a sweep too
small to train, and features of a real job recorded with ``iodiag run``."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from iodiag.errors import ModelUnusable, UsageError
from iodiag.recommend import train as T
from iodiag.recommend.features import BASED_ON_MEASURED, SCENARIO_INPUTS, SETTING_INPUTS, job_features, layout_of
from iodiag.recommend.model import load_model

from conftest import REPO, cli_env, require_embedded, run_cli


@pytest.fixture(scope="module")
def rows():
    return T.read_table(T.SHIPPED_TABLE)


def _features_of(rows, scenario: str, setting: str) -> dict:
    """Features of one measured (scenario, setting) cell, as a job that ran it would have them."""
    r = next(r for r in rows if r["scenario"] == scenario and r["setting"] == setting)
    shape = tuple(int(s) for s in r["shape"].split("x"))
    f = {k: r[k] for k in (*SCENARIO_INPUTS[r["workload"]], *SETTING_INPUTS[r["workload"]], "workload",
                           "compressor", "zarr_format", "workers", "itemsize")}
    f.update(shape=shape, chunk_mb_target=r["chunk_mb_target"], fs_type=r["fs_type"])
    return f


def _best_and_worst(rows, scenario: str) -> tuple[str, str, float]:
    cells = [c for c in T.cells_of(rows, scenario.split(":")[0]) if c["scenario"] == scenario]
    b, w = min(cells, key=lambda c: c["time_s"]), max(cells, key=lambda c: c["time_s"])
    return b["setting"], w["setting"], w["time_s"] / b["time_s"]


def test_committed_table_is_measurements_of_every_setting_three_times(rows):
    assert T.check_enough(rows) == ["convert", "read"]
    for wl in ("convert", "read"):
        cells = T.cells_of(rows, wl)
        assert {c["runs"] for c in cells} == {3}, "every setting in every scenario measured exactly 3 times"
        assert all(c["time_s"] > 0 for c in cells)
    # the layout column is the chunk geometry's class, recomputed here from the shapes
    for r in rows[:50]:
        shape = [int(s) for s in r["shape"].split("x")]
        assert layout_of(shape, [int(c) for c in r["chunks"].split("x")]) == r["layout"]


def test_shipped_model_is_rebuilt_bit_for_bit_from_the_committed_table(tmp_path):
    pytest.importorskip("sklearn")
    out = tmp_path / "model.json"
    T.train_files(table=T.SHIPPED_TABLE, out=out)
    assert out.read_bytes() == T.SHIPPED_MODEL.read_bytes(), f"retrain: {T.RETRAIN}"


def test_trees_are_shallow_and_the_model_says_what_it_knows():
    m = load_model()
    for part in m.parts.values():
        assert part.classifier.depth() <= 4 and part.regressor.depth() <= 4
    assert {"chunk_mb", "chunk_layout", "compressor", "zarr_format", "workers"} == set(m.settings)
    assert "1024x2x46x90" in m.scenarios_known and "ext4" in m.scenarios_known
    assert any("Lustre" in s for s in m.not_trained)


def test_whole_read_of_one_step_chunks_gets_the_measured_best_layout_with_its_gain(rows):
    """The thesis' pathology, small: the whole variable read from a store chunked (1, ·, ·, ·)."""
    sc = "read:whole:1024x2x46x90"
    best, _, _ = _best_and_worst(rows, sc)
    f = _features_of(rows, sc, "step/none/v3")
    rec = load_model().advise(f)
    assert rec.abstain is None and rec.source == "tree"
    assert rec.settings["chunk_layout"] == best.split("/")[0] == "block"
    assert rec.settings["chunks"][0] > 1 and tuple(rec.settings["chunks"][1:]) == (2, 46, 90)
    cells = {c["setting"]: c["time_s"] for c in T.cells_of(rows, "read") if c["scenario"] == sc}
    measured = cells["step/none/v3"] / min(cells.values())
    assert measured >= 3  # the table itself shows the pathology
    assert rec.expected_speedup >= 3 and rec.speedup_low <= rec.expected_speedup <= rec.speedup_high
    assert any(c.kind == "arg" and c.name == "--chunks" for c in rec.changes)
    assert any(c.kind == "snippet" and "to_zarr" in c.text for c in rec.changes)
    marked = [ln for ln in rec.rules if ln.startswith("▶")]
    assert marked and "block" in marked[-1] and "pattern" in rec.rules[0]


def test_tiny_chunk_conversion_is_told_to_use_bigger_chunks(rows):
    sc = "convert:conversion:1024x2x46x90"
    f = _features_of(rows, sc, "chunk_mb=0.05/none/1 workers")
    rec = load_model().advise(f)
    assert rec.abstain is None
    assert rec.settings["chunk_mb"] > 0.05
    assert any(c.name == "--chunk-mb" for c in rec.changes)
    assert rec.expected_speedup > 1


def test_the_model_abstains_outside_its_coverage(rows):
    m = load_model()
    base = _features_of(rows, "read:whole:1024x2x46x90", "step/none/v3")
    cases = {
        "pattern = point was never seen": {**base, "pattern": "point"},
        "outside the trained range": {**base, "array_mb": 50_000.0},
        "measured on ext4 only": {**base, "fs_type": "lustre"},
        "workload kind is not known": {**base, "workload": None, "why_unknown": "no Zarr array metadata"},
        "pattern cannot be told": {**base, "pattern": None},
    }
    for why, f in cases.items():
        rec = m.advise(f)
        assert rec.abstain and why in rec.abstain and not rec.settings, (why, rec.abstain)


def test_advising_never_imports_scikit_learn():
    code = ("import sys, json; from iodiag.recommend.model import load_model; from iodiag.recommend import train as T;"
            "rows = T.read_table(T.SHIPPED_TABLE); r = next(r for r in rows if r['workload'] == 'read');"
            "f = dict(r, shape=tuple(int(s) for s in r['shape'].split('x')));"
            "rec = load_model().advise(f); assert rec.abstain is None, rec.abstain;"
            "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ('sklearn', 'pandas', 'scipy'))))")
    out = subprocess.run([sys.executable, "-c", code], env=cli_env(), capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == []


# ------------------------------------------------------------------------------------------------ bad model files
def _model_dict() -> dict:
    return json.loads(T.SHIPPED_MODEL.read_text())


@pytest.mark.parametrize("case, text, message, a_model", [
    ("missing", None, "no recommender model", False),
    ("not json", "{nope", "not JSON", False),
    ("other file", json.dumps({"schema": "iodiag.report/1"}), "is not a recommender model", False),
    ("other schema", "SCHEMA2", "of schema 'iodiag.recommend-model/2'", True),
    ("untrained", "UNTRAINED", "untrained", True),
    ("stale", "STALE", "stale", True),
    ("damaged", "DAMAGED", "damaged", True),
])
def test_unusable_model_files_say_how_to_retrain(tmp_path, case, text, message, a_model):
    p = tmp_path / "m.json"
    d = _model_dict()
    if text == "SCHEMA2":
        d["schema"] = "iodiag.recommend-model/2"
    elif text == "UNTRAINED":
        d["workloads"] = {}
    elif text == "STALE":
        d["features_version"] = 0
    elif text == "DAMAGED":
        del d["workloads"]["read"]["classifier"]["left"]
    if text is not None:
        p.write_text(text if text not in ("SCHEMA2", "UNTRAINED", "STALE", "DAMAGED") else json.dumps(d))
    before = p.read_bytes() if p.exists() else None
    with pytest.raises(ModelUnusable) as ei:
        load_model(p)
    assert message in ei.value.message and str(p) in ei.value.message
    out = Path(re.search(r"iodiag recommend train SWEEP_DIR\.\.\. --out (\S+)", ei.value.hint).group(1))
    if a_model or before is None:  # a model (or nothing) at p: retraining replaces it
        assert out == p
    else:  # p holds something else, the user's: the command writes a new file beside it, never over p
        assert out != p and out.parent == p.parent and not out.exists() and f"{p} is left as it is" in ei.value.hint
    assert (p.read_bytes() if p.exists() else None) == before


def test_a_file_that_is_no_model_gets_a_free_name_beside_it(tmp_path):
    report = tmp_path / "job.json"
    report.write_text(json.dumps({"schema": "iodiag.report/1"}))
    (tmp_path / "job-model.json").write_text("taken")
    with pytest.raises(ModelUnusable) as ei:
        load_model(report)
    out = Path(re.search(r"--out (\S+)", ei.value.hint).group(1))
    assert out == tmp_path / "job-model-2.json" and not out.exists()
    # a folder (e.g. the sweep directory given by mistake): the model goes next to it, not into or over it
    with pytest.raises(ModelUnusable) as ei:
        load_model(tmp_path)
    out = Path(re.search(r"--out (\S+)", ei.value.hint).group(1))
    assert out.parent == tmp_path.parent and out != tmp_path and not out.exists()


def test_shipped_model_is_stale_when_the_table_changed(tmp_path, monkeypatch):
    import iodiag.recommend.model as M

    table = tmp_path / "training.csv"
    table.write_text(T.SHIPPED_TABLE.read_text().replace("\n", "\n", 1) + "\n")
    monkeypatch.setattr(M, "SHIPPED_TABLE", table)
    with pytest.raises(ModelUnusable) as ei:
        load_model()
    assert "stale" in ei.value.message and "--table src/iodiag/recommend/data/training.csv" in ei.value.hint
    r = run_cli("recommend", "train", "--table", str(tmp_path / "none.csv"), "--out", str(tmp_path / "m.json"))
    assert r.returncode == 3 and b"training table" in r.stderr and b"Traceback" not in r.stderr


def test_a_sweep_too_small_says_how_many_runs_are_missing(rows):
    convert = [r for r in rows if r["workload"] == "convert"]
    # one scenario only: a whole scenario's runs are missing (settings x 3 repetitions)
    one = [r for r in convert if r["scenario"] == convert[0]["scenario"]]
    n_settings = len({r["setting"] for r in one})
    with pytest.raises(UsageError) as ei:
        T.check_enough(one)
    assert f"{n_settings * 3} runs missing" in ei.value.message and "1 more scenario" in ei.value.message
    # one run of one setting lost: 1 run missing
    with pytest.raises(UsageError) as ei:
        T.check_enough(convert[1:])
    assert "convert: " in ei.value.message and ": 1 runs missing" in ei.value.message


def test_train_and_evaluate_commands(tmp_path):
    pytest.importorskip("sklearn")
    r = run_cli("recommend", "train", "--table", str(T.SHIPPED_TABLE), "--out", str(tmp_path / "m.json"), "--json")
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    assert set(s["workloads"]) == {"convert", "read"} and s["workloads"]["read"]["scenarios"] >= 9
    assert (tmp_path / "m.json").read_bytes() == T.SHIPPED_MODEL.read_bytes()
    md = tmp_path / "v.md"
    r = run_cli("recommend", "evaluate", "--markdown", str(md))
    assert r.returncode == 0, r.stderr
    text = md.read_text()
    assert text == (REPO / "docs" / "recommender" / "validation.md").read_text(), \
        "regenerate: iodiag recommend evaluate --markdown docs/recommender/validation.md"
    assert "leave one array scale out" in text and "oracle" in text


# ------------------------------------------------------------------------------------------------ real jobs
LONG = ("--time", "1024", "--plev", "2", "--lat", "46", "--lon", "90")  # a trained scale: 34 MB, 33 kB per step


def _record(tmp, out: str, gen: tuple, name: str, workload: tuple):
    """Make an input with `iodiag workload gen`, run a workload on it under `iodiag run` (embedded collector) in a
    job store of its own; the job's profile, its record and the store's environment."""
    from iodiag.analyzers.job import load_job_record
    from iodiag.jobs.store import find_job

    require_embedded()
    env = {"IODIAG_HOME": str(tmp / "home")}
    g = run_cli("workload", "gen", "--out", str(tmp / out), *gen, *LONG, env=env)
    assert g.returncode == 0, g.stderr
    r = run_cli("run", "--name", name, "--collector", "embedded", "--", sys.executable, "-m", *workload, env=env)
    assert r.returncode == 0, r.stderr
    rec = find_job("last", root=env["IODIAG_HOME"])
    return load_job_record(rec), rec
@pytest.fixture(scope="module")
def read_job(tmp_path_factory):
    """A whole-variable read of a (1, ·, ·, ·)-chunked Zarr store at a trained scale, recorded by `iodiag run`."""
    tmp = tmp_path_factory.mktemp("job")
    store = str(tmp / "long.zarr")
    return (tmp, *_record(tmp, "long.zarr", ("--format", "zarr3", "--chunks", "1,2,46,90"), "h18-whole",
                          ("iodiag.workloads.read", "--path", store, "--patterns", "whole", "--api", "xarray-dask",
                           "--repeat", "1")))


def test_job_features_of_a_recorded_read_job(read_job, monkeypatch):
    tmp, prof, rec = read_job
    monkeypatch.setenv("IODIAG_HOME", str(tmp / "home"))  # the job's folder is found by its id
    f = job_features(prof)
    assert f["based_on"] != BASED_ON_MEASURED
    assert (f["workload"], f["pattern"], f["layout"], f["shape"]) == ("read", "whole", "step", (1024, 2, 46, 90))
    assert f["compressor"] == "none" and f["zarr_format"] == 3 and f["n_chunks"] == 1024
    m = f["measured"]
    assert m["fs_type"] == T._fs_type(str(tmp)) and m["files"] >= 1024  # the store's file system and m["bytes_read"] >= 1024 * 2 * 46 * 90 * 4
    advice = load_model().advise(f)
    assert advice.abstain is None and advice.settings["chunk_layout"] == "block"

    # the same job without its results record: measured features only, and it says so
    shutil.move(str(rec.folder / "results.json"), str(tmp / "results.json"))
    try:
        g = job_features(prof)
    finally:
        shutil.move(str(tmp / "results.json"), str(rec.folder / "results.json"))
    assert g["based_on"] == BASED_ON_MEASURED
    assert (g["workload"], g["pattern"], g["layout"]) == ("read", "whole", "step")  # from counters and metadata
    advice = load_model().advise(g)
    assert advice.based_on == BASED_ON_MEASURED and advice.settings["chunk_layout"] == "block"


@pytest.fixture(scope="module")
def convert_job(tmp_path_factory):
    """A conversion writing a thousand tiny chunks (--chunk-mb 0.05) at a trained scale, recorded by `iodiag run`."""
    tmp = tmp_path_factory.mktemp("conv")
    return (tmp, *_record(tmp, "long.nc", (), "h18-conv",
                          ("iodiag.workloads.convert", "--src", str(tmp / "long.nc"), "--dst", str(tmp / "long.zarr"),
                           "--chunk-mb", "0.05", "--zarr-format", "3", "--cluster", "threads")))


def test_job_features_of_a_recorded_conversion(convert_job, monkeypatch):
    tmp, prof, rec = convert_job
    monkeypatch.setenv("IODIAG_HOME", str(tmp / "home"))
    f = job_features(prof)
    assert (f["workload"], f["pattern"], f["chunk_mb_target"], f["n_chunks"]) == ("convert", "conversion", 0.05, 1024)
    assert f["compressor"] == "none" and f["workers"] == 1 and f["dims"] == ["time", "plev", "lat", "lon"]
    advice = load_model().advise(f)
    assert advice.abstain is None and advice.settings["chunk_mb"] > 0.05 and advice.expected_speedup > 1
    assert [c.name for c in advice.changes if c.kind == "arg"][0] == "--chunk-mb"
    # measured only: the job wrote the Zarr array it read from NetCDF, so it is told apart as a conversion
    g = job_features(prof, params={})
    assert g["based_on"] == BASED_ON_MEASURED and (g["workload"], g["pattern"]) == ("convert", "conversion")
    assert g["layout"] == "step" and g["n_chunks"] == 1024


def test_shipped_model_is_stale_when_its_table_was_edited_later(tmp_path, monkeypatch):
    """The shipped model is checked against its training table only when the table is newer than the model
    (no hashing, no OpenSSL import, on every report); an edited table then makes the model stale, while both
    files as written by one checkout (either order, within a second) load without a hash."""
    import os

    from iodiag.recommend import model as M

    mdl, tab = tmp_path / "model.json", tmp_path / "training.csv"
    shutil.copy(T.SHIPPED_MODEL, mdl)
    shutil.copy(T.SHIPPED_TABLE, tab)
    monkeypatch.setattr(M, "SHIPPED_MODEL", mdl)
    monkeypatch.setattr(M, "SHIPPED_TABLE", tab)
    t = mdl.stat().st_mtime
    os.utime(tab, (t + 0.5, t + 0.5))  # same checkout
    assert load_model(None).path == mdl
    with tab.open("a") as fh:
        fh.write("\n")
    os.utime(tab, (t + 0.5, t + 0.5))
    assert load_model(None).path == mdl  # not looked at: written with the model
    os.utime(tab, (t + 60, t + 60))  # edited a minute after the model was built
    with pytest.raises(ModelUnusable, match="stale"):
        load_model(None)
