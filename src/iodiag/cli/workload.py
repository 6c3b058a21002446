"""`iodiag workload gen|convert|read`: the workloads as commands.

The options are the workload module's own (the same a batch script or
``iodiag run -- python -m iodiag.workloads.<w>`` uses); this command adds
``--json`` to print the results record.
"""

from __future__ import annotations

import importlib
import json

import typer
from pathlib import Path

from .app import app
from .common import guarded




workload_app = typer.Typer(
    help="Synthetic data, NetCDF->Zarr conversion and read-pattern workloads.\n\n"
    "Examples:\n\n"
    "  iodiag workload gen --out data/ta.nc --time 8\n\n"
    "  iodiag workload convert --src data/ta.nc --dst data/ta.zarr --compressor zstd --workers 2\n\n"
    "  iodiag workload read --path data/ta.zarr --patterns slice,point,timeseries --json\n\n"
    "  iodiag run --name conv -- python -m iodiag.workloads.convert --src data/ta.nc --dst data/ta.zarr\n\n"
    "Each writes a JSON results record next to its output (or --results PATH).",
    no_args_is_help=True,
    rich_markup_mode=None,
)
app.add_typer(workload_app, name="workload")

_CTX = {"allow_extra_args": True, "ignore_unknown_options": True, "help_option_names": []}


def _run(name: str, func: str, args: list[str]) -> None:
    as_json = "--json" in args
    args = [a for a in args if a != "--json"]
    mod = importlib.import_module(f"iodiag.workloads.{name}")
    from ..workloads import build_parser

    parser = build_parser(f"iodiag workload {name}", (mod.__doc__ or "").split("\n\n")[0], mod.PARAMS,
                          mod.EXAMPLES)
    parser.add_argument("--json", action="store_true", help="print the results record as JSON")
    ns = vars(parser.parse_args(args))
    ns.pop("json", None)
    from .common import check_folder

    for key in ("out", "dst"):  # the store or file the workload writes: its folders checked before it starts
        if isinstance(ns.get(key), str) and ns[key]:
            check_folder(Path(ns[key]).parent, "output", option=f"--{key} {ns[key]}:")
    if as_json:
        rec = getattr(mod, func)(**ns)
        typer.echo(json.dumps(rec, indent=2, sort_keys=True, default=str))
    else:
        mod.main(args)


@workload_app.command("gen", context_settings=_CTX, add_help_option=False)
@guarded
def gen(ctx: typer.Context) -> None:
    """Write a synthetic climate (time,plev,lat,lon) or weak-scaling cube dataset (--help for options)."""
    _run("gen", "generate", ctx.args)


@workload_app.command("convert", context_settings=_CTX, add_help_option=False)
@guarded
def convert(ctx: typer.Context) -> None:
    """Convert NetCDF4/HDF5 to Zarr with xarray + Dask (--help for options)."""
    _run("convert", "convert", ctx.args)


@workload_app.command("read", context_settings=_CTX, add_help_option=False)
@guarded
def read(ctx: typer.Context) -> None:
    """Time the thesis' read patterns on a Zarr store or NetCDF4/HDF5 file (--help for options)."""
    _run("read", "read_patterns", ctx.args)
