"""CDWM's own commands, added to `harness` through the entry-point group `harness.commands`:
`harness cdwm export-transitions` (training data for a world model from recorded runs) and
`harness cdwm bench-web` and `bench-household` (each environment's own cost per step)."""

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


@cdwm_app.command("bench-web")
def bench_web_cmd(
    episodes: int = typer.Option(3, "--episodes", min=1, help="Passes over the benchmark tasks."),
    screenshot: bool = typer.Option(False, "--screenshot", help="Also take a screenshot every step."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
) -> None:
    """The web environment's own overhead per step, no model (Chromium action, page wait, ledger read,
    next observation) and per reset."""
    import json

    from environments.web.bench import format_table, run_env_bench

    result = run_env_bench(episodes, screenshot)
    out.print(json.dumps(result, indent=2) if as_json else format_table(result), highlight=False)


@cdwm_app.command("bench-household")
def bench_household_cmd(
    passes: int = typer.Option(1, "--passes", min=1, help="Passes over the generated tasks."),
    seed: int = typer.Option(0, "--seed", help="Generator seed of the tasks."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
) -> None:
    """The household environment's own cost per reset and per step, no model: every generated
    task's gold plan played in ALFWorld's text engine."""
    import json

    from environments.household.bench import format_table, run_household_bench

    result = run_household_bench(passes, seed)
    out.print(json.dumps(result, indent=2) if as_json else format_table(result), highlight=False)
