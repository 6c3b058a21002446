#!/usr/bin/env python3
"""Regenerate docs/site-defaults.md: corpus -> site dataset, + sweeps measured here -> defaults, tree, TOML, reports.

    python scripts/site_defaults_example.py              # use the sweep tables measured here (docs/site-defaults/sweeps/)
    python scripts/site_defaults_example.py --measure    # first re-run those sweeps (about 4 minutes on 2 cores)

Every command is the `iodiag` a user runs (run in a subprocess with this checkout's sources first on the path):

1. (--measure) ``docs/site-defaults/make-data.sh``, ``iodiag sweep run`` of ``read-chunks.toml`` and three times of
   ``convert-compressor.toml`` (repetitions interleaved), ``iodiag sweep collect``; the collected tables are copied
   into ``docs/site-defaults/sweeps/``;
2. a YYYY/M/D archive built from the shared Darshan corpus as the tests build one (tests/site_archive.py: every
   readable corpus log twice, under made-up user names and days, plus a few damaged logs), ``iodiag site ingest``;
3. ``iodiag site defaults`` over the dataset and the sweep tables -> the tables, the trees and
   ``docs/site-defaults/site.toml``;
4. ``iodiag site report --site-config`` and a user's ``iodiag report`` without and with the site config.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
DOCS = REPO / "docs"
HERE = DOCS / "site-defaults"
SWEEPS = HERE / "sweeps"
USER_LOG = "dxt-explorer/sample/jeanbez_8_benchmark_parallel_id45195555_8-6-50011-11681279140261054765_1628283217.darshan"
SITE_NAME = "Example site"
SERIAL_LOG = "darshan/darshan-util/pydarshan/darshan/examples/example_logs/dxt.darshan"  # one process, POSIX reads
SERIAL_FINDING = "random-access"


def iodiag(*args: str, check: bool = True, env: dict | None = None) -> str:
    e = dict(os.environ)
    e["PYTHONPATH"] = str(REPO / "src") + (os.pathsep + e["PYTHONPATH"] if e.get("PYTHONPATH") else "")
    e.setdefault("COLUMNS", "120")
    e.pop("IODIAG_SITE_CONFIG", None)
    e.pop("IODIAG_CONFIG", None)
    e.update(env or {})
    p = subprocess.run([sys.executable, "-m", "iodiag", *args], capture_output=True, text=True, env=e)
    if check and p.returncode != 0:
        sys.exit(f"iodiag {' '.join(args)} failed ({p.returncode}):\n{p.stderr}")
    return p.stdout


def uptime() -> str:
    return Path("/proc/loadavg").read_text().split()[0] if Path("/proc/loadavg").exists() else "?"


def measure(work: Path) -> str:
    data = work / "data"
    env = dict(os.environ, PATH=str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""),
               PYTHONPATH=str(REPO / "src"))
    t0, l0 = time.strftime("%H:%M:%S", time.gmtime()), uptime()
    subprocess.run([str(HERE / "make-data.sh"), str(data)], check=True, env=env, capture_output=True)
    specs = [("read-chunks", work / "read-chunks")] + [("convert-compressor", work / f"convert-compressor/rep{i}") for i in (1, 2, 3)]
    for spec, d in specs:
        text = (HERE / f"{spec}.toml").read_text().replace("/tmp/iodiag-site-defaults/data", str(data))
        sp = work / f"{spec}.toml"
        sp.write_text(text)
        iodiag("sweep", "run", str(sp), "--local", "--dir", str(d))
        iodiag("sweep", "collect", str(d))
    SWEEPS.mkdir(parents=True, exist_ok=True)
    shutil.copy(work / "read-chunks" / "results.csv", SWEEPS / "read-chunks.csv")
    for i in (1, 2, 3):
        shutil.copy(work / f"convert-compressor/rep{i}" / "results.csv", SWEEPS / f"convert-compressor-rep{i}.csv")
    return f"{t0}–{time.strftime('%H:%M:%S', time.gmtime())} UTC, load average {l0} at the start and {uptime()} at the end"


def block(text: str, lang: str = "") -> str:
    return f"```{lang}\n{text.rstrip()}\n```\n"


def finding_lines(report_text: str, fid: str) -> str:
    """The lines of one finding in a terminal report: from its header to the next finding."""
    lines = report_text.splitlines()
    out, on = [], False
    for ln in lines:
        if f"[{fid}]" in ln:
            on = True
        elif on and "[" in ln and "]" in ln and ln.lstrip().startswith(("HIGH", "MEDIUM", "LOW", "INFO")):
            break
        if on:
            out.append(ln)
    return "\n".join(out[:14])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--measure", action="store_true", help="re-run the sweeps first (about 4 minutes)")
    ap.add_argument("--work", type=Path, default=Path("/tmp/iodiag-site-defaults-example"), help="scratch folder")
    ap.add_argument("--out", type=Path, default=DOCS / "site-defaults.md")
    a = ap.parse_args()
    from site_archive import build_archive, corpus_logs

    work = a.work
    measured = measure(work) if a.measure else None
    sweeps = [SWEEPS / "read-chunks.csv"] + [SWEEPS / f"convert-compressor-rep{i}.csv" for i in (1, 2, 3)]
    missing = [s for s in sweeps if not s.is_file()]
    if missing:
        sys.exit(f"no measured sweep table {missing[0]}: run with --measure")
    # the site: the corpus, twice over
    if (work / "archive").exists():
        shutil.rmtree(work / "archive")
    if (work / "site.parquet").exists():
        shutil.rmtree(work / "site.parquet")
    n = 2 * len(corpus_logs(None))
    arc = build_archive(work / "archive", n, damaged_every=61, logs_per_day=20, max_bytes=None)
    ingest = json.loads(iodiag("site", "ingest", str(work / "archive"), "--out", str(work / "site.parquet"), "--workers", "1", "--json"))
    toml = HERE / "site.toml"
    rel = [os.path.relpath(s, REPO) for s in sweeps]
    cwd = os.getcwd()
    os.chdir(REPO)
    try:
        defaults_text = iodiag("site", "defaults", str(work / "site.parquet"), *(x for s in rel for x in ("--sweep", s)),
                               "--toml", os.path.relpath(toml, REPO), "--name", SITE_NAME)
        res = json.loads(iodiag("site", "defaults", str(work / "site.parquet"), *(x for s in rel for x in ("--sweep", s)),
                                "--name", SITE_NAME, "--json"))
        uniform = json.loads(iodiag("site", "defaults", str(work / "site.parquet"), *(x for s in rel for x in ("--sweep", s)),
                                    "--uniform", "--json"))
    finally:
        os.chdir(cwd)
    # the TOML's header names the work folder; keep the checked-in file free of it
    toml.write_text(toml.read_text().replace(str(work / "site.parquet"), "site.parquet"))
    site_text = iodiag("site", "report", str(work / "site.parquet"), "--site-config", str(toml), "--top", "5",
                       "--html", str(work / "site-report.html"))
    log = str(REPO.parent / "shared" / "darshan-logs" / USER_LOG)
    before = iodiag("report", log, "--no-color")
    after = iodiag("report", log, "--no-color", "--site-config", str(toml))
    jb = json.loads(iodiag("report", log, "--json"))
    ja = json.loads(iodiag("report", log, "--json", "--site-config", str(toml)))
    serial = str(REPO.parent / "shared" / "darshan-logs" / SERIAL_LOG)
    serial_json = json.loads(iodiag("report", serial, "--json", "--site-config", str(toml)))
    serial_rec = next(f["recommendation"] for f in serial_json["findings"] if f["id"] == SERIAL_FINDING)
    fb = {f["id"]: f for f in jb["findings"]}
    fa = {f["id"]: f for f in ja["findings"]}

    def cut(text: str, start: str, stop: str | None) -> str:
        i = text.index(start)
        j = text.index(stop, i) if stop and stop in text[i:] else len(text)
        return text[i:j]

    report_head = cut(site_text, "What to change", "  3. ")  # the ranking and its first two recommendations
    t_read, t_conv = res["tunables"]
    mix = t_read["mix"]
    doc = TEMPLATE.format(
        regen="python scripts/site_defaults_example.py" + (" --measure" if a.measure else ""),
        measured=f"The sweeps were re-run for this version of the page ({measured})." if measured else
        "The sweep tables are the ones measured on this machine on 2026-11-25, 03:45:55–03:48:39 UTC (2 min 44 s), with the machine shared "
        "(load average 1.7 at the start, 5.6–5.8 during the conversions, on 2 cores); `--measure` re-runs them.",
        logs=n, damaged=len(arc.damaged), jobs=ingest["jobs"], ingest_s=f"{ingest['seconds']:.1f}",
        defaults_text=block(defaults_text.split("Proposed site configuration")[0]),
        toml=block(toml.read_text(), "toml"),
        read_default=t_read["default"], read_uniform=uniform["tunables"][0]["default"],
        conv_default=t_conv["default"], conv_uniform=uniform["tunables"][1]["default"],
        mapped=mix["jobs_mapped"], total=mix["jobs_total"],
        report_head=block(report_head),
        user_before=block(finding_lines(before, "small-io")), user_after=block(finding_lines(after, "small-io")),
        sev_before=fb["small-io"]["severity"], sev_after=fa["small-io"]["severity"], user_log_name="jeanbez_8_benchmark_parallel_id45195555_….darshan",
        serial_log_name=os.path.basename(SERIAL_LOG), serial_fid=SERIAL_FINDING,
        serial_after=block(textwrap.fill(serial_rec, 116)),
    )
    a.out.write_text(doc)
    print(f"wrote {a.out} and {toml}; HTML site report: {work / 'site-report.html'}")


TEMPLATE = """# Site defaults: what to change site-wide, from the site's own jobs and measurements

