"""Rendering the HTML report (string level): sections, escaping, obfuscation, links."""

from __future__ import annotations

import re

import pytest

from iodiag.findings import Finding
from iodiag.reports.html import render_html, safe_href
from iodiag.reports.obfuscate import Obfuscator, obfuscate_profile, sensitive_names

from test_html_support import COUNTERS_ONLY, DASK_DXT, DXT_1024, HEATMAP_1PROC, XSS_NAMES, leaked_names, load, xss_profile


def _plots(html):
    """(figure id, svg markup, width, height) of every inline plot."""
    return [(m[0], m[1], float(m[2]), float(m[3])) for m in re.findall(
        r'<figure id="(plot-[a-z]+)">\s*<div class="plot">(<svg [^>]*viewBox="0 0 ([\d.]+) ([\d.]+)".*?</svg>)</div>', html, flags=re.S)]


@pytest.mark.parametrize("pattern", [DXT_1024, COUNTERS_ONLY, HEATMAP_1PROC, DASK_DXT])
def test_report_is_one_self_contained_page(pattern):
    html = render_html(load(pattern), [])
    assert html.startswith("<!DOCTYPE html>")
    assert "<script" not in html.lower()
    # nothing fetched from anywhere: no src/href pointing outside the page
    assert not re.search(r'(src|href)="(?!data:image/png;base64,|#)', html)
    assert "default-src 'none'" in html
    plots = _plots(html)
    assert [p[0] for p in plots] == ["plot-volumes", "plot-sizes", "plot-timeline", "plot-files", "plot-metadata"]
    import xml.etree.ElementTree as ET

    for pid, markup, w, h in plots:
        assert w > 300 and h > 100, pid
        root = ET.fromstring(markup)  # well-formed: every text in it was escaped
        assert any(el.get("class") == "mark" for el in root.iter()), f"{pid} has no data marks"
    assert "<img" not in html  # plots are inline SVG now
    for sec in ("summary", "findings", "volumes", "sizes", "timeline", "files", "metadata"):
        assert f'<section id="{sec}">' in html


def test_report_of_1024_processes_is_small():
    html = render_html(load(DXT_1024), [])
    assert len(html.encode()) < 5 * 1024 * 1024
    assert "1,024 processes drawn as 256 rows of 4" in html


def test_findings_section_escapes_and_shows_evidence():
    # Findings built here only to test the rendering of that section (not a diagnosis).
    f = Finding(id="small-io", severity="high", title="<b>Small</b> writes", evidence={"ops_count": 1234567, "median_bytes": 40.0, "<k>": "<v>"},
                recommendation="Use <em>larger</em> buffers & aggregate", files=["/a/<x>.h5"], processes=[0, 3],
                est_cost_s=12.5, cost_share=0.42)
    g = Finding(id="metadata-storm", severity="low", title="Many opens", evidence={"opens": 10}, recommendation="Keep files open")
    html = render_html(load(COUNTERS_ONLY), [f, g])
    assert "&lt;b&gt;Small&lt;/b&gt; writes" in html and "<b>Small</b>" not in html
    assert "Use &lt;em&gt;larger&lt;/em&gt; buffers &amp; aggregate" in html
    assert "&lt;k&gt;" in html and "&lt;v&gt;" in html and "/a/&lt;x&gt;.h5" in html
    assert "1,234,567" in html and "12.50 s" in html and "42% of the run" in html  # units.fmt_pct: the one percent style
    assert html.index('class="finding high"') < html.index('class="finding low"')


def test_findings_come_from_the_json_report_when_given():
    report = {"schema": "iodiag.report/1", "findings": [{"id": "stdio-heavy", "severity": "medium", "title": "From the JSON",
              "evidence": {"share": 0.5}, "files": [], "processes": [], "est_cost_s": None, "cost_share": None, "recommendation": "r"}]}
    html = render_html(load(COUNTERS_ONLY), [], report=report)
    assert "From the JSON" in html


def test_hostile_names_are_escaped_everywhere():
    html = render_html(xss_profile(), [])
    for name in XSS_NAMES:
        assert name not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "&#34;&gt;&lt;img src=x onerror=alert(1)&gt;" in html
    # the top-files plot shows the names too, escaped by the SVG writer (labels and tooltips)
    files_svg = next(m for pid, m, _w, _h in _plots(html) if pid == "plot-files")
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in files_svg and "&quot;&gt;&lt;img src=x onerror=alert(1)&gt;" in files_svg
    import xml.etree.ElementTree as ET

    # text shown (tooltips left out) and tooltips: both hold the names as plain text once parsed
    shown = [(el.text or "") + "".join(c.tail or "" for c in el) for el in ET.fromstring(files_svg).iter() if el.tag.endswith("text")]
    tips = [el.text for el in ET.fromstring(files_svg).iter() if el.tag.endswith("title")]
    assert XSS_NAMES[0] in shown and XSS_NAMES[1] in shown and XSS_NAMES[1] in tips


@pytest.mark.parametrize("href,ok", [("dask-report.html", True), ("../dask/report.html", True), ("https://x.org/r.html", True),
                                     ("javascript:alert(1)", False), ("data:text/html,<script>", False), ('a" onclick="x', False)])
def test_only_safe_links(href, ok):
    assert (safe_href(href) is not None) == ok


