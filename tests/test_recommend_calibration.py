"""The trained model's predicted gains for the whole run, checked on measured (job, change) pairs it never saw
(src/iodiag/recommend/data/calibration.csv, made by scripts/recommender_calibrate.py): the table says where, when
and under which load it was measured, its pairs are at array scales absent from the training table, the gain is
Amdahl's with the job's own wall time and trained-phase time, the held-out coverage of its band is what
``iodiag recommend evaluate`` reports, and a band is shown only where that coverage is at least 80 %."""

from __future__ import annotations

import math
import shutil
import sys

import pytest

from conftest import require_embedded, run_cli
from iodiag.recommend import calibration as cal
from iodiag.recommend.recommendation import Recommendation
from iodiag.recommend.train import SHIPPED_TABLE, evaluate_files, read_table


def test_the_table_holds_at_least_20_measured_pairs_with_provenance_never_used_in_training():
    pairs, head = cal.read_pairs()
    assert len(pairs) >= 20
    assert "recommender_calibrate.py" in head and "UTC" in head and "load" in head
    trained = {(r["workload"], r["shape"]) for r in read_table(SHIPPED_TABLE)}
    for p in pairs:
        assert (p["workload"], p["shape"]) not in trained, p["pair"]
        assert p["measured"] > 0 and p["predicted"] > 0 and p["before"] != p["after"]
        assert 0 < p["phase_s"] <= p["wall_s"] and p["load1"] is not None  # the load of every pair is recorded
    assert len({p["pair"] for p in pairs}) == len(pairs)


def test_the_amdahl_prediction_of_a_pair_is_its_own_wall_and_phase():
    pairs, _ = cal.read_pairs()
    for p in pairs:
        w, ph, raw = p["wall_s"], p["phase_s"], p["predicted"]
        assert p["amdahl"] == pytest.approx(w / (w - ph + ph / raw))
        # between no gain and the raw ratio of the phase: only the phase gets faster
        assert min(1.0, raw) <= p["amdahl"] + 1e-12 and p["amdahl"] <= max(1.0, raw) + 1e-12


def _band(pairs) -> float:
    res = sorted(abs(math.log(r["measured"] / r["amdahl"])) for r in pairs)
    return res[min(len(res) - 1, math.ceil(0.8 * (len(res) + 1)) - 1)]


def test_held_out_coverage_is_recomputed_without_leaking_a_pair():
    pairs, _ = cal.read_pairs()
    state = cal.evaluate()
    for wl in ("convert", "read"):
        mine = [p for p in pairs if p["workload"] == wl]
        held = 0
        for i, p in enumerate(mine):
            q = _band(mine[:i] + mine[i + 1:])  # the band taken without the pair it judges
            held += p["amdahl"] * math.exp(-q) <= p["measured"] <= p["amdahl"] * math.exp(q)
        assert state[wl]["loo_coverage"] == held / len(mine) and state[wl]["pairs"] == len(mine)
        # nothing fitted but the band's width: leave one out holds for ceil(0.8 n) / n by construction
        if len({round(math.log(p["measured"] / p["amdahl"]), 12) for p in mine}) == len(mine):
            assert held == math.ceil(0.8 * len(mine))
        # forward: the pairs of later batches, judged by the band from the earlier ones only
        later = [p for p in mine if len([e for e in mine if e["batch"] < p["batch"]]) >= cal.MIN_PAIRS]
        fheld = sum(p["amdahl"] * math.exp(-q) <= p["measured"] <= p["amdahl"] * math.exp(q)
                    for p in later for q in [_band([e for e in mine if e["batch"] < p["batch"]])])
        assert state[wl]["forward_coverage"] == (fheld / len(later) if later else None)
        # by array scale: each scale's pairs judged by the band from the other scales only
        sheld = sum(p["amdahl"] * math.exp(-q) <= p["measured"] <= p["amdahl"] * math.exp(q)
                    for p in mine for q in [_band([e for e in mine if e["shape"] != p["shape"]])])
        assert state[wl]["scale_coverage"] == sheld / len(mine)
        gate = min([held / len(mine), sheld / len(mine)] + ([fheld / len(later)] if later else []))
        assert state[wl]["coverage"] == gate
        assert 0 <= state[wl]["slope_form_coverage"] <= 1


