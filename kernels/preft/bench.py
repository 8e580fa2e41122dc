"""Multi-adapter serving benchmark: throughput and latency of `base`, `preft` and `all-token` as the
number of distinct LoRA adapters grows.

For every adapter count A and mode, a fresh `Engine` serves max(`requests`, 2A) requests of
`prompt_len` random token ids and exactly `gen_len` generated tokens each (no stop ids). Which
adapter each request uses and when it arrives come from `workload.draw_workload`: every one of the
A adapters is used, the rest drawn uniformly or by a Zipf law; arrivals all at t=0 or a Poisson
process (mode `base` serves the same prompts and arrivals without adapters). A warm-up batch
(min(max_num_seqs, requests) copies of one prompt) runs first and is not counted; every counter
reported is the difference over the timed run, including the OS's (`ProcessUsage`: page faults,
and involuntary context switches, which say how often a neighbour on a shared machine took the CPU).

Adapter memory. A rank-16 LoRA on all seven projections of the 30-layer base model is ~20 MB fp32,
so 512 materialised adapters would take ~10 GB. The adapters here are `LazyLora`s: each keeps only
its seed; its weights are `random_lora(config, rank, seed=i, name=f"a{i}")`, made on demand.
- Registration reads only shapes (like reading a safetensors header): while `HostAdapters.registering()`
  is active, an adapter presents meta tensors, so the store's shape checks run without weights.
- A bounded host LRU cache (`max_cpu_loras` adapters, the role of vLLM's CPU LoRA cache) holds
  materialised weights. Before timing it is filled with the adapters the requests use (first use
  order, up to its capacity); a miss during the timed run regenerates the adapter from its seed
  (standing in for a disk read) and is counted and timed (`host_misses`, `host_materialize_s`).
- Slot loads are real: on a GPU `LoraStore` copies the weights into its `max_loras` resident slots;
  on the CPU a slot refers to the host tensors (alias slots, see `store.py`), so a load costs a
  host-cache lookup (or a miss) but no copy.
Host memory is therefore bounded by `max_cpu_loras` x adapter size, whatever A is.

`max_loras` (resident slots) defaults to min(A, 8): a fixed, small number of slots independent of
A, as serving engines configure it (vLLM's `--max-loras` defaults to 1 and is typically set to a
handful; this engine's own default is 8). With A > max_loras, all-token requests hold slots for
their whole generation and queue for them; PreFT requests give theirs back after prefill.
A prefill step may use `max_loras` distinct adapters (`SLOT_RULE`, reported per row as
`prefill_slots` / `slot_kind` / `lora_op`): alias slots could take more at no memory cost
(`prefill_loras`), but on this CPU that was measured slower (docs/preft.md, sessions 14 and 16).
The engine admits an adapter's waiting requests together (one run, one load per adapter), and the
KV pool is sized before the timed run in every mode (`Engine.reserve_kv`, max_num_seqs rows of
prompt + gen positions), as a server sizes its KV cache at start.
"""

from __future__ import annotations

import collections
import contextlib
import csv
import gc
import json
import os
import platform
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import torch

from preft.adapters import LoraAdapter, _projection_dims, random_lora
from preft.bench_shared import (DEFAULT_MAX_CPU_LORAS, DEFAULT_MAX_LORAS_CAP, BenchConfig, BenchResult, BenchRow, Draw,
                                Placement, host_cache_for, number, percentiles, ratios, slots_for, ttft_tpot)
from preft.engine import MODES, Engine, Request
from preft.model import PROJECTIONS
from preft.workload import Workload, draw_workload

# The local engine's rule for adapter slots (`store.prefill_slots`), named in every result.
SLOT_RULE = ("distinct adapters per prefill step (prefill_slots): max_loras; only alias slots (CPU) may be given "
             "more (--prefill-loras, Engine max_prefill_loras); at most max_loras held through decoding (all-token); "
             "an adapter's waiting requests are admitted together")
