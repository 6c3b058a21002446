"""The library's front door for the command line: keyword-only functions that take what a user typed and return
data (profiles, findings, report dicts).  They print nothing and never exit; ``cli/`` parses arguments, calls one
of these, renders the result and turns errors into exit codes (spaCy's CLI is the model).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable

from .config import Config
from .errors import InputNotFound, UsageError
from .findings import FINDING_IDS, Finding
from .profile import JobProfile


@dataclass
class Loaded:
    profile: JobProfile
    home: Path  # where outputs of this job go by default (its job folder, or the logs' folder)


def load_target(*, target: str, log_tree: str | None = None, pick: str | None = None, take_all: bool = False,
                config: Config | None = None, progress: Callable[[int], None] | None = None,
                on_logs: Callable[[int], None] | None = None,
                while_reading: Callable[[], None] | None = None, prefetched=None) -> Loaded:
    """TARGET (a Darshan log, a folder of logs, a scheduler job id in a site tree, or an iodiag job id / name /
    prefix / 'last') loaded into a profile.  ``on_logs(n)`` is called with the number of logs before reading
    them (a caller may start a progress bar), ``progress(k)`` as logs are read; ``while_reading()`` is run while
    the first log is decoded in its reader process (work that does not need the profile); ``prefetched`` is a
    reader already started on TARGET (``readers.isolate.prefetch``), adopted when TARGET turns out to be that log."""
    from .analyzers.load import load_job
    from .analyzers.locate import resolve_target

    cfg = config or Config()
    logset = resolve_target(target, log_tree=log_tree, pick=pick, take_all=take_all, config=cfg)
    if logset is None:
        try:
            from .analyzers.job import load_job_record
            from .jobs.store import find_job
        except ImportError:
            raise InputNotFound(f"{target}: no such file, folder or job",
                                hint="give a Darshan log, a folder of logs, or a scheduler job id with --log-tree") from None
        record = find_job(target)
        return Loaded(load_job_record(record, config=cfg), Path(record.path))
    if on_logs is not None:
        on_logs(len(logset.paths))
    prof = load_job(logset.paths, config=cfg, job_id=logset.job_id, progress=progress, while_reading=while_reading,
                    prefetched=prefetched)
    first = Path(logset.paths[0])
    return Loaded(prof, first.parent if first.is_file() else first)


def with_mutes(config: Config, mute: list[str] | tuple[str, ...]) -> Config:
    """The configuration with more finding ids muted; an unknown id is a usage error naming the known ones."""
    unknown = [m for m in mute if m not in FINDING_IDS]
    if unknown:
        raise UsageError(f"--mute {unknown[0]}: not a finding id", hint="known ids: " + ", ".join(FINDING_IDS))
    if not mute:
        return config
    return replace(config, report=replace(config.report, mute=tuple(config.report.mute) + tuple(mute)))


def diagnose_report(*, profile: JobProfile, config: Config, obfuscate: bool = False,
                    home: Path | None = None) -> tuple[list[Finding], dict[str, Any]]:
    """Findings and the JSON-able report dict (schema iodiag.report/1) of a loaded profile, with the
    recommendations (``recommendations``: rules, and the shipped tree when one is installed and valid; a missing
    or stale model becomes an abstention there, not an error)."""
    from .reports.json_report import build_report

    adv = advise_profile(profile=profile, config=config, home=home, strict=False)
    findings = adv.findings
    report = build_report(profile, findings, recommendations=adv.recommendations)
    if obfuscate:
        from .reports.obfuscate import obfuscate_report

        report = obfuscate_report(report)
    return findings, report


@dataclass
class Advice:
    """A job's findings and what to change, with the workload parameters the advice was based on."""

    profile: JobProfile
    findings: list[Finding]
    recommendations: list[Any]  # recommend.Recommendation, best first
    params: dict[str, Any] | None  # the workload's parameters (None: not recorded, measured features only)
    workload: str | None  # an iodiag workload's name, when the job ran one
    record: Any = None  # the jobs.store.JobRecord when the target is an iodiag job


