"""The weak-scaling loss of a sweep (analyzers/weakloss.py) as text and as a small HTML page: per scale, a
stacked bar of the named components in seconds (gains to the left of zero, losses to the right) and the
unexplained rest, then each component with its band over the repetitions."""

from __future__ import annotations

from typing import Sequence

from ..analyzers.weakloss import COMPONENTS, WORDS
from .svg import esc
from ..units import fmt_pct

KEYS = (*COMPONENTS, "unexplained")
LETTER = {"io": "I", "compute": "C", "task_overhead": "O", "transfer_spill": "T", "startup_shutdown": "S",
          "graph_submit": "G", "iodiag_capture": "i", "unexplained": "?"}
COLOUR = {"io": "#d9534f", "compute": "#5b8bd9", "task_overhead": "#f0ad4e", "transfer_spill": "#9b59b6",
          "startup_shutdown": "#5cb85c", "graph_submit": "#17a2b8", "iodiag_capture": "#777777",
          "unexplained": "#dddddd"}


def _parts(row: dict) -> dict[str, float]:
    return {**row["components_s"], "unexplained": row["unexplained_s"]}


def _scale(rows: Sequence[dict]) -> float:
    return max([max(sum(v for v in _parts(r).values() if v > 0), sum(-v for v in _parts(r).values() if v < 0))
                for r in rows] + [1e-9])


def text_lines(rows: Sequence[dict], *, width: int = 48) -> list[str]:
    """Plain lines for the terminal (one bar per scale; the caller styles nothing)."""
    if not rows:
        return []
    full = _scale(rows)
    out = ["weak-scaling loss by component (the job's wall time per worker thread, the run of median wall time "
           "at each scale; band = range over the repetitions; bar: left of | shorter, right of | longer):"]
    for r in rows:
        parts = _parts(r)
        neg = "".join(LETTER[k] * round(-v / full * width) for k, v in parts.items() if v < 0)
        pos = "".join(LETTER[k] * round(v / full * width) for k, v in parts.items() if v > 0)
        eff = f", weak efficiency {fmt_pct(r['efficiency'])}" if r.get("efficiency") else ""
        out.append(f"  {r['p']} vs {r['p0']} workers: T {r['T0_s']:.2f} s -> {r['T_s']:.2f} s, loss "
                   f"{r['loss_s']:+.2f} s [{r['loss_band_s'][0]:+.2f}, {r['loss_band_s'][1]:+.2f}]{eff}"
                   f" ({r['base_runs']} and {r['runs']} runs)")
        out.append(f"    {neg:>{width}}|{pos}")
        for k in KEYS:
            v = parts[k]
            band = "" if k == "unexplained" else f"  [{r['bands_s'][k][0]:+.2f}, {r['bands_s'][k][1]:+.2f}]"
            mark = "  <- largest" if k == r["largest"] else ""
            note = " (I/O not traced: inside compute)" if k == "io" and not r.get("io_traced", True) else ""
            out.append(f"    {LETTER[k]} {WORDS[k]:<26} {v:+8.2f} s{band}{note}{mark}")
        if not r.get("adds_up", True):
            out.append(f"    the named components leave {r['unexplained_s']:+.2f} s of the {r['loss_s']:+.2f} s "
                       "unexplained (more than 25 %)")
    return out


def _bar_svg(r: dict, full: float, width: int = 640, height: int = 28) -> str:
    parts = _parts(r)
    mid = width / 2
    unit = (width / 2 - 4) / full
    rects = []
    x = mid
    for k, v in parts.items():
        if v > 0:
            w = v * unit
            rects.append(f'<rect x="{x:.1f}" y="4" width="{w:.1f}" height="{height - 8}" fill="{COLOUR[k]}">'
                         f'<title>{esc(WORDS[k])}: {v:+.2f} s</title></rect>')
            x += w
    x = mid
    for k, v in parts.items():
        if v < 0:
            w = -v * unit
            x -= w
            rects.append(f'<rect x="{x:.1f}" y="4" width="{w:.1f}" height="{height - 8}" fill="{COLOUR[k]}" '
                         f'opacity="0.55"><title>{esc(WORDS[k])}: {v:+.2f} s</title></rect>')
    rects.append(f'<line x1="{mid}" y1="0" x2="{mid}" y2="{height}" stroke="#000"/>')
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
            f'aria-label="loss by component at {r["p"]} workers">{"".join(rects)}</svg>')


def html_page(rows: Sequence[dict], *, title: str) -> str:
    """A self-contained page (no script, no external resource)."""
    full = _scale(rows)
    legend = " ".join(f'<span style="display:inline-block;width:10px;height:10px;background:{COLOUR[k]}"></span> '
                      f"{esc(WORDS[k])}" for k in KEYS)
    body = []
    for r in rows:
        parts = _parts(r)
        trs = "".join(f"<tr><td>{esc(WORDS[k])}</td><td style='text-align:right'>{parts[k]:+.2f}</td><td>"
                      + ("" if k == "unexplained" else f"[{r['bands_s'][k][0]:+.2f}, {r['bands_s'][k][1]:+.2f}]")
                      + ("</td><td>largest" if k == r["largest"] else "</td><td>") + "</td></tr>" for k in KEYS)
        eff = f", weak efficiency {fmt_pct(r['efficiency'])}" if r.get("efficiency") else ""
        body.append(f"<h2>{r['p']} vs {r['p0']} workers: loss {r['loss_s']:+.2f} s "
                    f"[{r['loss_band_s'][0]:+.2f}, {r['loss_band_s'][1]:+.2f}] (T {r['T0_s']:.2f} s &rarr; "
                    f"{r['T_s']:.2f} s{eff})</h2>{_bar_svg(r, full)}"
                    f"<table><tr><th>component</th><th>seconds</th><th>band over repetitions</th><th></th></tr>"
                    f"{trs}</table>")
    return ("<!doctype html><html><head><meta charset='utf-8'><title>" + esc(title) + "</title>"
            "<style>body{font-family:sans-serif;max-width:760px;margin:2em auto}td,th{padding:2px 8px}</style>"
            "</head><body><h1>" + esc(title) + "</h1><p>The job's wall time per worker thread, the run of median "
            "wall time at each scale (bands: the range over the repetitions); bars: right of the line the run got longer, left shorter. " + legend + "</p>"
            + "".join(body) + "</body></html>")
