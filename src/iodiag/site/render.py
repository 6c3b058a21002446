"""Format a site report dict (aggregate.site_report) as text, JSON or HTML.  Formatting only."""

from __future__ import annotations

import html
import json
from typing import Any, Sequence

from ..units import fmt_bytes, fmt_compact, fmt_pct
from ..reports.textout import Col, cut_middle, plain_table, wrap_plain


def _hours(s: Any) -> str:
    return fmt_compact(None if s is None else float(s) / 3600.0, " h")


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[bool] | None = None) -> list[str]:
    right = right or [i > 0 for i in range(len(headers))]
    w = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]
    def line(cells):
        return "  ".join(c.rjust(w[i]) if right[i] else c.ljust(w[i]) for i, c in enumerate(cells)).rstrip()
    return [line(headers), line(["-" * x for x in w])] + [line(r) for r in rows]


def _ch(x: Any) -> str:
    return "-" if x is None or x != x else (f"{float(x):.2f}" if abs(float(x)) < 10 else fmt_compact(x))


def _who(rows: Sequence[dict[str, Any]], key: str) -> str:
    return ", ".join(f"{r[key]} ({_ch(r['recoverable_core_hours'])})" for r in rows) or "-"


def _sections(rep: dict[str, Any]):
    """(title, headers, rows) for every table of the report, shared by text and HTML."""
    ov = rep["overview"]
    yield ("Overview", ["measure", "value"], [
        *([["site", str(ov["site"])]] if ov.get("site") else []),
        ["archive", str(ov["archive"])],
        ["days", f"{ov['first_day'] or '-'} .. {ov['last_day'] or '-'}"],
        ["jobs (programs)", f"{ov['jobs']} ({ov['programs']})"],
        ["logs read / damaged", f"{ov['logs_read']} / {ov['logs_damaged']}"],
        ["core-hours", fmt_compact(ov["core_hours"])],
        ["I/O time (process-hours)", _hours(ov["io_time_s"])],
        ["recoverable core-hours (all findings)", f"{_ch(ov.get('recoverable_core_hours'))} ({fmt_pct(_ratio(ov.get('recoverable_core_hours'), ov['core_hours']))})"],
        ["read / written", f"{fmt_bytes(ov['bytes_read'])} / {fmt_bytes(ov['bytes_written'])}"],
        ["jobs with findings", str(ov["jobs_with_findings"])],
        ["jobs with partial logs", str(ov["partial_jobs"])],
    ])
    yield ("What to change: recommendations by recoverable core-hours",
           ["finding", "jobs", "recoverable core-h", "% of core-h", "what to change", "costs most (core-h)"],
           [[r["finding"], str(r["jobs"]), _ch(r["recoverable_core_hours"]), fmt_pct(r["recoverable_share"]),
             r["action"],
             "users: " + _who(r["users"], "user") + "; programs: " + _who(r["executables"], "exe")] for r in rep.get("recommendations", [])]
           or [["(nothing recoverable)", "", "", "", "", ""]])
    for key, title in (("user", "Users to contact first"), ("exe", "Executables to look at first")):
        rows = rep["top_users" if key == "user" else "top_executables"]
        yield (title, [key, "jobs", "affected", "recoverable core-h", "costliest (core-h)", "affected core-h", "findings"],
               [[str(r[key]) or "?", str(r["jobs"]), str(r["jobs_affected"]), _ch(r.get("recoverable_core_hours")),
                 f"{r.get('costliest_finding') or '-'} ({_ch(r.get('costliest_core_hours'))})", fmt_compact(r["affected_core_hours"]),
                 ", ".join(f"{k} x{v}" for k, v in list(r["findings"].items())[:3])] for r in rows]
               or [["(none)", "", "", "", "", "", ""]])
    sc = rep.get("site_config") or {}
    if sc.get("defaults") or sc.get("rules"):
        yield ("Site defaults in force (site config)", ["tunable", "default"],
               [[k, v] for k, v in sc["defaults"].items()] + [["rule for users", r] for r in sc["rules"]])
    prev = rep["prevalence"]
    yield ("Findings: prevalence, by recoverable core-hours",
           ["finding", "jobs", "% jobs", "% core-h", "% I/O time", "est. cost", "recoverable core-h"],
           [[p["finding"], str(p["jobs"]), fmt_pct(p["jobs_share"]), fmt_pct(p["core_hours_share"]), fmt_pct(p["io_time_share"]),
             _hours(p["est_cost_s"]), _ch(p.get("recoverable_core_hours"))] for p in prev] or [["(no findings)", "", "", "", "", "", ""]])
    ops = rep["op_sizes"]
    tot_r, tot_w = sum(ops["read_ops"]) or 1, sum(ops["write_ops"]) or 1
    yield ("POSIX op sizes (all jobs)", ["size", "reads", "% reads", "writes", "% writes", "jobs (mostly)"],
           [[b, fmt_compact(r), fmt_pct(r / tot_r), fmt_compact(w), fmt_pct(w / tot_w), str(dr + dw)]
            for b, r, w, dr, dw in zip(ops.get("labels", ops["bins"]), ops["read_ops"], ops["write_ops"],
                                       ops["read_jobs_by_dominant_bin"], ops["write_jobs_by_dominant_bin"])])
    fpj = rep["files_per_job"]
    q = fpj["quantiles"]
    yield ("Files per job", ["files", "jobs"], [[h["files"], str(h["jobs"])] for h in fpj["histogram"]]
           + [["median / p90 / p99 / max", f"{fmt_compact(q['p50'])} / {fmt_compact(q['p90'])} / {fmt_compact(q['p99'])} / {fmt_compact(q['max'])}"]])
    tr = rep["trends"]
    yield (f"Trends per {tr['period']}", [tr["period"], "jobs", "core-h", "I/O time", "bytes", "with findings", "top finding"],
           [[r["period"], str(r["jobs"]), fmt_compact(r["core_hours"]), _hours(r["io_time_s"]), fmt_bytes(r["bytes"]),
             str(r["jobs_with_findings"]),
             (lambda fs: f"{max(fs, key=fs.get)} {fmt_pct(max(fs.values()))}" if fs else "-")(r["finding_share"])]
            for r in tr["rows"]])
    er = rep["errors"]
    yield ("Damaged or unreadable logs", ["kind", "logs"], [[k, str(v)] for k, v in er["by_kind"].items()] or [["(none)", "0"]])
    if er["examples"]:
        yield ("Examples", ["path", "kind", "cause"], [[e["path"], e["kind"], e["cause"]] for e in er["examples"]])