*This page is generated: `{regen}` rebuilds it (numbers, tables, trees and the TOML below come from that run).*

Admins want to know which defaults to set (stripe settings, MPI-IO hints, scratch placement, the chunk sizes their
user docs recommend) and which users to help first. Two commands answer that:

* `iodiag site defaults DATASET --sweep SWEEP ...` — for each tunable the sweeps measured, Kunkel's
  default-vs-best table (each setting taken as the single site-wide default: how often it is the best and the worst,
  and the arithmetic, geometric and harmonic mean of its performance relative to the best setting of each scenario),
  **weighted by the site's own workload mix** (the jobs of a `site ingest` dataset mapped onto the sweep's scenarios
  from their counters), a depth-≤4 decision tree with its rules as text, and a proposed **site config** (TOML);
* `iodiag site report DATASET [--site-config site.toml] [--html PATH]` — what to change, ranked by the core-hours it
  would give back, and whom to contact first.

The site config is read by `iodiag report` for every user (`--site-config`, `$IODIAG_SITE_CONFIG`, or
`/etc/iodiag/site.toml`): site thresholds change severities, and the site's advice is appended to the findings it
concerns, so a user's report speaks the site's language.

## Inputs

**The site's workload** is a dataset of `iodiag site ingest`. Here: an archive built from the shared Darshan corpus
as the tests build one (`tests/site_archive.py`: every readable corpus log twice, under made-up user names and
days, plus damaged logs) — {logs} logs ({damaged} damaged), ingested into {jobs} jobs in {ingest_s} s on one worker.
The corpus is a mix of real applications and benchmarks from many machines, not one site's year, so the mix below
illustrates the method; a real site's archive gives its own.

