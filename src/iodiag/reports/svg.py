"""A small SVG chart writer: axes with nice ticks, bars, steps, markers, raster
grids (an embedded PNG), legends and colour bars.  No dependency beyond NumPy
and the standard library, so the HTML report does not import matplotlib
(whose import alone costs more than writing the whole page).

Every piece of text goes through ``esc`` before it reaches the markup, so a
file name such as ``<script>alert(1)</script>`` is shown as text; the output
is well-formed XML (tests parse it) and can be inlined in an HTML page.

Coordinates are CSS pixels of the figure's own box (``viewBox``); the page
may scale the whole figure down.  Text widths are estimated from per-glyph
widths of DejaVu Sans (exact for the monospace font), which is enough to lay
out margins without a font engine.
"""

from __future__ import annotations

import base64
import math
import struct
import zlib
from typing import Iterable, Sequence

import numpy as np

from ..units import BINARY_UNITS, binary_scale

FONT = "system-ui, -apple-system, 'Segoe UI', 'DejaVu Sans', sans-serif"
MONO = "'DejaVu Sans Mono', ui-monospace, monospace"
INK = "#1a202c"
MUTED = "#4a5568"
GRID = "#e2e8f0"
FRAME = "#a0aec0"
EMPTY = "#f7fafc"  # background of raster cells without data

_ESC = {ord("&"): "&amp;", ord("<"): "&lt;", ord(">"): "&gt;", ord('"'): "&quot;", ord("'"): "&#39;"}


def esc(text: object) -> str:
    """Escape text for SVG/HTML element content and attribute values; drop characters XML forbids."""
    s = str(text).translate(_ESC)
    if any(ord(c) < 32 and c not in "\t\n\r" for c in s):
        s = "".join(c if ord(c) >= 32 or c in "\t\n\r" else "\ufffd" for c in s)
    return s


def num(v: float) -> str:
    """A coordinate: two decimals at most, no trailing zeros."""
    s = f"{v:.2f}".rstrip("0").rstrip(".")
    return "0" if s in ("-0", "") else s


# -- text widths ---------------------------------------------------------
_NARROW = set("il.,:;|!'`[]()ftjI ")
_WIDE = set("mwMW@%")
_UPPER = set("ABCDEFGHJKLNOPQRSTUVXYZ&")


def text_width(text: str, size: float, *, mono: bool = False) -> float:
    """Estimated width in px of ``text`` at font ``size`` (DejaVu-like metrics; slightly generous)."""
    if mono:
        return 0.61 * size * len(text)
    w = 0.0
    for c in text:
        if c in _NARROW:
            w += 0.34
        elif c in _WIDE:
            w += 0.9
        elif c in _UPPER:
            w += 0.72
        else:
            w += 0.6
    return w * size