def _ratio(a: Any, b: Any) -> float | None:
    return float(a) / float(b) if a is not None and b else None


# how each table of the text report gives way on a narrow terminal (textout.fit_table): priority 0 stays; the
# highest numbers go first; "cut" columns shrink (names at their end, paths in the middle)
_FIT = {
    "Overview": [Col(), Col(cut="middle", min=16)],
    "Users to contact first": [Col(cut="end", min=10), Col(), Col(4), Col(), Col(2, cut="end", min=24), Col(3), Col(5, cut="end", min=30)],
    "Executables to look at first": [Col(cut="middle", min=14), Col(), Col(4), Col(), Col(2, cut="end", min=24), Col(3), Col(5, cut="end", min=30)],
    "Site defaults in force (site config)": [Col(), Col(cut="end", min=20)],
    "Findings: prevalence, by recoverable core-hours": [Col(), Col(), Col(2), Col(1), Col(3), Col(4), Col()],
    "Trends": [Col(), Col(), Col(2), Col(3), Col(4), Col(1), Col(cut="end", min=24)],
    "Examples": [Col(cut="middle", min=20), Col(), Col(cut="end", min=16)],
    "Damaged or unreadable logs": [Col(), Col()],
}


def _wrap(out: list[str], text: str, width: int, indent: int, hang: int | None = None) -> None:
    out.extend(wrap_plain(text, width, indent=indent, hang=hang))


def _who_line(rows: Sequence[dict[str, Any]], key: str) -> str:
    return ", ".join(f"{r[key]} {_ch(r['recoverable_core_hours'])}" for r in rows) or "-"


def _advice_line(r: dict[str, Any], scope_text: dict[str, str]) -> str:
    """The site config's advice on a finding as its own sentence: who says it, to which of the jobs, then the words."""
    head = r["site_advice"].split(": ", 1)[0] if r.get("site_advice_text") else "Site advice"
    scope = scope_text.get(r.get("site_advice_scope") or "")
    which = f", for {r['site_advice_jobs']} of its {r['jobs']} jobs ({scope})" if scope else ""
    return f"{head} in users' reports{which}: {r.get('site_advice_text') or r['site_advice']}"


