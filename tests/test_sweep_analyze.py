"""Analysis numbers: mean ± 95 % CI (Student t), throughput, strong/weak speedup and efficiency,
arithmetic vs harmonic means — checked against values computed by hand."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from iodiag.errors import UsageError
from iodiag.jobs.sweep.analyze import analyze, means, scaling, summarize


def _df(rows):
    return pd.DataFrame([{"run": f"r{i}", "status": "succeeded", "rep": i, **r} for i, r in enumerate(rows)])


def test_mean_and_ci_over_repetitions():
    df = _df([{"workers": 1, "t_write_s": 2.0, "bytes_logical": 8e6},
              {"workers": 1, "t_write_s": 4.0, "bytes_logical": 8e6},
              {"workers": 1, "t_write_s": 3.0, "bytes_logical": 8e6}])
    s = summarize(df, grid=["workers"]).iloc[0]
    assert s["time_s_mean"] == pytest.approx(3.0) and s["time_s_std"] == pytest.approx(1.0)
    # t(0.975, 2) = 4.302653; half-width = t * s / sqrt(n)
    assert s["time_s_ci95"] == pytest.approx(4.302653 / math.sqrt(3), rel=1e-6)
    assert s["time_s_lo"] == pytest.approx(3.0 - 4.302653 / math.sqrt(3), rel=1e-6)
    # each point's spread: the range of its repetitions, and that range over their median
    assert (s["time_s_min"], s["time_s_max"]) == (2.0, 4.0) and s["time_s_spread"] == pytest.approx(2.0 / 3.0)
    # per-run throughput 4, 2, 2.667 MB/s -> mean of rates, not rate of means
    assert s["throughput_MBps_mean"] == pytest.approx((4 + 2 + 8 / 3) / 3)


def test_single_repetition_has_no_interval():
    s = summarize(_df([{"workers": 1, "t_write_s": 2.0}]), grid=["workers"]).iloc[0]
    assert s["time_s_n"] == 1 and math.isnan(s["time_s_ci95"])


def test_failed_runs_are_left_out():
    df = _df([{"workers": 1, "t_write_s": 2.0}, {"workers": 1, "t_write_s": 100.0}])
    df.loc[1, "status"] = "failed"
    assert summarize(df, grid=["workers"]).iloc[0]["time_s_mean"] == 2.0
    with pytest.raises(UsageError, match="no succeeded runs"):
        summarize(df[df.status == "failed"], grid=["workers"])


def test_strong_and_weak_scaling():
    rows = [{"workers": w, "codec": c, "t_write_s": t}
            for (w, c, t) in [(1, "none", 8.0), (2, "none", 5.0), (4, "none", 4.0),
                              (1, "zstd", 6.0), (2, "zstd", 3.0), (4, "zstd", 1.5)]]
    summ = summarize(_df(rows), grid=["workers", "codec"])
    strong = scaling(summ, axis="workers", mode="strong").set_index(["codec", "workers"])
    assert strong.loc[("none", 2), "speedup"] == pytest.approx(1.6)
    assert strong.loc[("none", 4), "efficiency"] == pytest.approx(0.5)  # 8/4 = 2 on 4 workers
    assert strong.loc[("zstd", 4), "efficiency"] == pytest.approx(1.0)
    assert strong.loc[("none", 4), "ideal_time_s"] == pytest.approx(2.0)
    weak = scaling(summ, axis="workers", mode="weak").set_index(["codec", "workers"])
    assert weak.loc[("none", 2), "efficiency"] == pytest.approx(8 / 5)  # T1/Tp
    assert weak.loc[("none", 4), "speedup"] == pytest.approx(4 * 8 / 4)  # scaled speedup
    assert weak.loc[("none", 4), "ideal_time_s"] == pytest.approx(8.0)


def test_arithmetic_and_harmonic_means_of_throughput():
    summ = pd.DataFrame({"throughput_MBps_mean": [100.0, 25.0]})
    m = means(summ)
    assert m["arithmetic_mean_MBps"] == pytest.approx(62.5)
    assert m["harmonic_mean_MBps"] == pytest.approx(40.0)  # 2 / (1/100 + 1/25)


def test_analyze_picks_grid_and_scaling():
    rows = [{"workers": w, "t_write_s": t, "bytes_logical": 1e6 * w, "chunks": "1x2"}
            for w, t in [(1, 2.0), (1, 2.2), (2, 2.5), (2, 2.7)]]
    res = analyze(_df(rows), axis="workers", mode="weak", grid=["workers"])
    assert list(res["summary"]["workers"]) == [1, 2]
    assert res["scaling"]["efficiency"].tolist() == pytest.approx([1.0, 2.1 / 2.6])
    with pytest.raises(UsageError, match="no grid parameter 'threads'"):
        scaling(res["summary"], axis="threads")
