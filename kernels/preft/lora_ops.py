"""Multi-adapter LoRA: `y = x W + s_i * (x A_i) B_i` where `i` is chosen per token.

Shapes (one projection layer; tokens of many requests flattened into one batch):
    x        [N, d_in]        activations
    idx      [N] int64        adapter slot per token, -1 = no adapter
    A        [S, d_in, r]     stacked down-projections of the S resident slots
    B        [S, r, d_out]    stacked up-projections
    scales   [S]              lora_alpha / r (or / sqrt(r) for rsLoRA) per slot
Adapters of smaller rank are zero-padded to r, which leaves the result unchanged.

The functions return only the LoRA delta `s_i (x A_i) B_i` (zero rows where idx == -1); callers add
it to the base projection `x W`, so the base matmul stays one dense GEMM for the whole batch.
The in-place inference ops (`lora_add_*_`) add it into the base output instead: per run of one
adapter (`lora_add_runs_`, `lora_add_module_runs_`, the exact per-run path), or for the runs of
many adapters in one batched GEMM pair (`lora_add_gathered_`; opt-in: stacking the adapters'
weights costs more than the per-run calls it saves on this CPU at rank 16, docs/preft.md).
"""

from __future__ import annotations

import functools
from typing import Any

import torch


def lora_delta_reference(x: torch.Tensor, idx: torch.Tensor, A: torch.Tensor, B: torch.Tensor,
                         scales: torch.Tensor) -> torch.Tensor:
    """The plain definition, one token at a time. Slow; it is what every other version must equal."""
    out = torch.zeros(x.shape[0], B.shape[-1], dtype=x.dtype, device=x.device)
    for t in range(x.shape[0]):
        i = int(idx[t])
        if i >= 0:
            out[t] = scales[i] * ((x[t] @ A[i]) @ B[i])
    return out


def lora_delta_segmented(x: torch.Tensor, idx: torch.Tensor, A: torch.Tensor, B: torch.Tensor,
                         scales: torch.Tensor) -> torch.Tensor:
    """Group tokens by adapter and run two small GEMMs per adapter present (SGMV-style).

    Cost is one gather/scatter of the adapted rows plus 2 GEMMs per distinct adapter in the batch,
    so a batch with no adapted tokens (every decode step in PreFT mode) costs nothing here.
    """
    out = torch.zeros(x.shape[0], B.shape[-1], dtype=x.dtype, device=x.device)
    adapted = idx >= 0
    if not bool(adapted.any()):
        return out
    rows = torch.nonzero(adapted, as_tuple=True)[0]
    slots = idx[rows]
    order = torch.argsort(slots, stable=True)
    rows, slots = rows[order], slots[order]
    present, counts = torch.unique_consecutive(slots, return_counts=True)
    start = 0
    for slot, count in zip(present.tolist(), counts.tolist()):
        seg = rows[start:start + count]
        start += count
        out[seg] = ((x[seg] @ A[slot]) @ B[slot]) * scales[slot]
    return out


def adapter_runs(idx: torch.Tensor) -> list[tuple[int, int, int]]:
    """Maximal runs [start, end) of consecutive tokens that share one adapter slot (>= 0).

    A request's prompt is contiguous in the flat batch, so a prefill batch has one run per adapted
    request; the runs are computed once per forward and reused by every projection."""
    if idx.numel() == 0:
        return []
    change = torch.nonzero(idx[1:] != idx[:-1], as_tuple=True)[0] + 1
    bounds = [0, *change.tolist(), idx.numel()]
    slots = idx[bounds[:-1]].tolist()
    return [(a, b, s) for a, b, s in zip(bounds[:-1], bounds[1:], slots) if s >= 0]