TEXT_JOBS = 3  # jobs shown under each recommendation in the text report (the JSON and HTML list top_jobs)


def _recommendation_text(out: list[str], i: int, r: dict[str, Any], width: int) -> None:
    """One recommendation: its headline, what to change, the site's advice on its own line (only where it applies),
    whom to contact, and its costliest jobs with the command that reports each."""
    from .sweeps import SCOPE_TEXT

    _wrap(out, f"{i}. {r['finding']}: {_ch(r['recoverable_core_hours'])} core-h recoverable "
               f"({fmt_pct(r['recoverable_share'])} of all core-hours), {r['jobs']} jobs", width, 2, 5)
    _wrap(out, "What to change: " + r["action"], width, 5, 7)
    if r.get("site_advice"):
        _wrap(out, _advice_line(r, SCOPE_TEXT), width, 5, 7)
    _wrap(out, "Contact (core-h each): " + _who_line(r["users"], "user"), width, 5, 7)
    _wrap(out, "Programs (core-h each): " + _who_line(r["executables"], "exe"), width, 5, 7)
    jobs = (r.get("top_jobs") or [])[:TEXT_JOBS]
    if jobs:
        more = len(r.get("top_jobs") or []) < r["jobs"]
        out.append(f"     Jobs behind it, costliest first{' (more in --json and --html)' if more else ''}:")
        out.extend(_job_lines(jobs, width, indent=7, advice=bool(r.get("site_advice"))))


def _job_lines(jobs: Sequence[dict[str, Any]], width: int, *, indent: int, advice: bool = False) -> list[str]:
    """A table of jobs (id, user, program, recoverable core-h; with ``advice``, whether the site advice is for the
    job), each followed by the command that reports it alone (a command to paste is never cut: a long path runs
    past the line and the terminal folds it)."""
    specs = [Col(), Col(cut="end", min=8), Col(2, cut="middle", min=10), Col(), Col(1)] + ([Col(3)] if advice else [])
    heads = ["job id", "user", "program", "recov. core-h", "core-h"] + (["site advice"] if advice else [])
    rows = [[str(j.get("job_id") or "?"), j["user"], j["program"], _ch(j["recoverable_core_hours"]), fmt_compact(j["core_hours"])]
            + (["for it" if j.get("site_advice_applies") else "not for it"] if advice else []) for j in jobs]
    table = plain_table(heads, rows, width=width, right=[False, False, False, True, True, False], specs=specs, indent=indent)
    out = table[:2]
    for j, line in zip(jobs, table[2:]):
        out.append(line)
        if j.get("report_command"):
            out.append(" " * (indent + 2) + j["report_command"])
    return out


def render_text(rep: dict[str, Any], *, width: int = 100, color: bool = False) -> str:
    """The site report for a terminal ``width`` cells wide (tables fitted by ``textout``: columns cut or left out
    by priority; sentences wrapped).  ``color`` is accepted for the CLI's sake: the site report has no styles."""
    ov = rep["overview"]
    out: list[str] = []
    title = "iodiag site report" + (f": {ov['site']}" if ov.get("site") else "")
    out.append(title)
    out.append("")
    for sec_title, headers, rows in _sections(rep):
        if sec_title.startswith("What to change"):
            recs = rep.get("recommendations", [])
            out.append(sec_title)
            if not recs:
                out.append("  (nothing recoverable: no finding has an estimated cost)")
                out.append("")
                continue
            out.extend(plain_table(headers[:4], [r[:4] for r in rows], width=width, right=[False, True, True, True],
                                   specs=[Col(cut="end", min=12), Col(), Col(), Col(1)], indent=2))
            out.append("")
            for i, r in enumerate(recs, 1):
                _recommendation_text(out, i, r, width)
                out.append("")
            if rep.get("top_jobs"):
                out.append("Jobs to look at first (all findings together)")
                out.extend(_job_lines(rep["top_jobs"], width, indent=2))
                out.append("")
            continue
        out.append(sec_title)
        if sec_title == "Examples":  # a path and a sentence per log: lines, not a table
            arc = str(ov.get("archive") or "")
            for path, kind, cause in rows:
                if arc and path.startswith(arc.rstrip("/") + "/"):
                    path = path[len(arc.rstrip("/")) + 1:]  # under the archive of the overview
                out.append("  " + cut_middle(path, width - 2))
                _wrap(out, f"{kind}: {cause}", width, 4, 6)
            out.append("")
            continue
        key = next((k for k in _FIT if sec_title.startswith(k)), None)
        right = [False] + [True] * (len(headers) - 1)
        if sec_title.startswith(("Overview", "Site defaults")) or sec_title == "Examples":
            right = [False] * len(headers)
        out.extend(plain_table(headers, rows, width=width, right=right, specs=_FIT.get(key), indent=2))
        out.append("")
    return "\n".join(out) + "\n"


