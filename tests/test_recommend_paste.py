"""What to change, as the terminal shows it, can be pasted: a change's command survives the report's width.

The terminal report of real corpus logs is rendered at 80 columns, the lines of each change are read back the way
a user copies them (the label cut off, lines ending in `` \\`` joined with the next), and they must be the
change's text exactly; the shell ones must pass ``bash -n``.  Prose around them may wrap; the commands may not.
"""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from conftest import corpus_path
from iodiag.analyzers.load import load_job
from iodiag.config import Config
from iodiag.reports.advice import CHANGE_HANG, CHANGE_INDENT, change_label, shell_lines
from iodiag.reports.json_report import render_json
from iodiag.reports.terminal import render_terminal
from iodiag.service import diagnose_report

LOGS = {
    # PnetCDF over MPI-IO: PNETCDF_HINTS exports (one short enough to break, one too long for 80 columns)
    "e3sm": "darshan-logs/darshan_logs/e3sm_io_heatmaps_and_dxt/e3sm_io_heatmap_only.darshan",
    # reads an HDF5 file: an h5repack line with two long paths
    "dbscan": ("pytokio/tests/inputs/darshanlogs/2017/3/20/"
               "glock_dbscan_read_id4478544_3-20-7800-15217972833987807816_1.darshan"),
    # an lfs setstripe line ending in a comment
    "imbalanced": "darshan-logs/darshan_logs/imbalanced_io/imbalanced-io.darshan",
}
SHELL = ("env", "shell", "arg")


def _report(name: str) -> dict:
    prof = load_job([str(corpus_path(LOGS[name]))], config=Config())
    _, rep = diagnose_report(profile=prof, config=Config())
    return json.loads(render_json(rep))


def _changes(rep: dict) -> list[tuple[str, str]]:
    return [(c["kind"], c["text"]) for r in rep["recommendations"] if r.get("abstain") is None
            for c in r.get("changes") or []]


def _pasted(text: str) -> list[tuple[str, list[str], str]]:
    """(label, the lines as shown, the command as pasted) of every change line under "What to change"."""
    lines = text.split("\n")
    i = next(k for k, x in enumerate(lines) if x.startswith("What to change"))
    labels = {change_label(k) for k in ("arg", "env", "snippet", "shell", "config")}
    out = []
    while i < len(lines):
        line = lines[i]
        i += 1
        label = line[len(CHANGE_INDENT):].split(": ", 1)[0]
        if line.startswith(CHANGE_INDENT) and line.endswith(":") and line.strip()[:-1] in labels:
            # a code block: the label alone, then the code's lines under CHANGE_HANG, dedented as a paste does
            shown = [line]
            while i < len(lines) and (lines[i].startswith(CHANGE_HANG) or lines[i] == ""):
                shown.append(lines[i])
                i += 1
            out.append((line.strip()[:-1], shown, "\n".join(x[len(CHANGE_HANG):] for x in shown[1:]).rstrip("\n")))
            continue
        if not line.startswith(CHANGE_INDENT) or line[len(CHANGE_INDENT):len(CHANGE_INDENT) + 1] == " " \
                or label not in labels:
            continue
        shown = [line]
        while shown[-1].endswith(" \\"):
            shown.append(lines[i])
            i += 1
        parts = [shown[0].split(": ", 1)[1]] + [x.lstrip(" ") for x in shown[1:]]
        out.append((label, shown, " ".join(p[:-2] if p.endswith(" \\") else p for p in parts)))
    return out


def _bash_n(script: str) -> None:
    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("no bash to check the syntax with")
    r = subprocess.run([bash, "-n"], input=script, text=True, capture_output=True)
    assert r.returncode == 0, f"bash -n rejects:\n{script}\n{r.stderr}"


@pytest.mark.parametrize("name", sorted(LOGS))
def test_changes_paste_back_whole_at_80_columns(name):
    rep = _report(name)
    want = _changes(rep)
    assert any(k in SHELL for k, _ in want), f"{name} no longer gets a shell change: pick another log"
    got = _pasted(render_terminal(rep, color=False, width=80))
    assert [(label, cmd) for label, _, cmd in got] == [(change_label(k), t) for k, t in want]
    for (kind, text), (_, shown, _) in zip(want, got):
        # a command is broken only into lines that fit; one that cannot be broken so is shown whole
        assert len(shown) == 1 or all(len(x) <= 79 for x in shown), shown
        if kind in SHELL:
            _bash_n("\n".join([shown[0].split(": ", 1)[1]] + shown[1:]) + "\n")