def lora_add_runs_(y: torch.Tensor, x: torch.Tensor, runs: list[tuple[int, int, int]], A: torch.Tensor,
                   B: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """Add the LoRA delta into the base output y in place, run by run: the scale goes on the small
    [n, r] intermediate and `addmm_` accumulates straight into y, so no [N, d_out] temporary is
    zero-filled, scattered or added (those full passes cost more than the LoRA GEMMs themselves).
    Inference only: in-place writes are not for tensors autograd must differentiate."""
    for start, end, slot in runs:
        xa = x[start:end] @ A[slot]
        xa.mul_(scales[slot])
        y[start:end].addmm_(xa, B[slot])
    return y


def lora_add_module_runs_(y: torch.Tensor, x: torch.Tensor, runs: list[tuple[int, int, int]],
                          slot_modules: list[dict[tuple[int, str], Any] | None], key: tuple[int, str]) -> torch.Tensor:
    """`lora_add_runs_` over alias slots: slot s's weights for projection `key` are
    `slot_modules[s][key]` = (A [in, r], B [r, out], scale), or absent when that adapter does not
    target the projection (the run adds nothing). Inference only, in place."""
    for start, end, slot in runs:
        modules = slot_modules[slot]
        module = modules.get(key) if modules is not None else None
        if module is None:
            continue
        A, B, scale = module
        y[start:end].addmm_(x[start:end] @ A, B, alpha=scale)  # the scale rides on addmm: no extra pass
    return y


# Below this many runs in a projection the per-run loop is used (one run: nothing to batch).
GATHER_MIN_RUNS = 2
# A group of runs is padded to its longest run; a run joins a group only while the padded size stays
# within this factor of the group's real tokens (else it starts a new group).
PAD_LIMIT = 1.5


def lora_add_gathered_(y: torch.Tensor, x: torch.Tensor, runs: list[tuple[int, int, int]],
                       slot_modules: list[dict[tuple[int, str], Any] | None], key: tuple[int, str]) -> torch.Tensor:
    """`lora_add_module_runs_` with the runs of many adapters in one batched GEMM pair per group:
    each group's A and B matrices are stacked ([G, in, r], [G, r, out]), its runs' tokens gathered
    into [G, n, in] (padded to the longest run, pad rows scaled to zero) and `torch.bmm` does the
    shrink and the expand; the result is added into y in place. Runs of equal length that sit side
    by side (a prefill of same-length prompts) are a view of x and y: nothing is gathered or
    scattered. Groups: same rank, padding within `PAD_LIMIT`; a group of one run, or fewer than
    `GATHER_MIN_RUNS` runs in all, takes the per-run op. Equal to the per-run op up to float
    rounding (tested). Opt-in (`LoraWeights.gather`): on this CPU (rank 16, 1-64 runs of 16 tokens)
    the copies of `torch.stack` cost more than the per-run calls save; it won only in isolation at
    d=256 with 4-16 runs, and lost end to end (docs/preft.md, session 14). Inference only, in place."""
    picked = []
    for start, end, slot in runs:
        modules = slot_modules[slot]
        module = modules.get(key) if modules is not None else None
        if module is not None:
            picked.append((start, end, *module))
    if len(picked) < GATHER_MIN_RUNS:
        for start, end, A, B, scale in picked:
            y[start:end].addmm_(x[start:end] @ A, B, alpha=scale)
        return y
    for group in _groups(tuple((start, end, A.shape[1]) for start, end, A, _, _ in picked)):
        if len(group) == 1:
            start, end, A, B, scale = picked[group[0]]
            y[start:end].addmm_(x[start:end] @ A, B, alpha=scale)
        else:
            _bmm_add_(y, x, [picked[i] for i in group])
    return y


def _bmm_add_(y: torch.Tensor, x: torch.Tensor, group: list[tuple[int, int, Any, Any, Any]]) -> None:
    """One group of runs (start, end, A, B, scale), sorted by start, all of one rank."""
    spans = tuple((start, end) for start, end, _, _, _ in group)
    As, Bs = torch.stack([g[2] for g in group]), torch.stack([g[3] for g in group])
    scales = [g[4] for g in group]
    uniform = all(s == scales[0] for s in scales)
    count, d_out = len(group), y.shape[1]
    layout = _layout(spans, str(x.device), x.dtype)
    if layout is None:  # equal lengths, side by side: views, no gather
        start, end = spans[0][0], spans[-1][1]
        xa = torch.bmm(x[start:end].view(count, -1, x.shape[1]), As)
        if not uniform:
            xa.mul_(torch.tensor(scales, dtype=xa.dtype, device=xa.device).view(-1, 1, 1))
        y[start:end].view(count, -1, d_out).baddbmm_(xa, Bs, alpha=scales[0] if uniform else 1.0)
        return
    rows, mask = layout
    xa = torch.bmm(x.index_select(0, rows).view(count, -1, x.shape[1]), As)
    if uniform:
        xa.mul_(mask).mul_(scales[0])  # pad rows become zero, so they add nothing below
    else:
        xa.mul_(mask * torch.tensor(scales, dtype=xa.dtype, device=xa.device).view(-1, 1, 1))
    y.index_add_(0, rows, torch.bmm(xa, Bs).view(-1, d_out))


@functools.lru_cache(maxsize=256)
def _groups(runs: tuple[tuple[int, int, int], ...]) -> tuple[tuple[int, ...], ...]:
    """Indices into `runs` (start, end, rank), one tuple per batched GEMM: one rank per group, runs
    taken longest first while the group padded to its longest run stays within `PAD_LIMIT` of its
    real tokens; each group sorted by start."""
    order = sorted(range(len(runs)), key=lambda i: (runs[i][2], -(runs[i][1] - runs[i][0]), runs[i][0]))
    groups: list[list[int]] = []
    longest = tokens = 0
    for i in order:
        start, end, rank = runs[i]
        n = end - start
        if groups and runs[groups[-1][0]][2] == rank and longest * (len(groups[-1]) + 1) <= PAD_LIMIT * (tokens + n):
            groups[-1].append(i)
            tokens += n
        else:
            groups.append([i])
            longest = tokens = n
    return tuple(tuple(sorted(g, key=lambda i: runs[i][0])) for g in groups)


@functools.lru_cache(maxsize=256)
def _layout(spans: tuple[tuple[int, int], ...], device: str,
            dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor] | None:
    """None when the spans have one length and sit side by side (x and y are viewed as [G, n, d]);
    else (rows [G*n_max]: the row of x read and of y written at each padded position, mask
    [G, n_max, 1]); a pad position reads and writes row spans[0][0] with mask 0 (it adds zero)."""
    lengths = [end - start for start, end in spans]
    if len(set(lengths)) == 1 and all(a[1] == b[0] for a, b in zip(spans, spans[1:])):
        return None
    n_max = max(lengths)
    rows, keep = [], []
    for start, end in spans:
        rows += list(range(start, end)) + [spans[0][0]] * (n_max - (end - start))
        keep += [1.0] * (end - start) + [0.0] * (n_max - (end - start))
    index = torch.tensor(rows, dtype=torch.long, device=device)
    mask = torch.tensor(keep, dtype=dtype, device=device).view(len(spans), n_max, 1)
    return index, mask


def lora_delta(x: torch.Tensor, idx: torch.Tensor, A: torch.Tensor, B: torch.Tensor, scales: torch.Tensor,
               backend: str = "segmented", runs: list[tuple[int, int, int]] | None = None) -> torch.Tensor:
    """Dispatch to a backend: `reference`, `segmented` (default; differentiable) or `triton`.
    `triton` picks its kernel by the batch's shape: SGMV (segment tiles, tl.dot) when some run of
    one adapter is >= 16 tokens long (a prefill), else BGMV (per-token gather: decode)."""
    if backend == "segmented":
        return lora_delta_segmented(x, idx, A, B, scales)
    if backend == "reference":
        return lora_delta_reference(x, idx, A, B, scales)
    if backend == "triton":
        from preft.triton_lora import lora_delta_sgmv, lora_delta_triton

        runs = adapter_runs(idx) if runs is None else runs
        if runs and max(end - start for start, end, _ in runs) >= 16:
            return lora_delta_sgmv(x, idx, A, B, scales, runs)
        return lora_delta_triton(x, idx, A, B, scales)
    raise ValueError(f"unknown LoRA backend {backend!r}: use reference, segmented or triton")
