"""PreFT on vLLM: a general plugin (entry point `vllm.general_plugins: preft`).

vLLM loads general plugins in every process it starts (front end, engine core, workers), so
`register()` patches the worker once per process; each patched place checks the engine's own config,
so an engine started without the flag behaves exactly as stock vLLM. With the flag, the engine names
PreFT's scheduler and worker extension too (`harness` does all of it: `vllm_provider.preft_engine_kwargs`):

    AsyncEngineArgs(..., enable_lora=True, additional_config={"preft": "prefill-only"},
                    scheduler_cls=SCHEDULER, worker_extension_cls=WORKER_EXTENSION)
    vllm serve ... --enable-lora --additional-config '{"preft": "prefill-only"}' \
        --scheduler-cls preft.vllm_scheduler.PreftScheduler --worker-extension-cls preft.vllm_plugin.PreftWorkerExtension

With the flag a LoRA request uses its adapter on its prompt tokens only -- prefill and chunked
prefill, and the prompt part of a preempted request's recompute -- and decodes on the base weights,
which is what the local engine (`kernels/preft/engine.py`) and peft's prefill-only reference do.
A request may ask for stock behaviour with `SamplingParams(extra_args={"preft_mode": "all-token"})`,
so one engine serves base, prefill-only and all-token traffic side by side.

1. Worker (`LoRAModelRunnerMixin.set_active_loras`, the V1 model runner): the per-token adapter
   map is built from each token's position -- adapter where position < prompt length, none after
   -- and only adapters with a token in this step are activated, so decoding requests hold no GPU
   slot. A step of decode tokens only maps every token to "no LoRA", and the punica wrappers then
   skip their kernels (CPU: `no_lora`; GPU: the kernels' `no_lora_flag`).
2. Scheduler (`preft.vllm_scheduler.PreftScheduler`, given to vLLM as `scheduler_cls`, not patched):
   `max_loras` counts the adapters of requests that still have prompt tokens to compute; a decoding
   request's adapter is hidden from that count for the call. An engine with the flag and another
   scheduler fails on its first step, naming the flag to add.
3. CPU build: vLLM's torch LoRA ops index the stacked weights with the token's slot index, and the
   "no LoRA" index -1 then reads the *last* slot (upstream PR #48421, open). Prefill-only LoRA
   makes every decode token a -1 token, so the plugin replaces those ops with ones that compute
   only tokens with a slot and give the rest exactly zero. This fix is applied whenever the plugin
   loads on the CPU platform, flag or not: it is a correctness fix for every mixed batch.

4. ReFT (worker, eager mode): interventions named in the flag,
   `{"preft": {"mode": "prefill-only", "reft": {"NAME": "DIR"}}}` (this project's ReFT folders), are
   loaded once per worker and stay resident (a few r x d matrices per layer: no slots). A request
   picks one with `extra_args={"reft": "NAME"}`. Before each forward the plugin works out which
   rows of the flat token batch sit at the adapter's first-n / last-m prompt positions (every
   position for an all-token request), and a forward hook on each intervened decoder layer adds
   the intervention's change to that layer's output stream. vLLM's Llama layers return the stream
   in two parts (hidden, residual) and add them in the next layer's fused norm, so the hook reads
   the stream as hidden + residual and adds the change to `hidden`. Hooks cannot run inside a
   captured CUDA graph or a torch.compile'd model, so ReFT needs `enforce_eager=True` (checked).

Engines with the flag also name `PreftWorkerExtension` (`worker_extension_cls`), whose
`preft_stats` reads the counters below. Items 1, 3 and 4's input planning must stay patches (vLLM has no
extension point for the LoRA token map, the punica ops or a model runner's inputs): they are applied only where the patched functions have the
signatures they were written against (section 5); otherwise vLLM runs stock and an engine with the
flag refuses to start, naming what changed.

Model Runner V2 (vLLM's default on GPUs with Triton) keeps its LoRA state elsewhere; with the flag
the plugin asks for V1 (`VLLM_USE_V2_MODEL_RUNNER=0`) and refuses to run on V2 rather than serve
all-token LoRA silently.
"""

from __future__ import annotations

import functools
import logging
import os
from typing import Any

import numpy as np

logger = logging.getLogger(__name__)

