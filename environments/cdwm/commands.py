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
    out_dir: Path = typer.Option(
        ..., "--out", help="Folder for dataset/ (Hugging Face save_to_disk) and transitions.jsonl."
    ),
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
    out_dir: Path = typer.Option(
        ...,
        "--out",
        help="Folder for shards/, manifest.json, dataset/ (save_to_disk) and README.md; "
        "rerun with the same options to resume a killed collection.",
    ),
    worlds: str = typer.Option("household,minigrid", "--worlds", help="Comma-separated: household, minigrid, web, science, atari."),
    transitions: int = typer.Option(2000, "--transitions", min=1, help="Rows in all, shared evenly by the worlds."),
    seed: int = typer.Option(0, "--seed", help="Same seed and options = the same dataset."),
    off_plan_rate: float = typer.Option(
        0.2, "--off-plan-rate", min=0.0, max=1.0, help="Per-step chance of an off-plan action."
    ),
    irreversible_rate: float = typer.Option(
        0.03,
        "--irreversible-rate",
        min=0.0,
        max=1.0,
        help="Per-step chance that the episode turns to an irreversible action.",
    ),
    shard_size: int = typer.Option(250, "--shard-size", min=1, help="Rows per shard (the unit of resumption)."),
    heldout: str = typer.Option(
        "",
        "--heldout",
        help="Held-out task types, e.g. household:cool+heat,minigrid:lavagap6 "
        "(defaults: household:cool, minigrid:lavagap6, web:mail -- the held-out website, "
        "science:chemistry-mix+chemistry-mix-paint-secondary-color+chemistry-mix-paint-tertiary-color, atari:boxing).",
    ),
) -> None:
    """Collect (observation, action, ground-truth delta) transitions from the worlds' own exploring
    policies (no model), with train / validation / held-out splits, as a Hugging Face dataset."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    from environments.cdwm.collect import CollectConfig, collect, parse_heldout, parse_worlds, plan_shards

    try:
        names = parse_worlds(worlds)
        if off_plan_rate + irreversible_rate > 1.0:
            raise HarnessError(f"--off-plan-rate {off_plan_rate} + --irreversible-rate {irreversible_rate} exceed 1")
        config = CollectConfig(
            worlds=names,
            transitions=transitions,
            seed=seed,
            off_plan_rate=off_plan_rate,
            irreversible_rate=irreversible_rate,
            shard_size=shard_size,
            heldout=parse_heldout(heldout, names),
        )
        totals: dict[str, int] = {}
        for shard in plan_shards(config):
            totals[shard.world] = totals.get(shard.world, 0) + shard.rows
        columns = (
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
        )
        with Progress(*columns, console=out) as bar:
            tasks = {w: bar.add_task(w, total=n) for w, n in totals.items()}
            result = collect(out_dir, config, on_rows=lambda w, n: bar.advance(tasks[w], n))
    except HarnessError as exc:
        _fail(str(exc))
    for world, seconds in result.seconds.items():
        n = sum(c.get(world, 0) for c in result.counts.values())
        out.print(
            f"{world}: {n} transitions in {seconds:.1f} s ({n / seconds * 60 if seconds else 0:,.0f} per minute)",
            highlight=False,
        )
    split_counts = ", ".join(f"{s} {sum(c.values())}" for s, c in result.counts.items())
    out.print(
        f"{split_counts} -> {result.dataset} (datasets.load_from_disk); card {result.card}", highlight=False
    )


@cdwm_app.command("train")
def train_cmd(
    data: Path = typer.Option(..., "--data", help="A `harness cdwm collect --out` folder (or its dataset/)."),
    out_dir: Path = typer.Option(
        ...,
        "--out",
        help="Folder for checkpoints/, train_log.jsonl and adapter/; rerun the "
        "same command to resume from the newest checkpoint.",
    ),
    base_model: str = typer.Option(
        "",
        "--base-model",
        help="Hugging Face id or folder of the base model (default: "
        "the embedded SmolLM2-135M-Instruct). On a GPU, e.g. "
        "--base-model HuggingFaceTB/SmolLM2-1.7B-Instruct --device cuda --dtype bfloat16.",
    ),
    device: str = typer.Option("cpu", "--device", help="torch device: cpu, cuda, cuda:1, ..."),
    dtype: str = typer.Option("float32", "--dtype", help="float32, bfloat16 or float16 (bfloat16 on a GPU)."),
    steps: int = typer.Option(200, "--steps", min=1, help="Optimiser steps in all (a resumed run continues to this)."),
    max_minutes: float = typer.Option(
        0.0,
        "--max-minutes",
        min=0.0,
        help="Stop, with a checkpoint, after this many "
        "minutes of training (0: no limit); rerun with a larger one to go on.",
    ),
    batch_size: int = typer.Option(8, "--batch-size", min=1),
    lr: float = typer.Option(3e-4, "--lr", help="LoRA learning rate."),
    gate_lr: float = typer.Option(0.05, "--gate-lr", help="Learning rate of the causal mask's gate logits."),
    sparsity: float = typer.Option(0.02, "--sparsity", min=0.0, help="The mask's sparsity penalty per open gate."),
    rank: int = typer.Option(16, "--rank", min=1),
    top_layers: int = typer.Option(8, "--top-layers", min=0, help="LoRA on the top N decoder layers (0: all)."),
    checkpoint_every: int = typer.Option(25, "--checkpoint-every", min=1),
    eval_every: int = typer.Option(50, "--eval-every", min=1, help="Steps between validation losses."),
    seed: int = typer.Option(0, "--seed"),
    target: str = typer.Option("delta", "--target", help="delta: the delta world model (with its learned mask); "
                               "value: the value-model baseline at the same budget (a good / neutral / bad label "
                               "per transition, no delta, no mask; environments/cdwm/value_model.py); generative: "
                               "the generative baseline at the same budget (the next observation's text, no mask; "
                               "environments/cdwm/generative_model.py; needs data collected with its next_observation)."),
) -> None:
    """SFT of a delta world model (LoRA, peft) with a learned causal sparsity mask, trained jointly;
    or, with --target value / generative, of the value-model / generative baseline on the same rows."""
    from environments.cdwm.wm_train import TrainConfig, train

    cfg = TrainConfig(
        data=str(data),
        base_model=base_model or None,
        device=device,
        dtype=dtype,
        steps=steps,
        max_minutes=max_minutes,
        batch_size=batch_size,
        lr=lr,
        gate_lr=gate_lr,
        sparsity=sparsity,
        rank=rank,
        top_layers=top_layers,
        checkpoint_every=checkpoint_every,
        eval_every=eval_every,
        seed=seed,
        target=target,
    )

    def show(entry: dict[str, float]) -> None:
        if "val_loss" in entry or entry["step"] % 10 == 0:
            out.print(
                f"step {entry['step']}: loss {entry['loss']:.4f} (lm {entry['lm_loss']:.4f}, mask bce "
                f"{entry['mask_bce']:.4f})"
                + (f", val {entry['val_loss']:.4f}" if "val_loss" in entry else "")
                + f" [{entry['seconds']:.0f} s]",
                highlight=False,
            )

    try:
        result = train(cfg, out_dir, on_step=show)
    except HarnessError as exc:
        _fail(str(exc))
    if result.resumed_from:
        out.print(f"resumed from step {result.resumed_from}", highlight=False)
    out.print(
        f"step {result.step}/{steps}: validation loss {result.val_loss_first} -> {result.val_loss_last}; "
        f"{result.examples} training rows ({result.skipped} too long, skipped); adapter {result.adapter} "
        f"(serve: local/smollm2-135m@{result.adapter}#all-token)",
        highlight=False,
    )


@cdwm_app.command("posttrain")
def posttrain_cmd(
    data: Path = typer.Option(
        ..., "--data", help="The `harness cdwm collect --out` folder the adapter was trained on."
    ),
    adapter: Path = typer.Option(
        ..., "--adapter", help="The starting adapter: `harness cdwm train --out OUT`'s OUT/adapter."
    ),
    out_dir: Path = typer.Option(
        ...,
        "--out",
        help="Folder for checkpoints/, posttrain_log.jsonl and adapter/; rerun the same command to resume.",
    ),
    base_model: str = typer.Option(
        "", "--base-model", help="The adapter's base model, as given to `harness cdwm train` (default: embedded)."
    ),
    device: str = typer.Option("cpu", "--device", help="torch device: cpu, cuda, cuda:1, ..."),
    dtype: str = typer.Option("float32", "--dtype", help="float32, bfloat16 or float16."),
    steps: int = typer.Option(50, "--steps", min=1, help="Policy updates in all (a resumed run continues to this)."),
    max_minutes: float = typer.Option(
        0.0, "--max-minutes", min=0.0, help="Stop, with a checkpoint, after this many minutes (0: no limit)."
    ),
    rows: int = typer.Option(2, "--rows", min=1, help="Training transitions per step."),
    group_size: int = typer.Option(4, "--group-size", min=2, help="Replies sampled per transition."),
    lr: float = typer.Option(1e-4, "--lr", help="LoRA learning rate."),
    kl: float = typer.Option(0.04, "--kl", min=0.0, help="Weight of the KL penalty to the starting adapter."),
    temperature: float = typer.Option(1.0, "--temperature", help="Sampling temperature (> 0)."),
    reversibility_weight: float = typer.Option(
        0.0, "--reversibility-weight", min=0.0, help="> 0: the reversibility part enters the reward (not reward.py's)."
    ),
    eval_rows: int = typer.Option(10, "--eval-rows", min=0, help="Greedy rows per non-train split, before and after."),
    checkpoint_every: int = typer.Option(5, "--checkpoint-every", min=1),
    seed: int = typer.Option(0, "--seed"),
) -> None:
    """GRPO-style post-training of a trained world model on the composite reward's per-transition parts."""
    from environments.cdwm.wm_posttrain import PosttrainConfig, PosttrainLogEntry, eval_table, posttrain

    cfg = PosttrainConfig(
        data=str(data),
        adapter=str(adapter),
        base_model=base_model or None,
        device=device,
        dtype=dtype,
        steps=steps,
        max_minutes=max_minutes,
        rows=rows,
        group_size=group_size,
        lr=lr,
        kl=kl,
        temperature=temperature,
        reversibility_weight=reversibility_weight,
        eval_rows=eval_rows,
        checkpoint_every=checkpoint_every,
        seed=seed,
    )

    def show(e: PosttrainLogEntry) -> None:
        if e.get("eval"):
            out.print(f"eval {e['eval']} at step {e['step']}: reward {e['reward']:.3f}", highlight=False)
        else:
            out.print(
                f"step {e['step']}: reward {e['reward']:.3f} (F1 {e['delta_accuracy']:.3f}, calibration "
                f"{e['calibration']:.3f}, valid {e['action_following']:.2f}), kl {e['kl']:.4f} [{e['seconds']:.0f} s]",
                highlight=False,
            )

    try:
        result = posttrain(cfg, out_dir, on_step=show)
    except HarnessError as exc:
        _fail(str(exc))
    if result.resumed_from:
        out.print(f"resumed from step {result.resumed_from}", highlight=False)
    out.print(eval_table(result.log), highlight=False)
    out.print(
        f"step {result.step}/{steps}: {result.rows} training rows ({result.skipped} skipped); adapter "
        f"{result.adapter} (serve: local/smollm2-135m@{result.adapter}#all-token)",
        highlight=False,
    )


