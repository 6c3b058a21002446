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
    add_completion=True,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},  # (subcommands inherit it)
)


@app.callback(invoke_without_command=True)
def _root(
    version: bool = typer.Option(False, "--version", help="Print the version and exit.", is_eager=True),
) -> None:
    """I/O profiling and diagnosis for HPC data workflows, built around Darshan."""
    if version:
        from .. import __version__

        print(f"iodiag {__version__}")
        raise typer.Exit(0)
