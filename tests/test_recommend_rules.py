"""recommend/rules.py on real corpus logs: the "What to change" a finding gets names the I/O layer the program
actually used (an HDF5 property, a PnetCDF hint, an MPI-IO hint, or the program's own requests), and the
finding's own advice text names the same change.

Where no corpus log crosses a detector's default threshold for a case, the test lowers that threshold through
the typed Config (``LOOSE``) instead of building data: the counters are still the log's own.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from conftest import corpus_path, run_cli
from iodiag.analyzers.load import load_job
from iodiag.config import Config
from iodiag.recommend.rules import diagnose_with_advice, rule_recommendations

E3SM = "darshan-logs/darshan_logs/e3sm_io_heatmaps_and_dxt/e3sm_io_heatmap_only.darshan"  # PnetCDF over MPI-IO
VPIC = "darshan/darshan-util/pydarshan/darshan/tests/input/sample.darshan"  # writes vpicio.hdf5; no HDF5 module
DBSCAN = ("pytokio/tests/inputs/darshanlogs/2017/3/20/"  # reads the vpicio.hdf5 that VPIC wrote
          "glock_dbscan_read_id4478544_3-20-7800-15217972833987807816_1.darshan")
IOR_HDF5 = "darshan/darshan-util/pydarshan/darshan/examples/example_logs/ior_hdf5_example.darshan"  # H5F/H5D
IOR_POSIX = ("darshan-logs/darshan_logs/ior_daos/"  # IOR's POSIX backend: no I/O library
             "snyder_ior-POSIX_id1057716-202103_11-8-64415-6936117869459351096_1.darshan")

# the misaligned detector's default share (half the requests) and op count, lowered so that the IOR logs' files,
# misaligned in a third of their requests, are reported
LOOSE = replace(Config(), access=replace(Config().access, min_ops=10, alignment_share=0.3))


def _advised(rel: str, cfg: Config | None = None):
    cfg = cfg or Config()
    prof = load_job([str(corpus_path(rel))], config=cfg)
    findings = diagnose_with_advice(prof, cfg)
    recs = rule_recommendations(prof, findings, cfg)
    return prof, {f.id: f for f in findings}, {r.id: r for r in recs}


def _texts(rec) -> str:
    return "\n".join(c.text for c in rec.changes)


# ------------------------------------------------------------------------------------------------ misaligned
def test_pnetcdf_job_gets_pnetcdf_alignment_hints_and_no_hdf5_call():
    prof, found, recs = _advised(E3SM)
    assert prof.module("PNETCDF_FILE") is not None and prof.module("H5F") is None and prof.module("H5D") is None
    mis = found["misaligned"]
    a = mis.evidence["alignment_bytes"]
    assert "H5Pset_alignment" not in mis.recommendation
    assert f"nc_var_align_size={a}" in mis.recommendation and f"nc_record_align_size={a}" in mis.recommendation
    rec = recs["alignment"]
    assert rec.addresses == ("misaligned",) and "H5Pset_alignment" not in _texts(rec)
    env = next(c for c in rec.changes if c.kind == "env")
    assert env.name == "PNETCDF_HINTS" and env.text.startswith("export PNETCDF_HINTS=") and env.value in env.text
    # the change and the finding's text name the same hints with the same value
    hints = env.value.split(";")
    assert hints == [f"nc_var_align_size={a}", f"nc_record_align_size={a}"]
    assert all(h in mis.recommendation for h in hints)
    # the job writes collectively already (MPI-IO COLL_WRITES on these files): the text does not ask for it
    assert "*_all calls" not in mis.recommendation


def test_pnetcdf_job_report_at_80_columns_shows_the_hints_under_what_to_change():
    r = run_cli("report", str(corpus_path(E3SM)), env={"COLUMNS": "80"})
    assert r.returncode == 0, r.stderr.decode()
    out = r.stdout.decode()
    change = out[out.index("What to change"):]
    change = change[: change.index("\n\n")]
    assert "PNETCDF_HINTS" in change and "nc_var_align_size=1048576" in change
    assert "H5Pset_alignment" not in out  # neither in the finding nor in the change


def test_hdf5_job_keeps_h5pset_alignment():
    prof, found, recs = _advised(IOR_HDF5, LOOSE)
    assert prof.module("H5F") is not None
    mis = found["misaligned"]
    a = mis.evidence["alignment_bytes"]
    assert f"H5Pset_alignment(fapl, {a}, {a})" in mis.recommendation
    assert [c.text for c in recs["alignment"].changes] == [f"H5Pset_alignment(fapl, {a}, {a});"]
    assert "nc_var_align_size" not in mis.recommendation and "striping_unit" not in _texts(recs["alignment"])


def test_a_file_named_hdf5_is_hdf5_when_the_log_has_no_hdf5_module():
    # Darshan 3.1 (2017) had no HDF5 module: the MPI-IO file vpicio.hdf5 is HDF5 by its name
    prof, found, recs = _advised(VPIC)
    assert prof.module("H5F") is None and prof.module("MPI-IO") is not None
    mis = found["misaligned"]
    a = mis.evidence["alignment_bytes"]
    assert mis.files[0].endswith("vpicio.hdf5") and "by its name" in mis.recommendation
    assert [c.text for c in recs["alignment"].changes] == [f"H5Pset_alignment(fapl, {a}, {a});"]


def test_a_job_that_only_reads_an_hdf5_file_is_told_how_to_realign_a_copy():
    prof, found, recs = _advised(DBSCAN)
    mis = found["misaligned"]
    assert prof.module("POSIX")["POSIX_BYTES_WRITTEN"].clip(0).sum() == 0  # the premise: it writes no file
    a = mis.evidence["alignment_bytes"]
    shell = next(c for c in recs["alignment"].changes if c.kind == "shell")
    src, dst = shell.text.split()[-2:]
    assert shell.text.startswith(f"h5repack -t {a} -a {a} ") and src == mis.files[0] and dst != src
    assert shell.text in mis.recommendation and "only reads them" in mis.recommendation


def test_a_posix_only_job_is_told_to_align_its_own_requests():
    prof, found, recs = _advised(IOR_POSIX, LOOSE)
    assert prof.module("MPI-IO") is None and prof.module("H5F") is None and prof.module("PNETCDF_FILE") is None
    mis = found["misaligned"]
    a = mis.evidence["alignment_bytes"]
    text = mis.recommendation + _texts(recs["alignment"])
    for other in ("H5Pset_alignment", "striping_unit", "nc_var_align_size"):
        assert other not in text
    assert "(POSIX, no I/O library above it)" in mis.recommendation
    assert f"/ {a} * {a}" in _texts(recs["alignment"])


@pytest.mark.parametrize("rel", [E3SM, VPIC])
def test_alignment_advice_changes_no_finding_number(rel):
    """The layer is a fact for the advice, never evidence: the finding's numbers are the detector's."""
    from iodiag.analyzers.detectors import diagnose

    prof = load_job([str(corpus_path(rel))])
    raw = next(f for f in diagnose(prof) if f.id == "misaligned")
    _, found, _ = _advised(rel)
    assert found["misaligned"].evidence == raw.evidence and "layers" not in raw.evidence
    assert raw.facts["layers"][-1] == "POSIX"  # the misaligned requests are POSIX ones, under the layers above


# ------------------------------------------------------------------------------------------------ small-io
NONMPI = "darshan-logs/darshan_logs/nonmpi_dxt_anonymized/nonmpi_dxt_anonymized.darshan"  # one process, POSIX+STDIO
ONE_RANK_MPIIO = "darshan-logs/darshan_logs/partial_data_dxt/partial_data_dxt.darshan"  # 1e6 1-byte MPI-IO reads
PYTHON = "generated/tight-64B-pwrite-pread-dxt-full/0_python_id2035-2035_11-22-83087-1216503035641033982_1.darshan"

# severity thresholds lowered so that every costed finding is HIGH: the small-io findings of these logs are
# low/medium at the defaults, and the change is made for HIGH ones
ALL_HIGH = replace(Config(), severity=replace(Config().severity, high=1e-6, min_cost_s=0.0))
SMALL_BUCKETS = ("0_100", "100_1K", "1K_10K", "10K_100K")  # wholly below the default 100 KiB small size


def _small_change(recs):
    return next((r for r in recs.values() if "small-io" in r.addresses), None)


def _mpiio_by_file(prof) -> dict[int, tuple[float, float, float]]:
    """file id -> (MPI-IO reads, writes, collective reads), from the log's counters."""
    mp = prof.module("MPI-IO")
    out: dict[int, list[float]] = {}
    for i, fid in enumerate(mp["file_id"].tolist()):
        g = lambda k: max(float(mp[k][i]), 0.0)  # noqa: E731
        r = g("MPIIO_INDEP_READS") + g("MPIIO_COLL_READS") + g("MPIIO_NB_READS")
        w = g("MPIIO_INDEP_WRITES") + g("MPIIO_COLL_WRITES") + g("MPIIO_NB_WRITES")
        acc = out.setdefault(fid, [0.0, 0.0, 0.0])
        acc[0] += r
        acc[1] += w
        acc[2] += g("MPIIO_COLL_READS")
    return {k: tuple(v) for k, v in out.items()}