@cdwm_app.command("evaluate")
def evaluate_cmd(
    data: Path = typer.Option(..., "--data", help="A `harness cdwm collect --out` folder (or its dataset/)."),
    model: str = typer.Option(
        "",
        "--model",
        help="World model spec, e.g. local/smollm2-135m (before training) or "
        "local/smollm2-135m@OUT/adapter#all-token; empty: masks only.",
    ),
    mask: Path = typer.Option(
        None,
        "--mask",
        help="An adapter folder of `harness cdwm train` (its cdwm_mask.json): the "
        "learned mask, applied in each prediction's grammar and scored.",
    ),
    splits: str = typer.Option("", "--splits", help="Comma-separated splits (default: all)."),
    rows: int = typer.Option(40, "--rows", min=0, help="Rows per split the model predicts (0: all)."),
    seed: int = typer.Option(0, "--seed"),
    json_out: Path = typer.Option(None, "--json", help="Also write the report as JSON here."),
) -> None:
    """Delta F1, reversibility, validity and ECE of a world model, and mask precision / recall."""
    import json as _json

    from environments.cdwm.wm_eval import evaluate, format_report

    try:
        report = evaluate(
            data, model or None, mask, [s.strip() for s in splits.split(",") if s.strip()] or None, rows=rows, seed=seed
        )
    except HarnessError as exc:
        _fail(str(exc))
    if json_out:
        json_out.write_text(_json.dumps(report, indent=1, default=str))
    out.print(format_report(report), highlight=False)


