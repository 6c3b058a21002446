"""Every form of TARGET goes through one dispatcher (``analyzers.locate.resolve``) and works with every command that
takes a job: a job folder (or its job.json), a job id, a unique prefix, a name and 'last' of a job recorded by
``iodiag run --collector embedded``; a Darshan log (also renamed, recognised by its header), a folder of logs, and a
scheduler job id in a site log tree.  A path that exists but is none of these says what it is and what is accepted.
"""

from __future__ import annotations

import json
import shutil
import sys

import pytest

from conftest import CORPUS, corpus_path, require_embedded, run_cli
from iodiag.analyzers.locate import resolve
from iodiag.errors import InputNotFound, InputUnreadable, UsageError

LOG = "darshan-logs/darshan_logs/release_logs/mpi-io-test-x86_64-3.4.0.darshan"
TREE = CORPUS / "pytokio/tests/inputs/darshanlogs"
WRITE = "import sys; open(sys.argv[1], 'wb').write(b'x' * 123457)"


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    """One embedded job in a store of its own: (store, job folder, bytes the program wrote)."""
    require_embedded()
    tmp = tmp_path_factory.mktemp("targets")
    store = tmp / "store"
    r = run_cli("run", "--collector", "embedded", "--name", "wr", "--", sys.executable, "-c", WRITE,
                str(tmp / "out.bin"), env={"IODIAG_HOME": str(store)}, timeout=600)
    assert r.returncode == 0, r.stderr.decode()[-2000:]
    (folder,) = (store / "jobs").iterdir()
    return store, folder, 123457


def _report(target, store, *args):
    r = run_cli("report", str(target), "--json", *args, env={"IODIAG_HOME": str(store)})
    assert r.returncode == 0, (target, r.stderr.decode()[-2000:])
    return json.loads(r.stdout)


def test_every_form_of_an_embedded_job_gives_the_same_report(job):
    store, folder, nbytes = job
    by_folder = _report(folder, store)
    assert by_folder["job"]["id"] == folder.name
    assert by_folder["volumes"]["bytes_written"] == nbytes  # the program's one write; nothing else writes
    for form in (folder / "job.json", folder.name, folder.name[:13], "wr", "last"):
        assert _report(form, store) == by_folder, form
    # in-process: what each form resolved to
    for form, how in ((folder, "job folder"), (folder / "job.json", "job folder"), ("last", "job id"),
                      (folder.name, "job id")):
        got = resolve(str(form), store=store)
        assert (got.kind, got.how, got.record.id) == ("job", how, folder.name)


def test_other_commands_take_a_job_folder(job):
    store, folder, _ = job
    env = {"IODIAG_HOME": str(store)}
    cmp = run_cli("compare", str(folder), "last", "--json", env=env)
    assert cmp.returncode == 0, cmp.stderr.decode()[-2000:]
    rec = run_cli("recommend", str(folder), "--json", env=env)
    assert rec.returncode == 0, rec.stderr.decode()[-2000:]
    assert json.loads(rec.stdout)
    # --job picks among the jobs of a folder of logs; a job folder is one job
    bad = run_cli("report", str(folder), "--job", "123", env=env)
    assert bad.returncode == 2 and "one job" in bad.stderr.decode() and "Traceback" not in bad.stderr.decode()
    # inside a job folder: which folder to give
    inner = run_cli("report", str(folder / "traces"), env=env)
    err = inner.stderr.decode()
    assert inner.returncode == 3 and f"iodiag report {folder}" in err and "Traceback" not in err
    # the store itself is not a job
    top = run_cli("report", str(store), env=env)
    assert top.returncode == 3 and "job store (1 job)" in top.stderr.decode()


def test_logs_a_renamed_log_a_folder_of_logs_and_a_tree_job(tmp_path):
    log = corpus_path(LOG)
    plain = _report(log, tmp_path)
    logs = tmp_path / "logs"
    logs.mkdir()
    shutil.copy(log, logs / log.name)
    renamed = tmp_path / "mpi-io-test.log"  # no .darshan in the name: recognised by its header
    shutil.copy(log, renamed)
    for form, how in ((logs, "folder of logs"), (renamed, "log")):
        assert resolve(str(form)).how == how
        rep = _report(form, tmp_path)
        same = lambda r: ({k: v for k, v in r["job"].items() if k != "logs"}, r["findings"], r["volumes"])  # noqa: E731
        assert same(rep) == same(plain) and rep["job"]["logs"] == [str(form if form.is_file() else logs / log.name)]
    got = resolve("4478544", log_tree=str(TREE))
    assert got.kind == "logs" and got.how == "log tree" and got.logs.job_id == "4478544" and got.logs.paths


def test_a_path_that_is_none_of_the_forms_says_what_it_is(tmp_path):
    text = tmp_path / "notes.txt"
    text.write_text("not a log\n")
    with pytest.raises(InputNotFound, match="a text file of 10 bytes: not a Darshan log") as e:
        resolve(str(text))
    assert "job id" in e.value.hint and "folder of logs" in e.value.hint
    xz = tmp_path / "run.darshan.xz"
    xz.write_bytes(b"\xfd7zXZ\x00")
    with pytest.raises(InputUnreadable, match="compressed Darshan log") as e:
        resolve(str(xz))
    assert "unxz -k" in e.value.hint
    with pytest.raises(InputNotFound, match="holds 1 compressed log"):
        resolve(str(tmp_path))
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputNotFound, match="not an iodiag job folder"):
        resolve(str(tmp_path / "empty"))
    with pytest.raises(InputNotFound, match="no job 'nope-zz'"):
        resolve("nope-zz", store=tmp_path / "store")
    p = run_cli("report", str(text))
    err = p.stderr.decode()
    assert p.returncode == 3 and err.startswith("iodiag: error:") and "Traceback" not in err


def test_verify_says_a_log_is_not_a_recorded_job():
    with pytest.raises(UsageError, match="a Darshan log, not an iodiag job"):
        from iodiag.config import Config
        from iodiag.service import verify_job

        verify_job(target=str(corpus_path(LOG)), config=Config())