TOKEN_RANGE = (1000, 40000)  # prompt ids are drawn from here: clear of the special / control tokens
ENGINES = ("local", "vllm")  # vllm: kernels/preft/bench_vllm.py, in vLLM's environment
JSON_NAME, CSV_NAME, PNG_NAME = "adapters_bench.json", "adapters_bench.csv", "adapters_bench.png"

CSV_COLUMNS = [
    "adapters", "mode", "max_loras", "prefill_slots", "slot_kind", "lora_op", "max_num_seqs", "requests", "prompt_len", "gen_len", "distinct_adapters_used",
    "distinct_adapters_touched", "arrival", "popularity",
    "output_tokens", "total_s", "output_tok_s", "requests_s", "cpu_s", "output_tok_cpu_s",
    "ttft_p50_ms", "ttft_p90_ms", "ttft_p99_ms", "tpot_p50_ms", "tpot_p90_ms", "tpot_p99_ms",
    "steps", "engine_slot_waits", "max_running", "max_running_adapters", "prefill_tokens", "decode_tokens", "mean_batch_seqs",
    "slot_hits", "slot_loads", "slot_evictions", "slot_waits",
    "host_misses", "host_materialize_s",
    "rss_before_mb", "peak_rss_mb", "peak_rss_delta_mb", "kv_pool_bytes", "lora_store_bytes", "host_cache_bytes",
    "setup_s", "load_avg_1m", "page_faults_minor", "page_faults_major", "involuntary_switches",
]


# --------------------------------------------------------------------------------------------
# Adapters made on demand, with a bounded host cache
# --------------------------------------------------------------------------------------------

class HostAdapters:
    """The host side of A seeded random adapters: a bounded LRU cache of materialised weights."""

    def __init__(self, config: Any, count: int, rank: int, capacity: int) -> None:
        if capacity < 1:
            raise ValueError("max_cpu_loras must be at least 1")
        self.config, self.rank, self.capacity = config, rank, capacity
        self.cache: collections.OrderedDict[str, dict[tuple[int, str], tuple[torch.Tensor, torch.Tensor, float]]] = collections.OrderedDict()
        self.adapters = [LazyLora(self, i) for i in range(count)]
        self._registering = False
        self.misses = 0
        self.materialize_s = 0.0
        dims = _projection_dims(config)
        self.adapter_bytes = 4 * int(config.num_hidden_layers) * sum(
            rank * (dims[p][0] + dims[p][1]) for p in PROJECTIONS)

    @contextlib.contextmanager
    def registering(self) -> Iterator[None]:
        """Adapters present shape-only (meta) tensors: registration checks shapes, loads nothing."""
        self._registering = True
        try:
            yield
        finally:
            self._registering = False

    def modules(self, adapter: "LazyLora") -> dict[tuple[int, str], tuple[torch.Tensor, torch.Tensor, float]]:
        if self._registering:
            dims = _projection_dims(self.config)
            scale = 2.0  # random_lora's alpha / rank
            return {(layer, p): (torch.empty(dims[p][0], self.rank, device="meta"),
                                 torch.empty(self.rank, dims[p][1], device="meta"), scale)
                    for layer in range(int(self.config.num_hidden_layers)) for p in PROJECTIONS}
        cached = self.cache.get(adapter.name)
        if cached is not None:
            self.cache.move_to_end(adapter.name)
            return cached
        start = time.perf_counter()
        made = random_lora(self.config, self.rank, seed=adapter.seed, name=adapter.name).modules
        self.materialize_s += time.perf_counter() - start
        self.misses += 1
        self.cache[adapter.name] = made
        while len(self.cache) > self.capacity:
            self.cache.popitem(last=False)
        return made

    def prewarm(self, names: list[str]) -> None:
        """Fill the cache with these adapters (first `capacity` of them), then zero the counters."""
        by_name = {a.name: a for a in self.adapters}
        for name in names[: self.capacity]:
            self.modules(by_name[name])
        self.misses, self.materialize_s = 0, 0.0

    def cache_bytes(self) -> int:
        return len(self.cache) * self.adapter_bytes


