"""Plot tables checked on their numbers, against real logs (and pydarshan as an independent reader)."""

from __future__ import annotations

import numpy as np
import pytest

from iodiag.profile import OP, OPS_MODULE
from iodiag.reports.plots._grid import spread
from iodiag.reports.plots.dask import draw_task_durations, draw_task_stream, task_durations, task_stream
from iodiag.reports.plots.metadata import draw_metadata_over_time, metadata_over_time
from iodiag.reports.plots.timeline import draw_io_timeline, io_timeline
from iodiag.reports.plots.top_files import draw_top_files, file_times, top_files
from iodiag.analyzers.summary import module_volumes
from iodiag.reports.plots.volumes import SIZE_BINS, SIZE_LABELS, access_sizes, draw_access_sizes, draw_module_volumes, size_bin

from test_html_support import COUNTERS_ONLY, DXT_1024, HEATMAP_1PROC, corpus_logs, dask_profile, load

import xml.etree.ElementTree as ET

from iodiag.reports import svg


def _tree(fig):
    """The figure's SVG parsed as XML (fails on any unescaped text)."""
    return ET.fromstring(fig.svg())


def _tag(el):
    return el.tag.split("}")[-1]


def _marks(fig):
    return [el for el in _tree(fig).iter() if el.get("class") == "mark"]


def _titled(fig):
    """{tooltip text: element} of every titled mark."""
    out = {}
    for el in _tree(fig).iter():
        for t in el:
            if _tag(t) == "title":
                out[t.text] = el
    return out


def decode_png(png: bytes) -> np.ndarray:
    """(rows, cols, 3) pixels of an 8-bit RGB PNG with filter 0 rows (what svg.png_rgb writes)."""
    import struct
    import zlib

    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    w, h, depth, kind = struct.unpack(">IIBB", png[16:26])
    assert (depth, kind) == (8, 2)
    pos, idat = 8, b""
    while pos < len(png):
        n = struct.unpack(">I", png[pos:pos + 4])[0]
        if png[pos + 4:pos + 8] == b"IDAT":
            idat += png[pos + 8:pos + 8 + n]
        pos += 12 + n
    raw = np.frombuffer(zlib.decompress(idat), np.uint8).reshape(h, 1 + 3 * w)
    assert (raw[:, 0] == 0).all()
    return raw[:, 1:].reshape(h, w, 3)


def _pydarshan_counters(path, mod):
    darshan = pytest.importorskip("darshan")
    rep = darshan.DarshanReport(path, read_all=False)
    rep.mod_read_all_records(mod)
    df = rep.records[mod].to_df()
    return df["counters"], df["fcounters"]


def test_spread_splits_intervals_by_overlap():
    # one 3 s interval from 0.5 s over four 1 s bins, one instant, one interval on row 1
    g = spread(np.array([0, 0, 1]), np.array([0.5, 0.0, 2.0]), np.array([3.5, 0.0, 2.2]), np.array([3.0, 1.0, 1.0]), 0.0, 1.0, 2, 4)
    np.testing.assert_allclose(g, [[0.5 + 1.0, 1.0, 1.0, 0.5], [0, 0, 1.0, 0]])
    # random intervals: the grid conserves the total weight
    rng = np.random.default_rng(1)
    s = rng.uniform(0, 10, 5000)
    e = s + rng.exponential(0.7, 5000)
    g = spread(rng.integers(0, 7, 5000), s, np.minimum(e, 10.0), np.ones(5000), 0.0, 0.1, 7, 100)
    assert g.sum() == pytest.approx(5000.0)


