"""Every command's default output at COLUMNS=80, as a person reads it in an 80-column terminal: no line wider
than 80 cells (a command to paste is the one thing never cut: it may run past the edge), no colour escape with
NO_COLOR set, and -h as --help.  Real data: the corpus, a site dataset ingested from it, the measured sweeps of
docs/site-defaults, a sweep folder laid out as `iodiag sweep run` leaves it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from conftest import run_cli
from site_archive import CORPUS

REPO = Path(__file__).resolve().parents[1]
SWEEPS = REPO / "docs" / "site-defaults" / "sweeps"
LOG = CORPUS / "darshan" / "darshan-util" / "pydarshan" / "darshan" / "tests" / "input" / "sample-badost.darshan"
MULTI = CORPUS / "generated" / "dask-localcluster-2workers-graceful"  # a folder of seven jobs
pytestmark = pytest.mark.skipif(not CORPUS.is_dir(), reason=f"shared corpus not found at {CORPUS}")

ENV80 = {"COLUMNS": "80", "NO_COLOR": "1"}


def _cells(line: str) -> int:
    from iodiag.reports.textout import cell_len

    return cell_len(line)


def _paste_line(line: str) -> bool:
    """What may run past the edge, because cutting it would break it: a command to paste, a path alone on its line
    (wrapping at spaces cannot shorten either), an error line (one line per error is the contract for scripts)."""
    s = line.strip()
    return s.startswith(("iodiag ", "first run: ", "iodiag: error: ")) or len(s.split()) == 1


def _check_80(res, what: str) -> str:
    out = res.stdout.decode() + res.stderr.decode()
    assert "Traceback" not in out, out[-3000:]
    assert "\x1b[" not in out, f"{what}: colour escapes with NO_COLOR set"
    wide = [ln for ln in out.splitlines() if _cells(ln) > 80 and not _paste_line(ln)]
    assert not wide, f"{what}: {len(wide)} lines wider than 80 columns, e.g. {wide[0]!r}"
    return out


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    out = tmp_path_factory.mktemp("width") / "site.parquet"
    res = run_cli("site", "ingest", str(CORPUS), "--out", str(out), "--workers", "0", env=ENV80, timeout=900)
    _check_80(res, "site ingest")
    assert res.returncode == 0
    return out


def fake_sweep(root: Path, paths: list[str], workers=(1, 2, 4), reps: int = 3) -> Path:
    """A sweep folder as `iodiag sweep run` leaves it (sweep.json, runs/*/run.json, SUCCESS, results.json), its runs
    differing only at the end of a long path: what `sweep analyze` must keep apart."""
    names = []
    for pi, p in enumerate(paths):
        for w in workers:
            for r in range(1, reps + 1):
                name = f"convert_path={pi}_workers={w}_r{r}"
                d = root / "runs" / name
                d.mkdir(parents=True)
                (d / "run.json").write_text(json.dumps({"workload": "convert", "rep": r, "grid": {"path": p, "workers": w}}))
                (d / "SUCCESS").write_text("")
                t = (10.0 + pi) / w * (1 + 0.01 * r)
                (d / "results.json").write_text(json.dumps({"workload": "convert", "timings_s": {"write": t},
                                                            "bytes": {"logical": 8e8}}))
                names.append(name)
    (root / "sweep.json").write_text(json.dumps({"grid": {"path": paths, "workers": list(workers)}, "runs": names}))
    return root


SPEC = """
[sweep]
name = "widths"
workload = "convert"
repetitions = 3

[params]
src = "/scratch/project/climate/era5/2019/pressure-levels/temperature-and-humidity.nc"
dst = "{sweep_dir}/out-{run}.zarr"

[grid]
workers = [1, 2, 4, 8]
chunk_mb = [1, 8]
"""


def test_jobs_list(tmp_path):
    from iodiag.jobs import store

    for i, name in enumerate(["convert-era5-monthly-means", "read-timeseries"]):
        rec = store.create_job(name=name, root=tmp_path, when=1_700_000_000 + i)
        rec.update(status="complete", exit_code=0, wall_s=12.5, collector="darshan",
                   command=[sys.executable, "/home/someone/projects/climate/scripts/convert_era5.py", "--in",
                            "/scratch/era5/2019/temperature.nc", "--out", "/scratch/era5/zarr/temperature.zarr"])
    res = run_cli("jobs", env={**ENV80, "IODIAG_HOME": str(tmp_path)})
    out = _check_80(res, "jobs")
    assert "convert-era5-month" in out and "complete" in out and "python" in out


def test_report_and_its_multi_job_list():
    _check_80(run_cli("report", str(LOG), env=ENV80), "report")
    res = run_cli("report", str(MULTI), env=ENV80)
    assert res.returncode == 5, res.stderr.decode()
    err = _check_80(res, "report (several jobs)")
    assert "26138" in err and "python" in err


def test_site_report_and_defaults(dataset, tmp_path):
    out = _check_80(run_cli("site", "report", str(dataset), env=ENV80), "site report")
    assert "Jobs behind it" in out and "iodiag report " in out
    toml = tmp_path / "site.toml"
    res = run_cli("site", "defaults", str(dataset), "--sweep", str(SWEEPS / "read-chunks.csv"),
                  "--sweep", str(SWEEPS / "convert-compressor-rep1.csv"), "--toml", str(toml), env=ENV80)
    assert res.returncode == 0, res.stderr.decode()
    out = _check_80(res, "site defaults")
    assert "◀ default" in out and "harm. mean" in out
    # the report with that site config: its advice wraps at spaces too
    _check_80(run_cli("site", "report", str(dataset), "--site-config", str(toml), env=ENV80), "site report (site config)")


def test_sweep_plan_and_analyze(tmp_path):
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC)
    res = run_cli("sweep", "plan", str(spec), "--dir", str(tmp_path / "sw"), env=ENV80)
    assert res.returncode == 0, res.stderr.decode()
    _check_80(res, "sweep plan")
    paths = ["/scratch/project/climate/era5/2019/pressure-levels/temperature.nc",
             "/scratch/project/climate/era5/2019/pressure-levels/temperature.zarr"]
    sw = fake_sweep(tmp_path / "fake", paths)
    res = run_cli("sweep", "analyze", str(sw), "--no-plots", env=ENV80)
    assert res.returncode == 0, res.stderr.decode()
    out = _check_80(res, "sweep analyze")
    rows = [ln for ln in out.splitlines() if "│" in ln]
    assert len(rows) == 6 and len({ln.split("│")[0] for ln in rows}) == 2  # the two paths stay told apart
    assert any("temperature.nc" in r for r in rows) and any("temperature.zarr" in r for r in rows)
    _check_80(run_cli("sweep", "collect", str(sw), env=ENV80), "sweep collect")


def test_recommend():
    res = run_cli("recommend", "evaluate", env=ENV80)
    assert res.returncode == 0, res.stderr.decode()
    out = _check_80(res, "recommend evaluate")
    assert "|---" not in out and "harmonic" in out  # a table, not Markdown
    _check_80(run_cli("recommend", str(LOG), env=ENV80), "recommend LOG")


def test_compare():
    _check_80(run_cli("compare", str(LOG), str(LOG), env=ENV80), "compare")


@pytest.mark.parametrize("argv", [[], ["report"], ["site"], ["site", "report"], ["sweep", "analyze"], ["recommend"],
                                  ["jobs"], ["verify"], ["run"], ["compare"], ["workload"]])
def test_help_fits_and_h_is_help(argv):
    long = run_cli(*argv, "--help", env=ENV80)
    short = run_cli(*argv, "-h", env=ENV80)
    assert long.returncode == short.returncode == 0, short.stderr.decode()
    assert short.stdout == long.stdout
    _check_80(long, " ".join(argv) + " --help")


def test_no_color_is_obeyed(tmp_path):
    """NO_COLOR (and --no-color) leave no escape in the commands that colour: recommend, sweep plan, site report."""
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC)
    for argv in (["recommend", str(LOG)], ["sweep", "plan", str(spec), "--dir", str(tmp_path / "sw")],
                 ["recommend", "evaluate"]):
        res = run_cli(*argv, env={"NO_COLOR": "1"})
        assert res.returncode == 0 and b"\x1b[" not in res.stdout + res.stderr, argv
        res = run_cli(*argv, "--no-color")
        assert res.returncode == 0 and b"\x1b[" not in res.stdout + res.stderr, argv
