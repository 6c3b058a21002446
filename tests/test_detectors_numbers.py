"""Each detector's evidence against numbers read from the log's own counters."""

from __future__ import annotations

import pytest

from test_detectors_controls import by, findings_of

VPIC = "darshan/darshan-util/pydarshan/darshan/tests/input/sample.darshan"
DLIO = "darshan-logs/darshan_logs/dlio_logs/*.darshan"
NOPOSIX = "darshan/darshan-util/pydarshan/darshan/tests/input/noposix.darshan"
MPIIO16 = "darshan-logs/darshan_logs/mpi_io_test_with_dxt/*.darshan"
IORH5 = "darshan/darshan-util/pydarshan/darshan/examples/example_logs/ior_hdf5_example.darshan"
DXT1024 = "dxt-explorer/sample/*.darshan"
H5BENCH = "drishti-io/sample/*.darshan"

NUMBERS = [
    # VPIC-IO: POSIX_FILE_NOT_ALIGNED 16,401 of 16,402 ops, LUSTRE stripe_size 1 MiB
    (VPIC, "misaligned", "misaligned_ops", 16_401),
    (VPIC, "misaligned", "lustre_stripe_bytes", 1_048_576),
    # DLIO: 168 sample files; sum POSIX_BYTES_READ 129,953,701,195 over sum of extents 25,286,065,583
    (DLIO, "redundant-read", "files", 168),
    (DLIO, "redundant-read", "bytes_read", 129_953_701_195),
    (DLIO, "redundant-read", "file_bytes", 25_286_065_583),
    # noposix: STDIO only, 2,390,124 fread/fwrite averaging 770 B
    (NOPOSIX, "stdio-heavy", "stdio_ops", 2_390_124),
    (NOPOSIX, "stdio-heavy", "stdio_share_of_bytes", 1.0),
    # ... and STDIO_SEEKS 203,265 (fseek/ftell on the streams: positioning inside the stream buffer, not
    # file-system metadata, so no metadata-storm) go with the small fread/fwrite calls: small-io at the STDIO layer
    (NOPOSIX, "small-io", "stdio_seeks", 203_265),
    (NOPOSIX, "small-io", "small_writes", 2_190_437),
    # mpi-io-test: MPIIO_INDEP_READS 128 + INDEP_WRITES 128, all 16 MiB (SIZE_*_AGG_10M_100M): none < 1 MiB
    (MPIIO16, "no-collective-io", "independent_ops", 256),
    (MPIIO16, "no-collective-io", "requests_below_1MiB", 0),
    # ... POSIX: 32 ranks write test.out, 128 writes of 16 MiB
    (MPIIO16, "shared-file-contention", "max_writers", 32),
    (MPIIO16, "shared-file-contention", "mean_write_bytes", 16_777_216),
    # IOR HDF5: MPIIO_COLL_WRITES 0 on test123.h5, 4 ranks, 23 POSIX writes totalling 4,195,800 B
    (IORH5, "shared-file-contention", "writes", 23),
    (IORH5, "shared-file-contention", "bytes_written", 4_195_800),
    # dxt-explorer: POSIX_READS 122,942 - SEQ_READS 65,461 = 57,481 backward reads (+43 writes)
    (DXT1024, "random-access", "non_sequential_reads", 57_481),
    (DXT1024, "random-access", "non_sequential_writes", 43),
    # h5bench: 64 collective-buffering aggregators move every POSIX byte; MPI-IO bytes are even
    (H5BENCH, "rank-imbalance", "heavy_processes", 64),
    (H5BENCH, "rank-imbalance", "share_of_bytes_on_heavy", 1.0),
]


@pytest.mark.parametrize("rel,fid,key,value", NUMBERS, ids=[f"{n[1]}-{n[2]}" for n in NUMBERS])
def test_evidence_number(rel, fid, key, value):
    got = by(rel, fid).evidence[key]
    assert got == pytest.approx(value, rel=1e-6), (fid, key, got)


def test_h5bench_mpiio_level_is_balanced():
    # the POSIX imbalance is the aggregators; at the MPI-IO level every rank moves the same bytes
    assert by(H5BENCH, "rank-imbalance").evidence["mpiio_max_over_median"] == pytest.approx(1.0, abs=1e-3)


def test_large_independent_requests_are_not_costly():
    f = by(MPIIO16, "no-collective-io")
    assert f.severity == "info" and f.est_cost_s == 0  # collective buffering gains little on 16 MiB blocks


def test_every_finding_has_numbers_and_advice():
    for rel in (VPIC, DLIO, NOPOSIX, MPIIO16, IORH5, DXT1024, H5BENCH):
        for f in findings_of(rel).values():
            assert f.evidence and f.recommendation and f.title
            assert all(isinstance(v, (int, float, str, bool, list, type(None))) for v in f.evidence.values())
            if f.est_cost_s is not None:
                assert f.est_cost_s >= 0 and 0 <= (f.cost_share or 0) <= 1


def test_report_spread_is_the_detectors_per_process_time():
    """The report's per-process line and the imbalance detector read one set of numbers: the time model's
    seconds over every layer (MPI-IO time beyond the POSIX time beneath it: ranks waiting in collective calls
    show their wait), shared records credited to their slowest rank."""
    import numpy as np

    from iodiag.analyzers.metrics import metrics_of
    from iodiag.analyzers.summary import spread
    from iodiag.analyzers.timemodel import time_model_of
    from test_detectors_controls import CORPUS, IMBALANCED, load_job

    prof = load_job([str(CORPUS / IMBALANCED)])
    sp = spread(prof)
    tm = time_model_of(prof)
    per = tm.proc_layer_s
    assert sp.processes == len(prof.processes) == 496
    assert sp.max_s == pytest.approx(float(per.max())) and sp.median_s == pytest.approx(float(np.median(per)))
    assert sp.slowest[0] == 0 == by(IMBALANCED, "rank-imbalance").processes[0]
    # every second is someone's: the per-process times add up to the job's I/O time, which is the POSIX-level
    # total plus the MPI-IO seconds beyond it
    assert float(per.sum()) == pytest.approx(tm.io_process_s, rel=1e-9)
    assert tm.io_process_s == pytest.approx(metrics_of(prof).total_io_s + float(tm.proc_mpiio_wait_s.sum()), rel=1e-9)
