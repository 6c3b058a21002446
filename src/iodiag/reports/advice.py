""""What to change": recommendations (as dicts, ``Recommendation.to_dict``) formatted for the terminal.

One formatter for the report's section and for ``iodiag recommend``: a report shows each recommendation's title,
its concrete changes and its expected gain; ``iodiag recommend`` (``full=True``) adds the tree's rules with this
job's path marked, the notes and the findings it addresses.  Only formatting: the numbers come from recommend/.
"""

from __future__ import annotations

import io
from typing import Any, Sequence

_KIND_LABEL = {"arg": "flag", "env": "env", "snippet": "code", "shell": "shell", "config": "config"}


def gain_text(r: dict[str, Any]) -> str:
    """The expected gain with its band: "3.2x (2.1-4.0x)" for a prediction, "up to 1.5x" for a rule's bound."""
    e, lo, hi = r.get("expected_speedup"), r.get("speedup_low"), r.get("speedup_high")
    if e is not None:
        band = f" ({lo:.1f}-{hi:.1f}x)" if lo is not None and hi is not None else ""
        return f"expected {e:.1f}x{band}"
    if hi is not None:
        return f"{hi:.1f}x if the measured cost went away (not a prediction)"
    return "gain not estimated"


def recommendation_lines(recs: Sequence[dict[str, Any]], *, full: bool = False,
                         width: int = 100) -> list[tuple[str, str | None]]:
    """(text, style) lines of the recommendations, best first, wrapped to ``width`` under their own indent;
    the model's abstention last."""
    import textwrap

    out: list[tuple[str, str | None]] = []
    for text, style in _lines(recs, full=full):
        if text.startswith("        ") or len(text) <= width:  # the tree's rules keep their own layout
            out.append((text, style))
            continue
        lead = len(text) - len(text.lstrip())
        hang = " " * (lead + (4 if text.lstrip()[:1].isdigit() else 2))
        for i, part in enumerate(textwrap.wrap(text.strip(), width=width, initial_indent=" " * lead,
                                               subsequent_indent=hang, break_on_hyphens=False,
                                               break_long_words=False)):
            out.append((part, style))
    return out


def _lines(recs: Sequence[dict[str, Any]], *, full: bool) -> list[tuple[str, str | None]]:
    lines: list[tuple[str, str | None]] = []
    active = [r for r in recs if r.get("abstain") is None]
    for i, r in enumerate(active, 1):
        src = "trained tree" if r.get("source") == "tree" else "rules"
        lines.append((f"{i:>2}. {r['title']}", "bold"))
        for c in r.get("changes") or []:
            lines.append((f"      {_KIND_LABEL.get(c['kind'], c['kind'])}: {c['text']}", None))
        lines.append((f"      gain: {gain_text(r)}", None))
        who = f"; addresses {', '.join(r['addresses'])}" if r.get("addresses") else ""
        lines.append((f"      from {src}, on {r.get('based_on') or 'measured features'}{who}", "dim"))
        if full:
            for n in r.get("notes") or []:
                lines.append((f"      note: {n}", "dim"))
            if r.get("rules"):
                lines.append(("      the tree's rules (▶ this job's path):", "dim"))
                lines += [(f"        {x}", None) for x in r["rules"]]
    for r in recs:
        if r.get("abstain") is not None:
            lines.append((f"  model: no advice — {r['abstain']}", "dim"))
    return lines


def render_recommendations(recs: Sequence[dict[str, Any]], *, job: str, findings: Sequence[dict[str, Any]] = (),
                           params: dict[str, Any] | None = None, color: bool = False, width: int = 100) -> str:
    """``iodiag recommend JOB`` on a terminal."""
    import textwrap

    from rich.console import Console

    buf = io.StringIO()
    con = Console(file=buf, force_terminal=color, no_color=not color, width=width, highlight=False, soft_wrap=False)
    con.print(f"iodiag recommend — job {job}", style="bold")
    if params:
        con.print(textwrap.fill("workload parameters: " + " ".join(f"{k}={v}" for k, v in params.items()), width - 1,
                                initial_indent="  ", subsequent_indent="    "), markup=False)
    else:
        con.print("  no workload parameters recorded: advice from measured features only", style="dim")
    if findings:
        con.print(textwrap.fill("findings: " + ", ".join(f"{f['id']} ({f['severity']})" for f in findings), width - 1,
                                initial_indent="  ", subsequent_indent="    "), markup=False)
    con.print()
    active = [r for r in recs if r.get("abstain") is None]
    con.print("What to change" if active else "Nothing to change: no rule or model recommends a setting", style="bold")
    for text, style in recommendation_lines(recs, full=True, width=width - 1):
        con.print(text, style=style, markup=False)
    if active:
        con.print()
        if any(c["kind"] in ("arg", "env") for c in active[0].get("changes") or []):
            con.print(f"  measure it: iodiag verify {job}", style="dim", markup=False)
        else:
            con.print(textwrap.fill(f"the top change is code or a shell line: where the program exposes the setting "
                                    f"as a flag or variable, measure it with iodiag verify {job} --set name=value",
                                    width - 1, initial_indent="  ", subsequent_indent="  "), style="dim", markup=False)
    return buf.getvalue()
