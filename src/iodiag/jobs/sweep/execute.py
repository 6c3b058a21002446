"""Run a plan here (one run after another) or submit it to a batch system.

Per run folder: ``run.json`` (what the run is), ``run.sh`` (its script),
``SUCCESS``/``FAILED`` markers written by the script, ``results.json`` written
by the workload, ``stdout.log``/``stderr.log``, ``submit.json`` (scheduler and
job id of the last submission) and ``attempts.jsonl`` (every attempt).

Re-running a sweep skips runs with ``SUCCESS`` and retries failed ones; on a
batch system a run whose job is still queued or running is left alone and its
job id is reused for dependencies; a run that was submitted but neither marked
nor alive any more (cancelled, never started because a dependency failed) is
submitted again.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ...errors import IodiagError, JobStoreError
from .plan import Plan, Run
from .schedulers import FAILED, SCRIPT, SUCCESS, Dep, Scheduler, get_scheduler, script_body

Progress = Callable[[str, Run, str], None]  # (event, run, detail)


def _iodiag_src() -> str:
    import iodiag

    return str(Path(iodiag.__file__).resolve().parent.parent)


def _write_json(path: Path, data) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str) + "\n")
    os.replace(tmp, path)


def _append_attempt(run: Run, entry: dict) -> None:
    with open(run.dir / "attempts.jsonl", "a") as f:
        f.write(json.dumps(entry, default=str) + "\n")


def status(run: Run) -> str:
    """succeeded | failed | submitted | new (markers only; no scheduler query)."""
    if (run.dir / SUCCESS).exists():
        return "succeeded"
    if (run.dir / FAILED).exists():
        return "failed"
    if (run.dir / "submit.json").exists():
        return "submitted"
    return "new"


def exit_code(run: Run) -> int | None:
    f = run.dir / FAILED
    if f.exists():
        try:
            return int(f.read_text().strip())
        except ValueError:
            return None
    return 0 if (run.dir / SUCCESS).exists() else None


def _env(run: Run) -> dict[str, str]:
    return {"PYTHONPATH": _iodiag_src(), "IODIAG_RESULTS": str(run.dir / "results.json")}


def prepare_dirs(plan: Plan) -> None:
    try:
        plan.sweep_dir.mkdir(parents=True, exist_ok=True)
        for r in plan.all:
            r.dir.mkdir(parents=True, exist_ok=True)
            _write_json(r.dir / "run.json", r.to_json())
        _write_json(plan.sweep_dir / "sweep.json", {
            "name": plan.spec.name, "workload": plan.spec.workload, "source": plan.spec.source,
            "launcher": plan.launcher, "notes": plan.notes, "grid": plan.spec.grid,
            "repetitions": plan.spec.repetitions,
            "runs": [r.name for r in plan.runs], "prepare": [r.name for r in plan.prepare]})
    except OSError as exc:
        raise JobStoreError(f"cannot write sweep folder {plan.sweep_dir}: {exc.strerror}",
                            hint="choose a writable --dir") from None


@contextlib.contextmanager
def _locked(plan: Plan):
    """One `sweep run`/`submit` per sweep folder at a time (flock on .lock)."""
    import fcntl

    plan.sweep_dir.mkdir(parents=True, exist_ok=True)
    with open(plan.sweep_dir / ".lock", "w") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise JobStoreError(f"another iodiag sweep run/submit is working on {plan.sweep_dir}",
                                hint="wait for it to finish, or use another --dir") from None
        yield


@dataclass
class Outcome:
    ran: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    in_flight: list[str] = field(default_factory=list)
    job_ids: dict[str, str] = field(default_factory=dict)
    dependencies: dict[str, list[str]] = field(default_factory=dict)

    def to_json(self) -> dict:
        return self.__dict__.copy()


# ------------------------------------------------------------------ local


def run_local(plan: Plan, *, retry_failed: bool = True, progress: Progress | None = None) -> Outcome:
    """Run every run here, one after another, through the same run.sh a batch system gets."""
    with _locked(plan):
        return _run_local(plan, retry_failed=retry_failed, progress=progress)


def _run_local(plan: Plan, *, retry_failed: bool, progress: Progress | None) -> Outcome:
    prepare_dirs(plan)
    out = Outcome()
    failed_prepare: set[str] = set()
    local = Scheduler()
    for run in plan.all:
        st = status(run)
        if st == "succeeded" or (st == "failed" and not retry_failed):
            out.skipped.append(run.name)
            progress and progress("skip", run, st)
            continue
        if failed_prepare & set(run.depends_on):
            out.failed.append(run.name)
            progress and progress("blocked", run, ",".join(sorted(failed_prepare & set(run.depends_on))))
            continue
        script = run.dir / SCRIPT
        script.write_text(local.script(job_name=run.name, run_dir=run.dir, res=plan.spec.resources,
                                       argv=run.argv, env=_env(run)))
        progress and progress("start", run, "")
        t0 = time.time()
        with open(run.dir / "stdout.log", "wb") as so, open(run.dir / "stderr.log", "wb") as se:
            rc = subprocess.call(["bash", str(script)], stdout=so, stderr=se, stdin=subprocess.DEVNULL)
        _append_attempt(run, {"where": "local", "started": t0, "wall_s": time.time() - t0, "exit_code": rc})
        if rc == 0:
            out.ran.append(run.name)
        else:
            out.failed.append(run.name)
            if run.kind == "prepare":
                failed_prepare.add(run.name)
        progress and progress("done", run, f"exit {rc}")
    return out


# ------------------------------------------------------------------ batch


def _alive(sched: Scheduler, job_id: str, timeout: float) -> bool:
    try:
        p = subprocess.run(sched.alive_argv(job_id), capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return sched.is_alive(p.returncode, p.stdout)


def submit(plan: Plan, *, scheduler: str, dry_run: bool = False, retry_failed: bool = True,
           timeout_s: float = 60.0, progress: Progress | None = None) -> Outcome:
    """Write one script per run and submit them all at once, chained with dependencies.

    Prepare steps come first; each run depends on its prepare step (afterok) and
    on the previous run of the chain (``[sweep] chain``: afterany keeps one
    failure from blocking the rest; afterok stops the chain there)."""
    sched = get_scheduler(scheduler)
    if not dry_run:
        sched.check_available()  # before anything is written or submitted
    with _locked(plan):
        return _submit(plan, sched, dry_run=dry_run, retry_failed=retry_failed, timeout_s=timeout_s,
                       progress=progress)


def _submit(plan: Plan, sched: Scheduler, *, dry_run: bool, retry_failed: bool, timeout_s: float,
            progress: Progress | None) -> Outcome:
    prepare_dirs(plan)
    out = Outcome()
    ids: dict[str, str] = {}  # name -> job id this pass (new or still in flight)
    chain_kind = plan.spec.chain
    previous: str | None = None
    for run in plan.all:
        st = status(run)
        if st == "succeeded" or (st == "failed" and not retry_failed):
            out.skipped.append(run.name)
            progress and progress("skip", run, st)
            if run.kind == "run":
                previous = None
            continue
        if st == "submitted" and not dry_run:
            info = json.loads((run.dir / "submit.json").read_text())
            if info.get("scheduler") == sched.name:
                if _alive(sched, info["job_id"], timeout_s):
                    ids[run.name] = info["job_id"]
                    out.in_flight.append(run.name)
                    progress and progress("in-flight", run, info["job_id"])
                    if run.kind == "run":
                        previous = run.name
                    continue
                # queued but never runnable (e.g. afterok on a failed run), or gone: make sure it is gone
                subprocess.run(sched.cancel_argv(info["job_id"]), capture_output=True, timeout=timeout_s)
        deps = [Dep(ids[d], "afterok") for d in run.depends_on if d in ids]
        if run.kind == "run" and previous and chain_kind != "none" and previous in ids:
            deps.append(Dep(ids[previous], chain_kind))
        script = run.dir / SCRIPT
        script.write_text(sched.script(job_name=run.name, run_dir=run.dir, res=plan.spec.resources,
                                       argv=run.argv, env=_env(run)))
        argv = sched.submit_argv(script, deps)
        out.dependencies[run.name] = [f"{d.kind}:{d.job_id}" for d in deps]
        if dry_run:
            ids[run.name] = f"<{run.name}>"
            progress and progress("would-submit", run, " ".join(argv))
        else:
            stdin = sched.submit_stdin(script)
            for stale in (SUCCESS, FAILED):  # before submitting: a fast job must not find old markers
                (run.dir / stale).unlink(missing_ok=True)
            try:
                with open(stdin, "rb") if stdin else open(os.devnull, "rb") as fin:
                    p = subprocess.run(argv, stdin=fin, capture_output=True, text=True, timeout=timeout_s,
                                       cwd=run.dir)
            except subprocess.TimeoutExpired:
                raise IodiagError(f"{argv[0]} did not answer within {timeout_s:.0f} s while submitting {run.name}",
                                  hint="re-run the same submit later: submitted runs are kept") from None
            if p.returncode != 0:
                raise IodiagError(f"{argv[0]} refused {run.name} (exit {p.returncode}): "
                                  f"{(p.stderr or p.stdout).strip()[:300]}",
                                  hint="runs submitted so far are kept; fix the cause and submit again")
            job_id = sched.parse_job_id(p.stdout)
            ids[run.name] = job_id
            _write_json(run.dir / "submit.json", {"scheduler": sched.name, "job_id": job_id, "argv": argv,
                                                  "submitted": time.time()})
            _append_attempt(run, {"where": sched.name, "job_id": job_id, "submitted": time.time(),
                                  "dependencies": out.dependencies[run.name]})
            progress and progress("submitted", run, job_id)
        out.ran.append(run.name)
        out.job_ids[run.name] = ids[run.name]
        if run.kind == "run":
            previous = run.name
    if not dry_run:
        _write_json(plan.sweep_dir / "submitted.json", {"scheduler": sched.name, **out.to_json()})
    return out


def wait(plan: Plan, *, timeout_s: float, poll_s: float = 1.0) -> dict[str, str]:
    """Wait until every run has a marker (for tests and `--wait`); return statuses."""
    deadline = time.monotonic() + timeout_s
    while True:
        st = {r.name: status(r) for r in plan.all}
        if all(v in ("succeeded", "failed") for v in st.values()) or time.monotonic() > deadline:
            return st
        time.sleep(poll_s)
