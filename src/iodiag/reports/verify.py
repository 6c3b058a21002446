"""Before/after of ``iodiag verify``: the result dict (schema ``iodiag.verify/1``) and its terminal and HTML forms.

``verify_result`` turns the interleaved runs (jobs/verify.py) into medians, the speedup with its 95 % band and
the run-to-run noise of each side, for the wall time of the whole command, its CPU time, and the workload's own
timed section when it reported one.  The renderers only format that dict (the style of reports/compare.py).
"""

from __future__ import annotations

import io
import shlex
from typing import Any, Sequence

from ..units import fmt_pct, fmt_seconds

SCHEMA = "iodiag.verify/1"
METRICS = (("wall_s", "wall time of the command"), ("workload_s", "the workload's own timed section"),
           ("cpu_s", "CPU time of the process tree"))


def verify_result(runs, *, recommendation=None, sets: Sequence[str] = (), chosen: str | None = None) -> dict[str, Any]:
    """The result dict.  Settings applied inside the program (the preload) are listed where they fired; one that
    never fired is "not applied", and when nothing else changed no speedup is reported: the runs measured the
    same program twice."""
    from ..jobs.verify import applied_overrides, speedup_band

    plan = runs.plan
    fired, missing, preload_notes = applied_overrides(runs)
    rows = [r.to_dict() for r in runs.runs]
    side = {s: [r for r in runs.runs if r.side == s] for s in ("before", "after")}
    speed: dict[str, Any] = {}
    for key, label in METRICS:
        a = [getattr(r, key) for r in side["before"]]
        b = [getattr(r, key) for r in side["after"]]
        if all(x is not None and x > 0 for x in a + b) and len(a) >= 2:
            speed[key] = {"label": label, **speedup_band(a, b)}
    applied_nothing = bool(plan.overrides) and len(missing) == len(plan.overrides) and not plan.direct
    if applied_nothing:
        speed = {}
    notes = list(plan.notes)
    if chosen:
        notes.insert(0, chosen)
    notes += preload_notes
    for m in missing:
        notes.append(f"not applied: {m} — the program never reached a call where it applies "
                     f"({_where(m)}); no speedup is reported for it")
    if runs.prepare_s:
        notes.insert(0, f"the changed data layout was prepared once before the timed runs ({fmt_seconds(sum(runs.prepare_s))}, "
                        "not included in the after runs' times); what it made is kept: it is the change to adopt")
    notes.append("runs without a collector (no Darshan, no Dask capture), before and after interleaved")
    if len(side["before"]) < 5:
        notes.append(f"only {len(side['before'])} runs per side: the band is wide; use --reps 5 or more")
    return {
        "schema": SCHEMA,
        "job": plan.job,
        "recommendation": recommendation.to_dict() if recommendation is not None else None,
        "settings_by_hand": list(sets),
        "before": {"command": shlex.join(plan.before)},
        "after": {"command": shlex.join(plan.after),
                  "env": {k: v for k, v in plan.env_after.items() if plan.env_before.get(k) != v}},
        "changed": list(plan.changed),
        "applied": [{k: v for k, v in f.items()} for f in fired],
        "not_applied": list(missing),
        "prepare": [{"command": c, "wall_s": round(t, 6)} for c, t in zip(plan.prepare, runs.prepare_s)],
        "reps": len(side["before"]),
        "order": "".join("A" if r.side == "before" else "B" for r in runs.runs),
        "runs": rows,
        "speedup": speed,
        "primary": "wall_s",
        "log": runs.log,
        "notes": notes,
    }


def _where(setting: str) -> str:
    from ..jobs.verify import PRELOAD_WHERE

    return PRELOAD_WHERE.get(setting, setting)


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
