"""Terminal report: formats the report dict as styled, wrapped lines (``textout``); returns text, prints nothing."""

from __future__ import annotations

import re
from typing import Any

from ..units import fmt_bytes, fmt_count, fmt_pct, fmt_seconds
from .textout import Lines, keep_end

SEV_STYLE = {"high": "bold red", "medium": "yellow", "low": "cyan", "info": "dim"}


_SKIP_EVIDENCE = ("cost_process_s", "cost_share_of_io_process_s")


# "share" as a word of the key: a share of something (``stdio_share_of_bytes``, ``posix_read_share_of_posix_io_s``)
# is a percent whatever unit the something is in; ``shared_files`` is a count
_SHARE = re.compile(r"(^|_)share(_|$)")


def _value(k: str, v: Any) -> str:
    """A number in the unit its key names: a share (``share`` a word of the key) percent, before ``*_bytes``
    bytes and ``*_s`` seconds (``stdio_share_of_bytes`` is a share of the bytes, not bytes)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        if isinstance(v, (list, tuple)):
            return ", ".join(str(x) for x in v[:5]) + (" …" if len(v) > 5 else "")
        return str(v)
    if _SHARE.search(k):
        return fmt_pct(float(v))
    if k.endswith("_bytes") or k.startswith("bytes_") or k.endswith("_bytes_read") or k.endswith("_bytes_written"):
        return fmt_bytes(v)
    if k.endswith("_s"):
        return fmt_seconds(float(v))
    return f"{v:,}" if isinstance(v, int) else f"{v:,.3g}"


# a top file's layers (the report's ``module``: "H5F+MPI-IO+POSIX") as users name them, the application's layer
# first: "HDF5+MPI-IO+POSIX", "PnetCDF+MPI-IO+POSIX" (shorter, so the path keeps more of itself at 80 columns)
_LAYER_NAME = {"H5F": "HDF5", "H5D": "HDF5", "PNETCDF_FILE": "PnetCDF", "PNETCDF_VAR": "PnetCDF"}
_LAYER_ORDER = ("HDF5", "PnetCDF", "MPI-IO", "DFS", "DAOS", "POSIX", "STDIO")


def _layers(module: str) -> str:
    names = list(dict.fromkeys(_LAYER_NAME.get(m, m) for m in str(module).split("+") if m))
    rank = {n: i for i, n in enumerate(_LAYER_ORDER)}
    return "+".join(sorted(names, key=lambda n: (rank.get(n, len(rank)), n)))


def _evidence(ev: dict[str, Any], limit: int = 4) -> str:
    """The first few numbers of a finding's evidence, with units (the full evidence is in --json)."""
    items = [(k, v) for k, v in ev.items() if k not in _SKIP_EVIDENCE and v is not None]
    parts = [f"{k.replace('_', ' ')} {_value(k, v)}" for k, v in items[:limit]]
    more = f" (+{len(items) - limit} more in --json)" if len(items) > limit else ""
    return "; ".join(parts) + more


def _bar(w: dict[str, Any], dask: dict[str, Any], width: int = 24) -> str:
    """One worker's run as a bar: # in tasks' I/O, = computing, . idle (between and around its tasks)."""
    cap = max(w["threads"] * dask["run_s"], 1e-9)
    io = min(w.get("io_s", 0.0), w["busy_s"])
    n_io = round(width * io / cap)
    n_busy = max(round(width * w["busy_s"] / cap) - n_io, 0)
    bar = "#" * n_io + "=" * n_busy
    bar += "." * (width - len(bar))
    io_txt = f" · I/O {fmt_pct(io / cap)}" if dask.get("io_traced", True) else ""
    return f"worker {w['pid']} [{bar}] {fmt_count(w['tasks'])} tasks · busy {fmt_pct(w['busy_s'] / cap)}{io_txt}"


def _site_part(text: str) -> tuple[str, str | None]:
    """A finding's recommendation split into iodiag's advice and the site config's (appended as "Site advice
    (NAME): ..." by recommend/site.py), so that the terminal shows the site's on a line of its own."""
    i = text.find(" Site advice")
    if i < 0:
        return (text, None) if not text.startswith("Site advice") else ("", text)
    return text[:i].rstrip(), text[i + 1:]


def _named(report: dict[str, Any], procs: list[int]) -> str:
    """Processes as "role pid" (e.g. "worker 17722") where the job knows them, else as indices."""
    by = {p["proc"]: p for p in report["job"].get("processes", [])}
    out = []
    for i in procs:
        p = by.get(i)
        if p and p["role"] in ("rank",):
            out.append(f"rank {p['rank']}")
        elif p and p["pid"] > 0:
            out.append(f"{p['role']} {p['pid']}")
        else:
            out.append(str(i))
    if len(set(out)) < len(out):  # several logs' rank 0 (non-MPI processes): tell them apart by pid, else index
        seen = {n: out.count(n) for n in out}
        for k, i in enumerate(procs):
            if seen[out[k]] > 1:
                p = by.get(i)
                out[k] = f"{out[k]} (pid {p['pid']})" if p and p.get("pid", 0) > 0 else f"{out[k]} (process {i})"
    return ", ".join(out)