def fit_text(text: str, size: float, width: float, *, mono: bool = False) -> str:
    """``text`` with a middle ellipsis so that it fits ``width`` px (paths keep their start and file name)."""
    if text_width(text, size, mono=mono) <= width:
        return text
    lo, hi = 1, len(text)
    best = text[:1] + "\u2026"
    while lo <= hi:  # longest kept length that fits
        mid = (lo + hi) // 2
        keep = mid
        cand = text[: keep // 3] + "\u2026" + text[len(text) - (keep - keep // 3):]
        if text_width(cand, size, mono=mono) <= width:
            best, lo = cand, mid + 1
        else:
            hi = mid - 1
    return best


# -- ticks ------------------------------------------------------------------
def nice_step(span: float, target: int = 5) -> float:
    """The 1, 2, 2.5 or 5 times a power of ten step whose interval count over ``span`` is closest to ``target``."""
    if not span > 0 or not math.isfinite(span):
        return 1.0
    raw = span / max(target, 1)
    mag = 10.0 ** math.floor(math.log10(raw))
    cands = [m * mag for m in (0.5, 1.0, 2.0, 2.5, 5.0, 10.0)]
    return min(cands, key=lambda st: (abs(span / st - target), st))


def nice_ticks(lo: float, hi: float, target: int = 5) -> list[float]:
    """Round tick values inside [lo, hi]."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        return [lo] if math.isfinite(lo) else []
    step = nice_step(hi - lo, target)
    first = math.ceil(lo / step - 1e-9)
    last = math.floor(hi / step + 1e-9)
    return [round(k * step, 12) for k in range(first, last + 1)]


def nice_max(hi: float, target: int = 5) -> float:
    """The first round tick at or above ``hi`` (an axis end that lands on a tick)."""
    if not hi > 0:
        return 1.0
    step = nice_step(hi, target)
    return math.ceil(hi / step - 1e-9) * step


def fmt_tick(v: float, step: float) -> str:
    """A tick label with as many decimals as the step needs (0.25 -> two); thousands separated."""
    decimals = 0
    while decimals < 6 and abs(step * 10 ** decimals - round(step * 10 ** decimals)) > 1e-6 * max(1.0, step * 10 ** decimals):
        decimals += 1
    return f"{v:,.{decimals}f}"


def log_ticks(lo: float, hi: float, max_ticks: int = 7) -> list[float]:
    """Decades within [lo, hi] (every other one when there are too many)."""
    if not (lo > 0 and hi > lo):
        return []
    a, b = math.ceil(math.log10(lo) - 1e-9), math.floor(math.log10(hi) + 1e-9)
    exps = list(range(a, b + 1))
    stride = max(1, math.ceil(len(exps) / max_ticks))
    return [10.0 ** e for e in exps[::stride]]


def int_ticks(lo: float, hi: float, target: int = 5) -> list[float]:
    """Round integer ticks in [lo, hi] (process numbers, counts): steps of at least 1."""
    step = max(1.0, nice_step(hi - lo, target))
    return [t for t in nice_ticks(lo, hi, max(1, int(round((hi - lo) / step)))) if float(t).is_integer()] if hi > lo else [lo]


def log2_ticks(lo: float, hi: float, max_ticks: int = 5) -> list[float]:
    """Powers of two within [lo, hi] for a logarithmic bytes axis, at most ``max_ticks``, aligned on 1 KiB, 1 MiB..."""
    if not (lo > 0 and hi > lo):
        return []
    a, b = math.ceil(math.log2(lo) - 1e-9), math.floor(math.log2(hi) + 1e-9)
    for stride in (1, 2, 5, 10, 20):
        exps = [e for e in range(a, b + 1) if e % stride == 0]
        if len(exps) <= max_ticks:
            break
    return [2.0 ** e for e in exps]


def byte_ticks(hi: float, target: int = 5) -> tuple[float, list[float], list[str]]:
    """(axis end, ticks, labels) for a bytes axis from 0: round steps in the binary unit of ``hi``."""
    if not hi > 0:
        return 1.0, [0.0], ["0 B"]
    k, scale = binary_scale(hi)
    end = nice_max(hi / scale, target)
    ticks = nice_ticks(0.0, end, target)
    step = ticks[1] - ticks[0] if len(ticks) > 1 else 1.0
    labels = ["0" if t == 0 else f"{fmt_tick(t, step)} {BINARY_UNITS[k]}" for t in ticks]
    return end * scale, [t * scale for t in ticks], labels


# -- scales -----------------------------------------------------------------
class Linear:
    def __init__(self, lo: float, hi: float, p0: float, p1: float) -> None:
        if not hi > lo:
            hi = lo + 1.0
        self.lo, self.hi, self.p0, self.p1 = float(lo), float(hi), float(p0), float(p1)

    def __call__(self, v):
        """Pixel position(s) of value(s), clamped to the axis."""
        a = (np.asarray(v, dtype=np.float64) - self.lo) / (self.hi - self.lo)
        out = self.p0 + np.clip(a, 0.0, 1.0) * (self.p1 - self.p0)
        return float(out) if np.ndim(out) == 0 else out


class Log:
    def __init__(self, lo: float, hi: float, p0: float, p1: float) -> None:
        lo = max(float(lo), 1e-300)
        if not hi > lo:
            hi = lo * 10
        self.lo, self.hi, self.p0, self.p1 = lo, float(hi), float(p0), float(p1)
        self._l0, self._l1 = math.log10(lo), math.log10(self.hi)

    def __call__(self, v):
        x = np.maximum(np.asarray(v, dtype=np.float64), self.lo)
        a = (np.log10(x) - self._l0) / (self._l1 - self._l0)
        out = self.p0 + np.clip(a, 0.0, 1.0) * (self.p1 - self.p0)
        return float(out) if np.ndim(out) == 0 else out


# -- colours ----------------------------------------------------------------
# ColorBrewer sequential ramps (light to dark), first class dropped so that any non-zero cell is tinted
RAMPS = {
    "blues": ("#deebf7", "#c6dbef", "#9ecae1", "#6baed6", "#4292c6", "#2171b5", "#08519c", "#08306b"),
    "oranges": ("#fee6ce", "#fdd0a2", "#fdae6b", "#fd8d3c", "#f16913", "#d94801", "#a63603", "#7f2704"),
}


def _rgb(hex_colour: str) -> tuple[int, int, int]:
    h = hex_colour.lstrip("#")
    return int(h[0:2], 16), int(h[2:4], 16), int(h[4:6], 16)


def ramp_lut(name: str, n: int = 256) -> np.ndarray:
    """(n, 3) uint8 colours interpolated along a named ramp."""
    anchors = np.array([_rgb(c) for c in RAMPS[name]], dtype=np.float64)
    pos = np.linspace(0.0, 1.0, len(anchors))
    x = np.linspace(0.0, 1.0, n)
    return np.stack([np.interp(x, pos, anchors[:, i]) for i in range(3)], axis=1).round().astype(np.uint8)


def colourise(values: np.ndarray, lut: np.ndarray, *, vmin: float, vmax: float, log: bool = False,
              empty: str = EMPTY) -> np.ndarray:
    """(rows, cols, 3) uint8 image: values > 0 mapped onto ``lut`` over [vmin, vmax]; others ``empty``."""
    v = np.asarray(values, dtype=np.float64)
    has = v > 0
    if log:
        lo, hi = math.log10(max(vmin, 1e-300)), math.log10(max(vmax, vmin * 10, 1e-300))
        a = (np.log10(np.where(has, v, 1.0)) - lo) / max(hi - lo, 1e-12)
    else:
        a = (v - vmin) / max(vmax - vmin, 1e-300)
    idx = (np.clip(a, 0.0, 1.0) * (len(lut) - 1)).round().astype(np.int64)
    img = lut[idx]
    img[~has] = _rgb(empty)
    return img


def png_rgb(img: np.ndarray) -> bytes:
    """Encode a (rows, cols, 3) uint8 array as a PNG (8-bit RGB, no filter, zlib)."""
    img = np.ascontiguousarray(img, dtype=np.uint8)
    h, w = img.shape[:2]
    raw = np.zeros((h, 1 + 3 * w), dtype=np.uint8)  # filter byte 0 ("none") on every row
    raw[:, 1:] = img.reshape(h, 3 * w)

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw.tobytes(), 6)) + chunk(b"IEND", b""))


# -- figure -------------------------------------------------------------------
def _attrs(**kw) -> str:
    out = []
    for k, v in kw.items():
        if v is None:
            continue
        name = k.rstrip("_").replace("_", "-")
        out.append(f' {name}="{esc(v) if isinstance(v, str) else num(v)}"')
    return "".join(out)


def _title(title: str | None) -> str:
    return f"<title>{esc(title)}</title>" if title else ""


class Figure:
    """An SVG drawing of a fixed size; ``svg()`` returns the markup.

    ``marks`` counts the data marks drawn (bars, steps, cells images, dots),
    ``images`` keeps the PNGs embedded (for tests and sizes).
    """

    def __init__(self, width: float, height: float, *, label: str = "") -> None:
        self.width, self.height = float(width), float(height)
        self.label = label
        self.parts: list[str] = []
        self.panels: list[Axes] = []
        self.images: list[bytes] = []
        self.marks = 0

    # raw drawing (all text escaped here)
    def text(self, x: float, y: float, s: str, *, size: float = 11, anchor: str = "start", color: str = INK,
             weight: str | None = None, rotate: float | None = None, mono: bool = False, baseline: str | None = None,
             title: str | None = None) -> None:
        tr = f' transform="rotate({num(rotate)} {num(x)} {num(y)})"' if rotate else ""
        fam = f' font-family="{MONO}"' if mono else ""
        a = _attrs(x=x, y=y, font_size=size, text_anchor=anchor if anchor != "start" else None, fill=color if color != INK else None,
                   font_weight=weight, dominant_baseline=baseline)
        self.parts.append(f"<text{a}{fam}{tr}>{_title(title)}{esc(s)}</text>")

    def rect(self, x: float, y: float, w: float, h: float, fill: str, *, title: str | None = None, mark: bool = True,
             stroke: str | None = None, opacity: float | None = None) -> None:
        if w <= 0 or h <= 0:
            return
        if mark:  # a non-zero value stays visible (at least half a pixel), never rounded away
            w, h = max(w, 0.5), max(h, 0.5)
        cls = ' class="mark"' if mark else ""
        a = _attrs(x=x, y=y, width=w, height=h, fill=fill, stroke=stroke, fill_opacity=opacity)
        if title:
            self.parts.append(f"<rect{cls}{a}>{_title(title)}</rect>")
        else:
            self.parts.append(f"<rect{cls}{a}/>")
        self.marks += mark

    def rects(self, x: np.ndarray, y: np.ndarray, w: np.ndarray, h: np.ndarray | float, fill: str, *,
              group_title: str | None = None, stroke: str | None = None) -> None:
        """Many rectangles of one colour, as one group (one tooltip for the group)."""
        x, y, w = np.asarray(x, float), np.asarray(y, float), np.asarray(w, float)
        h = np.broadcast_to(np.asarray(h, float), x.shape)
        keep = (w > 0) & (h > 0)
        if not keep.any():
            return
        w, h = np.maximum(w, 0.5), np.maximum(h, 0.5)
        items = "".join(f'<rect x="{num(a)}" y="{num(b)}" width="{num(c)}" height="{num(d)}"/>'
                        for a, b, c, d in zip(x[keep].tolist(), y[keep].tolist(), w[keep].tolist(), h[keep].tolist()))
        self.parts.append(f'<g class="mark"{_attrs(fill=fill, stroke=stroke, stroke_width=0.5 if stroke else None)}>{_title(group_title)}{items}</g>')
        self.marks += int(keep.sum())

    def line(self, x1: float, y1: float, x2: float, y2: float, *, color: str = MUTED, width: float = 1.0,
             dash: str | None = None) -> None:
        self.parts.append(f"<line{_attrs(x1=x1, y1=y1, x2=x2, y2=y2, stroke=color, stroke_width=width, stroke_dasharray=dash)}/>")

    def path(self, d: str, *, fill: str = "none", stroke: str | None = None, width: float | None = None,
             mark: bool = True, title: str | None = None, opacity: float | None = None) -> None:
        cls = ' class="mark"' if mark else ""
        a = _attrs(d=d, fill=fill, stroke=stroke, stroke_width=width, fill_opacity=opacity)
        self.parts.append(f"<path{cls}{a}>{_title(title)}</path>" if title else f"<path{cls}{a}/>")
        self.marks += mark

    def image(self, x: float, y: float, w: float, h: float, png: bytes, *, mark: bool = True, title: str | None = None) -> None:
        """A PNG stretched over a box, drawn with hard pixel edges (one cell = one block)."""
        self.images.append(png)
        uri = "data:image/png;base64," + base64.b64encode(png).decode("ascii")
        cls = ' class="mark"' if mark else ""
        self.parts.append(f'<image{cls}{_attrs(x=x, y=y, width=w, height=h)} preserveAspectRatio="none" '
                          f'image-rendering="optimizeSpeed" style="image-rendering:pixelated" href="{uri}">{_title(title)}</image>')
        self.marks += mark

    def panel(self, x: float, y: float, w: float, h: float) -> "Axes":
        ax = Axes(self, x, y, w, h)
        self.panels.append(ax)
        return ax

    def legend(self, items: Sequence[tuple[str, str]], x: float, y: float, *, size: float = 11,
               max_width: float | None = None, marker: dict | None = None) -> float:
        """Swatches and labels in rows from (x, y) (top-left); wraps at ``max_width``.  Returns the height used.

        ``marker`` maps a label to "x" (a cross) or "dot" instead of a square swatch.
        """
        marker = marker or {}
        cx, cy = x, y
        row_h = size + 6
        limit = x + (max_width if max_width else self.width - x)
        for label, colour in items:
            w = 14 + 4 + text_width(label, size) + 14
            if cx > x and cx + w - 14 > limit:
                cx, cy = x, cy + row_h
            kind = marker.get(label, "box")
            mid = cy + row_h / 2
            if kind == "x":
                self.path(f"M{num(cx + 2)},{num(mid - 5)}L{num(cx + 12)},{num(mid + 5)}M{num(cx + 2)},{num(mid + 5)}L{num(cx + 12)},{num(mid - 5)}",
                          stroke=colour, width=2, mark=False)
            elif kind == "dot":
                self.parts.append(f'<circle{_attrs(cx=cx + 7, cy=mid, r=3.5, fill=colour)}/>')
            else:
                self.rect(cx + 1, mid - 5, 12, 10, colour, mark=False)
            self.text(cx + 18, mid, label, size=size, baseline="central")
            cx += w
        return cy + row_h - y

    def svg(self) -> str:
        w, h = num(self.width), num(self.height)
        label = f' role="img" aria-label="{esc(self.label)}"' if self.label else ""
        return (f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" viewBox="0 0 {w} {h}" width="{w}" height="{h}"'
                f' font-family="{FONT}" font-size="11" fill="{INK}"{label}>' + "".join(self.parts) + "</svg>")


class Axes:
    """A rectangular plotting area with an x and a y scale (set with ``x``/``y`` before drawing data)."""

    def __init__(self, fig: Figure, x: float, y: float, w: float, h: float) -> None:
        self.fig = fig
        self.left, self.top, self.w, self.h = float(x), float(y), float(w), float(h)
        self.right, self.bottom = self.left + self.w, self.top + self.h
        self.sx: Linear | Log = Linear(0, 1, self.left, self.right)
        self.sy: Linear | Log = Linear(0, 1, self.bottom, self.top)

    def x(self, lo: float, hi: float, *, log: bool = False) -> "Axes":
        self.sx = (Log if log else Linear)(lo, hi, self.left, self.right)
        return self

    def y(self, lo: float, hi: float, *, log: bool = False, down: bool = False) -> "Axes":
        """y scale; ``down`` puts ``lo`` at the top (rows, categories)."""
        p0, p1 = (self.top, self.bottom) if down else (self.bottom, self.top)
        self.sy = (Log if log else Linear)(lo, hi, p0, p1)
        return self

    def background(self, colour: str = "#ffffff") -> None:
        self.fig.rect(self.left, self.top, self.w, self.h, colour, mark=False)

    def frame(self) -> None:
        self.fig.parts.append(f'<rect{_attrs(x=self.left, y=self.top, width=self.w, height=self.h, fill="none", stroke=FRAME)} shape-rendering="crispEdges"/>')

    def grid(self, axis: str, values: Iterable[float]) -> None:
        segs = []
        for v in values:
            if axis == "x":
                p = round(self.sx(v)) + 0.5
                segs.append(f"M{num(p)},{num(self.top)}V{num(self.bottom)}")
            else:
                p = round(self.sy(v)) + 0.5
                segs.append(f"M{num(self.left)},{num(p)}H{num(self.right)}")
        if segs:
            self.fig.parts.append(f'<path d="{"".join(segs)}" stroke="{GRID}" fill="none" shape-rendering="crispEdges"/>')

    def xticks(self, values: Sequence[float], labels: Sequence[str], *, size: float = 11, rotate: float | None = None,
               at: Sequence[float] | None = None) -> None:
        """Tick marks and labels under the axes (``at``: pixel positions instead of scaled values)."""
        pos = list(at) if at is not None else [self.sx(v) for v in values]
        segs = "".join(f"M{num(round(p) + 0.5)},{num(self.bottom)}v4" for p in pos)
        if segs:
            self.fig.parts.append(f'<path d="{segs}" stroke="{MUTED}" shape-rendering="crispEdges"/>')
        for p, lab in zip(pos, labels):
            if rotate:
                self.fig.text(p + 3, self.bottom + 8, lab, size=size, anchor="end", rotate=rotate, baseline="hanging", color=MUTED)
            else:
                self.fig.text(p, self.bottom + 7, lab, size=size, anchor="middle", baseline="hanging", color=MUTED)

    def yticks(self, values: Sequence[float], labels: Sequence[str], *, size: float = 11, at: Sequence[float] | None = None,
               mono: bool = False, titles: Sequence[str] | None = None, side: str = "left") -> None:
        pos = list(at) if at is not None else [self.sy(v) for v in values]
        if side == "left":
            segs = "".join(f"M{num(self.left - 4)},{num(round(p) + 0.5)}h4" for p in pos)
        else:
            segs = "".join(f"M{num(self.right)},{num(round(p) + 0.5)}h4" for p in pos)
        if segs:
            self.fig.parts.append(f'<path d="{segs}" stroke="{MUTED}" shape-rendering="crispEdges"/>')
        for i, (p, lab) in enumerate(zip(pos, labels)):
            t = titles[i] if titles else None
            if side == "left":
                self.fig.text(self.left - 7, p, lab, size=size, anchor="end", baseline="central", mono=mono, title=t, color=INK if mono else MUTED)
            else:
                self.fig.text(self.right + 7, p, lab, size=size, baseline="central", mono=mono, title=t, color=MUTED)

    def xlabel(self, text: str, *, size: float = 12, offset: float = 24) -> None:
        self.fig.text((self.left + self.right) / 2, self.bottom + offset, text, size=size, anchor="middle", baseline="hanging")

    def ylabel(self, text: str, *, size: float = 12, offset: float = 40) -> None:
        cx, cy = self.left - offset, (self.top + self.bottom) / 2
        self.fig.text(cx, cy, text, size=size, anchor="middle", rotate=-90, baseline="central")

    def title(self, text: str, *, size: float = 13, align: str = "middle") -> None:
        x = {"middle": (self.left + self.right) / 2, "start": self.left}[align]
        self.fig.text(x, self.top - 8, text, size=size, anchor=align, weight="600")

    def colorbar(self, lut: np.ndarray, *, lo: float, hi: float, log: bool, ticks: Sequence[float], labels: Sequence[str],
                 gap: float = 10, width: float = 12) -> None:
        """A vertical colour bar right of the axes, ``lo`` at the bottom."""
        x = self.right + gap
        strip = lut[::-1][:, None, :]  # top = high
        self.fig.image(x, self.top, width, self.h, png_rgb(strip), mark=False)
        self.fig.parts.append(f'<rect{_attrs(x=x, y=self.top, width=width, height=self.h, fill="none", stroke=FRAME)} shape-rendering="crispEdges"/>')
        scale = (Log if log else Linear)(lo, hi, self.bottom, self.top)
        for v, lab in zip(ticks, labels):
            p = round(scale(v)) + 0.5
            self.fig.line(x + width, p, x + width + 3, p)
            self.fig.text(x + width + 6, p, lab, size=10, baseline="central", color=MUTED)