def test_module_volumes_match_pydarshan():
    prof = load(DXT_1024)
    vol = {r["module"]: r for r in module_volumes(prof).rows()}
    assert set(vol) == {"POSIX", "MPI-IO", "STDIO"}
    path = corpus_logs(DXT_1024)[0]
    c, f = _pydarshan_counters(path, "POSIX")
    assert vol["POSIX"]["bytes_read"] == int(c["POSIX_BYTES_READ"].sum()) == 2671080664
    assert vol["POSIX"]["bytes_written"] == int(c["POSIX_BYTES_WRITTEN"].sum())
    assert vol["POSIX"]["reads"] == int(c["POSIX_READS"].sum())
    assert vol["POSIX"]["writes"] == int(c["POSIX_WRITES"].sum())
    assert vol["POSIX"]["read_time_s"] == pytest.approx(float(f["POSIX_F_READ_TIME"].sum()))
    c, _ = _pydarshan_counters(path, "MPI-IO")
    assert vol["MPI-IO"]["reads"] == int(sum(c[n].sum() for n in ("MPIIO_INDEP_READS", "MPIIO_COLL_READS", "MPIIO_SPLIT_READS", "MPIIO_NB_READS")))
    # the DXT trace of this log is complete: every traced POSIX byte is in the counters
    o = prof.ops
    posix = o["module"] == OPS_MODULE["POSIX"]
    assert int(o["length"][posix & (o["op"] == OP["read"])].sum()) == vol["POSIX"]["bytes_read"]
    assert int(o["length"][posix & (o["op"] == OP["write"])].sum()) == vol["POSIX"]["bytes_written"]
    fig = draw_module_volumes(module_volumes(prof))
    assert len(fig.panels) == 2
    marks = _titled(fig)
    bar = marks["POSIX read: 2.5 GiB (2,671,080,664 B)"]
    ax = fig.panels[0]
    # the bar's length is the byte count on the axis scale
    assert float(bar.get("width")) == pytest.approx((ax.sx(2671080664) - ax.left), abs=0.01)
    assert f"MPI-IO reads: {vol['MPI-IO']['reads']:,}" in marks


def test_access_sizes_agree_with_the_dxt_trace():
    prof = load(DXT_1024)
    t = access_sizes(prof)
    assert set(t["source"].tolist()) == {"counters"}
    o = prof.ops
    for direction in ("read", "write"):
        sel = (t["module"] == "POSIX") & (t["direction"] == direction)
        assert t["size_bin"][sel].tolist() == list(SIZE_LABELS)
        traced = (o["module"] == OPS_MODULE["POSIX"]) & (o["op"] == OP[direction])
        from_trace = np.bincount(size_bin(o["length"][traced]), minlength=len(SIZE_BINS))
        assert t["count"][sel].tolist() == from_trace.tolist()
        total = int(prof.counters["POSIX"]["POSIX_READS" if direction == "read" else "POSIX_WRITES"].sum())
        assert int(t["count"][sel].sum()) == total
    assert int(t["count"][(t["module"] == "POSIX") & (t["direction"] == "read")][1]) == 121858  # 100 B-1 KiB reads dominate
    fig = draw_access_sizes(t)
    assert len(fig.panels) == 2
    # one bar per non-zero (module, direction, size) count, titled with its count
    assert len(_marks(fig)) == int((t["count"] > 0).sum())
    assert "POSIX reads of 100-1K bytes: 121,858" in _titled(fig)


def test_timeline_of_1024_processes_is_bounded_and_conserves_busy_time():
    prof = load(DXT_1024)
    tl = io_timeline(prof)
    assert tl.source == "ops" and tl.n_rows == 256 and tl.procs_per_row == 4 and tl.nprocs == 1024
    o = prof.ops
    o = o.filter(o["module"] == OPS_MODULE["POSIX"])  # the timeline shows the lowest traced layer
    assert tl.totals["module"] == "POSIX"
    rd = o["op"] == OP["read"]
    assert tl.totals["read_s"] == pytest.approx(float((o["end_s"][rd] - o["start_s"][rd]).sum()), rel=1e-9)
    assert tl.totals["write_s"] == pytest.approx(float((o["end_s"][~rd] - o["start_s"][~rd]).sum()), rel=1e-9)
    # ... which for this complete trace is Darshan's own POSIX read time
    assert tl.totals["read_s"] == pytest.approx(float(prof.counters["POSIX"]["POSIX_F_READ_TIME"].sum()), rel=1e-5)
    # the grid holds fractions of the row's time in I/O: the sum back-converts to the busy seconds
    assert tl.grid("read").sum() * tl.bin_s * tl.procs_per_row == pytest.approx(tl.totals["read_s"], rel=1e-9)
    assert 0 <= tl.grid("read").max() <= 1.0 + 1e-9
    # reads happen late in this job (h5bench write then read-back), writes early
    read_bins = np.nonzero(tl.grid("read").sum(axis=0))[0]
    write_bins = np.nonzero(tl.grid("write").sum(axis=0))[0]
    assert np.median(read_bins) > np.median(write_bins)
    fig = draw_io_timeline(tl)
    assert len(fig.panels) == 2
    grids = [decode_png(png) for png in fig.images if decode_png(png).shape[1] > 1]  # colour bars are 1 px wide
    assert [g.shape for g in grids] == [(256, 400, 3), (256, 400, 3)]
    # a cell is coloured exactly where the grid has I/O, and darker where the fraction is larger
    empty = np.array(svg._rgb(svg.EMPTY), np.uint8)
    for img, column in zip(grids, ("read", "write")):
        g = tl.grid(column)
        coloured = (img != empty).any(axis=2)
        assert (coloured == (g > 0)).all()
        lum = img.astype(int).sum(axis=2)
        hi, lo = np.unravel_index(np.argmax(g), g.shape), np.unravel_index(np.argmin(np.where(g > 0, g, np.inf)), g.shape)
        assert lum[hi] < lum[lo]
    full = io_timeline(prof, max_rows=2048)
    assert full.n_rows == 1024 and full.procs_per_row == 1
    assert full.totals["read_s"] == pytest.approx(tl.totals["read_s"])


