"""Ctrl-C on a terminal: `iodiag site ingest` (with a local Dask cluster) and `iodiag sweep run` exit 130 with one
line saying what was kept, no traceback (none from Dask's shutdown either); the next run resumes from there."""

from __future__ import annotations

import os
import re
import sys

import pytest

from conftest import cli_env, run_cli
from ptyrun import ANSI, run_on_pty
from site_archive import CORPUS, build_archive

pytestmark = pytest.mark.skipif(not CORPUS.is_dir(), reason=f"shared corpus not found at {CORPUS}")


def _interrupt_on_pty(argv: list[str], env: dict[str, str], *, after: "re.Pattern[bytes]", timeout: float = 180.0) -> tuple[int, str]:
    """Run argv on a pseudo-terminal, type Ctrl-C once ``after`` matches its output, return (exit code, output)."""
    # the terminal turns Ctrl-C into SIGINT for the foreground process group
    code, out, sent = run_on_pty(argv, env, timeout=timeout, when=after, act=lambda fd: os.write(fd, b"\x03"))
    assert sent is not None, out[-3000:]
    return code, out


def test_ctrl_c_on_site_ingest_keeps_what_it_read(tmp_path):
    arc = build_archive(tmp_path / "archive", 1500, damaged_every=0, logs_per_day=50)
    out = tmp_path / "site.parquet"
    env = cli_env({"COLUMNS": "100"})
    # a count above 0 on the progress bar: the cluster runs and tasks are coming back
    code, text = _interrupt_on_pty([sys.executable, "-m", "iodiag", "site", "ingest", str(arc.root), "--out", str(out),
                                    "--workers", "2"], env, after=re.compile(rb" [1-9][0-9]*/1500 "))
    assert code == 130, text[-3000:]
    assert "Traceback" not in text and "AssertionError" not in text and "Exception" not in text, text[-3000:]
    lines = [ln for ln in ANSI.sub(b"", text.encode()).decode().replace("\r", "\n").replace("^C", "").splitlines()
             if ln.startswith("iodiag")]
    assert len(lines) == 1 and lines[0].startswith("iodiag: interrupted:") and str(out) in lines[0], text[-3000:]
    assert "run the same command again" in lines[0]
    # the next run resumes: it reads only what the first left, and the dataset then holds every log
    again = run_cli("site", "ingest", str(arc.root), "--out", str(out), "--workers", "0", "--json", timeout=600)
    assert again.returncode == 0, again.stderr.decode()[-2000:]
    import json

    d = json.loads(again.stdout)
    kept = int(lines[0].split("keeps the ")[1].split(" logs")[0])
    assert d["logs_skipped"] == kept
    assert d["logs_read"] + d["logs_skipped"] == len(arc.readable)
    from iodiag.site import load_site

    assert len(load_site(out)["jobs"]) == len(arc.readable)


SWEEP = """
[sweep]
name = "stop"
workload = "gen"
repetitions = 1
launcher = "direct"

[params]
out = "{sweep_dir}/out-{run}.zarr"
format = "zarr2"
plev = 4
lat = 91
lon = 180

[grid]
time = [200, 201, 202, 203, 204, 205]
"""


def test_ctrl_c_on_sweep_run_keeps_the_runs_that_succeeded(tmp_path):
    spec = tmp_path / "s.toml"
    spec.write_text(SWEEP)
    sw = tmp_path / "sw"
    env = cli_env({"COLUMNS": "100"})
    argv = [sys.executable, "-m", "iodiag", "sweep", "run", str(spec), "--dir", str(sw)]
    # Ctrl-C once the first run is done and the second has started
    code, text = _interrupt_on_pty(argv, env, after=re.compile(rb"done .*exit 0.*\n.*start ", re.S))
    plain = ANSI.sub(b"", text.encode()).decode()
    assert code == 130, plain[-3000:]
    assert "Traceback" not in plain, plain[-3000:]
    lines = [ln for ln in plain.replace("\r", "\n").replace("^C", "").splitlines() if ln.startswith("iodiag")]
    assert len(lines) == 1 and lines[0].startswith("iodiag: interrupted:") and "runs that succeeded" in lines[0], plain
    kept = int(lines[0].split("keeps the ")[1].split(" of ")[0])
    succeeded = [d for d in (sw / "runs").iterdir() if (d / "SUCCESS").exists()]
    assert kept == len(succeeded) >= 1
    # the next run skips them
    import json

    again = run_cli("sweep", "run", str(spec), "--dir", str(sw), "--json", timeout=600)
    assert again.returncode == 0, again.stderr.decode()[-2000:]
    assert len(json.loads(again.stdout)["skipped"]) == kept
