"""Terminal report: formats the report dict with rich; returns text, prints nothing."""

from __future__ import annotations

import io
from typing import Any

SEV_STYLE = {"high": "bold red", "medium": "yellow", "low": "cyan", "info": "dim"}


def human_bytes(n: float | int | None) -> str:
    if n is None:
        return "-"
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} PiB"


def human_count(n: int | None) -> str:
    return "-" if n is None else f"{n:,}"


_SKIP_EVIDENCE = ("cost_process_s", "cost_share_of_io_process_s")


def _value(k: str, v: Any) -> str:
    """A number in the unit its key names (``*_bytes`` bytes, ``*_s`` seconds, ``*share*`` percent)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        if isinstance(v, (list, tuple)):
            return ", ".join(str(x) for x in v[:5]) + (" …" if len(v) > 5 else "")
        return str(v)
    if k.endswith("_bytes") or k.startswith("bytes_") or k.endswith("_bytes_read") or k.endswith("_bytes_written"):
        return human_bytes(v)
    if k.endswith("_s"):
        return _secs(float(v))
    if "share" in k:
        return _pct(float(v))
    return f"{v:,}" if isinstance(v, int) else f"{v:,.3g}"


def _evidence(ev: dict[str, Any], limit: int = 4) -> str:
    """The first few numbers of a finding's evidence, with units (the full evidence is in --json)."""
    items = [(k, v) for k, v in ev.items() if k not in _SKIP_EVIDENCE and v is not None]
    parts = [f"{k.replace('_', ' ')} {_value(k, v)}" for k, v in items[:limit]]
    more = f" (+{len(items) - limit} more in --json)" if len(items) > limit else ""
    return "; ".join(parts) + more


def _secs(x: float) -> str:
    if x >= 3600:
        return f"{x / 3600:.1f} h"
    if x >= 100:
        return f"{x:,.0f} s"
    return f"{x:.2f} s" if x >= 0.01 else f"{x * 1000:.2f} ms"


def _pct(x: float) -> str:
    return f"{100 * x:.0f} %" if x >= 0.1 else (f"{100 * x:.1f} %" if x >= 0.001 else f"{100 * x:.2g} %")


def _bar(w: dict[str, Any], dask: dict[str, Any], width: int = 24) -> str:
    """One worker's run as a bar: # in tasks' I/O, = computing, . idle (between and around its tasks)."""
    cap = max(w["threads"] * dask["run_s"], 1e-9)
    io = min(w.get("io_s", 0.0), w["busy_s"])
    n_io = round(width * io / cap)
    n_busy = max(round(width * w["busy_s"] / cap) - n_io, 0)
    bar = "#" * n_io + "=" * n_busy
    bar += "." * (width - len(bar))
    io_txt = f" · I/O {100 * io / cap:.0f} %" if dask.get("io_traced", True) else ""
    return f"worker {w['pid']} [{bar}] {w['tasks']:,} tasks · busy {100 * w['busy_s'] / cap:.0f} %{io_txt}"


def _short(path: str, n: int) -> str:
    """A path cut to n characters from its end (the file name and its folders matter most): …/a/b/file."""
    return path if len(path) <= n else "…" + path[-(n - 1):]


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
    return ", ".join(out)


def headline(report: dict[str, Any]) -> str | None:
    """One line: the run time, how much of it is I/O, and how much of it the findings explain."""
    t = report.get("time")
    if not t or not t.get("runtime_s"):
        return None
    parts = [f"{_secs(t['runtime_s'])} run"]
    if t.get("io_wall_s") is not None:
        parts.append(f"I/O on the critical path {_secs(t['io_wall_s'])} ({_pct(t.get('io_share') or 0)})")
    if t.get("io_process_s"):
        parts.append(f"{_secs(t['io_process_s'])} of I/O summed over processes")
    if t.get("explained_s") is not None:
        parts.append(f"findings explain up to {_secs(t['explained_s'])} ({_pct(t.get('explained_share') or 0)})")
    return ": ".join(parts[:1]) + (": " + " · ".join(parts[1:]) if len(parts) > 1 else "")