def test_timeline_from_heatmap_keeps_every_byte():
    prof = load(HEATMAP_1PROC)
    assert not prof.has_dxt and len(prof.heatmap)
    tl = io_timeline(prof)
    assert tl.source == "heatmap"
    h = prof.heatmap
    inside = (h["start_s"] >= tl.t0_s - 1e-9) & (h["end_s"] <= tl.t0_s + tl.n_bins * tl.bin_s + 1e-9)
    assert tl.totals["read_bytes"] == pytest.approx(float(h["read_bytes"][inside].sum()))
    assert tl.totals["write_bytes"] == pytest.approx(float(h["write_bytes"][inside].sum()))
    assert tl.totals["write_bytes"] > 1e6  # the run writes ~6 MB of NetCDF and Zarr


def test_timeline_from_counters_only():
    prof = load(COUNTERS_ONLY)
    assert not len(prof.ops) and not len(prof.heatmap)
    tl = io_timeline(prof)
    assert tl.source == "counters" and tl.n_rows == 4
    g = tl.grid("read")
    # the test file is shared (one rank -1 record): every process shows the same read window
    assert (g > 0).any(axis=1).all()
    assert np.allclose(g, g[0])


def test_top_files_rank_by_time_and_count_processes():
    prof = load(DXT_1024)
    t = top_files(prof, n=2)
    assert len(t) == 2
    assert t["path"][0].endswith("benchmark.h5") and t["processes"][0] == 1024 and "POSIX" in t["layers"][0].split("+")
    # the file is written through HDF5 over MPI-IO over POSIX: each time column is the larger of its layers' sums
    # (a layer's time includes the time of the layers beneath it, so they are never added), bytes are POSIX's
    log = corpus_logs(DXT_1024)[0]
    c, f = _pydarshan_counters(log, "POSIX")
    _, m = _pydarshan_counters(log, "MPI-IO")
    for col, name in (("read_time_s", "F_READ_TIME"), ("meta_time_s", "F_META_TIME")):
        want = max(float(f[f"POSIX_{name}"].sum()), float(m[f"MPIIO_{name}"].sum()))
        assert t[col][0] == pytest.approx(want)
    assert t["read_time_s"][0] > float(f["POSIX_F_READ_TIME"].sum())  # here the MPI-IO layer's time is larger
    assert t["bytes_read"][0] == int(c["POSIX_BYTES_READ"].sum())
    allf = file_times(prof)
    assert np.all(np.diff(allf["io_time_s"]) <= 0)
    fig = draw_top_files(t)
    assert len(fig.panels) == 1
    positive = sum(int((t[c] > 0).sum()) for c in ("read_time_s", "write_time_s", "meta_time_s"))
    assert len(_marks(fig)) == positive
    # a label's tooltip (<title>) holds the full path; the label shown follows it
    labels = [(el.text or el[0].tail) for el in _tree(fig).iter() if _tag(el) == "text" and el.get("font-family", "").startswith("'DejaVu Sans Mono")]
    assert labels[0].endswith("benchmark.h5") and "\u2026" in labels[0]  # long path: middle ellipsis, file name kept
    assert [el[0].text for el in _tree(fig).iter() if _tag(el) == "text" and len(el)][:2] == t["path"].tolist()


def test_metadata_estimate_keeps_every_counted_call():
    prof = load(DXT_1024)
    md = metadata_over_time(prof)
    assert set(md["source"].tolist()) == {"counters"}
    c, s = prof.counters["POSIX"], prof.counters["STDIO"]
    assert md["open"].sum() == pytest.approx(float((c["POSIX_OPENS"] + c["POSIX_FILENOS"] + c["POSIX_DUPS"]).sum())
                                            + float(s["STDIO_OPENS"].sum() + s["STDIO_FDOPENS"].sum()))
    assert md["seek"].sum() == pytest.approx(float(c["POSIX_SEEKS"].sum() + s["STDIO_SEEKS"].sum()))
    assert md["stat"].sum() == pytest.approx(float(c["POSIX_STATS"].sum()))
    # opens only fall inside the first-to-last open window of the records
    lo = float(np.minimum(c["POSIX_F_OPEN_START_TIMESTAMP"], 1e9).min())
    hi = float(c["POSIX_F_OPEN_END_TIMESTAMP"].max())
    outside = (md["end_s"] < lo - 1e-6) | (md["start_s"] > hi + 1e-6)
    assert outside.any() and md["open"][outside & (md["start_s"] > 0.5)].sum() == 0
    fig = draw_metadata_over_time(md)
    assert len(fig.panels) == 1
    kinds_drawn = {k.split(":")[0] for k in _titled(fig)}
    assert kinds_drawn == {k for k in ("open", "stat", "seek", "sync", "other") if md[k].sum() > 0}


