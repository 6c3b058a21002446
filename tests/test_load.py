"""The loader on real corpus logs: numbers cross-checked against pydarshan's own DataFrames."""

from __future__ import annotations

import glob

import numpy as np
import pytest

from iodiag.analyzers.load import load_job
from iodiag.analyzers.readers.isolate import read_logs
from iodiag.errors import NoUsableData
from iodiag.profile import OP

from conftest import CORPUS, corpus_glob, corpus_path

CROSS_CHECK = [
    "darshan/darshan-util/pydarshan/darshan/tests/input/sample.darshan",
    "darshan/darshan-util/pydarshan/darshan/tests/input/sample-badost.darshan",
    "darshan-logs/darshan_logs/imbalanced_io/imbalanced-io.darshan",
    "darshan-logs/darshan_logs/mpi_io_test_with_dxt/treddy_mpi-io-test_id4373053_6-2-60198-9815401321915095332_1.darshan",
    "darshan-logs/darshan_logs/hdf5_diagonal_write_only/hdf5_diagonal_write_half_ranks_dxt.darshan",
    "darshan-logs/darshan_logs/ior_pnetcdf_hdf5/shane_ior-PNETCDF_id438100-438100_11-9-41525-10280033558448664385_1.darshan",
    "generated/xarray-nc2zarr-1proc-dxt/0_python_id20361-20361_11-22-82634-4044189885351072024_1.darshan",
]


def _pydarshan(path):
    darshan = pytest.importorskip("darshan")
    return darshan.DarshanReport(str(path), read_all=True)


@pytest.mark.parametrize("rel", CROSS_CHECK)
def test_counters_match_pydarshan(rel):
    path = corpus_path(rel)
    prof = load_job([str(path)])
    rep = _pydarshan(path)
    assert prof.job.nprocs == rep.metadata["job"]["nprocs"]
    for mod in ("POSIX", "MPI-IO", "STDIO", "H5F", "H5D", "PNETCDF_FILE", "PNETCDF_VAR"):
        if mod not in rep.records or not len(rep.records[mod]):
            assert prof.module(mod) is None or len(prof.counters[mod]) == 0
            continue
        dfs = rep.records[mod].to_df()
        c, fc = dfs["counters"], dfs["fcounters"]
        ours = prof.counters[mod]
        assert len(ours) == len(c), mod
        # same records, same order, same values for every counter column
        assert np.array_equal(ours["rank"], c["rank"].to_numpy())
        for col in c.columns:
            if col in ("id", "rank"):
                continue
            assert np.array_equal(ours[col], c[col].to_numpy()), (mod, col)
        for col in fc.columns:
            if col in ("id", "rank"):
                continue
            assert np.allclose(ours[col], fc[col].to_numpy(), equal_nan=True), (mod, col)


@pytest.mark.parametrize("rel", [CROSS_CHECK[3], CROSS_CHECK[4], CROSS_CHECK[6]])
def test_dxt_ops_match_pydarshan(rel):
    path = corpus_path(rel)
    prof = load_job([str(path)])
    rep = _pydarshan(path)
    t0 = prof.job.start_s
    for mod, code in (("DXT_POSIX", 0), ("DXT_MPIIO", 1)):
        if mod not in rep.records:
            continue
        n_r = n_w = 0
        bytes_r = bytes_w = 0
        last_end = 0.0
        for rec in rep.records[mod].to_df():
            n_r += len(rec["read_segments"])
            n_w += len(rec["write_segments"])
            if len(rec["read_segments"]):
                bytes_r += int(rec["read_segments"]["length"].sum())
                last_end = max(last_end, rec["read_segments"]["end_time"].max())
            if len(rec["write_segments"]):
                bytes_w += int(rec["write_segments"]["length"].sum())
                last_end = max(last_end, rec["write_segments"]["end_time"].max())
        ops = prof.ops.filter(prof.ops["module"] == code)
        assert int((ops["op"] == OP["read"]).sum()) == n_r
        assert int((ops["op"] == OP["write"]).sum()) == n_w
        assert int(ops["length"][ops["op"] == OP["read"]].sum()) == bytes_r
        assert int(ops["length"][ops["op"] == OP["write"]].sum()) == bytes_w
        # times are on the epoch clock: job start + DXT's relative time
        assert ops["end_s"].max() == pytest.approx(t0 + last_end, abs=1e-6)


