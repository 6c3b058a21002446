"""From a spec to a plan: one Run per grid point × repetition, plus the prepare
steps they depend on, each with its folder, parameters and command line.
Runs are ordered repetition by repetition (every grid point once, then again):
`sweep run` and the batch chain run them interleaved.

Each run's command is ``iodiag run --name <run> [--collector C] -- python -m
iodiag.workloads.<w> <params>`` so that every run becomes an iodiag job; when
``iodiag run`` is not available (launcher ``auto`` on a tree without it) or the
spec asks for ``launcher = "direct"``, the workload is invoked directly and the
plan says so (``Plan.notes``).
"""

from __future__ import annotations

import importlib.util
import itertools
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...errors import ConfigError, UsageError
from .spec import SweepSpec, render, template_names, workload_params


@dataclass
class Run:
    name: str
    kind: str  # "run" or "prepare"
    workload: str
    params: dict[str, Any]  # rendered workload parameters
    grid: dict[str, Any]  # the grid point (empty for prepare steps)
    rep: int
    dir: Path
    argv: list[str]  # the full command line
    depends_on: list[str] = field(default_factory=list)  # names of prepare steps (afterok)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "workload": self.workload, "params": self.params,
                "grid": self.grid, "rep": self.rep, "dir": str(self.dir), "argv": self.argv,
                "depends_on": self.depends_on}


@dataclass
class Plan:
    spec: SweepSpec
    sweep_dir: Path
    prepare: list[Run]
    runs: list[Run]
    launcher: str
    notes: list[str] = field(default_factory=list)

    @property
    def all(self) -> list[Run]:
        return [*self.prepare, *self.runs]

    def by_name(self) -> dict[str, Run]:
        return {r.name: r for r in self.all}


def _slug(value: Any) -> str:
    text = str(value)
    if "/" in text:
        text = Path(text).name or text.replace("/", "_")
    text = re.sub(r"[^A-Za-z0-9.+-]+", "_", text).strip("_")
    return text[:40] or "x"


def run_name(workload: str, point: dict[str, Any], rep: int | None) -> str:
    parts = [workload] + [f"{k}={_slug(v)}" for k, v in point.items()]
    name = "_".join(parts) if point else workload
    return f"{name}_r{rep}" if rep is not None else name


def iodiag_run_available() -> bool:
    return importlib.util.find_spec("iodiag.cli.run") is not None


def resolve_launcher(spec: SweepSpec) -> tuple[str, list[str]]:
    if spec.launcher == "direct":
        return "direct", ["launcher = direct: runs invoke the workload directly and will not be iodiag jobs"]
    if iodiag_run_available():
        return "iodiag-run", []
    if spec.launcher == "iodiag-run":
        raise UsageError(f"{spec.source}: launcher = 'iodiag-run' but `iodiag run` is not available in this iodiag",
                         hint="install an iodiag with the run command, or set launcher = 'auto' or 'direct'")
    return "direct", ["`iodiag run` is not available in this iodiag: runs invoke the workload directly and will "
                      "not be iodiag jobs (they still write results records and success markers)"]


def command_line(*, workload: str, params: dict[str, Any], name: str, launcher: str, collector: str | None,
                 python: str) -> list[str]:
    from ...workloads import params_to_argv

    declared = list(workload_params(workload).values())
    inner = [python, "-m", f"iodiag.workloads.{workload}", *params_to_argv(declared, params)]
    if launcher == "direct":
        return inner
    outer = [python, "-m", "iodiag", "run", "--name", name]
    if collector:
        outer += ["--collector", collector]
    return [*outer, "--", *inner]