def render_json(rep: dict[str, Any]) -> str:
    return json.dumps(rep, indent=2, default=str)


_CSS = """
:root{--fg:#1a202c;--muted:#4a5568;--line:#e2e8f0;--accent:#2b6cb0;--good:#2f855a}
*{box-sizing:border-box}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI","DejaVu Sans",sans-serif;color:var(--fg);margin:0;background:#fff}
main{max-width:1180px;margin:0 auto;padding:16px 24px 48px}
header.top{border-bottom:3px solid var(--accent);padding-bottom:8px;margin-bottom:12px}
h1{font-size:22px;margin:8px 0 2px}h2{font-size:18px;margin:30px 0 8px;border-bottom:1px solid var(--line);padding-bottom:4px}
.muted{color:var(--muted)}.small{font-size:12px}
.cards{display:grid;grid-template-columns:repeat(auto-fit,minmax(170px,1fr));gap:10px;margin:12px 0}
.card{border:1px solid var(--line);border-radius:6px;padding:8px 12px}.card b{display:block;font-size:20px}
.card span{color:var(--muted);font-size:12px}.card.key{border-color:var(--good);background:#f0fff4}
table{border-collapse:collapse;width:100%;margin:6px 0 12px;font-size:13px}
th,td{border-bottom:1px solid var(--line);padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f7fafc;font-weight:600}td.num,th.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.rec{border:1px solid var(--line);border-left:6px solid var(--good);border-radius:4px;padding:8px 12px;margin:10px 0}
.rec h3{margin:0 0 4px;font-size:15px}.rec .what{background:#f0fff4;border:1px solid #c6f6d5;padding:6px 10px;border-radius:4px;margin:6px 0}
.rec .told{background:#ebf8ff;border:1px solid #bee3f8;padding:4px 10px;border-radius:4px;margin:6px 0}
.plots{display:grid;grid-template-columns:1fr 1fr;gap:14px}@media(max-width:900px){.plots{grid-template-columns:1fr}}
div.plot{border:1px solid var(--line);padding:6px 4px 2px}div.plot svg{display:block;max-width:100%;height:auto;margin:0 auto}
figcaption{font-size:12px;color:var(--muted);margin:4px 6px}
nav.toc a{margin-right:12px;font-size:13px}
table.jobs{font-size:12px}tr.cmd td{border-bottom:1px solid var(--line);padding:0 8px 6px 24px}
tr.cmd code{font:12px ui-monospace,"DejaVu Sans Mono",monospace;background:#f7fafc;padding:1px 4px;user-select:all;word-break:break-all}
table.jobs tr:has(+ tr.cmd) td{border-bottom:none}
"""


def _hbars(title: str, labels: Sequence[str], series: Sequence[tuple[str, str, Sequence[float]]], *, unit: str,
           width: float = 540, fmt=None) -> str:
    """Horizontal bars (one group per label, one bar per series) as inline SVG."""
    from ..reports import svg

    fmt = fmt or (lambda v: fmt_compact(v))
    n, k = len(labels), len(series)
    bar, gap = 14.0, 8.0
    left = min(230.0, 24 + max([svg.text_width(lb, 11) for lb in labels] + [40]))
    top, legend_h = 30.0, (22.0 if k > 1 else 0.0)
    h = top + legend_h + n * (k * bar + gap) + 34
    fig = svg.Figure(width, h, label=title)
    hi = max([max(v) if len(v) else 0.0 for _, _, v in series] + [0.0]) or 1.0
    hi = svg.nice_max(hi)
    ax = fig.panel(left, top + legend_h, width - left - 70, n * (k * bar + gap))
    ax.x(0, hi)
    ticks = svg.nice_ticks(0, hi, 4)
    ax.grid("x", ticks)
    ax.xticks(ticks, [fmt(t) for t in ticks])
    ax.xlabel(unit, offset=22)
    fig.text(8, 16, title, size=13, weight="600")
    if k > 1:
        fig.legend([(name, colour) for name, colour, _ in series], left, top - 4)
    for i, lab in enumerate(labels):
        y0 = ax.top + i * (k * bar + gap) + gap / 2
        fig.text(ax.left - 6, y0 + k * bar / 2, svg.fit_text(lab, 11, left - 10), size=11, anchor="end", baseline="central")
        for j, (name, colour, vals) in enumerate(series):
            v = float(vals[i])
            w = ax.sx(v) - ax.left
            fig.rect(ax.left, y0 + j * bar, w, bar - 2, colour, title=f"{lab} — {name}: {fmt(v)}")
            if v > 0:
                fig.text(ax.left + w + 4, y0 + j * bar + (bar - 2) / 2, fmt(v), size=10, baseline="central", color=svg.MUTED)
    ax.frame()
    return fig.svg()


