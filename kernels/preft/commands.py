"""PreFT's commands on the `harness` CLI (entry points in pyproject.toml): the group `harness preft
...` (training, the RL check), the top-level `harness generate` (`harness.commands`: a command
function) and the benchmark `harness bench adapters` (`harness.bench`)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from harness.cli.kit import RUN_DIR, check_claims, err, fail, out, print_verdict
from harness.errors import HarnessError
from harness.spec import DEFAULT_MODEL

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


# -- `harness generate` (entry point `generate` under `harness.commands`) --------------------------

def generate_cmd(
    model: str = typer.Option(DEFAULT_MODEL, "--model", help="Model spec, provider/name."),
    prompt: str = typer.Option(..., "--prompt", help="Raw text (tokenised as is) unless --chat; raw text needs a "
                               "model with a raw-text interface (local/, vllm/, openai/ completions)."),
    chat: bool = typer.Option(False, "--chat", help="Wrap the prompt as one user message in the chat template."),
    adapter: Optional[Path] = typer.Option(None, "--adapter", help="peft LoRA folder or ReFT folder (local model)."),
    adapter_mode: str = typer.Option("preft", "--adapter-mode", help="preft (prompt only) or all-token."),
    max_tokens: int = typer.Option(64, "--max-tokens", min=1),
    temperature: float = typer.Option(0.0, "--temperature", min=0.0),
    seed: int = typer.Option(0, "--seed"),
    base_url: Optional[str] = typer.Option(None, "--base-url", help="Endpoint for openai/ and litellm/ models."),
    json_schema: Optional[Path] = typer.Option(None, "--json-schema", help="File with a JSON schema the reply must match."),
    choice: Optional[str] = typer.Option(None, "--choice", help="The reply is exactly one of these, e.g. yes,no,maybe."),
    regex: Optional[str] = typer.Option(None, "--regex", help="The reply matches this regular expression in full."),
    as_json: bool = typer.Option(False, "--json", help="Print text, token ids and usage as one JSON object."),
) -> None:
    """One generation, for quick checks and scripts (greedy unless --temperature). At most one of
    --json-schema, --choice, --regex constrains the reply (the embedded model enforces it per token)."""
    import json

    from preft.generate import generate_once

    try:
        result = generate_once(model=model, prompt=prompt, chat=chat, adapter=adapter, adapter_mode=adapter_mode,
                               max_tokens=max_tokens, temperature=temperature, seed=seed, base_url=base_url,
                               json_schema=json_schema, choice=choice, regex=regex)
    except HarnessError as exc:
        fail(str(exc))
    if as_json:
        print(json.dumps(result, ensure_ascii=False))
    else:
        print(result["text"])


# -- `harness bench adapters` (entry point `adapters` under `harness.bench`) ------------------------

def _int_list(text: str, flag: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        fail(f"{flag} {text!r}: write comma-separated integers, e.g. 1,64,512")
    if not values or min(values) < 1:
        fail(f"{flag} {text!r}: give at least one positive integer")
    return values


def bench_adapters_cmd(
    engine: str = typer.Option("local", "--engine", help="local (the PreFT engine) or vllm (vLLM with the PreFT plugin; run from .venv-vllm)."),
    adapters: str = typer.Option("1,8,64,512", "--adapters", help="Adapter counts, comma-separated."),
    modes: str = typer.Option("base,preft,all-token", "--modes", help="Any of base, preft, all-token."),
    rank: int = typer.Option(16, "--rank", min=1),
    requests: int = typer.Option(64, "--requests", min=1),
    prompt_len: int = typer.Option(128, "--prompt-len", min=1),
    gen_len: int = typer.Option(32, "--gen-len", min=1),
    max_loras: Optional[int] = typer.Option(None, "--max-loras", min=1, help="Resident adapter slots (default min(A, 8))."),
    prefill_loras: Optional[int] = typer.Option(
        None, "--prefill-loras", min=1,
        help="local engine, CPU: distinct adapters one prefill step may use (alias slots; default max_loras)."),
    max_num_seqs: int = typer.Option(64, "--max-num-seqs", min=1),
    popularity: str = typer.Option("uniform", "--popularity", help="uniform or zipf (adapter k has weight 1/(k+1)^s)."),
    zipf_s: float = typer.Option(1.1, "--zipf-s"),
    arrival: str = typer.Option("t0", "--arrival", help="t0 (all at once) or poisson (needs --rate)."),
    rate: Optional[float] = typer.Option(None, "--rate", help="--arrival poisson: requests per second."),
    max_cpu_loras: Optional[int] = typer.Option(None, "--max-cpu-loras", min=1,
                                                help="Host adapter cache (default min(distinct used, 64))."),
    device: str = typer.Option("cpu", "--device", help="local engine: cpu or cuda (model, KV pool, adapter slots)."),
    dtype: Optional[str] = typer.Option(None, "--dtype", help="float32 (CPU default) or bfloat16 (CUDA default)."),
    model_shape: Optional[str] = typer.Option(None, "--model-shape",
                                              help="A random-weight Llama: tiny, smollm2-135m, llama-3.2-1b, llama-3.1-8b."),
    lora_backend: str = typer.Option("auto", "--lora-backend", help="auto, segmented or triton."),
    threads: Optional[int] = typer.Option(None, "--threads", min=1, help="torch threads for the run."),
    seed: int = typer.Option(0, "--seed"),
    out_dir: Path = typer.Option(Path("bench/adapters"), "--out", help="Folder for JSON, CSV and plot."),
    vllm_model: Optional[str] = typer.Option(None, "--vllm-model",
                                             help="--engine vllm: base model path or hub id (default: the embedded model)."),
) -> None:
    """Adapter serving: tokens/s, requests/s, TTFT/TPOT per mode and adapter count, base as ceiling.
    At least 2A requests per adapter count A, so every adapter is used."""
    from preft.bench import format_table, run_adapter_bench

    mode_list = [m.strip() for m in modes.split(",") if m.strip()]
    if vllm_model and engine != "vllm":
        fail("--vllm-model goes with --engine vllm")
    try:
        result = run_adapter_bench(engine=engine, adapters=_int_list(adapters, "--adapters"), modes=mode_list,
                                   rank=rank, requests=requests, prompt_len=prompt_len, gen_len=gen_len,
                                   max_loras=max_loras, max_num_seqs=max_num_seqs, seed=seed, out_dir=out_dir,
                                   prefill_loras=prefill_loras, threads=threads, progress=lambda msg: err.print(msg, highlight=False),
                                   model=vllm_model if engine == "vllm" else None, popularity=popularity,
                                   zipf_s=zipf_s, arrival=arrival, rate=rate, max_cpu_loras=max_cpu_loras,
                                   device=device, dtype=dtype, model_shape=model_shape, lora_backend=lora_backend)
    except ValueError as exc:
        fail(str(exc))
    out.print(format_table(result), highlight=False)
    out.print(f"written: {out_dir}/adapters_bench.json, .csv, .png", highlight=False)
