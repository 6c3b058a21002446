"""What changed between two jobs (before/after applying a recommendation).

``compare_jobs`` computes a plain dict (schema ``iodiag.compare/1``);
``render_compare_text`` and ``render_compare_html`` only format it, and the
CLI dumps it as JSON.  Metrics come from the Darshan counters (complete even
when a trace is partial) and are compared layer by layer, never summed over
layers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable

import numpy as np

from ..analyzers.summary import io_process_s, job_totals, module_volumes
from ..findings import SEVERITIES, Finding
from ..profile import JobProfile
from ..units import fmt_bytes, fmt_count, fmt_number, fmt_pct, fmt_seconds

SCHEMA = "iodiag.compare/1"

# metric name -> (label, unit, which direction is better)
METRICS: dict[str, tuple[str, str, str]] = {
    "wall_s": ("wall time", "s", "lower"),
    "io_time_s": ("I/O time (summed over processes)", "s", "lower"),
    "read_time_s": ("read time", "s", "lower"),
    "write_time_s": ("write time", "s", "lower"),
    "meta_time_s": ("metadata time", "s", "lower"),
    "bytes_read": ("bytes read", "B", "neutral"),
    "bytes_written": ("bytes written", "B", "neutral"),
    "reads": ("read operations", "ops", "lower"),
    "writes": ("write operations", "ops", "lower"),
    "meta_ops": ("metadata operations", "ops", "lower"),
    "files": ("files", "", "neutral"),
    "processes": ("processes", "", "neutral"),
}


def _base_layer(vol) -> dict[str, float]:
    """Totals at the layer that reaches the file system: POSIX + STDIO (else the first layer present)."""
    mods = list(vol["module"]) if len(vol) else []
    use = [m for m in mods if m in ("POSIX", "STDIO")] or mods[:1]
    out = {}
    for col in ("bytes_read", "bytes_written", "reads", "writes", "meta_ops", "read_time_s", "write_time_s", "meta_time_s"):
        out[col] = float(sum(vol[col][mods.index(m)] for m in use)) if use else 0.0
    out["io_time_s"] = out["read_time_s"] + out["write_time_s"] + out["meta_time_s"]
    out["layers"] = use
    return out


def job_metrics(profile: JobProfile) -> dict[str, Any]:
    """The job's numbers compared: files, bytes, reads/writes and the summed I/O time are the report's
    (``job_totals``, ``io_process_s``: report and compare agree on every number they share); read, write and
    metadata times and metadata operations at the base layer."""
    vol = module_volumes(profile)
    base = _base_layer(vol)
    tot = job_totals(profile)
    return {
        "wall_s": float(profile.job.runtime_s) if profile.job.runtime_s is not None else None,
        "io_time_s": io_process_s(profile), "read_time_s": base["read_time_s"], "write_time_s": base["write_time_s"],
        "meta_time_s": base["meta_time_s"], "bytes_read": tot.bytes_read, "bytes_written": tot.bytes_written,
        "reads": tot.reads, "writes": tot.writes, "meta_ops": int(base["meta_ops"]),
        "files": tot.files, "processes": int(profile.job.nprocs),
        "_layers": base["layers"], "_modules": vol.rows(),
    }


def _delta(a, b) -> tuple[float | None, float | None]:
    if a is None or b is None:
        return None, None
    d = b - a
    ratio = (b / a) if a not in (0, 0.0) else (None if b == 0 else math.inf)
    return d, ratio


def _job_ref(profile: JobProfile) -> dict[str, Any]:
    j = profile.job
    return {"job_id": j.job_id, "exe": j.exe, "nprocs": j.nprocs, "start_s": j.start_s, "runtime_s": j.runtime_s,
            "logs": list(j.logs), "issues": len(profile.issues_seen), "partial_modules": list(j.partial_modules),
            "collector": j.collector, "collector_version": j.collector_version or j.darshan_version}


def collector_note(a: dict, b: dict) -> str | None:
    """Why numbers of two jobs may differ without the workload changing: they were recorded by different
    collectors (Darshan and iodiag's embedded one see different calls: Darshan 3.5 counts no stat() on
    glibc >= 2.33, the embedded collector counts them) or by different versions of one."""
    ca, cb = (a.get("collector"), a.get("collector_version")), (b.get("collector"), b.get("collector_version"))
    if ca == cb:
        return None
    what = "collectors" if ca[0] != cb[0] else "collector versions"
    fmt = lambda c: c[0] + (f" {c[1]}" if c[1] else "")  # noqa: E731
    return (f"A and B were recorded by different {what} ({fmt(ca)} vs {fmt(cb)}): metadata counts and op counts "
            "can differ with no change in the workload (each collector's blind spots: --json job.blind_spots)")


@dataclass(frozen=True)
class JobSummary:
    """What a comparison needs of one job: its metrics and reference, without its tables (a caller comparing two
    large jobs summarizes the first and lets its profile go before reading the second)."""

    metrics: dict[str, Any]
    ref: dict[str, Any]


def summarize_job(profile: JobProfile) -> JobSummary:
    return JobSummary(metrics=job_metrics(profile), ref=_job_ref(profile))


def compare_jobs(a: JobProfile | JobSummary, b: JobProfile | JobSummary, findings_a: Iterable[Finding] = (),
                 findings_b: Iterable[Finding] = (), *, rel_tol: float = 0.05) -> dict[str, Any]:
    """Metrics of A and B with deltas, modules side by side, findings appeared/resolved/persisting.

    ``a`` and ``b`` are profiles or their ``summarize_job`` summaries.  ``verdict`` per metric: "better"/"worse"
    when it moved by more than ``rel_tol`` in a direction that matters, else "same" (or "changed" for
    neutral metrics such as bytes).
    """
    a = a if isinstance(a, JobSummary) else summarize_job(a)
    b = b if isinstance(b, JobSummary) else summarize_job(b)
    ma, mb = a.metrics, b.metrics
    rows = []
    for name, (label, unit, better) in METRICS.items():
        va, vb = ma[name], mb[name]
        d, ratio = _delta(va, vb)
        if d is None:
            verdict = "unknown"
        elif abs(d) <= rel_tol * max(abs(va), abs(vb), 1e-12):
            verdict = "same"
        elif better == "neutral":
            verdict = "changed"
        else:
            verdict = "better" if (d < 0) == (better == "lower") else "worse"
        rows.append({"name": name, "label": label, "unit": unit, "a": va, "b": vb, "delta": d,
                     "ratio": None if ratio is None or (isinstance(ratio, float) and math.isinf(ratio)) else ratio,
                     "better": better, "verdict": verdict})
    mods_a = {r["module"]: r for r in ma["_modules"]}
    mods_b = {r["module"]: r for r in mb["_modules"]}
    modules = []
    for mod in list(dict.fromkeys([*mods_a, *mods_b])):
        ra, rb = mods_a.get(mod, {}), mods_b.get(mod, {})
        entry = {"module": mod}
        for col in ("bytes_read", "bytes_written", "reads", "writes", "meta_ops", "read_time_s", "write_time_s", "meta_time_s"):
            entry[col] = {"a": ra.get(col, 0), "b": rb.get(col, 0), "delta": rb.get(col, 0) - ra.get(col, 0)}
        modules.append(entry)
    fa = {f.id: f for f in findings_a}
    fb = {f.id: f for f in findings_b}
    order = {s: i for i, s in enumerate(SEVERITIES)}
    appeared = [fb[i].to_dict() for i in fb if i not in fa]
    resolved = [fa[i].to_dict() for i in fa if i not in fb]
    persisting = []
    for i in fa:
        if i in fb:
            x, y = fa[i], fb[i]
            change = "same"
            if order[y.severity] < order[x.severity]:
                change = "worse"
            elif order[y.severity] > order[x.severity]:
                change = "better"
            persisting.append({"id": i, "title": y.title, "severity_a": x.severity, "severity_b": y.severity,
                               "est_cost_s_a": x.est_cost_s, "est_cost_s_b": y.est_cost_s, "change": change})
    return {
        "schema": SCHEMA,
        "a": a.ref, "b": b.ref,
        "layers": {"a": ma["_layers"], "b": mb["_layers"]},
        "metrics": rows,
        "modules": modules,
        "findings": {"appeared": appeared, "resolved": resolved, "persisting": persisting},
        "notes": [n for n in (collector_note(a.ref, b.ref),) if n],
    }


# -- renderers ------------------------------------------------------------
def _fmt(v: Any, unit: str) -> str:
    if v is None:
        return "-"
    if unit == "B":
        return fmt_bytes(v)
    if unit == "s":
        return fmt_seconds(v)
    if isinstance(v, (int, np.integer)) or (isinstance(v, float) and v.is_integer()):
        return fmt_count(v)
    return fmt_number(v)


def _fmt_delta(row: dict) -> str:
    d = row["delta"]
    if d is None:
        return "-"
    sign = "+" if d > 0 else ("-" if d < 0 else "\u00b1")
    mag = _fmt(abs(d), row["unit"])
    ratio = row["ratio"]
    if ratio is None or not row["a"]:
        pct = ""
    elif ratio >= 10:
        pct = f" (x{ratio:,.0f})"
    else:
        pct = f" ({fmt_pct(ratio - 1, signed=True)})"
    return f"{sign}{mag}{pct}"


def compare_rows(d: dict) -> list[dict]:
    """Formatted metric rows shared by the text and HTML renderers."""
    return [{"label": r["label"], "a": _fmt(r["a"], r["unit"]), "b": _fmt(r["b"], r["unit"]),
             "delta": _fmt_delta(r), "verdict": r["verdict"]} for r in d["metrics"]]


def render_compare_text(d: dict, *, labels: tuple[str, str] = ("A", "B"), width: int = 100) -> str:
    """A plain-text summary for a terminal ``width`` cells wide (no colour codes; the CLI may add them): sentences
    wrapped at spaces, the metric table fitted (the verdict column left out first)."""
    from .textout import Col, plain_table, wrap_plain

    la, lb = labels
    def procs(n):
        return f"{n:,} process" + ("" if n == 1 else "es")

    lines: list[str] = []

    def say(text: str, indent: int = 0, hang: int = 2) -> None:
        lines.extend(wrap_plain(text, width, indent=indent, hang=indent + hang))

    say(f"{la}: job {d['a']['job_id']}  {d['a']['exe']}  ({procs(d['a']['nprocs'])})")
    say(f"{lb}: job {d['b']['job_id']}  {d['b']['exe']}  ({procs(d['b']['nprocs'])})")
    say(f"(I/O numbers at layer {'+'.join(d['layers']['a']) or '-'} vs {'+'.join(d['layers']['b']) or '-'})")
    lines.append("")
    rows = compare_rows(d)
    lines.extend(plain_table(["metric", la, lb, "change", "verdict"],
                             [[r["label"], r["a"], r["b"], r["delta"], r["verdict"]] for r in rows], width=width,
                             right=[False, True, True, True, False],
                             specs=[Col(cut="end", min=20), Col(), Col(), Col(), Col(1)]))
    f = d["findings"]
    lines.append("")
    say(f"findings: {len(f['appeared'])} appeared, {len(f['resolved'])} resolved, {len(f['persisting'])} persisting")
    for x in f["resolved"]:
        say(f"resolved  [{x['severity']}] {x['id']}: {x['title']}", 2, 4)
    for x in f["appeared"]:
        say(f"appeared  [{x['severity']}] {x['id']}: {x['title']}", 2, 4)
    for x in f["persisting"]:
        say(f"persisting {x['id']}: {x['severity_a']} -> {x['severity_b']} ({x['change']})", 2, 4)
    for n in d.get("notes", []):
        say(f"note: {n}")
    for side, label in (("a", la), ("b", lb)):
        if d[side]["issues"]:
            say(f"note: {label} has {d[side]['issues']} data gap(s) (unreadable or partial logs); its numbers are lower bounds")
    return "\n".join(lines) + "\n"


def render_compare_html(d: dict, *, labels: tuple[str, str] = ("A", "B"), obfuscated: bool = False) -> str:
    from .html import environment

    return environment().get_template("compare.html.j2").render(
        d=d, rows=compare_rows(d), labels=labels, obfuscated=obfuscated, modules=d["modules"])