CONFIG_KEY = "preft"
MODE_KEY = "preft_mode"  # SamplingParams.extra_args key for a per-request override
PREFILL_ONLY, ALL_TOKEN = "prefill-only", "all-token"
MODES = (PREFILL_ONLY, ALL_TOKEN)
# What an engine with the flag names in vLLM's own extension points (`preft_engine_kwargs` sets both).
SCHEDULER = "preft.vllm_scheduler.PreftScheduler"
WORKER_EXTENSION = "preft.vllm_plugin.PreftWorkerExtension"

_registered = False
# Per-process counters of the patched worker path, read from a test or a benchmark through
# `collective_rpc("preft_stats")` (the plugin adds that method to vLLM's workers).
STATS_KEYS = ("steps", "tokens", "adapter_tokens", "steps_without_adapter", "max_active_adapters", "reft_tokens")
STATS: dict[str, int] = dict.fromkeys(STATS_KEYS, 0)


def _count(tokens: np.ndarray, active: int) -> None:
    adapted = int(np.count_nonzero(tokens))
    STATS["steps"] += 1
    STATS["tokens"] += int(tokens.size)
    STATS["adapter_tokens"] += adapted
    STATS["steps_without_adapter"] += adapted == 0
    STATS["max_active_adapters"] = max(STATS["max_active_adapters"], active)


def default_mode(vllm_config: Any) -> str | None:
    """The engine's PreFT mode from `additional_config`, or None when the flag is absent."""
    extra = getattr(vllm_config, "additional_config", None) or {}
    value = extra.get(CONFIG_KEY)
    if value is None:
        return None
    mode = value.get("mode", PREFILL_ONLY) if isinstance(value, dict) else value
    if mode not in MODES:
        raise ValueError(f"additional_config {{'{CONFIG_KEY}': {value!r}}}: use one of {MODES}")
    return str(mode)


def reft_dirs(vllm_config: Any) -> dict[str, str]:
    value = (getattr(vllm_config, "additional_config", None) or {}).get(CONFIG_KEY)
    return dict(value.get("reft") or {}) if isinstance(value, dict) else {}


def request_mode(sampling_params: Any, engine_mode: str) -> str:
    extra = getattr(sampling_params, "extra_args", None) or {}
    mode = extra.get(MODE_KEY, engine_mode)
    if mode not in MODES:
        raise ValueError(f"extra_args {{'{MODE_KEY}': {mode!r}}}: use one of {MODES}")
    return str(mode)


def token_lora_ids(req_lora: np.ndarray, start: np.ndarray, prompt_len: np.ndarray, scheduled: np.ndarray,
                   prefill_only: np.ndarray) -> np.ndarray:
    """Each scheduled token's adapter id (0 = none): a prefill-only request's id at positions before
    its prompt length, an all-token request's id everywhere. All arrays are per request."""
    counts = scheduled.astype(np.int64)
    req_of_token = np.repeat(np.arange(len(counts)), counts)
    first_token = np.cumsum(counts) - counts
    position = start[req_of_token] + (np.arange(int(counts.sum())) - first_token[req_of_token])
    in_prompt = position < prompt_len[req_of_token]
    keep = in_prompt | ~prefill_only[req_of_token]
    return np.where(keep, req_lora[req_of_token], 0)


def sampled_lora_ids(req_lora: np.ndarray, start: np.ndarray, prompt_len: np.ndarray, scheduled: np.ndarray,
                     sampled: np.ndarray, prefill_only: np.ndarray) -> np.ndarray:
    """The adapter for each sampled row (logits): that of the request's last scheduled position."""
    last = start + scheduled.astype(np.int64) - 1
    per_req = np.where((last < prompt_len) | ~prefill_only, req_lora, 0)
    return np.repeat(per_req, sampled.astype(np.int64))


# -- 1. worker ---------------------------------------------------------------------------------

