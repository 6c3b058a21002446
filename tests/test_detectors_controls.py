"""Positive and negative controls: real corpus logs -> which findings fire, with their numbers.

Each expectation is explained from the log's own counters (printed with
darshan-parser or prof.counters), not from its file name.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import pytest

from iodiag.recommend.rules import diagnose_with_advice as diagnose
from iodiag.analyzers.load import load_job
from iodiag.config import Config

CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "darshan-logs"
if not CORPUS.is_dir():
    pytest.skip(f"corpus not found at {CORPUS}", allow_module_level=True)


@lru_cache(maxsize=None)
def findings_of(rel: str):
    paths = sorted(str(p) for p in CORPUS.glob(rel))
    assert paths, rel
    prof = load_job(paths)
    return {f.id: f for f in diagnose(prof, Config())}


def by(rel, fid):
    return findings_of(rel)[fid]


IMBALANCED = "darshan-logs/darshan_logs/imbalanced_io/imbalanced-io.darshan"
STDIO_PARTIAL = "darshan-logs/darshan_logs/partial_data_stdio/partial_data_stdio.darshan"
TIGHT = "generated/tight-64B-pwrite-pread-dxt-full/*.darshan"
META = "generated/smallio-metadata-heavy-maxrecords/*.darshan"
HALF = "darshan-logs/darshan_logs/hdf5_diagonal_write_only/hdf5_diagonal_write_half_ranks_dxt.darshan"
MPIIO16 = "darshan-logs/darshan_logs/mpi_io_test_with_dxt/*.darshan"
EMPTY = "darshan-logs/darshan_logs/empty_log/empty_log.darshan"
BADOST = "darshan/darshan-util/pydarshan/darshan/tests/input/sample-badost.darshan"
PDXT = "darshan-logs/darshan_logs/partial_data_dxt/partial_data_dxt.darshan"
DLIO = "darshan-logs/darshan_logs/dlio_logs/*.darshan"
H5BENCH = "drishti-io/sample/*.darshan"
VPIC = "darshan/darshan-util/pydarshan/darshan/tests/input/sample.darshan"
NC2ZARR = "generated/xarray-nc2zarr-1proc-dxt/*.darshan"
FORK = "generated/mp-pool-fork-terminate/*.darshan*"
DXT1024 = "dxt-explorer/sample/*.darshan"

CONTROLS = [
    # log, must fire, must not fire
    # POSIX shared record: SLOWEST_RANK 0 moved 105,876,790,000 B of 105,877 MB; fastest rank 2,072 B
    (IMBALANCED, {"rank-imbalance", "partial-log"}, {"straggler-process", "no-io"}),
    # STDIO[partial]: 1,022 records, 1,026 opens for 1,029 reads/writes; each file one 16 MiB fwrite,
    # so the files are NOT small (many-small-files must not fire) but there is one open per access
    (STDIO_PARTIAL, {"partial-log", "metadata-storm"}, {"many-small-files", "small-io"}),
    # 300,000 x 64 B writes (CONSEC_WRITES 299,999) + 300,000 x 64 B reads, SEQ_READS 292,081,
    # STRIDE1 gap 506,752 B: strided, not random
    (TIGHT, {"small-io"}, {"random-access", "partial-log", "many-small-files"}),
    # 2,000 files of 100 B; META_TIME 0.218 s vs read+write 0.090 s
    (META, {"metadata-storm", "many-small-files", "small-io"}, {"partial-log", "random-access"}),
    # H5D records only for ranks 0,2,4,6,8 (H5D_WRITES 1 each); ranks 1,3,5,7,9 open their file only
    (HALF, {"inactive-ranks"}, {"small-io", "no-io"}),
    # 128 reads + 128 writes of 16 MiB (SIZE_*_10M_100M), 64 writes < 100 B: small share 20 %
    (MPIIO16, set(), {"small-io", "random-access", "partial-log"}),
    # no module records at all
    (EMPTY, {"no-io"}, set()),
    # 2,048 file-per-process writers, equal bytes; 85 ranks take 60x the median time, all on OST 14
    (BADOST, {"straggler-process"}, {"rank-imbalance", "small-io"}),
    # 1,000,000 reads of 1 B all at offset 0 (DXT sample of 131,065 has one distinct offset):
    # re-reads, not random; DXT partial
    (PDXT, {"small-io", "partial-log"}, {"random-access"}),
    # 24 DLIO processes read 121 GiB from files holding 23.5 GiB (epochs re-read the samples)
    (DLIO, {"redundant-read"}, {"inactive-ranks", "no-io"}),
    # h5bench: MPI-IO collective writes, 64 of 384 ranks are the aggregators doing all POSIX I/O
    (H5BENCH, {"rank-imbalance"}, {"no-collective-io", "straggler-process", "small-io"}),
    # VPIC-IO: 16,401 of 16,402 POSIX ops unaligned to the 1 MiB Lustre stripe, shared file
    (VPIC, {"misaligned"}, {"small-io", "no-io"}),
    # a small xarray NetCDF->Zarr run: 24 POSIX reads/writes only, nothing at scale
    (NC2ZARR, set(), {"small-io", "metadata-storm", "many-small-files", "random-access", "partial-log"}),
    # 1,024 ranks: 121,858 POSIX reads of 100 B-1 KiB; SEQ_READS 65,461 of 122,942 (47 % jump back,
    # 46,275 of them not explained by a constant step in DXT); 41 ranks hold 99 % of the bytes
    (DXT1024, {"small-io", "random-access", "rank-imbalance"}, {"partial-log", "many-small-files"}),
    # a zero-byte .darshan_partial from a worker killed while writing its log
    (FORK, {"partial-log"}, {"no-io"}),
]


@pytest.mark.parametrize("rel,fire,quiet", CONTROLS, ids=[c[0].split("/")[-2] for c in CONTROLS])
def test_control(rel, fire, quiet):
    got = set(findings_of(rel))
    assert fire <= got, f"missing {fire - got}; got {sorted(got)}"
    assert not (quiet & got), f"should not fire: {quiet & got}"


def test_tight_small_io_names_the_stride_and_the_buffering_gain():
    f = by(TIGHT, "small-io")
    ev = f.evidence
    assert ev["small_reads"] == 300_000 and ev["small_writes"] == 300_000
    # DXT: reads step by exactly 506,816 B (= 64 B request + 506,752 B Darshan stride gap)
    assert ev["stride_bytes"] == 506_816 and ev["top_stride_gap_bytes"] == 506_752
    assert ev["strided_ops"] == 292_081  # equals POSIX_STRIDE1_COUNT
    # 300,000 consecutive 64 B writes = 19.2 MB -> 5 requests with a 4 MiB buffer
    assert ev["ops_in_consecutive_runs"] == 300_000 and ev["requests_after_buffering"] == 5
    assert "506,816 B" in f.recommendation and "strided, not random" in f.recommendation
    assert f.files == ["/tmp/darshan-test/tight.bin"]
    # a serial job: its 0.266 s of small I/O are 97 % of its 0.273 s of I/O and 54 % of its 0.49 s run
    assert f.severity == "high" and f.cost_share == pytest.approx(0.54, abs=0.01)
    assert f.evidence["cost_share_of_io_process_s"] > 0.9 and f.est_cost_s == pytest.approx(0.2655, abs=1e-3)


def test_metadata_heavy_numbers():
    m = by(META, "metadata-storm")
    assert m.evidence["opens_count"] == 2010  # 2,009 POSIX + 1 STDIO open
    assert m.evidence["metadata_time_share"] == pytest.approx(0.218 / (0.218 + 0.090), abs=0.01)
    s = by(META, "many-small-files")
    assert s.evidence["small_files"] >= 2000 and s.evidence["median_file_bytes"] == 100
    assert s.evidence["files_in_top_directory"] == 2000
    assert "-> 1 " in s.recommendation  # 264 KiB fit in one 64 MiB file


def test_inactive_ranks_are_the_odd_ranks():
    f = by(HALF, "inactive-ranks")
    assert f.processes == [1, 3, 5, 7, 9] and f.evidence["level"] == "H5D"


def test_empty_log_says_no_io_recorded():
    fs = findings_of(EMPTY)
    assert list(fs) == ["no-io"]
    assert fs["no-io"].title == "no I/O recorded" and fs["no-io"].severity == "info"


def test_imbalance_points_at_rank0_and_its_one_stripe_file():
    f = by(IMBALANCED, "rank-imbalance")
    assert f.processes == [0]
    assert f.evidence["share_of_bytes_on_heavy"] > 0.99
    assert f.evidence["top_file_stripe_count"] == 1
    assert "stripe count of 1" in f.recommendation
    # the header's "h" metadata ('romio_no_indep_rw=true;cb_nodes=4', also in the 1-process DLIO logs) is the
    # hint set Darshan used to write its own log, not the application's: it must not be quoted as such
    assert "cb_nodes=4" not in f.recommendation


def test_partial_log_gives_config_lines():
    f = by(IMBALANCED, "partial-log")
    assert "DARSHAN_CONFIG_PATH" in f.recommendation and "MAX_RECORDS 4096 POSIX" in f.recommendation
    assert f.severity == "medium"  # a counter module hit its cap: every number is a lower bound
    d = by(PDXT, "partial-log")
    # 1,000,000 POSIX ops x 32 B x 1.25 / 1 KiB = 39,063 records -> next power of two
    assert "MAX_RECORDS 65536 DXT_POSIX,DXT_MPIIO; MOD_ENABLE DXT_POSIX,DXT_MPIIO" in d.recommendation
    # the default 2 MiB DXT buffer holds 65,536 segments of 32 B; POSIX_READS says 1,000,000
    assert d.evidence["dxt_segments_recorded"] == 65_536
    assert d.evidence["dxt_missing_share"] == pytest.approx(1 - 65_536 / 1_000_000, abs=1e-6)
    assert d.severity == "low"  # only the trace was cut; the counters are complete


def test_badost_names_the_slow_ost():
    f = by(BADOST, "straggler-process")
    assert f.evidence["stragglers"] == 85 and f.evidence["suspect_ost"] == 14
    assert f.evidence["suspect_ost_other_files"] == 0
    assert "OST 14" in f.recommendation
    # POSIX_F_WRITE_END_TIMESTAMP: the median rank finished writing at 5.9 s, the stragglers at 727.7 s
    assert f.evidence["median_last_data_op_end_s"] < 10 < 700 < f.evidence["stragglers_last_data_op_end_s"]


def test_pdxt_small_io_recognises_rereads():
    f = by(PDXT, "small-io")
    assert f.evidence["same_offset_ops"] > 0.99 * f.evidence["dxt_small_ops"]
    assert f.evidence["dxt_complete"] is False


def test_stdio_partial_is_not_small_files():
    f = by(STDIO_PARTIAL, "metadata-storm")
    assert f.evidence["opens_per_data_op"] == pytest.approx(1026 / 1029, abs=1e-3)
    assert f.severity == "info"  # 0.036 s of metadata against 5.42 s of writes


DASKZARR = "generated/dask-localcluster-2workers-dxt-jobid/*.darshan"


def test_zarr_chunk_grid_and_rechunk_plan(tmp_path):
    """240x90x180 float32 x 2 vars written with chunks time=4, lat=45: grid (60, 2, 1) per array."""
    from iodiag.config import load_config

    prof = load_job(sorted(str(p) for p in CORPUS.glob(DASKZARR)))
    # 241 chunk files only: below the default 1,000-file threshold, so lower it from TOML
    cfg_file = tmp_path / "c.toml"
    cfg_file.write_text("[small_files]\ncount = 100\n")
    f = {x.id: x for x in diagnose(prof, load_config(cfg_file))}["many-small-files"]
    assert f.evidence["largest_array_chunk_grid"] == [60, 2, 1]
    assert f.evidence["zarr_chunk_files"] == 241  # 120 + 120 + 1 (the time coordinate)
    assert "x60 along dimension 0 (60 chunks) and x2 along dimension 1" in f.recommendation
    assert "241 -> 3" in f.recommendation
    assert "many-small-files" not in {x.id for x in diagnose(prof)}  # default threshold: 1,000 files


def test_metadata_storm_names_what_the_time_went_to():
    fs = findings_of(DASKZARR)
    # 99 % of META_TIME is on out.zarr chunk files (.partial + final names)
    assert fs["metadata-storm"].evidence["zarr-chunk_metadata_s"] > 0.9 * fs["metadata-storm"].evidence["metadata_s"]
    assert "Zarr chunk files" in fs["metadata-storm"].recommendation
    # in.nc is read in 64 B..64 KiB pieces at a constant 64,800 B step = 90 x 180 x 4 B, one time slab
    s = fs["small-io"]
    assert s.evidence["stride_bytes"] == 90 * 180 * 4 and s.evidence["array_file"].endswith("in.nc")
    assert "nccopy -c" in s.recommendation
    h = by(HALF, "metadata-storm")
    # 64 .py/.pyc/.so files under /users/.../.conda take 86 % of META_TIME; /users is not in the log's
    # mount table, so the path resolves to "/" (rootfs)
    assert h.evidence["python-import_metadata_s"] > 0.8 * h.evidence["metadata_s"]
    assert "importing modules (.py/.pyc/.so) from rootfs" in h.recommendation


def test_capped_trace_pattern_completed_from_counters():
    """tight-64B with default DXT memory: the trace stops after 65,465 segments (all writes), yet the
    counters still show 292,081 reads at a constant 506,752 B gap (POSIX_STRIDE1_*)."""
    f = by("generated/tight-64B-pwrite-pread-dxt-capped/*.darshan", "small-io")
    assert f.evidence["dxt_complete"] is False and f.evidence["dxt_small_ops"] == 65_465
    assert "DXT kept 65,465 of 600,000" in f.recommendation
    assert "292,081 small ops step through the file at a constant gap between accesses of 506,752 B" in f.recommendation
    assert "random-access" not in findings_of("generated/tight-64B-pwrite-pread-dxt-capped/*.darshan")


def test_partial_counter_module_that_was_not_decoded_still_gives_config_lines():
    # site ingest may be configured to decode fewer modules than the header marks partial:
    # STDIO is partial in this log but only POSIX is read, so no STDIO record is at hand
    prof = load_job([str(CORPUS / STDIO_PARTIAL)], modules=("POSIX",))
    assert "STDIO" in prof.job.partial_modules and prof.module("STDIO") is None
    f = next(f for f in diagnose(prof, Config()) if f.id == "partial-log")
    assert "MAX_RECORDS 4096 STDIO" in f.recommendation  # the floor, since no record count was seen
    assert f.evidence["records_per_process_seen"] == 0


def test_a_file_read_by_several_processes_is_named_once():
    """Dask job (one Darshan log per process): the workers each have a STDIO record of in.nc; the finding
    names the file once and counts distinct files, not records."""
    import glob

    paths = sorted(glob.glob(str(CORPUS / "generated/dask-localcluster-2workers-graceful/*.darshan")))
    assert len(paths) == 7
    f = next(f for f in diagnose(load_job(paths), Config()) if f.id == "stdio-heavy")
    assert f.files == ["/tmp/darshan-test/work-dask-graceful/in.nc", "/tmp/darshan-test/dask_zarr.py"]
    assert f.evidence["stdio_files"] == 2