def test_a_band_is_shown_only_where_it_held_for_80_percent_of_held_out_pairs():
    state = cal.evaluate()
    for wl, settings in (("convert", {"chunk_mb": 5.0, "compressor": "zstd", "workers": 1}),
                         ("read", {"chunk_layout": "block", "compressor": "none", "zarr_format": 3})):
        raw = Recommendation(id="chunking", title="t", settings=settings, source="tree", expected_speedup=6.98,
                             speedup_low=4.76, speedup_high=10.25)
        out = cal.calibrated(raw, wall_s=15.6, phase_s=12.0, phase_from="the write phase in the job's results record")
        a = 15.6 / (15.6 - 12.0 + 12.0 / 6.98)
        if state[wl]["coverage"] >= cal.COVERAGE:
            assert out.gain == "predicted" and out.expected_speedup == round(a, 3)
            assert out.speedup_low == round(a * math.exp(-state[wl]["q"]), 3)
            assert out.speedup_high == round(a * math.exp(state[wl]["q"]), 3)
            assert "results record" in out.notes[-1] and "Amdahl" in out.notes[-1]
        else:  # a band that did not hold: no number at all is shown as a gain, the note names the prediction
            assert out.gain == "unknown" and out.expected_speedup is None
            assert out.speedup_low is None and out.speedup_high is None
            assert f"{a:.1f}x" in out.notes[-1] and "measure it with iodiag verify" in out.notes[-1]
        # the job's times unknown: no gain for the whole run, whatever the coverage
        blind = cal.calibrated(raw, wall_s=15.6, phase_s=None)
        assert blind.gain == "unknown" and blind.expected_speedup is None and "measure it" in blind.notes[-1]


def test_a_band_that_misses_later_pairs_is_not_shown(tmp_path):
    """The real table with a later batch of conversions where every change measured 3x slower than before: the
    band from the earlier pairs misses them (forward coverage under 80 %), so no gain is shown."""
    import csv
    import io

    pairs, _ = cal.read_pairs()
    text = cal.CALIBRATION_TABLE.read_text()
    rows = [r for r in csv.DictReader([t for t in text.splitlines() if not t.startswith("#")])
            if r["workload"] == "convert" and not r.get("skipped")]
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(rows[0]))
    for r in rows:
        w.writerow({**r, "pair": "slow-" + r["pair"], "wall_after_s": str(float(r["wall_after_s"]) * 3)})
    p = tmp_path / "cal.csv"
    p.write_text(text + "# then measured by hand for this test, 1-min load 0\n" + buf.getvalue())
    st = cal.evaluate(p)
    assert st["convert"]["loo_coverage"] >= cal.COVERAGE  # leave one out cannot tell
    assert st["convert"]["forward_coverage"] < cal.COVERAGE and st["convert"]["coverage"] < cal.COVERAGE
    rec = Recommendation(id="chunking", title="t", settings={"chunk_mb": 5.0, "workers": 1}, source="tree",
                         expected_speedup=6.98)
    out = cal.calibrated(rec, str(p), wall_s=15.6, phase_s=12.0)
    assert out.gain == "unknown" and out.expected_speedup is None and out.speedup_low is None
    assert "measure it with iodiag verify" in out.notes[-1]
    assert cal.read_pairs()[0] == pairs  # the shipped table untouched


def test_evaluate_reports_the_coverage():
    res, text = evaluate_files(table=SHIPPED_TABLE)
    assert "Predicted gains on measured pairs the model never saw" in text and "Amdahl" in text
    for wl in ("convert", "read"):
        c = res["calibration"][wl]
        assert c == cal.evaluate()[wl]
        assert f"the band held for **{c['coverage']:.0%}**" in text
        assert f"the first form held for {c['slope_form_coverage']:.0%}" in text
        assert f"leave one out {c['loo_coverage']:.0%}" in text and f"by array scale {c['scale_coverage']:.0%}" in text
        assert ("band shown" if c["coverage"] >= cal.COVERAGE else "band not shown") in text