def _patch_worker() -> None:
    from vllm.lora.layers import LoRAMappingType
    from vllm.v1.worker.lora_model_runner_mixin import LoRAModelRunnerMixin

    stock = LoRAModelRunnerMixin.set_active_loras

    @functools.wraps(stock)
    def set_active_loras(self: Any, input_batch: Any, num_scheduled_tokens: np.ndarray,
                         num_sampled_tokens: np.ndarray | None = None,
                         mapping_type: Any = LoRAMappingType.LANGUAGE) -> None:
        engine_mode = default_mode(self.vllm_config)
        if engine_mode is None or mapping_type != LoRAMappingType.LANGUAGE:
            stock(self, input_batch, num_scheduled_tokens, num_sampled_tokens, mapping_type)
            return
        _require_scheduler(self.vllm_config)
        n = input_batch.num_reqs
        if num_sampled_tokens is None:
            num_sampled_tokens = np.ones(n, dtype=np.int32)
        req_lora = input_batch.request_lora_mapping[:n]
        prefill_only = np.array([request_mode(self.requests[rid].sampling_params, engine_mode) == PREFILL_ONLY
                                 for rid in input_batch.req_ids[:n]], dtype=bool)
        start = input_batch.num_computed_tokens_cpu[:n].astype(np.int64)
        prompt_len = input_batch.num_prompt_tokens[:n].astype(np.int64)
        scheduled = num_scheduled_tokens[:n]
        tokens = token_lora_ids(req_lora, start, prompt_len, scheduled, prefill_only)
        sampled = sampled_lora_ids(req_lora, start, prompt_len, scheduled, num_sampled_tokens[:n], prefill_only)
        # Only adapters that touch a token this step take a slot: decoding requests hold none.
        used = set(np.unique(tokens).tolist()) | set(np.unique(sampled).tolist())
        requests = {input_batch.lora_id_to_lora_request[i] for i in used if i > 0}
        _count(tokens, len(requests))
        self._set_active_loras(tuple(sampled.tolist()), tuple(tokens.tolist()), requests, mapping_type)

    LoRAModelRunnerMixin.set_active_loras = set_active_loras
    from vllm.v1.worker.gpu_model_runner import GPUModelRunner

    stock_prepare = GPUModelRunner._prepare_inputs

    @functools.wraps(stock_prepare)
    def _prepare_inputs(self: Any, scheduler_output: Any, num_scheduled_tokens: np.ndarray) -> Any:
        out = stock_prepare(self, scheduler_output, num_scheduled_tokens)
        engine_mode = default_mode(self.vllm_config)
        if engine_mode is not None and reft_dirs(self.vllm_config):
            _plan_reft(self, engine_mode, num_scheduled_tokens)
        return out

    GPUModelRunner._prepare_inputs = _prepare_inputs


class PreftWorkerExtension:
    """vLLM's `worker_extension_cls`: the plugin's per-process counters, `collective_rpc("preft_stats")`."""

    def preft_stats(self, reset: bool = False) -> dict[str, int]:
        snapshot = dict(STATS)
        if reset:
            STATS.update(dict.fromkeys(STATS_KEYS, 0))
        return snapshot


# -- 2. scheduler: `vllm_scheduler.PreftScheduler`, named through `scheduler_cls` (no patch) ----------

# -- 3. CPU LoRA ops ---------------------------------------------------------------------------

def _lora_rows(inputs: Any, weights: Any, slots: Any, dtype: Any) -> Any:
    """Row t of the result is weights[slots[t]] @ inputs[t]; rows whose slot is -1 stay zero.

    `weights` is vLLM's stacked (max_loras, [1,] out, in). One matmul per adapter in the batch
    instead of a gathered weight copy per token."""
    import torch

    if weights.dim() == 4:
        weights = weights.squeeze(1)
    inputs = inputs.to(dtype)
    slots = slots[: inputs.shape[0]]
    out = torch.zeros(inputs.shape[0], weights.shape[1], dtype=dtype, device=inputs.device)
    for slot in torch.unique(slots).tolist():
        if slot < 0:
            continue
        rows = (slots == slot).nonzero(as_tuple=True)[0]
        out[rows] = inputs[rows] @ weights[slot].to(dtype).T
    return out


def bgmv_shrink(inputs: Any, lora_a: Any, output: Any, slots: Any, scaling: float = 1.0) -> None:
    rows = _lora_rows(inputs, lora_a, slots, output.dtype)
    output[: rows.shape[0], : rows.shape[1]] = scaling * rows


def bgmv_expand(inputs: Any, lora_b: Any, output: Any, slots: Any, add_inputs: bool = True) -> None:
    rows = _lora_rows(inputs, lora_b, slots, output.dtype)
    limit = min(rows.shape[0], output.shape[0])
    width = min(rows.shape[1], output.shape[1])  # adapter and model may pad differently
    if add_inputs:
        output[:limit, :width] += rows[:limit, :width]
    else:
        output[:limit, :width] = rows[:limit, :width]


def bgmv_expand_slice(inputs: Any, lora_b: Any, output: Any, slots: Any, slice_offset: int, slice_size: int,
                      add_inputs: bool = True) -> None:
    rows = _lora_rows(inputs, lora_b, slots, output.dtype)
    limit = min(rows.shape[0], output.shape[0])
    target = output[:limit, slice_offset: slice_offset + slice_size]
    if add_inputs:
        target += rows[:limit]
    else:
        target.copy_(rows[:limit])


