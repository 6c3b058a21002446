"""The terminal report's text layer (reports/textout.py): wrapping, tables, styles and hostile names."""

from __future__ import annotations

import json
import re

import pytest

from iodiag.reports.terminal import render_terminal
from iodiag.units import fmt_bytes, fmt_pct, fmt_seconds
from iodiag.reports.textout import Lines, cell_len, clean
from test_snapshots import _report

ANSI = re.compile(r"\x1b\[[0-9;]*m")


@pytest.mark.parametrize("name", ["badost", "h5bench-write", "imbalanced"])
@pytest.mark.parametrize("width", [60, 80, 120])
def test_report_lines_fit_and_keep_every_word(name, width):
    """No line is wider than the terminal (tables and the "What to change" lines aside: a command to paste stays
    whole, see test_recommend_paste.py) and the continuation lines of a
    finding are indented under it; wrapping the findings' texts loses no word and cuts none (they hold none longer
    than a line)."""
    report = _report(name)
    text = render_terminal(report, color=False, width=width)
    changes = False
    for line in text.splitlines():
        changes = changes or line.startswith("What to change") or "┃" in line
        if not changes:
            assert cell_len(line) <= width, line
        assert line == line.rstrip() or "│" in line or "┃" in line  # no trailing blanks outside tables
    for f in report["findings"]:
        for said in (f["title"], f["recommendation"]):
            out = Lines(width=width, color=False)
            out.line("      → " + said, hang=8)
            if max(map(len, said.split())) <= width - 8:
                assert out.text().split() == ("→ " + said).split()
    body = text.split("Diagnosis", 1)[1].split("What to change")[0]
    for line in body.splitlines()[1:]:
        if line and not re.match(r"^ ?\d+\. ", line):
            assert line.startswith("      ") or line.startswith("           "), line


def test_colour_marks_styles_and_plain_text_has_none():
    report = _report("badost")
    colour = render_terminal(report, color=True, width=100)
    plain = render_terminal(report, color=False, width=100)
    assert "\x1b[" not in plain
    assert "\x1b[1;31mHIGH" in colour  # a high finding in bold red
    assert ANSI.sub("", colour) == plain


def test_names_from_a_log_cannot_drive_the_terminal():
    """A file name with escape sequences, a carriage return or a newline is shown with "?" in their place."""
    report = json.loads(json.dumps(_report("badost")))
    evil = "/scratch/\x1b]0;pwned\x07bad\rname\nx.h5"
    report["findings"][0]["files"] = [evil]
    report["top_files"][0]["path"] = evil
    report["findings"][0]["recommendation"] += " " + evil
    for color in (False, True):
        text = render_terminal(report, color=color, width=100)
        stripped = ANSI.sub("", text)
        assert "\x07" not in stripped and "\r" not in stripped and "\x1b" not in stripped
        assert "?]0;pwned?bad?name?x.h5" in stripped
    assert clean("a\tb\x9bc") == "a?b?c"


def test_wrapping_counts_cells_and_cuts_overlong_words():
    out = Lines(width=20, color=False)
    out.line("  数据 数据 数据 数据 数据 数据 end", hang=4)  # wide characters take two cells
    out.line("x" * 50, hang=2)
    lines = out.text().splitlines()
    assert all(cell_len(line) <= 20 for line in lines), lines
    assert lines[0].startswith("  数据") and lines[1].startswith("    数据")
    assert "".join(line.strip() for line in lines[-3:]) == "x" * 50
    out = Lines(width=20, color=False)
    out.line("keep this whole line as it is, please", wrap=False)
    assert out.text() == "keep this whole line as it is, please\n"


def test_table_gives_way_in_its_first_column():
    out = Lines(width=40, color=False)
    out.table("Top", [("file", "left"), ("bytes", "right")], [("/a/very/long/path/to/some/deep/file.nc", "1.0 GiB")])
    lines = out.text().splitlines()
    assert lines[0] == "Top"
    assert all(cell_len(line) <= 40 for line in lines)
    assert lines[-1].lstrip().startswith("…") and "file.nc" in lines[-1] and lines[-1].rstrip().endswith("1.0 GiB")


