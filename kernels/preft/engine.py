"""The local multi-adapter engine: continuous batching over one base model with a KV pool.

Each `step()` admits waiting requests (KV rows, a prefill token budget and adapter slots allowing;
first come, first served, with an adapter's later requests admitted right after its first one,
`_grouped_by_adapter`), runs ONE forward over the flat tokens of every new prompt and one token of
every running request, samples, and retires finished requests. Modes, per request:

- `base`:      no adapter anywhere.
- `preft`:     the adapter acts on the prompt's tokens only (LoRA on every prompt token; ReFT on its
               first-n/last-m prompt positions). The request gives its adapter slot back right
               after its prefill step, so decoding requests never hold slots. With alias LoRA slots
               (CPU) `max_prefill_loras` lets more distinct adapters than `max_loras` prefill in
               one step (`store.prefill_slots`; off by default: measured slower here).
- `all-token`: the adapter also acts on every generated token (LoRA everywhere, ReFT on every
               position) and the request holds its slot until it finishes -- with many adapters
               and few slots, requests wait for slots, the cost serving engines pay.

A request may carry an output constraint (`TokenConstraint`: a JSON schema, regex or choice,
implemented with xgrammar in `constrain.py`): the engine masks that request's logits row before
choosing its token and advances the constraint after, and the request stops once the constraint
has finished. Rows without a constraint are not touched.
"""

from __future__ import annotations

import collections
import itertools
import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

# OpenMP threads that wait passively (sleep) instead of spinning: with a busy neighbour on one of
# the cores, spinning threads steal the time the thread doing the work needs (a several-fold
# slowdown, see kernels/README.md). libgomp reads this once, when torch loads it, so it must be set
# before the first `import torch` of the embedded model's process -- this module is that import for
# the provider, `harness generate` and the engine server. setdefault: a value the user set wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch  # after the setting above

from harness.providers.sampling import pick_token
from preft.adapters import Adapter, AdapterError, LoraAdapter, ReftAdapter
from preft.grad import inference_mode
from preft.model import KVPool, PreftModel, Span
from preft.store import LoraStore, ReftStore

MODES = ("base", "preft", "all-token")


class TokenConstraint(Protocol):
    """What the engine asks of a request's output constraint (one instance per request; its state
    advances with the request's tokens). `preft.constrain` implements it with xgrammar."""

    def mask(self, logits: torch.Tensor) -> None:
        """Set the logits of the tokens not allowed next to -inf, in place (one row [V])."""

    def accept(self, token: int) -> bool:
        """Advance past the chosen token; False when the constraint rejects it."""

    @property
    def finished(self) -> bool:
        """The output is complete (the grammar has accepted its end)."""


@dataclass
class Request:
    prompt_ids: list[int]
    max_new_tokens: int
    adapter: str | None = None
    mode: str = "preft"
    temperature: float = 0.0
    top_p: float | None = None
    seed: int = 0
    stop_ids: frozenset[int] = frozenset()
    stop_check: Callable[[list[int]], bool] | None = None  # e.g. stop strings, decided by the caller
    constraint: TokenConstraint | None = None  # the reply's form (schema, regex, choice), enforced per token
    # filled by the engine
    id: int = -1
    output_ids: list[int] = field(default_factory=list)
    finish_reason: str | None = None
    arrival: float = 0.0
    first_token_at: float | None = None
    finished_at: float | None = None
    # the last-position logits of every step, when the engine keeps them (checks against references)
    logits: list[torch.Tensor] = field(default_factory=list)
    # set from any thread when nobody waits for the answer any more (a timed-out caller): the
    # engine drops the request at its next step instead of generating for nobody
    cancelled: bool = False

    @property
    def done(self) -> bool:
        return self.finish_reason is not None


@dataclass
class _Running:
    req: Request
    row: int
    generator: torch.Generator | None  # set when the request is admitted
    lora_slot: int = -1
    reft_slot: int = -1
    reft_positions: frozenset[int] = frozenset()
    prefilled: bool = False

    @property
    def length(self) -> int:  # tokens in the KV cache after this step's writes
        return len(self.req.prompt_ids) + len(self.req.output_ids)


@dataclass
class EngineStats:
    steps: int = 0
    prefill_tokens: int = 0
    decode_tokens: int = 0
    slot_waits: int = 0  # steps on which a request waited for an adapter slot
    max_running: int = 0
    max_running_adapters: int = 0  # distinct adapters among running requests (all-token: <= slots)
    batch_sizes: collections.deque[int] = field(default_factory=lambda: collections.deque(maxlen=1000))  # per step


