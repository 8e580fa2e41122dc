"""Resident adapter slots with LRU eviction, the way serving engines hold LoRA weights.

Adapters are registered on the host (any number). A request that needs an adapter must `acquire`
a slot: a hit if its adapter is resident, else the least recently used unheld slot is overwritten
(an eviction and a load). When every slot is held by running requests, `acquire` returns None and
the scheduler must wait -- the slot pressure that all-token serving pays for and PreFT avoids,
because a PreFT request releases its slot as soon as its prefill is done.
"""

from __future__ import annotations

import collections
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import torch

from preft.adapters import AdapterError, LoraAdapter, ReftAdapter, _projection_dims
from preft.model import PROJECTIONS, LoraWeights, ReftWeights


@dataclass
class SlotStats:
    hits: int = 0
    loads: int = 0
    evictions: int = 0
    waits: int = 0  # acquire calls refused because every slot was held


class SlotTable:
    """Which adapter sits in which slot, who holds it, and the LRU order. Knows nothing of tensors.

    `decode_slots` (default: all of them): how many slots may be held *past a prefill step* (by
    all-token requests, whose adapter acts on every decode step). A prefill-only hold lasts one step.
    With alias slots the table has more slots than `max_loras` (see `LoraStore`), and this keeps
    all-token at `max_loras` adapters held through decoding, as before."""

    def __init__(self, slots: int, decode_slots: int | None = None) -> None:
        if slots < 1:
            raise ValueError("max slots must be at least 1")
        self.slots = slots
        self.decode_slots = slots if decode_slots is None else min(decode_slots, slots)
        if self.decode_slots < 1:
            raise ValueError("decode slots must be at least 1")
        self.resident: dict[str, int] = {}
        self.holders = [0] * slots
        self.decode_holders = [0] * slots  # holds that last past the prefill step
        self.lru: collections.OrderedDict[int, None] = collections.OrderedDict((i, None) for i in range(slots))
        self.stats = SlotStats()
        self.touched: set[str] = set()  # every adapter that ever got a slot (distinct adapters served)

    def acquire(self, name: str, through_decode: bool = False) -> tuple[int, bool] | None:
        """(slot, needs_load) with the slot held once more, or None when every slot is held (or,
        `through_decode`, when `decode_slots` slots are already held through decoding and this
        adapter's slot is not one of them)."""
        slot = self.resident.get(name)
        decode_full = through_decode and self.decode_held() >= self.decode_slots
        if slot is not None and not (decode_full and self.decode_holders[slot] == 0):
            self.touched.add(name)
            self.stats.hits += 1
            self._hold(slot, through_decode)
            return slot, False
        victim = None if decode_full else next((s for s in self.lru if self.holders[s] == 0), None)
        if victim is None:
            self.stats.waits += 1
            return None
        old = next((n for n, s in self.resident.items() if s == victim), None)
        if old is not None:
            del self.resident[old]
            self.stats.evictions += 1
        self.resident[name] = victim
        self.touched.add(name)
        self.stats.loads += 1
        self._hold(victim, through_decode)
        return victim, True

    def release(self, slot: int, through_decode: bool = False) -> None:
        if self.holders[slot] <= 0 or (through_decode and self.decode_holders[slot] <= 0):
            raise RuntimeError(f"slot {slot} released more often than acquired")
        self.holders[slot] -= 1
        self.decode_holders[slot] -= int(through_decode)

    def held(self) -> int:
        return sum(1 for h in self.holders if h > 0)

    def decode_held(self) -> int:
        return sum(1 for h in self.decode_holders if h > 0)

    def _hold(self, slot: int, through_decode: bool) -> None:
        self.holders[slot] += 1
        self.decode_holders[slot] += int(through_decode)
        self.lru.move_to_end(slot)


AdapterT = TypeVar("AdapterT", LoraAdapter, ReftAdapter)


