"""Sweep specs (TOML): workload, parameter grid, repetitions, resources.

Example::

    [sweep]
    name = "weak-scaling"
    workload = "convert"         # gen | convert | read
    repetitions = 3
    chain = "afterany"           # how runs are chained on a batch system: afterany | afterok | none
    launcher = "auto"            # iodiag-run | direct | auto (iodiag-run when `iodiag run` exists)
    collector = "auto"           # passed as `iodiag run --collector`; omit to use iodiag's default

    [vars]                       # free variables for templates
    data = "/scratch/me/data"

    [params]                     # fixed workload parameters; "{name}" is replaced
    src = "{data}/cube-w{workers}.nc"
    dst = "{run_dir}/out.zarr"

    [grid]                       # every combination becomes a run (× repetitions)
    workers = [1, 2]
    compressor = ["none", "zstd"]

    [prepare]                    # optional: a step runs depend on (afterok), one per distinct rendering
    workload = "gen"
    params = { kind = "cube", workers = "{workers}", out = "{data}/cube-w{workers}.nc" }

    [resources]                  # batch directives
    nodes = 1
    cpus = 2
    memory = "4G"
    walltime = "00:20:00"
    queue = "debug"
    account = "abc123"
    setup = ["module load python"]
    directives = []              # extra raw directive lines, written as given

Template names: grid and fixed parameters, ``[vars]``, ``sweep_dir``,
``run_dir``, ``run`` (the run's name) and ``rep``.  A value that is exactly
``"{name}"`` keeps the type of what it names (``workers = "{workers}"`` stays
an integer).  Unknown sections, keys or workload parameters are errors.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ... import tomlread
from ...errors import ConfigError, InputNotFound, UsageError

WORKLOADS = ("gen", "convert", "read")
CHAINS = ("afterany", "afterok", "none")
LAUNCHERS = ("auto", "iodiag-run", "direct")


def workload_params(workload: str):
    """The declared parameters of a workload module (by name)."""
    import importlib

    if workload not in WORKLOADS:
        raise UsageError(f"unknown workload {workload!r}", hint=f"workloads: {', '.join(WORKLOADS)}")
    mod = importlib.import_module(f"iodiag.workloads.{workload}")
    return {p.name: p for p in mod.PARAMS}


@dataclass(frozen=True)
class Resources:
    nodes: int = 1
    cpus: int = 1
    memory: str | None = None
    walltime: str = "00:30:00"
    queue: str | None = None
    account: str | None = None
    setup: tuple[str, ...] = ()
    directives: tuple[str, ...] = ()


@dataclass(frozen=True)
class Prepare:
    workload: str
    params: dict[str, Any]


@dataclass(frozen=True)
class SweepSpec:
    name: str
    workload: str
    params: dict[str, Any]
    grid: dict[str, list[Any]]
    repetitions: int = 1
    chain: str = "afterany"
    launcher: str = "auto"
    collector: str | None = None
    vars: dict[str, Any] = field(default_factory=dict)
    prepare: Prepare | None = None
    resources: Resources = field(default_factory=Resources)
    source: str = "<spec>"

    @property
    def n_runs(self) -> int:
        n = self.repetitions
        for values in self.grid.values():
            n *= len(values)
        return n


_SECTIONS = {"sweep", "vars", "params", "grid", "prepare", "resources"}
_SWEEP_KEYS = {"name", "workload", "repetitions", "chain", "launcher", "collector"}
_RESOURCE_TYPES = {"nodes": int, "cpus": int, "memory": str, "walltime": str, "queue": str, "account": str,
                   "setup": list, "directives": list}
BUILTINS = ("sweep_dir", "run_dir", "run", "rep")
_TEMPLATE = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


def _unknown(keys, known, where: str, source: str) -> None:
    for k in keys:
        if k not in known:
            raise ConfigError(f"{source}: unknown key {k!r} in {where}", hint=f"known: {', '.join(sorted(known))}")


def _check_params(workload: str, values: dict[str, Any], where: str, source: str, *, templated_ok: bool) -> None:
    declared = workload_params(workload)
    for k, v in values.items():
        if k not in declared:
            raise ConfigError(f"{source}: unknown parameter {k!r} for workload {workload!r} in {where}",
                              hint=f"parameters of {workload}: {', '.join(declared)}")
        if templated_ok and isinstance(v, str) and _TEMPLATE.search(v):
            continue  # checked after rendering
        try:
            declared[k].coerce(v, where=f"{source}: {where}: ")
        except UsageError as exc:
            raise ConfigError(exc.message, hint=exc.hint) from None


def spec_from_dict(data: dict[str, Any], *, source: str = "<spec>") -> SweepSpec:
    _unknown(data, _SECTIONS, "the spec (sections)", source)
    sw = data.get("sweep")
    if not isinstance(sw, dict):
        raise ConfigError(f"{source}: missing [sweep] table", hint="it needs at least workload = \"convert\"")
    _unknown(sw, _SWEEP_KEYS, "[sweep]", source)
    workload = sw.get("workload")
    if workload not in WORKLOADS:
        raise ConfigError(f"{source}: [sweep] workload = {workload!r} is not one of {list(WORKLOADS)}")
    reps = sw.get("repetitions", 1)
    if not isinstance(reps, int) or isinstance(reps, bool) or reps < 1:
        raise ConfigError(f"{source}: [sweep] repetitions = {reps!r} must be an integer ≥ 1")
    chain = sw.get("chain", "afterany")
    if chain not in CHAINS:
        raise ConfigError(f"{source}: [sweep] chain = {chain!r} is not one of {list(CHAINS)}")
    launcher = sw.get("launcher", "auto")
    if launcher not in LAUNCHERS:
        raise ConfigError(f"{source}: [sweep] launcher = {launcher!r} is not one of {list(LAUNCHERS)}")
    name = str(sw.get("name") or Path(source).stem or "sweep")
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name):
        raise ConfigError(f"{source}: [sweep] name {name!r} may only hold letters, digits, '.', '_' and '-'")

    params = dict(data.get("params", {}))
    grid_raw = data.get("grid", {})
    if not isinstance(params, dict) or not isinstance(grid_raw, dict):
        raise ConfigError(f"{source}: [params] and [grid] must be tables")
    grid: dict[str, list[Any]] = {}
    for k, v in grid_raw.items():
        if not isinstance(v, list) or not v:
            raise ConfigError(f"{source}: [grid] {k} must be a non-empty list", hint=f"e.g. {k} = [1, 2]")
        if len(set(map(repr, v))) != len(v):
            raise ConfigError(f"{source}: [grid] {k} = {v!r} repeats a value")
        grid[k] = list(v)
    both = set(params) & set(grid)
    if both:
        raise ConfigError(f"{source}: {sorted(both)} in both [params] and [grid]", hint="keep each in one place")
    _check_params(workload, params, "[params]", source, templated_ok=True)
    for k, values in grid.items():
        for v in values:
            _check_params(workload, {k: v}, "[grid]", source, templated_ok=True)
    vars_ = dict(data.get("vars", {}))
    clash = set(vars_) & (set(params) | set(grid) | set(BUILTINS))
    if clash:
        raise ConfigError(f"{source}: [vars] {sorted(clash)} shadow parameters or built-in names")

    prepare = None
    if "prepare" in data:
        pr = data["prepare"]
        _unknown(pr, {"workload", "params"}, "[prepare]", source)
        pw = pr.get("workload")
        if pw not in WORKLOADS:
            raise ConfigError(f"{source}: [prepare] workload = {pw!r} is not one of {list(WORKLOADS)}")
        _check_params(pw, dict(pr.get("params", {})), "[prepare.params]", source, templated_ok=True)
        prepare = Prepare(workload=pw, params=dict(pr.get("params", {})))

    res_raw = data.get("resources", {})
    _unknown(res_raw, set(_RESOURCE_TYPES), "[resources]", source)
    res_kw: dict[str, Any] = {}
    for k, v in res_raw.items():
        typ = _RESOURCE_TYPES[k]
        if typ is int and (not isinstance(v, int) or isinstance(v, bool) or v < 1):
            raise ConfigError(f"{source}: [resources] {k} = {v!r} must be a positive integer")
        if typ is str and not isinstance(v, str):
            raise ConfigError(f"{source}: [resources] {k} = {v!r} must be a string")
        if typ is list:
            if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
                raise ConfigError(f"{source}: [resources] {k} must be a list of strings")
            v = tuple(v)
        res_kw[k] = v
    if "walltime" in res_kw and not re.fullmatch(r"\d+:\d{2}(:\d{2})?", res_kw["walltime"]):
        raise ConfigError(f"{source}: [resources] walltime = {res_kw['walltime']!r} is not HH:MM[:SS]")
    return SweepSpec(name=name, workload=workload, params=params, grid=grid, repetitions=reps, chain=chain,
                     launcher=launcher, collector=sw.get("collector"), vars=vars_, prepare=prepare,
                     resources=Resources(**res_kw), source=source)


def load_spec(path: str | Path) -> SweepSpec:
    p = Path(path)
    if not p.is_file():
        raise InputNotFound(f"sweep spec {p} not found", hint="write one (see `iodiag sweep plan --help`)")
    try:
        data = tomlread.loads(p.read_text())
    except tomlread.TOMLDecodeError as exc:
        raise ConfigError(f"sweep spec {p} is not valid TOML: {exc}", hint="fix the syntax") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"sweep spec {p} cannot be read: {exc}") from None
    return spec_from_dict(data, source=str(p))


def render(value: Any, names: dict[str, Any], *, where: str) -> Any:
    """Replace {name} in a string; a string that is exactly {name} keeps the named value's type."""
    if not isinstance(value, str):
        return value
    whole = _TEMPLATE.fullmatch(value)
    if whole:
        key = whole.group(1)
        if key not in names:
            raise ConfigError(f"{where}: template {value!r} names nothing known",
                              hint=f"known names: {', '.join(sorted(names))}")
        return names[key]

    def sub(m: re.Match) -> str:
        key = m.group(1)
        if key not in names:
            raise ConfigError(f"{where}: template {value!r} uses unknown name {{{key}}}",
                              hint=f"known names: {', '.join(sorted(names))}")
        return str(names[key])

    return _TEMPLATE.sub(sub, value)


def template_names(value: Any) -> set[str]:
    return set(_TEMPLATE.findall(value)) if isinstance(value, str) else set()
