"""`harness bench household` (entry-point group `harness.bench`): the household engine's own cost per step."""

from __future__ import annotations

import typer

from harness.cli.kit import out


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
