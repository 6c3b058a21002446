"""`iodiag report` parses its usual options without typer (cli/fast.py), and gives exactly what typer gives.

The fast path exists for start-up time (typer, click and every command module cost ~40 ms of CPU); its option
table must stay the typer command's, and whatever it is unsure of must go through typer.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import typer.main

from iodiag.cli import build_app, fast

from conftest import corpus_path

LOG = "darshan-logs/darshan_logs/e3sm_io_heatmaps_and_dxt/e3sm_io_heatmap_only.darshan"


def _report_command():
    return typer.main.get_command(build_app()).commands["report"]


def test_option_table_is_the_typer_commands():
    cmd = _report_command()
    table = {}
    for p in cmd.params:
        if p.param_type_name == "argument":
            assert p.name == "target"
            continue
        for opt in (*p.opts, *p.secondary_opts):
            table[opt] = p.name
        assert fast.REPORT_DEFAULTS[p.name] == (p.default if not p.multiple else list(p.default or [])), p.name
    assert table == {opt: key for opt, (key, _) in fast.REPORT_OPTIONS.items()}
    assert set(fast.REPORT_DEFAULTS) == {p.name for p in cmd.params if p.param_type_name != "argument"}


ARGVS = [
    ["x.darshan"],
    ["x.darshan", "--json"],
    ["--json", "logs/", "--all", "--obfuscate", "--no-color"],
    ["123", "--log-tree", "/tree", "--job", "77", "--color"],
    ["x.darshan", "--mute", "small-io", "--mute=no-io", "--config", "c.toml", "--site-config=s.toml"],
    ["last", "--html", "--json-file", "out.json"],
    ["last", "--html-path=page.html"],
]


@pytest.mark.parametrize("argv", ARGVS, ids=[" ".join(a) for a in ARGVS])
def test_fast_path_gives_report_what_typer_gives(argv, monkeypatch):
    import iodiag.cli.report as report_mod
    import iodiag.cli.report_run as run_mod

    calls = []
    monkeypatch.setattr(run_mod, "_report", lambda **kw: calls.append(kw))
    monkeypatch.setattr(report_mod, "_report", lambda **kw: calls.append(kw))
    run = fast.dispatch(["report", *argv])
    assert run is not None, "the fast path should take this command"
    run()
    _report_command().main(args=argv, standalone_mode=False)
    assert len(calls) == 2
    assert calls[0] == calls[1]


@pytest.mark.parametrize("argv", [
    ["--help"], ["x.darshan", "-h"], ["x.darshan", "--jsn"], ["x.darshan", "--json", "--json"], [],
    ["x.darshan", "--job"], ["x.darshan", "--job", "--json"], ["a", "b"], ["x.darshan", "--json=yes"],
    ["x.darshan", "--color", "--no-color"], ["--", "x.darshan"],
])
def test_fast_path_leaves_what_it_is_unsure_of_to_typer(argv):
    assert fast.dispatch(["report", *argv]) is None


def test_other_commands_go_through_typer():
    assert fast.dispatch(["compare", "a", "b"]) is None
    assert fast.dispatch(["--version"]) is None


def _imported_by_report(flag: str, expect: str, unwanted: str) -> list[str]:
    """The modules matching ``unwanted`` (a predicate on a module name ``m``, as Python source) that
    ``iodiag report LOG flag`` imports, in a fresh interpreter; ``expect`` must be in its output."""
    code = ("import io, sys, contextlib\nfrom iodiag.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
            f"    main(['report', {str(corpus_path(LOG))!r}, {flag!r}])\n"
            f"assert {expect!r} in out.getvalue(), out.getvalue()[:300]\n"
            f"print(sorted(m for m in sys.modules if {unwanted}))\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    return eval(res.stdout.strip())  # a printed list of strings


def test_report_json_imports_neither_typer_nor_numpy_ma():
    """The start-up cost the fast path and nputil remove stays removed (measured: ~40 ms and ~10 ms of CPU)."""
    assert _imported_by_report("--json", '"schema"', "m in ('typer', 'click', 'numpy.ma', 'hashlib', 'cffi.api')") == []


def test_terminal_report_imports_no_rich():
    """The terminal report is drawn without rich (~20 ms of imports on a report of ~170 ms)."""
    assert _imported_by_report("--no-color", "iodiag report — job", "m == 'rich' or m.startswith('rich.')") == []


def test_console_script_leaves_early_with_all_output_written(tmp_path):
    """`iodiag report` exits without the interpreter's teardown: stdout, --json-file and the HTML page must be
    complete all the same, and the exit code 0; an error still exits with its code."""
    import json
    import os

    script = os.path.join(os.path.dirname(sys.executable), "iodiag")
    if not os.path.exists(script):
        pytest.skip("the iodiag console script is not installed next to this Python")
    out, side, page = tmp_path / "out.json", tmp_path / "side.json", tmp_path / "page.html"
    with open(out, "wb") as fh:
        res = subprocess.run([script, "report", str(corpus_path(LOG)), "--json", "--json-file", str(side), "--html",
                              str(page)], stdout=fh, stderr=subprocess.PIPE, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    got = json.loads(out.read_text())
    assert got["schema"] == "iodiag.report/1" and got["findings"]
    assert json.loads(side.read_text()) == got
    assert page.read_text().rstrip().endswith("</html>")
    bad = subprocess.run([script, "report", str(tmp_path / "missing.darshan"), "--json"], capture_output=True,
                         timeout=120)
    assert bad.returncode == 3 and json.loads(bad.stdout)["errors"]
