"""`harness bench`: an extensible group -- the core's own benchmarks here, more from any package
through the entry-point group `harness.bench` (a typer command function each)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from harness.cli.kit import err, fail, out

bench_app = typer.Typer(no_args_is_help=True, help="Benchmarks of the harness and of its parts.")


@bench_app.command("runner")
def bench_runner(
    samples: int = typer.Option(2000, "--samples", min=1),
    concurrency: int = typer.Option(64, "--concurrency", min=1),
    executor: str = typer.Option("asyncio", "--executor",
                                 help="asyncio: runner vs the raw client; ray: the Ray executor vs the asyncio one."),
    ray_address: Optional[str] = typer.Option(None, "--ray-address", help="With --executor ray: a cluster's HOST:PORT."),
    model: str = typer.Option("loopback", "--model",
                              help="loopback: the echo server, runner vs raw client; instant: the in-process instant "
                                   "model -- samples/s, peak RSS, resume-scan and summary time of a run of --samples."),
    run_dir: Optional[Path] = typer.Option(None, "--run-dir",
                                           help="--model instant: where the (temporary) run goes (default: the system's temp)."),
) -> None:
    """The harness's own overhead: full runner vs the raw openai client on an instant server
    (or, with --executor ray, Ray tasks vs the asyncio executor; with --model instant, what
    records cost at scale)."""
    from harness.bench import bench_runner as run

    if model not in ("loopback", "instant"):
        fail(f"--model {model!r}: use loopback (the echo server) or instant (the in-process instant model)")
    if model == "instant":
        from harness.bench import bench_instant

        if executor != "asyncio" or ray_address is not None:
            fail("--model instant measures the records with the asyncio executor: drop --executor/--ray-address")
        if run_dir is not None and not run_dir.is_dir():
            fail(f"--run-dir {run_dir}: not a folder; create it or leave the flag out")
        bench_instant(samples, concurrency, out, run_dir)
        return
    if executor == "ray":
        from harness.bench import bench_ray
        from harness.errors import HarnessError
        from harness.executors import make_executor

        try:
            make_executor("ray", ray_address=ray_address)  # the address answers; Ray is installed
        except HarnessError as exc:
            fail(str(exc))
        bench_ray(samples, concurrency, out, ray_address)
        return
    if executor != "asyncio" or ray_address is not None:
        fail(f"--executor {executor!r}{' --ray-address' if ray_address else ''}: use --executor asyncio or ray "
             "(--ray-address goes with ray)")
    run(samples, concurrency, out)


def _int_list(text: str, flag: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        fail(f"{flag} {text!r}: write comma-separated integers, e.g. 1,64,512")
    if not values or min(values) < 1:
        fail(f"{flag} {text!r}: give at least one positive integer")
    return values


@bench_app.command("adapters")
def bench_adapters(
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