def test_manifest_nprocs_and_modules(manifest):
    """Every readable corpus log: nprocs and modules as the MANIFEST says."""
    rows = [r for r in manifest.values() if r["nprocs"].isdigit()]
    paths = [str(CORPUS / r["path"]) for r in rows]
    checked = 0
    for row, res in zip(rows, read_logs(paths, ())):
        if res.data is None:
            continue
        h = res.data["header"]
        assert h["nprocs"] == int(row["nprocs"]), row["path"]
        listed = [m for m in row["modules_present"].split(",") if m and m != "(none)"]
        names = {m.replace("[partial]", "") for m in listed}
        assert names <= set(h["modules"]), (row["path"], listed, h["modules"].keys())
        partial = {m.replace("[partial]", "") for m in listed if m.endswith("[partial]")}
        assert partial == {m for m, info in h["modules"].items() if info["partial"]}, row["path"]
        checked += 1
    assert checked >= 100


def test_e3sm_heatmap_512_ranks():
    path = corpus_path("darshan-logs/darshan_logs/e3sm_io_heatmaps_and_dxt/e3sm_io_heatmap_only.darshan")
    prof = load_job([str(path)])
    assert prof.job.nprocs == 512
    assert len(prof.processes) == 512
    assert len(prof.ops) == 0  # heatmap only, no DXT
    hm = prof.heatmap
    assert len(hm) > 0
    assert set(np.unique(hm["proc"]).tolist()) <= set(range(512))
    assert len(np.unique(hm["proc"])) == 512
    # bins lie inside the job's run time, and carry the bytes that POSIX counted
    assert hm["start_s"].min() >= prof.job.start_s - 1e-6
    posix_written = int(np.clip(prof.counters["POSIX"]["POSIX_BYTES_WRITTEN"], 0, None).sum())
    posix_heat = int(hm["write_bytes"][hm["module"] == 0].sum())
    assert posix_heat == pytest.approx(posix_written, rel=1e-6)  # the two count a few bytes differently


@pytest.mark.parametrize("log", sorted(glob.glob(str(CORPUS / "darshan-logs/darshan_logs/release_logs/*.darshan"))))
def test_every_release_format_loads(log):
    prof = load_job([log])
    assert prof.job.nprocs == 4
    assert prof.module("POSIX") is not None
    assert prof.job.log_format and prof.job.log_format.startswith("3.")
    assert not [i for i in prof.issues_seen if i.kind in ("crashed", "unreadable", "truncated")]


def test_lustre_striping_and_mounts():
    path = corpus_path("darshan/darshan-util/pydarshan/darshan/tests/input/sample-badost.darshan")
    prof = load_job([str(path)])
    lus = prof.counters["LUSTRE"]
    assert len(lus) == 2048
    assert (lus["stripe_count"] > 0).all() and (lus["stripe_size"] > 0).all()
    assert all(o for o in lus["osts"][:10])
    fs = set(prof.files["fs_type"].tolist())
    assert "lustre" in fs


def test_multi_log_job_on_one_clock():
    logs = corpus_glob("generated/dask-localcluster-2workers-dxt-jobid")
    prof = load_job([str(p) for p in logs])
    assert prof.job.job_id == "9100001"
    assert prof.job.nprocs == 4 and len(prof.processes) == 4
    assert sorted(prof.processes["pid"].tolist()) == [2061, 2065, 2070, 2073]
    # each process's ops fall inside its own [start, end] window, on the epoch clock
    for proc in range(4):
        ops = prof.ops.filter(prof.ops["proc"] == proc)
        if len(ops):
            assert ops["start_s"].min() >= prof.processes["start_s"][proc] - 1.0
            assert ops["end_s"].max() <= prof.processes["end_s"][proc] + 1.0
    assert prof.job.start_s == min(prof.processes["start_s"])
    assert len(prof.job.programs) == 1


def test_killed_process_runtime_is_derived():
    path = corpus_path("generated/edge-cases/recovered-from-mmap_0_python_id26328_sigterm-main.darshan")
    prof = load_job([str(path)])
    assert prof.job.runtime_derived
    assert prof.job.runtime_s is not None and prof.job.runtime_s >= 0
    assert prof.job.end_s >= prof.job.start_s
    assert any(i.kind == "no-end-time" for i in prof.issues_seen)


