"""`iodiag sweep plan|run|submit|collect|analyze`: parameter sweeps of workloads."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from ..errors import UsageError
from .app import app
from .common import guarded




sweep_app = typer.Typer(
    help="Parameter sweeps of iodiag workloads, here or on Slurm/LSF/PBS.\n\n"
    "Examples:\n\n"
    "  iodiag sweep plan weak.toml\n\n"
    "  iodiag sweep run weak.toml --local --dir sweeps/weak\n\n"
    "  iodiag sweep submit weak.toml --scheduler slurm --dir /scratch/me/weak\n\n"
    "  iodiag sweep submit weak.toml --scheduler pbs --dry-run   # write scripts only\n\n"
    "  iodiag sweep collect sweeps/weak\n\n"
    "  iodiag sweep analyze sweeps/weak --axis workers --mode weak\n\n"
    "Every run is `iodiag run --name <run> -- python -m iodiag.workloads.<w> ...` (an iodiag job) when\n"
    "`iodiag run` is available. Re-running run/submit skips succeeded runs and retries failed ones.",
    no_args_is_help=True,
    rich_markup_mode=None,
)
app.add_typer(sweep_app, name="sweep")

SpecArg = typer.Argument(..., help="sweep spec (TOML)", exists=False)
DirOpt = typer.Option(None, "--dir", "-d", help="sweep folder (default: ./sweeps/<name>)")
YesOpt = typer.Option(False, "--yes", "-y", help="accept grids above the run limit ([sweep] max_runs)")
SWEEP_SCHEMA = "iodiag.sweep/1"
JsonOpt = typer.Option(False, "--json", help=f"machine-readable output on stdout (schema {SWEEP_SCHEMA}, field command)")


def _json(command: str, payload: dict) -> None:
    """Every sweep command's JSON: one object, schema iodiag.sweep/1, the command that made it, then its fields."""
    typer.echo(json.dumps({"schema": SWEEP_SCHEMA, "command": command, **payload}, indent=2, default=str))
ConfigOpt = typer.Option(None, "--config", help="iodiag config TOML ([sweep] max_runs, submit_timeout_s)")


ColorOpt = typer.Option(None, "--color/--no-color", help="colour the output (default: on a terminal, unless $NO_COLOR is set)")


def _err(color: Optional[bool] = None):
    from .common import rich_console

    return rich_console(stderr=True, color=color)


def _plan(spec_path: Path, sweep_dir: Optional[Path], yes: bool, config: Optional[Path]):
    from ..config import load_config
    from ..jobs.sweep import load_spec, make_plan

    from .common import check_folder

    cfg = load_config(config)
    spec = load_spec(spec_path)
    sweep_dir = sweep_dir or Path("sweeps") / spec.name
    check_folder(sweep_dir, "sweep folder", option="--dir")
    return make_plan(spec, sweep_dir=sweep_dir, max_runs=cfg.sweep.max_runs, yes=yes), cfg


def _progress(console):
    colours = {"skip": "dim", "submitted": "green", "done": "bold", "blocked": "red", "in-flight": "cyan",
               "would-submit": "yellow", "start": ""}

    def cb(event, run, detail):
        style = colours.get(event, "")
        if event == "done":
            style = "green" if detail == "exit 0" else "red"
        console.print(f"[{style}]{event:>12}[/] {run.name} {detail}" if style else f"{event:>12} {run.name} {detail}")

    return cb


@sweep_app.command("plan")
@guarded(schema=SWEEP_SCHEMA)
def plan_cmd(spec: Path = SpecArg, dir: Optional[Path] = DirOpt, yes: bool = YesOpt, as_json: bool = JsonOpt,
             config: Optional[Path] = ConfigOpt, color: Optional[bool] = ColorOpt) -> None:
    """Show the runs a spec makes (and their commands) without running anything."""
    plan, _ = _plan(spec, dir, yes, config)
    if as_json:
        _json("plan", {"sweep_dir": str(plan.sweep_dir), "launcher": plan.launcher, "notes": plan.notes,
                       "prepare": [r.to_json() for r in plan.prepare], "runs": [r.to_json() for r in plan.runs]})
        return
    from ..reports.textout import Col, Lines
    from .common import terminal_width, use_color

    out = Lines(width=terminal_width(), color=use_color(color))
    out.table(f"sweep {plan.spec.name}: {len(plan.runs)} runs"
              f"{f' + {len(plan.prepare)} prepare steps' if plan.prepare else ''} in {plan.sweep_dir}",
              [("run", "left", Col(cut="middle", min=16)), ("rep", "right", Col()),
               ("depends on", "left", Col(1, cut="end", min=12))],
              [(r.name, str(r.rep) if r.kind == "run" else "-", ", ".join(r.depends_on)) for r in plan.all])
    out.line(f"launcher: {plan.launcher}; chain on batch systems: {plan.spec.chain}")
    if plan.runs:
        out.line("first run: " + " ".join(plan.runs[0].argv), wrap=False)  # a command to paste: never cut
    typer.echo(out.text(), nl=False)
    err = _err(color)
    for n in plan.notes:
        err.print(f"[yellow]note:[/] {n}")


