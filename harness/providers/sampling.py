"""Next-token choice shared by the embedded engines (the chat provider and the PreFT engine)."""

from __future__ import annotations

from typing import Any


def pick_token(logits: Any, temperature: float | None, top_p: float | None, generator: Any) -> int:
    """Greedy at temperature 0; else temperature + nucleus sampling with the row's own generator.

    Exactly one uniform draw per sampled token, so a row's random stream never depends on others.
    """
    import torch

    temperature = float(temperature or 0.0)
    if temperature <= 0.0:
        return int(torch.argmax(logits).item())
    probs = torch.softmax(logits / temperature, dim=-1)
    sorted_probs, sorted_ids = torch.sort(probs, descending=True)
    top_p = float(top_p if top_p is not None else 1.0)
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
