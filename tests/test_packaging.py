"""What pyproject.toml promises: every third-party module the code imports is declared (in the core dependencies,
or in the extra of the part of iodiag that imports it), and the platform floor (``requires-python``) holds: on
Python 3.10, which has no ``tomllib``, every TOML reader (``--config``, site configs, sweep specs) goes through
``iodiag.tomlread`` and its ``tomli`` fallback.
"""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import json
import re
import subprocess
import sys
import textwrap

import pytest

from conftest import REPO, cli_env, corpus_path
from iodiag.tomlread import loads as toml_loads

SRC = REPO / "src" / "iodiag"

# the part of iodiag (a file or a folder under src/iodiag) -> the extra that installs what it imports; the rest is core
EXTRA_OF_PART = {
    "workloads/": "dask",
    "collectors/dask_capture.py": "dask",
    "collectors/verify_site/": "dask",  # runs inside the verified Python program: patches what it imported
    "jobqueue.py": "jobqueue",
    "jobs/sweep/": "sweep",
    "site/": "site",
    "reports/html/": "html",
    "recommend/train.py": "ml",
    "recommend/tree.py": "ml",
}
# core modules that import an optional package only inside a convenience the core never calls
OPTIONAL_IN_CORE = {
    ("profile.py", "pandas"): "Table.to_pandas(), for callers that have pandas (any extra with it)",
    # the job snapshot reads NetCDF/HDF5 headers with them when the workload's environment has them (the dask
    # extra); without them it records that variables were not read, and the run goes on
    ("collectors/snapshot.py", "h5py"): "NetCDF-4/HDF5 variables in the job snapshot, when h5py is installed",
    ("collectors/snapshot.py", "netCDF4"): "NetCDF-3 variables in the job snapshot, when netCDF4 is installed",
}


def _imports() -> dict[tuple[str, str], int]:
    """(file under src/iodiag, top-level module) -> first line, for every absolute import of a module that is not
    iodiag's own or the standard library's."""
    out: dict[tuple[str, str], int] = {}
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top == "iodiag" or top in sys.stdlib_module_names or top == "tomllib":  # (3.11+ stdlib)
                    continue
                out.setdefault((rel, top), node.lineno)
    return out


def _req_name(req: str) -> tuple[str, list[str]]:
    m = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[([^\]]*)\])?", req)
    assert m, req
    return _norm(m.group(1)), [e.strip() for e in (m.group(2) or "").split(",") if e.strip()]


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _declared(project: dict, extra: str | None, seen: frozenset = frozenset()) -> set[str]:
    """Distributions core (extra None) or core + ``extra`` installs by their own declaration (iodiag[x]
    references followed)."""
    reqs = list(project["dependencies"]) + (list(project["optional-dependencies"][extra]) if extra else [])
    out: set[str] = set()
    for req in reqs:
        name, extras = _req_name(req)
        if name == "iodiag":
            for e in extras:
                if e not in seen:
                    out |= _declared(project, e, seen | {e})
        else:
            out.add(name)
    return out


def _extra_of(rel: str) -> str | None:
    for part, extra in EXTRA_OF_PART.items():
        if rel == part or (part.endswith("/") and rel.startswith(part)):
            return extra
    return None


# import name -> distribution, for modules not installed here whose distribution has another name
DIST_OF = {"sklearn": "scikit-learn", "_cffi_backend": "cffi"}


def _distribution(module: str) -> str:
    """The distribution that provides ``module`` here (else DIST_OF's, else its own name: tomli on 3.11)."""
    dists = importlib.metadata.packages_distributions().get(module)
    return _norm(dists[0]) if dists else _norm(DIST_OF.get(module, module))


def test_every_third_party_import_is_declared():
    project = toml_loads((REPO / "pyproject.toml").read_text())["project"]
    imports = _imports()
    assert ("analyzers/readers/darshan_lib.py", "cffi") in imports  # the walk sees imports inside functions
    missing = []
    for (rel, module), line in sorted(imports.items()):
        if (rel, module) in OPTIONAL_IN_CORE:
            continue
        extra = _extra_of(rel)
        dist = _distribution(module)
        if dist not in _declared(project, extra):
            missing.append(f"src/iodiag/{rel}:{line} imports {module} (distribution {dist}), not declared in "
                           + (f"the core dependencies or the [{extra}] extra" if extra else "the core dependencies"))
    assert not missing, "\n".join(missing)
    # the CLI's hint for a missing optional module names an extra that really installs it
    from iodiag.cli.common import _EXTRA_OF

    for module, extra in _EXTRA_OF.items():
        assert _distribution(module) in _declared(project, extra), (module, extra)
    # tomllib (3.11+) is imported in one place only, the one with the fallback
    assert {rel for rel, m in imports if m == "tomli"} == {"tomlread.py"}
    stdlib_toml = set()
    for path in SRC.rglob("*.py"):
        if re.search(r"^\s*(import tomllib|from tomllib import)", path.read_text(encoding="utf-8"), re.M):
            stdlib_toml.add(path.relative_to(SRC).as_posix())
    assert stdlib_toml == {"tomlread.py"}, stdlib_toml