def _unasked_reads(prof) -> tuple[list[int], float]:
    """(file ids, POSIX reads of them): files written through MPI-IO and never read through it, from the counters."""
    px = prof.module("POSIX")
    fids = [fid for fid, (r, w, _) in _mpiio_by_file(prof).items() if w > 0 and r == 0]
    return fids, sum(float(px["POSIX_READS"][px["file_id"] == fid].clip(0).sum()) for fid in fids)


def test_pnetcdf_job_reads_of_its_own_writes_are_read_modify_write_with_the_collective_lustre_hint():
    """E3SM writes its two output files collectively through PnetCDF on Lustre and never reads them through
    MPI-IO; POSIX reads them 306,537 times for 0 bytes (collective buffering reading the holes past the end of
    the file).  read-modify-write owns those reads: costed from their time, told the Lustre collective hint, and
    no longer counted by small-io or misaligned."""
    from iodiag.analyzers.metrics import metrics_of
    from iodiag.analyzers.timemodel import wall_cost_of_files

    prof, found, recs = _advised(E3SM)
    fids, n = _unasked_reads(prof)
    assert n >= Config().access.rmw_min_reads and prof.module("LUSTRE") is not None
    mp = prof.module("MPI-IO")
    assert mp["MPIIO_COLL_WRITES"].sum() > mp["MPIIO_INDEP_WRITES"].sum()
    rmw = found["read-modify-write"]
    assert rmw.evidence["posix_reads"] == n and rmw.evidence["posix_bytes_read"] < Config().access.rmw_min_bytes
    # the cost: the time of those reads (the time model's wall share of them), within the run
    m = metrics_of(prof)
    on = np.isin(m.file_ids, fids)
    assert rmw.evidence["cost_process_s"] == pytest.approx(float(m.file_stats["read_s"][on].sum()), rel=1e-6)
    wall = wall_cost_of_files(prof, m.file_ids, np.where(on, m.file_stats["read_s"], 0.0))
    assert rmw.est_cost_s == pytest.approx(wall, rel=1e-6) and 0 < rmw.est_cost_s <= prof.job.runtime_s
    assert rmw.severity == "high"
    # the hint for collective writes on Lustre, through PNETCDF_HINTS; not the independent-I/O one
    assert "romio_lustre_ds_in_coll=disable" in rmw.recommendation and "PNETCDF_HINTS" in rmw.recommendation
    assert "romio_ds_write=disable" not in rmw.recommendation
    rec = recs["read-modify-write"]
    assert rec.addresses == ("read-modify-write",) and rec.settings == {"romio_lustre_ds_in_coll": "disable"}
    (env,) = rec.changes  # a PnetCDF program: the MPI-IO hint goes through PNETCDF_HINTS
    assert env.kind == "env" and env.name == "PNETCDF_HINTS" and env.value == "romio_lustre_ds_in_coll=disable"
    assert f"{int(n):,} reads" in rec.title
    # counted once: small-io has only the program's own small reads left (of the input file), misaligned no
    # read time of the output files
    small = found["small-io"]
    assert small.evidence["small_reads"] + small.evidence["small_writes"] < 0.05 * n
    assert not set(small.files) & set(rmw.files) and small.severity in ("info", "low")
    assert found["misaligned"].evidence["cost_process_s"] < 0.5 * rmw.evidence["cost_process_s"]