def _render_params(workload: str, raw: dict[str, Any], names: dict[str, Any], where: str) -> dict[str, Any]:
    declared = workload_params(workload)
    out = {}
    # a parameter may name another parameter that holds no template itself
    plain = {k: v for k, v in raw.items() if not template_names(v)}
    merged = {**names, **plain}
    for k, v in raw.items():
        v = render(v, merged, where=where)
        try:
            out[k] = declared[k].coerce(v, where=f"{where}: ")
        except UsageError as exc:
            raise ConfigError(exc.message, hint=exc.hint) from None
    for p in declared.values():
        if p.required and out.get(p.name) is None:
            raise ConfigError(f"{where}: workload {workload!r} needs parameter {p.name!r}",
                              hint=f"add {p.name} = ... to [params] or [grid]")
    return out


def make_plan(spec: SweepSpec, *, sweep_dir: str | Path, max_runs: int = 64, yes: bool = False,
              python: str | None = None) -> Plan:
    """Expand the grid; refuse grids above max_runs unless yes=True."""
    sweep_dir = Path(sweep_dir).resolve()
    if spec.n_runs > max_runs and not yes:
        raise UsageError(f"{spec.source}: the grid makes {spec.n_runs} runs, more than the limit of {max_runs}",
                         hint="pass --yes to go ahead, or shrink [grid]/repetitions (limit: [sweep] max_runs "
                              "in the iodiag config)")
    launcher, notes = resolve_launcher(spec)
    python = python or sys.executable
    keys = list(spec.grid)
    prepare: dict[str, Run] = {}
    runs: list[Run] = []
    for combo in itertools.product(*(spec.grid[k] for k in keys)):
        # grid values may use [vars] and sweep_dir (not run_dir: the run's folder is named by them)
        sweep_names = {**spec.vars, "sweep_dir": str(sweep_dir)}
        point = {k: render(v, sweep_names, where=f"{spec.source}: [grid] {k}") for k, v in zip(keys, combo)}
        base_names = {**sweep_names, **point}
        deps: list[str] = []
        if spec.prepare is not None:
            pr = spec.prepare
            used = set().union(*(template_names(v) for v in pr.params.values())) if pr.params else set()
            ppoint = {k: point[k] for k in keys if k in used}
            pname = "prepare_" + run_name(pr.workload, ppoint, None)
            if pname not in prepare:
                pdir = sweep_dir / "prepare" / pname
                names = {**base_names, "run_dir": str(pdir), "run": pname, "rep": 0}
                pparams = _render_params(pr.workload, pr.params, names, f"{spec.source}: [prepare] {pname}")
                prepare[pname] = Run(name=pname, kind="prepare", workload=pr.workload, params=pparams,
                                     grid=ppoint, rep=0, dir=pdir,
                                     argv=command_line(workload=pr.workload, params=pparams, name=pname,
                                                       launcher=launcher, collector=spec.collector, python=python))
            deps.append(pname)
        for rep in range(1, spec.repetitions + 1):
            name = run_name(spec.workload, point, rep)
            rdir = sweep_dir / "runs" / name
            names = {**base_names, "run_dir": str(rdir), "run": name, "rep": rep}
            raw = {**spec.params, **point}
            params = _render_params(spec.workload, raw, names, f"{spec.source}: run {name}")
            runs.append(Run(name=name, kind="run", workload=spec.workload, params=params, grid=point, rep=rep,
                            dir=rdir, depends_on=list(deps),
                            argv=command_line(workload=spec.workload, params=params, name=name, launcher=launcher,
                                              collector=spec.collector, python=python)))
    # repetitions round-robin over the grid points (A1 B1 C1 A2 B2 C2 ...): a drift of the machine's load
    # during the sweep then spreads over every point instead of landing on the points run last
    runs.sort(key=lambda r: r.rep)  # (stable: the grid order within a repetition is kept)
    dup = len({r.name for r in runs}) != len(runs)
    if dup:
        raise ConfigError(f"{spec.source}: two grid points give the same run folder name",
                          hint="grid values differ only in characters dropped from folder names")
    return Plan(spec=spec, sweep_dir=sweep_dir, prepare=list(prepare.values()), runs=runs, launcher=launcher,
                notes=notes)