class LazyLora(LoraAdapter):
    """A `LoraAdapter` whose `modules` are made on demand by its `HostAdapters` (it keeps only a seed)."""

    def __init__(self, host: HostAdapters, seed: int) -> None:  # not the dataclass __init__: modules is derived
        self.host, self.seed = host, seed
        self.name, self.rank = f"a{seed}", host.rank

    @property
    def modules(self) -> dict[tuple[int, str], tuple[torch.Tensor, torch.Tensor, float]]:  # type: ignore[override]
        return self.host.modules(self)

    def __repr__(self) -> str:
        return f"LazyLora(name={self.name!r}, rank={self.rank})"


# --------------------------------------------------------------------------------------------
# Memory and statistics helpers
# --------------------------------------------------------------------------------------------

class PeakRSS:
    """Peak resident set size over a region. Linux: reset the kernel's high-water mark (VmHWM) through
    /proc/self/clear_refs and read it back; elsewhere, sample RSS every 5 ms (psutil or resource)."""

    def __init__(self) -> None:
        self.method = ""
        self.before = self.peak = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @staticmethod
    def rss() -> int:
        try:
            import psutil

            return int(psutil.Process().memory_info().rss)
        except ImportError:
            return _status_kb("VmRSS") * 1024 if os.path.exists("/proc/self/status") else 0

    def __enter__(self) -> "PeakRSS":
        self.before = self.rss()
        try:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")
            self.method = "VmHWM after clear_refs=5 (kernel peak RSS of the process)"
        except OSError:
            self.method = "RSS sampled every 5 ms"
            self.peak = self.before
            self._thread = threading.Thread(target=self._sample, daemon=True)
            self._thread.start()
        return self

    def _sample(self) -> None:
        while not self._stop.wait(0.005):
            self.peak = max(self.peak, self.rss())

    def __exit__(self, *exc: Any) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self.peak = max(self.peak, self.rss())
        else:
            self.peak = _status_kb("VmHWM") * 1024


class ProcessUsage:
    """What the OS counted for this process over a region (`getrusage`; empty where there is none):
    page faults (a fault-heavy run is allocating or touching fresh memory; major ones read from
    disk) and involuntary context switches (how often a neighbour took the CPU: on a shared machine
    a high count says the wall clock carries its load)."""

    FIELDS = {"page_faults_minor": "ru_minflt", "page_faults_major": "ru_majflt",
              "involuntary_switches": "ru_nivcsw"}

    def __init__(self) -> None:
        self.counts: dict[str, int | None] = dict.fromkeys(self.FIELDS)
        self._before: Any = None

    @staticmethod
    def _now() -> Any:
        try:
            import resource
        except ImportError:  # not on this OS: the columns stay empty
            return None
        return resource.getrusage(resource.RUSAGE_SELF)

    def __enter__(self) -> "ProcessUsage":
        self._before = self._now()
        return self

    def __exit__(self, *exc: Any) -> None:
        after = self._now()
        if after is not None and self._before is not None:
            self.counts = {name: getattr(after, f) - getattr(self._before, f) for name, f in self.FIELDS.items()}