**Sweeps** are measured performance of settings per scenario. `site defaults` reads any table with
(scenario, setting, time) rows as `iodiag sweep collect` writes them (`results.csv` / `results.parquet`, or the sweep
folder itself); tables of one tunable (e.g. three repetition folders) are joined and repeated runs averaged. Three
kinds are recognised:

| kind | recognised by | scenario | setting | time |
|---|---|---|---|---|
| read-pattern | a `read` sweep (`pattern` column) | the read pattern (table 3.1 of the thesis) | the store layout (format, chunk shape) | `t_total_s` (open + read) |
| write-size | a sweep over chunk shapes (`chunks`, `chunk_bytes`) | the chunk shape written | the other grid column that varies (here `compressor`) | `t_total_s` |
| descriptors | anything else: `scenario`, `setting`, `time_s` (or `--scenario/--setting/--time`) | as given | as given | as given |

A descriptors table says which jobs its scenarios stand for with columns named after job features of the site
dataset (`max_file_bytes`, `nprocs`, `posix_mean_write_bytes`, …); that is how a Lustre site's stripe-count sweep
plugs in (scenario "4 GB shared file, 256 ranks" with `max_file_bytes = 4e9`, `nprocs = 256`). The recommender's
training tables plug in the same way. There is no Lustre here, so no stripe sweep was measured; the stripe-count
path is exercised only by a unit test of the arithmetic on a small constructed table (`tests/test_site_defaults.py`,
labelled as such).