@sweep_app.command("run")
@guarded(schema=SWEEP_SCHEMA)
def run_cmd(spec: Path = SpecArg, local: bool = typer.Option(True, "--local/--no-local",
                                                               help="run here, one after another (default)"),
            dir: Optional[Path] = DirOpt, yes: bool = YesOpt,
            retry_failed: bool = typer.Option(True, "--retry-failed/--skip-failed",
                                              help="re-run runs marked FAILED (default) or leave them"),
            as_json: bool = JsonOpt, config: Optional[Path] = ConfigOpt, color: Optional[bool] = ColorOpt) -> None:
    """Run every run of a spec here, one after another, repetitions round-robin over the grid points (succeeded
    runs are skipped)."""
    from ..errors import UsageError
    from ..jobs.sweep import run_local

    if not local:
        raise UsageError("`iodiag sweep run` runs here only", hint="use `iodiag sweep submit --scheduler ...`")
    plan, _ = _plan(spec, dir, yes, config)
    err = _err(color)
    for n in plan.notes:
        err.print(f"[yellow]note:[/] {n}")
    try:
        out = run_local(plan, retry_failed=retry_failed, progress=None if as_json else _progress(err))
    except KeyboardInterrupt:
        from ..errors import Interrupted
        from ..jobs.sweep import status

        ok = sum(status(r) == "succeeded" for r in plan.all)
        raise Interrupted(f"interrupted: {plan.sweep_dir} keeps the {ok} of {len(plan.all)} runs that succeeded "
                          "(the run cut short is run again next time)",
                          hint="run the same command again to run the rest (succeeded runs are skipped)") from None
    if as_json:
        _json("run", {"sweep_dir": str(plan.sweep_dir), **out.to_json()})
    else:
        err.print(f"{len(out.ran)} ran, {len(out.skipped)} skipped, {len(out.failed)} failed → "
                  f"iodiag sweep collect {plan.sweep_dir}")
    if out.failed:
        raise typer.Exit(1)


@sweep_app.command("submit")
@guarded(schema=SWEEP_SCHEMA)
def submit_cmd(spec: Path = SpecArg,
               scheduler: str = typer.Option(..., "--scheduler", "-s", help="slurm, lsf or pbs"),
               dir: Optional[Path] = DirOpt, yes: bool = YesOpt,
               dry_run: bool = typer.Option(False, "--dry-run", help="write the scripts, submit nothing"),
               retry_failed: bool = typer.Option(True, "--retry-failed/--skip-failed"),
               wait: float = typer.Option(0.0, "--wait", help="then wait up to this many seconds for markers"),
               as_json: bool = JsonOpt, config: Optional[Path] = ConfigOpt, color: Optional[bool] = ColorOpt) -> None:
    """Write one batch script per run and submit all runs at once, chained with dependencies."""
    from ..jobs.sweep import submit
    from ..jobs.sweep import wait as wait_for
    from ..jobs.sweep.schedulers import get_scheduler

    sched = get_scheduler(scheduler)
    if not dry_run:
        sched.check_available()  # before the spec's folders are even created
    plan, cfg = _plan(spec, dir, yes, config)
    err = _err(color)
    for n in plan.notes:
        err.print(f"[yellow]note:[/] {n}")
    out = submit(plan, scheduler=scheduler, dry_run=dry_run, retry_failed=retry_failed,
                 timeout_s=cfg.sweep.submit_timeout_s, progress=None if as_json else _progress(err))
    result = {"sweep_dir": str(plan.sweep_dir), "scheduler": scheduler, **out.to_json()}
    if wait > 0 and not dry_run:
        result["final_status"] = wait_for(plan, timeout_s=wait)
    if as_json:
        _json("submit", result)
    else:
        err.print(f"{len(out.ran)} {'scripts written' if dry_run else 'submitted'}, {len(out.skipped)} skipped, "
                  f"{len(out.in_flight)} still queued/running → iodiag sweep collect {plan.sweep_dir}")


