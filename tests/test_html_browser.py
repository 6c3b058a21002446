"""The HTML report in a real headless Chromium: loads with no console errors,
every plot is an inline SVG laid out with a non-zero size and visible data
marks (embedded rasters decoded), and hostile file names are shown as text
without any script running.

Screenshots are written to $IODIAG_SCREENSHOT_DIR when set (to look at them).
"""

from __future__ import annotations

import struct

import pytest

from iodiag.findings import Finding
from iodiag.reports.html import render_html

from test_html_support import (  # noqa: F401  (browser is a fixture)
    COUNTERS_ONLY, DXT_1024, XSS_NAMES, browser, dask_profile, load, screenshot_dir, xss_profile,
)

pytestmark = pytest.mark.chromium

EXPECTED_PLOTS = {"plot-volumes", "plot-sizes", "plot-timeline", "plot-files", "plot-metadata"}


def _png_size(path):
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def _check_page(r, expected_plots):
    assert r["errors"] == [], r["errors"]
    assert r["scripts"] == [] and r["script_elements"] == 0, "the report must not run any script"
    assert r["dialogs"] == []
    figures = {s["id"]: s for s in r["svgs"]}
    assert expected_plots <= set(figures), set(figures)
    for pid in expected_plots:
        fig = figures[pid]
        assert fig["w"] > 500 and fig["h"] > 100, fig  # laid out on the page, not hidden or squashed
        assert fig["marks"] > 0 and fig["drawn"] == fig["marks"], fig  # its data marks are drawn with a size
        assert all(w > 0 and h > 0 for w, h in fig["rasters"]), fig  # embedded PNGs decode
    assert len(figures["plot-timeline"]["rasters"]) == 4  # two cell grids and their two colour bars
    assert [w for w, _h in figures["plot-timeline"]["rasters"]].count(400) == 2  # grids of 400 time bins


@pytest.mark.parametrize("name,pattern", [("dxt1024", DXT_1024), ("counters-only", COUNTERS_ONLY)])
def test_report_loads_cleanly(browser, tmp_path, name, pattern):
    prof = load(pattern)
    page = tmp_path / f"{name}.html"
    page.write_text(render_html(prof, []), encoding="utf-8")
    shot = screenshot_dir(tmp_path) / f"report-{name}.png"
    r = browser.load(page, screenshot=shot)
    _check_page(r, EXPECTED_PLOTS)
    w, h = _png_size(shot)
    assert w == 1100 and h > 2000
    assert f"I/O report: job {prof.job.job_id}" in r["text"]
    if name == "dxt1024":
        assert "1,024 processes drawn as 256 rows of 4" in r["text"]
    else:
        assert "No trace or heatmap in this log" in r["text"]


def test_dask_report_loads_cleanly(browser, tmp_path):
    prof, _slow = dask_profile()
    (tmp_path / "dask-report.html").write_text("<html><body>Dask performance report</body></html>")
    page = tmp_path / "dask.html"
    page.write_text(render_html(prof, [], dask_report_href="dask-report.html"), encoding="utf-8")
    shot = screenshot_dir(tmp_path) / "report-dask.png"
    r = browser.load(page, screenshot=shot)
    _check_page(r, EXPECTED_PLOTS | {"plot-gantt", "plot-durations"})
    assert "Dask performance report captured with this run" in r["text"]
    assert "straggler task" in r["text"]


def test_hostile_file_names_render_as_text_and_no_script_runs(browser, tmp_path):
    prof = xss_profile()
    finding = Finding(id="small-io", severity="high", title=f"Small writes to {XSS_NAMES[0]}",
                      evidence={"file": XSS_NAMES[1], "ops": 12}, recommendation=f"Buffer writes to {XSS_NAMES[1]}",
                      files=[XSS_NAMES[0], XSS_NAMES[1]])
    page = tmp_path / "xss.html"
    page.write_text(render_html(prof, [finding], dask_report_href="javascript:alert(1)"), encoding="utf-8")
    shot = screenshot_dir(tmp_path) / "report-xss.png"
    r = browser.load(page, screenshot=shot)
    assert r["dialogs"] == [] and r["scripts"] == [] and r["errors"] == []
    assert r["handlers"] == 0 and r["script_elements"] == 0
    for bad in ("x", "javascript:alert(1)"):
        assert not any(i["src"] == bad for i in r["images"])
    for name in XSS_NAMES:
        assert name in r["text"], f"{name!r} must be shown as text"
    # the file names reach the job summary, the findings, the top-files table
    assert r["text"].count(XSS_NAMES[0]) >= 4


def test_compare_page_loads_cleanly(browser, tmp_path):
    from iodiag.reports.compare import compare_jobs, render_compare_html

    a, b = load("generated/smallio-metadata-heavy-default/*.darshan"), load("generated/smallio-metadata-heavy-maxrecords/*.darshan")
    page = tmp_path / "compare.html"
    page.write_text(render_compare_html(compare_jobs(a, b)), encoding="utf-8")
    r = browser.load(page, screenshot=screenshot_dir(tmp_path) / "compare.png")
    assert r["errors"] == [] and r["scripts"] == [] and r["script_elements"] == 0
    assert "What changed" in r["text"] and "read operations" in r["text"]


def test_hostile_names_recorded_by_the_embedded_collector(browser, tmp_path):
    """The issue's case for real: a run under the embedded collector writes files whose names hold markup;
    `iodiag report --html` shows them as text and no script runs in Chromium."""
    import json
    import os

    from conftest import run_cli

    try:
        from iodiag.collectors import embedded

        embedded.build()
    except Exception as exc:  # noqa: BLE001
        pytest.skip(f"the embedded collector cannot be built here: {exc}")
    work = tmp_path / "work"
    script = tmp_path / "w.py"
    # '<script>alert(1)</script>' holds a '/', so it is a folder '<script>alert(1)<' and a file 'script>'
    script.write_text(
        "import os, sys\n"
        "d = sys.argv[1]\n"
        "os.makedirs(os.path.join(d, '<script>alert(1)<'), exist_ok=True)\n"
        "for name in ('<script>alert(1)</script>', '\"><img src=x onerror=alert(1)>'):\n"
        "    with open(os.path.join(d, name), 'wb') as fh:\n"
        "        for _ in range(2000):\n"
        "            fh.write(b'x' * 64)\n"
        "        fh.flush(); os.fsync(fh.fileno())\n"
    )
    env = {"IODIAG_HOME": str(tmp_path / "store")}
    run = run_cli("run", "--collector", "embedded", str(script), str(work), env=env)
    assert run.returncode == 0, run.stderr.decode()[-2000:]
    page = tmp_path / "hostile.html"
    rep = run_cli("report", "last", "--json", "--html-path", str(page), env=env)
    assert rep.returncode == 0, rep.stderr.decode()[-2000:]
    report = json.loads(rep.stdout)
    recorded = [f["path"] for f in report["top_files"]]
    expected = [os.path.join(str(work), n) for n in ('<script>alert(1)</script>', '"><img src=x onerror=alert(1)>')]
    assert set(expected) <= set(recorded), recorded  # the collector saw the real names
    r = browser.load(page, screenshot=screenshot_dir(tmp_path) / "report-hostile-embedded.png")
    assert r["dialogs"] == [] and r["scripts"] == [] and r["errors"] == []
    assert r["handlers"] == 0 and r["script_elements"] == 0
    assert not any(i["src"] == "x" for i in r["images"])
    for path in expected:
        assert path in r["text"], f"{path!r} must be shown as text"
