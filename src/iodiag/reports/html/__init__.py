"""Self-contained HTML report: Jinja2 (autoescaped) + inline SVG plots.

The page has no script and needs no network; a Content-Security-Policy meta
tag forbids both, so even a file name crafted as markup could never run.
Names are escaped by Jinja2's autoescaping in the page and by ``svg.esc`` in
the plots (the only markup marked safe is the SVG our own writer produced).
Plots come from ``reports/svg.py``: matplotlib is not imported.

``render_html`` is the entry point ``iodiag report --html`` calls.
"""

from __future__ import annotations

import re
import time
from datetime import datetime, timezone
from functools import partial
from typing import Any, Iterable

import numpy as np

from ... import __version__
from ...analyzers.summary import job_totals
from ...analyzers.tasktime import dask_time_of
from ...analyzers.timemodel import time_model_of
from ...config import Config
from ...findings import Finding
from ...profile import JobProfile, Table
from ...units import fmt_bytes, fmt_count, fmt_number, fmt_pct, fmt_seconds

_ENV = None


def environment():
    """The Jinja2 environment (autoescape always on, undefined names are errors)."""
    global _ENV
    if _ENV is None:
        import jinja2

        from importlib.resources import files

        env = jinja2.Environment(
            loader=jinja2.FileSystemLoader(str(files(__package__) / "templates")),
            autoescape=True,
            undefined=jinja2.StrictUndefined,
            trim_blocks=False,
            lstrip_blocks=False,
        )
        env.filters["hbytes"] = fmt_bytes
        env.filters["fmtnum"] = fmt_number
        env.filters["pct"] = fmt_pct
        env.filters["secs"] = fmt_seconds
        env.filters["fmtval"] = fmt_value
        from ..advice import change_label, gain_text
        from ..textout import clean_code

        env.filters["gain"] = gain_text
        env.filters["change_label"] = change_label
        env.filters["code"] = clean_code
        env.globals["version"] = __version__
        _ENV = env
    return _ENV


def fmt_value(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, (int, float, np.integer, np.floating)):
        return fmt_number(v)
    if isinstance(v, (list, tuple)):
        return ", ".join(fmt_value(x) for x in v[:20]) + (f" … ({len(v)})" if len(v) > 20 else "")
    if isinstance(v, dict):
        return "; ".join(f"{k}={fmt_value(x)}" for k, x in list(v.items())[:20])
    return str(v)


def _spec(pid: str, title: str, caption: str, draw=None, empty: str = "") -> dict:
    """A plot to render: ``draw`` is a no-argument callable returning an ``svg.Figure`` (None: no data)."""
    return {"id": pid, "title": title, "caption": caption, "draw": draw, "empty": "" if draw else (empty or "No data for this plot."),
            "svg": "", "width": 0, "height": 0}


def _render_plots(specs: list[dict]) -> None:
    """Fill each spec's SVG markup (drawing all of them takes tens of milliseconds: no parallelism needed)."""
    for s in specs:
        draw = s.pop("draw", None)
        if draw is None:
            continue
        fig = draw()
        s["svg"] = fig.svg()
        s["width"], s["height"] = int(round(fig.width)), int(round(fig.height))


_SAFE_HREF = re.compile(r"^(?:https?://|file://|(?![A-Za-z][A-Za-z0-9+.-]*:))[^\s\"'<>`]+$")


def safe_href(href: str | None) -> str | None:
    """Only relative paths and http(s)/file URLs may become links (never ``javascript:``)."""
    if href and _SAFE_HREF.match(href):
        return href
    return None


