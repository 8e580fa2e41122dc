"""`harness papers`: the method papers' claims (`harness.commands` entry point `papers`).

`harness papers check TASK|--all` runs every arm of the claim as an ordinary run of
`papers.<task>` (seed plan as registered), prints the paper's sentence, the criterion with its hash,
each condition's estimate and interval, the departures and the verdict, and saves the verdict in
`RUN_DIR/claims/`; `papers verdict RUN...` recomputes it from the runs' records; `papers table` is
the claims table of this family (`harness claims table` has every family)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.markup import escape

from harness.cli.kit import RUN_DIR, check_claims, fail, out, print_claims_table, recompute_verdict

papers_app = typer.Typer(no_args_is_help=True, help="The method papers as scored tasks: check their claims.")


@papers_app.command("list")
def list_cmd() -> None:
    """The tasks of the family, with the paper's sentence and the criterion's hash."""
    from environments.papers.tasks import TASKS

    for name, cls in TASKS.items():
        out.print(
            f"[bold]{name}[/] ({cls.name}, criterion {cls.claim.criterion_hash()}, "
            f"{len(cls.claim.departures)} departures): {escape(cls.claim.sentence)}",
            highlight=False,
        )


@papers_app.command("check")
def check_cmd(
    task: Optional[str] = typer.Argument(None, help="Task name (see `harness papers list`)."),
    all_tasks: bool = typer.Option(False, "--all", help="Check every task, then print the family's claims table."),
    seeds: Optional[int] = typer.Option(
        None,
        "--seeds",
        min=1,
        max=500,
        help="Exploratory: N seeds instead of the registered plan (hash then unregistered).",
    ),
    run_dir: Path = RUN_DIR,
    executor: str = typer.Option("asyncio", "--executor", help="asyncio or ray."),
    ray_address: Optional[str] = typer.Option(None, "--ray-address", help="With --executor ray: HOST:PORT."),
    details: bool = typer.Option(False, "--details", help="Also print every arm's metrics side by side."),
    scale: Optional[int] = typer.Option(
        None, "--scale", min=1, help="A task's size multiplier (its `scale` option; tasks that have one)."
    ),
    device: Optional[str] = typer.Option(None, "--device", help="cpu or cuda (a task's `device` option)."),
) -> None:
    """Run the claim: every arm an ordinary run on shared seeds, paired intervals, a verdict.
    `--scale`/`--device` set the task's options of those names (the registered check is at their
    defaults; any other size is a bigger setting than the one the criterion was registered for)."""
    from environments.papers.tasks import TASKS

    if all_tasks == (task is not None):
        fail("give one TASK or --all (tasks: " + ", ".join(TASKS) + ")")
    names = list(TASKS) if all_tasks else [str(task)]
    unknown = [n for n in names if n not in TASKS]
    if unknown:
        fail(f"unknown task {unknown[0]!r}: choose one of {', '.join(TASKS)}")
    options = {k: v for k, v in (("scale", scale), ("device", device)) if v is not None}
    lacking = [n for n in names if any(k not in TASKS[n].Options.model_fields for k in options)]
    if lacking:
        fail(
            f"--scale/--device: task {lacking[0]!r} has no such option (tasks with both: "
            + ", ".join(n for n, c in TASKS.items() if {"scale", "device"} <= set(c.Options.model_fields))
            + ")"
        )
    verdicts = check_claims(
        [TASKS[n].name for n in names],
        run_dir,
        seeds=seeds,
        executor=executor,
        ray_address=ray_address,
        details=details,
        options=options,
    )
    if all_tasks:
        from harness.claims.table import to_markdown

        out.print(to_markdown(verdicts), highlight=False, markup=False)


@papers_app.command("verdict")
def verdict_cmd(
    run_ids: list[str] = typer.Argument(..., help="The runs of one check (every arm, every look)."),
    run_dir: Path = RUN_DIR,
    details: bool = typer.Option(False, "--details", help="Also print every arm's metrics."),
) -> None:
    """Recompute a task's verdict from its runs' records (no cell is recomputed)."""
    recompute_verdict(run_ids, run_dir, details)


@papers_app.command("table")
def table_cmd(
    fmt: str = typer.Option("md", "--format", help="md, csv or html."),
    run_dir: list[Path] = typer.Option([Path("runs")], "--run-dir", help="Where `papers check` saved (repeatable)."),
) -> None:
    """This family's claims table (the paper's sentence, verdict, estimate, hash, departures, wall time)."""
    print_claims_table(fmt, run_dir, "papers", "run `harness papers check --all`")
