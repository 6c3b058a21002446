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