def _status_kb(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def _counters(stats: Any) -> dict[str, int]:
    """The integer counters of a stats dataclass (running maxima and per-step histories left out)."""
    return {k: v for k, v in vars(stats).items()
            if isinstance(v, int) and k not in ("max_running", "max_running_adapters")}


def _tensor_bytes(tensors: Any) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def environment() -> dict[str, str | int | None]:
    return {"torch": torch.__version__, "threads": torch.get_num_threads(), "cpu_count": os.cpu_count(),
            "machine": platform.machine(), "processor": platform.processor(), "platform": platform.platform(),
            "python": sys.version.split()[0]}


# --------------------------------------------------------------------------------------------
# The benchmark
# --------------------------------------------------------------------------------------------

def warmup_batch(max_num_seqs: int, requests: int) -> int:
    """Requests in the local engine's untimed warm-up: one full batch (at most the run's own size)."""
    return min(max_num_seqs, requests)


def make_prompts(requests: int, prompt_len: int, seed: int) -> list[list[int]]:
    gen = torch.Generator().manual_seed(seed)
    return [[int(t) for t in row] for row in torch.randint(*TOKEN_RANGE, (requests, prompt_len), generator=gen).tolist()]


def run_adapter_bench(*, engine: str = "local", adapters: Sequence[int] = (1, 8, 64, 512),
                      modes: Sequence[str] = ("base", "preft", "all-token"), rank: int = 16, requests: int = 64,
                      prompt_len: int = 128, gen_len: int = 32, max_loras: int | None = None,
                      max_num_seqs: int = 64, seed: int = 0, out_dir: Path = Path("."),
                      lora_backend: str = "auto", max_cpu_loras: int | None = None,
                      threads: int | None = None, progress: Callable[[str], None] | None = None,
                      model: Any = None, popularity: str = "uniform", zipf_s: float = 1.1, arrival: str = "t0",
                      rate: float | None = None, device: str = "cpu", dtype: str | None = None,
                      model_shape: str | None = None, prefill_loras: int | None = None) -> BenchResult:
    """Run every (adapter count, mode) and write adapters_bench.{json,csv,png} into `out_dir`.

    `max_loras` None: min(A, 8) resident slots. `max_cpu_loras` None: min(distinct adapters used, 64)
    adapters in the host cache. `threads`: torch intra-op threads for the run (restored after); None
    leaves the process setting (on a machine shared with other busy processes, 1 thread can be many
    times faster than 2: OpenMP workers spin-wait for descheduled siblings). `model` defaults to the
    embedded base model; for the local engine it is a loaded HF model, for vLLM a path or hub id.
    `prefill_loras` (local engine): distinct adapters one prefill step may use (`Engine`'s
    `max_prefill_loras`; more than `max_loras` needs alias slots, i.e. the CPU); None: max_loras.
    `model_shape` (local engine): a random-weight Llama of that shape (`random_llama.SHAPES`) instead.
    `device` / `dtype`: where the local engine runs (model, KV pool, slots) and in what precision
    (default float32 on the CPU, bfloat16 on CUDA). Popularity/arrival: `workload.draw_workload`.
    Returns the JSON document (config, environment, rows, ratios)."""
    if engine not in ENGINES:
        raise ValueError(f"--engine {engine!r}: use one of {ENGINES}")
    if engine == "vllm":
        from preft.vllm_provider import INSTALL_HINT, vllm_available

        if not vllm_available():
            raise ValueError(f"--engine vllm: {INSTALL_HINT}")
    adapters, modes = [int(a) for a in adapters], list(modes)
    bad = [m for m in modes if m not in MODES]
    if bad or not modes:
        raise ValueError(f"modes {bad or modes}: use some of {MODES}")
    if not adapters or min(adapters) < 1:
        raise ValueError("adapter counts must be positive integers")
    for label, value in (("rank", rank), ("requests", requests), ("prompt_len", prompt_len),
                         ("gen_len", gen_len), ("max_num_seqs", max_num_seqs)):
        if int(value) < 1:
            raise ValueError(f"{label} must be at least 1, got {value}")
    if max_loras is not None and max_loras < 1:
        raise ValueError("max_loras must be at least 1")
    if threads is not None and threads < 1:
        raise ValueError("threads must be at least 1")
    if prefill_loras is not None and (prefill_loras < 1 or engine != "local"):
        raise ValueError(f"--prefill-loras {prefill_loras}: a positive count, for --engine local only")
    draw_workload(1, 2, popularity=popularity, zipf_s=zipf_s, arrival=arrival, rate=rate)  # checks the options
    if device not in ("cpu", "cuda") and not device.startswith("cuda:"):
        raise ValueError(f"--device {device!r}: use cpu or cuda")
    if device != "cpu" and not torch.cuda.is_available():
        raise ValueError(f"--device {device}: no CUDA device is visible here; use --device cpu")
    draw: Draw = {"popularity": popularity, "zipf_s": zipf_s, "arrival": arrival, "rate": rate}
    place: Placement = {"device": device, "dtype": dtype or ("float32" if device == "cpu" else "bfloat16"),
                        "model_shape": model_shape, "prefill_loras": prefill_loras}
    previous_threads = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        return _run(engine, list(adapters), list(modes), rank, requests, prompt_len, gen_len, max_loras, max_num_seqs, seed,
                    Path(out_dir), lora_backend, max_cpu_loras, progress, model, draw, place)
    finally:
        torch.set_num_threads(previous_threads)


def _run(engine: str, adapters: list[int], modes: list[str], rank: int, requests: int, prompt_len: int,
         gen_len: int, max_loras: int | None, max_num_seqs: int, seed: int, out_dir: Path, lora_backend: str,
         max_cpu_loras: int | None, progress: Callable[[str], None] | None, model: Any, draw: Draw,
         place: Placement) -> BenchResult:
    say = progress or (lambda _msg: None)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    prompts = make_prompts(max(requests, 2 * max(adapters)), prompt_len, seed)
    warm_prompt = make_prompts(1, prompt_len, seed + 1)[0]
    config: BenchConfig = {"engine": engine, "adapters": adapters, "modes": modes, "rank": rank, "requests": requests,
                           "prompt_len": prompt_len, "gen_len": gen_len, "max_loras": max_loras,
                           "max_loras_default": f"min(A, {DEFAULT_MAX_LORAS_CAP})", "max_num_seqs": max_num_seqs,
                           "max_cpu_loras": max_cpu_loras, "max_cpu_loras_default": f"min(distinct used, {DEFAULT_MAX_CPU_LORAS})",
                           "slot_rule": SLOT_RULE if engine == "local" else "vLLM: max_loras per step (prefill-only counted)",
                           "seed": seed, "lora_backend": lora_backend if engine == "local" else "vllm punica",
                           "token_range": list(TOKEN_RANGE), "requests_per_A": "max(requests, 2A)",
                           "popularity": draw["popularity"], "zipf_s": draw["zipf_s"], "arrival": draw["arrival"], "rate": draw["rate"],
                           "device": place["device"], "dtype": place["dtype"], "model_shape": place["model_shape"],
                           "prefill_loras": place["prefill_loras"],
                           "warmup_requests": 1 if engine == "vllm" else warmup_batch(max_num_seqs, requests)}
    if engine == "vllm":
        from preft.bench_vllm import vllm_rows

        rows, memory = vllm_rows(adapters=adapters, modes=modes, rank=rank, prompts=prompts[:requests],
                                 warm_prompt=warm_prompt,
                                 gen_len=gen_len, max_loras=max_loras, max_num_seqs=max_num_seqs,
                                 max_cpu_loras=max_cpu_loras, say=say, model=model, config=config)
    else:
        rows, memory = _local_rows(adapters, modes, rank, prompts, requests, warm_prompt, gen_len, max_loras,
                                   max_num_seqs, lora_backend, max_cpu_loras, say, model, draw, place, seed)
    result: BenchResult = {"config": config, "environment": environment(), "memory": memory, "rows": rows, **ratios(rows)}
    write_outputs(result, out_dir)
    return result


def _base_model(model: Any, place: Placement) -> Any:
    """The local engine's base model on its device in its dtype: a random-weight shape, or the
    given / embedded HF model."""
    if place["model_shape"]:
        from preft.random_llama import build_random_llama

        return build_random_llama(place["model_shape"], place["dtype"], place["device"])
    if model is None:
        from harness.providers.embedded import load_model

        model, _ = load_model()
    return model.to(device=place["device"], dtype=getattr(torch, place["dtype"]))


def serve(eng: Engine, reqs: list[Request], arrivals: list[float]) -> None:
    """Run the requests, each added once its arrival time (seconds after the start) has come; the
    request's `arrival` is its scheduled time, so TTFT counts any wait in the queue."""
    order = sorted(range(len(reqs)), key=lambda i: arrivals[i])
    start, nxt = time.perf_counter(), 0
    while nxt < len(order) or eng.has_work():
        now = time.perf_counter() - start
        while nxt < len(order) and arrivals[order[nxt]] <= now:
            req = eng.add(reqs[order[nxt]])
            req.arrival = start + arrivals[order[nxt]]
            nxt += 1
        if eng.has_work():
            eng.step()
        elif nxt < len(order):
            time.sleep(max(0.0, arrivals[order[nxt]] - (time.perf_counter() - start)))


def _local_rows(adapters: list[int], modes: list[str], rank: int, all_prompts: list[list[int]], min_requests: int,
                warm_prompt: list[int], gen_len: int, max_loras: int | None, max_num_seqs: int, lora_backend: str,
                max_cpu_loras: int | None, say: Callable[[str], None], model: Any, draw: Draw, place: Placement,
                seed: int) -> tuple[list[BenchRow], dict[str, str]]:
    model = _base_model(model, place)
    prompt_len = len(all_prompts[0])
    vocab = int(model.config.vocab_size)
    if vocab <= TOKEN_RANGE[1]:  # a small random model: fold the ids into its vocabulary
        all_prompts = [[t % vocab for t in p] for p in all_prompts]
        warm_prompt = [t % vocab for t in warm_prompt]
    rows: list[BenchRow] = []
    memory_method = ""
    for count in adapters:
        requests = max(min_requests, 2 * count)
        prompts = all_prompts[:requests]
        work: Workload = draw_workload(count, requests, popularity=draw["popularity"], zipf_s=draw["zipf_s"],
                                       arrival=draw["arrival"], rate=draw["rate"], seed=seed)
        used = [f"a{i}" for i in work.adapters]
        distinct = list(dict.fromkeys(used))
        slots = slots_for(count, max_loras)
        cache = host_cache_for(len(distinct), max_cpu_loras)
        host = HostAdapters(model.config, count, rank, capacity=cache)  # once per A, shared by its modes
        for mode in modes:
            say(f"A={count} mode={mode}: setting up (max_loras={slots}, host cache {cache})")
            setup_start = time.perf_counter()
            gc.collect()
            eng = Engine(model, max_num_seqs=max_num_seqs, max_loras=slots, max_lora_rank=rank,
                         lora_backend=lora_backend, kv_cache_bytes=_kv_budget(place["device"]),
                         max_prefill_loras=place["prefill_loras"])
            # the KV pool sized before timing, in every mode, as a server sizes its cache at start
            eng.reserve_kv(max_num_seqs, prompt_len + gen_len)
            if mode != "base":
                with host.registering():
                    for adapter in host.adapters:
                        eng.register(adapter)
                host.prewarm(distinct)
            # warm-up: one full batch of the warm prompt, so that the first timed row of a process
            # does not pay for the batch shapes' first use (docs/preft.md, session 17)
            eng.run([Request(prompt_ids=list(warm_prompt), max_new_tokens=gen_len,
                             adapter=None if mode == "base" else "a0", mode=mode)
                     for _ in range(warmup_batch(max_num_seqs, min_requests))])
            setup_s = time.perf_counter() - setup_start
            reqs = [Request(prompt_ids=list(p), max_new_tokens=gen_len, mode=mode,
                            adapter=None if mode == "base" else used[i]) for i, p in enumerate(prompts)]
            stats0, slots0 = _counters(eng.stats), _counters(eng.loras.table.stats)
            eng.stats.max_running = eng.stats.max_running_adapters = 0  # running maxima: the timed run's own
            eng.loras.table.touched.clear()  # the warm-up's adapter counts only if the run uses it
            host.misses, host.materialize_s = 0, 0.0
            say(f"A={count} mode={mode}: running {requests} requests")
            with PeakRSS() as mem, ProcessUsage() as usage:
                start, cpu_start = time.perf_counter(), time.process_time()
                serve(eng, reqs, work.arrivals)
                total, cpu = time.perf_counter() - start, time.process_time() - cpu_start
            memory_method = mem.method
            stats = {k: v - stats0[k] for k, v in _counters(eng.stats).items()}
            slot_stats = {k: v - slots0[k] for k, v in _counters(eng.loras.table.stats).items()}
            sizes = list(getattr(eng.stats, "batch_sizes", []))[-stats["steps"]:] if stats["steps"] else []
            n_out = [len(r.output_ids) for r in reqs]
            ttft = [ttft_tpot(r)[0] for r in reqs]
            tpot = [t for r in reqs if (t := ttft_tpot(r)[1]) is not None]
            alias = eng.loras.alias
            row: BenchRow = {"adapters": count, "mode": mode, "max_loras": slots, "prefill_slots": eng.loras.table.slots,
                             "slot_kind": "alias" if alias else "copy",
                             "lora_op": ("gathered" if eng.loras.weights.gather else "per-run") if alias else eng.lora_backend,
                             "max_num_seqs": max_num_seqs,
                             "requests": requests, "prompt_len": prompt_len, "gen_len": gen_len,
                             "distinct_adapters_used": 0 if mode == "base" else len(distinct),
                             "distinct_adapters_touched": len(eng.loras.table.touched),
                             "arrival": draw["arrival"], "popularity": draw["popularity"],
                             "output_tokens": sum(n_out), "total_s": round(total, 4),
                             "output_tok_s": round(sum(n_out) / total, 3), "requests_s": round(requests / total, 4),
                             # CPU seconds of this process: on a shared machine the wall clock carries the
                             # neighbours' load, the process's CPU time much less so (compare at equal threads)
                             "cpu_s": round(cpu, 4), "output_tok_cpu_s": round(sum(n_out) / cpu, 3) if cpu > 0 else None,
                             **percentiles(ttft, "ttft"), **percentiles(tpot, "tpot"),
                             "steps": stats["steps"], "engine_slot_waits": stats["slot_waits"],
                             "max_running": eng.stats.max_running, "max_running_adapters": eng.stats.max_running_adapters, "prefill_tokens": stats["prefill_tokens"],
                             "decode_tokens": stats["decode_tokens"],
                             "mean_batch_seqs": round(sum(sizes) / len(sizes), 2) if sizes else None,
                             "slot_hits": slot_stats["hits"], "slot_loads": slot_stats["loads"],
                             "slot_evictions": slot_stats["evictions"], "slot_waits": slot_stats["waits"],
                             "host_misses": host.misses if mode != "base" else 0,
                             "host_materialize_s": round(host.materialize_s, 4) if mode != "base" else 0.0,
                             "rss_before_mb": round(mem.before / 2**20, 1), "peak_rss_mb": round(mem.peak / 2**20, 1),
                             "peak_rss_delta_mb": round((mem.peak - mem.before) / 2**20, 1),
                             "kv_pool_bytes": eng.pool.bytes(),
                             "lora_store_bytes": _tensor_bytes([*eng.loras.weights.A.values(), *eng.loras.weights.B.values(),
                                                                *eng.loras.weights.scales.values()]),
                             "host_cache_bytes": host.cache_bytes() if mode != "base" else 0,
                             "setup_s": round(setup_s, 3), **usage.counts,
                             "all_requests_full_length": all(n == gen_len for n in n_out)}
            row["load_avg_1m"] = round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None
            rows.append(row)
            say(f"A={count} mode={mode}: {row['output_tok_s']:.1f} tok/s, {total:.2f} s, steps {row['steps']}, "
                f"touched {row['distinct_adapters_touched']}, loads {row['slot_loads']}, "
                f"evictions {row['slot_evictions']}, slot waits {row['slot_waits']}")
            del eng, reqs
        del host
        gc.collect()
    memory = {"peak_rss": memory_method or "not measured",
              "note": "peak_rss_delta_mb = peak RSS during the timed run minus RSS just before it "
                      "(the engine, its KV pool, its slots and the host cache already allocated); "
                      "kv_pool_bytes / lora_store_bytes / host_cache_bytes are the tensors' sizes"}
    return rows, memory


def _kv_budget(device: str) -> int:
    """KV cache bytes: 4 GiB on the CPU (the engine's default); on a GPU 40% of its memory (the
    8B model's bf16 weights take 16 GB of an 80-141 GB card)."""
    if device == "cpu":
        return 4 << 30
    return int(0.4 * torch.cuda.get_device_properties(torch.device(device)).total_memory)


def write_outputs(result: BenchResult, out_dir: Path) -> dict[str, Path]:
    out_dir = Path(out_dir)
    paths = {"json": out_dir / JSON_NAME, "csv": out_dir / CSV_NAME, "png": out_dir / PNG_NAME}
    paths["json"].write_text(json.dumps(result, indent=2) + "\n")
    with paths["csv"].open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=CSV_COLUMNS, extrasaction="ignore")
        writer.writeheader()
        for row in result["rows"]:
            writer.writerow({k: ("" if row.get(k) is None else row.get(k)) for k in CSV_COLUMNS})
    try:
        plot(result, paths["png"])
    except ImportError:  # a GPU image without matplotlib: JSON and CSV still written
        del paths["png"]
    return paths


