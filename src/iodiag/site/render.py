"""Format a site report dict (aggregate.site_report) as text, JSON or HTML.  Formatting only."""

from __future__ import annotations

import html
import json
from typing import Any, Sequence


def _num(x: Any, unit: str = "") -> str:
    if x is None or x != x:  # None or NaN
        return "-"
    x = float(x)
    for div, suf in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= div:
            return f"{x / div:.1f}{suf}{unit}"
    return f"{x:.0f}{unit}" if abs(x) >= 10 or x == int(x) else f"{x:.2f}{unit}"


def _bytes(x: Any) -> str:
    if x is None or x != x:
        return "-"
    x = float(x)
    for div, suf in ((1 << 50, "PiB"), (1 << 40, "TiB"), (1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
        if x >= div:
            return f"{x / div:.1f} {suf}"
    return f"{x:.0f} B"


def _pct(x: Any) -> str:
    return "-" if x is None else f"{100 * float(x):.1f}%"


def _hours(s: Any) -> str:
    return "-" if s is None or s != s else _num(float(s) / 3600.0, " h")


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[bool] | None = None) -> list[str]:
    right = right or [i > 0 for i in range(len(headers))]
    w = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]
    def line(cells):
        return "  ".join(c.rjust(w[i]) if right[i] else c.ljust(w[i]) for i, c in enumerate(cells)).rstrip()
    return [line(headers), line(["-" * x for x in w])] + [line(r) for r in rows]


def _sections(rep: dict[str, Any]):
    """(title, headers, rows) for every table of the report, shared by text and HTML."""
    ov = rep["overview"]
    yield ("Overview", ["measure", "value"], [
        ["archive", str(ov["archive"])],
        ["days", f"{ov['first_day'] or '-'} .. {ov['last_day'] or '-'}"],
        ["jobs (programs)", f"{ov['jobs']} ({ov['programs']})"],
        ["logs read / damaged", f"{ov['logs_read']} / {ov['logs_damaged']}"],
        ["core-hours", _num(ov["core_hours"])],
        ["I/O time (process-hours)", _hours(ov["io_time_s"])],
        ["read / written", f"{_bytes(ov['bytes_read'])} / {_bytes(ov['bytes_written'])}"],
        ["jobs with findings", str(ov["jobs_with_findings"])],
        ["jobs with partial logs", str(ov["partial_jobs"])],
    ])
    prev = rep["prevalence"]
    yield ("Findings: prevalence weighted by core-hours and I/O time",
           ["finding", "jobs", "% jobs", "% core-h", "% I/O time", "est. cost"],
           [[p["finding"], str(p["jobs"]), _pct(p["jobs_share"]), _pct(p["core_hours_share"]), _pct(p["io_time_share"]),
             _hours(p["est_cost_s"])] for p in prev] or [["(no findings)", "", "", "", "", ""]])
    for key, title in (("user", "Top users affected"), ("exe", "Top executables affected")):
        rows = rep["top_users" if key == "user" else "top_executables"]
        yield (title, [key, "jobs", "affected", "affected core-h", "affected I/O time", "est. cost", "findings"],
               [[str(r[key]) or "?", str(r["jobs"]), str(r["jobs_affected"]), _num(r["affected_core_hours"]),
                 _hours(r["affected_io_time_s"]), _hours(r["est_cost_s"]),
                 ", ".join(f"{k} x{v}" for k, v in list(r["findings"].items())[:3])] for r in rows]
               or [["(none)", "", "", "", "", "", ""]])
    ops = rep["op_sizes"]
    tot_r, tot_w = sum(ops["read_ops"]) or 1, sum(ops["write_ops"]) or 1
    yield ("POSIX op sizes (all jobs)", ["size", "reads", "% reads", "writes", "% writes", "jobs (mostly)"],
           [[b, _num(r), _pct(r / tot_r), _num(w), _pct(w / tot_w), str(dr + dw)]
            for b, r, w, dr, dw in zip(ops["bins"], ops["read_ops"], ops["write_ops"],
                                       ops["read_jobs_by_dominant_bin"], ops["write_jobs_by_dominant_bin"])])
    fpj = rep["files_per_job"]
    q = fpj["quantiles"]
    yield ("Files per job", ["files", "jobs"], [[h["files"], str(h["jobs"])] for h in fpj["histogram"]]
           + [["median / p90 / p99 / max", f"{_num(q['p50'])} / {_num(q['p90'])} / {_num(q['p99'])} / {_num(q['max'])}"]])
    tr = rep["trends"]
    yield (f"Trends per {tr['period']}", [tr["period"], "jobs", "core-h", "I/O time", "bytes", "with findings", "top finding"],
           [[r["period"], str(r["jobs"]), _num(r["core_hours"]), _hours(r["io_time_s"]), _bytes(r["bytes"]),
             str(r["jobs_with_findings"]),
             (lambda fs: f"{max(fs, key=fs.get)} {_pct(max(fs.values()))}" if fs else "-")(r["finding_share"])]
            for r in tr["rows"]])
    er = rep["errors"]
    yield ("Damaged or unreadable logs", ["kind", "logs"], [[k, str(v)] for k, v in er["by_kind"].items()] or [["(none)", "0"]])
    if er["examples"]:
        yield ("Examples", ["path", "kind", "cause"], [[e["path"], e["kind"], e["cause"]] for e in er["examples"]])


def render_text(rep: dict[str, Any]) -> str:
    out: list[str] = []
    for title, headers, rows in _sections(rep):
        out.append(title)
        right = [False] + [True] * (len(headers) - 1) if title != "Examples" else [False] * len(headers)
        if title in ("Overview",):
            right = [False, False]
        out.extend("  " + ln for ln in _table(headers, rows, right))
        out.append("")
    return "\n".join(out)


def render_json(rep: dict[str, Any]) -> str:
    return json.dumps(rep, indent=2, default=str)


_CSS = """body{font-family:system-ui,sans-serif;margin:2em;max-width:1200px}table{border-collapse:collapse;margin-bottom:1.5em}
td,th{padding:3px 10px;border-bottom:1px solid #ddd;text-align:right}td:first-child,th:first-child{text-align:left}
.bar{background:#4a7ebb;height:10px;display:inline-block}h2{margin-top:1.5em}"""


def render_html(rep: dict[str, Any]) -> str:
    parts = ["<!doctype html><html><head><meta charset='utf-8'><title>iodiag site report</title>",
             f"<style>{_CSS}</style></head><body><h1>iodiag site report</h1>"]
    for title, headers, rows in _sections(rep):
        parts.append(f"<h2>{html.escape(title)}</h2><table><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in headers) + "</tr>")
        for r in rows:
            parts.append("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>")
        parts.append("</table>")
    # op-size distribution as bars (share of ops per bin)
    ops = rep["op_sizes"]
    tot = [r + w for r, w in zip(ops["read_ops"], ops["write_ops"])]
    s = sum(tot) or 1
    parts.append("<h2>Op-size distribution (share of POSIX ops)</h2><table>")
    for b, t in zip(ops["bins"], tot):
        parts.append(f"<tr><td>{html.escape(b)}</td><td style='text-align:left'><span class='bar' style='width:{400 * t / s:.0f}px'></span> {100 * t / s:.1f}%</td></tr>")
    parts.append("</table></body></html>")
    return "\n".join(parts)