class AdapterStore(ABC, Generic[AdapterT]):
    """Registered adapters of one kind and `slots` resident slots of stacked weights. Subclasses say
    how weights are laid out (`_allocate`), checked against the base model (`_check`) and loaded
    into a slot (`_write`)."""

    kind = "adapter"

    def __init__(self, config: Any, slots: int, max_rank: int, device: torch.device | str = "cpu",
                 dtype: torch.dtype = torch.float32, decode_slots: int | None = None) -> None:
        self.config, self.device, self.dtype = config, torch.device(device), dtype
        self.table = SlotTable(slots, decode_slots)
        self.adapters: dict[str, AdapterT] = {}
        self._allocate(max_rank)

    def register(self, adapter: AdapterT) -> None:
        self._check(adapter)
        if adapter.rank > self.max_rank:
            if self.table.held():
                raise AdapterError(f"{self.kind} adapter {adapter.name!r} has rank {adapter.rank} > the engine's max "
                                   f"rank {self.max_rank} while adapters are in use: start it with a larger max rank")
            self._allocate(adapter.rank)  # nothing held: widen the slots; residents reload on next use
            self.table.resident.clear()
        self.adapters[adapter.name] = adapter

    def acquire(self, name: str, through_decode: bool = False) -> int | None:
        """A slot holding adapter `name` (loaded if it was not resident), or None if all are held.
        `through_decode`: the hold lasts past the prefill step (all-token), see `SlotTable`."""
        if name not in self.adapters:
            raise AdapterError(f"unknown {self.kind} adapter {name!r}: register it first")
        got = self.table.acquire(name, through_decode)
        if got is None:
            return None
        slot, needs_load = got
        if needs_load:
            self._write(slot, self.adapters[name])
        return slot

    def release(self, slot: int, through_decode: bool = False) -> None:
        self.table.release(slot, through_decode)

    max_rank: int  # set by `_allocate`

    @abstractmethod
    def _allocate(self, rank: int) -> None:
        """(Re)create zeroed slot stacks of `rank` and set `self.max_rank`."""

    @abstractmethod
    def _check(self, adapter: AdapterT) -> None:
        """Raise AdapterError if the adapter does not fit the base model."""

    @abstractmethod
    def _write(self, slot: int, adapter: AdapterT) -> None:
        """Load the adapter's weights into `slot`."""


def prefill_slots(max_loras: int, max_prefill_loras: int | None, alias: bool) -> int:
    """How many distinct LoRA adapters one prefill step may use (the slot table's size).

    The rule: slots that copy weights (a GPU, or the stacked CPU layout) cost memory, so there are
    `max_loras` of them and nothing more may be asked. Alias slots copy nothing (a slot refers to
    the host adapter), so `max_prefill_loras` may raise the count up to a batch's worth without
    memory cost. Its default is `max_loras` all the same: on this CPU prefill steps of 64 distinct
    adapters were measured slower than steps capped at 8, in spite of fewer steps (docs/preft.md,
    sessions 14 and 16). Either way at most `max_loras` slots are held through decoding (all-token)."""
    if max_prefill_loras is None or max_prefill_loras <= max_loras:
        return max_loras
    if not alias:
        raise ValueError(f"max_prefill_loras {max_prefill_loras} > max_loras {max_loras} needs alias slots "
                         "(slots that copy weights cost memory: raise max_loras instead)")
    return max_prefill_loras


