"""The adapter-serving benchmark on vLLM (`harness bench adapters --engine vllm`), in vLLM's environment.

Same workload, rows and files as the local engine (`kernels/preft/bench.py`): for each adapter
count A and mode, `requests` offline requests of random prompt ids and exactly `gen_len` output
tokens (`ignore_eos`), request i on adapter i % A. The adapters are the same seeded random LoRAs
(`random_lora(config, rank, seed=i)`), written once in peft's format under the user cache dir.

One AsyncLLM serves all modes for a given slot count (`max_loras` = min(A, 8) unless set), with the
PreFT plugin's flag on: `base` requests carry no adapter, `preft` ones ask for prefill-only and
`all-token` ones for stock all-token LoRA (`SamplingParams.extra_args`), so the three modes share
one engine, one KV cache and one set of warm kernels. Prefix caching is off (the local engine has
none, and the modes reuse the prompts). The adapter CPU cache (`max_cpu_loras`) holds min(distinct
used, 64) adapters as in the local bench; adapters beyond it are re-read from disk during the run.

Columns the local engine counts and vLLM does not expose (slot loads, evictions, waits, pool bytes)
are left empty; `steps` and `mean_batch_seqs`-like counts come from the plugin's worker counters.
Memory: peak RSS summed over vLLM's engine processes, sampled every 20 ms.
"""

from __future__ import annotations

import asyncio
import gc
import hashlib
import json
import os
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from preft.bench_shared import BenchConfig, BenchRow, host_cache_for, percentiles, slots_for

MODE_ARGS = {"base": None, "preft": {"preft_mode": "prefill-only"}, "all-token": {"preft_mode": "all-token"}}


class TreeRSS:
    """Peak RSS of this process and its children (vLLM's engine core and workers), sampled."""

    def __init__(self, interval: float = 0.02) -> None:
        import psutil

        self._root = psutil.Process()
        self.interval = interval
        self.before = self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def rss(self) -> int:
        import psutil

        total = 0
        for proc in [self._root, *self._root.children(recursive=True)]:
            try:
                total += proc.memory_info().rss
            except psutil.Error:
                pass
        return total

    def _sample(self) -> None:
        while not self._stop.wait(self.interval):
            self.peak = max(self.peak, self.rss())

    def __enter__(self) -> "TreeRSS":
        self.before = self.peak = self.rss()
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self.rss())


def adapter_dirs(model_path: str, count: int, rank: int, say: Callable[[str], None]) -> list[Path]:
    """`count` seeded random LoRA adapters in peft's format, written once per (model, rank, seed), in
    the model's dtype when that is 16-bit (512 rank-16 adapters of a 1B model: ~11 GB in bf16)."""
    import platformdirs
    import torch
    from transformers import AutoConfig

    from preft.adapters import random_lora, save_lora_peft_format

    config = AutoConfig.from_pretrained(model_path)
    dtype = getattr(config, "dtype", None) or getattr(config, "torch_dtype", None)
    dtype = dtype if dtype in (torch.float16, torch.bfloat16, "float16", "bfloat16") else torch.float32
    dtype = getattr(torch, dtype) if isinstance(dtype, str) else dtype
    key = hashlib.sha256(json.dumps(config.to_dict(), sort_keys=True, default=str).encode()).hexdigest()[:12]
    root = Path(platformdirs.user_cache_dir("harness")) / "bench_adapters" / key / f"r{rank}"
    dirs = [root / f"a{i}" for i in range(count)]
    missing = [i for i, d in enumerate(dirs) if not (d / "adapter_config.json").is_file()]
    if missing:
        say(f"writing {len(missing)} random rank-{rank} LoRA adapters ({dtype}) under {root}")
    for i in missing:
        adapter = random_lora(config, rank, seed=i, name=f"a{i}")
        adapter.modules = {k: (A.to(dtype), B.to(dtype), s) for k, (A, B, s) in adapter.modules.items()}
        save_lora_peft_format(adapter, dirs[i], base_model=model_path)
    return dirs