def headline(report: dict[str, Any]) -> str | None:
    """One line: the run time, how much of it is I/O, and how much of it the findings explain."""
    t = report.get("time")
    if not t or not t.get("runtime_s"):
        return None
    parts = [f"{fmt_seconds(t['runtime_s'])} run"]
    if t.get("io_wall_s") is not None:
        parts.append(f"I/O on the critical path {fmt_seconds(t['io_wall_s'])} ({fmt_pct(t.get('io_share') or 0)})")
    if t.get("io_process_s"):
        parts.append(f"{fmt_seconds(t['io_process_s'])} of I/O summed over processes")
    if t.get("explained_s") is not None:
        other = t.get("explained_other_s") or 0
        split = (f": I/O {fmt_seconds(t.get('explained_io_s') or 0)} + outside I/O {fmt_seconds(other)}" if other and
                 t.get("explained_io_s") else "")
        parts.append(f"findings explain up to {fmt_seconds(t['explained_s'])} ({fmt_pct(t.get('explained_share') or 0)}"
                     f"{split}; overlaps counted once)")
    return ": ".join(parts[:1]) + (": " + " · ".join(parts[1:]) if len(parts) > 1 else "")


def render_terminal(report: dict[str, Any], *, color: bool = False, width: int = 110) -> str:
    out = Lines(width=width, color=color)
    _job_lines(out, report)
    _finding_lines(out, report, width)
    _recommendation_lines(out, report, width)
    _table_lines(out, report, width)
    _error_lines(out, report)
    return out.text()


def _job_lines(out: Lines, report: dict[str, Any]) -> None:
    """The job: program, processes, run time, collector, workload exit, modules, blind spots, the headline, the Dask
    time split and the job's volumes."""
    line, blank = out.line, out.blank
    j = report["job"]
    v = report["volumes"]
    line((f"iodiag report — job {j['id']}", "bold"), f"  {j.get('program') or j['exe'] or '?'}", hang=2)
    rt = "-" if j["runtime_s"] is None else fmt_seconds(j['runtime_s']) + (" (derived from records)" if j.get("runtime_derived") else "")
    src = j["collector"] + (f" {j['darshan_version']}" if j.get("darshan_version") else "") + (f", log format {j['log_format']}" if j.get("log_format") else "")
    line(f"  {j['nprocs']} process{'' if j['nprocs'] == 1 else 'es'} · run time {rt} · {j['start'] or '?'} → {j['end'] or '?'} · {src}", hang=4)
    if "exit_code" in j:  # a job recorded by `iodiag run`
        status = (f"killed by {j['exit_signal']} (exit status {j['exit_code']})" if j.get("exit_signal")
                  else "-" if j["exit_code"] is None else f"exit status {j['exit_code']}")
        why = f" · partial: {'; '.join(j['partial_reasons'])}" if j.get("partial_reasons") else ""
        line(("  workload: ", None), (status, "bold red" if j["exit_code"] else None), why, hang=4)
    if len(j.get("programs", [])) > 1:
        line("  programs: " + "; ".join(f"{p['exe']} ({p['nprocs']} procs)" for p in j["programs"]), hang=4)
    mods = " ".join(j["modules"]) or "none"
    partial = ", ".join(j["partial_modules"]) or "none"
    line(f"  modules: {mods} · partial: ", (partial, "bold red" if j["partial_modules"] else None), hang=4)
    if j.get("blind_spots"):  # one line: what the collector cannot see, in short; the details are in the JSON
        short = [b.split(":")[0].split(" (")[0].strip() for b in j["blind_spots"]]
        more = f" and {len(short) - 2} more" if len(short) > 2 else ""
        line(f"  {j['collector']} collector cannot see {'; '.join(short[:2])}{more} (list: --json job.blind_spots)",
             style="dim", hang=4)
    head = headline(report)
    if head:
        blank()
        line(head, style="bold", hang=2)
    dask = (report.get("time") or {}).get("dask")
    if dask:
        line(dask["headline"], style="bold", hang=2)
        for w in dask.get("per_worker", [])[:8]:
            line(f"  {_bar(w, dask)}", style="dim", hang=4)
    blank()
    line(f"  read {fmt_bytes(v['bytes_read'])} in {fmt_count(v['reads'])} ops · written {fmt_bytes(v['bytes_written'])} in {fmt_count(v['writes'])} ops"
         f" · opens {fmt_count(v['opens'])} · stats {fmt_count(v['stats'])} · seeks {fmt_count(v['seeks'])}"
         f" · fsyncs {fmt_count(v['fsyncs'])} · files {fmt_count(v['files'])} · I/O time {fmt_seconds(report.get('io_time_s', 0))}", hang=4)