def test_long_commands_break_between_arguments():
    """At 80 columns the h5repack line (170 characters) is shown as three lines that fit, broken after the
    options and between the two paths; the PnetCDF export that is one 85-character word is shown whole."""
    got = {label + ":" + cmd.split()[0 if label != "env" else 1][:14]: shown
           for label, shown, cmd in _pasted(render_terminal(_report("dbscan"), color=False, width=80))}
    repack = got["shell:h5repack"]
    assert len(repack) == 3 and all(len(x) <= 79 for x in repack)
    assert repack[0].endswith("-a 1048576 \\") and repack[1].strip().endswith(".hdf5 \\")
    got = {cmd: shown for _, shown, cmd in _pasted(render_terminal(_report("e3sm"), color=False, width=80))}
    whole = [shown for cmd, shown in got.items() if "nc_var_align_size" in cmd and cmd.startswith("export ")]
    assert whole and len(whole[0]) == 1 and len(whole[0][0]) > 80


@pytest.mark.parametrize("name", sorted(LOGS))
def test_every_width_keeps_every_shell_command(name):
    """From 30 to 120 columns, each real shell change is either one line or lines that fit, and the lines join
    back into the command and pass bash -n."""
    for kind, text in _changes(_report(name)):
        if kind not in SHELL:
            continue
        line = f"{CHANGE_INDENT}{change_label(kind)}: {text}"
        for width in range(30, 121, 7):
            shown = shell_lines(line, width, CHANGE_HANG)
            assert len(shown) == 1 or all(len(x) <= width for x in shown), (width, shown)
            assert all(x.endswith(" \\") for x in shown[:-1]) and not shown[-1].endswith(" \\")
            joined = " ".join([shown[0]] + [x.lstrip(" ") for x in shown[1:]]).replace(" \\ ", " ")
            assert joined == line, (width, shown)
            _bash_n("\n".join([shown[0].split(": ", 1)[1]] + shown[1:]) + "\n")


# ------------------------------------------------------------------- code snippets: JSON, terminal and HTML alike
C_MARKS = ("H5P", "H5D", "MPI_", "ncmpi_", "nc_", "setvbuf", "pread(", "write(fd", "/*", ";")


def _is_python(text: str) -> bool:
    """The rules' snippets are Python (xarray, open(...)) or C (HDF5, MPI-IO, PnetCDF, stdio calls)."""
    return not any(m in text for m in C_MARKS)


def _corpus_reports() -> list[tuple[str, dict, object, list]]:
    """(log, report dict as JSON gives it back, profile, findings) of every log in the corpus that loads."""
    import csv

    from conftest import CORPUS

    path = CORPUS / "MANIFEST.tsv"
    if not path.is_file():
        pytest.skip("MANIFEST.tsv not found")
    out = []
    with path.open() as fh:
        rows = list(csv.DictReader(fh, delimiter="\t"))
    for row in rows:
        try:
            prof = load_job([str(CORPUS / row["path"])], config=Config())
        except Exception:  # noqa: BLE001 - damaged logs are other tests' business
            continue
        findings, rep = diagnose_report(profile=prof, config=Config())
        out.append((row["path"], json.loads(render_json(rep)), prof, findings))
    return out


def _workload_recommendations() -> list[dict]:
    """What the shipped model recommends for every scenario measured to train it (real conversions and reads by
    iodiag's workloads): its changes include the multi-line xarray snippets."""
    import csv

    from iodiag.recommend.engine import load_tree
    from iodiag.recommend.train import SHIPPED_TABLE

    model, why = load_tree()
    if model is None:
        pytest.skip(f"no trained model: {why}")
    seen, out = set(), []
    with open(SHIPPED_TABLE) as fh:
        for row in csv.DictReader(fh):
            key = (row["workload"], row["scenario"], row["setting"])
            if key in seen:
                continue
            seen.add(key)
            shape = [int(x) for x in row["shape"].split("x")]
            f = {"workload": row["workload"], "pattern": row["pattern"], "array_mb": float(row["array_mb"]),
                 "n_lead": float(row["n_lead"]), "step_mb": float(row["step_mb"]), "shape": shape,
                 "itemsize": int(row["itemsize"]), "dims": ["time", "plev", "lat", "lon"][: len(shape)],
                 "chunk_mb": float(row["chunk_mb"]), "layout": row["layout"], "compressor": row["compressor"],
                 "zarr_format": int(row["zarr_format"]), "workers": int(row["workers"]),
                 "chunk_mb_target": float(row["chunk_mb_target"]) if row["chunk_mb_target"] else None}
            rec = model.advise(f)
            if rec.abstain is None and rec.changes:
                out.append(json.loads(json.dumps(rec.to_dict())))
    return out