class LoraStore(AdapterStore[LoraAdapter]):
    """LoRA slots: per (layer, projection) A [slots, in, r], B [slots, r, out], scales [slots].

    `alias` (default: on the CPU with the `segmented` backend): a slot *refers to* the adapter's own
    host tensors instead of holding a copy. On a CPU host memory is the compute memory, so copying
    20 MB into a stacked slot buys nothing; the inference op reads each slot's tensors directly.
    The slot table (hits, loads, evictions, holds, waits) works the same either way; its size is
    `prefill_slots(max_loras, max_prefill_loras, alias)`, with at most `max_loras` slots held
    through decoding. The stacked layout stays for the Triton/BGMV path (one tensor indexed by slot) and on
    a GPU, where a load is a real host-to-device copy."""

    kind = "LoRA"

    def __init__(self, config: Any, max_loras: int, max_rank: int, backend: str = "segmented",
                 device: torch.device | str = "cpu", dtype: torch.dtype = torch.float32,
                 alias: bool | None = None, max_prefill_loras: int | None = None) -> None:
        self.backend = backend
        self.alias = (torch.device(device).type == "cpu" and backend == "segmented") if alias is None else alias
        if self.alias and backend != "segmented":
            raise ValueError(f"alias slots need the segmented LoRA backend, not {backend!r}")
        self.max_loras = max_loras
        super().__init__(config, prefill_slots(max_loras, max_prefill_loras, self.alias), max_rank, device, dtype,
                         decode_slots=max_loras)

    def _allocate(self, rank: int) -> None:
        """Zeroed stacks of `rank` columns; slots padded to the largest rank (padding adds nothing).
        Alias slots allocate nothing: each slot points at its adapter's modules."""
        slots, dims = self.table.slots, _projection_dims(self.config)
        layers = range(int(self.config.num_hidden_layers))
        self.max_rank = rank
        if self.alias:
            self.weights = LoraWeights(A={}, B={}, scales={}, backend=self.backend, slot_modules=[None] * slots)
            return
        dev, dt = self.device, self.dtype
        self.weights = LoraWeights(
            A={(l, p): torch.zeros(slots, dims[p][0], rank, device=dev, dtype=dt) for l in layers for p in PROJECTIONS},
            B={(l, p): torch.zeros(slots, rank, dims[p][1], device=dev, dtype=dt) for l in layers for p in PROJECTIONS},
            scales={(l, p): torch.zeros(slots, device=dev) for l in layers for p in PROJECTIONS},
            backend=self.backend)

    def bytes(self) -> int:
        return sum(t.numel() * t.element_size() for d in (self.weights.A, self.weights.B) for t in d.values())

    def _check(self, adapter: LoraAdapter) -> None:
        dims = _projection_dims(self.config)
        for (layer, proj), (A, B, _) in adapter.modules.items():
            if layer >= int(self.config.num_hidden_layers) or (A.shape[0], B.shape[1]) != dims[proj]:
                raise AdapterError(f"adapter {adapter.name!r}: layer {layer} {proj} has shape "
                                   f"{tuple(A.shape[:1]) + tuple(B.shape[1:])}, the base model needs {dims[proj]}")

    def _write(self, slot: int, adapter: LoraAdapter) -> None:
        """Copy the adapter in; zero only what it does not cover (rank padding, untargeted modules),
        so a load writes each byte of the slot once. Alias slots keep a reference (converted only
        if the adapter's dtype is not the model's)."""
        w = self.weights
        if self.alias:
            assert w.slot_modules is not None
            modules = adapter.modules
            if all(A.dtype == B.dtype == self.dtype for A, B, _ in modules.values()):
                w.slot_modules[slot] = modules  # the adapter's own table: a load copies nothing
            else:
                w.slot_modules[slot] = {key: (A.to(self.dtype), B.to(self.dtype), float(scale))
                                        for key, (A, B, scale) in modules.items()}
            return
        for key in w.A:
            module = adapter.modules.get(key)
            if module is None:
                w.A[key][slot].zero_()
                w.B[key][slot].zero_()
                w.scales[key][slot] = 0.0
                continue
            A, B, scale = module
            r = A.shape[1]
            w.A[key][slot, :, :r] = A
            w.B[key][slot, :r] = B
            if r < self.max_rank:
                w.A[key][slot, :, r:].zero_()
                w.B[key][slot, r:].zero_()
            w.scales[key][slot] = scale


class ReftStore(AdapterStore[ReftAdapter]):
    """ReFT slots: all interventions of one adapter in one slot; per layer R/W [slots, r, d], b [slots, r]."""

    kind = "ReFT"

    def _allocate(self, rank: int) -> None:
        slots, d, layers = self.table.slots, int(self.config.hidden_size), int(self.config.num_hidden_layers)
        self.max_rank = rank
        dev, dt = self.device, self.dtype
        self.weights = ReftWeights(
            R={l: torch.zeros(slots, rank, d, device=dev, dtype=dt) for l in range(layers)},
            W={l: torch.zeros(slots, rank, d, device=dev, dtype=dt) for l in range(layers)},
            b={l: torch.zeros(slots, rank, device=dev, dtype=dt) for l in range(layers)},
            active=torch.zeros(slots, layers, dtype=torch.bool, device=dev),
            kinds=["loreft"] * slots)

    def _check(self, adapter: ReftAdapter) -> None:
        for layer, (R, _, _) in adapter.layers.items():
            if layer >= int(self.config.num_hidden_layers) or R.shape[1] != int(self.config.hidden_size):
                raise AdapterError(f"ReFT adapter {adapter.name!r}: layer {layer} does not fit the base model")

    def _write(self, slot: int, adapter: ReftAdapter) -> None:
        w = self.weights
        w.active[slot] = False
        w.kinds[slot] = adapter.kind
        for layer, (R, W, b) in adapter.layers.items():
            # zero-padded rank rows leave both formulas unchanged
            for stack, t in ((w.R, R), (w.W, W)):
                stack[layer][slot].zero_()
                stack[layer][slot, : t.shape[0]] = t
            w.b[layer][slot].zero_()
            w.b[layer][slot, : b.shape[0]] = b
            w.active[slot, layer] = True
