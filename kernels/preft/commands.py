"""`harness preft ...`: PreFT commands that are not benchmarks (`harness bench adapters` is)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from harness.cli.kit import RUN_DIR, check_claims, fail, print_verdict
from harness.errors import HarnessError

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
    seeds: Optional[int] = typer.Option(None, "--seeds", min=1, max=500, help="Default: the registered seed plan, look "
                                        "by look (4, 11, 20, 40 seeds), stopping at the first look that decides. "
                                        "N: an exploratory one-look plan of N seeds (its hash is not registered)."),
    run_dir: Path = RUN_DIR,
    executor: str = typer.Option("asyncio", "--executor", help="asyncio or ray."),
    ray_address: Optional[str] = typer.Option(None, "--ray-address", help="With --executor ray: HOST:PORT."),
    details: bool = typer.Option(False, "--details", help="Also print every arm's scores side by side."),
    threads: Optional[int] = typer.Option(None, "--threads", min=1,
                                          help="torch CPU threads in this process (asyncio executor)."),
    kept: Optional[Path] = typer.Option(None, "--kept", help="Train nothing: recompute the verdict of RL runs kept "
                                        "before the check ran through the runner (docs/data/preft-rl/rl_check.json)."),
) -> None:
    """GRPO-style RL, prefill-only vs all-token LoRA at ranks 2 and 8: the paper's RL parity claim
    (`preft.rl_parity`, kernels/preft/rl_check.py, registered in criteria_log.toml). The same as
    `harness claims check preft.rl_parity`: each arm at each look is a run of the suite `preft.rl`
    (one RL training per cell), resumed or reused as any run; `harness claims verdict RUN...`
    recomputes the verdict. The training settings are the criterion's protocol (the suite's
    defaults): other settings are runs of `harness eval preft.rl --suite-option ...`, not this check."""
    if kept is not None:
        from preft.rl_check import kept_verdict

        try:
            verdict = kept_verdict(kept)
        except HarnessError as exc:
            fail(str(exc), code=1)
        print_verdict(verdict, details)
        return
    if threads:
        import torch

        torch.set_num_threads(threads)
    check_claims(["preft.rl_parity"], run_dir, seeds=seeds, executor=executor, ray_address=ray_address, details=details)