def _terminal_snippets(text: str) -> list[str]:
    """The code changes of a terminal "What to change" as a user copies them: a one-line change after its
    ``code:`` label; a block: the lines under a bare ``code:`` label, dedented."""
    import textwrap

    lines = text.split("\n")
    out, i = [], 0
    label = f"{CHANGE_INDENT}{change_label('snippet')}:"
    while i < len(lines):
        line = lines[i]
        i += 1
        if line == label:
            block = []
            while i < len(lines) and (lines[i].startswith(CHANGE_HANG) or lines[i] == ""):
                block.append(lines[i])
                i += 1
            while block and block[-1] == "":
                block.pop()
            out.append(textwrap.dedent("\n".join(block)))
        elif line.startswith(label + " "):
            out.append(line[len(label) + 1:])
    return out


def _html_snippets(page: str) -> list[str]:
    """The text of every ``<pre class="change" data-kind="snippet">`` of a page, as a browser copies it."""
    from html.parser import HTMLParser

    class P(HTMLParser):
        def __init__(self):
            super().__init__(convert_charrefs=True)
            self.out, self.cur = [], None

        def handle_starttag(self, tag, attrs):
            a = dict(attrs)
            if tag == "pre" and a.get("class") == "change" and a.get("data-kind") == "snippet":
                self.cur = []

        def handle_data(self, data):
            if self.cur is not None:
                self.cur.append(data)

        def handle_endtag(self, tag):
            if tag == "pre" and self.cur is not None:
                self.out.append("".join(self.cur))
                self.cur = None

    p = P()
    p.feed(page)
    return p.out


def _json_snippets(recs: list[dict]) -> list[str]:
    return [c["text"] for r in recs if r.get("abstain") is None for c in r.get("changes") or []
            if c["kind"] == "snippet"]


def _same_everywhere(recs: list[dict], page: str | None = None) -> list[str]:
    """The snippets of ``recs`` read back from the terminal report's section, ``iodiag recommend`` (at 80 and
    200 columns) and, given, an HTML page: each must be the JSON's text exactly."""
    from iodiag.reports.advice import render_recommendations

    want = _json_snippets(recs)
    for width in (80, 200):
        rec_text = render_recommendations(recs, job="j", width=width)
        assert _terminal_snippets(rec_text) == want, (width, rec_text)
    if page is not None:
        assert _html_snippets(page) == want
    return want


def test_every_snippet_of_the_corpus_survives_json_terminal_and_html_and_compiles():
    """Every corpus log's report: the code changes read back from the terminal report (80 columns), from
    ``iodiag recommend`` and from the HTML page are the JSON's text exactly, and every Python one compiles."""
    from iodiag.reports.html import render_html

    python = []
    for path, rep, prof, findings in _corpus_reports():
        want = _json_snippets(rep.get("recommendations") or [])
        assert _terminal_snippets(render_terminal(rep, color=False, width=80)) == want, path
        if not want:
            continue
        _same_everywhere(rep["recommendations"], render_html(prof, findings, report=rep))
        python += [(path, s) for s in want if _is_python(s)]
    assert python, "no corpus log gets a Python snippet any more: pick other logs"
    for path, src in python:
        compile(src, f"<snippet of {path}>", "exec")


def test_multi_line_snippets_of_the_workloads_keep_their_lines_everywhere_and_compile():
    """The model's advice for every measured workload scenario: its xarray snippets are several lines; in the
    terminal they are a block under ``code:`` (newlines, indentation kept), in the HTML a ``<pre>``, in the
    JSON the text; read back from each, every one compiles."""
    from iodiag.reports.html import render_html

    recs = _workload_recommendations()
    want = _json_snippets(recs)
    multi = [s for s in want if "\n" in s]
    assert multi, "the model no longer gives a multi-line snippet: the test lost its subject"
    prof = load_job([str(corpus_path(LOGS["imbalanced"]))], config=Config())
    findings, rep = diagnose_report(profile=prof, config=Config())
    rep = json.loads(render_json(rep))
    rep["recommendations"] = recs
    page = render_html(prof, findings, report=rep)
    assert _same_everywhere(recs, page) == want
    term = render_terminal(rep, color=False, width=80)
    assert _terminal_snippets(term) == want and "?" not in "".join(_terminal_snippets(term))
    for src in want:
        assert _is_python(src)
        compile(src, "<workload snippet>", "exec")


