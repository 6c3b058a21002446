"""What a new user's own scripts (not iodiag's workloads), run for real, are told: the job is named after the
script even when the interpreter has options with a value (``python -W ignore script.py``)."""

from __future__ import annotations

import json
import sys

from conftest import run_cli

TINY = "open('out.txt', 'w').write('x' * 100)\n"


def test_python_options_with_a_value_do_not_name_the_job(tmp_path):
    env = {"IODIAG_HOME": str(tmp_path / "home")}
    (tmp_path / "tiny.py").write_text(TINY)
    r = run_cli("run", "--collector", "embedded", "--", sys.executable, "-W", "ignore", "-X", "utf8", "tiny.py",
                env=env, cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr.decode()[-2000:]
    assert "job " in r.stderr.decode() and "-tiny-" in r.stderr.decode()  # not "-ignore-"
    rep = json.loads(run_cli("report", "last", "--json", env=env).stdout)
    assert rep["job"]["program"] == "tiny.py"