@sweep_app.command("collect")
@guarded(schema=SWEEP_SCHEMA)
def collect_cmd(sweep_dir: Path = typer.Argument(..., help="sweep folder"),
                include_prepare: bool = typer.Option(False, "--prepare", help="include prepare steps"),
                as_json: bool = JsonOpt) -> None:
    """Gather every run's status and results into results.csv and results.parquet."""
    from ..jobs.sweep import collect

    df, written = collect(sweep_dir, include_prepare=include_prepare)
    if as_json:
        _json("collect", {"sweep_dir": str(sweep_dir), "written": {k: str(v) for k, v in written.items()},
                          "rows": json.loads(df.to_json(orient="records"))})
        return
    counts = df.drop_duplicates("run")["status"].value_counts().to_dict() if len(df) else {}
    _err().print(f"{len(df)} rows from {df['run'].nunique() if len(df) else 0} runs "
                 f"({', '.join(f'{v} {k}' for k, v in counts.items())}) → "
                 + ", ".join(str(p) for p in written.values()))


@sweep_app.command("analyze")
@guarded(schema=SWEEP_SCHEMA)
def analyze_cmd(sweep_dir: Path = typer.Argument(..., help="sweep folder (collected or not)"),
                axis: Optional[str] = typer.Option(None, "--axis", help="grid parameter to scale along (default: workers, when the grid has it)"),
                mode: str = typer.Option("strong", "--mode", help="strong or weak scaling"),
                time_col: Optional[str] = typer.Option(None, "--time", help="time column (default t_write_s or t_total_s)"),
                compare_by: Optional[str] = typer.Option(None, "--compare-by",
                                                         help="bar plot: one bar per value of this column (e.g. format)"),
                group: str = typer.Option("pattern", "--group", help="bar plot groups (e.g. pattern)"),
                plots: bool = typer.Option(True, "--plots/--no-plots", help="write PNG plots into the sweep folder"),
                as_json: bool = JsonOpt, color: Optional[bool] = ColorOpt) -> None:
    """Throughput, speedup, parallel efficiency, mean ± 95 % CI and spread over repetitions, arithmetic/harmonic
    means; with --mode weak, the loss of each scale split into named components (from the runs' iodiag jobs)."""
    from ..jobs.sweep import collect
    from ..jobs.sweep.analyze import analyze

    grid = _check_analyze(sweep_dir, axis=axis, mode=mode, plots=plots)
    axis = axis or "workers"
    if compare_by:  # (read, not yet written: collect writes results.csv)
        _check_compare_by(sweep_dir, compare_by)
    df, _ = collect(sweep_dir)
    res = analyze(df, axis=axis, mode=mode, time_col=time_col, grid=grid)
    written = _write_analysis(sweep_dir, df, res, axis=axis, mode=mode, time_col=time_col, compare_by=compare_by,
                              group=group, plots=plots)
    findings, diagnosed, scaling_notes, loss = _scaling_findings(df) if mode == "weak" else ([], 0, [], [])
    res["notes"].extend(scaling_notes)
    if loss and plots:
        from ..reports.weakloss import html_page

        (sweep_dir / "weak_loss.html").write_text(html_page(loss, title=f"{sweep_dir.name}: weak-scaling loss by "
                                                                         "component"), encoding="utf-8")
        written["weak_loss_html"] = sweep_dir / "weak_loss.html"
    if as_json:
        payload = {"summary": json.loads(res["summary"].to_json(orient="records")), "means": res["means"],
                   "findings": [f.to_dict() for f in findings], "diagnosed_jobs": diagnosed, "weak_loss": loss,
                   "runs": res["runs"], "notes": res["notes"], "mode": mode, "axis": axis, "written": {k: str(v) for k, v in written.items()}}
        if "scaling" in res:
            payload["scaling"] = json.loads(res["scaling"].to_json(orient="records"))
        _json("analyze", payload)
        return
    _print_analysis(sweep_dir, res, findings, loss, written, color)