The two sweeps measured here (specs and data script in `docs/site-defaults/`; collected tables in
`docs/site-defaults/sweeps/`), each repeated 3 times, repetitions interleaved:

* **read layout** (`read-chunks.toml`): one 119 MB float32 variable `ta(time=24, plev=19, lat=181, lon=360)` stored
  four ways — NetCDF4 contiguous, Zarr v2 with chunks of one level of one time step (1,1,181,360 = 0.26 MB), one time
  step (1,19,181,360 = 4.95 MB) and 12 time steps (12,19,181,360 = 59 MB) — read cold through xarray with each of the
  six patterns (point, time series, one slice, 4 slices in one chunk, 4 slices across chunks, whole variable);
* **Zarr compressor per write size** (`convert-compressor.toml`): NetCDF4 → Zarr conversion of that variable with no
  compressor, zstd and blosc, writing chunks of 0.26 MB, 4.95 MB and 59 MB (2 Dask threads).

{measured} On a 2-core VM the absolute times are noisy; the ranking of settings is what the tables use.

## How the site's jobs weigh the scenarios

Each job is mapped onto a scenario **from its counters, never from file or program names**:

* read-pattern: the job's read request size (HDF5 dataset reads when the job has H5D counters, else the POSIX mean
  read size), read requests per file read and the share of each file it read (bytes read per file / largest file):
  * share ≥ 50 % → **whole**;
  * else request < 100 KiB → **point** when ≤ 4 requests per file, **timeseries** when more;
  * else ≤ 1.5 requests per file → **slice**; more → half **slices_same_chunk**, half **slices_across_chunks** (which
    one happens depends on where the chunk boundaries fall).
* write-size: the job's write request size (H5D, else POSIX mean write size) → the scenario whose chunk size is
  nearest on a log scale.
* descriptors: the scenario nearest to the job's values of the descriptor columns (log scale).

Jobs that fit no scenario are counted by reason and left out (jobs that do not read, for a read tunable).
A job weighs what the setting can change: by default (`--weight io`) the core-hours its processes spent in that
I/O (read time for a read tunable, write time for a write tunable, all I/O time for descriptors); `--weight
core-hours` weighs whole jobs, `--weight jobs` counts them. The default is chosen by the harmonic mean (`--mean`),
which punishes a setting that is very slow somewhere; Kunkel's tables show why: every single default reaches 50–70 %
of the best in arithmetic mean but only 9–16 % in harmonic mean.

## Result: `iodiag site defaults`