def resolve_backend(backend: str, device: torch.device) -> str:
    """`auto`: the per-run `segmented` op on a CPU; the Triton kernels on a GPU (when triton imports)."""
    if backend != "auto":
        return backend
    if device.type == "cuda":
        import importlib.util

        return "triton" if importlib.util.find_spec("triton") is not None else "segmented"
    return "segmented"


class Engine:
    def __init__(self, hf_model: Any, *, max_num_seqs: int = 64, max_loras: int = 8, max_lora_rank: int = 16,
                 max_refts: int = 8, max_reft_rank: int = 8, max_prefill_tokens: int = 2048,
                 lora_backend: str = "auto", kv_cache_bytes: int = 4 << 30, keep_logits: bool = False,
                 lora_alias: bool | None = None, max_prefill_loras: int | None = None) -> None:
        self.model = PreftModel(hf_model)
        self.config = hf_model.config
        # Everything lives where the model's weights are (KV pool, adapter slots, per-step index
        # tensors) and in their dtype (bf16 on a GPU); logits come back to the host for sampling.
        self.device, self.dtype = self.model.device, self.model.dtype
        self.lora_backend = resolve_backend(lora_backend, self.device)
        self.max_num_seqs, self.max_prefill_tokens = max_num_seqs, max_prefill_tokens
        # Distinct adapters per prefill step: `max_loras`, or `max_prefill_loras` (more) where slots
        # alias host tensors (CPU); `max_loras` is the cap held through decoding (`store.prefill_slots`).
        self.loras = LoraStore(self.config, max_loras, max_lora_rank, backend=self.lora_backend,
                               device=self.device, dtype=self.dtype, alias=lora_alias,
                               max_prefill_loras=max_prefill_loras)
        self.refts = ReftStore(self.config, max_refts, max_reft_rank, device=self.device, dtype=self.dtype)
        self.pool = KVPool(self.config, dtype=self.dtype, device=self.device)
        self.kv_cache_bytes = kv_cache_bytes  # like vLLM's KV cache space: bounds rows x capacity
        self.keep_logits = keep_logits
        self.waiting: list[Request] = []
        self.running: list[_Running] = []  # running[i] owns KV row i: rows stay contiguous
        self.stats = EngineStats()
        self._ids = itertools.count()
        self._dropped: list[Request] = []  # cancelled before admission, reported by the next step

    # -- adapters and requests -----------------------------------------------------------------

    def register(self, adapter: Adapter) -> None:
        if isinstance(adapter, LoraAdapter):
            self.loras.register(adapter)
        elif isinstance(adapter, ReftAdapter):
            self.refts.register(adapter)
        else:
            raise AdapterError(f"not an adapter: {type(adapter).__name__}")

    def add(self, req: Request) -> Request:
        if req.mode not in MODES:
            raise ValueError(f"mode {req.mode!r}: use one of {MODES}")
        if not req.prompt_ids:
            raise ValueError("empty prompt: a request needs at least one prompt token")
        if req.mode != "base" and req.adapter is None:
            req.mode = "base"
        if req.mode != "base" and req.adapter not in self.loras.adapters and req.adapter not in self.refts.adapters:
            raise AdapterError(f"unknown adapter {req.adapter!r}: register it before adding requests")
        req.id, req.arrival = next(self._ids), time.perf_counter()
        if req.max_new_tokens <= 0:
            req.finish_reason, req.finished_at = "length", req.arrival
            return req
        self.waiting.append(req)
        return req

    def reserve_kv(self, rows: int, tokens: int) -> None:
        """Grow the KV pool now to `rows` sequences of `tokens` positions, the way a server sizes
        its cache at start (vLLM allocates its whole KV cache up front), so serving does not pay
        for growing it. Must fit `kv_cache_bytes`; the pool still grows on demand beyond it."""
        rows = min(rows, self.max_num_seqs)
        if rows < 1 or tokens < 1:
            raise ValueError(f"reserve_kv({rows}, {tokens}): rows and tokens must be at least 1")
        if not self._grown_pool_fits(tokens, rows):
            raise ValueError(f"reserve_kv: {rows} rows x {tokens} positions exceed kv_cache_bytes "
                             f"{self.kv_cache_bytes}: reserve fewer, or give the engine more KV bytes")
        self.pool.ensure(tokens, rows)

    def has_work(self) -> bool:
        return bool(self.waiting or self.running)

    def run(self, requests: list[Request]) -> list[Request]:
        """Offline: add every request, step until all finish, return them in order."""
        for req in requests:
            self.add(req)
        while self.has_work():
            self.step()
        return requests

    # -- one scheduler step --------------------------------------------------------------------

    @inference_mode
    def step(self) -> list[Request]:
        admitted = self._admit()
        dropped, self._dropped = self._dropped, []
        # Prompts of one adapter side by side: their tokens form one run, one LoRA op per projection.
        batch = [r for r in self.running if r.prefilled] + sorted(admitted, key=lambda r: r.lora_slot)
        if not batch:
            return dropped
        tokens: list[int] = []
        spans: list[Span] = []
        lora_idx: list[int] = []
        reft_idx: list[int] = []
        for r in batch:
            if r.prefilled:
                ids, past = [r.req.output_ids[-1]], r.length - 1
                positions = [past]
                adapted = r.req.mode == "all-token"
            else:
                ids, past = r.req.prompt_ids, 0
                positions = list(range(len(ids)))
                adapted = r.req.mode != "base"
            spans.append(Span(slot=r.row, start=len(tokens), count=len(ids), past=past))
            tokens.extend(ids)
            lora_idx.extend([r.lora_slot if adapted else -1] * len(ids))
            every = r.req.mode == "all-token"
            reft_idx.extend([r.reft_slot if adapted and (every or p in r.reft_positions) else -1 for p in positions])
        dev = self.device
        logits = self.model.forward_cached(
            torch.tensor(tokens, device=dev), spans, self.pool,
            lora=self.loras.weights, lora_idx=torch.tensor(lora_idx, device=dev),
            reft=self.refts.weights, reft_idx=torch.tensor(reft_idx, device=dev)).cpu()
        self.stats.steps += 1
        self.stats.batch_sizes.append(len(batch))
        self.stats.prefill_tokens += sum(len(r.req.prompt_ids) for r in admitted)
        self.stats.decode_tokens += len(batch) - len(admitted)
        now = time.perf_counter()
        finished = []
        for r, row_logits in zip(batch, logits):
            req = r.req
            if self.keep_logits:
                req.logits.append(row_logits.clone())  # before any mask: the model's own logits
            if req.constraint is not None:
                req.constraint.mask(row_logits)
            token = pick_token(row_logits, req.temperature, req.top_p, r.generator)
            req.output_ids.append(token)
            rejected = req.constraint is not None and not req.constraint.accept(token)
            if req.first_token_at is None:
                req.first_token_at = now
            if not r.prefilled:
                r.prefilled = True
                if req.mode == "preft":  # the adapter's work is done: give the slot back
                    self._release_slots(r)
            if req.cancelled:
                req.finish_reason = "cancelled"
            elif rejected:  # only if the mask allowed nothing: the caller reports it as an error
                req.finish_reason = "error"
            elif token in req.stop_ids:
                req.finish_reason = "stop"
            elif req.constraint is not None and req.constraint.finished:
                req.finish_reason = "stop"
            elif req.stop_check is not None and req.stop_check(req.output_ids):
                req.finish_reason = "stop"
            elif len(req.output_ids) >= req.max_new_tokens:
                req.finish_reason = "length"
            if req.done:
                req.finished_at = now
                finished.append(r)
        for r in finished:
            self._retire(r)
        return dropped + [r.req for r in finished]

    def _admit(self) -> list[_Running]:
        admitted: list[_Running] = []
        budget = self.max_prefill_tokens
        still_waiting: list[Request] = []
        waited = False
        # (store, through decode) pairs that refused a slot: holders only grow while admitting
        full: set[tuple[str, bool]] = set()
        for req in _grouped_by_adapter(self.waiting):
            if req.cancelled:
                req.finish_reason, req.finished_at = "cancelled", time.perf_counter()
                self._dropped.append(req)
                continue
            if len(self.running) >= self.max_num_seqs or (full and self._refused_fast(req, full)):
                # With hundreds of adapters and few slots most of the queue is refused every step;
                # deciding that without building anything keeps the scan's cost per request small.
                still_waiting.append(req)
                continue
            n = len(req.prompt_ids)
            room = len(self.running) < self.max_num_seqs and (n <= budget or not admitted) and self._kv_fits(req)
            if not room:
                still_waiting.append(req)
                continue
            r = _Running(req=req, row=len(self.running), generator=None)
            if not self._acquire_slots(r):
                waited = True
                full.add(("lora" if r.req.adapter in self.loras.adapters else "reft", r.req.mode == "all-token"))
                still_waiting.append(req)  # keep its place; later requests may use other slots
                continue
            # made only once admitted: with many adapters and few slots hundreds of requests are
            # refused a slot per step, and a generator per refusal was a measurable part of a step
            r.generator = torch.Generator().manual_seed(req.seed & (2**63 - 1))
            self.pool.ensure(n + req.max_new_tokens, len(self.running) + 1)
            self.running.append(r)
            admitted.append(r)
            budget -= n
        self.waiting = still_waiting
        self.stats.slot_waits += int(waited)
        self.stats.max_running = max(self.stats.max_running, len(self.running))
        adapters = len({r.req.adapter for r in self.running if r.req.adapter is not None})
        self.stats.max_running_adapters = max(self.stats.max_running_adapters, adapters)
        return admitted

    def _refused_fast(self, req: Request, full: set[tuple[str, bool]]) -> bool:
        """Once every slot of a store is held this step (or every slot it may hold through decoding,
        for an all-token request), a request for that store is refused unless its adapter is
        resident; counted as a refusal, as `acquire` would have counted it."""
        if req.mode == "base" or req.adapter is None:
            return False
        kind = "lora" if req.adapter in self.loras.adapters else "reft"
        store = self.loras if kind == "lora" else self.refts
        refused = (kind, False) in full or (kind, req.mode == "all-token") in full
        if not refused or req.adapter in store.table.resident:
            return False
        store.table.stats.waits += 1
        return True

    def _kv_fits(self, req: Request) -> bool:
        """Would the pool, grown for one more row of this request's length, stay in the KV budget?
        The first running request is always admitted (a lone request larger than the budget runs)."""
        if not self.running:
            return True
        return self._grown_pool_fits(len(req.prompt_ids) + req.max_new_tokens, len(self.running) + 1)

    def _grown_pool_fits(self, tokens: int, rows: int) -> bool:
        """Would the pool after `ensure(tokens, rows)` stay within `kv_cache_bytes`?"""
        rows_after, capacity = self.pool.grown(tokens, rows)
        return bool(rows_after * capacity * self.pool.bytes_per_token() <= self.kv_cache_bytes)

    def _acquire_slots(self, r: _Running) -> bool:
        name = r.req.adapter
        if r.req.mode == "base" or name is None:
            return True
        through_decode = r.req.mode == "all-token"
        if name in self.loras.adapters:
            slot = self.loras.acquire(name, through_decode)
            if slot is None:
                return False
            r.lora_slot = slot
        else:
            slot = self.refts.acquire(name, through_decode)
            if slot is None:
                return False
            r.reft_slot = slot
            r.reft_positions = frozenset(self.refts.adapters[name].positions(len(r.req.prompt_ids)))
        return True

    def _release_slots(self, r: _Running) -> None:
        through_decode = r.req.mode == "all-token"
        if r.lora_slot >= 0:
            self.loras.release(r.lora_slot, through_decode)
        if r.reft_slot >= 0:
            self.refts.release(r.reft_slot, through_decode)
        r.lora_slot = r.reft_slot = -1

    def _retire(self, r: _Running) -> None:
        """Free r's KV row; the last running request moves into it so live rows stay contiguous."""
        self._release_slots(r)
        last = self.running.pop()
        if last is not r:
            self.pool.move(last.row, r.row, last.length)
            last.row = r.row
            self.running[r.row] = last


def _grouped_by_adapter(waiting: list[Request]) -> list[Request]:
    """The admission order: first come, first served, except that an adapter's later requests
    follow its first waiting one. Admitted together, requests of one adapter form one run of one
    LoRA op per projection and read the adapter's weights once (the cost that grows with distinct
    adapters), instead of one run per request spread over several steps. No request waits behind
    more than the groups that started before it; requests without an adapter keep their place."""
    groups: dict[str, list[Request]] = {}
    order: list[list[Request]] = []
    for req in waiting:
        if req.mode == "base" or req.adapter is None:
            order.append([req])
            continue
        group = groups.get(req.adapter)
        if group is None:
            group = groups[req.adapter] = []
            order.append(group)
        group.append(req)
    return [req for group in order for req in group]
