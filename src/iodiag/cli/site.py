"""`iodiag site ingest` and `iodiag site report`: a site's Darshan archive, on Dask."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from ..units import fmt_seconds
from .app import app
from .common import guarded

site_app = typer.Typer(
    help="Site analysis: ingest a Darshan archive (YYYY/M/D tree) in parallel, then report what hurts the site.\n\n"
    "Examples:\n\n"
    "  iodiag site ingest /lus/darshan-logs --out site.parquet\n\n"
    "  iodiag site ingest /lus/darshan-logs --out site.parquet --scheduler tcp://head:8786\n\n"
    "  iodiag site ingest /lus/darshan-logs --out site.parquet --cluster slurm --jobs 8 --queue debug\n\n"
    "  iodiag site report site.parquet --html site.html\n\n"
    "  iodiag site report site.parquet --json > site.json\n\n"
    "  iodiag site defaults site.parquet --sweep sweeps/read-chunks --toml site.toml",
    no_args_is_help=True,
    rich_markup_mode=None,
)
app.add_typer(site_app, name="site")


INGEST_SCHEMA, REPORT_SCHEMA, DEFAULTS_SCHEMA = "iodiag.site-ingest/1", "iodiag.site-report/1", "iodiag.site-defaults/1"


@site_app.command("ingest")
@guarded(schema=INGEST_SCHEMA)
def ingest_cmd(
    archive: Path = typer.Argument(..., help="root of the Darshan log tree (holds YYYY/M/D/ folders)"),
    out: Path = typer.Option(..., "--out", "-o", help="site dataset to create or update (a directory of parquet parts)"),
    scheduler: Optional[str] = typer.Option(None, "--scheduler", help="address of a running Dask scheduler (e.g. one started by dask-jobqueue on the batch system)"),
    workers: Optional[int] = typer.Option(None, "--workers", "-n", help="local worker processes (default: one per core); 0 reads in this process without Dask"),
    cluster: str = typer.Option("local", "--cluster", help="local, or slurm/lsf/pbs: Dask workers as batch jobs through dask-jobqueue (the archive must be on a file system the compute nodes see)"),
    jobs: int = typer.Option(1, "--jobs", help="--cluster: worker jobs to submit"),
    cores: int = typer.Option(1, "--cores", help="--cluster: threads per worker job (each reads logs in its own process)"),
    memory: str = typer.Option("4GiB", "--memory", help="--cluster: memory per worker job"),
    walltime: str = typer.Option("01:00:00", "--walltime", help="--cluster: wall time per worker job"),
    queue: Optional[str] = typer.Option(None, "--queue", help="--cluster: queue / partition"),
    account: Optional[str] = typer.Option(None, "--account", help="--cluster: account / project to charge"),
    job_logs: Optional[Path] = typer.Option(None, "--job-logs", help="--cluster: folder for the worker jobs' output (default: the current folder)"),
    config: Optional[Path] = typer.Option(None, "--config", help="TOML file overriding thresholds ([site] batch_logs, modules, ...)"),
    json_out: bool = typer.Option(False, "--json", help="print the run summary as JSON"),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="no progress bar"),
) -> None:
    """Read every new log of ARCHIVE into OUT: one row per job and per program, plus an errors table.

    A second run reads only logs that are new or changed.  Damaged logs never
    stop the run; they land in the errors table with their cause.

    Examples:

      iodiag site ingest /lus/darshan-logs --out site.parquet --workers 8

      iodiag site ingest /lus/darshan-logs --out site.parquet --scheduler tcp://head:8786

      iodiag site ingest /lus/darshan-logs --out site.parquet --cluster slurm --jobs 8 --queue debug --walltime 02:00:00
    """
    import json

    from ..config import load_config
    from ..site.ingest import check_dataset_path, ingest_archive, jobqueue_options
    from .common import check_positive

    check_positive(workers, "--workers", zero=True)
    for value, option in ((jobs, "--jobs"), (cores, "--cores")):
        check_positive(value, option)
    if job_logs is not None and job_logs.exists() and not job_logs.is_dir():
        from ..errors import UsageError

        raise UsageError(f"--job-logs {job_logs}: is a file, not a folder", hint="give a folder for the worker jobs' output")
    check_dataset_path(out)
    if cluster != "local":  # what the batch system would refuse only once the first worker job is submitted
        _check_job_resources(memory, walltime)
    where_opts = dict(cluster=cluster, cluster_options=jobqueue_options(
        jobs=jobs, cores=cores, memory=memory, walltime=walltime, queue=queue, account=account,
        log_directory=str(job_logs) if job_logs else None))
    cfg = load_config(config)
    if quiet or json_out or not sys.stderr.isatty():
        summary = ingest_archive(archive, out, config=cfg, scheduler=scheduler, workers=workers, **where_opts)
    else:
        summary = _ingest_with_progress(archive, out, cfg, scheduler, workers, where_opts)
    d = summary.to_dict()
    if json_out:
        print(json.dumps({"schema": INGEST_SCHEMA, **d}, indent=2))
        return
    _print_ingest_summary(d, out, cluster)


def _ingest_with_progress(archive: Path, out: Path, cfg, scheduler: Optional[str], workers: Optional[int],
                          where_opts: dict):
    """``ingest_archive`` with a progress bar of logs read on stderr; its summary."""
    from ..site.ingest import ingest_archive

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    from .common import rich_console

    with Progress(TextColumn("[progress.description]{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TextColumn("logs"), TimeElapsedColumn(), TimeRemainingColumn(), transient=False,
                  console=rich_console(stderr=True)) as bar:
        task = bar.add_task("ingest", total=None)

        def progress(kind: str, n: int) -> None:
            if kind == "total":
                bar.update(task, total=n)
            else:
                bar.advance(task, n)

        return ingest_archive(archive, out, config=cfg, scheduler=scheduler, workers=workers, progress=progress,
                              **where_opts)


def _print_ingest_summary(d: dict, out: Path, cluster: str) -> None:
    """What a run read and wrote, where it ran and how fast; the command that reports on the dataset."""
    rate = f", {d['logs_per_s']:.0f} logs/s" if d["logs_per_s"] else ""
    n = d["workers"]
    where = "in this process" if n == 0 else f"on {n} Dask worker thread{'s' if n != 1 else ''}"
    if cluster != "local" and n:
        where += f" ({cluster} jobs)"
    from ..reports.textout import wrap_plain
    from .common import terminal_width

    for line in wrap_plain(f"{out}: run {d['run']}: read {d['logs_read']} logs ({d['logs_skipped']} already ingested) "
                           f"-> {d['jobs']} jobs, {d['programs']} programs, {d['errors']} damaged-log entries "
                           f"in {fmt_seconds(d['seconds'])} {where}{rate}", terminal_width(), hang=2):
        print(line)
    print("the report" + (" (damaged logs listed at its end)" if d["errors"] else "") + ":")
    print(f"  iodiag site report {out}")


def _check_job_resources(memory: str, walltime: str) -> None:
    import re

    from ..errors import UsageError

    if not re.fullmatch(r"\s*\d+(\.\d+)?\s*([kKMGTP]i?B?|[kKMGTP]|B)?\s*", memory or ""):
        raise UsageError(f"--memory {memory}: not an amount of memory", hint="e.g. --memory 4GiB or --memory 8GB")
    if not re.fullmatch(r"(\d+-)?\d{1,3}(:\d{2}){0,2}", walltime or ""):
        raise UsageError(f"--walltime {walltime}: not a wall time", hint="e.g. --walltime 01:30:00 (HH:MM:SS) or 2-00:00:00")


@site_app.command("report")
@guarded(schema=REPORT_SCHEMA)
def report_cmd(
    dataset: Path = typer.Argument(..., help="site dataset written by iodiag site ingest"),
    json_out: bool = typer.Option(False, "--json", help="print the report as JSON"),
    html: Optional[Path] = typer.Option(None, "--html", help="--html [PATH]: also write an HTML report (default: iodiag-site-report.html here)"),
    top: int = typer.Option(10, "--top", help="rows in the top users / executables tables"),
    site_config: Optional[Path] = typer.Option(None, "--site-config", help="site config (iodiag site defaults --toml; default $IODIAG_SITE_CONFIG): its advice words the recommendations"),
    color: Optional[bool] = typer.Option(None, "--color/--no-color", help="colour the text report (default: on a terminal, unless $NO_COLOR is set)"),
) -> None:
    """What to change at the site: recommendations ranked by recoverable core-hours, the users and
    executables to contact first, finding prevalence, op sizes, files per job, trends, damaged logs.

    Examples:

      iodiag site report site.parquet

      iodiag site report site.parquet --json | jq '.prevalence[0]'
    """
    from ..config import load_config
    from ..site.aggregate import site_report
    from ..site.render import render_html, render_json, render_text
    from .common import atomic_write, check_output, check_positive, terminal_width, use_color

    check_positive(top, "--top")
    if html is not None:
        check_output(html, "HTML report", option="--html")
    rep = site_report(dataset, top_n=top, config=load_config(site_config=site_config))
    if html is not None:
        atomic_write(html, render_html(rep))
    if json_out:
        print(render_json(rep))
        return
    print(render_text(rep, width=terminal_width(), color=use_color(color)), end="")
    if html is not None:
        print(f"HTML report: {html}")


@site_app.command("defaults")
@guarded(schema=DEFAULTS_SCHEMA)
def defaults_cmd(
    dataset: Path = typer.Argument(..., help="site dataset written by iodiag site ingest (the workload mix)"),
    sweep: list[Path] = typer.Option([], "--sweep", "-s", help="sweep folder or results table (iodiag sweep collect; or any table with scenario, setting, time_s columns); repeatable, tables of one tunable are joined"),
    toml: Optional[Path] = typer.Option(None, "--toml", help="write the proposed site config here (TOML read by --site-config / $IODIAG_SITE_CONFIG)"),
    name: Optional[str] = typer.Option(None, "--name", help="the site's name, shown with its advice in users' reports"),
    weight: str = typer.Option("io", "--weight", help="what a job weighs: io (core-hours spent in the I/O the tunable affects), core-hours, jobs"),
    mean: str = typer.Option("harmonic", "--mean", help="the mean the default is chosen by: harmonic (punishes a bad case most), geometric, arithmetic"),
    uniform: bool = typer.Option(False, "--uniform", help="weigh the sweep's scenarios alike instead of by the site's jobs"),
    scenario: Optional[str] = typer.Option(None, "--scenario", help="column of the scenario (tables not from iodiag sweep)"),
    setting: Optional[str] = typer.Option(None, "--setting", help="column of the setting"),
    time: Optional[str] = typer.Option(None, "--time", help="column of the time in seconds (lower is better)"),
    tunable: Optional[str] = typer.Option(None, "--tunable", help="name of the tunable (default: from the sweep kind)"),
    json_out: bool = typer.Option(False, "--json", help="print the result as JSON"),
) -> None:
    """Site defaults: for each tunable the sweeps measured, the default-vs-best table (Kunkel) weighted by the
    site's own jobs, a depth-4 tree over those jobs (its rules go to users where it beats every single
    default), and a proposed site config (TOML).

    The site's jobs are mapped onto the sweep's scenarios from their counters (docs/site-defaults.md).

    Examples:

      iodiag site defaults site.parquet --sweep sweeps/read-chunks --toml site.toml --name "Cluster A"

      iodiag site defaults site.parquet --sweep stripes.csv --scenario pattern --setting stripe_count --time t_write_s

      iodiag site defaults site.parquet --sweep sweeps/read-chunks --json | jq '.tunables[0].default'
    """
    import time as _time

    from ..site.defaults import site_defaults
    from ..site.render import render_defaults_text, render_json, render_site_toml
    from .common import atomic_write, check_output, terminal_width

    if toml is not None:
        check_output(toml, "site config", option="--toml")
    res = site_defaults(dataset, sweep, weight=weight, mean=mean, uniform=uniform, site_name=name,
                        scenario=scenario, setting=setting, time=time, tunable=tunable)
    if toml is not None:
        atomic_write(toml, render_site_toml(res, generated=_time.strftime("%Y-%m-%d", _time.gmtime())))
    if json_out:  # the trees' models included (recommend.tree.Tree.from_dict reads them)
        print(render_json({"schema": DEFAULTS_SCHEMA, **res}))
        return
    print(render_defaults_text(res, width=terminal_width()))
    if toml is not None:
        print("site config written; use it with:")
        print(f"  iodiag report LOG --site-config {toml}")