def plot(result: BenchResult, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for mode in result["config"]["modes"]:
        points = sorted((number(r["adapters"]), number(r["output_tok_s"])) for r in result["rows"] if r["mode"] == mode)
        if points:
            ax.plot(*zip(*points), marker="o", label=mode)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("registered adapters A (every one used; max(requests, 2A) requests)")
    ax.set_ylabel("output tokens / s")
    cfg = result["config"]
    ax.set_title(f"{cfg['requests']}+ requests, prompt {cfg['prompt_len']}, gen {cfg['gen_len']}, rank {cfg['rank']}, "
                 f"{cfg.get('popularity', 'uniform')}, {cfg.get('arrival', 't0')}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def format_table(result: BenchResult) -> str:
    """A markdown table of the rows (for the README), then the preft ratios per adapter count."""
    head = ["A", "mode", "slots", "prefill slots", "out tok/s", "req/s", "TTFT p50 ms", "TTFT p99 ms", "TPOT p50 ms", "TPOT p99 ms",
            "steps", "slot loads", "evictions", "slot waits", "wait steps", "peak RSS Δ MB"]
    keys = ["adapters", "mode", "max_loras", "prefill_slots", "output_tok_s", "requests_s", "ttft_p50_ms", "ttft_p99_ms",
            "tpot_p50_ms", "tpot_p99_ms", "steps", "slot_loads", "slot_evictions", "slot_waits", "engine_slot_waits",
            "peak_rss_delta_mb"]

    def cell(value: Any) -> str:
        if value is None:
            return "-"
        if isinstance(value, float):
            return f"{value:.1f}" if abs(value) >= 10 else f"{value:.2f}"
        return str(value)

    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    for row in result["rows"]:
        lines.append("| " + " | ".join(cell(row.get(k)) for k in keys) + " |")
    counts = list(dict.fromkeys(str(r["adapters"]) for r in result["rows"]))
    a_all, a_base = result.get("preft_over_all_token", {}), result.get("preft_over_base", {})
    c_all, c_base = result.get("preft_over_all_token_cpu", {}), result.get("preft_over_base_cpu", {})
    if a_all or a_base:
        lines += ["", "| A | preft / all-token | preft / base | per CPU-s: preft / all-token | per CPU-s: preft / base |",
                  "|---|---|---|---|---|"]
        for count in counts:
            lines.append(f"| {count} | {cell(a_all.get(count))} | {cell(a_base.get(count))} | "
                         f"{cell(c_all.get(count))} | {cell(c_base.get(count))} |")
    return "\n".join(lines)
