"""Layers that hold: no module of src/iodiag imports upward, across a private boundary, or in a cycle (issue 29).

The graph is read from the source (an ``ast`` walk, so imports inside functions count as much as those at the top
of a module); the layers are data (``LAYERS``) so that a new module must be given its place, and each exception
is listed with its reason (``ALLOWED``).  docs/contributing.md says where a new detector, reader, plot or rule goes.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from conftest import REPO

SRC = REPO / "src" / "iodiag"

# Lowest first.  A module belongs to the layer of its longest matching prefix (an entry ending in "$" names that
# module only, not its submodules: a new module under the package must be given its place) and may import its own
# layer and those below it, never one above.  The flow (the project's architecture sketch and house rules): collectors ->
# jobs -> analyzers (readers -> one JobProfile -> metrics/time model -> pure detectors -> the report model) ->
# recommend -> reports (only format) -> site ingest / service (compose the pipeline) -> cli (the only place that
# prints or exits).  docs/contributing.md says where a new piece goes.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    # shared by all: units, the error root, the one Config, the profile and finding types
    ("base", ("iodiag$", "iodiag.units", "iodiag.errors", "iodiag.config", "iodiag.tomlread", "iodiag.profile",
              "iodiag.findings", "iodiag.cache", "iodiag.jobqueue")),
    ("collectors", ("iodiag.collectors",)),
    # workload programs run under iodiag; the sweep runner (jobs/sweep) launches them by their declared PARAMS
    ("workloads", ("iodiag.workloads",)),
    ("jobs", ("iodiag.jobs",)),
    # table helpers the readers fill and everything after them reads, and path rules shared by readers/detectors
    ("analyzers.base", ("iodiag.analyzers$", "iodiag.analyzers.nputil", "iodiag.analyzers.batches",
                        "iodiag.analyzers.zarrpath", "iodiag.analyzers.counters", "iodiag.analyzers.opgroups")),
    ("analyzers.readers", ("iodiag.analyzers.readers",)),
    # one JobProfile from a job folder, a log set or a target named on the command line
    ("analyzers.load", ("iodiag.analyzers.load", "iodiag.analyzers.log_loss", "iodiag.analyzers.job",
                        "iodiag.analyzers.locate")),
    ("analyzers.metrics", ("iodiag.analyzers.metrics", "iodiag.analyzers.timemodel", "iodiag.analyzers.tasktime",
                           "iodiag.analyzers.summary", "iodiag.analyzers.context",
                           "iodiag.analyzers.weakloss")),  # (weakloss: Dask weak-scaling loss by component, h28)
    ("analyzers.detectors", ("iodiag.analyzers.detectors",)),
    # the report model (schema iodiag.report/1), assembled once from the analyzers' results; reports/ format it
    ("analyzers.report", ("iodiag.analyzers.report",)),
    ("recommend", ("iodiag.recommend",)),
    ("reports", ("iodiag.reports",)),
    ("site", ("iodiag.site", "iodiag.service")),
    ("cli", ("iodiag.cli", "iodiag.__main__")),
)
RANK = {name: i for i, (name, _) in enumerate(LAYERS)}

# Below in rank but still out of bounds: once the profile is built, later layers do not go back to the raw input.
SKIPS: dict[str, tuple[str, ...]] = {
    # pure functions over Metrics and one Config: no reader, no job folder
    "analyzers.detectors": ("iodiag.collectors", "iodiag.jobs", "iodiag.workloads", "iodiag.analyzers.readers",
                            "iodiag.analyzers.load", "iodiag.analyzers.job", "iodiag.analyzers.locate"),
    # recommendations come from findings, metrics and features of the profile, not from the job store
    "recommend": ("iodiag.collectors", "iodiag.jobs.store", "iodiag.jobs.run", "iodiag.jobs.snapshot",
                  "iodiag.jobs.verify"),
    # reports only format what the analyzers and recommend built
    "reports": ("iodiag.collectors", "iodiag.jobs", "iodiag.workloads", "iodiag.analyzers.readers",
                "iodiag.analyzers.load", "iodiag.analyzers.job", "iodiag.analyzers.locate"),
}

# (importer, imported) -> why it is still there.  Each entry is a debt: remove it when the import goes.
ALLOWED: dict[tuple[str, str], str] = {
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(p): p for p in sorted(SRC.rglob("*.py"))}


def imports_of(name: str) -> dict[str, set[str]]:
    """imported module -> names taken from it, for every iodiag import anywhere in the module (functions too)."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: dict[str, set[str]] = {}
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "iodiag":
                    out.setdefault(a.name, set())
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "iodiag":
                continue
            for a in node.names:
                sub = f"{target}.{a.name}"
                if sub in MODULES:  # `from . import x`: the submodule itself
                    out.setdefault(sub, set())
                else:
                    out.setdefault(target, set()).add(a.name)
    return out