def _finding_lines(out: Lines, report: dict[str, Any], width: int) -> None:
    """The diagnosis: each finding with its cost, evidence, files, processes and advice (info findings: one line)."""
    line, blank = out.line, out.blank
    v = report["volumes"]
    findings = report["findings"]
    blank()
    if findings:
        line(f"Diagnosis ({len(findings)} finding{'s' if len(findings) != 1 else ''}, most costly first)", style="bold")
        for i, f in enumerate(findings, 1):
            parts: list = [f"{i:>2}. ", (f"{f['severity'].upper():<6}", SEV_STYLE.get(f["severity"])), (f" [{f['id']}] ", "bold"),
                           f["title"]]
            if f.get("est_cost_s"):
                share = f.get("cost_share")
                parts.append((f"  (~{fmt_seconds(f['est_cost_s'])} of the run" + (f", {fmt_pct(share)}" if share is not None else "") + ")",
                              "dim"))
            line(*parts, hang=11)  # under the title's first word
            if f["severity"] == "info":  # worth knowing, not worth the reader's time here: one line
                continue
            if f.get("evidence"):
                line(f"      evidence: {_evidence(f['evidence'])}", style="dim", hang=8)
            if f.get("files"):
                keep = max(24, (width - 20) // 3)
                line("      files: " + ", ".join(keep_end(x, keep) for x in f["files"][:3])
                     + (f" (+{len(f['files']) - 3} more)" if len(f["files"]) > 3 else ""), style="dim", hang=8)
            if f.get("processes"):
                line("      processes: " + ", ".join(str(p) for p in f["processes"][:8]), style="dim", hang=8)
            # all of it: a part left out is advice the user never reads (site advice comes last)
            advice, site = _site_part(f["recommendation"])
            line(f"      → {advice}", hang=8)
            if site:  # the site config's advice: its own line, after iodiag's
                line(f"        {site}", hang=8)
    elif v["reads"] + v["writes"] + v["opens"] == 0:
        line("No I/O recorded in this job.", style="bold")
    else:
        line("No problems found by the detectors.", style="bold green")


def _recommendation_lines(out: Lines, report: dict[str, Any], width: int) -> None:
    line, blank = out.line, out.blank
    j = report["job"]
    recs = report.get("recommendations")
    if recs:
        from .advice import recommendation_lines

        blank()
        active = sum(1 for r in recs if r.get("abstain") is None)
        line(f"What to change ({active} recommendation{'s' if active != 1 else ''}; details: iodiag recommend "
             f"{j['id']})" if active else "What to change: no setting recommended", style="bold", hang=2)
        for text, style in recommendation_lines(recs, width=width - 1):
            line(text, style=style, wrap=False)  # wrapped by recommendation_lines; a long change line stays whole


def _table_lines(out: Lines, report: dict[str, Any], width: int) -> None:
    """Per-module and top-file tables and the per-process I/O time spread."""
    line, blank = out.line, out.blank
    if report.get("modules") and width >= 100:  # ten columns: only where they fit
        blank()
        cols = [(c, "left" if c == "module" else "right")
                for c in ("module", "files", "reads", "writes", "read", "written", "opens", "read s", "write s", "meta s")]
        out.table("Per module", cols, [
            (m["module"], fmt_count(m["files"]), fmt_count(m["reads"]), fmt_count(m["writes"]),
             fmt_bytes(m["bytes_read"]), fmt_bytes(m["bytes_written"]), fmt_count(m["opens"]),
             f"{m['read_time_s']:.2f}", f"{m['write_time_s']:.2f}", f"{m['meta_time_s']:.2f}") for m in report["modules"]])
    if report.get("top_files"):
        blank()
        cols = [(c, "left" if c in ("file", "module") else "right") for c in ("file", "module", "I/O s", "read", "written", "procs")]
        out.table("Top files by I/O time", cols, [
            (keep_end(f["path"], max(24, width - 52)), _layers(f["module"]), f"{f['io_time_s']:.3f}", fmt_bytes(f["bytes_read"]),
             fmt_bytes(f["bytes_written"]), "all (shared)" if f["processes"] < 0 else str(f["processes"]))
            for f in report["top_files"]])
    sp = report.get("process_spread")
    if sp and sp["processes"] > 1:
        blank()
        line(f"Per-process I/O time: {sp['active']}/{sp['processes']} processes did I/O · min {fmt_seconds(sp['min_s'])} · "
             f"median {fmt_seconds(sp['median_s'])} · max {fmt_seconds(sp['max_s'])} · slowest: {_named(report, sp['slowest'][:4]) or '-'}",
             hang=2)


def _error_lines(out: Lines, report: dict[str, Any]) -> None:
    line, blank = out.line, out.blank
    if report["errors"]:
        blank()
        line(f"Problems reading this job ({len(report['errors'])}):", style="bold red")
        for e in report["errors"][:20]:
            mod = f" [{e['module']}]" if e.get("module") else ""
            line(f"  {e['kind']}{mod}: {e['path']}: {e['cause']}", hang=4)
        if len(report["errors"]) > 20:
            line(f"  … {len(report['errors']) - 20} more (see --json)")
