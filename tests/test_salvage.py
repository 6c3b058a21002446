"""Nothing thrown away: a log whose DXT or heatmap region is damaged is reported from every other module.

The damaged copies are made here from corpus logs: 64 bytes garbled inside the last quarter of the file, where
Darshan lays out the last module regions (DXT_POSIX of dxt.darshan; HEATMAP of the e3sm heatmap log).
darshan-util aborts on them (SIGABRT) when it decodes that region; the counters decode.
"""

from __future__ import annotations

import json
import random
import re

import pytest

from conftest import corpus_path, run_cli
from iodiag.analyzers.detectors import diagnose
from iodiag.analyzers.load import load_job

CASES = [
    ("darshan/darshan-util/pydarshan/darshan/examples/example_logs/dxt.darshan", "DXT_POSIX"),
    ("darshan-logs/darshan_logs/e3sm_io_heatmaps_and_dxt/e3sm_io_heatmap_only.darshan", "HEATMAP"),
]


def _damaged(src, out, seed):
    data = bytearray(src.read_bytes())
    rnd = random.Random(seed)
    pos = rnd.randrange(int(len(data) * 0.75), len(data) - 100)
    for i in range(64):
        data[pos + i] = rnd.randrange(256)
    out.write_bytes(bytes(data))
    return out


@pytest.mark.parametrize("rel,lost", CASES, ids=[c[1] for c in CASES])
@pytest.mark.parametrize("seed", [0, 1])
def test_a_damaged_trace_region_costs_only_that_module(tmp_path, rel, lost, seed):
    src = corpus_path(rel)
    bad = _damaged(src, tmp_path / f"bad-{seed}.darshan", seed)
    whole = load_job([str(src)])
    prof = load_job([str(bad)])
    errs = [i for i in prof.issues_seen if i.module == lost]
    # the loss is counted in records, in the module's own terms
    assert errs and re.search(r"\d+ (of (about )?[\d,]+ )?records decoded", errs[0].cause), errs[0].cause
    assert f"the {lost} region (module format version" in errs[0].cause
    assert lost in prof.job.partial_modules and lost not in whole.job.partial_modules
    # the counters are the undamaged log's, to the record
    for mod in ("POSIX", "STDIO"):
        if whole.module(mod) is not None:
            assert len(prof.module(mod)) == len(whole.module(mod))
            assert prof.module(mod)["POSIX_BYTES_READ" if mod == "POSIX" else "STDIO_BYTES_READ"].sum() == \
                whole.module(mod)["POSIX_BYTES_READ" if mod == "POSIX" else "STDIO_BYTES_READ"].sum()
    ids = {f.id for f in diagnose(prof)}
    assert "partial-log" in ids and len(ids) >= 2
    # as a user runs it: exit 0, the loss in errors
    res = run_cli("report", str(bad), "--json")
    assert res.returncode == 0, res.stderr.decode()[-2000:]
    rep = json.loads(res.stdout)
    assert any(e.get("module") == lost for e in rep["errors"])


def test_implausible_process_counts_and_ranks_are_replaced_and_said():
    """A decoded corpus log (16 MiB mpi-io-test, 32 ranks) whose header is made to claim 4,456,449 processes and
    one of whose POSIX records claims rank 4,456,448 (the damage seen on a real log): the profile uses the
    ranks the records show, counts the bad record as shared, and says both in its errors."""
    from iodiag.analyzers.load import build_profile
    from iodiag.analyzers.readers.darshan import read_log
    from iodiag.analyzers.readers.isolate import LogResult

    path = str(corpus_path("darshan-logs/darshan_logs/mpi_io_test_with_dxt/"
                           "treddy_mpi-io-test_id4373053_6-2-60198-9815401321915095332_1.darshan"))
    good = build_profile([LogResult(path, data=read_log(path))])
    data = read_log(path)
    data["header"]["nprocs"] = 4_456_449
    prof = build_profile([LogResult(path, data=data)])
    assert prof.job.nprocs == good.job.nprocs == 32
    assert any(i.kind == "damaged-header" and "4,456,449" in i.cause for i in prof.issues_seen)
    data = read_log(path)
    posix = data["mods"]["POSIX"]
    posix["rank"] = posix["rank"].copy()
    own = int((posix["rank"] >= 0).argmax())
    posix["rank"][own] = 4_456_448
    prof = build_profile([LogResult(path, data=data)])
    assert prof.job.nprocs == 32
    assert any(i.kind == "damaged-record" and "4,456,448" in i.cause for i in prof.issues_seen)
    assert len(prof.processes) == 32