def _plot(pid: str, svg_text: str, caption: str) -> str:
    return f"<figure id='{pid}'><div class='plot'>{svg_text}</div><figcaption>{html.escape(caption)}</figcaption></figure>"


def _html_table(headers: Sequence[str], rows: Sequence[Sequence[str]], num: Sequence[bool]) -> str:
    out = ["<table><tr>" + "".join(f"<th class='{'num' if n else ''}'>{html.escape(h)}</th>" for h, n in zip(headers, num)) + "</tr>"]
    for r in rows:
        out.append("<tr>" + "".join(f"<td class='{'num' if n else ''}'>{html.escape(c)}</td>" for c, n in zip(r, num)) + "</tr>")
    out.append("</table>")
    return "".join(out)


def _html_jobs(jobs: Sequence[dict[str, Any]], prefix: str, *, findings: bool = False, advice: bool = False) -> str:
    """Jobs as a table; each job id links to the command that reports the job alone (shown under it, selectable:
    a page without script cannot run it, the admin pastes it)."""
    if not jobs:
        return ""
    esc = html.escape
    head = (["job id", "user", "program", "recoverable core-h", "core-h"] + (["findings"] if findings else [])
            + (["site advice"] if advice else []))
    out = ["<table class='jobs'><tr>" + "".join(f"<th class='{'num' if h.endswith('core-h') else ''}'>{esc(h)}</th>" for h in head) + "</tr>"]
    for n, j in enumerate(jobs):
        anchor = f"cmd-{prefix}{n}"
        jid = esc(str(j.get("job_id") or "?"))
        cell = f"<a href='#{esc(anchor)}'>{jid}</a>" if j.get("report_command") else jid
        extra = f"<td>{esc(', '.join(j.get('findings') or []))}</td>" if findings else ""
        if advice:
            extra += f"<td>{'for this job' if j.get('site_advice_applies') else 'not for this job'}</td>"
        out.append(f"<tr><td>{cell}</td><td>{esc(j['user'])}</td><td>{esc(j['program'])}</td>"
                   f"<td class='num'>{esc(_ch(j['recoverable_core_hours']))}</td><td class='num'>{esc(fmt_compact(j['core_hours']))}</td>{extra}</tr>")
        if j.get("report_command"):
            out.append(f"<tr class='cmd'><td colspan='{len(head)}'><code id='{esc(anchor)}'>{esc(j['report_command'])}</code></td></tr>")
    out.append("</table>")
    return "".join(out)


