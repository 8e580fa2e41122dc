"""`local/smollm2-135m[@DIR[#all-token]]`: the embedded model, served by the PreFT engine.

Every call, from any number of `LocalModel` instances and event loops, goes to the one engine of
the process (`kernels.preft.serving`): a worker thread doing continuous batching over a KV pool,
so a request joins the running batch at the next step and leaves it the step it finishes. Each
request keeps its own sampling parameters and seeded generator, so its tokens do not depend on
its batch-mates (up to float rounding in batched matmuls).

With `@DIR` the model serves a LoRA (peft format) or ReFT adapter, prefill-only; `#all-token`
applies it to every token. The adapter's content hash enters the request hash, so the call cache
never answers with an older adapter saved at the same path.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from harness.errors import HarnessError
from harness.providers.base import GenerateConfig, ModelError, ModelOutput, Usage, request_hash
from harness.providers.local import (CONTEXT_WINDOW, DEFAULT_SEED, MODEL_NAME, as_id_list, load_model,
                                     parse_adapter_name, stop_token_ids, trim_at_stop, visible_ids)
from harness.spec import ModelSpec


LOCAL_MODELS = ("smollm2-135m",)


class LocalProvider:
    """The `harness.providers` entry point `local`: the embedded model on the PreFT engine."""

    name = "local"

    def validate(self, spec: ModelSpec) -> None:
        base, _, _ = parse_adapter_name(spec.name)
        if base not in LOCAL_MODELS:
            raise HarnessError(f"unknown local model {spec.full!r}: the embedded model is local/smollm2-135m "
                               "(with an adapter: local/smollm2-135m@DIR)")

    def create(self, spec: ModelSpec) -> "LocalModel":
        _, directory, mode = parse_adapter_name(spec.name)
        return LocalModel(directory, mode)


PROVIDER = LocalProvider()


def recent_batch_sizes() -> list[int]:
    """Sequences in each recent engine step (for tests and diagnostics)."""
    from kernels.preft.serving import server

    return server().batch_sizes()


class LocalModel:
    """`local/smollm2-135m` (optionally with an adapter). Cheap to construct; weights load on first
    use and are shared by every instance in the process, as is the engine."""

    def __init__(self, adapter_dir: Path | None = None, mode: str = "preft") -> None:
        self.adapter_dir, self.mode = adapter_dir, mode
        self.adapter_hash: str | None = None
        self.name = MODEL_NAME
        if adapter_dir is not None:
            from kernels.preft.adapters import AdapterError, load_adapter
            from kernels.preft.serving import adapter_key

            try:
                load_adapter(adapter_dir)  # fail now, with the reason, rather than on the first call
            except AdapterError as exc:
                raise HarnessError(str(exc)) from exc
            self.adapter_hash = adapter_key(adapter_dir).rsplit("#", 1)[1]
            self.name = f"{MODEL_NAME}@{adapter_dir}" + ("" if mode == "preft" else f"#{mode}")
        self._closed = False

    async def generate(self, messages: list[dict[str, str]], config: GenerateConfig) -> ModelOutput:
        from kernels.preft.engine import Request
        from kernels.preft.serving import server

        if self._closed:
            raise ModelError(f"{self.name}: generate() after aclose()")
        started = time.perf_counter()
        model, tokenizer = await asyncio.to_thread(load_model)
        try:
            ids = as_id_list(tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True))
        except Exception as exc:  # noqa: BLE001
            raise ModelError(f"{MODEL_NAME} could not template the messages: {type(exc).__name__}: {exc}") from exc
        if len(ids) >= CONTEXT_WINDOW:
            raise ModelError(f"prompt is {len(ids)} tokens; {MODEL_NAME} holds {CONTEXT_WINDOW}: "
                             "shorten the input or use a model with a longer context")
        stops = [s for s in (config.stop or []) if s]

        def hit_stop(out_ids: list[int]) -> bool:
            return trim_at_stop(tokenizer.decode(out_ids, skip_special_tokens=True), stops)[1]

        engine = server()
        adapter = None
        if self.adapter_dir is not None:
            adapter = await asyncio.to_thread(engine.register_dir, self.adapter_dir)
        stop_ids = stop_token_ids(model, tokenizer)
        req = Request(prompt_ids=ids, max_new_tokens=min(int(config.max_tokens), CONTEXT_WINDOW - len(ids)),
                      adapter=adapter, mode=self.mode if adapter else "base", temperature=config.temperature,
                      top_p=config.top_p, seed=DEFAULT_SEED if config.seed is None else int(config.seed),
                      stop_ids=stop_ids, stop_check=hit_stop if stops else None)
        try:
            done = await asyncio.wrap_future(engine.submit(req))
        except asyncio.CancelledError:
            req.cancelled = True  # a timeout or Ctrl-C: free the batch slot at the next step
            raise
        except Exception as exc:  # noqa: BLE001 - the worker's failure becomes this call's error
            raise ModelError(f"{self.name} failed: {type(exc).__name__}: {exc}") from exc
        text = trim_at_stop(tokenizer.decode(visible_ids(done.output_ids, stop_ids), skip_special_tokens=True), stops)[0]
        extra = {"adapter": self.adapter_hash} if self.adapter_hash else None
        return ModelOutput(
            text=text, finish_reason=done.finish_reason or "length",
            usage=Usage(prompt_tokens=len(ids), completion_tokens=len(done.output_ids), calls=1),
            latency_s=time.perf_counter() - started,
            request_hash=request_hash(self.name, messages, config, extra=extra))

    async def aclose(self) -> None:
        """Stops this instance; the shared weights and engine stay for other instances."""
        self._closed = True
