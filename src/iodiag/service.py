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
                on_logs: Callable[[int], None] | None = None) -> Loaded:
    """TARGET (a Darshan log, a folder of logs, a scheduler job id in a site tree, or an iodiag job id / name /
    prefix / 'last') loaded into a profile.  ``on_logs(n)`` is called with the number of logs before reading
    them (a caller may start a progress bar), ``progress(k)`` as logs are read."""
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
    prof = load_job(logset.paths, config=cfg, job_id=logset.job_id, progress=progress)
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


def diagnose_report(*, profile: JobProfile, config: Config, obfuscate: bool = False) -> tuple[list[Finding], dict[str, Any]]:
    """Findings and the JSON-able report dict (schema iodiag.report/1) of a loaded profile."""
    from .recommend.rules import diagnose_with_advice
    from .reports.json_report import build_report

    findings = diagnose_with_advice(profile, config)
    report = build_report(profile, findings)
    if obfuscate:
        from .reports.obfuscate import obfuscate_report

        report = obfuscate_report(report)
    return findings, report