def _explode(lora_indices: Any, seq_lens: Any) -> Any:
    import torch

    return torch.repeat_interleave(lora_indices, seq_lens)


def sgmv_shrink(inputs: Any, lora_a: Any, output: Any, b_seq_start_loc: Any, seq_len_tensor: Any,
                lora_indices_tensor: Any, batches: int, max_seq_length: int, token_nums: int, scaling: float) -> None:
    bgmv_shrink(inputs, lora_a, output, _explode(lora_indices_tensor, seq_len_tensor), scaling)


def sgmv_expand(inputs: Any, lora_b: Any, output: Any, b_seq_start_loc: Any, seq_len_tensor: Any,
                lora_indices_tensor: Any, batches: int, max_seq_length: int, token_nums: int,
                add_inputs: bool = False) -> None:
    bgmv_expand(inputs, lora_b, output, _explode(lora_indices_tensor, seq_len_tensor), add_inputs)


def sgmv_expand_slice(inputs: Any, lora_b: Any, output: Any, b_seq_start_loc: Any, seq_len_tensor: Any,
                      lora_indices_tensor: Any, batches: int, max_seq_length: int, token_nums: int,
                      slice_offset: int, slice_size: int, add_inputs: bool = False) -> None:
    bgmv_expand_slice(inputs, lora_b, output, _explode(lora_indices_tensor, seq_len_tensor), slice_offset,
                      slice_size, add_inputs)


CPU_OPS = ("bgmv_shrink", "bgmv_expand", "bgmv_expand_slice", "sgmv_shrink", "sgmv_expand", "sgmv_expand_slice")


def _patch_cpu_ops() -> None:
    from vllm.lora.punica_wrapper import punica_cpu

    for name in CPU_OPS:
        setattr(punica_cpu, name, globals()[name])


# -- 4. ReFT ------------------------------------------------------------------------------------

class ReftState:
    """One worker's ReFT interventions (resident) and the plan for the forward about to run:
    layer -> [(rows, kind, R, W, b)]."""

    def __init__(self, runner: Any) -> None:
        from preft.adapters import ReftAdapter, load_adapter

        if not runner.vllm_config.model_config.enforce_eager:
            raise RuntimeError("PreFT ReFT in vLLM needs enforce_eager=True: its forward hooks cannot run "
                               "inside CUDA graphs or a compiled model")
        model = runner.get_model()
        layers = getattr(getattr(model, "model", None), "layers", None)
        if layers is None:
            raise RuntimeError(f"PreFT ReFT: {type(model).__name__} has no model.layers (Llama-style decoder layers)")
        param = next(model.parameters())
        self.adapters: dict[str, ReftAdapter] = {}
        for name, directory in reft_dirs(runner.vllm_config).items():
            adapter = load_adapter(directory, name=name)
            if not isinstance(adapter, ReftAdapter):
                raise ValueError(f"additional_config preft.reft[{name!r}]: {directory} is not a ReFT folder")
            bad = [layer for layer in adapter.layers if layer >= len(layers)]
            if bad:
                raise ValueError(f"ReFT {name!r} intervenes on layers {bad}; the model has {len(layers)}")
            adapter.layers = {layer: tuple(t.to(device=param.device, dtype=param.dtype) for t in weights)
                              for layer, weights in adapter.layers.items()}
            self.adapters[name] = adapter
        self.plan: dict[int, list[tuple[Any, ...]]] = {}
        for index, layer in enumerate(layers):
            if any(index in a.layers for a in self.adapters.values()):
                layer.register_forward_hook(self._hook(index))

    def _hook(self, index: int) -> Any:
        from preft.reft_ops import reft_direct

        def hook(module: Any, args: Any, output: Any) -> Any:
            work = self.plan.get(index)
            if not work:
                return None
            hidden, residual = output
            for rows, kind, R, W, b in work:
                stream = hidden[rows] + residual[rows]
                hidden.index_add_(0, rows, reft_direct(stream, kind, R, W, b) - stream)
            return hidden, residual

        return hook


