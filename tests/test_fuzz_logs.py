"""Damaged logs never crash or hang iodiag: truncated and bit-flipped variants of corpus logs.

The slow suite runs >= 1,000 variants; the default suite a quick sample.  Every variant
must come back as either a loaded profile or a per-log error with a cause, and the
whole run must finish (each log has a reader timeout).
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from iodiag.analyzers.load import build_profile
from iodiag.analyzers.readers.isolate import read_logs
from iodiag.errors import NoUsableData

from conftest import corpus_path

SEEDS = [
    "darshan-logs/darshan_logs/mpi_io_test_with_dxt/treddy_mpi-io-test_id4373053_6-2-60198-9815401321915095332_1.darshan",
    "darshan/darshan-util/pydarshan/darshan/tests/input/sample-dxt-simple.darshan",
    "darshan-logs/darshan_logs/release_logs/mpi-io-test-x86_64-3.1.8.darshan",
    "darshan-logs/darshan_logs/release_logs/mpi-io-test-x86_64-3.5.0.darshan",
    "generated/xarray-nc2zarr-1proc-dxt/0_python_id20361-20361_11-22-82634-4044189885351072024_1.darshan",
    "darshan-logs/darshan_logs/e3sm_io_heatmaps_and_dxt/e3sm_io_heatmap_only.darshan",
    "darshan-logs/darshan_logs/hdf5_diagonal_write_only/hdf5_diagonal_write_half_ranks_dxt.darshan",
]


def make_variants(out: Path, n: int, seed: int = 1234) -> list[Path]:
    rng = random.Random(seed)
    blobs = [(Path(s).name, corpus_path(s).read_bytes()) for s in SEEDS]
    paths = []
    for i in range(n):
        name, data = blobs[i % len(blobs)]
        buf = bytearray(data)
        kind = rng.choice(["truncate", "flip", "flip-header", "zero-run", "truncate-flip"])
        if kind in ("truncate", "truncate-flip"):
            buf = buf[: rng.randrange(0, len(buf))]
        if kind in ("flip", "truncate-flip") and buf:
            for _ in range(rng.randint(1, 16)):
                pos = rng.randrange(len(buf))
                buf[pos] ^= 1 << rng.randrange(8)
        if kind == "flip-header" and buf:
            for _ in range(rng.randint(1, 4)):
                pos = rng.randrange(min(len(buf), 4096))
                buf[pos] ^= 1 << rng.randrange(8)
        if kind == "zero-run" and len(buf) > 64:
            a = rng.randrange(len(buf) - 32)
            buf[a:a + rng.randint(8, 4096)] = bytes(min(len(buf) - a, rng.randint(8, 4096)))
        p = out / f"v{i:05d}_{kind}_{name}"
        p.write_bytes(bytes(buf))
        paths.append(p)
    return paths


def _check(paths: list[Path]) -> dict[str, int]:
    counts = {"loaded": 0, "error": 0}
    results = list(read_logs([str(p) for p in paths], timeout_s=30))
    assert len(results) == len(paths)
    for p, r in zip(paths, results):
        assert r.path == str(p)
        if r.data is None:
            assert r.error_kind in ("unreadable", "crashed", "timeout") and r.error, p
            counts["error"] += 1
            continue
        # a variant that decoded must still merge into a profile without raising
        try:
            prof = build_profile([r])
        except NoUsableData:
            raise AssertionError(f"{p}: decoded but could not be profiled")
        assert prof.job.nprocs >= 1
        counts["loaded"] += 1
    return counts


def test_fuzz_sample(tmp_path):
    counts = _check(make_variants(tmp_path, 70))
    assert counts["loaded"] + counts["error"] == 70
    assert counts["error"] > 0  # the damage is real: some variants must be refused


@pytest.mark.slow
def test_fuzz_thousand_variants(tmp_path):
    counts = _check(make_variants(tmp_path, 1050, seed=99))
    assert counts["loaded"] + counts["error"] == 1050
    assert counts["error"] > 100


def test_single_byte_flips_inside_module_regions_cost_at_most_one_ranks_share(tmp_path):
    """40 random one-byte flips inside the module regions of a 32-rank corpus log (each rank's share of a region is
    its own zlib stream): every variant loads, loses at most one rank's records of one module (3 POSIX, 2 DXT_POSIX,
    1 of the others), and a module that lost records is named in the losses - never dropped silently."""
    from iodiag.analyzers.readers.container import read_header

    src = corpus_path(SEEDS[0])
    data = src.read_bytes()
    hdr = read_header(data)
    regions = [(off, ln) for key, off, ln in hdr.regions(len(data)) if key.startswith("mod")]
    rng = random.Random(27)
    paths = []
    for i in range(40):
        off, ln = rng.choice(regions)
        buf = bytearray(data)
        buf[off + rng.randrange(ln)] ^= 1 << rng.randrange(8)
        p = tmp_path / f"flip{i:02d}_{src.name}"
        p.write_bytes(bytes(buf))
        paths.append(p)

    def counts(d):
        return {m: len(x.get("file_id", x.get("rec_rank", ()))) for m, x in d["mods"].items()}

    whole = counts(next(read_logs([str(src)])).data)
    share = {"POSIX": 3, "DXT_POSIX": 2}
    for p, r in zip(paths, read_logs([str(p) for p in paths], timeout_s=30)):
        assert r.data is not None, (p.name, r.error)
        got, named = counts(r.data), {m for m, _ in r.data["losses"]}
        short = {m: n - got.get(m, 0) for m, n in whole.items() if got.get(m, 0) < n}
        assert len(short) <= 1 and all(k <= share.get(m, 1) for m, k in short.items()), (p.name, short)
        assert set(short) <= named, (p.name, short, r.data["losses"])
        build_profile([r])
