"""Before/after of ``iodiag verify``: the terminal and HTML forms of its result dict (schema ``iodiag.verify/1``,
built by ``iodiag.jobs.verify_result.verify_result``).  They only format that dict (the style of
reports/compare.py)."""

from __future__ import annotations

import io
from typing import Any

from ..units import fmt_pct, fmt_seconds


def _band(s: dict[str, Any]) -> str:
    return f"{s['estimate']:.2f}x (95 % band {s['low']:.2f}-{s['high']:.2f}x)"


_SHORT = {"wall_s": "wall (command)", "workload_s": "workload section", "cpu_s": "CPU (process tree)"}


def render_verify_text(d: dict[str, Any], *, width: int = 100) -> str:
    import textwrap

    from rich.console import Console
    from rich.table import Table

    buf = io.StringIO()
    con = Console(file=buf, no_color=True, width=width, highlight=False, soft_wrap=False)

    def say(text: str, indent: int = 2, hang: int = 10, style: str | None = None) -> None:
        for line in textwrap.wrap(text, width=width - 1, initial_indent=" " * indent,
                                  subsequent_indent=" " * hang, break_on_hyphens=False, break_long_words=False):
            con.print(line, markup=False, style=style)

    rec = d.get("recommendation")
    what = f"{rec['title']} ({'trained tree' if rec.get('source') == 'tree' else 'rules'})" if rec else \
        "settings given by hand: " + " ".join(d["settings_by_hand"])
    con.print(f"iodiag verify — job {d['job']}", style="bold")
    say(f"verifies: {what}")
    say(f"before:  {d['before']['command']}")
    say(f"after:   {d['after']['command']}")
    for k, v in (d["after"].get("env") or {}).items():
        say(f"         {k}={v}")
    for c in d.get("changed") or []:
        say(f"changed: {c}")
    for a in d.get("applied") or []:
        asked = "" if a.get("asked") is None else f" (the program asked {a['asked']})"
        if a["setting"] == "open_once":  # the value says what was kept open: "steps.nc: 1,000 opens -> 1"
            say(f"applied: open_once at {a['where']} ({a['value']}), in {a['runs']} of {d['reps']} after runs")
            continue
        say(f"applied: {a['setting']} = {a['value']} at {a['where']}{asked}, in {a['runs']} of {d['reps']} after runs")
    for m in d.get("not_applied") or []:
        say(f"not applied: {m}", style="bold")
    for p in d.get("prepare") or []:
        say(f"prepared once ({fmt_seconds(p['wall_s'])}, not in the after times): {p['command']}")
    say(f"{d['reps']} runs per side, interleaved {d['order']}", style="dim")
    con.print()
    if d["speedup"]:
        t = Table(title="Before / after (medians)", title_justify="left", show_edge=False)
        for c in ("metric", "before", "after", "speedup", "95 % band", "noise A/B"):
            t.add_column(c, justify="left" if c == "metric" else "right", no_wrap=True)
        for key, s in d["speedup"].items():
            t.add_row(_SHORT.get(key, key), f"{s['median_before_s']:.3f} s", f"{s['median_after_s']:.3f} s",
                      f"{s['estimate']:.2f}x", f"{s['low']:.2f}-{s['high']:.2f}x",
                      f"±{fmt_pct(s['noise_before'])}/±{fmt_pct(s['noise_after'])}")
        con.print(t)
    main = d["speedup"].get(d["primary"])
    if main:
        con.print()
        say(f"Verdict: {main['verdict']} — {main['label']} {_band(main)}", indent=0, hang=2, style="bold")
    elif d.get("not_applied"):
        say(f"Verdict: not applied ({', '.join(d['not_applied'])}) — no speedup to report", indent=0, hang=2,
            style="bold")
    for n in d.get("notes") or []:
        say(f"note: {n}", hang=8, style="dim")
    return buf.getvalue()


def render_verify_html(d: dict[str, Any]) -> str:
    from .html import environment

    return environment().get_template("verify.html.j2").render(d=d, obfuscated=False)
