"""The typer application object; command modules register on it."""

from __future__ import annotations

import typer

app = typer.Typer(
    name="iodiag",
    help="I/O profiling and diagnosis for HPC data workflows, built around Darshan.\n\n"
    "Examples:\n\n"
    "  iodiag run --darshan convert.py --in a.nc --out b.zarr\n\n"
    "  iodiag report last\n\n"
    "  iodiag report path/to/log.darshan --json",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
)


@app.callback()
def _root() -> None:
    """Keeps `iodiag <command>` a command group even while only one command is registered."""
