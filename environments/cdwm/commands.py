"""CDWM's own commands, added to `harness` through the entry-point group `harness.commands`:
`harness cdwm export-transitions` (training data for a world model from recorded runs) and
`harness cdwm collect` (transitions from the worlds' own exploring policies, no model). Each
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


@cdwm_app.command("collect")
def collect_cmd(
    out_dir: Path = typer.Option(..., "--out", help="Folder for shards/, manifest.json, dataset/ (save_to_disk) and README.md; "
                                 "rerun with the same options to resume a killed collection."),
    worlds: str = typer.Option("household,minigrid", "--worlds", help="Comma-separated: household, minigrid."),
    transitions: int = typer.Option(2000, "--transitions", min=1, help="Rows in all, shared evenly by the worlds."),
    seed: int = typer.Option(0, "--seed", help="Same seed and options = the same dataset."),
    off_plan_rate: float = typer.Option(0.2, "--off-plan-rate", min=0.0, max=1.0, help="Per-step chance of an off-plan action."),
    irreversible_rate: float = typer.Option(0.03, "--irreversible-rate", min=0.0, max=1.0,
                                            help="Per-step chance that the episode turns to an irreversible action."),
    shard_size: int = typer.Option(250, "--shard-size", min=1, help="Rows per shard (the unit of resumption)."),
    heldout: str = typer.Option("", "--heldout", help="Held-out task types, e.g. household:cool+heat,minigrid:lavagap6 "
                                "(defaults: household:cool, minigrid:lavagap6)."),
) -> None:
    """Collect (observation, action, ground-truth delta) transitions from the worlds' own exploring
    policies (no model), with train / validation / held-out splits, as a Hugging Face dataset."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    from environments.cdwm.collect import CollectConfig, collect, parse_heldout, parse_worlds, plan_shards

    try:
        names = parse_worlds(worlds)
        if off_plan_rate + irreversible_rate > 1.0:
            raise HarnessError(f"--off-plan-rate {off_plan_rate} + --irreversible-rate {irreversible_rate} exceed 1")
        config = CollectConfig(worlds=names, transitions=transitions, seed=seed, off_plan_rate=off_plan_rate,
                               irreversible_rate=irreversible_rate, shard_size=shard_size,
                               heldout=parse_heldout(heldout, names))
        totals: dict[str, int] = {}
        for shard in plan_shards(config):
            totals[shard.world] = totals.get(shard.world, 0) + shard.rows
        columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                   TimeRemainingColumn())
        with Progress(*columns, console=out) as bar:
            tasks = {w: bar.add_task(w, total=n) for w, n in totals.items()}
            result = collect(out_dir, config, on_rows=lambda w, n: bar.advance(tasks[w], n))
    except HarnessError as exc:
        _fail(str(exc))
    for world, seconds in result["seconds"].items():
        n = sum(c.get(world, 0) for c in result["counts"].values())
        out.print(f"{world}: {n} transitions in {seconds:.1f} s ({n / seconds * 60 if seconds else 0:,.0f} per minute)",
                  highlight=False)
    split_counts = ", ".join(f"{s} {sum(c.values())}" for s, c in result["counts"].items())
    out.print(f"{split_counts} -> {result['dataset']} (datasets.load_from_disk); card {result['card']}", highlight=False)
