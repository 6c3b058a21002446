"""`iodiag run --collector embedded`: the job holds traces/ and loads through the embedded reader."""

from __future__ import annotations

import pytest

from conftest import run_cli
from iodiag.analyzers.job import load_job_record
from iodiag.errors import IodiagError
from iodiag.jobs.store import find_job

SCRIPT = r'''
import os, sys
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
for i in range(50):
    with open(os.path.join(out, f"f{i}"), "wb") as fh:
        fh.write(b"z" * 1000)
for i in range(50):
    os.stat(os.path.join(out, f"f{i}"))
# iodiag's own bookkeeping in the job folder (as the Dask capture and workload records do)
for i in range(12):
    with open(os.path.join(os.environ["IODIAG_JOB_DIR"], "own-record.json"), "a") as fh:
        fh.write("{}\n")
sys.exit(3)
'''


def _run_embedded(tmp_path, script_text: str, exit_code: int):
    """``iodiag run --collector embedded`` of a script writing into tmp_path/out; the stored job record."""
    try:
        from iodiag.collectors import embedded

        embedded.build()
    except (ImportError, IodiagError) as exc:
        pytest.skip(f"the embedded collector cannot be built here: {exc}")
    script = tmp_path / "w.py"
    script.write_text(script_text)
    home = {"IODIAG_HOME": str(tmp_path / "store")}
    run = run_cli("run", "--collector", "embedded", str(script), str(tmp_path / "out"), env=home)
    assert run.returncode == exit_code, run.stderr.decode()[-2000:]
    return find_job("last", root=tmp_path / "store")


def test_embedded_collector_job_is_recorded_and_loads(tmp_path):
    from iodiag.collectors import embedded

    rec = _run_embedded(tmp_path, SCRIPT, 3)
    assert rec.data["collector"] == "embedded" and rec.data["versions"]["embedded"] == embedded.version()
    assert rec.data["status"] == "complete" and rec.data["exit_code"] == 3
    assert any(t.endswith(".iot") for t in rec.data["artefacts"]["traces"])
    prof = load_job_record(rec)
    assert prof.job.collector == "embedded" and prof.job.job_id == rec.id
    assert rec.data["pid"] in prof.processes["pid"].tolist()
    files = [p for p in prof.files["path"].tolist() if "/out/f" in p]
    assert len(files) == 50
    # the job folder is excluded like Darshan's NAME_EXCLUDE: iodiag's own files are not the workload's I/O
    assert not [p for p in prof.files["path"].tolist() if p.startswith(str(rec.folder))]
    assert (rec.folder / "own-record.json").read_text().count("{}") == 12
    assert prof.job.metadata["exit_code"] == "3"


SMALL_OPS = r'''
import os, sys
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
path = os.path.join(out, "small.bin")
fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC)
for i in range(4000):
    os.write(fd, b"x" * 64)
os.close(fd)
fd = os.open(path, os.O_RDONLY)
for i in range(4000):
    os.lseek(fd, (i * 7919 % 4000) * 64, 0)
    os.read(fd, 64)
os.close(fd)
for i in range(400):
    p = os.path.join(out, f"f{i}")
    with open(p, "wb") as fh:
        fh.write(b"z" * 100)
    os.stat(p)
'''


def test_detector_gates_hold_on_an_embedded_collector_job(tmp_path, monkeypatch):
    """The detectors' early exits were checked on Darshan logs; the embedded collector's profiles (counters
    derived from its traced operations) must not be cut short by them either."""
    from iodiag.config import Config
    from test_detectors_gates import gates_agree

    rec = _run_embedded(tmp_path, SMALL_OPS, 0)
    found = gates_agree(lambda: load_job_record(rec), Config(), monkeypatch)
    # 4,000 writes and 4,000 reads of 64 B, 400 files created and stat'ed: gated detectors that fire
    assert {"small-io", "metadata-storm"} <= {f["id"] for f in found}, [f["id"] for f in found]


POOL = r'''
import multiprocessing as mp, os, sys
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
def f(x):
    with open(os.path.join(out, f"p{x}.txt"), "w") as fh:
        fh.write("x" * 100)
    return x
if __name__ == "__main__":
    with mp.get_context("fork").Pool(3) as p:
        print(sum(p.map(f, range(12))))
'''


def test_fork_pool_workers_are_children_not_unknown_kills(tmp_path):
    """multiprocessing fork-pool workers end without exit handlers (terminated by the pool, or os._exit): the job
    names them as child processes and says how they ended, without calling them unknown."""
    rec = _run_embedded(tmp_path, POOL, 0)
    prof = load_job_record(rec)
    roles = prof.processes["role"].tolist()
    # (a worker that got no task makes no traced call and leaves no trace: at least one child)
    assert roles.count("main") == 1 and roles.count("child") == len(roles) - 1 >= 1
    causes = [i.cause for i in prof.issues_seen if i.kind == "killed"]
    assert all("unknown" not in c and "os._exit" in c for c in causes)
    files = [p for p in prof.files["path"].tolist() if "/out/p" in p]
    assert len(files) == 12  # every worker's writes are in the job