def start_engine(model_path: str, *, rank: int, max_loras: int, max_cpu_loras: int, max_num_seqs: int,
                 max_model_len: int) -> Any:
    """CPU: fp32 and eager, as the tests. GPU: the model's dtype, CUDA graphs on (the plugin's LoRA
    map is built outside the graphs; decode-only steps dispatch to vLLM's no-LoRA graphs)."""
    from vllm.platforms import current_platform
    from vllm.v1.engine.async_llm import AsyncLLM

    from preft.vllm_provider import engine_args, preft_engine_kwargs

    kwargs = preft_engine_kwargs(max_rank=rank, max_loras=max_loras)
    if not current_platform.is_cpu():
        kwargs.update(dtype="auto", enforce_eager=False)
    # prompts are token ids and outputs are counted, never read: no tokenizer needed (a random model has none)
    return AsyncLLM.from_engine_args(engine_args(model_path, max_model_len=max_model_len, max_num_seqs=max_num_seqs,
                                                 max_cpu_loras=max(max_cpu_loras, max_loras),
                                                 enable_prefix_caching=False, skip_tokenizer_init=True, **kwargs))


@dataclass(frozen=True)
class Timing:
    """One request's clock (perf_counter seconds) and its output token count."""

    arrival: float
    first: float | None  # its first output token; None: it wrote none
    finished: float
    tokens: int


async def _one(engine: Any, prompt: list[int], gen_len: int, mode: str, lora: Any) -> Timing:
    from vllm import SamplingParams

    params = SamplingParams(temperature=0.0, max_tokens=gen_len, ignore_eos=True, detokenize=False,
                            extra_args=MODE_ARGS[mode])
    arrival = time.perf_counter()
    first = None
    tokens = 0
    async for out in engine.generate({"prompt_token_ids": prompt}, params, request_id=uuid.uuid4().hex,
                                     lora_request=lora if mode != "base" else None):
        tokens = len(out.outputs[0].token_ids)
        if first is None and tokens:
            first = time.perf_counter()
    return Timing(arrival, first, time.perf_counter(), tokens)


async def _all(coroutines: list[Any]) -> list[Any]:
    return await asyncio.gather(*coroutines)  # gathered inside the running loop, not the default one


async def _stats(engine: Any, reset: bool = False) -> dict[str, int]:
    first: dict[str, int] = (await engine.collective_rpc("preft_stats", args=(reset,)))[0]  # one worker here
    return first


def _shutdown(engines: dict[tuple[int, int], Any], loop: asyncio.AbstractEventLoop) -> None:
    for engine in engines.values():
        engine.shutdown()
    engines.clear()
    # shutdown() cancels each engine's output-handler task on this loop: let it finish before the
    # loop closes, and finalise now, not at interpreter exit when vLLM's globals are gone
    loop.run_until_complete(asyncio.sleep(0.05))
    gc.collect()