@cdwm_app.command("planner")
def planner_cmd(
    arms: str = typer.Option(
        "none,oracle",
        "--arms",
        help="Comma-separated world models: none (ReAct on the proposer), oracle (the environment's ledger), a model "
        "spec (prompted, e.g. local/smollm2-135m), trained:ADAPTER_DIR (a `harness cdwm train` adapter), "
        "value:ADAPTER_DIR / generative:ADAPTER_DIR (`harness cdwm train --target value / generative`).",
    ),
    world: str = typer.Option("minigrid", "--world", help="A `harness cdwm collect` world: minigrid, household or web."),
    task_types: str = typer.Option("", "--task-types", help="Comma-separated task types of the world (default: "
                                   "lavagap on minigrid; household, web: its task types less the held-out cool, mail)."),
    episodes: int = typer.Option(6, "--episodes", min=1),
    seed: int = typer.Option(0, "--seed"),
    off_plan: float = typer.Option(0.2, "--off-plan", min=0.0, max=1.0, help="The expert's off-plan proposal rate."),
    irreversible: float = typer.Option(
        0.3, "--irreversible", min=0.0, max=1.0, help="The expert's rate of turning towards an irreversible action."
    ),
    candidates: int = typer.Option(3, "--candidates", min=1),
    max_steps: int = typer.Option(30, "--max-steps", min=1),
    confidence_threshold: float = typer.Option(0.5, "--confidence-threshold", min=0.0, max=1.0),
    horizon: int = typer.Option(2, "--horizon", min=1, max=2),
    json_out: Path = typer.Option(None, "--json", help="Also write the rows and episodes as JSON here."),
) -> None:
    """The CDWM planner with a noisy-expert proposer: irreversible failures and success per world model."""
    import json as _json

    from environments.cdwm.planner_check import CheckConfig, default_task_types, run_check
    from environments.cdwm.planner_worlds import refuse_world

    try:
        refuse_world(world)
    except HarnessError as exc:
        _fail(str(exc))
    cfg = CheckConfig(
        world=world,
        task_types=tuple(t.strip() for t in task_types.split(",") if t.strip()) or default_task_types(world),
        episodes=episodes,
        seed=seed,
        off_plan=off_plan,
        irreversible=irreversible,
        candidates=candidates,
        max_steps=max_steps,
        confidence_threshold=confidence_threshold,
        horizon=horizon,
    )
    try:
        results = run_check(cfg, [a.strip() for a in arms.split(",") if a.strip()])
    except HarnessError as exc:
        _fail(str(exc))
    head = (
        "arm",
        "episodes",
        "success_rate",
        "irreversible_failure_rate",
        "proposed_irreversible",
        "taken_irreversible",
        "steps",
        "wm_calls",
        "abstained",
        "proposer_tokens",
        "world_model_tokens",
        "seconds",
    )
    out.print("| " + " | ".join(head) + " |\n|" + "---|" * len(head), highlight=False)
    for r in results:
        row = r.row()
        out.print(
            "| " + " | ".join(f"{row[k]:.3f}" if isinstance(row[k], float) else str(row[k]) for k in head) + " |",
            highlight=False,
        )
    if json_out:
        json_out.write_text(
            _json.dumps(
                {"config": cfg.__dict__, "arms": [{**r.row(), "episodes_detail": r.per_episode} for r in results]},
                indent=1,
                default=str,
            )
        )


