"""`iodiag recommend train|evaluate`: build the recommender's trees from measured sweeps and validate them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer

from .app import app
from .common import guarded
from .recommend_job import JobOrSubcommand, add_job_command

recommend_app = typer.Typer(
    cls=JobOrSubcommand,
    help="What to change in a job (chunking, compression, Dask, striping, buffering), from rules on its findings "
    "and decision trees trained on measured sweeps; and training/validating those trees.\n\n"
    "Examples:\n\n"
    "  iodiag recommend last                    # the newest iodiag job (or a job id, a Darshan log, a folder)\n\n"
    "  iodiag recommend run.darshan --json\n\n"
    "  iodiag recommend train sweeps/convert-p1 sweeps/read-p1 --out site-model.json\n\n"
    "  iodiag recommend train --table src/iodiag/recommend/data/training.csv --out src/iodiag/recommend/data/model.json\n\n"
    "  iodiag recommend evaluate --markdown docs/recommender/validation.md",
    no_args_is_help=True,
    rich_markup_mode=None,
)
app.add_typer(recommend_app, name="recommend")
add_job_command(recommend_app)

DepthOpt = typer.Option(4, "--max-depth", help="depth of the trees (1-4: kept readable)")


@recommend_app.command("train")
@guarded
def train_cmd(sweeps: Optional[List[Path]] = typer.Argument(None, help="sweep folders (iodiag sweep run/submit)"),
              table: Optional[Path] = typer.Option(None, "--table", help="train from this training table (CSV) "
                                                   "instead of sweep folders"),
              out: Path = typer.Option(Path("iodiag-model.json"), "--out", "-o", help="model file to write"),
              table_out: Optional[Path] = typer.Option(None, "--table-out", help="where the table built from the "
                                                       "sweeps goes (default: <out>.training.csv)"),
              max_depth: int = DepthOpt,
              json_out: bool = typer.Option(False, "--json", help="print the model's summary as JSON")) -> None:
    """Train the recommender on sweeps (conversion and read workloads) or on a training table.

    Every setting must be measured 3 times in at least 2 scenarios of a workload; a smaller sweep is refused
    with the number of runs missing.  The model is plain JSON (trees of depth <= 4), applied without
    scikit-learn; the shipped one is rebuilt bit for bit by the second example.

    Examples:

      iodiag recommend train /scratch/sweeps/convert-p* --out site-model.json

      iodiag recommend train --table src/iodiag/recommend/data/training.csv --out src/iodiag/recommend/data/model.json
    """
    from ..recommend.train import train_command
    from .common import check_output

    check_output(out, "model", option="--out")
    if table_out is not None:
        check_output(table_out, "training table", option="--table-out")
    if not 1 <= max_depth <= 4:
        from ..errors import UsageError

        raise UsageError(f"--max-depth {max_depth}: must be 1 to 4 (trees are kept readable)", hint="use --max-depth 4 or less")
    model, used = train_command(sweeps=sweeps or (), table=table, out=out, table_out=table_out,
                                max_depth=max_depth)
    summary = {"schema": "iodiag.recommend-train/1", "model": str(out), "table": str(used), "trained_on": model["trained_on"],
               "workloads": {wl: {k: d[k] for k in ("scenarios", "runs", "cv_log_mae")} | {
                   "settings": sorted(d["candidates"])} for wl, d in model["workloads"].items()}}
    if json_out:
        typer.echo(json.dumps(summary, indent=2))
        return
    from ..recommend.model import load_model

    m = load_model(out)
    typer.echo(f"model {out} (table {used})")
    typer.echo(f"trained on: {model['trained_on']}")
    for wl in model["workloads"]:
        typer.echo(f"\n{wl}: best setting per scenario (depth <= {model['max_depth']}):")
        for line in m.rules(wl):
            typer.echo("  " + line)


@recommend_app.command("evaluate")
@guarded
def evaluate_cmd(table: Optional[Path] = typer.Option(None, "--table", help="training table (default: the shipped "
                                                      "one, src/iodiag/recommend/data/training.csv)"),
                 markdown: Optional[Path] = typer.Option(None, "--markdown", help="write the tables to this "
                                                         "Markdown file (for the docs) instead of printing them"),
                 max_depth: int = DepthOpt,
                 color: Optional[bool] = typer.Option(None, "--color/--no-color", help="colour the output (default: "
                                                      "on a terminal, unless $NO_COLOR is set)")) -> None:
    """Kunkel's comparison: every single default vs the tree vs the best per scenario (arithmetic, geometric and
    harmonic means of relative performance; the tree's regret), the tree's choices held out by scenario, access
    pattern and array scale.

    Examples:

      iodiag recommend evaluate

      iodiag recommend evaluate --markdown docs/recommender/validation.md
    """
    from ..recommend.train import SHIPPED_TABLE, evaluate_files

    from ..reports.textout import markdown_text
    from .common import check_output, terminal_width, use_color

    if markdown is not None:
        check_output(markdown, "Markdown tables", option="--markdown")
    src = table or SHIPPED_TABLE
    shown = "src/iodiag/recommend/data/training.csv" if table is None else str(table)
    _, text = evaluate_files(table=src, markdown=markdown, max_depth=max_depth, shown_path=shown)
    if markdown:
        typer.echo(f"wrote {markdown}", err=True)
    else:  # the same tables, laid out for the terminal (the Markdown is for the docs: --markdown)
        keep = ("harmonic", "regret (a / g / h)", "best setting", "advice", "measured in the table")
        typer.echo(markdown_text(text, width=terminal_width(), color=use_color(color), keep=keep), nl=False)
