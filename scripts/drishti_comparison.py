#!/usr/bin/env python3
"""Run Drishti and iodiag on the 12 corpus logs of docs/drishti-comparison.md and print the raw facts as Markdown.

    python scripts/drishti_comparison.py [--drishti PATH] [--corpus ../shared/darshan-logs]

Run it with the Python of iodiag's venv (iodiag runs as ``python -m iodiag`` with this checkout's ``src`` first on
the path).  Drishti is taken from ``--drishti`` or else from ``benchmarks/.ref-venv/bin/drishti`` (the venv that
``benchmarks/bench_report.py`` makes); it is never imported, only run, so it stays in its own venv.

Per log, one run of each tool, one after the other:

* Drishti: ``drishti --code --verbose --csv --size 200 LOG`` in a temporary directory (its CSV goes to the current
  directory).  Printed: the critical/warning counts from its summary line and the codes its CSV marks ``True``; or,
  when it exits with an error, the exception line and the place it was raised.
* iodiag: ``iodiag report LOG --json`` (default config).  Printed: every finding's id, severity, ``est_cost_s`` and
  ``cost_share`` (its share of the job's run time), and the first entry of the report's "What to change" (the first
  of ``recommendations`` that does not abstain), with the findings it addresses.

The doc's table and prose are written by hand from this output; this script only prints.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# (label used in the doc, path under the corpus folder); the doc's row numbers are the order here
LOGS = [
    ("imbalanced-io (496 ranks)", "darshan-logs/darshan_logs/imbalanced_io/imbalanced-io.darshan"),
    ("partial_data_stdio", "darshan-logs/darshan_logs/partial_data_stdio/partial_data_stdio.darshan"),
    ("tight-64B-pwrite-pread-dxt-full",
     "generated/tight-64B-pwrite-pread-dxt-full/0_python_id2035-2035_11-22-83087-1216503035641033982_1.darshan"),
    ("smallio-metadata-heavy-maxrecords",
     "generated/smallio-metadata-heavy-maxrecords/0_python_id1986-1986_11-22-83074-12837788380125807242_1.darshan"),
    ("hdf5_diagonal_write_half_ranks_dxt (10 ranks)",
     "darshan-logs/darshan_logs/hdf5_diagonal_write_only/hdf5_diagonal_write_half_ranks_dxt.darshan"),
    ("mpi_io_test_with_dxt (32 ranks)",
     "darshan-logs/darshan_logs/mpi_io_test_with_dxt/"
     "treddy_mpi-io-test_id4373053_6-2-60198-9815401321915095332_1.darshan"),
    ("empty_log", "darshan-logs/darshan_logs/empty_log/empty_log.darshan"),
    ("dxt-explorer …1628283217 (1,024 ranks)",
     "dxt-explorer/sample/jeanbez_8_benchmark_parallel_id45195555_8-6-50011-11681279140261054765_1628283217.darshan"),
    ("drishti-io h5bench …_12 (384 ranks)",
     "drishti-io/sample/jlbez_8a_benchmark_write_parallel_id1322696_8-21-14519-8141979180909667175_12.darshan"),
    ("sample-badost (2,048 ranks)", "darshan/darshan-util/pydarshan/darshan/tests/input/sample-badost.darshan"),
    ("partial_data_dxt", "darshan-logs/darshan_logs/partial_data_dxt/partial_data_dxt.darshan"),
    ("xarray-nc2zarr-1proc-dxt",
     "generated/xarray-nc2zarr-1proc-dxt/0_python_id20361-20361_11-22-82634-4044189885351072024_1.darshan"),
]

DRISHTI_ARGS = ["--code", "--verbose", "--csv", "--size", "200"]
SUMMARY = re.compile(r"(\d+) critical issues?, (\d+) warnings?, and (\d+) recommendations?")
RAISED_AT = re.compile(r'File "([^"]+)", line (\d+)')


def cell(text: str) -> str:
    """Text safe inside a Markdown table cell."""
    return text.replace("|", "\\|").replace("\n", " ")


def drishti_versions(drishti: Path) -> str:
    """drishti-io and darshan package versions from the Python of Drishti's own venv (never imported here)."""
    py = drishti.parent / "python"
    if not py.exists():
        return "drishti-io version unknown (no python next to the drishti script)"
    code = ("import importlib.metadata as m\n"
            "for d in ('drishti-io', 'darshan'):\n"
            "    try: print(d, m.version(d))\n"
            "    except m.PackageNotFoundError: print(d, '?')\n")
    out = subprocess.run([str(py), "-c", code], capture_output=True, text=True)
    return ", ".join(line for line in out.stdout.split("\n") if line) or "version unknown"


