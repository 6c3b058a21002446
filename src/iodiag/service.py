"""The library's front door for the command line: keyword-only functions that take what a user typed and return
data (profiles, findings, report dicts).  They print nothing and never exit; ``cli/`` parses arguments, calls one
of these, renders the result and turns errors into exit codes (spaCy's CLI is the model).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable

from .config import Config
from .errors import UsageError
from .findings import Finding
from .profile import JobProfile


@dataclass
class Loaded:
    profile: JobProfile
    home: Path  # where outputs of this job go by default (its job folder, or the logs' folder)


def load_target(*, target: str, log_tree: str | None = None, pick: str | None = None, take_all: bool = False,
                config: Config | None = None, progress: Callable[[int], None] | None = None,
                on_logs: Callable[[int], None] | None = None,
                while_reading: Callable[[], None] | None = None, prefetched=None) -> Loaded:
    """TARGET (a Darshan log, a folder of logs, a scheduler job id in a site tree, an iodiag job folder, or an
    iodiag job id / name / prefix / 'last': ``analyzers.locate.resolve``, the one dispatcher) loaded into a
    profile.  ``on_logs(n)`` is called with the number of logs before reading them (a caller may start a progress
    bar), ``progress(k)`` as logs are read; ``while_reading()`` is run while the first log is decoded in its reader process (work that does not need the profile); ``prefetched`` is a
    reader already started on TARGET (``readers.isolate.prefetch``), adopted when TARGET turns out to be that log."""
    from .analyzers.load import load_job
    from .analyzers.locate import resolve

    cfg = config or Config()
    got = resolve(target, log_tree=log_tree, pick=pick, take_all=take_all, config=cfg)
    if got.kind == "job":
        from .analyzers.job import load_job_record

        return Loaded(load_job_record(got.record, config=cfg), Path(got.record.path))
    logset = got.logs
    if on_logs is not None:
        on_logs(len(logset.paths))
    prof = load_job(logset.paths, config=cfg, job_id=logset.job_id, progress=progress, while_reading=while_reading,
                    prefetched=prefetched)
    first = Path(logset.paths[0])
    return Loaded(prof, first.parent if first.is_file() else first)


def with_mutes(config: Config, mute: list[str] | tuple[str, ...]) -> Config:
    """The configuration with more finding ids muted; an unknown id is a usage error naming the known ones."""
    from .analyzers.detectors import FINDING_IDS

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
    from .analyzers.report import build_report

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


def parse_sets(items: list[str] | tuple[str, ...], cmd=None) -> tuple[dict[str, Any], dict[str, str], dict[str, Any]]:
    """``--set`` values as (flags, environment variables, settings applied inside the program).  ``NAME=value``
    in capitals is an environment variable; ``name=value`` is the command-line flag ``--name`` when the recorded
    command line has it (an iodiag workload: when it takes it), else, for a Python program, one of the settings
    the preload applies (chunks, workers, threads, compressor, zarr_format), else a flag (then refused, with the
    ways to change it)."""
    from .jobs.verify import PRELOAD_SETTINGS, known_flags, is_python

    args: dict[str, Any] = {}
    env: dict[str, str] = {}
    overrides: dict[str, Any] = {}
    for item in items:
        if "=" not in item:
            raise UsageError(f"--set {item}: expected name=value", hint="e.g. --set chunks=24,10,90,180 or "
                                                                      "--set OMP_NUM_THREADS=2")
        k, v = item.split("=", 1)
        k = k.strip()
        if k.isupper() and not k.startswith("-"):
            env[k] = v
            continue
        name = k.lstrip("-").replace("-", "_")
        flag = "--" + name.replace("_", "-")
        on_line = cmd is not None and (flag in known_flags(cmd.workload) if cmd.workload else name in cmd.params)
        if cmd is not None and not on_line and not cmd.workload and name in PRELOAD_SETTINGS and is_python(cmd):
            overrides[name] = v
        else:
            args[flag] = v
    return args, env, overrides


def parse_positional(items: list[str] | tuple[str, ...]) -> dict[int, str]:
    """``--arg N=VALUE`` values: N -> VALUE."""
    out: dict[int, str] = {}
    for item in items:
        n, eq, v = item.partition("=")
        if not eq or not n.strip().isdigit():
            raise UsageError(f"--arg {item}: expected N=VALUE (N the position in the program's argv, from 1)",
                             hint="e.g. --arg 3=24 replaces the program's third argument with 24")
        out[int(n)] = v
    return out


def _store_rewrite(rec, arrays) -> tuple[str, str, str] | None:
    """(command, store, copy) making a rewritten copy of the store a read job read, for a recommendation that is a
    store layout with concrete chunks (the trained tree's read advice: chunks, compressor, Zarr format); None when
    it is not one, or the job's arrays are not known."""
    import shlex

    ch = rec.settings.get("chunks")
    zarrs = [a for a in arrays or () if ".zarr" in str(a.get("path"))]
    if "chunk_layout" not in rec.settings or not ch or not zarrs:
        return None
    store = str(zarrs[0]["path"]).split(".zarr", 1)[0] + ".zarr"  # the largest array's store
    copy = store[: -len(".zarr")] + ".rewritten.zarr"
    cmd = (f"iodiag workload convert --src {shlex.quote(store)} --dst {shlex.quote(copy)} --chunks "
           f"{','.join(str(int(c)) for c in ch)} --compressor {rec.settings.get('compressor', 'none')} "
           f"--zarr-format {int(rec.settings.get('zarr_format', 2))} --cluster sync")
    return cmd, store, copy


def _applicable(rec, cmd, arrays=None) -> dict[str, Any] | None:
    """How verify applies recommendation ``rec`` to the recorded command without editing the program: flags it
    shows, environment variables, MPI-IO hints, a rechunked or rewritten copy of the store (prepared once) the
    program is pointed at, and the xarray/Dask settings the preload applies inside a Python program.  ``arrays``:
    the job's Zarr arrays (``profile.job.arrays``).  None when nothing applies."""
    from .jobs.verify import ARRAY_FILE, PRELOAD_SETTINGS, known_flags, is_python

    takes = (lambda f: f in known_flags(cmd.workload)) if cmd.workload else (lambda f: f[2:].replace("-", "_") in cmd.params)
    args = {c.name: c.value for c in rec.changes if c.kind == "arg" and takes(c.name)}
    env = {c.name: str(c.value) for c in rec.changes if c.kind == "env"}
    hints = {c.name: c.value for c in rec.changes if c.kind == "config" and _is_mpiio_hint(c.name)}
    prepare, overrides = [], {}
    covered = {f[2:].replace("-", "_") for f in args}
    if "chunk_mb" in covered:
        covered.add("chunks")
    py = is_python(cmd) and not cmd.workload
    copies = [(c.text, c.value["src"], c.value["dst"]) for c in rec.changes
              if c.kind == "shell" and c.name == "rechunk" and isinstance(c.value, dict)]
    rewrite = _store_rewrite(rec, arrays)
    if rewrite is not None and not copies:
        copies.append(rewrite)
    for text, src, dst in copies:
        if "--path" in args or py or (rewrite is not None and takes("--path")):
            prepare.append(text)
            if "--path" in args:
                continue
            if takes("--path"):  # iodiag's read workload: its flag
                args["--path"] = dst
            else:  # the program opens the store itself: point it at the copy
                overrides["paths"] = {str(Path(cmd.cwd, src)): str(Path(cmd.cwd, dst))}
    # a store's layout (the rules' "layout", the tree's read advice with its chunk_layout) is a rewrite of the
    # store, not Dask chunks at open: only a prepared copy applies it (above)
    if py and rec.id != "layout" and "chunk_layout" not in rec.settings:
        overrides.update({k: rec.settings[k] for k in PRELOAD_SETTINGS
                          if k in rec.settings and k not in covered and k != "open_once"})
    once = rec.settings.get("open_once")
    if py and isinstance(once, str) and ARRAY_FILE.search(once):
        # a NetCDF/HDF5 file the Python program opens again: the preload keeps its netCDF4/h5py handle open
        overrides["open_once"] = once
    if not (args or env or hints or prepare or overrides):
        return None
    return {"args": args, "env": env, "hints": hints, "prepare": prepare, "overrides": overrides}


def _is_mpiio_hint(name: str) -> bool:
    return bool(name) and (name.startswith(("romio_", "cb_", "ind_", "striping_")) or name in ("collective_buffering",))


def verify_job(*, target: str, config: Config, reps: int = 5, sets: list[str] | tuple[str, ...] = (),
               positional: list[str] | tuple[str, ...] = (), after: str | None = None,
               outputs: list[str] | tuple[str, ...] = (), model_path: str | None = None,
               progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """``iodiag verify JOB``: re-run the job's workload as recorded and with a change applied, interleaved, and
    measure the speedup (schema iodiag.verify/1).  The change: the ``--set`` settings, ``--arg N=VALUE``
    positional values and/or an ``--after`` command when given, else the first recommendation verify can apply
    without editing the program.  ``outputs``: files the caller writes afterwards (checked before the runs)."""
    import shlex

    from .analyzers.locate import resolve
    from .jobs.verify import MIN_REPS, command_of, plan_verify, run_verify
    from .jobs.verify_result import verify_result

    if reps < MIN_REPS:
        raise UsageError(f"--reps {reps}: at least {MIN_REPS} runs per side are needed for a band",
                         hint="use --reps 5 or more")
    got = resolve(target, config=config)
    if got.kind != "job":
        what = {"log": "a Darshan log", "log tree": "a scheduler job's Darshan logs"}.get(got.how, "a folder of Darshan logs")
        raise UsageError(f"{target}: {what}, not an iodiag job: verify re-runs the command a job recorded",
                         hint="record the workload with `iodiag run -- COMMAND`, then verify that job")
    record = got.record
    cmd = command_of(record)
    after_argv = None
    if after is not None:
        try:
            after_argv = shlex.split(after)
        except ValueError as exc:
            raise UsageError(f"--after {after!r}: {exc}", hint="quote the command as the shell would") from None
    pos = parse_positional(positional)
    chosen = None
    hints: dict[str, Any] = {}
    overrides: dict[str, Any] = {}
    if sets or pos or after_argv is not None:
        args, env, overrides = parse_sets(sets, cmd)
        rec, prepare = None, []
    else:
        adv = advise_profile(profile=load_target(target=str(record.path), config=config).profile, config=config,
                             home=Path(record.path), model_path=model_path, strict=model_path is not None)
        have = [r for r in adv.recommendations if r.abstain is None]
        arrays = adv.profile.job.arrays
        pick = next(((r, how) for r in have for how in [_applicable(r, cmd, arrays)] if how is not None), None)
        if pick is None:
            raise UsageError(f"job {record.id}: no recommendation can be applied without editing the program"
                             + (f" (the top one, {have[0].id}, is {', '.join(sorted({c.kind for c in have[0].changes})) or 'text only'})"
                                if have else " (no recommendation at all)"),
                             hint="make the change yourself and give the changed command with --after '...', or "
                                  "a setting with --set name=value, or a positional value with --arg N=VALUE")
        rec, how = pick
        if rec is not have[0]:
            chosen = (f"the top recommendation ({have[0].id}: {have[0].title}) cannot be applied without editing "
                      f"the program; verified the first one that can ({rec.id})")
        args, env, hints, prepare, overrides = how["args"], how["env"], how["hints"], how["prepare"], how["overrides"]
    plan = plan_verify(cmd, job=record.id, args=args, env=env, prepare=prepare, overrides=overrides,
                       positional=pos, after=after_argv, hints=hints, outputs=outputs)
    runs = run_verify(plan, reps=reps, progress=progress)
    by_hand = list(sets) + [f"argv[{n}]={v}" for n, v in sorted(pos.items())] + \
        ([f"after: {after}"] if after is not None else [])
    return verify_result(runs, recommendation=rec, sets=by_hand, chosen=chosen)
