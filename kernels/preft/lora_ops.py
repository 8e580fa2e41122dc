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
"""

from __future__ import annotations

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
                          slot_modules: list, key: tuple[int, str]) -> torch.Tensor:
    """`lora_add_runs_` over alias slots: slot s's weights for projection `key` are
    `slot_modules[s][key]` = (A [in, r], B [r, out], scale), or absent when that adapter does not
    target the projection (the run adds nothing). Inference only, in place."""
    for start, end, slot in runs:
        module = slot_modules[slot].get(key) if slot_modules[slot] is not None else None
        if module is None:
            continue
        A, B, scale = module
        y[start:end].addmm_(x[start:end] @ A, B, alpha=scale)  # the scale rides on addmm: no extra pass
    return y


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
        from kernels.preft.triton_lora import lora_delta_sgmv, lora_delta_triton

        runs = adapter_runs(idx) if runs is None else runs
        if runs and max(end - start for start, end, _ in runs) >= 16:
            return lora_delta_sgmv(x, idx, A, B, scales, runs)
        return lora_delta_triton(x, idx, A, B, scales)
    raise ValueError(f"unknown LoRA backend {backend!r}: use reference, segmented or triton")