def render_html(rep: dict[str, Any]) -> str:
    """A self-contained page (inline CSS and SVG, no script): what to change first, then who, then the workload."""
    from ..reports.plots import READ, WRITE

    ov = rep["overview"]
    recs = rep.get("recommendations", [])
    site = ov.get("site")
    esc = html.escape
    parts = ["<!doctype html><html lang='en'><head><meta charset='utf-8'>",
             "<meta http-equiv='Content-Security-Policy' content=\"default-src 'none'; img-src data:; style-src 'unsafe-inline'\">",
             f"<title>iodiag site report{' — ' + esc(site) if site else ''}</title><style>{_CSS}</style></head><body><main>",
             f"<header class='top'><h1>iodiag site report{' — ' + esc(site) if site else ''}</h1>"
             f"<div class='muted small'>{esc(str(ov['archive']))} · {esc(ov['first_day'] or '-')} to {esc(ov['last_day'] or '-')} · "
             f"{ov['logs_read']} logs read, {ov['logs_damaged']} damaged</div></header>",
             "<nav class='toc'><a href='#change'>What to change</a><a href='#contact'>Whom to contact</a><a href='#jobs'>Jobs</a>"
             "<a href='#workload'>Workload</a><a href='#findings'>All findings</a><a href='#trends'>Trends</a><a href='#errors'>Damaged logs</a></nav>"]
    rec_total = ov.get("recoverable_core_hours") or 0.0
    cards = [(f"{ov['jobs']:,}", "jobs"), (fmt_compact(ov["core_hours"]), "core-hours"), (_hours(ov["io_time_s"]), "I/O time (process-hours)"),
             (f"{ov['jobs_with_findings']:,}", "jobs with findings")]
    parts.append("<div class='cards'>" + "".join(f"<div class='card'><b>{esc(v)}</b><span>{esc(k)}</span></div>" for v, k in cards)
                 + f"<div class='card key'><b>{esc(_ch(rec_total))}</b><span>core-hours recoverable by fixing what iodiag found "
                   f"({esc(fmt_pct(_ratio(rec_total, ov['core_hours'])))} of all)</span></div></div>")
    # what to change
    parts.append("<h2 id='change'>What to change, by recoverable core-hours</h2>")
    parts.append("<p class='muted small'>Recoverable core-hours of a finding: for every job it affects, the share of the job's run "
                 "time the finding costs (iodiag's estimate) times the job's core-hours, at most the core-hours the job spent in I/O.</p>")
    if recs:
        top = recs[:10]
        parts.append(_plot("plot-recoverable", _hbars("Recoverable core-hours per finding", [r["finding"] for r in top],
                                  [("recoverable core-hours", "#2f855a", [r["recoverable_core_hours"] for r in top])],
                                  unit="core-hours", width=900, fmt=_ch),
                           "Each bar: core-hours the site would get back if the finding were fixed in every job that has it."))
        from .sweeps import SCOPE_TEXT

        for i, r in enumerate(recs[:8], 1):
            told = (f"<div class='told small'>{esc(_advice_line(r, SCOPE_TEXT))}</div>" if r.get("site_advice") else "")
            parts.append(f"<div class='rec' id='rec-{esc(r['finding'])}'><h3>{i}. {esc(r['finding'])} — {esc(_ch(r['recoverable_core_hours']))} core-hours "
                         f"<span class='muted small'>({esc(fmt_pct(r['recoverable_share']))} of all; {r['jobs']} jobs)</span></h3>"
                         f"<div class='what'>{esc(r['action'])}</div>{told}"
                         f"<div class='small'>Contact: {esc(_who(r['users'], 'user'))}<br>Programs: {esc(_who(r['executables'], 'exe'))}</div>"
                         + _html_jobs(r.get("top_jobs") or [], f"{r['finding']}-", advice=bool(r.get("site_advice")))
                         + "</div>")
    else:
        parts.append("<p>No finding has an estimated cost: nothing to recover.</p>")
    # whom to contact
    parts.append("<h2 id='contact'>Whom to contact first</h2>")
    if rep.get("top_jobs"):
        parts.append("<h3 id='jobs'>Jobs to look at first (all findings together)</h3>")
        parts.append(_html_jobs(rep["top_jobs"], "top-", findings=True))
    for key, title in (("user", "Users"), ("exe", "Executables")):
        rows = rep["top_users" if key == "user" else "top_executables"]
        if not rows:
            continue
        parts.append(f"<h3>{title}</h3>")
        parts.append(_html_table([key, "jobs", "affected", "recoverable core-h", "costliest finding", "its core-h", "findings"],
                                 [[str(r[key]) or "?", str(r["jobs"]), str(r["jobs_affected"]), _ch(r.get("recoverable_core_hours")),
                                   str(r.get("costliest_finding") or "-"), _ch(r.get("costliest_core_hours")),
                                   ", ".join(f"{k} ×{v}" for k, v in list(r["findings"].items())[:3])] for r in rows],
                                 [False, True, True, True, False, True, False]))
    # workload
    ops = rep["op_sizes"]
    labels = ops.get("labels", ops["bins"])
    fpj = rep["files_per_job"]
    parts.append("<h2 id='workload'>Workload</h2><div class='plots'>")
    parts.append(_plot("plot-op-sizes", _hbars("POSIX operations by size", labels, [("reads", READ, ops["read_ops"]), ("writes", WRITE, ops["write_ops"])],
                              unit="operations (all jobs)"),
                       f"{fmt_pct(ops['ops_lt_100k_share'])} of all operations are under 100 KiB."))
    parts.append(_plot("plot-files-per-job", _hbars("Files per job", [h["files"] for h in fpj["histogram"]],
                              [("jobs", "#4a5568", [h["jobs"] for h in fpj["histogram"]])], unit="jobs"),
                       f"Median {fmt_compact(fpj['quantiles']['p50'])} files per job, 90th percentile {fmt_compact(fpj['quantiles']['p90'])}."))
    parts.append("</div>")
    for title, headers, rows in _sections(rep):
        if title.startswith(("Site defaults", "Findings", "Trends", "Damaged", "Examples", "POSIX op sizes", "Files per job")):
            anchor = {"Findings": "findings", "Trends": "trends", "Damaged": "errors"}.get(title.split(":")[0].split(" ")[0], "")
            parts.append(f"<h2{' id=' + repr(anchor) if anchor else ''}>{esc(title)}</h2>")
            parts.append(_html_table(headers, rows, [i > 0 and not title.startswith(("Examples", "Site")) for i in range(len(headers))]))
    parts.append("</main></body></html>")
    return "\n".join(parts)


