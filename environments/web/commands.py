"""`harness bench web` (entry-point group `harness.bench`): the web environment's own cost per step."""

from __future__ import annotations

import typer

from harness.cli.kit import out


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
