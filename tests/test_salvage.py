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