# -- one flipped byte inside a module, the name region or the header's region map --------------------------------
#
# The treddy mpi-io-test log (32 ranks, format 3.21) compresses each rank's share of each region on its own (32
# zlib streams per region).  One flipped byte damages one stream: darshan-util stops (or aborts) there, iodiag
# decodes the module again from its intact streams and says what was lost, in records.

TREDDY = "darshan-logs/darshan_logs/mpi_io_test_with_dxt/treddy_mpi-io-test_id4373053_6-2-60198-9815401321915095332_1.darshan"
MODULE_OF = {1: "POSIX", 2: "MPI-IO", 8: "STDIO", 9: "DXT_POSIX", 10: "DXT_MPIIO"}  # stored index in a 3.21 header


def _counts(prof):
    return {m: len(prof.module(m)) for m in ("POSIX", "MPI-IO", "STDIO")} | {
        "ops": len(prof.ops), "names": sum(not p.startswith("<unnamed") for p in prof.files["path"].tolist())}


@pytest.fixture(scope="module")
def treddy():
    from iodiag.analyzers.readers.container import read_header

    src = corpus_path(TREDDY)
    data = src.read_bytes()
    return src, data, read_header(data), load_job([str(src)])


def _flipped(tmp_path, data, pos, bit=0x10, name="flip"):
    out = tmp_path / f"{name}-{pos}.darshan"
    b = bytearray(data)
    b[pos] ^= bit
    out.write_bytes(bytes(b))
    return out


@pytest.mark.parametrize("stored", sorted(MODULE_OF), ids=[MODULE_OF[k] for k in sorted(MODULE_OF)])
@pytest.mark.parametrize("where", [0.3, 0.7])
def test_one_flipped_byte_in_a_module_costs_one_ranks_records_of_that_module(tmp_path, treddy, stored, where):
    src, data, hdr, whole = treddy
    mod = MODULE_OF[stored]
    off, ln = hdr.mod_map[stored]
    bad = _flipped(tmp_path, data, off + int(ln * where))
    prof = load_job([str(bad)])  # before: rc 6 (the whole log) for POSIX, MPI-IO and STDIO
    errs = [i for i in prof.issues_seen if i.module == mod]
    assert len(errs) == 1 and mod in prof.job.partial_modules, prof.issues_seen
    # counted against what the region holds: "93 of about 96 records decoded (...)"
    m = re.search(r"([\d,]+) of about ([\d,]+) records decoded", errs[0].cause)
    assert m, errs[0].cause
    got, expected = (int(x.replace(",", "")) for x in m.groups())
    full = _counts(whole)
    before = full[mod] if mod in full else int(((whole.ops["module"] == (0 if mod == "DXT_POSIX" else 1))).sum())
    if mod in full:
        assert expected == full[mod] and got == len(prof.module(mod))
        # one rank's stream of the 32 is lost: its share, not the records after the damage
        assert full[mod] - got == full[mod] // 32
    else:
        assert expected == {"DXT_POSIX": 64, "DXT_MPIIO": 32}[mod] and got == expected - expected // 32
    # every other module is the undamaged log's, to the record; the names too
    now = _counts(prof)
    for k in ("POSIX", "MPI-IO", "STDIO", "names"):
        if k != mod:
            assert now[k] == full[k], k
    other = 1 if mod == "DXT_POSIX" else 0
    if mod.startswith("DXT_"):
        assert int((prof.ops["module"] == other).sum()) == int((whole.ops["module"] == other).sum())
    else:
        assert now["ops"] == full["ops"]
    assert before > 0


def test_a_flipped_byte_in_the_name_region_costs_one_ranks_names_only(tmp_path, treddy):
    src, data, hdr, whole = treddy
    off, ln = hdr.name_map
    bad = _flipped(tmp_path, data, off + int(ln * 0.3))  # darshan-util aborts on it: before, the whole log was lost
    prof = load_job([str(bad)])
    full, now = _counts(whole), _counts(prof)
    assert {k: now[k] for k in ("POSIX", "MPI-IO", "STDIO", "ops")} == {k: full[k] for k in ("POSIX", "MPI-IO", "STDIO", "ops")}
    assert full["names"] - 2 <= now["names"] < full["names"]
    assert [i.kind for i in prof.issues_seen] == ["names-lost"] and not prof.job.partial_modules


