"""Each byte at the layer that asked for it: read-modify-write under MPI-IO, and advice in the program's terms."""

from __future__ import annotations

import glob

import pytest

from conftest import CORPUS, corpus_path
from iodiag.analyzers.context import job_context
from iodiag.recommend.rules import diagnose_with_advice as diagnose
from iodiag.analyzers.load import load_job

H5BENCH_W = ("drishti-io/sample/jlbez_8a_benchmark_write_parallel_id1322696_8-21-14519-8141979180909667175_12"
             ".darshan")


def _ids(findings):
    return {f.id: f for f in findings}


def test_data_sieving_writes_are_read_modify_write_not_redundant_reads():
    """h5bench write (384 ranks, HDF5 over MPI-IO, DXT): POSIX reads 24.1 GiB (1,603 reads) of the one file the
    program writes, while MPI-IO reads 0 B; DXT shows 1,580 of the 1,602 traced reads of that file followed by a write of the same
    process at the same offset and length: ROMIO's read-modify-write, not the application re-reading data."""
    prof = load_job([str(corpus_path(H5BENCH_W))])
    f = _ids(diagnose(prof))
    assert "redundant-read" not in f
    rmw = f["read-modify-write"]
    ev = rmw.evidence
    assert ev["posix_bytes_read"] == pytest.approx(25_876_229_792) and ev["mpiio_bytes_read"] == 0
    assert ev["dxt_reads_rewritten_same_extent"] == 1580 and ev["dxt_posix_reads"] == 1602
    # every MPI-IO write of the file is collective, on GPFS (no LUSTRE record): the reads are collective
    # buffering's, which romio_ds_write (independent I/O only) does not touch and romio_lustre_ds_in_coll (Lustre
    # only) cannot reach; the advice names no hint that would not apply
    mp = prof.module("MPI-IO")
    assert ev["mpiio_collective_writes"] == ev["mpiio_writes"] == mp["MPIIO_COLL_WRITES"].sum() > 0
    assert mp["MPIIO_INDEP_WRITES"].sum() == 0 and prof.module("LUSTRE") is None
    assert "romio_ds_write=disable" not in rmw.recommendation and "romio_lustre_ds_in_coll" not in rmw.recommendation
    assert "collective buffering" in rmw.recommendation and "without holes" in rmw.recommendation
    assert "Dask" not in rmw.recommendation
    assert 0 < rmw.est_cost_s < prof.job.runtime_s and rmw.severity in ("medium", "high")


def test_read_modify_write_needs_an_upper_layer_that_reads_nothing():
    """No corpus log without MPI-IO writes gets read-modify-write (its POSIX reads are the program's own)."""
    hits = []
    for path in sorted(glob.glob(str(CORPUS / "darshan-logs/darshan_logs/**/*.darshan"), recursive=True))[:60]:
        try:
            prof = load_job([path])
        except Exception:  # noqa: BLE001 - damaged logs of the corpus are other tests' business
            continue
        if "read-modify-write" in _ids(diagnose(prof)):
            hits.append(path)
            assert prof.module("MPI-IO") is not None, path


def test_job_context_from_what_the_collector_saw():
    mpi = load_job([str(corpus_path(H5BENCH_W))])
    assert job_context(mpi).kind == "mpi" and not job_context(mpi).python
    dlio = sorted(glob.glob(str(CORPUS / "darshan-logs/darshan_logs/dlio_logs/*.darshan")))
    if not dlio:
        pytest.skip("DLIO logs not in the corpus")
    py = load_job(dlio[:1])
    assert job_context(py).kind == "python"
    # redundant-read advice in the program's terms: a single Python process is told to cache, not to MPI_Bcast
    for path in dlio:
        f = _ids(diagnose(load_job([path]))).get("redundant-read")
        if f:
            assert "MPI_Bcast" not in f.recommendation and "cache" in f.recommendation
            break
    else:
        pytest.fail("no DLIO log re-reads its samples")