def _check_compare_by(sweep_dir: Path, compare_by: str) -> None:
    """--compare-by names a column of the sweep's results (read from the runs: results.csv may not exist yet)."""
    from ..jobs.sweep import collect_rows

    columns = list(dict.fromkeys(k for row in collect_rows(sweep_dir) for k in row))
    if compare_by not in columns:
        raise UsageError(f"--compare-by {compare_by}: not a column of this sweep's results",
                         hint="columns: " + ", ".join(columns))


def _write_analysis(sweep_dir: Path, df, res: dict, *, axis: str, mode: str, time_col: Optional[str],
                    compare_by: Optional[str], group: str, plots: bool) -> dict[str, Path]:
    """summary.csv, scaling.csv and (with plots) scaling.png and compare.png into the sweep folder; what was written."""
    written = {}
    res["summary"].to_csv(sweep_dir / "summary.csv", index=False)
    written["summary"] = sweep_dir / "summary.csv"
    if "scaling" in res:
        res["scaling"].to_csv(sweep_dir / "scaling.csv", index=False)
        written["scaling"] = sweep_dir / "scaling.csv"
    if plots:
        from ..jobs.sweep import plots as P
        from ..jobs.sweep.analyze import summarize

        if "scaling" in res:
            written["scaling_png"] = P.plot_scaling(res["scaling"], axis=axis, mode=mode,
                                                    out=sweep_dir / "scaling.png")
        if compare_by:
            summ = summarize(df, time_col=time_col, by=[c for c in (group, compare_by) if c in df.columns])
            written["compare_png"] = P.plot_compare(summ, by=compare_by, group=group if group in df.columns else None,
                                                    out=sweep_dir / "compare.png",
                                                    title=f"{sweep_dir.name}: {res['time_col']} by {compare_by}")
    return written


def _print_analysis(sweep_dir: Path, res: dict, findings: list, loss: list, written: dict[str, Path],
                    color: Optional[bool]) -> None:
    """The analysis as text: the scaling (or summary) table, throughput means, the weak-scaling loss, findings;
    notes and the files written on stderr."""
    from ..reports.textout import Lines
    from .common import terminal_width, use_color

    out = Lines(width=terminal_width(), color=use_color(color))
    tab = res.get("scaling", res["summary"])
    cols, rows = analyze_table(tab)
    out.table(f"{sweep_dir}: {res['time_col']} mean ± 95 % CI over repetitions", cols, rows)
    if res["means"]:
        m = res["means"]
        out.line(f"throughput across {m['configurations']} configurations: arithmetic mean "
                 f"{m['arithmetic_mean_MBps']:.1f} MB/s, harmonic mean {m['harmonic_mean_MBps']:.1f} MB/s")
    if loss:
        from ..reports.weakloss import text_lines

        for ln in text_lines(loss):
            out.line(ln)
    for f in findings:
        out.line((f"{f.severity.upper()} [{f.id}]", "bold"), " ", f.title)
        out.line(f"  → {f.recommendation}", hang=4)
    typer.echo(out.text(), nl=False)
    err = _err(color)
    for n in res["notes"]:
        err.print(f"[yellow]note:[/] {n}")
    if res["runs"]["not_succeeded_rows"]:
        err.print(f"[yellow]note:[/] {res['runs']['not_succeeded_rows']} rows from runs that did not succeed "
                  "are left out")
    err.print("wrote " + ", ".join(str(p) for p in written.values()))


# the measure columns of the analyze table: (column, header, priority: the highest is left out first on a narrow line)
_MEASURES = [("time_s_mean", "time s", 0), ("time_s_ci95", "± CI95", 2), ("time_s_n", "n", 6),
             ("throughput_MBps_mean", "MB/s", 3), ("throughput_MBps_ci95", "± MB/s", 5), ("speedup", "speedup", 4),
             ("efficiency", "efficiency", 1)]