def test_truncated_logs_never_crash_and_report_loss():
    t20k = corpus_path("generated/edge-cases/truncated-20000B_treddy_mpi-io-test_id4373053_6-2-60198-9815401321915095332_1.darshan")
    prof = load_job([str(t20k)])
    lost = {i.module for i in prof.issues_seen if i.kind == "truncated"}
    assert {"DXT_POSIX", "DXT_MPIIO"} <= lost
    assert set(prof.job.partial_modules) >= {"DXT_POSIX", "DXT_MPIIO"}

    t900 = corpus_path("generated/edge-cases/truncated-900B_treddy_mpi-io-test_id4373053_6-2-60198-9815401321915095332_1.darshan")
    res = list(read_logs([str(t900), str(t20k)]))
    assert res[0].data is None and res[0].error_kind in ("crashed", "unreadable")
    assert res[1].data is not None  # the reader carried on after the crash
    with pytest.raises(NoUsableData) as exc:
        load_job([str(t900)])
    assert "truncated-900B" in str(exc.value)


def test_zero_byte_and_foreign_files(tmp_path):
    empty = tmp_path / "empty.darshan"
    empty.write_bytes(b"")
    text = tmp_path / "notes.darshan"
    text.write_text("this is not a darshan log\n" * 50)
    good = corpus_path("darshan-logs/darshan_logs/release_logs/mpi-io-test-x86_64-3.4.0.darshan")
    prof = load_job([str(empty), str(text), str(good)])
    kinds = {i.path: i for i in prof.issues_seen}
    assert "empty" in kinds[str(empty)].cause
    assert kinds[str(text)].kind in ("unreadable", "crashed")
    assert prof.job.nprocs == 4  # the good log still loaded


def test_partial_modules_are_reported():
    path = corpus_path("darshan-logs/darshan_logs/partial_data_stdio/partial_data_stdio.darshan")
    prof = load_job([str(path)])
    assert prof.job.partial_modules
    partial = [i for i in prof.issues_seen if i.kind == "partial-module"]
    assert partial and all("DARSHAN_CONFIG_PATH" in (i.next_step or "") for i in partial)


def _lustre_logs() -> list[str]:
    import csv

    with open(CORPUS / "MANIFEST.tsv", newline="") as fh:
        rows = [r for r in csv.DictReader(fh, delimiter="\t") if "LUSTRE" in r["modules_present"]]
    return [r["path"] for r in rows if not r["modules_present"].startswith("(unreadable")]


@pytest.mark.parametrize("rel", [p for p in _lustre_logs() if "dlio_logs" not in p] + [p for p in _lustre_logs() if "dlio_logs" in p][:2])
def test_lustre_records_equal_pydarshan(rel):
    """Stripe size/count of the first component and the OST ids, record by record, as pydarshan's own reader gives them."""
    from darshan.backend import cffi_backend as be

    from iodiag.analyzers.readers.darshan import read_log

    path = str(CORPUS / rel)
    ours = read_log(path, ("LUSTRE",), names=False)["mods"]["LUSTRE"]
    log = be.log_open(path)
    try:
        theirs = []
        while (rec := be._log_get_lustre_record(log, dtype="dict")) is not None:
            theirs.append(rec)
    finally:
        be.log_close(log)
    assert len(theirs) == len(ours["file_id"]) > 0
    for i, rec in enumerate(theirs):
        comps = rec["components"]
        assert int(ours["file_id"][i]) == int(rec["id"]) and int(ours["rank"][i]) == int(rec["rank"])
        first = comps[0]["counters"] if comps else {}
        assert int(ours["stripe_size"][i]) == int(first.get("LUSTRE_COMP_STRIPE_SIZE", 0))
        assert int(ours["stripe_count"][i]) == int(first.get("LUSTRE_COMP_STRIPE_COUNT", 0))
        ids = [int(o) for c in comps for o in c["ost_ids"]]
        assert ours["osts"][i] == ",".join(map(str, ids))


DXT_1024 = "dxt-explorer/sample/jeanbez_8_benchmark_parallel_id45195555_8-6-50011-11681279140261054765_1628283217.darshan"