@pytest.mark.parametrize("pattern", [DXT_1024, DASK_DXT])
def test_obfuscated_report_hides_every_name(pattern):
    prof = load(pattern)
    names = sensitive_names(prof)
    assert names  # the log has names to hide
    f = Finding(id="small-io", severity="medium", title=f"Small I/O on {prof.files['path'][0]}", evidence={"user": prof.job.user or "", "host": str(prof.processes['host'][0])},
                recommendation=f"Change {prof.job.exe} to buffer", files=list(prof.files["path"][:2]))
    html = render_html(prof, [f], obfuscate=True, report=None)
    assert leaked_names(names, html) == []
    # the same name gets the same token in a second report (stable hashes)
    html2 = render_html(prof, [f], obfuscate=True)
    assert _strip_images(html) == _strip_images(html2)


def _strip_images(html):
    return re.sub(r"base64,[A-Za-z0-9+/=]+", "", html)


def test_obfuscation_keeps_structure_and_extension():
    obf = Obfuscator()
    a = obf.path("/global/cscratch1/sd/jeanbez/run/out.h5")
    b = obf.path("/global/cscratch1/sd/jeanbez/run/in.nc")
    assert a.count("/") == 6 and a.endswith(".h5") and b.endswith(".nc")
    assert a.rsplit("/", 1)[0] == b.rsplit("/", 1)[0]  # same directory, same token
    assert "jeanbez" not in a and "global" not in a
    assert obf.path("<STDOUT>") == "<STDOUT>"
    assert Obfuscator().path("/x/y.h5") == Obfuscator().path("/x/y.h5")
    assert Obfuscator(salt="s").path("/x/y.h5") != Obfuscator().path("/x/y.h5")
    # names inside free text: known names, other absolute paths, user as a word; "MiB/s" stays
    obf.user("jeanbez")
    t = obf.text("user jeanbez wrote /global/cscratch1/sd/jeanbez/run/out.h5 and /tmp/z at 3 MiB/s; jeanbez_x")
    assert "jeanbez" not in t and "/tmp/z" not in t and "MiB/s" in t and a in t


def test_obfuscated_profile_tables():
    prof = load(DASK_DXT)
    obf = Obfuscator.for_profile(prof)
    o = obfuscate_profile(prof, obf)
    assert len(o.files) == len(prof.files) and o.job.uid is None
    real = [p for p in prof.files["path"].tolist() if not p.startswith("<")]  # <STDOUT> etc. are kept
    assert set(o.files["path"].tolist()).isdisjoint(real) and len(real) > 500
    assert len(set(o.files["path"].tolist())) == len(set(prof.files["path"].tolist()))  # no collisions
    assert "/tmp/darshan-test" not in o.job.args


def test_json_report_and_html_share_tokens_and_hide_names():
    from iodiag.reports.json_report import build_report, render_json
    from iodiag.reports.obfuscate import obfuscate_report

    prof = load(DASK_DXT)
    names = sensitive_names(prof)
    report = build_report(prof, [])
    obf_report = obfuscate_report(report)
    text = render_json(obf_report)
    assert leaked_names(names, text) == []
    assert obf_report["job"]["uid"] is None and obf_report["job"]["user"] in (None, report["job"]["user"] and obf_report["job"]["user"])
    assert obfuscate_report(obf_report) == obf_report  # idempotent
    # the lead's flow: obfuscated report + obfuscate=True -> the same tokens as the report's
    html = render_html(prof, [], report=obf_report, obfuscate=True)
    assert leaked_names(names, html) == []
    assert obf_report["top_files"][0]["path"] in html
    assert obf_report["job"]["exe"] in html


def test_html_path_does_not_import_pandas_or_matplotlib(tmp_path):
    import subprocess
    import sys

    from test_html_support import REPO, corpus_logs

    code = ("import sys; from iodiag.analyzers.load import load_job; from iodiag.reports.html import render_html; "
            f"html = render_html(load_job({corpus_logs(HEATMAP_1PROC)!r}), []); "
            "print(len(html), 'pandas' in sys.modules, 'matplotlib' in sys.modules)")
    env = {"PYTHONPATH": str(REPO / "src"), "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    size, pandas, mpl = out.stdout.split()
    assert int(size) > 10000 and pandas == "False" and mpl == "False"


def test_report_command_obfuscates_json_terminal_and_html(tmp_path):
    """`iodiag report DIR --obfuscate`: the lead's command with this branch's obfuscation, every output."""
    import subprocess
    import sys

    from test_html_support import CORPUS, REPO

    folder = str(CORPUS / "generated/dask-localcluster-2workers-dxt-jobid")
    names = sensitive_names(load(DASK_DXT))
    env = {"PYTHONPATH": str(REPO / "src"), "PATH": "/usr/bin:/bin"}
    page = tmp_path / "r.html"
    run = lambda *a: subprocess.run([sys.executable, "-m", "iodiag", "report", folder, "--obfuscate", *a],  # noqa: E731
                                    capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path)
    r = run("--json", "--html-path", str(page))
    assert r.returncode == 0, r.stderr
    import json

    rep = json.loads(r.stdout)
    assert rep["job"]["uid"] is None
    assert leaked_names(names, r.stdout) == [] and leaked_names(names, page.read_text()) == []
    assert rep["top_files"][0]["path"] in page.read_text()  # same tokens in JSON and HTML
    t = run("--no-color")
    assert t.returncode == 0 and leaked_names(names, t.stdout + t.stderr) == []