# ------------------------------------------------------------------------------------------------ a real job
@pytest.fixture(scope="module")
def conversion(tmp_path_factory):
    """A real conversion writing 1-step, 1-level chunks (the docs' case (c), small) on a threaded cluster,
    recorded by ``iodiag run --collector embedded``: (tmp, store, job record)."""
    require_embedded()
    from iodiag.jobs.store import find_job

    tmp = tmp_path_factory.mktemp("calconv")
    env = {"IODIAG_HOME": str(tmp / "home")}
    g = run_cli("workload", "gen", "--out", str(tmp / "c.nc"), "--time", "512", "--plev", "4", "--lat", "46",
                "--lon", "90", env=env)
    assert g.returncode == 0, g.stderr
    r = run_cli("run", "--name", "conv", "--collector", "embedded", "--no-dask-report", "--", sys.executable, "-m",
                "iodiag.workloads.convert", "--src", str(tmp / "c.nc"), "--dst", str(tmp / "c.zarr"),
                "--chunks", "1,1,46,90", "--cluster", "threads", env=env, timeout=600)
    assert r.returncode == 0, r.stderr
    return tmp, env["IODIAG_HOME"], find_job("last", root=env["IODIAG_HOME"])


def _advice(home, rec, monkeypatch):
    from iodiag.config import Config
    from iodiag.service import advise_profile, load_target

    monkeypatch.setenv("IODIAG_HOME", home)
    loaded = load_target(target=rec.id, config=Config())
    return advise_profile(profile=loaded.profile, config=Config(), home=loaded.home)


def test_a_job_with_its_results_record_is_advised_on_it_and_its_own_times(conversion, monkeypatch):
    import json

    tmp, home, rec = conversion
    adv = _advice(home, rec, monkeypatch)
    assert adv.params and adv.params["chunks"] == "1,1,46,90"  # the command's parameters are passed ...
    tree = next(r for r in adv.recommendations if r.source == "tree")
    assert tree.abstain is None, tree.abstain
    # ... and the results record in the job folder is still read (it was not: "the run left no results record")
    assert "no results record" not in tree.based_on and tree.based_on.startswith("workload parameters")
    result = json.loads((rec.folder / "results.json").read_text())
    write_s, wall_s = result["timings_s"]["write"], adv.profile.job.runtime_s
    st = cal.evaluate()["convert"]
    if st["coverage"] >= cal.COVERAGE:
        note = tree.notes[-1] if "Amdahl" in tree.notes[-1] else next(n for n in tree.notes if "Amdahl" in n)
        assert "the write phase in the job's results record" in note and f"{write_s:.3g} s" in note
        assert tree.gain == "predicted" and tree.speedup_low < tree.expected_speedup < tree.speedup_high
        assert tree.expected_speedup <= wall_s / (wall_s - write_s) + 1e-3  # no more than removing the phase
    else:
        assert tree.gain == "unknown" and tree.expected_speedup is None


def test_a_job_without_a_record_estimates_its_phase_from_the_profile(conversion, monkeypatch):
    from iodiag.analyzers.job import load_job_record
    from iodiag.recommend.features import estimated_phase, job_features

    tmp, home, rec = conversion
    monkeypatch.setenv("IODIAG_HOME", home)
    prof = load_job_record(rec)
    with_record = job_features(prof)
    assert with_record["phase_from"] == "the write phase in the job's results record"
    shutil.move(str(rec.folder / "results.json"), str(tmp / "results.json"))
    try:
        alone = job_features(prof)
        adv = _advice(home, rec, monkeypatch)
    finally:
        shutil.move(str(tmp / "results.json"), str(rec.folder / "results.json"))
    tree = next(r for r in adv.recommendations if r.source == "tree")
    assert tree.abstain is None and "the run left no results record" in tree.based_on  # now true
    assert any("Amdahl" in n and "estimated: the span of" in n for n in tree.notes), tree.notes
    assert alone["phase_s"] is None and alone["wall_s"] == prof.job.runtime_s
    phase, how = estimated_phase(prof)  # what the engine then uses, and names in the note
    assert how.startswith("estimated: the span of") and 0 < phase <= prof.job.runtime_s
