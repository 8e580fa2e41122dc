"""CDWM's own commands, added to `harness` through the entry-point group `harness.commands`:
`harness cdwm export-transitions` (training data for a world model from recorded runs). Each
world's own cost per step is a `harness bench` command of its family (`harness bench web`,
`harness bench household`)."""

from __future__ import annotations

from pathlib import Path

import typer

from harness.cli.kit import RUN_DIR, out
from harness.cli.kit import fail as _fail
from harness.errors import HarnessError

cdwm_app = typer.Typer(no_args_is_help=True, help="CDWM (causal delta world models) tools.")


@cdwm_app.command("export-transitions")
def export_transitions_cmd(
    run: list[str] = typer.Option(..., "--run", help="Run id (under --run-dir) or a run folder; repeat to pool runs."),
    run_dir: Path = RUN_DIR,
    out_dir: Path = typer.Option(..., "--out", help="Folder for dataset/ (Hugging Face save_to_disk) and transitions.jsonl."),
) -> None:
    """Write every executed step of CDWM runs as (observation, action, ground-truth delta) records."""
    from environments.cdwm.transitions import export_transitions

    try:
        n, paths = export_transitions(run, run_dir, out_dir)
    except HarnessError as exc:
        _fail(str(exc))
    out.print(f"{n} transitions -> {paths['dataset']} (datasets.load_from_disk) and {paths['jsonl']}", highlight=False)