@cdwm_app.command("claim-check")
def claim_check_cmd(
    claim_id: str = typer.Argument(..., help="cdwm.success, cdwm.irreversible, cdwm.tokens or cdwm.generalisation"),
    run_dir: Path = RUN_DIR,
    trained: str = typer.Option("", "--trained", help="ADAPTER_DIR of the trained delta world model (arm trained)."),
    value: str = typer.Option("", "--value", help="ADAPTER_DIR of `cdwm train --target value` (arm value)."),
    generative: str = typer.Option("", "--generative", help="ADAPTER_DIR of `cdwm train --target generative` "
                                   "(arm generative)."),
    prompted_model: str = typer.Option("local/smollm2-135m", "--prompted-model", help="The prompted arm's model."),
    worlds: str = typer.Option("minigrid,household,web", "--worlds", help="The registered worlds; another list is "
                               "an exploratory check."),
    seeds: int = typer.Option(0, "--seeds", min=0, help="One look of this many episodes instead of the registered "
                              "seed plan: exploratory, its verdict is not the registered one."),
    progress: bool = typer.Option(False, "--progress"),
) -> None:
    """A CDWM claim's check: every arm one run of `cdwm-planner` in RUN_DIR (resumed after a kill, a
    finished arm reused), then the verdict from their records, printed and saved under RUN_DIR/claims/."""
    from environments.cdwm.claim_check import run_claim
    from harness.claims import SeedPlan, save_verdict
    from harness.claims.registry import find_claim
    from harness.cli.kit import print_verdict
    from harness.executors import make_executor

    try:
        family, claim = find_claim(claim_id if "." in claim_id else f"cdwm.{claim_id}")
        exploratory = seeds > 0 or worlds != "minigrid,household,web"
        if seeds:
            # as `harness.claims.runs.claim_of_runs` reads an exploratory check back from its runs
            claim = claim.model_copy(update={"plan": SeedPlan(looks=(seeds,), level=claim.plan.level)})
        if exploratory:
            out.print(f"[yellow]{claim.id}: an exploratory check (not the registered seed plan or worlds)[/]")
        options = {"worlds": worlds, "trained_adapter": trained, "value_adapter": value,
                   "generative_adapter": generative, "prompted_model": prompted_model}
        verdict = run_claim(claim, run_dir, options, lambda: make_executor("asyncio"),
                            registered=None if exploratory else family.registered(claim), progress=progress,
                            log=lambda line: out.print(line, highlight=False))
    except HarnessError as exc:
        _fail(str(exc))
    print_verdict(verdict, True)
    out.print(f"saved: {save_verdict(run_dir, verdict)}", highlight=False)


@cdwm_app.command("verdict")
def verdict_cmd(
    claim_id: str = typer.Argument(..., help="The claim the runs were started for (cdwm.success, ...)."),
    run_ids: list[str] = typer.Argument(..., help="The check's runs, one per arm and look."),
    run_dir: Path = RUN_DIR,
) -> None:
    """A CDWM claim's verdict from its check's runs' records alone (no episode is played)."""
    from environments.cdwm.claim_check import verdict_from_runs
    from harness.claims.registry import find_claim
    from harness.cli.kit import print_verdict

    try:
        family, claim = find_claim(claim_id if "." in claim_id else f"cdwm.{claim_id}")
        verdict = verdict_from_runs(claim, run_dir, run_ids, family.registered)
    except HarnessError as exc:
        _fail(str(exc))
    print_verdict(verdict, True)
