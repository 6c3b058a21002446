"""`iodiag run`: run a workload under Darshan (or the embedded collector) and keep it as a job."""

from __future__ import annotations

import sys
from typing import List, Optional

import typer

from ..units import fmt_seconds
from .app import app
from .common import run_guarded

RUN_HELP = (
    "Run a workload and keep its I/O record as a job.\n\n"
    "The script's stdin/stdout/stderr, exit code and signals pass through untouched. "
    "Darshan runs in non-MPI mode with raised record caps and its logs go into the job folder; "
    "the Dask task stream and workers are captured without editing the script (--dask-report adds Dask's "
    "performance report). "
    "The new job id is printed on stderr at the end.\n\n"
    "Examples:\n\n"
    "  iodiag run --darshan convert.py --in a.nc --out b.zarr\n\n"
    "  iodiag run --darshan --dxt --name nightly -- ./app -n 4\n\n"
    "  iodiag run --collector auto convert.py     (Darshan if found, else the embedded collector)\n\n"
    "  iodiag report last"
)


def _darshan_names(logs):
    """File names in Darshan logs (darshan-util), for the job's metadata snapshot; none without pydarshan.

    darshan-util runs in a child process: it aborts the process that calls it on some damaged logs (an assertion
    in its name-hash reader, e.g. on the log of a process killed while Darshan wrote it), and here that process
    is ``iodiag run`` itself, which must still record the job and exit as its workload did.  A log that kills
    the child costs the snapshot its names, nothing else."""
    return _read_in_child("log_names", logs, [])


def _darshan_times(logs):
    """When each Darshan log's image ran (darshan-util reads the job records and records), for telling the images
    exec replaced (``jobs/finalize.py``); in a child process for the same reason as the names; none without
    pydarshan or when the child dies (then only the process watch's evidence counts)."""
    return _read_in_child("log_times", logs, {})


def _read_in_child(reader: str, logs, empty):
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    recv, send = ctx.Pipe(duplex=False)
    child = ctx.Process(target=_reader_in_child, args=(reader, list(logs), empty, send), daemon=True)
    child.start()
    send.close()
    try:
        return recv.recv() if recv.poll(60) else empty  # a hung child: nothing after a minute
    except (EOFError, OSError):  # the child died (darshan-util aborted) before it sent anything
        return empty
    finally:
        recv.close()
        if child.is_alive():
            child.kill()
        child.join()


def _reader_in_child(reader, logs, empty, send):
    from ..errors import IodiagError

    try:
        from ..analyzers.readers import darshan_logmeta

        out = getattr(darshan_logmeta, reader)(logs)
    except (ImportError, IodiagError):
        out = empty
    send.send(out)
    send.close()


@app.command(
    "run",
    help=RUN_HELP,
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True, "allow_interspersed_args": False},
)
def run_command(
    command: List[str] = typer.Argument(..., metavar="SCRIPT.py|-- COMMAND [ARGS]...", help="A Python script or any command, with its arguments."),
    darshan: bool = typer.Option(False, "--darshan", help="Use Darshan (error when no runtime is found). Same as --collector darshan."),
    collector: Optional[str] = typer.Option(None, "--collector", help="auto (default: Darshan when found, else embedded), darshan, embedded or none."),
    dxt: bool = typer.Option(False, "--dxt", help="Turn on Darshan's DXT tracing (every read/write with offset, size and time)."),
    name: Optional[str] = typer.Option(None, "--name", help="Label of the job (default: the script's name)."),
    darshan_lib: Optional[str] = typer.Option(None, "--darshan-lib", help="Path of libdarshan.so (or its folder)."),
    store: Optional[str] = typer.Option(None, "--store", help="Job store folder (default: $IODIAG_HOME, else $XDG_DATA_HOME/iodiag)."),
    no_dask: bool = typer.Option(False, "--no-dask", help="Do not capture the Dask task stream and performance report."),
    dask_report: bool = typer.Option(False, "--dask-report/--no-dask-report", help="Also save Dask's performance report HTML (needs bokeh; costs 1-4 s at client close, so it is off by default: the task stream and workers are always captured)."),
    mmap_dir: Optional[str] = typer.Option(None, "--mmap-dir", help="Where Darshan keeps its mmap logs while the run lasts (default: node-local temp, like Darshan's /tmp; kept in the job only for a killed process)."),
    max_records: Optional[int] = typer.Option(None, "--max-records", help="Records per module and process: Darshan's MAX_RECORDS (default 16384) or the embedded collector's trace cap."),
) -> None:
    state: dict = {}

    def body() -> None:
        from ..collectors.darshan import DarshanSettings
        from ..errors import UsageError
        from ..jobs.run import RunOptions, run_job

        from .common import check_positive

        check_positive(max_records, "--max-records")  # (Darshan would take -5 and drop a module's records)
        chosen = collector
        if darshan:
            if chosen not in (None, "darshan"):
                raise UsageError(f"--darshan contradicts --collector {chosen}", hint="give one of them")
            chosen = "darshan"
        settings = DarshanSettings() if max_records is None else DarshanSettings(max_records=max_records)
        opts = RunOptions(command=command, collector=chosen or "auto", dxt=dxt, name=name, darshan_lib=darshan_lib,
                          store=store, dask=not no_dask, dask_report=dask_report, settings=settings,
                          max_records=max_records, mmap_dir=mmap_dir, log_names=_darshan_names,
                          log_times=_darshan_times)
        state["result"] = run_job(opts)

    run_guarded(body)
    result = state["result"]
    rec, out = result.record, result.outcome
    for note in result.notes:
        print(f"iodiag: note: {note}", file=sys.stderr)
    how = f"exit {out.exit_code}" if out.signal is None else f"killed by {rec.data.get('signal_name')}"
    extra = ""
    if rec.data.get("partial"):
        n = len(rec.data.get("partial_reasons") or [])
        extra = f", partial ({n} reason{'s' if n != 1 else ''}: see job.json)"
    nlogs = len(rec.data.get("artefacts", {}).get("logs", []))
    what = f"{nlogs} Darshan log{'s' if nlogs != 1 else ''}" if rec.data.get("collector") == "darshan" else rec.data.get("collector")
    print(f"iodiag: job {rec.id} ({how}, {fmt_seconds(out.wall_s)}, {what}{extra}) → iodiag report {rec.id}", file=sys.stderr)
    from ..collectors.supervise import exit_like

    raise SystemExit(exit_like(out))
