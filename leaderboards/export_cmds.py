"""`harness export ...`: a run in another harness's format (entry point `export` in
`harness.commands`). Today one format: `harness export inspect RUN --out FILE` (leaderboards/inspect_log.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape

from harness.errors import HarnessError

export_app = typer.Typer(no_args_is_help=True, help="Write a run in another tool's format (Inspect's eval log).")

out = Console(width=None if sys.stdout.isatty() else 200)
err = Console(stderr=True)


@export_app.command("inspect")
def inspect_cmd(
    run_id: str = typer.Argument(..., help="The run to export (see `harness runs`)."),
    out_file: Path = typer.Option(..., "--out", help="The Inspect log to write: FILE.eval (Inspect's default) or FILE.json."),
    run_dir: list[Path] = typer.Option([Path("runs")], "--run-dir", help="Folder holding the run; repeat for several."),
) -> None:
    """A run as an Inspect eval log (samples with messages, scores with explanations, usage per
    model and role, the eval spec) that `inspect view` shows and inspect_ai's reader loads.
    Needs the `inspect` extra."""
    from leaderboards.inspect_log import export_inspect, require_inspect
    from leaderboards.runs import find_run

    try:
        require_inspect("harness export inspect")  # before reading any run: the fix is an install
        run = find_run(run_dir, run_id)
        done = export_inspect(run.folder, out_file)
    except HarnessError as exc:
        err.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)  # a path may hold [..]
        raise typer.Exit(2) from None
    out.print(escape(f"wrote {done.path}: {done.samples} samples of {run_id} (inspect_ai {done.inspect_version}); "
              f"view it with `inspect view --log-dir {done.path.parent}`"), highlight=False, soft_wrap=True)
