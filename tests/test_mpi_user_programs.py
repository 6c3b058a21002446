"""Small MPI programs of the kind HPC users write, run here under an MPI-enabled Darshan runtime (skipped with the
reason when ``mpicc``/``mpiexec`` or the runtime are absent): what iodiag says about them must match what the
program does (which ranks, which calls, which direction).  Programs in tests/cprogs."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from conftest import REPO
from iodiag.analyzers.detectors import diagnose
from iodiag.analyzers.load import load_job
from iodiag.recommend.rules import advise, rule_recommendations
from test_detectors_layer_time import _by, _mpi_runtime

PROGS = REPO / "tests" / "cprogs"


def _run(tmp_path: Path, prog: str, args: list[str], nprocs: int = 4) -> Path:
    lib = _mpi_runtime()
    exe = tmp_path / prog
    subprocess.run(["mpicc", "-O2", "-o", str(exe), str(PROGS / f"{prog}.c")], check=True, capture_output=True)
    logs = tmp_path / f"logs-{prog}"
    logs.mkdir()
    env = {**os.environ, "DARSHAN_LOGPATH": str(logs), "LD_PRELOAD": str(lib)}
    subprocess.run(["mpiexec", "-n", str(nprocs), str(exe), *args], check=True, env=env, capture_output=True,
                   timeout=120)
    got = sorted(logs.glob("*.darshan"))
    assert len(got) == 1, got
    return got[0]


def test_small_writes_of_a_shared_record_name_every_rank_not_rank_0(tmp_path):
    """4 ranks pwrite 1000-byte pieces into one shared file: Darshan keeps one record for it (rank -1).  small-io
    named process 0 alone (the shared record's -1 clipped to 0): every rank wrote; a reduced record names none."""
    log = _run(tmp_path, "pwrite_shared", [str(tmp_path / "pw.dat"), "3000", "1000"])
    prof = load_job([str(log)])
    px = prof.module("POSIX")
    assert (px["proc"][px["POSIX_WRITES"] > 0] < 0).all()  # the shared record: no process named by Darshan
    f = _by(diagnose(prof), "small-io")
    assert f.evidence["small_writes"] == 4 * 3000
    assert f.processes == []  # no rank singled out: the record is every rank's
    # consecutive pwrite calls, no stdio stream: the buffer is the program's own, not setvbuf's
    text = _by(advise([f]), "small-io").recommendation
    assert "continue the previous offset" in text and "setvbuf" not in text


def test_posix_writers_of_a_shared_file_get_posix_code_for_a_file_each(tmp_path):
    """The same program (open + pwrite, no stdio): shared-file-contention's change to one file per writer was an
    fopen() line; the program's own calls are open/pwrite."""
    log = _run(tmp_path, "pwrite_shared", [str(tmp_path / "pw.dat"), "3000", "1000"])
    prof = load_job([str(log)])
    found = diagnose(prof)
    assert _by(found, "shared-file-contention").evidence["max_writers"] == 4
    rec = next(r for r in rule_recommendations(prof, found) if r.id == "file-per-process")
    assert rec.changes[0].text.startswith("fd = open(name, O_CREAT | O_WRONLY") and "fopen" not in rec.changes[0].text


def test_a_file_opened_around_every_append_is_reopened_not_random(tmp_path):
    """4 ranks each append 3,000 records of 512 B to a file of their own, opening and closing it around every write.
    Darshan counts every write but the first as non-sequential (its offset restarts at each open); iodiag said
    "100% of 12,000 accesses jump backwards (random)", advised sorting the writes, said the small writes had "no
    sequential or strided pattern" and that "each process opens the same file(s)".  The writes follow re-opens
    of files each process has to itself."""
    log = _run(tmp_path, "open_append", [str(tmp_path / "app.dat"), "3000", "512"])
    prof = load_job([str(log)])
    px = prof.module("POSIX")
    mine = px["POSIX_WRITES"] > 0
    assert (px["POSIX_SEQ_WRITES"][mine] == 0).all() and (px["POSIX_OPENS"][mine] == 3000).all()  # as Darshan saw it
    found = advise(diagnose(prof))
    assert "random-access" not in [f.id for f in found]
    small = _by(found, "small-io")
    assert "11,996 small ops each follow a re-open of their file" in small.recommendation
    assert "no sequential or strided pattern" not in small.recommendation and "read" not in small.recommendation
    storm = _by(found, "metadata-storm")
    assert "each process opens the same" not in storm.recommendation
    assert "every process re-opens its own file(s)" in storm.recommendation


def test_a_c_program_writing_many_small_files_is_not_given_python(tmp_path):
    """4 ranks each create 400 files of 64 B with open/write/close (1,600 tiny files): the advice to write one
    file was an h5py snippet, Python, for a C program.  It gets MPI-IO calls writing each former file at its
    offset of one shared file, in lines that fit an 80-column terminal."""
    out = tmp_path / "many"
    out.mkdir()
    log = _run(tmp_path, "tiny_files", [str(out), "400", "64"])
    prof = load_job([str(log)])
    found = diagnose(prof)
    assert _by(found, "many-small-files").evidence["small_files"] == 1600
    rec = next(r for r in rule_recommendations(prof, found) if r.id == "pack-files")
    code = "\n".join(c.text for c in rec.changes if c.kind == "snippet")
    assert "h5py" not in code and "with " not in code
    assert "MPI_File_open(MPI_COMM_WORLD" in code and "MPI_File_write_at_all(fh, offset" in code
    assert max(len(line) for line in code.splitlines()) <= 72  # the report indents code by 8 columns


def test_collective_reads_get_read_hints_and_posix_writes_posix_code(tmp_path):
    """Rank 0 writes a 1024 x 1024 array with 8 KiB POSIX writes, then 4 ranks read their blocks collectively
    through a subarray view (MPI-IO reads only).  rank-imbalance's aggregators change said romio_cb_write (the
    job writes, but not through MPI-IO: its collective calls are reads), and small-io's change for the POSIX
    writes was an MPI_File_write_at call."""
    log = _run(tmp_path, "subarray_read", [str(tmp_path / "a.dat"), "1024", "2"])
    prof = load_job([str(log)])
    mp = prof.module("MPI-IO")
    assert mp["MPIIO_COLL_READS"].sum() > 0 and mp["MPIIO_COLL_WRITES"].sum() == mp["MPIIO_INDEP_WRITES"].sum() == 0
    found = advise(diagnose(prof))
    imb = _by(found, "rank-imbalance").recommendation
    lustre = any(str(x).lower() == "lustre" for x in prof.files["fs_type"].tolist())
    assert "romio_cb_read" in imb and ("OST" in imb) == lustre  # striping advice only where there are OSTs
    recs = {r.id: r for r in rule_recommendations(prof, found)}
    text = "\n".join(c.text for c in recs["aggregators"].changes)
    assert "romio_cb_read enable" in text and "romio_cb_write" not in text
    assert _by(found, "small-io").evidence["small_writes"] == 1024
    code = "\n".join(c.text for c in recs["buffering"].changes)
    assert "MPI_File" not in code and code.startswith("write(fd, buf, ")


def test_a_job_reading_many_small_files_and_printing_is_not_told_to_write_fewer(tmp_path):
    """4 ranks read 400 tiny files each (1,600) and print a line to stdout: the printing made the job "a writer",
    so many-small-files' change was "Write 1 file(s) instead of 1,600 small ones".  The job writes no data: it
    is told to pack its input files."""
    out = tmp_path / "many"
    out.mkdir()
    for r in range(4):
        for i in range(400):
            (out / f"r{r}_{i}.dat").write_bytes(b"y" * 64)
    log = _run(tmp_path, "tiny_files", [str(out), "400", "64", "read"])
    prof = load_job([str(log)])
    assert prof.module("STDIO")["STDIO_BYTES_WRITTEN"].sum() > 0  # the printed lines
    found = diagnose(prof)
    assert _by(found, "many-small-files").evidence["small_files"] == 1600
    rec = next(r for r in rule_recommendations(prof, found) if r.id == "pack-files")
    assert rec.title.startswith("Pack 1,600 small input files") and "tar cf" in rec.changes[0].text


def test_rank_0_doing_all_the_io_names_its_file_not_stdout(tmp_path):
    """Rank 0 writes and reads back 64 MiB while 3 ranks wait in a barrier, then prints a checksum: rank-imbalance
    and inactive-ranks fire on rank 0 / ranks 1-3, and the files rank-imbalance names to spread were the data
    file and <STDOUT> (a terminal is no file to spread)."""
    log = _run(tmp_path, "rank0_only", [str(tmp_path / "r0.dat"), "64"])
    prof = load_job([str(log)])
    found = diagnose(prof)
    imb = _by(found, "rank-imbalance")
    assert imb.processes == [0] and imb.evidence["share_of_bytes_on_heavy"] == 1.0
    assert imb.files == [str(tmp_path / "r0.dat")]
    assert _by(found, "inactive-ranks").processes == [1, 2, 3]
    assert "(or run with 1 process and save 3 idle ones)" in _by(advise(found), "inactive-ranks").recommendation
    assert all(f.est_cost_s <= prof.job.runtime_s for f in found)


def test_independent_reads_of_a_file_one_rank_wrote(tmp_path):
    """Rank 0 writes a 40 MB file with POSIX, then 4 ranks read 2 KiB strided pieces of it with independent
    MPI_File_read_at.  iodiag said "1 file(s) written by up to 4 processes without MPI-IO collective coordination"
    (the file's record, reduced over the ranks that all opened it, holds rank 0's writes; the heatmap shows one
    writer) and its one change was "Collective writes ... MPI_File_write_at_all" with romio_cb_write: the
    program's MPI-IO calls are reads."""
    log = _run(tmp_path, "indep_read", [str(tmp_path / "ir.dat"), "5000", "2048"])
    prof = load_job([str(log)])
    px = prof.module("POSIX")
    assert (px["proc"][px["POSIX_WRITES"] > 0] < 0).all()  # the writes sit in the reduced record
    found = advise(diagnose(prof))
    ids = [f.id for f in found]
    assert "shared-file-contention" not in ids and "no-collective-io" in ids
    recs = rule_recommendations(prof, found)
    coll = next(r for r in recs if r.id == "collective-io")
    text = "\n".join(c.text for c in coll.changes)
    assert "MPI_File_read_at_all" in text and "romio_cb_read enable" in text and "write" not in text
    assert not any("romio_cb_write" in c.text for r in recs for c in r.changes)


def test_lseek_read_at_random_offsets(tmp_path):
    """4 ranks each read 20,000 random 4 KiB pieces of a 16 MiB file of their own with lseek + read (no stat):
    the change for the seeks was titled "Drop 0 stats and 80,000 seeks", and small-io's change was to issue a
    4 MiB pread per small read (1,000 times the bytes, at random offsets) beside random-access's own (read the
    file once, in order)."""
    log = _run(tmp_path, "seek_read", [str(tmp_path / "sr.dat"), "16", "20000", "4096"])
    prof = load_job([str(log)])
    found = diagnose(prof)
    storm = _by(found, "metadata-storm")
    assert storm.evidence["seeks_count"] == 80_000 and storm.evidence["stats_count"] == 0
    rec = next(r for r in rule_recommendations(prof, found) if r.id == "fewer-metadata-calls")
    assert rec.title == "Drop 80,000 seeks"
    assert [c.text for c in rec.changes] == ["pread(fd, buf, n, offset);  /* instead of lseek + read */"]
    small = _by(found, "small-io")
    assert small.evidence["consecutive_ops_counter"] + small.evidence["strided_ops_counter"] < 0.2 * 80_000
    ids = [r.id for r in rule_recommendations(prof, found)]
    assert "random-access" in [f.id for f in found] and "read-whole" in ids and "buffering" not in ids
    # each file is read 5 times over by the one process that owns it: nothing to broadcast
    red = _by(advise(found), "redundant-read")
    assert red.evidence["worst_file_readers"] == 1 and "MPI_Bcast" not in red.recommendation
    assert "broadcast" not in ids and "read-once" in ids


def test_a_collective_open_per_step_is_told_to_open_once_not_to_open_collectively(tmp_path):
    """2 ranks open their shared file with MPI_File_open around each of 1,000 collective writes: metadata-storm
    said "each process opens the same file(s); open once and share the handle (MPI-IO/HDF5 collective open, ...)",
    what the program already does; each process re-opens the file a thousand times."""
    log = _run(tmp_path, "mpi_reopen", [str(tmp_path / "mr.dat"), "1000", "8192"], nprocs=2)
    prof = load_job([str(log)])
    mp = prof.module("MPI-IO")
    assert (mp["MPIIO_INDEP_OPENS"] + mp["MPIIO_COLL_OPENS"]).sum() == 2000
    storm = _by(advise(diagnose(prof)), "metadata-storm")
    assert "collective open" not in storm.recommendation
    assert "by 2 processes: each process opens them" in storm.recommendation
    assert "open once per process and keep the handle" in storm.recommendation