def test_dask_task_stream_and_straggler_from_a_real_cluster():
    prof, slow_key = dask_profile()
    ts = task_stream(prof)
    assert len(ts.workers) == 2 and len(ts.lanes) >= 2
    assert set(ts.tasks["lane"].tolist()) == set(range(len(ts.lanes)))
    # the I/O rows hold the worker processes' traced reads and writes, merged
    assert len(ts.io) > 0
    worker_procs = prof.processes["proc"][np.isin(prof.processes["pid"], [2070, 2073])]
    mine = np.isin(prof.ops["proc"], worker_procs)
    assert len(ts.io) <= int(mine.sum())
    assert float((ts.io["end_s"] - ts.io["start_s"]).sum()) >= float((prof.ops["end_s"][mine] - prof.ops["start_s"][mine]).max()) - 1e-9
    d = task_durations(prof)
    assert d["straggler"].sum() == 1 and d["key"][d["straggler"]][0] == slow_key
    slow = d["duration_s"][d["straggler"]][0]
    assert slow > 1.5 and slow - d["prefix_median_s"][d["straggler"]][0] > 1.0
    assert set(d["prefix"].tolist()) == {"_slow_inc", "_double"} or set(d["prefix"].tolist()) == {"slow_inc", "double"}
    gantt = draw_task_stream(ts)
    assert len(gantt.panels) == 1
    titles = _titled(gantt)
    n_inc = int((ts.tasks["prefix"] == d["prefix"][d["straggler"]][0]).sum())
    assert any(k.endswith(f"{n_inc:,} tasks") for k in titles)
    # each I/O interval (already merged) is one bar, unless two fall within a pixel
    io_bars = sum(len(el) - 1 for k, el in titles.items() if k.endswith(("reads", "writes")))
    assert 0 < io_bars <= len(ts.io)
    durs = draw_task_durations(d)
    assert len(durs.panels) == 1
    assert f"straggler {slow_key}" in _titled(durs)
    assert durs.marks >= len(d)  # every task a dot (or the straggler's cross), plus the boxes


def test_dask_gantt_with_many_tasks_is_one_image(monkeypatch):
    """Past MAX_TASK_BARS tasks the Gantt is a raster (bounded page); it must still show where each task ran."""
    import iodiag.reports.plots.dask as dask_plots

    prof, slow_key = dask_profile()
    ts = task_stream(prof)
    monkeypatch.setattr(dask_plots, "MAX_TASK_BARS", 0)
    fig = draw_task_stream(ts)
    (png,) = fig.images
    img = decode_png(png)
    ax = fig.panels[0]
    n_rows = len(ts.lanes) + len(ts.workers)
    assert img.shape == (2 * n_rows, int(round(ax.w)), 3)
    # the straggler ran alone on its thread: its row is the prefix colour, unshaded, over its whole duration
    slow = ts.tasks.filter((ts.tasks["key"] == slow_key) & (ts.tasks["phase"] == "compute"))
    lane = int(slow["lane"][0])
    worker = ts.lanes[lane][0]
    row = lane + ts.workers.index(worker)  # lanes are in worker order, each worker's I/O row after its lanes
    c0 = int((ax.sx(float(slow["start_s"][0])) - ax.left)) + 2
    c1 = int((ax.sx(float(slow["end_s"][0])) - ax.left)) - 2
    colour = np.array(svg._rgb(dask_plots._prefix_colors(ts.tasks["prefix"].tolist())[slow["prefix"][0]]), np.uint8)
    assert c1 - c0 > 100 and (img[2 * row, c0:c1] == colour).all()
    # an I/O row shows the worker process's traced reads or writes somewhere
    io_rows = [sum(1 for w, _t in ts.lanes if ts.workers.index(w) <= wi) + wi for wi in range(len(ts.workers))]
    assert all((img[2 * r:2 * r + 2] != 255).any() for r in io_rows)