def analyze_table(tab) -> tuple[list, list]:
    """Columns and rows of the analyze table: the configuration columns first, never left out (a path is cut in
    the middle, so that rows differing at its end stay told apart), then the measures by priority."""
    from ..reports.textout import Col
    from ..units import fmt_pct

    measures = {c for c, _, _ in _MEASURES}
    conf = [c for c in tab.columns if c not in measures and not c.endswith(
        ("_std", "_lo", "_hi", "_n", "_mean", "_ci95", "_min", "_max", "_spread")) and c not in ("bytes", "ideal_time_s")]
    shown = [(c, h, p) for c, h, p in _MEASURES if c in tab.columns]
    if "time_s_min" in tab.columns:  # each point's repetitions: their range, and that range over their median
        shown.insert(next((i + 1 for i, m in enumerate(shown) if m[0] == "time_s_ci95"), len(shown)), ("spread", "spread", 2))
    cols = [(c, "right" if tab[c].dtype.kind in "iufc" else "left", Col(cut="middle", min=24)) for c in conf]
    cols += [(h, "right", Col(p)) for _, h, p in shown]

    def cell(v) -> str:
        if isinstance(v, float):
            return "-" if v != v else f"{v:.4g}"
        return str(v)

    def spread(r) -> str:
        pct = "" if r["time_s_spread"] != r["time_s_spread"] else f" ({fmt_pct(r['time_s_spread'])})"
        return f"{r['time_s_min']:.4g}–{r['time_s_max']:.4g}{pct}"

    rows = [[cell(r[c]) for c in conf] + [spread(r) if c == "spread" else cell(r[c]) for c, _, _ in shown]
            for _, r in tab.iterrows()]
    return cols, rows


def _check_analyze(sweep_dir: Path, *, axis: Optional[str], mode: str, plots: bool) -> list[str]:
    """The grid of a sweep folder, once the options are known to fit it (before results are collected or written)."""
    from ..errors import InputNotFound, InputUnreadable

    if mode not in ("strong", "weak"):
        raise UsageError(f"--mode {mode}: expected strong or weak",
                         hint="strong: the same total work at every size; weak: the work grows with the axis")
    meta_path = sweep_dir / "sweep.json"
    if sweep_dir.exists() and not sweep_dir.is_dir():
        raise UsageError(f"{sweep_dir} is a file, not a sweep folder", hint="give the --dir used with `iodiag sweep run` or `submit`")
    if not meta_path.is_file():
        raise InputNotFound(f"{sweep_dir} is not a sweep folder (no sweep.json)",
                            hint="give the --dir used with `iodiag sweep run` or `submit`")
    try:
        grid = list(json.loads(meta_path.read_text()).get("grid", {}))
    except (OSError, ValueError, AttributeError) as exc:
        raise InputUnreadable(f"{meta_path}: cannot be read as a sweep record ({exc})",
                              hint="the sweep folder is damaged; re-run `iodiag sweep run` into a new --dir") from None
    if axis is not None and axis not in grid:
        raise UsageError(f"--axis {axis}: not a parameter of this sweep's grid",
                         hint="grid parameters: " + (", ".join(grid) or "(none)"))
    import os

    if not os.access(sweep_dir, os.W_OK):
        raise UsageError(f"{sweep_dir}: cannot write summary.csv{' and plots' if plots else ''} there (permission denied)",
                         hint="copy the sweep folder somewhere writable")
    return grid


def _scaling_findings(df) -> tuple[list, int, list[str], list[dict]]:
    """weak-scaling-loss over the runs' iodiag jobs (when the runs were recorded as jobs), and the loss of each
    scale by component (analyzers/weakloss.py)."""
    if "iodiag_job" not in df.columns:
        return [], 0, ["runs were not recorded as iodiag jobs: no I/O diagnosis of the scaling (run the sweep where `iodiag run` works)"], []
    from ..analyzers.detectors.scaling import compare_scaling
    from ..analyzers.job import load_job_record
    from ..analyzers.weakloss import weak_loss
    from ..errors import IodiagError
    from ..jobs.store import find_job
    from ..recommend.rules import advise

    profiles, notes = [], []
    ok = df[df["status"] == "succeeded"] if "status" in df.columns else df
    for job_id in sorted({str(j) for j in ok["iodiag_job"].dropna() if str(j)}):
        try:
            profiles.append(load_job_record(find_job(job_id)))
        except IodiagError as exc:
            notes.append(f"job {job_id} not diagnosed: {exc}")
    loss = weak_loss(profiles)
    if profiles and not loss:
        notes.append("no loss by component: it needs Dask jobs (a task stream) at two or more worker counts")
    return advise(compare_scaling(profiles)), len(profiles), notes, loss