def _summary(profile: JobProfile) -> list[tuple[str, str]]:
    job = profile.job
    rows = [("job id", job.job_id)]
    if job.user:
        rows.append(("user", job.user))
    from ...analyzers.report import program_name

    rows.append(("program", program_name(job.exe, job.args)))
    rows.append(("executable", job.exe or "-"))
    if len(job.programs) > 1:
        rows.append(("programs", "; ".join(f"{p.exe} ({p.nprocs} procs)" for p in job.programs)))
    rows.append(("processes", fmt_count(job.nprocs)))
    hosts = sorted({h for h in profile.processes["host"].tolist() if h}) if len(profile.processes) else []
    if hosts:
        rows.append(("hosts", f"{len(hosts)}: " + ", ".join(hosts[:8]) + (" …" if len(hosts) > 8 else "")))
    if job.start_s:
        rows.append(("start", datetime.fromtimestamp(job.start_s, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")))
    if job.runtime_s is not None:
        rows.append(("run time", fmt_seconds(job.runtime_s) + (" (derived from the last recorded I/O)" if job.runtime_derived else "")))
    if job.metadata.get("iodiag_job"):
        rows.append(("workload exit status", "-" if job.exit_status is None else
                     f"{job.exit_status}" + (f" (killed by {job.exit_signal})" if job.exit_signal else "")))
        if job.partial_reasons:
            rows.append(("partial because", "; ".join(job.partial_reasons)))
    rows.append(("collector", job.collector + (f" {job.darshan_version}" if job.darshan_version else "") + (f" (log format {job.log_format})" if job.log_format else "")))
    rows.append(("modules", ", ".join(m + (" [partial]" if m in job.partial_modules else "") for m in job.modules) or "-"))
    rows.append(("logs", f"{len(job.logs)}"))
    rows.append(("files", fmt_count(job_totals(profile).files)))
    how = " (every call, iodiag's embedded collector)" if job.collector == "embedded" else " (DXT)"
    rows.append(("traced operations", f"{len(profile.ops):,}" + (how if profile.has_dxt else "")))
    tm = time_model_of(profile)
    if tm.runtime_s:
        rows.append(("I/O on the critical path", f"{fmt_seconds(tm.io_wall_s)} ({fmt_pct(tm.io_share or 0)} of the run; "
                                                  f"{fmt_seconds(tm.io_process_s)} summed over processes)"))
    dt = dask_time_of(profile) if len(profile.tasks) else None
    if dt is not None:
        rows.append(("Dask tasks", f"{dt.tasks:,} on {dt.threads} worker thread(s)"))
        rows.append(("where the workers' time went", dt.headline))
    elif len(profile.tasks):
        rows.append(("Dask tasks", f"{len(set(profile.tasks['key'].tolist())):,}"))
    if job.blind_spots:
        rows.append(("not visible to the collector", "; ".join(job.blind_spots)))
    return rows


def build_context(profile: JobProfile, findings: Iterable[Finding], *, report: dict | None = None,
                  dask_report_href: str | None = None, config: Config | None = None,
                  timings: dict | None = None) -> dict:
    """Everything the template shows (plots already rendered to SVG)."""
    cfg = config or Config()
    clock = timings if timings is not None else {}
    timed = partial(_timed, clock)
    if report is not None and "findings" in report:
        fdicts = list(report["findings"])
    else:
        fdicts = [f.to_dict() for f in findings]
    plots: dict[str, dict] = {}
    vol = _counter_plots(profile, plots, timed)
    plots["timeline"] = _timeline_plot(profile, timed)
    ft, top = _files_plot(profile, cfg, plots, timed)
    plots["metadata"] = _metadata_plot(profile, timed)
    dask = _dask_plots(profile, cfg, plots, timed, dask_report_href) if len(profile.tasks) else None

    t = time.perf_counter()
    _render_plots(list(plots.values()))
    clock["draw"] = time.perf_counter() - t
    issues = [i.to_dict() for i in profile.issues_seen]
    return {
        "job": profile.job,
        "summary": _summary(profile),
        "findings": fdicts,
        "recommendations": (report or {}).get("recommendations") or [],
        "volumes": vol.rows(),
        "top_files": top.rows(),
        "n_files": len(ft),
        "plots": plots,
        "dask": dask,
        "issues": issues,
        "obfuscated": False,
    }


def _timed(clock: dict, name: str, fn):
    """``fn()``, its seconds added to ``clock[name]`` (the report's --timings)."""
    t = time.perf_counter()
    out = fn()
    clock[name] = clock.get(name, 0.0) + time.perf_counter() - t
    return out


def _counter_plots(profile: JobProfile, plots: dict, timed) -> Table:
    """The bytes-and-operations per module and access-size plots; the module volumes table."""
    from ...analyzers.summary import module_volumes
    from ..plots.volumes import access_sizes, draw_access_sizes, draw_module_volumes

    vol = timed("volumes", lambda: module_volumes(profile))
    plots["volumes"] = timed("volumes", lambda: _spec(
        "plot-volumes", "Bytes and operations per module",
        "Darshan counters summed over all files and processes. Operation axis is logarithmic.",
        (lambda: draw_module_volumes(vol)) if len(vol) else None, "No module records (the log has no I/O counters)."))

    sizes = timed("sizes", lambda: access_sizes(profile))
    src = sizes["source"][0] if len(sizes) else ""
    plots["sizes"] = timed("sizes", lambda: _spec(
        "plot-sizes", "Access-size histograms",
        "Operations per request size, from Darshan's size histograms" + (" (MPI-IO, HDF5 and PnetCDF count aggregate requests)" if src == "counters" else " (binned from the traced operations)") + ". Logarithmic count axis.",
        (lambda: draw_access_sizes(sizes)) if len(sizes) and sizes["count"].sum() > 0 else None, "No reads or writes were recorded."))
    return vol


def _timeline_plot(profile: JobProfile, timed) -> dict:
    """The I/O timeline per process, its caption saying where the times come from."""
    from ..plots.timeline import draw_io_timeline, io_timeline

    tl = timed("timeline", lambda: io_timeline(profile))
    tl_caption = {
        "ops": f"Share of each time bin that a process spent inside {tl.totals.get('module', '')} read and write calls (traced operations, e.g. DXT; one layer only, so MPI-IO calls over POSIX are not counted twice).",
        "heatmap": "Bytes per second from Darshan's heatmap module (no per-call trace in this log); logarithmic colour scale.",
        "counters": "No trace or heatmap in this log: each cell shows the window between a file's first and last read (or write) on that process, from the counters' timestamps. A window is not busy time.",
    }.get(tl.source, "")
    if tl.source == "ops":
        tl_caption += (f" All {tl.totals.get('ops', 0):,} operations are summed onto {tl.n_bins} time bins of "
                       f"{fmt_number(tl.bin_s)} s (a raster, so the plot costs the same for any trace length).")
    if tl.procs_per_row > 1:
        tl_caption += f" {tl.nprocs:,} processes drawn as {tl.n_rows} rows of {tl.procs_per_row} consecutive processes (mean per row)."
    return timed("timeline", lambda: _spec(
        "plot-timeline", "I/O timeline per process", tl_caption,
        (lambda: draw_io_timeline(tl)) if tl.source != "none" else None, "No timed I/O in this log (no trace, heatmap or timestamps)."))


def _files_plot(profile: JobProfile, cfg: Config, plots: dict, timed) -> tuple[Table, Table]:
    """The top files by I/O time plot; (every file's times, the top files)."""
    from ..plots.top_files import draw_top_files, file_times

    ft = timed("files", lambda: file_times(profile))
    n_top = max(cfg.report.top_files, 10)
    top = ft.take(np.arange(min(n_top, len(ft))))
    top_with_time = top.filter(top["io_time_s"] > 0) if len(top) else top
    plots["files"] = timed("files", lambda: _spec(
        "plot-files", "Top files by I/O time",
        "Seconds spent in read, write and metadata calls on each file, summed over processes (POSIX/STDIO; MPI-IO/HDF5 only for files with no POSIX record).",
        (lambda: draw_top_files(top_with_time)) if len(top_with_time) else None, "No file has recorded I/O time."))
    return ft, top


def _metadata_plot(profile: JobProfile, timed) -> dict:
    """Metadata operations over time (traced, or spread over each file's open window)."""
    from ..plots.metadata import draw_metadata_over_time, metadata_over_time

    md = timed("metadata", lambda: metadata_over_time(profile))
    md_src = md["source"][0] if len(md) else ""
    has_md = any(md[k].sum() > 0 for k in ("open", "stat", "seek", "sync", "other")) if len(md) else False
    return timed("metadata", lambda: _spec(
        "plot-metadata", "Metadata operations over time",
        "Traced metadata calls per second." if md_src == "ops" else
        "Estimated: Darshan keeps only counts and first/last timestamps per file, so each file's opens are spread over its first-to-last open, and its stats, seeks and syncs over its first-open-to-last-close window.",
        (lambda: draw_metadata_over_time(md)) if has_md else None, "No metadata operations recorded."))


def _dask_plots(profile: JobProfile, cfg: Config, plots: dict, timed, dask_report_href: str | None) -> dict:
    """The task stream and task duration plots; the Dask section (counts, stragglers, time split)."""
    from ..plots.dask import MAX_TASK_BARS, draw_task_durations, draw_task_stream, task_durations, task_stream

    ts = timed("dask", lambda: task_stream(profile))
    durs = timed("dask", lambda: task_durations(profile, cfg.stragglers))
    plots["gantt"] = timed("dask", lambda: _spec(
        "plot-gantt", "Task stream per worker thread",
        ("Each bar is a task, coloured by task prefix; under each worker, its process's reads (blue) and writes (orange) from the trace."
         if len(ts.tasks) <= MAX_TASK_BARS else
         f"{len(ts.tasks):,} tasks, drawn as one image: each pixel column of a thread shows the task prefix that ran for most of that "
         "time, lighter when the thread was idle part of it; under each worker, its process's reads (blue) and writes (orange)."),
        lambda: draw_task_stream(ts)))
    plots["durations"] = timed("dask", lambda: _spec(
        "plot-durations", "Task durations per prefix",
        f"Box: quartiles of compute durations per prefix; dots: tasks; red crosses: stragglers (robust z > {cfg.stragglers.mad_factor}, at least {cfg.stragglers.task_min_excess_s} s over the prefix median, prefixes of {cfg.stragglers.task_min_tasks}+ tasks: the straggler-task finding's rule).",
        lambda: draw_task_durations(durs)))
    strag = durs.filter(durs["straggler"])
    order = np.argsort(-strag["duration_s"]) if len(strag) else np.zeros(0, int)
    return {
        "report_href": safe_href(dask_report_href),
        "report_text": dask_report_href if dask_report_href and not safe_href(dask_report_href) else None,
        "n_tasks": len(set(profile.tasks["key"].tolist())), "n_workers": len(ts.workers), "n_lanes": len(ts.lanes),
        "n_prefixes": len(set(profile.tasks["prefix"].tolist())),
        "stragglers": strag.take(order[:20]).rows() if len(strag) else [],
        "mad_factor": cfg.stragglers.mad_factor, "min_excess_s": cfg.stragglers.task_min_excess_s,
        "time": (lambda dt: dt.to_dict() if dt is not None else None)(dask_time_of(profile)),
    }


def render_html(profile: JobProfile, findings: Iterable[Finding], *, report: dict | None = None,
                dask_report_href: str | None = None, obfuscate: bool = False,
                config: Config | None = None, timings: dict | None = None) -> str:
    """The HTML report of one job, as a string (one self-contained page)."""
    findings = list(findings)
    if obfuscate:
        from ..obfuscate import Obfuscator, obfuscate_findings, obfuscate_profile

        obf = Obfuscator.for_profile(profile)
        profile = obfuscate_profile(profile, obf)
        findings = obfuscate_findings(findings, obf)
        report = obf.scrub(report) if report is not None else None
        if dask_report_href:
            dask_report_href = obf.text(dask_report_href)
    ctx = build_context(profile, findings, report=report, dask_report_href=dask_report_href, config=config,
                        timings=timings)
    ctx["obfuscated"] = obfuscate
    t = time.perf_counter()
    out = environment().get_template("report.html.j2").render(**ctx)
    if timings is not None:
        timings["template"] = time.perf_counter() - t
    return out
