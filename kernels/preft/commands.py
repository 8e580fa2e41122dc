"""`harness preft ...`: PreFT commands that are not benchmarks (`harness bench adapters` is)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

preft_app = typer.Typer(no_args_is_help=True, help="PreFT: prefill-only adapter training.")


def _split(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


@preft_app.command("train")
def train_cmd(
    out: Path = typer.Option(Path("preft-train"), "--out", help="Folder for results.json, loss curves and adapters."),
    rank: int = typer.Option(4, "--rank", min=1, help="Base rank r: trains ranks r and 4r unless --ranks."),
    ranks: Optional[str] = typer.Option(None, "--ranks", help="Comma-separated ranks, e.g. 4,16."),
    kinds: str = typer.Option("lora,loreft", "--kinds", help="Comma-separated: lora, loreft, direft."),
    modes: str = typer.Option("preft,all-token", "--modes"),
    steps: int = typer.Option(60, "--steps", min=1),
    batch: int = typer.Option(8, "--batch", min=1),
    lr: Optional[float] = typer.Option(None, "--lr", min=0.0),
    seed: int = typer.Option(0, "--seed"),
    threads: Optional[int] = typer.Option(None, "--threads", min=1,
                                          help="torch CPU threads (1 is faster than 2 when other processes share the cores)."),
) -> None:
    """SFT on the built-in code-word task, prefill-only vs all-token, at each rank; loss curves and adapters."""
    import torch

    from preft.train import compare, format_table

    if threads:
        torch.set_num_threads(threads)
    try:
        rank_list = [int(x) for x in _split(ranks)] if ranks else [rank, 4 * rank]
    except ValueError:
        typer.echo(f"error: --ranks {ranks!r}: write comma-separated integers, e.g. 4,16", err=True)
        raise typer.Exit(2) from None
    extra = {"lr": lr} if lr is not None else {}
    try:
        rows = compare(ranks=rank_list, kinds=_split(kinds), modes=_split(modes), steps=steps, seed=seed, out=out,
                       batch=batch, **extra)
    except ValueError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    typer.echo(format_table(rows))
    typer.echo(f"wrote {out / 'results.json'}, loss_curves.csv, loss_curves.png, adapters/")




check_app = typer.Typer(no_args_is_help=True, help="Check the PreFT paper's claims.")
preft_app.add_typer(check_app, name="check")


@check_app.command("rl")
def check_rl_cmd(
    out: Path = typer.Option(Path("preft-rl"), "--out", help="Folder for rl_check.json, rl_curves.csv and the kept runs."),
    run_dir: Path = typer.Option(Path("runs"), "--run-dir", help="The verdict is saved as RUN_DIR/claims/preft.rl_parity.json "
                                 "(`harness claims table` reads it)."),
    rank: int = typer.Option(2, "--rank", min=1, help="Base rank r: LoRA at r and 4r (the registered criterion: r = 2)."),
    steps: int = typer.Option(30, "--steps", min=1),
    seeds: Optional[int] = typer.Option(None, "--seeds", min=1, help="Default: the registered seed plan, look by look "
                                        "(4, 11, 20, 40 seeds), stopping at the first look that decides. A planned look "
                                        "N: the looks up to N. Any other N: an exploratory one-look plan (not registered)."),
    lr: float = typer.Option(1e-3, "--lr", min=0.0, help="AdamW learning rate of the LoRA weights."),
    prompts: int = typer.Option(4, "--prompts", min=1, help="Prompts per step."),
    group: int = typer.Option(6, "--group", min=2, help="Completions sampled per prompt (GRPO group)."),
    std_norm: bool = typer.Option(False, "--std-norm", help="Divide advantages by the group std."),
    threads: Optional[int] = typer.Option(None, "--threads", min=1),
) -> None:
    """GRPO-style RL, prefill-only vs all-token LoRA at ranks r and 4r: the paper's RL parity claim
    (`preft.rl_parity`, criterion in kernels/preft/rl_check.py, registered in criteria_log.toml)."""
    import torch

    from preft.rl_check import criterion_text, plan_for, rl_claim, run_check
    from preft.train import format_table

    if threads:
        torch.set_num_threads(threads)
    claim, exploratory = plan_for(rl_claim([rank, 4 * rank]), seeds) if seeds else (rl_claim([rank, 4 * rank]), "")
    typer.echo(f"claim {claim.id}: {claim.sentence}\n{exploratory}criterion {claim.criterion_hash()}: {criterion_text(claim)}")
    payload = run_check([rank, 4 * rank], seeds, out, run_dir, log=typer.echo, steps=steps, prompts=prompts,
                        group=group, std_norm=std_norm, lr=lr)
    typer.echo(format_table(payload["rows"]))
    typer.echo(f"verdict: {payload['verdict']} (criterion {payload['criterion_hash']})\n"
               f"wrote {out / 'rl_check.json'}, {out / 'rl_curves.csv'}; verdict saved: {payload['claim_verdict']}")