def job_record_at(home: Path | None):
    """The iodiag job recorded in folder ``home`` (None when it is not a job folder)."""
    if home is None or not (Path(home) / "job.json").is_file():
        return None
    from .jobs.store import read_job

    return read_job(home)


def advise_profile(*, profile: JobProfile, config: Config, home: Path | None = None, model_path: str | None = None,
                   strict: bool = False) -> Advice:
    """Findings with the rules' advice, and the recommendations (tree + rules, reconciled).  ``strict``: a
    missing, stale or incompatible model is an error (``iodiag recommend``) instead of an abstention (reports)."""
    from .recommend.engine import load_tree, recommend, reconcile
    from .recommend.rules import diagnose_with_advice

    findings = diagnose_with_advice(profile, config)
    record = job_record_at(home)
    workload, params = None, None
    if record is not None and record.data.get("command"):
        from .jobs.verify import parse_params

        workload, params, _ = parse_params(record.data["command"])
        params = params or None
    model, why = load_tree(model_path, strict=strict)
    recs = recommend(profile, findings=findings, config=config, params=params, model=model, model_error=why)
    from .recommend.site import apply_site_advice

    # the site config's advice (iodiag site defaults) joins the rules' text of the findings it concerns
    return Advice(profile, apply_site_advice(reconcile(findings, recs), config, profile), recs, params, workload, record)


def parse_sets(items: list[str] | tuple[str, ...]) -> tuple[dict[str, Any], dict[str, str]]:
    """``--set`` values: ``--flag=value`` / ``flag=value`` (a command-line flag) or ``NAME=value`` in capitals
    (an environment variable)."""
    args: dict[str, Any] = {}
    env: dict[str, str] = {}
    for item in items:
        if "=" not in item:
            raise UsageError(f"--set {item}: expected name=value", hint="e.g. --set chunks=24,10,90,180 or "
                                                                      "--set OMP_NUM_THREADS=2")
        k, v = item.split("=", 1)
        k = k.strip()
        if k.isupper() and not k.startswith("-"):
            env[k] = v
        else:
            args["--" + k.lstrip("-").replace("_", "-")] = v
    return args, env


def verify_job(*, target: str, config: Config, reps: int = 5, sets: list[str] | tuple[str, ...] = (),
               model_path: str | None = None, progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """``iodiag verify JOB``: re-run the job's workload as recorded and with the top recommendation (or the
    ``--set`` settings) applied, interleaved, and measure the speedup (schema iodiag.verify/1)."""
    from .jobs.store import find_job
    from .jobs.verify import MIN_REPS, command_of, plan_verify, run_verify
    from .reports.verify import verify_result

    if reps < MIN_REPS:
        raise UsageError(f"--reps {reps}: at least {MIN_REPS} runs per side are needed for a band",
                         hint="use --reps 5 or more")
    record = find_job(target)
    cmd = command_of(record)
    if sets:
        args, env = parse_sets(sets)
        rec, prepare = None, []
    else:
        adv = advise_profile(profile=load_target(target=record.id, config=config).profile, config=config,
                             home=Path(record.path), model_path=model_path, strict=model_path is not None)
        rec = next((r for r in adv.recommendations if r.abstain is None
                    and any(c.kind in ("arg", "env") for c in r.changes)), None)
        if rec is None:
            have = [r for r in adv.recommendations if r.abstain is None]
            raise UsageError(f"job {record.id}: no recommendation changes a flag or variable of its command"
                             + (f" (the top one, {have[0].id}, is {', '.join(c.kind for c in have[0].changes) or 'text only'})"
                                if have else " (no recommendation at all)"),
                             hint="verify a setting by hand with --set name=value")
        args = {c.name: c.value for c in rec.changes if c.kind == "arg"}
        env = {c.name: str(c.value) for c in rec.changes if c.kind == "env"}
        prepare = [c.text for c in rec.changes if c.kind == "shell" and c.name == "rechunk"]
    plan = plan_verify(cmd, job=record.id, args=args, env=env, prepare=prepare)
    runs = run_verify(plan, reps=reps, progress=progress)
    return verify_result(runs, recommendation=rec, sets=list(sets))
