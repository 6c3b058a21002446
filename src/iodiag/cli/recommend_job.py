"""`iodiag recommend JOB`: what to change in a job, as concrete settings, with the rules and the expected gain.

``recommend_job`` is the command body.  On this branch it is registered as ``iodiag advise JOB``; at merge it
becomes ``iodiag recommend JOB`` next to ``iodiag recommend train|evaluate``: create that typer group with
``cls=JobOrSubcommand`` and call ``add_job_command(recommend_app)``.  A Click group cannot take an optional
positional argument before its subcommands (``recommend train`` would read ``train`` as the job), so the group
routes any first word that is not one of its subcommands to a hidden ``job`` subcommand.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

import typer
from typer.core import TyperGroup

from .common import _print_choices, build_profile_for, run_guarded

RECOMMEND_HELP = (
    "What to change in a job: the recommended settings as a concrete change (a flag, an environment variable, "
    "a code snippet or a shell line), the trained tree's rules with this job's path marked, the expected gain "
    "with its uncertainty, and the findings it addresses.\n\n"
    "TARGET is what `iodiag report` takes: an iodiag job id / prefix / 'last', a Darshan log or a folder of "
    "logs.  A job recorded by `iodiag run` also gives its workload parameters; a log alone gets advice from "
    "measured features only (said in the output).\n\n"
    "Examples:\n\n"
    "  iodiag recommend last\n\n"
    "  iodiag recommend run.darshan --json\n\n"
    "  iodiag recommend last --model my-model.json\n\n"
    "  iodiag verify last     (re-run with the top recommendation and measure)"
)


def recommend_job(target: str, *, json_out: bool = False, model: Optional[Path] = None,
                  config_file: Optional[Path] = None, log_tree: Optional[str] = None, job: Optional[str] = None,
                  take_all: bool = False, color: Optional[bool] = None) -> None:
    """The body of `iodiag recommend TARGET` (prints; errors become one line and an exit code)."""

    def body() -> None:
        from ..config import load_config
        from .common import terminal_width, use_color

        if job and take_all:
            from ..errors import UsageError

            raise UsageError(f"--job {job} and --all contradict each other", hint="give one of them")
        from ..reports.advice import render_recommendations
        from ..service import advise_profile

        cfg = load_config(config_file)
        prof, home = build_profile_for(target, log_tree=log_tree, pick=job, take_all=take_all, config=cfg,
                                       progress=not json_out)
        adv = advise_profile(profile=prof, config=cfg, home=home, model_path=str(model) if model else None,
                             strict=model is not None)
        recs = [r.to_dict() for r in adv.recommendations]
        findings = [{"id": f.id, "severity": f.severity, "recommendation": f.recommendation} for f in adv.findings]
        if json_out:
            out = {"schema": "iodiag.recommend/1", "job": prof.job.job_id, "workload": adv.workload,
                   "params": adv.params, "based_on": "workload parameters and measured features" if adv.params
                   else "measured features only", "findings": findings, "recommendations": recs}
            sys.stdout.write(json.dumps(out, indent=2, default=str) + "\n")
            return
        sys.stdout.write(render_recommendations(recs, job=prof.job.job_id, findings=findings, params=adv.params,
                                                color=use_color(color), width=terminal_width(),
                                                recorded=adv.record is not None))

    run_guarded(body, on_ambiguous=_print_choices, json_errors="iodiag.recommend/1" if json_out else False)


class JobOrSubcommand(TyperGroup):
    """A typer group whose first word is a subcommand (``train``, ``evaluate``) or else a job: ``recommend
    last`` runs ``recommend job last``."""

    def parse_args(self, ctx, args):
        if args and args[0] not in self.commands and args[0] not in ("--help", "-h"):
            args = ["job", *args]
        return super().parse_args(ctx, args)


def add_job_command(group: typer.Typer) -> None:
    """Register ``recommend_job`` as the hidden ``job`` subcommand of ``group`` (a typer made with
    ``cls=JobOrSubcommand``)."""
    group.command("job", hidden=True, help=RECOMMEND_HELP)(_job_command)


def _job_command(
    target: str = typer.Argument(..., help="iodiag job folder or job id ('last'), Darshan log or folder of logs."),
    json_out: bool = typer.Option(False, "--json", help="Print the recommendations as JSON (schema iodiag.recommend/1)."),
    model: Optional[Path] = typer.Option(None, "--model", help="A trained model file instead of the shipped one (an error if it is missing, stale or incompatible)."),
    config_file: Optional[Path] = typer.Option(None, "--config", help="TOML file overriding detector thresholds."),
    log_tree: Optional[str] = typer.Option(None, "--log-tree", help="Site archive root laid out as YYYY/M/D/ (or $IODIAG_LOG_TREE)."),
    job: Optional[str] = typer.Option(None, "--job", help="When a folder holds several jobs: the job id."),
    take_all: bool = typer.Option(False, "--all", help="When a folder holds several jobs: all its logs as one job."),
    color: Optional[bool] = typer.Option(None, "--color/--no-color", help="Colour the output (default: on a terminal, unless $NO_COLOR is set)."),
) -> None:
    recommend_job(target, json_out=json_out, model=model, config_file=config_file, log_tree=log_tree, job=job,
                  take_all=take_all, color=color)
