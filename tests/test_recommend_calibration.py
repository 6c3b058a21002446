"""The trained model's predicted gains, calibrated on measured (job, change) pairs it never saw
(src/iodiag/recommend/data/calibration.csv, made by scripts/recommender_calibrate.py): the table says where and
when it was measured, its pairs are at array scales absent from the training table, the held-out coverage of the
band is what ``iodiag recommend evaluate`` reports, and a band is shown only where that coverage is at least 80 %."""

from __future__ import annotations

import math

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


def test_held_out_coverage_is_recomputed_without_leaking_a_pair():
    pairs, _ = cal.read_pairs()
    state = cal.evaluate()
    for wl in ("convert", "read"):
        mine = [p for p in pairs if p["workload"] == wl]
        held = 0
        for i, p in enumerate(mine):
            slope, q = cal.fit(mine[:i] + mine[i + 1:])  # fitted without the pair it judges
            c = math.exp(slope * math.log(p["predicted"]))
            held += c * math.exp(-q) <= p["measured"] <= c * math.exp(q)
        assert state[wl]["coverage"] == held / len(mine)


def test_a_band_is_shown_only_where_it_held_for_80_percent_of_held_out_pairs():
    state = cal.evaluate()
    for wl, settings in (("convert", {"chunk_mb": 5.0, "compressor": "zstd", "workers": 1}),
                         ("read", {"chunk_layout": "block", "compressor": "none", "zarr_format": 3})):
        raw = Recommendation(id="chunking", title="t", settings=settings, source="tree", expected_speedup=13.7,
                             speedup_low=9.3, speedup_high=20.1)
        out = cal.calibrated(raw)
        point = round(math.exp(state[wl]["slope"] * math.log(13.7)), 3)
        if state[wl]["coverage"] >= cal.COVERAGE:
            assert out.gain == "predicted" and out.expected_speedup == point
            assert out.speedup_low < out.expected_speedup < out.speedup_high
        else:  # a band that did not hold: no number at all is shown as a gain, the note names it
            assert out.gain == "unknown" and out.expected_speedup is None
            assert out.speedup_low is None and out.speedup_high is None
            assert f"{point:.1f}x" in out.notes[-1] and "measure it with iodiag verify" in out.notes[-1]
    # the shipped calibration has one workload of each kind (reads held 89 %, conversions 75 %): both branches run
    assert {state[w]["coverage"] >= cal.COVERAGE for w in ("convert", "read")} == {True, False}


def test_evaluate_reports_the_coverage(tmp_path):
    res, text = evaluate_files(table=SHIPPED_TABLE)
    assert "Predicted gains on measured pairs the model never saw" in text
    for wl in ("convert", "read"):
        assert f"the band held for **{res['calibration'][wl]['coverage']:.0%}**" in text