@pytest.mark.parametrize("stored", sorted(MODULE_OF), ids=[MODULE_OF[k] for k in sorted(MODULE_OF)])
@pytest.mark.parametrize("field", ["off", "len"])
@pytest.mark.parametrize("bit", [0x01, 0x80])
def test_a_flipped_bit_in_the_header_region_map_loses_nothing(tmp_path, treddy, stored, field, bit):
    """A region's offset or length one bit off: darshan-util read a module short or shifted (one rank's records
    gone, with no loss reported).  The regions' shared boundaries give the true spans back: nothing is lost, and the
    repair is said."""
    src, data, hdr, whole = treddy
    pos = 40 + 16 * stored + (8 if field == "len" else 0)  # mod_map of the 3.00-3.21 header starts at byte 40
    assert int.from_bytes(data[pos:pos + 8], "little") == hdr.mod_map[stored][field == "len"]
    prof = load_job([str(_flipped(tmp_path, data, pos, bit, "map"))])
    assert _counts(prof) == _counts(whole)
    assert not prof.job.partial_modules
    assert [i.kind for i in prof.issues_seen] == ["damaged-header"]
    assert "region map contradicts itself" in prof.issues_seen[0].cause


def test_a_damaged_bzip2_region_costs_that_module_and_says_so(tmp_path):
    """The bzip2 copy of the treddy log (tests/data/bzip2-logs), one byte flipped in its POSIX region.  iodiag
    decompresses the bzip2 streams itself; darshan-convert wrote each region as one bzip2 stream, so POSIX is lost
    whole - and said to be, not left out silently - and every other module is the undamaged copy's."""
    from conftest import REPO
    from iodiag.analyzers.readers.container import read_header

    src = REPO / "tests" / "data" / "bzip2-logs" / "bzip2" / TREDDY.rsplit("/", 1)[1]
    data = src.read_bytes()
    hdr = read_header(data)
    off, ln = hdr.mod_map[1]  # format 3.41 after darshan-convert: POSIX is module 1 still
    whole = load_job([str(src)])
    prof = load_job([str(_flipped(tmp_path, data, off + ln // 2))])
    errs = [i for i in prof.issues_seen if i.module == "POSIX"]
    assert len(errs) == 1 and "0 records decoded" in errs[0].cause and "bzip2 streams are damaged" in errs[0].cause
    assert "POSIX" in prof.job.partial_modules and "POSIX" in prof.job.modules
    assert len(prof.module("MPI-IO")) == len(whole.module("MPI-IO")) and len(prof.ops) == len(whole.ops)
    assert len(prof.module("STDIO")) == len(whole.module("STDIO"))


def test_a_lost_module_is_never_reported_as_partial_none(tmp_path, treddy):
    src, data, hdr, whole = treddy
    off, ln = hdr.mod_map[9]  # DXT_POSIX
    bad = _flipped(tmp_path, data, off + ln // 2)
    rep = json.loads(run_cli("report", str(bad), "--json").stdout)
    assert rep["job"]["partial_modules"] == ["DXT_POSIX"]
    err = [e for e in rep["errors"] if e.get("module") == "DXT_POSIX"]
    assert err and "of about 64 records decoded" in err[0]["cause"]
    # damage is not a record cap: no MAX_RECORDS / DXT memory advice, and LOW (a trace module)
    f = _partial_log(rep)
    assert f["severity"] == "low" and "MAX_RECORDS" not in f["recommendation"]
    res = run_cli("report", str(bad))
    assert res.returncode == 0 and "partial: DXT_POSIX" in res.stdout.decode()


def test_a_garbage_rank_matching_a_garbage_process_count_does_not_set_nprocs():
    """The IOR PnetCDF corpus log (4 processes; POSIX, MPI-IO, PNETCDF, STDIO, HEATMAP) decoded, then damaged as
    a real log was: the header claims 4,456,449 processes and one PNETCDF_FILE record claims rank 4,456,448 - a
    count its own garbage rank agrees with.  Every other module's ranks say 4: the profile uses 4 and says why."""
    from iodiag.analyzers.load import build_profile
    from iodiag.analyzers.readers.darshan import read_log
    from iodiag.analyzers.readers.isolate import LogResult

    path = str(corpus_path("darshan-logs/darshan_logs/ior_pnetcdf_hdf5/"
                           "shane_ior-PNETCDF_id438100-438100_11-9-41525-10280033558448664385_1.darshan"))
    good = build_profile([LogResult(path, data=read_log(path))])
    data = read_log(path)
    data["header"]["nprocs"] = 4_456_449
    pn = data["mods"]["PNETCDF_FILE"]
    pn["rank"] = pn["rank"].copy()
    pn["rank"][0] = 4_456_448
    prof = build_profile([LogResult(path, data=data)])
    assert good.job.nprocs == prof.job.nprocs == 4 and len(prof.processes) == 4
    hdr = [i for i in prof.issues_seen if i.kind == "damaged-header"]
    assert hdr and "4,456,449" in hdr[0].cause and "4,456,448 in PNETCDF_FILE" in hdr[0].cause
    assert "HEATMAP" in hdr[0].cause
    assert any(i.kind == "damaged-record" and "4,456,448" in i.cause for i in prof.issues_seen)
    # the bytes of the damaged record are kept (as shared by the log's processes), not lost
    assert prof.module("PNETCDF_FILE") is not None and len(prof.module("PNETCDF_FILE")) == len(good.module("PNETCDF_FILE"))


def _partial_log(rep):
    return next(f for f in rep["findings"] if f["id"] == "partial-log")


def test_a_module_in_a_newer_format_is_said_so_not_blamed_on_a_killed_process(tmp_path):
    """The 3.5.0 release log with its LUSTRE region's module version raised from 2 to 3 in the header (as a newer
    Darshan would write it): darshan-util refuses that region only.  The loss names the module, both versions, the
    log format and the writer; the partial-log finding is LOW (a layout module) and its advice is a newer
    darshan-util - not 'let processes exit normally', since no process was killed and no log was lost."""
    from iodiag.analyzers.readers.container import read_header

    src = corpus_path("darshan-logs/darshan_logs/release_logs/mpi-io-test-x86_64-3.5.0.darshan")
    data = bytearray(src.read_bytes())
    hdr = read_header(bytes(data))
    at = 1072 + 4 * 8  # mod_ver[8] (LUSTRE) of a format-3.41 header
    assert hdr.mod_ver[8] == 2 == int.from_bytes(data[at:at + 4], "little")
    data[at:at + 4] = (3).to_bytes(4, "little")
    bad = tmp_path / src.name
    bad.write_bytes(bytes(data))
    whole, prof = load_job([str(src)]), load_job([str(bad)])
    errs = [i for i in prof.issues_seen if i.module == "LUSTRE"]
    assert [i.kind for i in prof.issues_seen] == ["newer-format"], prof.issues_seen
    assert ("module format version 3; this darshan-util reads LUSTRE up to version 2 (log format 3.41, written by "
            "Darshan 3.5.0)") in errs[0].cause
    for mod in ("POSIX", "MPI-IO", "STDIO"):
        assert len(prof.module(mod)) == len(whole.module(mod))
    rep = json.loads(run_cli("report", str(bad), "--json").stdout)
    f = _partial_log(rep)
    assert f["severity"] == "low" and "logs_lost" not in f["evidence"]
    assert "darshan-util as new as Darshan 3.5.0" in f["recommendation"]
    assert "exit normally" not in f["recommendation"]


def test_a_pre_release_log_that_loses_a_module_says_so(tmp_path):
    """treddy_h5d_no_h5f.darshan was written by Darshan 3.4.0-pre1 (format 3.21); one byte flipped in its HEATMAP
    region.  The cause names the pre-release and the module; the finding is LOW and blames no process."""
    from iodiag.analyzers.readers.container import read_header

    src = corpus_path("darshan-logs/darshan_logs/hdf5_orthogonality/treddy_h5d_no_h5f.darshan")
    data = bytearray(src.read_bytes())
    off, ln = read_header(bytes(data)).mod_map[14]  # HEATMAP in a 3.21 header
    data[off + ln // 2] ^= 0x10
    bad = tmp_path / src.name
    bad.write_bytes(bytes(data))
    prof = load_job([str(bad)])
    errs = [i for i in prof.issues_seen if i.module == "HEATMAP"]
    assert errs and "a pre-release Darshan wrote this log (log format 3.21, written by Darshan 3.4.0-pre1)" in errs[0].cause
    assert "HEATMAP" in prof.job.partial_modules and len(prof.module("POSIX")) == len(load_job([str(src)]).module("POSIX"))
    f = _partial_log(json.loads(run_cli("report", str(bad), "--json").stdout))
    assert f["severity"] == "low" and "exit normally" not in f["recommendation"]


# -- a rank whose records were lost is not an idle rank ------------------------------------------------------------

HALF_RANKS = "darshan-logs/darshan_logs/hdf5_diagonal_write_only/hdf5_diagonal_write_half_ranks_dxt.darshan"


def _inactive(prof):
    return [f for f in diagnose(prof) if f.id == "inactive-ranks"]


@pytest.mark.parametrize("rel,stored,lost", [
    # 32 ranks writing through POSIX (format 3.21: one zlib stream per rank): one rank's POSIX records are lost
    ("darshan-logs/darshan_logs/runtime_and_dxt_heatmaps_diagonal_write_only/"
     "runtime_and_dxt_heatmaps_diagonal_write_only.darshan", 1, "POSIX"),
    # 32 ranks in MPI-IO: one rank's MPI-IO records are lost
    (TREDDY, 2, "MPI-IO"),
    # 16 IOR ranks (format 3.41): the POSIX region is lost whole; STDIO, the level beneath, must not stand in for it
    ("darshan-logs/darshan_logs/ior_daos/snyder_ior-POSIX_id1057716-202103_11-8-64415-6936117869459351096_1.darshan",
     1, "POSIX"),
    # 10 ranks, 5 of them writing H5D datasets: the H5D records are lost
    (HALF_RANKS, 4, "H5D"),
], ids=["POSIX-32", "MPI-IO-32", "POSIX-16-whole", "H5D-10"])
def test_a_rank_whose_records_were_lost_is_not_called_idle(tmp_path, rel, stored, lost):
    from iodiag.analyzers.readers.container import read_header

    src = corpus_path(rel)
    data = src.read_bytes()
    off, ln = read_header(data).mod_map[stored]
    prof = load_job([str(_flipped(tmp_path, data, off + int(ln * 0.3)))])
    assert [(i.kind, i.module) for i in prof.issues_seen] == [("truncated", lost)]
    # before: "1 of 32 processes issue no POSIX reads or writes" for the rank whose records were lost
    assert _inactive(prof) == []
    whole = load_job([str(src)])
    if rel != HALF_RANKS:  # the undamaged log has no idle rank: any claim on the damaged copy would be the damage's
        assert _inactive(whole) == []


@pytest.mark.parametrize("stored,module", [(1, "POSIX"), (9, "DXT_POSIX")])
def test_records_lost_beneath_the_judged_level_keep_an_idle_rank_claim(tmp_path, stored, module):
    """Half of the 10 ranks write H5D datasets: a loss in POSIX or DXT_POSIX (beneath H5D) does not hide that."""
    from iodiag.analyzers.readers.container import read_header

    src = corpus_path(HALF_RANKS)
    data = src.read_bytes()
    off, ln = read_header(data).mod_map[stored]
    prof = load_job([str(_flipped(tmp_path, data, off + ln // 2))])
    assert [(i.kind, i.module) for i in prof.issues_seen] == [("truncated", module)]
    got, want = _inactive(prof), _inactive(load_job([str(src)]))
    assert len(got) == len(want) == 1
    assert got[0].processes == want[0].processes == [1, 3, 5, 7, 9] and got[0].evidence["level"] == "H5D"


def test_only_the_damaged_logs_ranks_are_left_out(tmp_path):
    """Two logs of 10 ranks each (the half-ranks HDF5 log and a copy whose H5D region lost records): the damaged
    log's ranks are not judged, the intact log's idle ranks still are, and the evidence says how many were left
    out."""
    from iodiag.analyzers.readers.container import read_header

    src = corpus_path(HALF_RANKS)
    data = src.read_bytes()
    off, ln = read_header(data).mod_map[4]  # H5D
    bad = _flipped(tmp_path, data, off + int(ln * 0.3))
    prof = load_job([str(bad), str(src)])
    assert [(i.kind, i.module) for i in prof.issues_seen] == [("truncated", "H5D")]
    (f,) = _inactive(prof)
    pr = prof.processes
    intact = {int(p) for p, lp in zip(pr["proc"].tolist(), pr["log_path"].tolist()) if lp == str(src)}
    assert set(f.processes) <= intact and len(f.processes) == 5
    assert f.evidence["processes"] == 10 and f.evidence["processes_with_lost_records"] == 10
    assert f.evidence["data_ops_on_active"] == _inactive(load_job([str(src)]))[0].evidence["data_ops_on_active"]