def test_logs_decode_without_numpy_and_cross_as_arrays():
    """A reader child decodes with darshan-util alone (it is forked before the parent imports NumPy); its buffers
    become the same arrays as an in-process read, every module of the log."""
    import subprocess
    import sys

    log = corpus_path(DXT_1024)
    code = ("import sys\nfrom iodiag.analyzers.readers.darshan_decode import decode_log\n"
            f"raw = decode_log({str(log)!r})\n"
            "print('numpy' in sys.modules, sorted(raw['mods']))\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.split()[0] == "False"
    from iodiag.analyzers.readers.darshan import read_log

    direct = read_log(str(log))
    crossed = next(iter(read_logs([str(log)])))
    assert crossed.data is not None and sorted(crossed.data["mods"]) == sorted(direct["mods"])
    assert "DXT_POSIX" in direct["mods"] and "LUSTRE" in direct["mods"]
    for mod, rec in direct["mods"].items():
        for key, want in rec.items():
            got = crossed.data["mods"][mod][key]
            assert np.array_equal(np.asarray(got), np.asarray(want)), (mod, key)


def test_reader_child_and_parent_use_different_cpus():
    """While a reader child decodes, it runs on other CPUs than its parent; the parent gets its CPUs back when the
    read is over, whether the read was used (read_logs) or dropped (Prefetch.close)."""
    import os

    from iodiag.analyzers.readers.isolate import prefetch

    before = os.sched_getaffinity(0)
    if len(before) < 2:
        pytest.skip(f"one CPU allowed ({sorted(before)}): nothing to split")
    log = str(corpus_path(DXT_1024))
    pre = prefetch([log])
    pid = pre._child[0]
    try:
        mine = os.sched_getaffinity(0)
        try:
            child = os.sched_getaffinity(pid)
        except ProcessLookupError:
            child = None  # already done and reaped: nothing left to compare
        assert len(mine) == 1 and mine < before
        if child is not None:
            assert not (child & mine) and child <= before
        got = list(read_logs([log], prefetched=pre))
        assert got[0].data is not None
        assert os.sched_getaffinity(0) == before
    finally:
        pre.close()
    pre = prefetch([log])
    assert len(os.sched_getaffinity(0)) == 1
    pre.close()
    assert os.sched_getaffinity(0) == before


def test_damaged_dxt_buffer_is_that_modules_loss():
    """Buffers that disagree with their records' counts lose their module, with the cause, not the log."""
    from iodiag.analyzers.readers.darshan import as_arrays
    from iodiag.analyzers.readers.darshan_decode import decode_log

    raw = decode_log(str(corpus_path(DXT_1024)))
    raw["mods"]["DXT_POSIX"]["rec_writes"][0] += 1  # one segment more than the buffer holds
    data = as_arrays(raw)
    assert "DXT_POSIX" not in data["mods"] and "DXT_MPIIO" in data["mods"]
    assert any(m == "DXT_POSIX" and "could not be decoded" in why for m, why in data["losses"])


def test_decoder_buffers_grow_without_mremap(monkeypatch):
    """Where a mapping cannot be resized in place (no mremap: macOS), the decoder's buffers grow by a copy and the
    log reads the same."""
    import mmap

    from iodiag.analyzers.readers import darshan_decode
    from iodiag.analyzers.readers.darshan import as_arrays, read_log

    log = str(corpus_path(DXT_1024))
    want = read_log(log)

    class NoResize(mmap.mmap):
        def resize(self, size):
            raise SystemError("mmap: resizing not available--no mremap()")

    monkeypatch.setattr(darshan_decode.mmap, "mmap", NoResize)
    got = as_arrays(darshan_decode.decode_log(log))
    assert sorted(got["mods"]) == sorted(want["mods"]) and got["losses"] == want["losses"]
    for mod, rec in want["mods"].items():
        for key, col in rec.items():
            assert np.array_equal(np.asarray(got["mods"][mod][key]), np.asarray(col)), (mod, key)


def test_reader_threads_other_than_main_keep_their_cpus():
    """Only the main thread narrows itself while its reader child runs; a worker thread's read changes nothing."""
    import os
    import threading

    before = os.sched_getaffinity(0)
    if len(before) < 2:
        pytest.skip(f"one CPU allowed ({sorted(before)}): nothing to split")
    seen = []

    def read():
        it = read_logs([str(corpus_path(DXT_1024))])
        first = next(it)
        seen.append((first.data is not None, os.sched_getaffinity(0)))
        list(it)

    t = threading.Thread(target=read)
    t.start()
    t.join()
    assert seen == [(True, before)]
