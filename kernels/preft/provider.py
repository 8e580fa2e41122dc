"""`local/smollm2-135m[@DIR[#all-token]]`: the embedded model, served by the PreFT engine.

Every call, from any number of `LocalModel` instances and event loops, goes to the one engine of
the process (`preft.serving`): a worker thread doing continuous batching over a KV pool,
so a request joins the running batch at the next step and leaves it the step it finishes. Each
request keeps its own sampling parameters and seeded generator, so its tokens do not depend on
its batch-mates (up to float rounding in batched matmuls).

With `@DIR` the model serves a LoRA (peft format) or ReFT adapter, prefill-only; `#all-token`
applies it to every token. The adapter's content hash enters the request hash, so the call cache
never answers with an older adapter saved at the same path.

The model itself -- identity, weights, chat template, tool-calling protocol -- is
`harness.providers.embedded`, shared with `vllm/smollm2-135m` (`preft.vllm_provider`): the same
messages give both engines the same prompt token ids.

Output constraints are enforced in the engine, token by token (`constrain.py`, xgrammar):
`json_schema`, `choice` and `regex`, and a forced tool call (`tool_choice` `required` or a tool's
name) as the JSON schema of one `{"name", "arguments"}` call, parsed into `tool_calls`. With
`tool_choice` `auto` the tools are described in the system message and the model decodes freely;
a reply that is exactly one valid tool-call object becomes a tool call (`embedded.read_tool_call`).
`complete()` takes raw text (no chat template) with the same constraints.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from harness.errors import HarnessError
from harness.messages import ChatMessage
from harness.providers.base import (GenerateConfig, ModelError, ModelOutput, Usage, check_constraint, raw_prompt_hash,
                                    request_hash, tool_call_schema)
from harness.providers.embedded import (CONTEXT_WINDOW, DEFAULT_SEED, MODEL_NAME, NAME, chat_prompt_ids, load_model,
                                        parse_adapter_name, read_tool_call, stop_token_ids, trim_at_stop, visible_ids)
from harness.spec import ModelSpec


LOCAL_MODELS = (NAME,)


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
    """Sequences in each recent engine step (the last 1000; for tests and diagnostics)."""
    from preft.serving import server

    return server().batch_sizes()


def engine_steps() -> int:
    """Engine steps so far: the new steps since a moment are `recent_batch_sizes()[-(now - then):]`."""
    from preft.serving import server

    return server().steps()


async def _load() -> tuple[Any, Any]:
    """The shared (model, tokenizer), loaded once per process. The engine module first: it sets
    OpenMP's passive waiting, which only counts before torch loads (engine.py)."""
    import preft.engine  # noqa: F401

    return await asyncio.to_thread(load_model)