GRAPH = {m: imports_of(m) for m in MODULES}


def _matches(module: str, entry: str) -> bool:
    if entry.endswith("$"):
        return module == entry[:-1]
    return module == entry or module.startswith(entry + ".")


def layer_of(module: str) -> str:
    best, length = None, -1
    for name, prefixes in LAYERS:
        for p in prefixes:
            if _matches(module, p) and len(p) > length:
                best, length = name, len(p)
    assert best is not None, f"{module} has no layer: give it one in LAYERS"
    return best


def _under(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def _top(module: str) -> str:
    """The top-level package (iodiag.X) a module belongs to: private names are shared only inside it."""
    return ".".join(module.split(".")[:2])


def violations() -> list[tuple[str, str, str]]:
    out = []
    for src, targets in GRAPH.items():
        ls = layer_of(src)
        for dst, names in targets.items():
            ld = layer_of(dst)
            if RANK[ld] > RANK[ls]:
                out.append((src, dst, f"upward: {ls} imports {ld}"))
            elif _under(dst, SKIPS.get(ls, ())):
                out.append((src, dst, f"{ls} goes back to {ld} ({dst})"))
            private = [n for n in names if n.startswith("_") and not n.startswith("__")]
            if _top(src) != _top(dst) and (any(p.startswith("_") and not p.startswith("__")
                                                for p in dst.split(".")) or private):
                out.append((src, dst, f"private across packages: {dst} {', '.join(sorted(private))}".rstrip()))
    return out


def test_every_module_has_a_layer():
    assert MODULES and all(layer_of(m) for m in MODULES)
    assert len(RANK) == len(LAYERS)
    for new in ("iodiag.newmodule", "iodiag.analyzers.newmodule"):  # not placed by a package's own entry
        with pytest.raises(AssertionError, match="has no layer"):
            layer_of(new)


def test_no_upward_skipping_or_private_import():
    found = [v for v in violations() if (v[0], v[1]) not in ALLOWED]
    assert found == [], "\n".join(f"{s} -> {d}: {why}" for s, d, why in found)


def test_allowlist_is_not_stale():
    """An allowed import that went away (or stopped breaking a rule) leaves the list."""
    live = {(s, d) for s, d, _ in violations()}
    assert set(ALLOWED) <= live, sorted(set(ALLOWED) - live)


def cycles_in(graph) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm)."""
    edges = {m: sorted(d for d in graph[m] if d in graph and d != m) for m in graph}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:  # recursion depth <= the number of modules
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for m in sorted(edges):
        if m not in index:
            visit(m)
    return cycles


# Import cycles still there, each with its reason (a debt like ALLOWED: fix it by moving what both modules need
# into a third one, as recommend/shipped.py did for model.py and train.py).  An entry whose modules all exist and
# no longer form a cycle fails test_no_import_cycles: remove it then.
ALLOWED_CYCLES: dict[frozenset[str], str] = {}


def test_no_import_cycles():
    found = [c for c in cycles_in(GRAPH) if frozenset(c) not in ALLOWED_CYCLES]
    assert found == []
    live = {frozenset(c) for c in cycles_in(GRAPH)}
    stale = [sorted(c) for c in ALLOWED_CYCLES if c <= set(MODULES) and c not in live]
    assert stale == [], "these cycles are gone: remove them from ALLOWED_CYCLES"


def test_the_checker_sees_the_cycle_issue_29_found():
    """recommend/model.py <-> recommend/train.py (what both need now lives in recommend/shipped.py)."""
    graph = {**GRAPH, "iodiag.recommend.model": {**GRAPH["iodiag.recommend.model"], "iodiag.recommend.train": set()}}
    assert ["iodiag.recommend.model", "iodiag.recommend.train"] in cycles_in(graph)
    assert "iodiag.recommend.model" in GRAPH["iodiag.recommend.train"]  # the one direction that stays


@pytest.mark.parametrize("src, dst, why", [
    ("iodiag.analyzers.readers.arrays", "iodiag.analyzers.detectors._zarr", "upward"),
    ("iodiag.reports.verify", "iodiag.jobs.verify", "goes back"),
    ("iodiag.recommend.features", "iodiag.jobs.store", "goes back"),
    ("iodiag.recommend.features", "iodiag.workloads._common", "private"),
])
def test_the_checker_sees_the_imports_issue_29_found(src, dst, why, monkeypatch):
    """The four kinds of import the issue found (now gone) are each caught when put back."""
    monkeypatch.setitem(GRAPH, src, {**GRAPH[src], dst: set()})
    assert any(s == src and d == dst and why in w for s, d, w in violations())