def test_pnetcdf_job_below_the_read_count_keeps_the_rmw_hint_under_small_io():
    """With ``rmw_min_reads`` above E3SM's read count, or ``rmw_min_read_s`` above their time (its 0 bytes are
    below ``rmw_min_bytes``), there is no read-modify-write finding, and small-io counts those reads as ones the
    MPI-IO layer issued itself, with the same collective Lustre hint."""
    slow = replace(Config(), access=replace(Config().access, rmw_min_read_s=1e9))  # nor when they took less time
    assert "read-modify-write" not in _advised(E3SM, slow)[1]
    cfg = replace(Config(), access=replace(Config().access, rmw_min_reads=10_000_000))
    prof, found, recs = _advised(E3SM, cfg)
    assert "read-modify-write" not in found
    small = found["small-io"]
    assert small.severity == "high" and not small.facts["python"]
    # the premise, from the counters: files written through MPI-IO and never read through it, that POSIX reads
    # in small pieces (the MPI-IO layer's own reads), on Lustre, written collectively
    px = prof.module("POSIX")
    unasked = 0.0
    for fid in _unasked_reads(prof)[0]:
        on = px["file_id"] == fid
        unasked += sum(float(px[f"POSIX_SIZE_READ_{b}"][on].clip(0).sum()) for b in SMALL_BUCKETS)
    assert unasked >= 0.5 * (small.evidence["small_reads"] + small.evidence["small_writes"])
    rec = _small_change(recs)
    assert rec is not None and rec.id == "read-modify-write" and rec.addresses == ("small-io",)
    assert rec.settings == {"romio_lustre_ds_in_coll": "disable"} and f"{int(unasked):,} reads" in rec.title
    (env,) = rec.changes
    assert env.kind == "env" and env.name == "PNETCDF_HINTS" and env.value == "romio_lustre_ds_in_coll=disable"
    assert "romio_lustre_ds_in_coll=disable" in small.recommendation  # the finding says the same


