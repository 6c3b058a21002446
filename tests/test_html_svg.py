"""The SVG chart writer (reports/svg.py): escaping, ticks, text fitting, the PNG encoder."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import numpy as np
import pytest

from iodiag.reports import svg
from iodiag.units import fmt_bytes

from test_html_plots import decode_png
from test_html_support import XSS_NAMES

HOSTILE = XSS_NAMES + ("a & b ' c", "ctrl\x01char", "]]><!--")


def test_every_text_is_escaped_and_survives_parsing():
    fig = svg.Figure(300, 200, label=HOSTILE[1])
    ax = fig.panel(50, 20, 200, 120).x(0, 1).y(0, 1)
    for i, name in enumerate(HOSTILE):
        fig.text(10, 10 + i, name, title=name)
        fig.rect(60, 30 + i * 5, 10, 4, "#000", title=name)
    ax.yticks([0.5], [HOSTILE[0]], titles=[HOSTILE[1]])
    ax.xlabel(HOSTILE[1])
    fig.legend([(HOSTILE[0], "#123456")], 0, 150)
    markup = fig.svg()
    for name in XSS_NAMES:
        assert name not in markup
    assert "<script" not in markup and "<img" not in markup
    root = ET.fromstring(markup)  # raises on anything unescaped or not well-formed
    assert root.get("aria-label") == HOSTILE[1]
    tips = [el.text for el in root.iter() if el.tag.endswith("title")]
    shown = [(el.text or "") + "".join(c.tail or "" for c in el) for el in root.iter() if el.tag.endswith("text")]
    for name in HOSTILE:
        expect = name.replace("\x01", "\ufffd")  # XML 1.0 cannot hold control characters
        assert expect in tips and expect in shown


def test_png_encoder_round_trips():
    rng = np.random.default_rng(3)
    img = rng.integers(0, 256, (7, 13, 3), dtype=np.uint8)
    assert (decode_png(svg.png_rgb(img)) == img).all()
    zlib_bound = svg.png_rgb(np.zeros((256, 400, 3), np.uint8))
    assert len(zlib_bound) < 2000  # an empty grid compresses to almost nothing


def test_colourise_maps_values_onto_the_ramp():
    lut = svg.ramp_lut("blues")
    v = np.array([[0.0, 0.25, 1.0], [-1.0, 0.5, 2.0]])
    img = svg.colourise(v, lut, vmin=0.0, vmax=1.0)
    empty = np.array(svg._rgb(svg.EMPTY))
    assert (img[0, 0] == empty).all() and (img[1, 0] == empty).all()  # zero and negative: no data
    assert (img[0, 2] == lut[-1]).all() and (img[1, 2] == lut[-1]).all()  # clipped at vmax
    lum = img.astype(int).sum(axis=2)
    assert lum[0, 1] > lum[1, 1] > lum[0, 2]  # darker for more
    logimg = svg.colourise(np.array([[10.0, 1000.0, 100000.0]]), lut, vmin=10.0, vmax=1e5, log=True)
    assert (logimg[0, 1] == lut[len(lut) // 2]).all() or (logimg[0, 1] == lut[len(lut) // 2 - 1]).all()


@pytest.mark.parametrize("lo,hi,expect", [
    (0, 5.2, [0, 1, 2, 3, 4, 5]), (0, 1, [0, 0.2, 0.4, 0.6, 0.8, 1.0]), (0.9, 3.1, [1.0, 1.5, 2.0, 2.5, 3.0]),
    (0, 30000, [0, 5000, 10000, 15000, 20000, 25000, 30000]), (0, 0.04, [0, 0.01, 0.02, 0.03, 0.04]),
])
def test_nice_ticks(lo, hi, expect):
    assert svg.nice_ticks(lo, hi) == pytest.approx(expect)


def test_axis_helpers():
    assert svg.int_ticks(0, 1, 4) == [0, 1] and svg.int_ticks(0, 1024, 4) == [0, 250, 500, 750, 1000]
    end, ticks, labels = svg.byte_ticks(2.5 * 1024 ** 3)
    assert end == 2.5 * 1024 ** 3 and labels == ["0", "0.5 GiB", "1.0 GiB", "1.5 GiB", "2.0 GiB", "2.5 GiB"]
    assert svg.log_ticks(0.7, 2e5) == [1, 10, 100, 1000, 1e4, 1e5]
    assert [fmt_bytes(t, sig=True) + "/s" for t in svg.log2_ticks(10e3, 10e6)] == ["16 KiB/s", "64 KiB/s", "256 KiB/s", "1 MiB/s", "4 MiB/s"]
    assert svg.fmt_tick(1.25, 0.25) == "1.25" and svg.fmt_tick(20000, 5000) == "20,000" and svg.fmt_tick(0.5, 0.1) == "0.5"
    scale = svg.Log(1, 1000, 0, 300)
    assert scale(10) == pytest.approx(100) and scale(0) == 0 and scale(1e9) == 300  # clamped to the axis


def test_fit_text_keeps_start_and_end():
    path = "/global/cscratch1/sd/jeanbez/paper/openPMD-api-build/../benchmarks/benchmark.h5"
    short = svg.fit_text(path, 11, 250, mono=True)
    assert svg.text_width(short, 11, mono=True) <= 250 < svg.text_width(path, 11, mono=True)
    assert short.startswith("/global") and short.endswith("benchmark.h5") and "\u2026" in short
    assert svg.fit_text("abc", 11, 250) == "abc"
