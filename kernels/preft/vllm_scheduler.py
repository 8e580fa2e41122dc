"""PreFT's vLLM scheduler, given to vLLM by name (`scheduler_cls`), not patched in.

    AsyncEngineArgs(..., scheduler_cls=SCHEDULER, additional_config={"preft": "prefill-only"})
    vllm serve ... --scheduler-cls preft.vllm_scheduler.PreftScheduler --additional-config '{"preft": ...}'

Prefill-only LoRA: a request past its prompt decodes on the base weights, so it needs no adapter slot.
vLLM's scheduler counts every running request's adapter against `max_loras`; this one hides a decoding
prefill-only request's adapter for the duration of `schedule()` and puts it back after, so the slots go
to requests that still have prompt tokens to compute. Without the flag it is vLLM's own scheduler.

vLLM picks `AsyncScheduler` or `Scheduler` from the resolved `async_scheduling` setting only when no
class is named; a named class fixes the choice. `PreftScheduler` makes the same choice itself when it
is constructed (the config is resolved by then), so naming it loses nothing: an async engine gets
`PreftAsyncScheduler`.

Imported only inside vLLM's processes (it imports vLLM at the top); the harness side names it by string.
"""

from __future__ import annotations

from typing import Any, cast

from vllm.v1.core.sched.async_scheduler import AsyncScheduler
from vllm.v1.core.sched.scheduler import Scheduler

from preft.vllm_plugin import PREFILL_ONLY, default_mode, patch_problem, request_mode


class PreftScheduler(Scheduler):
    def __new__(cls, *args: Any, **kwargs: Any) -> PreftScheduler:
        vllm_config = kwargs.get("vllm_config", args[0] if args else None)
        if cls is PreftScheduler and vllm_config is not None and vllm_config.scheduler_config.async_scheduling:
            cls = PreftAsyncScheduler
        return cast(PreftScheduler, super().__new__(cls))

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if default_mode(self.vllm_config) is None:
            return
        if self.vllm_config.use_v2_model_runner:
            raise RuntimeError("the PreFT vLLM plugin patches the V1 model runner; start with "
                               "VLLM_USE_V2_MODEL_RUNNER=0 (`harness` sets it when it starts vLLM with PreFT)")
        problem = patch_problem()
        if problem:
            raise RuntimeError(f"PreFT flag set, but the plugin could not patch this vLLM: {problem}")

    def schedule(self, *args: Any, **kwargs: Any) -> Any:
        engine_mode = default_mode(self.vllm_config) if self.lora_config else None
        if engine_mode is None:
            return super().schedule(*args, **kwargs)
        hidden = [(r, r.lora_request) for r in self.running
                  if r.lora_request is not None and r.num_computed_tokens >= r.num_prompt_tokens
                  and request_mode(r.sampling_params, engine_mode) == PREFILL_ONLY]
        for request, _ in hidden:
            request.lora_request = None
        try:
            return super().schedule(*args, **kwargs)
        finally:
            for request, lora in hidden:
                request.lora_request = lora


class PreftAsyncScheduler(PreftScheduler, AsyncScheduler):
    """The same, over vLLM's asynchronous scheduler (MRO: PreftScheduler, AsyncScheduler, Scheduler)."""