def test_hdf5_job_with_independent_small_reads_is_told_to_read_collectively():
    prof, found, recs = _advised(DBSCAN)
    small = found["small-io"]
    assert small.severity == "high" and not small.facts["python"]
    ((r, w, coll),) = _mpiio_by_file(prof).values()  # one shared file, read by every process
    assert w == 0 and coll < 0.5 * r
    rec = _small_change(recs)
    assert rec is not None and rec.id == "collective-io"
    assert rec.settings == {"romio_cb_read": "enable", "collective_calls": True}
    kinds = {c.kind: c for c in rec.changes}
    assert "H5Pset_dxpl_mpio(dxpl, H5FD_MPIO_COLLECTIVE)" in kinds["snippet"].text  # HDF5 by the file's name
    # the hint as a ROMIO hints file named by ROMIO_HINTS, and for Cray MPICH in MPICH_MPIIO_HINTS
    assert "'romio_cb_read enable'" in kinds["shell"].text and kinds["shell"].text.endswith("romio-hints")
    envs = {c.name: c for c in rec.changes if c.kind == "env"}
    assert envs["ROMIO_HINTS"].text == "export ROMIO_HINTS=$PWD/romio-hints"
    assert envs["MPICH_MPIIO_HINTS"].value == "*:romio_cb_read=enable"
    assert f"{small.evidence['small_reads']:,} small reads" in rec.title
    assert "H5Pset_dxpl_mpio" in small.recommendation and "romio_cb_read=enable" in small.recommendation
    assert f"{int(r - coll):,} of the {int(r):,} MPI-IO reads" in small.recommendation


