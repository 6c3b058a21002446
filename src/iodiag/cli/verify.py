"""`iodiag verify JOB`: re-run a recorded job with its top recommendation applied and measure the speedup."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import List, Optional

import typer

from .app import app
from .common import _print_choices, atomic_write, run_guarded

VERIFY_HELP = (
    "Re-run a job's workload as recorded and with the top recommendation applied (or the settings given with "
    "--set), interleaved before/after (A B A B ...), and report the measured speedup with a 95 % band against "
    "the run-to-run noise.\n\n"
    "JOB is an iodiag job id / prefix / 'last' recorded by `iodiag run` (its command is re-run without a "
    "collector).  The program is run for the timed runs and for nothing else, and is not edited: flags are "
    "changed only where the recorded command line shows them; xarray/Dask settings (chunks, workers, threads, "
    "compressor, zarr_format) are applied inside a Python program by a preload at open_dataset/open_zarr/"
    "Dataset.chunk/to_zarr/LocalCluster, and open_once keeps a NetCDF/HDF5 file the program opens again open "
    "(netCDF4.Dataset, h5py.File); the output lists where each one took effect (one that never did is "
    "'not applied', with no speedup); MPI-IO hints go through ROMIO_HINTS and MPICH_MPIIO_HINTS.  A "
    "recommendation that changes the data layout (rechunking a store the job reads) is prepared once first, "
    "timed separately, and the program is pointed at the copy.  Every output path is checked before the first "
    "run.\n\n"
    "Examples:\n\n"
    "  iodiag verify last\n\n"
    "  iodiag verify last --reps 7 --json > verify.json\n\n"
    "  iodiag verify conv --set chunks=24,10,90,180 --html verify.html\n\n"
    "  iodiag verify conv --set chunks=time=24 --set workers=1\n\n"
    "  iodiag verify append --set open_once=1\n\n"
    "  iodiag verify conv --arg 3=24\n\n"
    "  iodiag verify conv --after 'python convert.py in.nc out.zarr 24'\n\n"
    "  iodiag verify conv --set OMP_NUM_THREADS=2"
)


@app.command("verify", help=VERIFY_HELP)
def verify_cmd(
    job: str = typer.Argument(..., help="iodiag job folder, job id, unique prefix, name or 'last'."),
    reps: int = typer.Option(5, "--reps", help="Runs per side (before and after), interleaved."),
    sets: List[str] = typer.Option([], "--set", help="Verify this setting instead of the recommendation: name=value (a flag on the recorded command line; else, in a Python program, chunks/workers/threads/compressor/zarr_format/open_once applied by the preload) or NAME=value (an environment variable); repeatable."),
    args: List[str] = typer.Option([], "--arg", help="N=VALUE: replace the program's argv[N] (argv[1] is its first argument); repeatable."),
    after: Optional[str] = typer.Option(None, "--after", help="The whole changed command (quoted), run in the job's folder instead of the recorded one with changes."),
    json_out: bool = typer.Option(False, "--json", help="Print the result as JSON (schema iodiag.verify/1)."),
    html: Optional[Path] = typer.Option(None, "--html", help="Write the before/after comparison as HTML to this path."),
    model: Optional[Path] = typer.Option(None, "--model", help="A trained model file instead of the shipped one."),
    config_file: Optional[Path] = typer.Option(None, "--config", help="TOML file overriding detector thresholds."),
) -> None:
    def body() -> None:
        from ..config import load_config
        from ..reports.verify import render_verify_html, render_verify_text
        from ..service import verify_job

        from .common import check_output

        if html is not None:  # before the first run, not after the last (a long verify lost to a typo)
            check_output(html, "HTML comparison", option="--html")
        bar: list = []

        def progress(done: int, total: int) -> None:
            if json_out or not sys.stderr.isatty():
                print(f"iodiag: verify run {done}/{total}", file=sys.stderr)
                return
            if not bar:
                from rich.progress import Progress

                b = Progress(transient=True)
                b.start()
                bar.extend([b, b.add_task("verify runs (before/after interleaved)", total=total)])
            bar[0].update(bar[1], completed=done)

        done: list = [0, 0]

        def counted(n: int, total: int) -> None:
            done[:] = [n, total]
            progress(n, total)

        try:
            d = verify_job(target=job, config=load_config(config_file), reps=reps, sets=sets, positional=args,
                           after=after, outputs=[str(html.resolve())] if html is not None else [],
                           model_path=str(model) if model else None, progress=counted)
        except KeyboardInterrupt:
            from ..errors import Interrupted

            raise Interrupted(f"interrupted after {done[0]} of {done[1] or 2 * reps} runs: nothing was kept (the speedup "
                              "and its band need every before/after pair)",
                              hint="run it again (with fewer --reps it is quicker, its band wider)") from None
        finally:
            if bar:
                bar[0].stop()
        if html is not None:
            atomic_write(html, render_verify_html(d))
            print(f"iodiag: HTML comparison written to {html}", file=sys.stderr)
        if json_out:
            sys.stdout.write(json.dumps(d, indent=2, default=str) + "\n")
        else:
            import shutil

            sys.stdout.write(render_verify_text(d, width=max(60, min(shutil.get_terminal_size((100, 24)).columns, 160))))

    run_guarded(body, on_ambiguous=_print_choices, json_errors="iodiag.verify/1" if json_out else False)
