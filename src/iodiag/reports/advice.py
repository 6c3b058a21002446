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
    """The gain and how it is known (``Recommendation.gain``): measured by verify, predicted with a validated
    band, a true upper bound from the time model, or unknown (then: measure it)."""
    e, lo, hi = r.get("expected_speedup"), r.get("speedup_low"), r.get("speedup_high")
    kind = r.get("gain")
    band = f" ({lo:.1f}-{hi:.1f}x)" if lo is not None and hi is not None else ""
    if kind == "measured" and e is not None:
        return f"measured {e:.2f}x{band} by iodiag verify"
    if kind == "predicted" and e is not None and band:  # without a validated band a point is no prediction
        return f"predicted {e:.1f}x{band}, band validated on measured runs"
    if kind == "bound" and hi is not None:
        over = r.get("gain_over") or "all the I/O it acts on"
        return f"at most {hi:.2f}x (a bound: if {over} went away)" if hi < 10 else \
            f"at most {hi:.1f}x (a bound: if {over} went away)"
    if kind == "none":
        return "not a speed-up (changes what is measured)"
    if kind is not None or (e is None and hi is None):
        return "unknown — measure it: iodiag verify"
    if e is not None:  # a recommendation made before gains said how they are known
        return f"expected {e:.1f}x{band}"
    return f"{hi:.1f}x if the measured cost went away (not a prediction)"


def recommendation_lines(recs: Sequence[dict[str, Any]], *, full: bool = False,
                         width: int = 100) -> list[tuple[str, str | None]]:
    """(text, style) lines of the recommendations, best first, the prose wrapped to ``width`` under its own
    indent; the model's abstention last.

    A change's text is what the user pastes, so it is never wrapped like prose (a wrapped ``export`` or path is a
    different command): code of several lines is a block under its label, each line as written
    (``change_lines``); a shell line (env, shell, arg) longer than ``width`` is broken between its arguments with
    a trailing backslash (``shell_lines``), and code, config lines and shell lines that cannot be broken so stay
    one line longer than ``width``.  Print the lines unwrapped (``textout.Lines.line(..., wrap=False)``, rich's
    ``soft_wrap=True``): the terminal then folds a long line itself, and copying it gives it back whole."""
    import textwrap

    from .textout import clean

    out: list[tuple[str, str | None]] = []
    for text, style, kind in _lines(recs, full=full):
        text = clean(text)  # names come from logs: no control character reaches a terminal (code: see change_lines)
        if len(text) <= width:
            out.append((text, style))
        elif kind == "rule":  # the tree's rules keep their own layout: a long one goes on under its own text
            lead = len(text) - len(text.lstrip())
            body = text.lstrip()
            mark = len(body) - len(body.lstrip("▶ →"))  # "▶   → " in front of the rule's words
            out += [(part, style) for part in textwrap.wrap(body, width=width, initial_indent=" " * lead,
                                                            subsequent_indent=" " * (lead + mark + 2),
                                                            break_on_hyphens=False, break_long_words=False)]
        elif kind in _SHELL_KINDS:
            out += [(part, style) for part in shell_lines(text, width, CHANGE_HANG)]
        elif kind is not None:  # code, a line of a code block or a config line: whole
            out.append((text, style))
        else:
            lead = len(text) - len(text.lstrip())
            hang = " " * (lead + (4 if text.lstrip()[:1].isdigit() else 2))
            out += [(part, style) for part in textwrap.wrap(text.strip(), width=width, initial_indent=" " * lead,
                                                            subsequent_indent=hang, break_on_hyphens=False,
                                                            break_long_words=False)]
    return out


_SHELL_KINDS = ("env", "shell", "arg")  # change kinds whose text is a shell command line
CHANGE_INDENT = "      "
CHANGE_HANG = CHANGE_INDENT + "  "  # continuation lines of a change


def change_label(kind: str) -> str:
    """The word in front of a change's text ("env", "code", ...): ``"<indent><label>: <text>"`` is its line."""
    return _KIND_LABEL.get(kind, kind)


def change_lines(c: dict[str, Any]) -> list[tuple[str, str | None, str | None]]:
    """(text, style, kind) lines of one change.  One line: ``"<indent><label>: <text>"``.  Several (a code
    snippet): the label alone (``"<indent>code:"``), then every line of the code under ``CHANGE_HANG``, its own
    indentation kept after that prefix, so that the block copied and dedented (``textwrap.dedent``; IPython and
    editors do it on paste) is the code exactly.  Control characters other than the newline are shown as "?"
    (tabs as spaces, to the next multiple of 8, as Python reads them)."""
    from .textout import clean

    text, kind = str(c.get("text") or ""), c["kind"]
    if "\n" not in text.rstrip("\n"):
        return [(clean(f"{CHANGE_INDENT}{change_label(kind)}: {text.rstrip(chr(10))}"), None, kind)]
    out: list[tuple[str, str | None, str | None]] = [(f"{CHANGE_INDENT}{change_label(kind)}:", None, kind)]
    for line in text.rstrip("\n").split("\n"):
        line = clean(line.expandtabs(8))
        out.append((CHANGE_HANG + line if line.strip() else "", None, "block"))
    return out