def render_terminal(report: dict[str, Any], *, color: bool = False, width: int = 110) -> str:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    buf = io.StringIO()
    con = Console(file=buf, force_terminal=color, no_color=not color, width=width, highlight=False, soft_wrap=False)
    j = report["job"]
    v = report["volumes"]
    head = Text()
    head.append(f"iodiag report — job {j['id']}", style="bold")
    head.append(f"  {j.get('program') or j['exe'] or '?'}")
    con.print(head)
    rt = "-" if j["runtime_s"] is None else f"{j['runtime_s']:.2f} s" + (" (derived from records)" if j.get("runtime_derived") else "")
    src = j["collector"] + (f" {j['darshan_version']}" if j.get("darshan_version") else "") + (f", log format {j['log_format']}" if j.get("log_format") else "")
    con.print(f"  {j['nprocs']} process{'' if j['nprocs'] == 1 else 'es'} · run time {rt} · {j['start'] or '?'} → {j['end'] or '?'} · {src}")
    if len(j.get("programs", [])) > 1:
        con.print("  programs: " + "; ".join(f"{p['exe']} ({p['nprocs']} procs)" for p in j["programs"]))
    mods = " ".join(j["modules"]) or "none"
    partial = ", ".join(j["partial_modules"]) or "none"
    con.print(f"  modules: {mods} · partial: ", end="")
    con.print(partial, style="bold red" if j["partial_modules"] else None)
    if j.get("blind_spots"):  # one line: what the collector cannot see, in short; the details are in the JSON
        short = [b.split(":")[0].split(" (")[0].strip() for b in j["blind_spots"]]
        more = f" and {len(short) - 2} more" if len(short) > 2 else ""
        con.print(f"  {j['collector']} collector cannot see {'; '.join(short[:2])}{more} (list: --json job.blind_spots)",
                  style="dim")
    head = headline(report)
    if head:
        con.print()
        con.print(head, style="bold")
    dask = (report.get("time") or {}).get("dask")
    if dask:
        con.print(dask["headline"], style="bold")
        for w in dask.get("per_worker", [])[:8]:
            con.print(f"  {_bar(w, dask)}", style="dim", markup=False)
    con.print()
    con.print(
        f"  read {human_bytes(v['bytes_read'])} in {human_count(v['reads'])} ops · written {human_bytes(v['bytes_written'])} in {human_count(v['writes'])} ops"
        f" · opens {human_count(v['opens'])} · stats {human_count(v['stats'])} · seeks {human_count(v['seeks'])}"
        f" · fsyncs {human_count(v['fsyncs'])} · files {human_count(v['files'])} · I/O time {report.get('io_time_s', 0):.2f} s"
    )

    findings = report["findings"]
    con.print()
    if findings:
        con.print(f"Diagnosis ({len(findings)} finding{'s' if len(findings) != 1 else ''}, most costly first)", style="bold")
        for i, f in enumerate(findings, 1):
            line = Text(f"{i:>2}. ")
            line.append(f"{f['severity'].upper():<6}", style=SEV_STYLE.get(f["severity"]))
            line.append(f" [{f['id']}] ", style="bold")
            line.append(f["title"])
            if f.get("est_cost_s"):
                share = f.get("cost_share")
                line.append(f"  (~{_secs(f['est_cost_s'])} of the run" + (f", {_pct(share)}" if share is not None else "") + ")",
                            style="dim")
            con.print(line)
            if f["severity"] == "info":  # worth knowing, not worth the reader's time here: one line
                continue
            if f.get("evidence"):
                con.print(f"      evidence: {_evidence(f['evidence'])}", style="dim", markup=False)
            if f.get("files"):
                keep = max(24, (width - 20) // 3)
                con.print("      files: " + ", ".join(_short(x, keep) for x in f["files"][:3])
                          + (f" (+{len(f['files']) - 3} more)" if len(f["files"]) > 3 else ""), style="dim", markup=False)
            if f.get("processes"):
                con.print("      processes: " + ", ".join(str(p) for p in f["processes"][:8]), style="dim")
            # all of it: a part left out is advice the user never reads (site advice comes last)
            con.print(f"      → {f['recommendation']}", markup=False)
    elif v["reads"] + v["writes"] + v["opens"] == 0:
        con.print("No I/O recorded in this job.", style="bold")
    else:
        con.print("No problems found by the detectors.", style="bold green")

    recs = report.get("recommendations")
    if recs:
        from .advice import recommendation_lines

        con.print()
        active = sum(1 for r in recs if r.get("abstain") is None)
        con.print(f"What to change ({active} recommendation{'s' if active != 1 else ''}; details: iodiag recommend "
                  f"{j['id']})" if active else "What to change: no setting recommended", style="bold")
        for text, style in recommendation_lines(recs, width=width - 1):
            con.print(text, style=style, markup=False, soft_wrap=True)  # a long change line stays whole

    if report.get("modules") and width >= 100:  # ten columns: only where they fit
        con.print()
        t = Table(title="Per module", title_justify="left", show_edge=False)
        for c in ("module", "files", "reads", "writes", "read", "written", "opens", "read s", "write s", "meta s"):
            t.add_column(c, justify="left" if c == "module" else "right")
        for m in report["modules"]:
            t.add_row(m["module"], human_count(m["files"]), human_count(m["reads"]), human_count(m["writes"]),
                      human_bytes(m["bytes_read"]), human_bytes(m["bytes_written"]), human_count(m["opens"]),
                      f"{m['read_time_s']:.2f}", f"{m['write_time_s']:.2f}", f"{m['meta_time_s']:.2f}")
        con.print(t)
    if report.get("top_files"):
        con.print()
        t = Table(title="Top files by I/O time", title_justify="left", show_edge=False)
        for c in ("file", "module", "I/O s", "read", "written", "procs"):
            t.add_column(c, justify="left" if c in ("file", "module") else "right", overflow="fold")
        for f in report["top_files"]:
            t.add_row(_short(f["path"], max(24, width - 52)), f["module"], f"{f['io_time_s']:.3f}", human_bytes(f["bytes_read"]),
                      human_bytes(f["bytes_written"]), "all (shared)" if f["processes"] < 0 else str(f["processes"]))
        con.print(t)
    sp = report.get("process_spread")
    if sp and sp["processes"] > 1:
        con.print()
        con.print(
            f"Per-process I/O time: {sp['active']}/{sp['processes']} processes did I/O · min {sp['min_s']:.3f} s · "
            f"median {sp['median_s']:.3f} s · max {sp['max_s']:.3f} s · slowest: {_named(report, sp['slowest'][:4]) or '-'}"
        )
    if report["errors"]:
        con.print()
        con.print(f"Problems reading this job ({len(report['errors'])}):", style="bold red")
        for e in report["errors"][:20]:
            mod = f" [{e['module']}]" if e.get("module") else ""
            con.print(f"  {e['kind']}{mod}: {e['path']}: {e['cause']}")
        if len(report["errors"]) > 20:
            con.print(f"  … {len(report['errors']) - 20} more (see --json)")
    return buf.getvalue()