class LocalModel:
    """`local/smollm2-135m` (optionally with an adapter). Cheap to construct; weights load on first
    use and are shared by every instance in the process, as is the engine."""

    def __init__(self, adapter_dir: Path | None = None, mode: str = "preft") -> None:
        self.adapter_dir, self.mode = adapter_dir, mode
        self.adapter_hash: str | None = None
        self.name = MODEL_NAME
        if adapter_dir is not None:
            from preft.adapters import AdapterError, load_adapter
            from preft.serving import adapter_key

            try:
                load_adapter(adapter_dir)  # fail now, with the reason, rather than on the first call
            except AdapterError as exc:
                raise HarnessError(str(exc)) from exc
            self.adapter_hash = adapter_key(adapter_dir).rsplit("#", 1)[1]
            self.name = f"{MODEL_NAME}@{adapter_dir}" + ("" if mode == "preft" else f"#{mode}")
        self._closed = False

    async def generate(self, messages: list[ChatMessage], config: GenerateConfig) -> ModelOutput:
        if self._closed:
            raise ModelError(f"{self.name}: generate() after aclose()")
        check_constraint(config)  # ManagedModel did too; direct callers get the same errors
        started = time.perf_counter()
        model, tokenizer = await _load()
        try:
            ids = chat_prompt_ids(tokenizer, messages, config)
        except Exception as exc:  # noqa: BLE001
            raise ModelError(f"{MODEL_NAME} could not template the messages: {type(exc).__name__}: {exc}") from exc
        extra = {"adapter": self.adapter_hash} if self.adapter_hash else None
        return await self._run(ids, config, request_hash(self.name, messages, config, extra=extra), started)

    async def complete(self, prompt: str, config: GenerateConfig) -> ModelOutput:
        """Raw text in (tokenised as is, no chat template), the same constraints as `generate`."""
        if self._closed:
            raise ModelError(f"{self.name}: complete() after aclose()")
        check_constraint(config)
        started = time.perf_counter()
        _, tokenizer = await _load()
        ids = list(tokenizer(prompt)["input_ids"])
        if not ids:
            raise ModelError(f"{self.name}: the prompt is empty after tokenisation")
        extra = {"adapter": self.adapter_hash} if self.adapter_hash else {}
        return await self._run(ids, config, raw_prompt_hash(self.name, prompt, config, extra), started)

    async def _run(self, ids: list[int], config: GenerateConfig, key: str, started: float) -> ModelOutput:
        from preft.engine import Request
        from preft.serving import server

        model, tokenizer = load_model()  # the caller loaded it: this returns the shared pair
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
        constraint = await asyncio.to_thread(engine_constraint, config, model, tokenizer)
        req = Request(prompt_ids=ids, max_new_tokens=min(int(config.max_tokens), CONTEXT_WINDOW - len(ids)),
                      adapter=adapter, mode=self.mode if adapter else "base", temperature=config.temperature,
                      top_p=config.top_p, seed=DEFAULT_SEED if config.seed is None else int(config.seed),
                      stop_ids=stop_ids, stop_check=hit_stop if stops else None, constraint=constraint)
        try:
            done = await asyncio.wrap_future(engine.submit(req))
        except asyncio.CancelledError:
            req.cancelled = True  # a timeout or Ctrl-C: free the batch slot at the next step
            raise
        except Exception as exc:  # noqa: BLE001 - the worker's failure becomes this call's error
            raise ModelError(f"{self.name} failed: {type(exc).__name__}: {exc}") from exc
        if done.finish_reason == "error":
            raise ModelError(f"{self.name}: the output constraint allowed no next token after "
                             f"{len(done.output_ids) - 1} tokens")
        text = trim_at_stop(tokenizer.decode(visible_ids(done.output_ids, stop_ids), skip_special_tokens=True), stops)[0]
        out = ModelOutput(
            text=text, finish_reason=done.finish_reason or "length",
            usage=Usage(prompt_tokens=len(ids), completion_tokens=len(done.output_ids), calls=1),
            latency_s=time.perf_counter() - started, request_hash=key,
            constrained_by="provider" if constraint is not None else "none")
        return read_tool_call(out, config)

    async def aclose(self) -> None:
        """Stops this instance; the shared weights and engine stay for other instances."""
        self._closed = True


# -- constraints ---------------------------------------------------------------------------------

def output_form(config: GenerateConfig) -> tuple[str, Any] | None:
    """(kind, spec) of the constraint the engine enforces for `config`, or None (free text)."""
    if config.json_schema is not None:
        return "json_schema", config.json_schema
    if config.choice is not None:
        return "choice", list(config.choice)
    if config.regex is not None:
        return "regex", config.regex
    if config.forced_tool:
        return "json_schema", tool_call_schema(list(config.tools or []), config.tool_choice)
    return None


def engine_constraint(config: GenerateConfig, model: Any, tokenizer: Any) -> Any:
    """A fresh `TokenConstraint` for one request, or None; `ConstraintError` when xgrammar cannot
    build the grammar. Compiled grammars are cached per (kind, spec) for the process."""
    form = output_form(config)
    if form is None:
        return None
    from preft.constrain import shared_grammars

    width = int(model.get_output_embeddings().weight.shape[0])  # the logits row, padding included
    return shared_grammars(tokenizer, width, stop_token_ids(model, tokenizer)).constraint(*form)
