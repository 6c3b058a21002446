"""No command path ends in a traceback: bad and edge input give one line (path, cause, next step) and an exit code.

Every subcommand is walked with a missing path, an empty folder and a damaged file; the newcomer cases of the
first hour are checked on real jobs (an embedded-collector job that made no read or write, an ambiguous job-id
prefix, a job name used as its id, --version, --json on an error).
"""

from __future__ import annotations

import json
import sys

import pytest

from conftest import require_embedded, run_cli


def _no_traceback(res) -> str:
    err = res.stderr.decode(errors="replace")
    assert "Traceback" not in err and "Traceback" not in res.stdout.decode(errors="replace"), err[-3000:]
    return err


@pytest.fixture()
def bad_inputs(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    damaged = tmp_path / "damaged.darshan"
    damaged.write_bytes(b"\x00garbage" * 100)
    toml = tmp_path / "bad.toml"
    toml.write_text("[sweep\nname=")
    return {"missing": str(tmp_path / "nope"), "empty": str(empty), "damaged": str(damaged), "toml": str(toml),
            "home": {"IODIAG_HOME": str(tmp_path / "store")}}


COMMANDS = [
    ("report", "{missing}"), ("report", "{empty}"), ("report", "{damaged}"), ("report", "{damaged}", "--json"),
    ("report", "last"), ("report", "{missing}", "--config", "{toml}"), ("report", "{missing}", "--html"),
    ("compare", "{missing}", "{damaged}"), ("compare", "{empty}", "{empty}", "--json"),
    ("site", "ingest", "{missing}", "--out", "{empty}/x.parquet"), ("site", "ingest", "{empty}", "--out", "{empty}/s"),
    ("site", "report", "{missing}"), ("site", "report", "{empty}"),
    ("sweep", "plan", "{missing}"), ("sweep", "plan", "{toml}"), ("sweep", "collect", "{missing}"),
    ("sweep", "collect", "{empty}"), ("sweep", "analyze", "{empty}"), ("sweep", "analyze", "{missing}"),
    ("workload", "read", "--path", "{missing}"), ("workload", "read", "--path", "{damaged}"),
    ("workload", "convert", "--src", "{damaged}", "--dst", "{empty}/o.zarr"),
]


@pytest.mark.parametrize("argv", COMMANDS, ids=[" ".join(c) for c in COMMANDS])
def test_every_command_fails_in_one_line(argv, bad_inputs):
    args = [a.format(**bad_inputs) for a in argv]
    res = run_cli(*args, env=bad_inputs["home"], timeout=120)
    err = _no_traceback(res)
    assert res.returncode != 0, (args, err)
    lines = [x for x in err.splitlines() if x.strip()]
    assert lines and ("iodiag" in err or "Usage:" in err), (args, err)
    if "--json" in args and res.returncode not in (2,):
        out = json.loads(res.stdout)
        assert out["schema"] == "iodiag.report/1" or "errors" in out
        assert out["errors"]


def test_first_hour_cases(tmp_path):
    require_embedded()
    home = {"IODIAG_HOME": str(tmp_path / "store")}
    # a job whose only process makes no read or write (was: IndexError in the embedded reader)
    run = run_cli("run", "--collector", "embedded", "--", sys.executable, "-c", "import sys; sys.exit(7)", env=home)
    assert run.returncode == 7
    rep = run_cli("report", "last", env=home)
    _no_traceback(rep)
    assert rep.returncode == 0 and b"iodiag report" in rep.stdout
    # a job name is an id: the newest job of that name
    run = run_cli("run", "--collector", "embedded", "--name", "era-bad", "--", sys.executable, "-c", "pass", env=home)
    assert run.returncode == 0
    named = run_cli("report", "era-bad", "--json", env=home)
    assert named.returncode == 0, named.stderr.decode()
    assert "era-bad" in json.loads(named.stdout)["job"]["id"]
    # an ambiguous prefix lists the matching jobs (was: AttributeError)
    amb = run_cli("report", "20", env=home)
    err = _no_traceback(amb)
    assert amb.returncode == 5 and err.count("\n  20") >= 2, err
    # --version
    ver = run_cli("--version")
    assert ver.returncode == 0 and ver.stdout.decode().startswith("iodiag ")
    # --json prints an errors object even when nothing could be read
    miss = run_cli("report", str(tmp_path / "none.darshan"), "--json", env=home)
    assert miss.returncode == 3
    obj = json.loads(miss.stdout)
    assert obj["schema"] == "iodiag.report/1" and obj["findings"] == [] and obj["errors"][0]["exit_code"] == 3


def test_html_of_a_killed_job(tmp_path):
    """A job whose process was killed (a load issue without a module) renders its HTML page (was: UndefinedError)."""
    require_embedded()
    home = {"IODIAG_HOME": str(tmp_path / "store")}
    code = f"import os; open({str(tmp_path / 'x')!r}, 'w').write('x'); os.kill(os.getpid(), 9)"
    run = run_cli("run", "--collector", "embedded", "--", sys.executable, "-c", code, env=home)
    assert run.returncode == 137
    page = tmp_path / "r.html"
    rep = run_cli("report", "last", "--html-path", str(page), env=home)
    _no_traceback(rep)
    assert rep.returncode == 0 and "killed" in page.read_text()


def test_darshan_lib_must_be_the_runtime(tmp_path):
    """--darshan-lib given darshan-util (pydarshan's bundled libdarshan-util, a real file here) is refused with
    the reason, instead of a job that ends partial with "no Darshan log"."""
    import glob
    import os

    import darshan

    utils = glob.glob(os.path.join(os.path.dirname(darshan.__file__), "..", "darshan.libs", "libdarshan-util*"))
    if not utils:
        pytest.skip("pydarshan bundles no libdarshan-util here")
    res = run_cli("run", f"--darshan-lib={utils[0]}", "--", sys.executable, "-c", "pass",
                  env={"IODIAG_HOME": str(tmp_path / "store")})
    err = _no_traceback(res)
    assert res.returncode == 8 and "darshan-util" in err and "not the Darshan runtime" in err
    assert not (tmp_path / "store" / "jobs").exists() or not any((tmp_path / "store" / "jobs").iterdir())


def test_html_option_is_one_grammar(tmp_path):
    """`--html PATH` and `--html` alone work the same way for report and compare."""
    from conftest import corpus_path

    log = str(corpus_path("darshan/darshan-util/pydarshan/darshan/examples/example_logs/dxt.darshan"))
    page = tmp_path / "r.html"
    assert run_cli("report", log, "--html", str(page)).returncode == 0 and page.stat().st_size > 10000
    res = run_cli("compare", log, log, "--html", cwd=str(tmp_path))
    assert res.returncode == 0, res.stderr.decode()[-1000:]
    assert (tmp_path / "iodiag-compare.html").stat().st_size > 1000
    from iodiag.cli import normalize_html

    assert normalize_html(["report", "x.darshan", "--html"]) == ["report", "x.darshan", "--html"]
    assert normalize_html(["site", "report", "d", "--html"]) == ["site", "report", "d", "--html=iodiag-site-report.html"]
    assert normalize_html(["run", "--", "app", "--html", "a.html"]) == ["run", "--", "app", "--html", "a.html"]