def _plan_reft(runner: Any, engine_mode: str, num_scheduled_tokens: np.ndarray) -> None:
    import torch

    state = getattr(runner, "_preft_reft", None)
    if state is None:
        state = runner._preft_reft = ReftState(runner)
    batch = runner.input_batch
    plan: dict[int, list[tuple[Any, ...]]] = {}
    offset = 0
    for i, rid in enumerate(batch.req_ids[: batch.num_reqs]):
        count = int(num_scheduled_tokens[i])
        params = runner.requests[rid].sampling_params
        name = (getattr(params, "extra_args", None) or {}).get("reft")
        if name is not None:
            adapter = state.adapters.get(name)
            if adapter is None:
                raise ValueError(f"extra_args reft={name!r}: not among this engine's ReFT adapters {sorted(state.adapters)}")
            start, prompt_len = int(batch.num_computed_tokens_cpu[i]), int(batch.num_prompt_tokens[i])
            if request_mode(params, engine_mode) == PREFILL_ONLY:
                wanted = set(adapter.positions(prompt_len))
                rows = [offset + k for k in range(count) if start + k in wanted]
            else:
                rows = list(range(offset, offset + count))
            if rows:
                index = torch.tensor(rows, dtype=torch.long, device=next(iter(adapter.layers.values()))[0].device)
                for layer, (R, W, b) in adapter.layers.items():
                    plan.setdefault(layer, []).append((index, adapter.kind, R, W, b))
                STATS["reft_tokens"] += len(rows)
        offset += count
    state.plan = plan


# -- 5. the version guard ------------------------------------------------------------------------

# The worker patches and the CPU ops replace vLLM internals, so they are applied only where those
# internals have the shape they were written against (vLLM 0.32); elsewhere vLLM runs stock, and an
# engine started with the flag fails in PreftScheduler.__init__ with the reason (never serves all-token
# LoRA silently).
TESTED_VLLM = "0.32."
PATCHED_SIGNATURES = {
    "vllm.v1.worker.lora_model_runner_mixin:LoRAModelRunnerMixin.set_active_loras":
        ("self", "input_batch", "num_scheduled_tokens", "num_sampled_tokens", "mapping_type"),
    "vllm.v1.worker.gpu_model_runner:GPUModelRunner._prepare_inputs": ("self", "scheduler_output", "num_scheduled_tokens"),
}
_problem: str | None = None


def patch_problem() -> str | None:
    """Why this process's vLLM was left unpatched (None: patched, or the plugin not registered yet)."""
    return _problem


def signature_problem() -> str | None:
    import importlib
    import inspect

    for target, expected in PATCHED_SIGNATURES.items():
        module_name, qualname = target.split(":")
        owner_name, attr = qualname.split(".")
        owner = getattr(importlib.import_module(module_name), owner_name, None)
        function = getattr(owner, attr, None)
        if function is None:
            return f"{target} does not exist"
        found = tuple(inspect.signature(function).parameters)
        if found != expected:
            return f"{target} takes {found}, the plugin was written for {expected}"
    from vllm.lora.punica_wrapper import punica_cpu

    for name in CPU_OPS:  # replaced positionally: the same number of parameters is what matters
        stock, ours = getattr(punica_cpu, name, None), globals()[name]
        if stock is None or len(inspect.signature(stock).parameters) != len(inspect.signature(ours).parameters):
            return f"vllm.lora.punica_wrapper.punica_cpu.{name} is missing or takes other arguments"
    return None


def _require_scheduler(vllm_config: Any) -> None:
    """The worker half of prefill-only LoRA needs the scheduler half: say so instead of running without it."""
    named = vllm_config.scheduler_config.scheduler_cls
    module = named if isinstance(named, str) else getattr(named, "__module__", "") + "." + getattr(named, "__name__", "")
    if not str(module).startswith("preft.vllm_scheduler."):
        raise RuntimeError(f"the PreFT flag is set but the scheduler is {named!r}: start vLLM with "
                           f"scheduler_cls={SCHEDULER!r} (`vllm serve --scheduler-cls {SCHEDULER}`)")


def register() -> None:
    """vLLM's general-plugin hook. Idempotent: vLLM may call it more than once per process."""
    global _registered, _problem
    if _registered:
        return
    _registered = True
    import vllm

    _problem = signature_problem()
    if _problem:
        logger.warning("PreFT plugin: vLLM %s left unpatched (%s)", vllm.__version__, _problem)
        return
    if not vllm.__version__.startswith(TESTED_VLLM):
        logger.warning("PreFT plugin: vLLM %s is untested (written for %sx); its patched signatures match",
                       vllm.__version__, TESTED_VLLM)
    _patch_worker()
    from vllm.platforms import current_platform

    if current_platform.is_cpu():
        _patch_cpu_ops()
    logger.debug("PreFT plugin registered (pid %d)", os.getpid())