def test_a_unit_stays_with_its_number():
    out = Lines(width=24, color=False)
    out.line("(~0.04 s of the run, 0.5 %)", hang=2)
    out.line("abcdefghij klmnopqrstu 12 %")
    out.line("I/O time 70014.99 abc 70014.99 s")
    out.line("median io 12.15 s; 100.0 KiB, 3 MiB")
    lines = out.text().splitlines()
    assert not any(line.lstrip().split(" ")[0].rstrip("),;") in ("%", "s", "KiB", "MiB") for line in lines), lines
    assert "0.5 %)" in out.text() and "12 %" in out.text() and "70014.99 s" in out.text()


def test_wrapping_property_on_random_text():
    """Random words, spaces, wide and combining characters, control characters, widths and indents: every line fits,
    and the characters other than white space come out as they went in (control characters as "?")."""
    import random

    rng = random.Random(5)
    alphabet = ["a", "b", "c", " ", " ", "  ", "%", "数", "é", "\u0301", "x" * 30, "\t", "\x1b"]
    for _ in range(1000):
        width, hang = rng.randint(20, 120), rng.choice([None, 0, 2, 4, 8, 11, 40])
        segs = [("".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40))), rng.choice([None, "bold", "dim red"]))
                for _ in range(rng.randint(1, 4))]
        out = Lines(width=width, color=rng.random() < 0.5)
        out.line(*segs, hang=hang)
        text = ANSI.sub("", out.text())
        assert all(cell_len(line) <= width for line in text.splitlines()), (width, segs)
        sent = "".join(s for s, _ in segs).replace("\t", "?").replace("\x1b", "?")
        assert "".join(text.split()) == "".join(sent.split()), segs


def test_an_evidence_value_is_shown_in_the_unit_its_key_names():
    """noposixopens.darshan (32 ranks, 100% of the bytes through STDIO): the stdio-heavy evidence
    ``stdio_share_of_bytes`` (1.0) read "1 B" (its key ends in ``_bytes``).  A share is a percent before any unit
    of what it is a share of; a count whose key only contains "share" (``shared_files``) stays a count."""
    from conftest import corpus_path, run_cli
    from iodiag.reports.terminal import _value

    log = corpus_path("darshan/darshan-util/pydarshan/darshan/tests/input/noposixopens.darshan")
    rep = json.loads(run_cli("report", str(log), "--json").stdout)
    ev = next(f for f in rep["findings"] if f["id"] == "stdio-heavy")["evidence"]
    res = run_cli("report", str(log), env={"COLUMNS": "80"})
    text = " ".join(res.stdout.decode().split())  # the evidence line may wrap
    assert res.returncode == 0
    assert f"stdio share of bytes {fmt_pct(ev['stdio_share_of_bytes'])}" in text and ev["stdio_share_of_bytes"] > 0.99
    assert "stdio share of bytes 1 B" not in text
    assert f"stdio bytes {fmt_bytes(ev['stdio_bytes'])}" in text
    assert _value("posix_read_share_of_posix_io_s", 0.25) == "25%"
    assert _value("shared_files", 3) == "3"
    assert _value("share_of_bytes_on_heavy", 0.5) == "50%"
    assert _value("max_bytes", 2048) == fmt_bytes(2048) and _value("slowest_io_s", 2.5) == fmt_seconds(2.5)


def test_a_top_files_layer_label_reads_as_users_name_the_layers():
    """The report's ``module`` of a top file ("H5F+MPI-IO+POSIX", every layer with records of it) is shown with
    the names users know, the application's layer first, every layer kept."""
    from iodiag.reports.terminal import _layers

    assert _layers("H5F+MPI-IO+POSIX") == "HDF5+MPI-IO+POSIX"
    assert _layers("MPI-IO+PNETCDF_FILE+POSIX") == "PnetCDF+MPI-IO+POSIX"
    assert _layers("DAOS+DFS") == "DFS+DAOS" and _layers("POSIX+STDIO") == "POSIX+STDIO" and _layers("POSIX") == "POSIX"
    text = render_terminal(_report("h5bench-write"), color=False, width=80)
    assert "HDF5+MPI-IO+POSIX" in text.split("Top files", 1)[1]