def run_drishti(drishti: Path, log: Path) -> tuple[str, str, str]:
    """(counts, codes, banner version) of one Drishti run; counts holds the crash when it failed."""
    with tempfile.TemporaryDirectory(prefix="drishti-cmp-") as tmp:
        proc = subprocess.run([str(drishti), *DRISHTI_ARGS, str(log)], cwd=tmp, capture_output=True, text=True)
        banner = re.search(r"DRISHTI (v\.?[\w.]+)", proc.stdout)
        ver = banner.group(1) if banner else "?"
        m = SUMMARY.search(proc.stdout)
        csvs = list(Path(tmp).glob("*.csv"))
        if proc.returncode != 0 or m is None or not csvs:
            lines = [x for x in proc.stderr.strip().splitlines() if x.strip()]
            last = lines[-1].strip() if lines else f"exit {proc.returncode}, no summary line"
            places = RAISED_AT.findall(proc.stderr)
            where = f" at {Path(places[-1][0]).name}:{places[-1][1]}" if places else ""
            return f"**crashed** (exit {proc.returncode}): `{last}`{where}", "-", ver
        with csvs[0].open() as fh:
            rows = list(csv.DictReader(fh))
        codes = [k for k, v in (rows[0] if rows else {}).items() if k != "JOB" and v == "True"]
        return f"{m.group(1)} crit, {m.group(2)} warn", " ".join(codes) or "none", ver


def _s(x: float) -> str:
    return f"{x:,.0f}" if x >= 100 else (f"{x:.2f}" if x >= 0.01 else f"{x:.4f}")


def _p(x: float) -> str:
    return f"{100 * x:.1f} %" if x >= 0.001 else f"{100 * x:.3f} %"


def run_iodiag(log: Path) -> tuple[str, str, str]:
    """(run time, findings, first "What to change" entry) of ``iodiag report LOG --json``."""
    env = dict(os.environ, PYTHONPATH=str(REPO / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-m", "iodiag", "report", str(log), "--json"],
                          capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        err = (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
        return "-", f"**failed** (exit {proc.returncode}): `{err}`", "-"
    rep = json.loads(proc.stdout)
    run_s = rep["time"]["runtime_s"]
    found = []
    for f in rep["findings"]:
        if f.get("est_cost_s") is None:
            found.append(f"{f['id']} {f['severity']} (not costed)")
        else:
            found.append(f"{f['id']} {f['severity']} ({_s(f['est_cost_s'])} s, {_p(f['cost_share'])})")
    active = [r for r in rep.get("recommendations") or [] if r.get("abstain") is None]
    if active:
        r = active[0]
        first = r["changes"][0] if r.get("changes") else None
        change = f": {first['kind']} `{first['text']}`" if first else ""
        addr = f" (addresses {', '.join(r['addresses'])})" if r.get("addresses") else ""
        todo = f"{r['title']}{change}{addr}"
    else:
        todo = "no setting recommended"
    return (_s(run_s) if run_s is not None else "-"), "; ".join(found) or "none", todo


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--drishti", help="the drishti executable (default: benchmarks/.ref-venv/bin/drishti)")
    ap.add_argument("--corpus", default=str(REPO.parent / "shared" / "darshan-logs"),
                    help="the folder holding the corpus' MANIFEST.tsv (default: ../shared/darshan-logs)")
    a = ap.parse_args()
    drishti = Path(a.drishti) if a.drishti else REPO / "benchmarks" / ".ref-venv" / "bin" / "drishti"
    if not (drishti.is_file() and os.access(drishti, os.X_OK)):
        print(f"drishti_comparison: no Drishti executable at {drishti}. Install drishti-io in its own venv (as "
              "benchmarks/bench_report.py does: benchmarks/.ref-venv, with darshan==3.5.0) or pass --drishti PATH; "
              "never install it into iodiag's venv.", file=sys.stderr)
        return 3
    corpus = Path(a.corpus)
    missing = [rel for _, rel in LOGS if not (corpus / rel).is_file()]
    if missing:
        print(f"drishti_comparison: {len(missing)} log(s) not found under {corpus}, e.g. {missing[0]}: "
              "pass --corpus DIR", file=sys.stderr)
        return 3
    commit = subprocess.run(["git", "-C", str(REPO), "describe", "--always", "--dirty"], capture_output=True,
                            text=True).stdout.strip() or "?"
    rows, banners = [], set()
    for i, (label, rel) in enumerate(LOGS, 1):
        print(f"[{i}/{len(LOGS)}] {label}", file=sys.stderr)
        counts, codes, ver = run_drishti(drishti, corpus / rel)
        if ver != "?":
            banners.add(ver)
        run_s, found, todo = run_iodiag(corpus / rel)
        rows.append([str(i), label, cell(counts), cell(codes), run_s, cell(found), cell(todo)])
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    print(f"Drishti: {drishti_versions(drishti)} (banner {', '.join(sorted(banners)) or '?'}), "
          f"`drishti {' '.join(DRISHTI_ARGS)} LOG`; iodiag: `iodiag report LOG --json` at {commit}; {now}.")
    print()
    head = ["#", "log", "Drishti crit/warn", "Drishti codes (CSV `True`)", "run s",
            "iodiag findings: severity (est_cost_s, share of run)", "iodiag: first \"What to change\""]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for r in rows:
        print("| " + " | ".join(r) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