def test_platform_floor_says_where_tomli_is_needed():
    project = toml_loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["requires-python"] == ">=3.10"
    tomli = [r for r in project["dependencies"] if _req_name(r)[0] == "tomli"]
    assert len(tomli) == 1 and re.search(r"python_version\s*<\s*['\"]3\.11['\"]", tomli[0]), tomli


# Run in a child: tomllib cannot be imported (as on Python 3.10).  Where the tomli package is not installed (a
# 3.11+ environment without the test extra), the child serves the standard library's copy of it under its
# original name, tomli (tomllib is tomli 1.2 taken into the standard library), so that the fallback path runs.
NO_TOMLLIB = textwrap.dedent('''
    import importlib.abc, importlib.util, os, sys
    stdlib_toml = os.path.join(os.path.dirname(os.__file__), "tomllib")

    class NoTomllib(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "tomllib" or name.startswith("tomllib."):
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            if (name == "tomli" or name.startswith("tomli.")) and os.environ.get("ALIAS_TOMLI"):
                part = name.split(".", 1)[1] if "." in name else None
                where = os.path.join(stdlib_toml, (part + ".py") if part else "__init__.py")
                return importlib.util.spec_from_file_location(
                    name, where, submodule_search_locations=None if part else [stdlib_toml])
            return None

    sys.meta_path.insert(0, NoTomllib())
    sys.argv = ["iodiag", *sys.argv[1:]]
    from iodiag.cli import entry
    import iodiag.tomlread as t
    print("TOML-FROM", t.loads.__module__, file=sys.stderr)
    entry()
''')


def test_toml_readers_fall_back_on_tomli_without_tomllib(tmp_path):
    """--config, a broken --config and a sweep spec, read with tomllib unimportable: same results as with it."""
    script = tmp_path / "no_tomllib.py"
    script.write_text(NO_TOMLLIB)
    env = cli_env({"ALIAS_TOMLI": "" if importlib.util.find_spec("tomli") else "1"})
    log = str(corpus_path("darshan-logs/darshan_logs/release_logs/mpi-io-test-x86_64-3.4.0.darshan"))
    cfg = tmp_path / "t.toml"
    cfg.write_text("[small_io]\nsize_bytes = 1\nmin_ops = 1\n[report]\nmute = [\"metadata-heavy\"]\n")

    def run(*args):
        return subprocess.run([sys.executable, str(script), *args], env=env, capture_output=True, timeout=300)

    plain = subprocess.run([sys.executable, "-m", "iodiag", "report", log, "--config", str(cfg), "--json"],
                           env=cli_env(), capture_output=True, timeout=300)
    fallback = run("report", log, "--config", str(cfg), "--json")
    assert fallback.returncode == 0, fallback.stderr.decode()[-2000:]
    assert "TOML-FROM tomli" in fallback.stderr.decode()
    a, b = json.loads(plain.stdout), json.loads(fallback.stdout)
    assert a["findings"] == b["findings"] and a["volumes"] == b["volumes"]
    broken = tmp_path / "broken.toml"
    broken.write_text("[small_io\n")
    bad = run("report", log, "--config", str(broken))
    assert bad.returncode == 7 and "is not valid TOML" in bad.stderr.decode() and "Traceback" not in bad.stderr.decode()
    spec = tmp_path / "s.toml"
    spec.write_text("[sweep]\nworkload = 'read'\n[params]\npath = 'x.zarr'\n[grid]\nnslices = [1, 2]\n")
    args = ("sweep", "plan", str(spec), "--json", "--dir", str(tmp_path / "sw"))
    p = run(*args)
    q = subprocess.run([sys.executable, "-m", "iodiag", *args], env=cli_env(), capture_output=True, timeout=300)
    assert p.returncode == q.returncode == 0, (p.stderr.decode(), q.stderr.decode())
    assert json.loads(p.stdout) == json.loads(q.stdout) and len(json.loads(p.stdout)["runs"]) >= 2
    bad = tmp_path / "bad.toml"
    bad.write_text("[sweep\n")
    p = run("sweep", "plan", str(bad))
    assert p.returncode == 7 and "is not valid TOML" in p.stderr.decode()


@pytest.mark.skipif(sys.version_info >= (3, 11), reason="the real thing on Python 3.10: tomllib is absent")
def test_python310_reads_toml_through_tomli():
    from iodiag import tomlread

    assert tomlread.loads.__module__.startswith("tomli")
