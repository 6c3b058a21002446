"""recommend/ says what to change; iodiag verify re-runs and measures it.

On real data: corpus logs for the rules' text and the measured-features-only path, real workloads recorded as
jobs for verify (run without a collector, or under Darshan/the embedded collector where available).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from conftest import REPO, corpus_path, require_darshan_runtime, run_cli
from iodiag.config import Config
from iodiag.errors import UsageError

VPIC = "darshan/darshan-util/pydarshan/darshan/tests/input/sample.darshan"  # misaligned on Lustre
PY = sys.executable


def test_detectors_write_no_advice_and_rules_do():
    from iodiag.analyzers.detectors import diagnose
    from iodiag.analyzers.load import load_job
    from iodiag.recommend.rules import ADVICE, advise

    prof = load_job([str(corpus_path(VPIC))])
    raw = diagnose(prof)
    assert raw and all(f.recommendation == "" for f in raw)  # detectors say what is wrong, with numbers
    advised = {f.id: f for f in advise(raw)}
    mis = advised["misaligned"]
    a = raw[[f.id for f in raw].index("misaligned")].evidence["alignment_bytes"]
    assert f"H5Pset_alignment(fapl, {a}, {a})" in mis.recommendation  # the rule's text, from the evidence
    assert all(f.recommendation for f in advised.values())
    # no detector module builds advice text any more: every finding id has its rule
    src = (REPO / "src" / "iodiag" / "analyzers" / "detectors")
    assert not [p.name for p in src.glob("*.py") if "recommendation=" in p.read_text()]
    from iodiag.analyzers.detectors import FINDING_IDS

    assert set(FINDING_IDS) <= set(ADVICE)


def test_log_without_workload_params_is_advised_from_measured_features_only(tmp_path):
    from iodiag.analyzers.load import load_job
    from iodiag.service import advise_profile

    prof = load_job([str(corpus_path(VPIC))])
    adv = advise_profile(profile=prof, config=Config(), home=corpus_path(VPIC).parent)
    assert adv.params is None and adv.recommendations
    assert all(r.based_on.startswith("measured features only") for r in adv.recommendations), \
        [r.based_on for r in adv.recommendations]
    align = next(r for r in adv.recommendations if r.id == "alignment")
    assert align.source == "rules" and "misaligned" in align.addresses and align.settings["alignment"] > 0
    model = adv.recommendations[-1]
    assert model.abstain and model.source == "tree"  # the model's abstention, with its reason, listed last
    r = run_cli("recommend", str(corpus_path(VPIC)), env={"COLUMNS": "80"})
    out = r.stdout.decode()
    assert r.returncode == 0, r.stderr.decode()
    assert "measured features only" in out and "H5Pset_alignment" in out
    j = json.loads(run_cli("recommend", str(corpus_path(VPIC)), "--json").stdout)
    assert j["schema"] == "iodiag.recommend/1" and j["params"] is None and j["based_on"] == "measured features only"


def test_report_json_lists_recommendations_additively(tmp_path):
    page = tmp_path / "r.html"
    r = run_cli("report", str(corpus_path(VPIC)), "--html-path", str(page), env={"COLUMNS": "80"})
    assert r.returncode == 0 and "What to change" in r.stdout.decode()
    html = page.read_text()
    assert 'id="recommendations"' in html and "H5Pset_alignment" in html[html.index('id="recommendations"'):]
    r = run_cli("report", str(corpus_path(VPIC)), "--json")
    rep = json.loads(r.stdout)
    assert rep["schema"] == "iodiag.report/1"
    ids = [x["id"] for x in rep["recommendations"]]
    assert "alignment" in ids
    f = next(f for f in rep["findings"] if f["id"] == "misaligned")
    assert "H5Pset_alignment" in f["recommendation"]  # the finding keeps its recommendation string


def test_tree_setting_wins_and_the_rule_defers():
    from iodiag.analyzers.load import load_job
    from iodiag.recommend.engine import combine, reconcile
    from iodiag.recommend.recommendation import Change, Recommendation
    from iodiag.recommend.rules import diagnose_with_advice, rule_recommendations

    prof = load_job([str(corpus_path(VPIC))])
    findings = diagnose_with_advice(prof)
    rules = rule_recommendations(prof, findings)
    rule = next(r for r in rules if r.id == "alignment")
    other = rule.settings["alignment"] * 4
    tree = Recommendation(id="alignment", title=f"Align to {other}", settings={"alignment": other},
                          changes=(Change("config", f"striping_unit={other}", "striping_unit", other),), source="tree",
                          rules=("▶ if mean_request_bytes > 1,048,576:", "▶   → alignment 4 MiB"))
    out = combine(tree, rules, findings)
    assert out[0] is not tree and out[0].source == "tree" and out[0].settings == {"alignment": other}
    # the rule for the same setting is gone, and the tree's notes say it deferred
    assert not [r for r in out[1:] if "alignment" in r.settings]
    assert any("defers to the trained model" in n for n in out[0].notes)
    assert "misaligned" in out[0].addresses
    # the finding's text says the model overrides it, so report and What to change agree
    mis = next(f for f in reconcile(findings, out) if f.id == "misaligned")
    assert f"the trained model's advice wins: align to {other}" in mis.recommendation


def test_no_model_module_is_an_abstention_not_an_error():
    from iodiag.recommend.engine import NO_MODEL, load_tree

    model, why = load_tree()
    if model is None:
        assert why  # missing model: a reason (rules still apply)
    else:  # pragma: no cover - a branch with the trained model merged
        assert why is None
    with pytest.raises(Exception) as ei:  # an explicit model file that cannot be used: a clear error
        load_tree("/nonexistent/model.json", strict=True)
    assert "model" in str(ei.value)
    assert NO_MODEL.endswith("rules only")


# ---------------------------------------------------------------------------------------------- verify
def _record(tmp_path: Path, argv: list[str], *, name: str = "w"):
    from iodiag.jobs.run import RunOptions, run_job

    res = run_job(RunOptions(command=argv, collector="none", dask=False, name=name, store=str(tmp_path / "store")),
                  cwd=str(tmp_path))
    assert res.outcome.exit_code == 0
    return res.record


@pytest.fixture
def tiny_read_job(tmp_path, monkeypatch):
    from iodiag.workloads.gen import generate

    generate(out=str(tmp_path / "t.zarr"), format="zarr2", time=40, plev=1, lat=8, lon=16, chunks="1,1,8,16")
    rec = _record(tmp_path, [PY, "-m", "iodiag.workloads.read", "--path", "t.zarr", "--patterns", "whole",
                             "--repeat", "1"])
    monkeypatch.setenv("IODIAG_HOME", str(tmp_path / "store"))
    return rec


WRITER = """import argparse, os
p = argparse.ArgumentParser()
p.add_argument("--out", required=True)
p.add_argument("--size", type=int, default=1 << 20)
p.add_argument("--block", type=int, default=16)
a = p.parse_args()
fd = os.open(a.out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
buf = b"x" * a.block
for _ in range(a.size // a.block):
    os.write(fd, buf)
os.close(fd)
"""


def test_verify_interleaves_five_runs_per_side_and_gives_a_band(tmp_path, monkeypatch):
    """A script writing 1 MiB in 16-byte write calls, verified with --block 65536 (a flag on its command line)."""
    from iodiag.reports.verify import render_verify_html, render_verify_text
    from iodiag.service import verify_job

    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    rec = _record(tmp_path, [PY, str(script), "--out", "o.bin", "--block", "16"], name="writer")
    monkeypatch.setenv("IODIAG_HOME", str(tmp_path / "store"))
    seen = []
    d = verify_job(target=rec.id, config=Config(), reps=5, sets=["block=65536"],
                   progress=lambda k, n: seen.append((k, n)))
    assert d["schema"] == "iodiag.verify/1" and d["reps"] == 5 and d["recommendation"] is None
    assert d["order"] == "AB" * 5 and len(d["runs"]) == 10 and seen[-1] == (10, 10)
    assert [r["side"] for r in d["runs"]] == ["before", "after"] * 5
    assert all(r["exit_code"] == 0 and r["wall_s"] > 0 for r in d["runs"])
    assert "--block 65536" in d["after"]["command"] and "--block 16" in d["before"]["command"]
    assert "workload_s" not in d["speedup"]  # a foreign script reports no timed section of its own
    for key in ("wall_s", "cpu_s"):
        s = d["speedup"][key]
        assert s["low"] <= s["estimate"] <= s["high"] and s["pairs"] == 5
        assert s["verdict"] in ("faster", "slower", "no measurable change")
    # 65,536 write calls against 16: the CPU time of the process tree says so through any load
    assert d["speedup"]["cpu_s"]["estimate"] > 1.5 and d["speedup"]["cpu_s"]["verdict"] == "faster"
    text = render_verify_text(d, width=80)
    assert "Verdict:" in text and "95 % band" in text and max(len(x) for x in text.splitlines()) <= 80
    assert "before (median)" in render_verify_html(d)


def test_verify_rejects_a_setting_the_workload_does_not_take(tiny_read_job):
    from iodiag.service import verify_job

    with pytest.raises(UsageError) as ei:
        verify_job(target=tiny_read_job.id, config=Config(), reps=5, sets=["chunks=4,1,8,16"])
    assert "takes no --chunks" in ei.value.message and "--patterns" in ei.value.hint


def test_verify_a_job_without_a_recorded_command_is_a_clear_error(tmp_path):
    from iodiag.jobs.store import create_job

    rec = create_job(name="bare", root=str(tmp_path / "store"), record={})
    rec.update(status="complete")
    r = run_cli("verify", rec.id, "--set", "x=1", env={"IODIAG_HOME": str(tmp_path / "store")})
    err = r.stderr.decode()
    assert r.returncode == 2 and "has no recorded command" in err and "iodiag run" in err
    assert "Traceback" not in err


PROBE = """import json, os, sys
with open(os.environ["PROBE_LOG"], "a") as fh:
    fh.write(json.dumps(sys.argv) + "\\n")
"""


def _probe_job(tmp_path: Path, monkeypatch):
    """A foreign script that only appends its argv to $PROBE_LOG, recorded as a job (the recording's own line
    is then removed: what is left is what verify ran)."""
    script = tmp_path / "probe.py"
    script.write_text(PROBE)
    log = tmp_path / "argv.jsonl"
    monkeypatch.setenv("PROBE_LOG", str(log))
    rec = _record(tmp_path, [PY, str(script), "--alpha", "1", "in.dat", "7"], name="probe")
    monkeypatch.setenv("IODIAG_HOME", str(tmp_path / "store"))
    log.unlink()
    return rec, log


def _calls(log: Path) -> list[list[str]]:
    return [json.loads(x) for x in log.read_text().splitlines()] if log.exists() else []


def test_verify_runs_the_program_for_the_timed_runs_only(tmp_path, monkeypatch):
    """A probe script logs every argv it is started with: verify starts it 2 x reps times, never with --help,
    and a flag that is not on the recorded command line is refused without starting it at all."""
    from iodiag.service import verify_job

    rec, log = _probe_job(tmp_path, monkeypatch)
    d = verify_job(target=rec.id, config=Config(), reps=3, sets=["alpha=5"], positional=["4=9"])
    calls = _calls(log)  # each the program's sys.argv
    assert len(calls) == 2 * 3 and not any("--help" in c for c in calls)
    script = str(tmp_path / "probe.py")
    assert calls[0::2] == [[script, "--alpha", "1", "in.dat", "7"]] * 3
    assert calls[1::2] == [[script, "--alpha", "5", "in.dat", "9"]] * 3  # --alpha from the line, argv[4]
    assert d["changed"][:2] == ["--alpha", "argv[4] '7' -> '9'"] and d["reps"] == 3
    for bad, what in ((["beta=3"], "--beta is not on the recorded command line"),
                      (["OMP_NUM_THREADS=1", "gamma=1"], "--gamma is not on the recorded command line")):
        with pytest.raises(UsageError) as ei:
            verify_job(target=rec.id, config=Config(), reps=3, sets=bad)
        assert what in ei.value.message and "--after" in ei.value.hint and "--arg" in ei.value.hint
    with pytest.raises(UsageError, match=r"argv\[1\]\.\.argv\[4\]"):
        verify_job(target=rec.id, config=Config(), reps=3, positional=["5=x"])
    # an output that cannot be written is refused before the first run
    (tmp_path / "afile").write_text("")
    with pytest.raises(UsageError, match="cannot write there"):
        verify_job(target=rec.id, config=Config(), reps=3, positional=["4=9"],
                   outputs=[str(tmp_path / "afile" / "v.html")])
    with pytest.raises(UsageError, match="afile/o.dat: cannot write there"):  # an output the program would make
        verify_job(target=rec.id, config=Config(), reps=3, positional=["3=afile/o.dat"])
    assert len(_calls(log)) == 2 * 3  # none of the refused verifies started the program
    d = verify_job(target=rec.id, config=Config(), reps=2, after=f"{PY} probe.py --alpha 2 other.dat 7")
    assert _calls(log)[-1] == ["probe.py", "--alpha", "2", "other.dat", "7"] and len(_calls(log)) == 10
    assert d["changed"] == ["the command given with --after"]


def test_verify_cli_names_what_it_changed_and_runs_nothing_else(tmp_path, monkeypatch):
    rec, log = _probe_job(tmp_path, monkeypatch)
    html = tmp_path / "v.html"
    r = run_cli("verify", rec.id, "--reps", "2", "--arg", "3=b.dat", "--json", "--html", str(html),
                env={"IODIAG_HOME": str(tmp_path / "store"), "PROBE_LOG": str(log)})
    assert r.returncode == 0, r.stderr.decode()
    d = json.loads(r.stdout)
    assert d["changed"] == ["argv[3] 'in.dat' -> 'b.dat'"] and d["not_applied"] == [] and "wall_s" in d["speedup"]
    assert len(_calls(log)) == 4 and "argv[3]" in html.read_text()


CONVERT = """\"\"\"A user's NetCDF -> Zarr conversion: the chunk length along time is its third positional argument.\"\"\"
import sys

import xarray as xr
from distributed import Client, LocalCluster

if __name__ == "__main__":
    src, dst, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) as cl, Client(cl):
        ds = xr.open_dataset(src, chunks={"time": n})
        ds.to_zarr(dst, mode="w", zarr_format=2, consolidated=True)
"""


@pytest.fixture
def user_convert_job(tmp_path, monkeypatch):
    from iodiag.workloads.gen import generate

    generate(out=str(tmp_path / "in.nc"), time=120, plev=2, lat=8, lon=16)
    (tmp_path / "convert.py").write_text(CONVERT)
    rec = _record(tmp_path, [PY, "convert.py", "in.nc", "out.zarr", "1"], name="userconv")
    monkeypatch.setenv("IODIAG_HOME", str(tmp_path / "store"))
    return rec, tmp_path


def _zarr_chunks(store: Path) -> list[int]:
    return json.loads((store / "ta" / ".zarray").read_text())["chunks"]


def test_chunks_and_workers_apply_inside_an_unmodified_xarray_dask_script(user_convert_job):
    """The user's script takes the chunk length as a positional argument and has no --chunks: --set chunks and
    workers are applied by the preload at open_dataset, to_zarr and LocalCluster (real Dask cluster, real
    NetCDF and Zarr), the verify lists where each fired, and the store the last (after) run wrote has the
    chunks asked for; the script itself is not touched."""
    from iodiag.service import verify_job

    rec, tmp = user_convert_job
    src = (tmp / "convert.py").read_text()
    assert _zarr_chunks(tmp / "out.zarr") == [1, 2, 8, 16]  # as recorded
    d = verify_job(target=rec.id, config=Config(), reps=2, sets=["chunks=60,2,8,16", "workers=1"])
    where = {(a["setting"], a["where"]): a for a in d["applied"]}
    opened = where[("chunks", "xarray.open_dataset")]
    assert opened["value"] == {"time": 60, "plev": 2, "lat": 8, "lon": 16} and opened["asked"] == {"time": 1}
    assert opened["runs"] == 2 and ("chunks", "xarray.Dataset.to_zarr") in where
    assert where[("workers", "distributed.LocalCluster")]["asked"] == 2
    assert d["not_applied"] == [] and d["speedup"]["wall_s"]["pairs"] == 2
    assert d["before"]["command"] == d["after"]["command"]  # nothing on the command line changed
    assert _zarr_chunks(tmp / "out.zarr") == [60, 2, 8, 16]  # what the after run wrote
    assert (tmp / "convert.py").read_text() == src
    # the positional value itself, the other way to verify it
    d = verify_job(target=rec.id, config=Config(), reps=2, positional=["3=40"])
    assert d["changed"] == ["argv[3] '1' -> '40'"] and d["applied"] == []
    assert _zarr_chunks(tmp / "out.zarr") == [40, 2, 8, 16]


def test_a_setting_that_never_takes_effect_is_not_applied_and_gets_no_speedup(tmp_path, monkeypatch):
    """chunks on a Python script that never opens a dataset: the preload loads but the setting never fires, so
    verify says 'not applied: chunks' and reports no speedup (it would be the same program measured twice)."""
    from iodiag.reports.verify import render_verify_html, render_verify_text
    from iodiag.service import verify_job

    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    rec = _record(tmp_path, [PY, str(script), "--out", "o.bin", "--block", "4096"], name="writer")
    monkeypatch.setenv("IODIAG_HOME", str(tmp_path / "store"))
    d = verify_job(target=rec.id, config=Config(), reps=2, sets=["chunks=10,10"])
    assert d["not_applied"] == ["chunks"] and d["applied"] == [] and d["speedup"] == {}
    assert any(n.startswith("not applied: chunks") for n in d["notes"])
    text = render_verify_text(d, width=100)
    assert "not applied: chunks" in text and "Verdict: not applied" in text and "faster" not in text
    assert "not applied" in render_verify_html(d)
    # with a flag changed as well, the speedup is reported (it measures the flag) and chunks is still named
    d = verify_job(target=rec.id, config=Config(), reps=2, sets=["chunks=10,10", "block=65536"])
    assert d["not_applied"] == ["chunks"] and "wall_s" in d["speedup"]


def test_preload_settings_need_a_python_program(tmp_path):
    from iodiag.jobs.verify import WorkloadCommand, parse_params, plan_verify

    argv = ["/bin/sh", "-c", "true"]
    w, params, start = parse_params(argv)
    cmd = WorkloadCommand(tuple(argv), str(tmp_path), {}, w, params, start)
    with pytest.raises(UsageError, match="not one"):
        plan_verify(cmd, job="j", overrides={"chunks": "1,2"}, base_env={})
    plan = plan_verify(cmd, job="j", hints={"romio_cb_write": "enable", "cb_nodes": 4}, base_env={})
    assert plan.env_after["MPICH_MPIIO_HINTS"] == "*:romio_cb_write=enable:cb_nodes=4"
    assert plan.after == plan.before and any("ROMIO_HINTS" in n for n in plan.notes)


EXTRACT = """import sys
import xarray as xr

ds = xr.open_zarr(sys.argv[1])
print(f"store={ds['ta'].encoding['chunks'][0]} dask={ds['ta'].chunks[0][0]}")
"""


def test_a_layout_recommendation_is_prepared_once_and_the_script_pointed_at_the_copy(tmp_path, monkeypatch):
    """A user's script reads a Zarr store chunked (1, ...): the rules' layout change (a rechunked copy, made by
    an iodiag command) is prepared once, and open_zarr of the old store opens the copy in the after runs (the
    script prints the chunk length it read: 1 before, 40 after)."""
    from iodiag.jobs.verify import command_of, plan_verify, run_verify
    from iodiag.recommend.recommendation import Change, Recommendation
    from iodiag.jobs.verify_result import verify_result
    from iodiag.service import _applicable
    from iodiag.workloads.gen import generate

    generate(out=str(tmp_path / "s.zarr"), format="zarr2", time=40, plev=1, lat=4, lon=8, chunks="1,1,4,8")
    (tmp_path / "extract.py").write_text(EXTRACT)
    rec = _record(tmp_path, [PY, "extract.py", "s.zarr"], name="extract")
    store, copy = str(tmp_path / "s.zarr"), str(tmp_path / "s.rechunked.zarr")
    layout = Recommendation(id="layout", title="Rechunk the store once", settings={"store_chunks": "40,1,4,8"},
                            changes=(Change("shell", f"iodiag workload convert --src {store} --dst {copy} --chunks "
                                                     "40,1,4,8 --cluster sync", "rechunk",
                                            {"src": store, "dst": copy, "chunks": "40,1,4,8"}),))
    cmd = command_of(rec)
    how = _applicable(layout, cmd)
    assert how["overrides"] == {"paths": {store: copy}} and how["prepare"] and not how["args"]
    plan = plan_verify(cmd, job=rec.id, prepare=how["prepare"], overrides=how["overrides"])
    assert Path(copy) in plan.outputs
    runs = run_verify(plan, reps=2)
    d = verify_result(runs, recommendation=layout)
    assert [(a["setting"], a["where"], a["runs"]) for a in d["applied"]] == [("paths", "xarray.open_zarr", 2)]
    assert d["prepare"] and d["not_applied"] == [] and Path(copy, "ta").is_dir()
    out = [x for x in Path(d["log"]).read_text().split() if x.startswith(("store=", "dask="))]
    assert out == ["store=1", "dask=1", "store=40", "dask=40"] * 2  # before: chunks of 1; after: the copy's 40
    # the trained tree's read advice (a store rewrite: chunks, compressor, format) is made the same way, from the
    # arrays the job read
    from iodiag.analyzers.readers.arrays import read_array_meta

    tree = Recommendation(id="chunking", title="Rewrite the store", source="tree",
                          settings={"chunk_layout": "block", "chunks": (20, 1, 4, 8), "compressor": "zstd",
                                    "zarr_format": 3, "chunk_mb": 0.003})
    arrays = read_array_meta([str(tmp_path / "s.zarr" / "ta" / ".zarray")])
    how = _applicable(tree, cmd, arrays)
    rewritten = str(tmp_path / "s.rewritten.zarr")
    assert how["overrides"] == {"paths": {store: rewritten}} and "chunks" not in how["overrides"]
    assert how["prepare"] == [f"iodiag workload convert --src {store} --dst {rewritten} --chunks 20,1,4,8 "
                              "--compressor zstd --zarr-format 3 --cluster sync"]
    d = verify_result(run_verify(plan_verify(cmd, job=rec.id, prepare=how["prepare"], overrides=how["overrides"]),
                                 reps=2))
    out = [x for x in Path(d["log"]).read_text().split() if x.startswith(("store=", "dask="))]
    assert out == ["store=1", "dask=1", "store=20", "dask=20"] * 2 and Path(rewritten, "ta", "zarr.json").is_file()
    # the case: Dask chunks at open_zarr of the unchanged store (--set chunks on a script reading Zarr)
    plan = plan_verify(cmd, job=rec.id, overrides={"chunks": "time=20"})
    d = verify_result(run_verify(plan, reps=2))
    assert [(a["setting"], a["where"], a["value"]) for a in d["applied"]] == [("chunks", "xarray.open_zarr",
                                                                             {"time": 20})]
    out = [x for x in Path(d["log"]).read_text().split() if x.startswith(("store=", "dask="))]
    assert out == ["store=1", "dask=1", "store=1", "dask=20"] * 2


HINTS = """import os, sys
path = os.environ.get("ROMIO_HINTS")
with open(sys.argv[1], "a") as fh:
    fh.write(repr((open(path).read() if path else None, os.environ.get("MPICH_MPIIO_HINTS"))) + "\\n")
"""


def test_mpiio_hints_reach_the_after_runs_through_the_environment(tmp_path):
    """MPI-IO hints: a ROMIO hints file named by ROMIO_HINTS and MPICH_MPIIO_HINTS, in the after runs only."""
    import ast

    from iodiag.jobs.verify import command_of, plan_verify, run_verify

    (tmp_path / "h.py").write_text(HINTS)
    rec = _record(tmp_path, [PY, "h.py", str(tmp_path / "seen.txt")], name="h")
    (tmp_path / "seen.txt").unlink()
    plan = plan_verify(command_of(rec), job=rec.id, hints={"romio_cb_write": "enable", "cb_nodes": 2},
                       base_env={k: v for k, v in __import__("os").environ.items() if "HINTS" not in k})
    run_verify(plan, reps=2)
    seen = [ast.literal_eval(x) for x in (tmp_path / "seen.txt").read_text().splitlines()]
    assert seen[0::2] == [(None, None)] * 2
    assert seen[1::2] == [("romio_cb_write enable\ncb_nodes 2\n", "*:romio_cb_write=enable:cb_nodes=2")] * 2


@pytest.mark.slow
def test_verify_last_applies_the_top_recommendation_to_an_unmodified_script(tmp_path, monkeypatch):
    """No --set: a 1-step-chunk conversion by the user's script (embedded collector) is advised to use bigger
    chunks; verify applies that inside the script and measures it."""
    from conftest import require_embedded
    from iodiag.jobs.run import RunOptions, run_job
    from iodiag.service import verify_job
    from iodiag.workloads.gen import generate

    require_embedded()
    generate(out=str(tmp_path / "in.nc"), time=2000, plev=1, lat=32, lon=64)
    (tmp_path / "convert.py").write_text(CONVERT)
    res = run_job(RunOptions(command=[PY, "convert.py", "in.nc", "out.zarr", "1"], collector="embedded",
                             dask=False, name="uc", store=str(tmp_path / "store")), cwd=str(tmp_path))
    monkeypatch.setenv("IODIAG_HOME", str(tmp_path / "store"))
    # what the job is advised: its xarray snippet reads back the same from terminal and JSON, and compiles
    from iodiag.service import advise_profile, load_target
    from test_recommend_paste import _same_everywhere

    adv = advise_profile(profile=load_target(target=res.record.id, config=Config()).profile, config=Config(),
                         home=Path(res.record.path))
    snippets = _same_everywhere([json.loads(json.dumps(r.to_dict())) for r in adv.recommendations])
    assert snippets and all(compile(src, "<snippet>", "exec") for src in snippets)
    d = verify_job(target=res.record.id, config=Config(), reps=2)
    assert d["recommendation"]["id"] == "chunking" and not d["not_applied"]
    assert any(a["setting"] == "chunks" and a["where"] == "xarray.open_dataset" for a in d["applied"])
    assert d["speedup"]["cpu_s"]["estimate"] > 1.5


def test_speedup_band_on_paired_times():
    from iodiag.jobs.verify import speedup_band

    s = speedup_band([4.0, 4.2, 3.9, 4.1, 4.0], [1.0, 1.1, 0.95, 1.0, 1.02])
    assert 3.7 < s["estimate"] < 4.2 and s["low"] > 3 and s["verdict"] == "faster"
    same = speedup_band([1.0, 1.2, 0.9, 1.1, 1.0], [1.1, 0.9, 1.0, 1.2, 0.95])
    assert same["low"] < 1 < same["high"] and same["verdict"] == "no measurable change"
    with pytest.raises(UsageError):
        speedup_band([1.0], [1.0])


@pytest.mark.slow
def test_read_of_one_step_chunks_is_rechunked_once_then_verified(tmp_path, monkeypatch):
    """The layout fix end to end: a read job of a (1, ·, ·, ·) store under a real collector, its recommendation a
    rechunked copy (prepared once, timed apart) and the read flag pointing at it."""
    from iodiag.jobs.run import RunOptions, run_job
    from iodiag.service import advise_profile, load_target, verify_job
    from iodiag.workloads.gen import generate

    require_darshan_runtime()
    generate(out=str(tmp_path / "r.zarr"), format="zarr2", time=1500, plev=1, lat=8, lon=16, chunks="1,1,8,16")
    res = run_job(RunOptions(command=[PY, "-m", "iodiag.workloads.read", "--path", "r.zarr", "--patterns", "whole",
                                      "--repeat", "1"], collector="darshan", dask=False, name="r",
                             store=str(tmp_path / "store")), cwd=str(tmp_path))
    monkeypatch.setenv("IODIAG_HOME", str(tmp_path / "store"))
    loaded = load_target(target=res.record.id, config=Config())
    adv = advise_profile(profile=loaded.profile, config=Config(), home=loaded.home)
    top = adv.recommendations[0]
    assert top.id == "layout" and top.settings["store_chunks"].split(",")[0] != "1"
    assert adv.params and adv.params["path"] == "r.zarr" and "workload parameters" in top.based_on
    d = verify_job(target=res.record.id, config=Config(), reps=2)
    assert d["prepare"] and "convert" in d["prepare"][0]["command"] and d["prepare"][0]["wall_s"] > 0
    assert re.search(r"--path \S+rechunked\.zarr", d["after"]["command"])
    assert d["speedup"]["workload_s"]["estimate"] > 1.5  # 1,500 chunk files -> one: the read itself is faster


def test_recommend_group_routes_a_job_or_a_subcommand():
    """How `iodiag recommend JOB` and `iodiag recommend train` share one group (wired at merge)."""
    import typer
    from typer.testing import CliRunner

    from iodiag.cli.recommend_job import JobOrSubcommand, add_job_command

    g = typer.Typer(cls=JobOrSubcommand)
    seen = []

    @g.command("train")
    def train(sweep: str = typer.Argument(...)) -> None:
        seen.append(("train", sweep))

    add_job_command(g)
    r = CliRunner().invoke(g, ["train", "s.toml"])
    assert r.exit_code == 0 and seen == [("train", "s.toml")]
    r = CliRunner().invoke(g, [str(corpus_path(VPIC)), "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["schema"] == "iodiag.recommend/1"


def test_a_tree_setting_the_workload_takes_becomes_a_flag_verify_applies():
    from iodiag.analyzers.load import load_job
    from iodiag.recommend.engine import recommend
    from iodiag.recommend.recommendation import Recommendation
    from iodiag.recommend.rules import diagnose_with_advice

    class Fitted:  # the contract of recommend/model.py's Model: advise(features) -> Recommendation
        settings = ("chunks",)
        scenarios_known = "test"

        def advise(self, features):
            return Recommendation(id="chunking", title="Use chunks of (73, 90, 180)", settings={"chunks": (73, 90, 180)},
                                  source="tree")

    prof = load_job([str(corpus_path(VPIC))])
    try:
        import iodiag.recommend.features  # noqa: F401
    except ImportError:
        pytest.skip("the trained model's features module is not on this branch")
    recs = recommend(prof, findings=diagnose_with_advice(prof), params={"chunks": "1,90,180"}, model=Fitted())
    top = recs[0]
    assert top.source == "tree" and [c.text for c in top.changes if c.kind == "arg"] == ["--chunks 73,90,180"]


def test_a_flag_replaces_the_one_the_workload_takes_instead(tmp_path):
    """convert takes --chunks or --chunk-mb, not both: verifying --chunk-mb on a job recorded with --chunks (and
    the other way round) drops the replaced flag from the 'after' command, and leaves 'before' as recorded."""
    from iodiag.jobs.verify import parse_params, plan_verify, WorkloadCommand

    argv = [sys.executable, "-m", "iodiag.workloads.convert", "--src", "c.nc", "--dst", "c.zarr",
            "--chunks", "1,1,90,180", "--workers", "2"]
    workload, params, start = parse_params(argv)
    cmd = WorkloadCommand(tuple(argv), str(tmp_path), {}, workload, params, start)
    plan = plan_verify(cmd, job="j", args={"--chunk-mb": 5}, base_env={})
    assert "--chunks" not in plan.after and plan.after[plan.after.index("--chunk-mb") + 1] == "5"
    assert plan.before[plan.before.index("--chunks") + 1] == "1,1,90,180" and "--chunk-mb" not in plan.before
    back = plan_verify(WorkloadCommand(tuple(plan.after), str(tmp_path), {}, *parse_params(plan.after)), job="j",
                       args={"--chunks": "7,10,90,180"}, base_env={})
    assert "--chunk-mb" not in back.after and back.after[back.after.index("--chunks") + 1] == "7,10,90,180"
    assert back.after[back.after.index("--workers") + 1] == "2"