def test_serial_posix_program_gets_a_buffer_of_the_configured_size():
    cfg = ALL_HIGH
    prof, found, recs = _advised(NONMPI, cfg)
    small = found["small-io"]
    assert prof.module("MPI-IO") is None and small.severity == "high" and not small.facts["python"]
    rec = _small_change(recs)
    buf = cfg.small_io.buffer_bytes
    assert rec.id == "buffering" and rec.settings == {"buffering": buf}
    (code,) = rec.changes
    # writes dominate the small ops here, and the log's STDIO calls on these files are fewer than its POSIX ones
    assert small.evidence["small_writes"] > small.evidence["small_reads"]
    assert code.text.startswith(f"write(fd, buf, {buf});") and "setvbuf" not in code.text
    assert f"{small.evidence['small_writes']:,} small writes" in rec.title


def test_one_process_mpiio_program_is_not_told_to_go_collective():
    # collective I/O merges the pieces of many processes in one call, not one process's many calls
    prof, found, recs = _advised(ONE_RANK_MPIIO, ALL_HIGH)
    small = found["small-io"]
    assert prof.module("MPI-IO") is not None and small.facts["max_ranks_per_file"] == 1
    rec = _small_change(recs)
    assert rec.id == "buffering" and "collective" not in small.recommendation
    assert rec.changes[0].text.startswith(f"MPI_File_read_at(fh, offset, buf, {ALL_HIGH.small_io.buffer_bytes},")


def test_small_io_change_does_not_need_a_high_finding_and_python_keeps_its_buffered_open():
    # the same E3SM finding judged against a stricter HIGH threshold: no longer HIGH, the same change (every
    # finding with a known fix gets it, whatever its severity)
    _, found, recs = _advised(E3SM)
    strict = replace(Config(), severity=replace(Config().severity, high=0.99))
    _, found2, recs2 = _advised(E3SM, strict)
    assert found2["small-io"].severity != "high"
    assert _small_change(recs2) is not None and _small_change(recs2).changes == _small_change(recs).changes
    _, found, recs = _advised(PYTHON)
    assert found["small-io"].facts["python"]
    rec = _small_change(recs)
    assert rec.id == "buffering" and rec.changes[0].text.startswith("open(path, ")


def test_buffering_snippet_opens_in_the_direction_that_runs_consecutively():
    """The 64-byte benchmark writes 300,003 consecutive pieces and reads 300,000 strided ones: the buffer helps the
    writes, so the snippet opens for writing (it said 'rb' when it went by the counts of small ops alone)."""
    rel = "generated/tight-64B-pwrite-pread-dxt-full/0_python_id2035-2035_11-22-83087-1216503035641033982_1.darshan"
    _, findings, recs = _advised(rel)
    small = findings["small-io"]
    assert small.facts["consecutive_writes"] > small.facts["consecutive_reads"]
    assert recs["buffering"].changes[0].text.startswith("open(path, 'wb', buffering=")


def test_re_reads_without_hdf5_get_no_hdf5_advice():
    """mpi-io-test re-reading one byte at offset 0 (no HDF5 or NetCDF in the log) is told to keep the bytes in
    memory, not to tune an HDF5 metadata cache it does not have."""
    _, findings, _ = _advised("darshan-logs/darshan_logs/partial_data_dxt/partial_data_dxt.darshan")
    text = findings["small-io"].recommendation
    assert "re-access the offset of the previous op" in text and "keep them in memory" in text
    assert "H5Pset" not in text and "HDF5" not in text


def test_striping_change_never_sets_the_layout_of_a_file_system_root():
    """The imbalanced-io log's anonymized paths put the file straight under the Lustre mount point: a default
    layout on /lus/theta-fs0 would change everyone's new files, so the change stripes a new copy of the file."""
    prof, _, recs = _advised("darshan-logs/darshan_logs/imbalanced_io/imbalanced-io.darshan")
    (cmd,) = [c.text for c in recs["striping"].changes]
    mounts = {m.rstrip("/") for m in prof.files["mount"].tolist() if m}
    target = cmd.split("#")[0].split()[-1]
    assert cmd.startswith("lfs setstripe -c 8 ") and target.rstrip("/") not in mounts
    assert target.endswith(".striped")