def vllm_rows(*, adapters: list[int], modes: list[str], rank: int, prompts: list[list[int]], warm_prompt: list[int],
              gen_len: int, max_loras: int | None, max_num_seqs: int, max_cpu_loras: int | None,
              say: Callable[[str], None], model: Any, config: BenchConfig) -> tuple[list[BenchRow], dict[str, str]]:
    from vllm.lora.request import LoRARequest

    from preft.vllm_provider import resolve_model

    model_path = str(model) if model is not None else resolve_model("smollm2-135m")
    config["model"] = model_path
    requests, prompt_len = len(prompts), len(prompts[0])
    dirs = adapter_dirs(model_path, max(adapters), rank, say) if set(modes) - {"base"} else []
    loras = [LoRARequest(f"a{i}", i + 1, str(d)) for i, d in enumerate(dirs)]
    rows: list[BenchRow] = []
    engines: dict[tuple[int, int], Any] = {}
    engine: Any = None
    loop = asyncio.new_event_loop()
    try:
        for count in adapters:
            used = [i % count for i in range(requests)]
            distinct = len(dict.fromkeys(used))
            slots = slots_for(count, max_loras)
            cpu = host_cache_for(distinct, max_cpu_loras)
            setup_start = time.perf_counter()
            if (slots, cpu) not in engines:
                engine = None  # no reference may outlive the shutdown (vLLM's finaliser would run at exit)
                _shutdown(engines, loop)  # one engine at a time: each sizes its KV cache up front
                say(f"A={count}: starting vLLM (max_loras={slots}, max_cpu_loras={cpu})")
                engines[slots, cpu] = start_engine(model_path, rank=rank, max_loras=slots, max_cpu_loras=cpu,
                                                   max_num_seqs=max_num_seqs, max_model_len=prompt_len + gen_len + 8)
            engine = engines[slots, cpu]
            engine_s = time.perf_counter() - setup_start
            for mode in modes:
                setup_start = time.perf_counter()
                # warm-up: one request, and the CPU cache filled with the adapters the run uses
                # (first-use order, up to its capacity), as the local bench prewarms its host cache
                warm = [_one(engine, warm_prompt, 2, mode, loras[0] if loras else None)]
                if mode != "base":
                    warm += [_one(engine, warm_prompt, 1, mode, loras[i]) for i in list(dict.fromkeys(used))[:cpu]]
                loop.run_until_complete(_all(warm))
                setup_s = time.perf_counter() - setup_start + engine_s
                engine_s = 0.0
                loop.run_until_complete(_stats(engine, reset=True))
                say(f"A={count} mode={mode}: running {requests} requests")
                with TreeRSS() as mem:
                    start = time.perf_counter()
                    done: list[Timing] = loop.run_until_complete(_all([
                        _one(engine, p, gen_len, mode, loras[used[i]] if loras else None)
                        for i, p in enumerate(prompts)]))
                    total = time.perf_counter() - start
                stats = loop.run_until_complete(_stats(engine))
                n_out = [d.tokens for d in done]
                ttft = [d.first - d.arrival for d in done if d.first is not None]
                tpot = [(d.finished - d.first) / (d.tokens - 1) for d in done if d.first is not None and d.tokens > 1]
                row: BenchRow = {"adapters": count, "mode": mode, "max_loras": slots, "max_num_seqs": max_num_seqs,
                                 "requests": requests, "prompt_len": prompt_len, "gen_len": gen_len,
                                 "distinct_adapters_used": 0 if mode == "base" else distinct,
                                 "output_tokens": sum(n_out), "total_s": round(total, 4),
                                 "output_tok_s": round(sum(n_out) / total, 3), "requests_s": round(requests / total, 4),
                                 **percentiles(ttft, "ttft"), **percentiles(tpot, "tpot"),
                                 "steps": stats["steps"], "engine_slot_waits": None, "max_running": None,
                                 "prefill_tokens": requests * prompt_len,
                                 "decode_tokens": stats["tokens"] - requests * prompt_len,
                                 "mean_batch_seqs": None, "slot_hits": None, "slot_loads": None, "slot_evictions": None,
                                 "slot_waits": None, "host_misses": None, "host_materialize_s": None,
                                 "adapter_tokens": stats["adapter_tokens"],
                                 "steps_without_adapter": stats["steps_without_adapter"],
                                 "max_active_adapters": stats["max_active_adapters"],
                                 "rss_before_mb": round(mem.before / 2**20, 1), "peak_rss_mb": round(mem.peak / 2**20, 1),
                                 "peak_rss_delta_mb": round((mem.peak - mem.before) / 2**20, 1),
                                 "kv_pool_bytes": None, "lora_store_bytes": None, "host_cache_bytes": None,
                                 "setup_s": round(setup_s, 3), "all_requests_full_length": all(n == gen_len for n in n_out)}
                row["load_avg_1m"] = round(os.getloadavg()[0], 2)
                rows.append(row)
                say(f"A={count} mode={mode}: {row['output_tok_s']:.1f} tok/s, {total:.2f} s, steps {row['steps']}, "
                    f"adapter tokens {row['adapter_tokens']}, max active adapters {row['max_active_adapters']}")
    finally:
        engine = None
        _shutdown(engines, loop)
        loop.close()
    memory = {"peak_rss": "RSS of this process and vLLM's engine processes, summed, sampled every 20 ms",
              "note": "vLLM sizes its KV cache up front (VLLM_CPU_KVCACHE_SPACE on CPU, gpu_memory_utilization on "
                      "GPU); slot, pool and host-cache byte counts are not exposed and left empty"}
    return rows, memory