{defaults_text}
{mapped} of {total} jobs map onto a read scenario. Over the sweep's six scenarios weighed alike, the best single
read layout is **{read_uniform}**; weighted by this site's jobs it is **{read_default}**. For the compressor,
uniform: **{conv_uniform}**, weighted: **{conv_default}**. Where the mix is dominated by scenarios whose best setting
differs from the uniform choice, the weighted default changes (the tests check that a site of small-request readers
gets small chunks and a site of small writers gets the small-chunk scenario's best compressor).

**The tree.** The depth-≤4 tree is trained on the site's mapped jobs (features: the counters the mapping reads;
label: the best setting of the job's scenario; weight: the job's weight) and scored as a policy (in each scenario,
the setting it gives most of that scenario's weight). No leaf may hold less than 1 % of the site's weight (a rule for
a sliver of the site is not worth telling users; without that floor the read tree grew four levels of splits between
a handful of jobs), and splits whose leaves all give one setting are shown as one leaf. The tree is scored on the same jobs it was trained on (in-sample), and its labels follow the mapping, so it
restates the mapping in the site's own terms — where the site's jobs actually fall — rather than discovering
something new; with more scenarios per tunable (a site's real sweeps), a hold-out score is needed before trusting it.
The leaves whose setting differs from the default become the **rules for users** in the site config, only when the
tree beats the best single default.

## The proposed site config

`--toml PATH` writes it (this is `docs/site-defaults/site.toml`):

{toml}
`[site] defaults`, `rules` and `advice` are typed fields of the one `Config` (`config.py`, section `[site]`). Any
other section of the iodiag config can be added to set site thresholds (`[severity] high = 0.1`,
`[small_io] size_bytes = 65536`, …). The layers: iodiag's defaults < the site config (`--site-config`, else
`$IODIAG_SITE_CONFIG`, else `/etc/iodiag/site.toml` when it exists) < the user's config (`--config` /
`$IODIAG_CONFIG`); tables such as `[site.advice]` merge key by key.

## A user's report with the site config

`iodiag report {user_log_name}` without a site config (the small-io finding, severity {sev_before}):

{user_before}
with `--site-config docs/site-defaults/site.toml` (severity {sev_after}). The site's read-layout advice is **not**
appended: it is scoped to jobs reading through POSIX without MPI-IO (`[site.advice_scope]`), and this job reads an
HDF5 file through MPI-IO, where a NetCDF layout measured by serial xarray reads says nothing:

{user_after}
A serial reader's report does get it, as its own sentence after the finding's advice (`iodiag report
{serial_log_name} --site-config docs/site-defaults/site.toml --json`, the `recommendation` of its {serial_fid}
finding):

{serial_after}
A site threshold changes severities the same way (`tests/test_site_defaults.py`: `[severity] high = 0.1` turns this
job's small-io finding, 14 % of its run time, from medium to high).

## The site report: what to change, whom to contact

`iodiag site report DATASET --site-config site.toml` ranks findings by **recoverable core-hours**: for each affected
job, the share of its run time the finding costs (`est_cost_s / runtime_s`) times the job's core-hours, at most the
core-hours it spent in I/O (a job's findings together are capped the same way in the per-user totals). Each
recommendation says what to change (iodiag's advice to admins); the site config's advice on its own line, in the
words users' reports show, with the jobs it is for (`[site.advice_scope]`: the read layout measured by a read sweep
is for jobs reading through POSIX without MPI-IO, so an HDF5 MPI-IO job neither gets it in its report nor counts
here); whom to contact and which programs (each list adds up to the finding's core-hours, with an "others" entry);
and the jobs behind it, costliest first, each with the `iodiag report` command that diagnoses that job alone.
Users and executables are ranked the same way, each with the finding that costs them most. Op sizes read as sizes
(`≤ 100 B`, `100 KiB – 1 MiB`, `> 1 GiB`). The ranking and the first two recommendations of the text report:

{report_head}
`--html PATH` writes the same as one self-contained page (inline CSS and SVG, no script): headline figures, a bar
chart of recoverable core-hours per finding, the recommendations as cards (each job id links to its report
command), whom to contact, op sizes and files per job as charts, then the full tables. `tests/test_site_report.py` checks every figure against the job table.
"""

if __name__ == "__main__":
    main()
