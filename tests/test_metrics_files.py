"""Per-file helpers that replaced Python loops over files/rows give what those loops gave, on real logs with
hundreds to thousands of files (and on the odd strings the loops had to survive)."""

from __future__ import annotations

import os
import re

import numpy as np
import pytest
from conftest import corpus_path

from iodiag.analyzers import metrics
from iodiag.analyzers.zarrpath import chunk_key, path_kind
from iodiag.analyzers.load import load_job

MANY = [
    "darshan/darshan-util/pydarshan/darshan/tests/input/sample-badost.darshan",  # 2,048 Lustre rows
    "darshan-logs/darshan_logs/imbalanced_io/imbalanced-io.darshan",  # 1,030 files, Lustre
    "darshan-logs/darshan_logs/hdf5_diagonal_write_only/hdf5_file_opens_only.darshan",  # Python imports
    "generated/smallio-metadata-heavy-default/0_python_id2108-2108_11-22-83104-15636950488690977536_1.darshan",
]


@pytest.fixture(scope="module", params=MANY, ids=lambda r: os.path.basename(r)[:30])
def prof(request):
    return load_job([str(corpus_path(request.param))])


def _osts_by_row(texts) -> list[list[int]]:
    return [[int(o) for o in str(t).split(",") if o.strip().lstrip("-").isdigit()] for t in texts]


def test_lustre_osts_are_each_rows_list(prof):
    lus = prof.module("LUSTRE")
    if lus is None:
        pytest.skip("no LUSTRE records in this log")
    row, ost = metrics.lustre_osts(prof)
    want = _osts_by_row(lus["osts"].tolist())
    assert sum(map(len, want)) == len(ost) > 0
    got = [ost[row == i].tolist() for i in range(len(want))]
    assert got == want


@pytest.mark.parametrize("texts", [["1,2,3", "", "7"], ["4", "1,,2", "3,"], ["x,5", " 6", "-1"], ["", ""], ["007,8"], []])
def test_parse_osts_odd_strings(texts):
    row, ost = metrics._parse_osts(list(texts))
    assert [ost[row == i].tolist() for i in range(len(texts))] == _osts_by_row(texts)


def test_angle_and_std_ids_match_the_paths(prof):
    paths = prof.path_of()
    assert metrics.angle_file_ids(prof).tolist() == [f for f, p in paths.items() if p.startswith("<")]
    std = [f for f, p in paths.items() if p in ("<STDIN>", "<STDOUT>", "<STDERR>")]
    assert metrics.std_file_ids(prof).tolist() == std
    p, is_std = metrics.file_paths(prof)
    fids = metrics.metrics_of(prof).file_ids.tolist()
    assert len(fids) > metrics._FEW_FILES  # the searched (not looped) branch
    assert p.tolist() == [paths.get(f, "") for f in fids]
    assert is_std.tolist() == [paths.get(f, "") in ("<STDIN>", "<STDOUT>", "<STDERR>") for f in fids]
    some = np.asarray(fids[::7] + [12345], dtype="u8")  # 12345: an id the files table lacks
    assert metrics.paths_of_ids(prof, some) == [paths.get(int(f)) for f in some]


def test_stripe_and_parallel_fs_match_dicts(prof):
    fids = metrics.metrics_of(prof).file_ids
    lus = prof.module("LUSTRE")
    stripe = dict(zip(lus["file_id"].tolist(), lus["stripe_size"].tolist())) if lus is not None else {}
    fs = dict(zip(prof.files["file_id"].tolist(), prof.files["fs_type"].tolist()))
    size, has = metrics.lustre_stripe(prof, fids)
    assert size.tolist() == [float(stripe.get(int(f), 0)) for f in fids]
    assert has.tolist() == [int(f) in stripe for f in fids]
    par = ("lustre", "gpfs", "nfs")
    assert metrics.on_parallel_fs(prof, fids, par).tolist() == [
        str(fs.get(int(f), "")).lower() in par or int(f) in stripe for f in fids]


_PY = re.compile(r"(\.pyc?|\.so(\.[\d.]+)?|/site-packages/.*|/lib/python[\d.]+/.*)$")
_ARRAY = re.compile(r"\.(nc|nc4|h5|hdf5|he5|hdf)$", re.I)


def _kind_by_patterns(path: str) -> str:
    if _PY.search(path):
        return "python-import"
    if chunk_key(path) is not None:
        return "zarr-chunk"
    return "netcdf-hdf5" if _ARRAY.search(path) else "other"


def test_path_kind_matches_the_patterns(prof):
    paths = list(prof.path_of().values())
    kinds = [path_kind(p) for p in paths]
    assert kinds == [_kind_by_patterns(p) for p in paths]


@pytest.mark.parametrize("path", ["/a/x.py\n", "/a/x.h5\n", "/a/X.HDF5", "/a/x.so.1.2", "/a/x.so.", "/a/lib/python3.11/",
                                  "/a/lib/pythonX/y", "/a/site-packages/", "/d/a.zarr/v/0.1", "/d/a.zarr/c/0/1.0123456789abcdef0.partial",
                                  "x.nc4", "x.nc5", "", "/"])
def test_path_kind_edge_cases(path):
    assert path_kind(path) == _kind_by_patterns(path)


def test_python_import_log_is_classified(corpus):
    prof = load_job([str(corpus_path(MANY[2]))])
    kinds = [path_kind(p) for p in prof.path_of().values()]
    assert kinds.count("python-import") > 100  # the log is a Python interpreter importing its modules


@pytest.mark.parametrize("path", ["", "/", "//", "/a", "a", "a/", "a//b", "/a/b/", "///a//b//c"])
def test_dirname_matches_os_path(path):
    from iodiag.analyzers.detectors.metadata import _dirname

    assert _dirname(path) == os.path.dirname(path)