# -- site defaults (defaults.site_defaults) -------------------------------------------------------------------

def _defaults_rows(tab: dict[str, Any], default: str) -> list[list[str]]:
    rows = []
    for s in sorted(tab["defaults"], key=lambda s: -s["harmonic"]):
        mark = " ◀ default" if s["setting"] == default else ""
        rows.append([s["setting"] + mark, fmt_pct(s["best_share"]), fmt_pct(s["worst_share"]), fmt_pct(s["arithmetic"]),
                     fmt_pct(s["geometric"]), fmt_pct(s["harmonic"])])
    o = tab["oracle"]
    rows.append(["best per scenario (oracle)", fmt_pct(o["best_share"]), "-", fmt_pct(o["arithmetic"]), fmt_pct(o["geometric"]), fmt_pct(o["harmonic"])])
    return rows


DEFAULTS_HEADERS = ["setting as the single default", "best", "worst", "arith. mean", "geom. mean", "harm. mean"]


def defaults_sections(res: dict[str, Any]):
    """(title, headers, rows, notes) per table of a site-defaults result, shared by text and the docs."""
    for t in res["tunables"]:
        name = t["tunable"]
        yield (f"{name}: default vs best, over the sweep's {len(t['measured']['scenarios'])} scenarios as measured (uniform)",
               DEFAULTS_HEADERS, _defaults_rows(t["measured"], t["default_measured"]), [])
        if t["site"] is not None:
            mix = t["mix"]
            notes = [f"{mix['jobs_mapped']} of {mix['jobs_total']} jobs map onto a scenario; weight = {mix['weight_unit']}"]
            notes += [f"not mapped: {v} jobs ({k})" for k, v in mix["unmapped"].items()]
            yield (f"{name}: the site's workload mix over the sweep's scenarios", ["scenario", "jobs", "weight", "share"],
                   [[s["scenario"], str(s["jobs"]), fmt_compact(s["weight"]), fmt_pct(s["weight"] / (sum(x["weight"] for x in mix["scenarios"]) or 1))]
                    for s in mix["scenarios"]], notes)
            yield (f"{name}: default vs best, weighted by the site's workload mix", DEFAULTS_HEADERS,
                   _defaults_rows(t["site"], t["default"]), [])
        tr = t.get("tree")
        if tr:
            p = tr["policy"]
            notes = [f"the tree as a policy: arithmetic {fmt_pct(p['arithmetic'])}, geometric {fmt_pct(p['geometric'])}, harmonic {fmt_pct(p['harmonic'])}"
                     + (f"; it recovers {fmt_pct(1 - tr['regret_share'])} of what the best single default leaves to the oracle"
                        if tr["regret_share"] is not None else "; no single default loses anything")]
            yield (f"{name}: decision tree (depth ≤ 4) over the site's jobs (features: {', '.join(tr['features'])})",
                   ["rules"], [[ln] for ln in tr["rules"]], notes)