def test_code_keeps_newlines_and_indentation_only_other_control_characters_go():
    """A snippet with an indented block, a tab and an escape sequence: the newline and indentation survive in
    the terminal, the HTML and the JSON; the escape is shown as "?" in the terminal and the page (JSON escapes it)."""
    from iodiag.reports.advice import recommendation_lines
    from iodiag.reports.html import environment
    from iodiag.reports.textout import clean_code

    code = "for v in ds.data_vars:\n    if ds[v].ndim == 4:\n\tprint(v)  # \x1b[31mred\x1b[0m\n"
    rec = {"id": "x", "title": "t", "changes": [{"kind": "snippet", "text": code, "name": "", "value": None}],
           "abstain": None, "addresses": [], "based_on": "", "source": "rules"}
    lines = [t for t, _ in recommendation_lines([rec], width=80)]
    i = lines.index(f"{CHANGE_INDENT}code:")
    assert lines[i + 1:i + 4] == [CHANGE_HANG + "for v in ds.data_vars:", CHANGE_HANG + "    if ds[v].ndim == 4:",
                                  CHANGE_HANG + "        print(v)  # ?[31mred?[0m"]
    assert "\x1b" not in "".join(lines)
    page = environment().from_string('<pre class="change" data-kind="snippet">{{ t | code }}</pre>').render(t=code)
    assert _html_snippets(page) == [code.replace("\x1b", "?")]
    assert clean_code(code).count("\n") == 3 and "\t" in clean_code(code)
    assert json.loads(json.dumps(code)) == code


def test_a_netcdf_file_reopened_to_append_gets_an_append_loop_and_one_reopened_to_read_a_read_loop(tmp_path):
    """Two user scripts re-open one NetCDF file for every time step, one to append a step (write), one to read
    a step, recorded with the embedded collector: both are told to open it once, the writer as an append loop
    (open for appending before the loop, write each step, close after), the reader as a read loop; each snippet
    reads back the same from the terminal, ``iodiag recommend`` and the HTML page, and compiles."""
    pytest.importorskip("netCDF4")
    import sys

    from conftest import require_embedded
    from iodiag.jobs.run import RunOptions, run_job
    from iodiag.reports.html import render_html
    from iodiag.service import load_target
    from test_verify_open_once import APPEND, READ

    require_embedded()
    (tmp_path / "append.py").write_text(APPEND)
    (tmp_path / "read.py").write_text(READ)
    codes = {}
    for name, argv in (("append", ["append.py", "steps.nc", "200"]), ("read", ["read.py", "steps.nc", "200"])):
        res = run_job(RunOptions(command=[sys.executable, *argv], collector="embedded", dask=False, name=name,
                                 store=str(tmp_path / "store")), cwd=str(tmp_path))
        assert res.outcome.exit_code == 0
        prof = load_target(target=str(res.record.path), config=Config()).profile
        findings, rep = diagnose_report(profile=prof, config=Config())
        rep = json.loads(render_json(rep))
        top = next(r for r in rep["recommendations"] if r.get("abstain") is None)
        assert top["id"] == "open-once" and top["settings"]["open_once"] == str(tmp_path / "steps.nc"), top
        (codes[name],) = [c["text"] for c in top["changes"]]
        assert codes[name] in _same_everywhere(rep["recommendations"], render_html(prof, findings, report=rep))
        assert _is_python(codes[name])
        compile(codes[name], f"<{name} snippet>", "exec")
    path = str(tmp_path / "steps.nc")
    assert codes["append"].startswith(f'nc = netCDF4.Dataset("{path}", "a")  # once, before the loop\n')
    assert "for t, step in enumerate(steps):" in codes["append"]
    assert codes["append"].endswith("nc.close()  # once, after the loop")
    assert codes["read"].startswith(f'ds = xr.open_dataset("{path}")  # once, before the loop\n')
    assert "\"a\"" not in codes["read"] and "close()" not in codes["read"]
