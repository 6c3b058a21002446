"""One units module (src/iodiag/units.py): a quantity reads the same in every output (issue 29).

Before, a 2 TiB volume was "2048.0 GiB" in a finding title (metrics.fmt_bytes stopped at GiB) and "2.0 TiB" in
the terminal evidence; percentages had four styles ("12%", "12 %", "12.0%", ":.0%" rounding 99.99 % up to 100 %).
"""

from __future__ import annotations

import re

from conftest import REPO, corpus_path
from iodiag.analyzers.load import load_job
from iodiag.config import Config
from iodiag.reports.compare import compare_jobs, render_compare_text
from iodiag.reports.html import render_html
from iodiag.reports.terminal import render_terminal
from iodiag.service import diagnose_report
from iodiag.units import fmt_bytes, fmt_pct

SRC = REPO / "src" / "iodiag"
TIB_LOG = "darshan/darshan-util/pydarshan/darshan/tests/input/sample.darshan"  # VPIC-IO: 2 TiB written
IMBALANCED = "darshan-logs/darshan_logs/imbalanced_io/imbalanced-io.darshan"  # one rank moves 99.999 % of the bytes


def test_a_tib_volume_reads_the_same_in_terminal_html_and_compare():
    prof = load_job([str(corpus_path(TIB_LOG))])
    findings, rep = diagnose_report(profile=prof, config=Config(), home=None)
    written = rep["volumes"]["bytes_written"]
    assert written >= 1024 ** 4
    want = fmt_bytes(written)
    assert want.endswith(" TiB")
    as_gib = f"{written / 1024 ** 3:.1f} GiB"
    outputs = {"terminal": render_terminal(rep, width=120),
               "compare": render_compare_text(compare_jobs(prof, prof)),
               "html": render_html(prof, findings)}
    for name, text in outputs.items():
        assert want in text, name
        assert as_gib not in text, name


def test_a_share_just_under_the_whole_is_not_rounded_up_anywhere():
    prof = load_job([str(corpus_path(IMBALANCED))])
    findings, rep = diagnose_report(profile=prof, config=Config(), home=None)
    f = next(f for f in rep["findings"] if f["id"] == "rank-imbalance")
    share = f["evidence"]["share_of_bytes_on_heavy"]
    assert 0.995 <= share < 1
    assert fmt_pct(share) in f["title"] and "100%" not in f["title"]
    text = render_terminal(rep, width=120)
    assert fmt_pct(share) in text and "100 %" not in text


def test_no_module_but_units_formats_bytes_or_percent_itself():
    """Unit names are spelled only in units.py, and no f-string formats a share with ':.0%' or a trailing ' %'."""
    units_lists, inline_pct = [], []
    for p in sorted(SRC.rglob("*.py")):
        rel = p.relative_to(SRC).as_posix()
        text = p.read_text()
        if rel != "units.py" and re.search(r"""["'](KiB|MiB|GiB|TiB|PiB)["']""", text):
            units_lists.append(rel)
        if re.search(r":\+?\.\d+%\}|\}\s%[\"')]", text):
            inline_pct.append(rel)
    assert units_lists == [] and inline_pct == []
