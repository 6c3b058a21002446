#!/usr/bin/env python3
"""Regenerate docs/accuracy.md: for every log of the corpus, what the diagnosis says costs the job's run.

    python scripts/accuracy.py [--corpus ../shared/darshan-logs] [--out docs/accuracy.md]

Per log (MANIFEST.tsv order): processes, run time, I/O on the critical path (job seconds and share of the run),
process-seconds of I/O, the top finding with its severity, its cost in job seconds and share of the run, and how
much of the run all findings explain (an upper bound: findings may overlap).  Logs that cannot be read are listed
with the error iodiag gives.  Uses only the library's public pieces (load_job, diagnose, build_report).
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from iodiag.analyzers.detectors import diagnose  # noqa: E402
from iodiag.analyzers.load import load_job  # noqa: E402
from iodiag.errors import IodiagError  # noqa: E402
from iodiag.reports.json_report import build_report  # noqa: E402


def _s(x: float | None) -> str:
    if x is None:
        return "-"
    if x >= 100:
        return f"{x:,.0f}"
    return f"{x:.2f}" if x >= 0.01 else f"{x:.4f}"


def _p(x: float | None) -> str:
    return "-" if x is None else (f"{100 * x:.1f} %" if x >= 0.001 else f"{100 * x:.3f} %")


def row(corpus: Path, rel: str) -> list[str]:
    try:
        prof = load_job([str(corpus / rel)])
    except IodiagError as exc:
        return [f"`{rel}`", "-", "-", "-", "-", f"unreadable: {str(exc).splitlines()[0][:80]}", "-", "-", "-"]
    findings = diagnose(prof)
    rep = build_report(prof, findings)
    t = rep["time"]
    costed = [f for f in rep["findings"] if f["est_cost_s"] is not None]
    top = max(costed, key=lambda f: f["est_cost_s"]) if costed else (rep["findings"][0] if rep["findings"] else None)
    top_txt = "-" if top is None else f"{top['id']} ({top['severity']})"
    return [f"`{rel}`", str(rep["job"]["nprocs"]), _s(t["runtime_s"]), f"{_s(t['io_wall_s'])} ({_p(t['io_share'])})",
            _s(t["io_process_s"]), top_txt, _s(top["est_cost_s"]) if top else "-",
            _p(top["cost_share"]) if top else "-", f"{_s(t['explained_s'])} ({_p(t['explained_share'])})"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", default=str(REPO.parent / "shared" / "darshan-logs"))
    ap.add_argument("--out", default=str(REPO / "docs" / "accuracy.md"))
    a = ap.parse_args()
    corpus = Path(a.corpus)
    manifest = corpus / "MANIFEST.tsv"
    if not manifest.is_file():
        print(f"accuracy: {manifest} not found: pass --corpus DIR (the folder holding MANIFEST.tsv)", file=sys.stderr)
        return 3
    with manifest.open() as fh:
        rels = [r["path"] for r in csv.DictReader(fh, delimiter="\t")]
    head = ["log", "procs", "run s", "I/O on critical path s (share of run)", "I/O process-s", "top finding",
            "its cost s", "share of run", "findings explain s (share)"]
    lines = [
        "# What the diagnosis says each corpus log's run lost",
        "",
        "Made by `python scripts/accuracy.py` (default Config) over every log in `../shared/darshan-logs/MANIFEST.tsv`,",
        "each log read alone. Costs are seconds of the job's wall time (`est_cost_s`, see",
        "[report-contract.md](report-contract.md) and `src/iodiag/analyzers/timemodel.py`): I/O that processes did side",
        "by side counts once, so a cost can never exceed the run time, and a finding's severity is its share of the run.",
        "\"I/O process-s\" is the summed time of every process in I/O calls (what Darshan's counters add up to, and what",
        "costs were measured against before). \"Findings explain\" adds the findings' costs, capped by the run time: an",
        "upper bound, since one slow call can be both small and random. The top finding is the one with the largest cost.",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    for rel in rels:
        lines.append("| " + " | ".join(row(corpus, rel)) + " |")
    Path(a.out).write_text("\n".join(lines) + "\n")
    print(f"wrote {a.out} ({len(rels)} logs)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
