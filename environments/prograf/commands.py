"""ProGraf's commands, added to `harness` through entry points: `harness prograf build-tasks`
(`harness.commands`: prograf = prograf_app) and `harness bench prograf` (`harness.bench`)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from harness.cli.kit import out

prograf_app = typer.Typer(no_args_is_help=True, help="ProGraf: structured-diagram tasks and their verifier.")


@prograf_app.callback()
def _group() -> None:
    """ProGraf: structured-diagram tasks and their verifier (a group, so that later commands join it)."""


@prograf_app.command("build-tasks")
def build_tasks_cmd(
    seed: int = typer.Option(0, "--seed", help="Seed of the generated tasks (0 = the committed corpus)."),
    out_path: Optional[Path] = typer.Option(None, "--out", help="Where to write (default: the committed corpus file)."),
) -> None:
    """Regenerate the 304-task corpus (byte for byte for the same seed) and print its hash."""
    from environments.prograf.build import CORPUS, write_corpus

    path = out_path or CORPUS
    n, digest = write_corpus(path, seed)
    out.print(f"{n} tasks -> {path} (sha256 {digest})", highlight=False)


def bench_prograf_cmd(
    render: bool = typer.Option(True, "--render/--no-render", help="Also render SVG (references and mutants)."),
    limit: Optional[int] = typer.Option(None, "--limit", min=1, help="Only the first N tasks."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
) -> None:
    """Verifier time per task per category over every reference and mutant of the corpus (structural,
    and rendered), the render cache's hit rate, and whether every reference passed and every mutant
    failed its target."""
    import json

    from environments.prograf.bench import format_table, run_bench

    result = run_bench(render=render, limit=limit)
    out.print(json.dumps(result, indent=2) if as_json else format_table(result), highlight=False)
