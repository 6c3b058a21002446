"""Default-vs-best table: numbers checked by hand on a small table, and weighting by a workload mix."""

from __future__ import annotations

import math

import pytest

from iodiag.errors import UsageError
from iodiag.recommend.kunkel import defaults_table

# Three scenarios, two settings. Times in seconds (lower is better):
#            A     B
#   s1      10    20      rel: A 1.0,  B 0.5
#   s2      30    10      rel: A 1/3,  B 1.0
#   s3      40    40      rel: A 1.0,  B 1.0   (a tie: both best, neither worst)
ROWS = [("s1", "A", 10), ("s1", "B", 20), ("s2", "A", 30), ("s2", "B", 10), ("s3", "A", 40), ("s3", "B", 40)]


def table(rows=ROWS, **kw):
    sc, st, t = zip(*rows)
    return defaults_table(sc, st, t, **kw)


def test_unweighted_means_by_hand():
    tab = table()
    a, b = tab.defaults
    assert (a.name, b.name) == ("A", "B")
    assert a.arithmetic == pytest.approx((1 + 1 / 3 + 1) / 3)
    assert a.geometric == pytest.approx((1 * (1 / 3) * 1) ** (1 / 3))
    assert a.harmonic == pytest.approx(3 / (1 + 3 + 1))
    assert b.arithmetic == pytest.approx((0.5 + 1 + 1) / 3)
    assert b.harmonic == pytest.approx(3 / (2 + 1 + 1))
    assert a.best_share == pytest.approx(2 / 3) and a.worst_share == pytest.approx(1 / 3)
    assert b.best_share == pytest.approx(2 / 3) and b.worst_share == pytest.approx(1 / 3)
    assert tab.oracle.arithmetic == pytest.approx(1.0) and tab.oracle.harmonic == pytest.approx(1.0)
    # B wins on harmonic mean (0.75 vs 0.6) and on arithmetic (0.833 vs 0.778)
    assert tab.best_default("harmonic").name == "B"
    assert tab.best_default("arithmetic").name == "B"


def test_weighting_by_workload_mix_changes_the_default():
    # a site whose core-hours are almost all in s1 (where A is twice as fast) should default to A
    tab = table(weights={"s1": 90.0, "s2": 5.0, "s3": 5.0})
    assert tab.best_default("harmonic").name == "A"
    a = tab.defaults[0]
    assert a.arithmetic == pytest.approx(0.9 * 1 + 0.05 / 3 + 0.05 * 1)
    # unweighted, the same measurements pick B
    assert table().best_default("harmonic").name == "B"


def test_policy_and_regret_share():
    tab = table()
    oracle_like = tab.score_policy("tree", {"s1": "A", "s2": "B", "s3": "A"})
    assert oracle_like.harmonic == pytest.approx(1.0)
    assert tab.regret_share(oracle_like) == pytest.approx(0.0)
    always_b = tab.score_policy("always B", {"s1": "B", "s2": "B", "s3": "B"})
    assert tab.regret_share(always_b) == pytest.approx(1.0)
    half = tab.score_policy("wrong in s2", {"s1": "A", "s2": "A", "s3": "A"})
    # harmonic 0.6 against best default 0.75 and oracle 1.0: regret (1-0.6)/(1-0.75) = 1.6 (worse than the default)
    assert tab.regret_share(half) == pytest.approx(1.6)


def test_repeats_are_averaged_and_incomplete_scenarios_dropped():
    rows = ROWS + [("s1", "A", 30), ("s4", "A", 5)]  # s1/A now averages 20 (tie with B); s4 lacks B
    tab = table(rows)
    assert tab.scenarios == ("s1", "s2", "s3")
    assert tab.defaults[0].arithmetic == pytest.approx((1 + 1 / 3 + 1) / 3)
    assert not math.isnan(tab.defaults[1].harmonic)


def test_bad_input_is_a_usage_error():
    with pytest.raises(UsageError):
        defaults_table([], [], [])
    with pytest.raises(UsageError):
        table(weights={"nowhere": 1.0})
    tab = table()
    with pytest.raises(UsageError):
        tab.score_policy("p", {"s1": "C", "s2": "A", "s3": "A"})