def render_defaults_text(res: dict[str, Any], *, width: int = 100) -> str:
    """The site-defaults result for a terminal ``width`` cells wide: tables fitted (the setting names cut in the
    middle, the arithmetic and geometric means left out first), rules and notes wrapped at spaces."""
    out: list[str] = []
    _wrap(out, f"Site defaults from {res['dataset']} ({res['jobs']} jobs, {fmt_compact(res['core_hours'])} core-hours) "
               f"and {len(res['sweeps'])} sweep table(s)", width, 0, 2)
    out.append("")
    for title, headers, rows, notes in defaults_sections(res):
        _wrap(out, title, width, 0, 2)
        if headers == ["rules"]:
            for r in rows:
                _wrap(out, r[0], width, 2, 6)
        else:
            specs = ([Col(), Col(3), Col(4), Col(1), Col(2), Col()] if headers == DEFAULTS_HEADERS
                     else [Col(cut="middle", min=16)] + [Col() for _ in headers[1:]])
            out.extend(plain_table(headers, rows, width=width, right=[False] + [True] * (len(headers) - 1), specs=specs,
                                   indent=2))
        for n in notes:
            _wrap(out, n, width, 2, 4)
        out.append("")
    out.append("Proposed site configuration (write it with --toml PATH):")
    out.append(render_site_toml(res, width=width))
    return "\n".join(out)


def _toml_str(s: str) -> str:
    return json.dumps(s, ensure_ascii=False)


def _toml_long(key: str, text: str, width: int) -> list[str]:
    """``key = "text"``, as a multi-line basic string folded at spaces when the line would pass ``width``: each
    line ends in a backslash, which TOML reads as "no line break here", so the value is the same one-line text."""
    one = f"{key} = {_toml_str(text)}"
    if len(one) <= width:
        return [one]
    body = _toml_str(text)[1:-1]  # escaped, without its quotes
    words, lines, cur = body.split(" "), [], ""
    for w in words:
        if cur and len(cur) + 1 + len(w) > width - 4:
            lines.append(cur + " \\")
            cur = w
        else:
            cur = f"{cur} {w}" if cur else w
    lines.append(cur + '"""')
    return [f'{key} = """\\'] + ["  " + ln for ln in lines]


def render_site_toml(res: dict[str, Any], *, generated: str | None = None, width: int = 100) -> str:
    """The proposed site config as TOML that ``config.load_config`` reads (``--site-config``, $IODIAG_SITE_CONFIG)."""
    cfg = res["config"]
    lines = ["# iodiag site config, proposed by `iodiag site defaults`" + (f" on {generated}" if generated else ""),
             f"# from the site dataset ({res['jobs']} jobs):", f"#   {res['dataset']}", "# and the sweeps:"]
    lines += [f"#   {s}" for s in res["sweeps"]]
    lines += ["# Deploy it as /etc/iodiag/site.toml or point $IODIAG_SITE_CONFIG at it;",
              "# a user's --config overrides it.",
              "# Any section of the iodiag config may be added to set site thresholds, e.g.:",
              "#   [severity]", "#   high = 0.2      # share of a job's run time a problem costs to be 'high'",
              "#   [small_io]", "#   size_bytes = 102400", "", "[site]"]
    if cfg.get("name"):
        lines.append(f"name = {_toml_str(cfg['name'])}")
    lines.append("rules = [" + ("]" if not cfg["rules"] else ""))
    for r in cfg["rules"]:
        item = _toml_long("", r, width - 3)
        item[0] = item[0][3:]  # (no key: an array item)
        item[-1] += ","
        lines.extend("  " + ln for ln in item)
    if cfg["rules"]:
        lines.append("]")
    lines += ["", "[site.defaults]"]
    for t in res["tunables"]:
        tab = t["site"] or t["measured"]
        sc = next(s for s in tab["defaults"] if s["setting"] == t["default"])
        lines.append(f"# {t['tunable']}: {fmt_pct(sc[t['mean']])} of the best ({t['mean']} mean, "
                     f"{'by the site mix' if t['site'] else 'sweep cases alike'})")
        lines.append(f"{_toml_str(t['tunable'])} = {_toml_str(t['default'])}")
    lines += ["", "[site.advice]"]
    for fid, text in cfg["advice"].items():
        lines.extend(_toml_long(_toml_str(fid), text, width))
    if cfg.get("advice_scope"):
        lines += ["", "# which jobs each advice is for (serial-read, serial-write; none: every job)",
                  "[site.advice_scope]"]
        for fid, scope in cfg["advice_scope"].items():
            lines.append(f"{_toml_str(fid)} = {_toml_str(scope)}")
    return "\n".join(lines) + "\n"
