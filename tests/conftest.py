"""Shared test fixtures: the real Darshan log corpus and a way to run the CLI as users do."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
CORPUS = SHARED / "darshan-logs"


def corpus_path(rel: str) -> Path:
    """A corpus log by its path in MANIFEST.tsv (relative to ../shared/darshan-logs)."""
    p = CORPUS / rel
    if not p.exists():
        pytest.skip(f"corpus log {rel} not found under {CORPUS} (clone the repo next to shared/)")
    return p


def corpus_glob(rel_dir: str, pattern: str = "*.darshan") -> list[Path]:
    d = CORPUS / rel_dir
    hits = sorted(d.glob(pattern))
    if not hits:
        pytest.skip(f"no {pattern} under {d}")
    return hits


@pytest.fixture(scope="session")
def corpus() -> Path:
    if not CORPUS.is_dir():
        pytest.skip(f"the Darshan log corpus is not at {CORPUS}")
    return CORPUS


@pytest.fixture(scope="session")
def manifest() -> dict[str, dict[str, str]]:
    path = CORPUS / "MANIFEST.tsv"
    if not path.is_file():
        pytest.skip("MANIFEST.tsv not found")
    with path.open() as fh:
        return {row["path"]: row for row in csv.DictReader(fh, delimiter="\t")}


@pytest.fixture(scope="module")
def cluster():
    """A real 2-worker Dask LocalCluster (processes) for one test module; yields its Client."""
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as lc:
        with distributed.Client(lc) as client:
            yield client


def cli_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO / "src") + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("COLUMNS", "120")
    if extra:
        env.update(extra)
    return env


def run_cli(*args: str, env: dict[str, str] | None = None, input: bytes | None = None, timeout: float = 300, cwd: str | None = None) -> subprocess.CompletedProcess:
    """Run `python -m iodiag ARGS` in a subprocess (as a user would), capturing output."""
    return subprocess.run(
        [sys.executable, "-m", "iodiag", *args], env=cli_env(env), input=input,
        capture_output=True, timeout=timeout, cwd=cwd,
    )


def require_embedded() -> None:
    """Skip (with the reason) where the embedded collector cannot be built (no C compiler)."""
    from iodiag.errors import IodiagError

    try:
        from iodiag.collectors import embedded

        embedded.build()
    except (ImportError, IodiagError) as exc:
        pytest.skip(f"the embedded collector cannot be built here: {exc}")


def require_darshan_runtime():
    """The Darshan runtime found the way ``iodiag run --darshan`` finds one; skip (with the reason) where none is."""
    from iodiag.collectors import darshan as dcol
    from iodiag.errors import CollectorError

    try:
        return dcol.find_runtime()
    except CollectorError as exc:
        pytest.skip(f"no Darshan runtime on this machine: {exc}")