def shell_lines(line: str, width: int, hang: str) -> list[str]:
    """A line holding a label and a shell command (``"      env: export A=1"``) as lines of at most ``width``
    characters, broken only where the shell allows: at a single space between two arguments, outside quotes and
    before any comment, the line ending in `` \\`` and the next one starting with ``hang`` (or a shorter indent
    when a long argument then fits).  The shell joins such lines back into the one command (the backslash-newline
    is removed and the indent separates the arguments as the space did).  The line unchanged when it fits, or
    when one argument is too long to fit a line by itself (the terminal then folds it; a break inside an argument
    would change the command)."""
    if len(line) <= width:
        return [line]
    head = line.index(": ") + 2 if ": " in line else len(line) - len(line.lstrip())
    cuts = [head + i for i in _shell_breaks(line[head:])]
    for n in range(len(hang), 1, -2):
        out = _broken(line, cuts, width, " " * n)
        if out:
            return out
    return [line]


def _broken(line: str, cuts: list[int], width: int, hang: str) -> list[str] | None:
    """``line`` broken greedily at the spaces ``cuts``, continued under ``hang``; None when a piece is too long."""
    def piece(a: int, b: int) -> str:  # the text from cut a (0: the line's start) to cut b
        return line[:b] if a == 0 else hang + line[a + 1:b]

    out, start = [], 0
    while len(piece(start, len(line))) > width:
        fit = [b for b in cuts if b > start and len(piece(start, b)) + 2 <= width]
        if not fit:
            return None
        out.append(piece(start, fit[-1]) + " \\")
        start = fit[-1]
    return out + [piece(start, len(line))]


def _shell_breaks(cmd: str) -> list[int]:
    """Indices of the spaces in shell command ``cmd`` where a line may end with a backslash: single spaces
    between two words, outside quotes and escapes, and the space before a trailing comment (which then starts
    the next line); none inside the comment (a backslash in a comment continues nothing)."""
    out: list[int] = []
    quote, escaped = "", False
    for i, ch in enumerate(cmd):
        if escaped:
            escaped = False
        elif quote == "'":
            quote = "" if ch == "'" else quote
        elif ch == "\\":
            escaped = True
        elif quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"`":
            quote = ch
        elif ch == "#" and (i == 0 or cmd[i - 1] in " \t"):
            if i > 1 and cmd[i - 1] == " ":  # the comment may start the next line (after the continuation)
                out.append(i - 1)
            break
        elif ch == " " and 0 < i < len(cmd) - 1 and cmd[i - 1] != " " and cmd[i + 1] not in " #":
            out.append(i)
    return out


def _lines(recs: Sequence[dict[str, Any]], *, full: bool) -> list[tuple[str, str | None, str | None]]:
    """(text, style, kind) lines: kind is a change's kind, "rule" for the tree's rules, None for prose."""
    lines: list[tuple[str, str | None, str | None]] = []
    active = [r for r in recs if r.get("abstain") is None]
    for i, r in enumerate(active, 1):
        src = "trained tree" if r.get("source") == "tree" else "rules"
        lines.append((f"{i:>2}. {r['title']}", "bold", None))
        for c in r.get("changes") or []:
            lines += change_lines(c)
        lines.append((f"      gain: {gain_text(r)}", None, None))
        who = f"; addresses {', '.join(r['addresses'])}" if r.get("addresses") else ""
        lines.append((f"      from {src}, on {r.get('based_on') or 'measured features'}{who}", "dim", None))
        if full:
            for n in r.get("notes") or []:
                lines.append((f"      note: {n}", "dim", None))
            if r.get("rules"):
                lines.append(("      the tree's rules (▶ this job's path):", "dim", None))
                lines += [(f"        {x}", None, "rule") for x in r["rules"]]
    for r in recs:
        if r.get("abstain") is not None and r.get("source") == "rules":
            lines.append((f"  no setting helps {', '.join(r.get('addresses') or ())}: {r['abstain']}", None, None))
    for r in recs:
        if r.get("abstain") is not None and r.get("source") != "rules":
            lines.append((f"  model: no advice — {r['abstain']}", "dim", None))
    return lines


def render_recommendations(recs: Sequence[dict[str, Any]], *, job: str, findings: Sequence[dict[str, Any]] = (),
                           params: dict[str, Any] | None = None, color: bool = False, width: int = 100,
                           recorded: bool = True) -> str:
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
    reasons = any(r.get("abstain") is not None and r.get("source") == "rules" for r in recs)
    con.print("What to change" if active else "Nothing a setting can change: why, per finding" if reasons else
              "Nothing to change: no rule or model recommends a setting", style="bold")
    for text, style in recommendation_lines(recs, full=True, width=width - 1):
        con.print(text, style=style, markup=False, soft_wrap=True)  # a long change line stays whole
    if active and not recorded:  # a log given by path: nothing iodiag recorded to re-run
        con.print()
        con.print(textwrap.fill("measure it: re-run the job with the change and compare (iodiag verify re-runs jobs "
                                "recorded by iodiag run)", width - 1, initial_indent="  ", subsequent_indent="  "),
                  style="dim", markup=False)
    elif active:
        con.print()
        top = active[0]
        settings = set(top.get("settings") or {})
        if any(c["kind"] in ("arg", "env") or (c["kind"] == "shell" and c.get("name") == "rechunk")
               for c in top.get("changes") or []) or settings & {"chunks", "workers", "threads", "compressor",
                                                                  "zarr_format"}:
            con.print(f"  measure it: iodiag verify {job}", style="dim", markup=False)
        else:
            con.print(textwrap.fill(f"the top change is code or a shell line: make it, then measure it with "
                                    f"iodiag verify {job} --after 'CHANGED COMMAND' (or --set name=value, --arg "
                                    f"N=VALUE where the program takes the setting)",
                                    width - 1, initial_indent="  ", subsequent_indent="  "), style="dim", markup=False)
    return buf.getvalue()
