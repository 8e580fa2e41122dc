"""ReFT interventions on the residual stream, batched with a per-token intervention index.

    LoReFT:  h + R^T (W h + b - R h)      R [r, d] with orthonormal rows, W [r, d], b [r]
    DiReFT:  h + W2^T (W1 h + b)          W1, W2 [r, d], b [r]  (no orthogonality, no projection)

Stacked over S resident interventions: R/W1 [S, r, d], W/W2 [S, r, d], b [S, r]; `kind` is one of
the two per stack, so one call handles one kind (an adapter store keeps one stack per kind).
idx [N] picks the intervention of each token, -1 = none. Which positions carry an index (the
first-n / last-m prompt positions of a request) is decided by the caller.
"""

from __future__ import annotations

import torch

KINDS = ("loreft", "direft")


def reft_direct(h: torch.Tensor, kind: str, R: torch.Tensor, W: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """One intervention on rows of h [n, d], written as the formula reads (the test reference)."""
    if kind == "loreft":
        return h + (h @ W.T + b - h @ R.T) @ R
    if kind == "direft":
        return h + (h @ R.T + b) @ W
    raise ValueError(f"unknown ReFT kind {kind!r}: use one of {KINDS}")


def reft_apply(h: torch.Tensor, idx: torch.Tensor, kind: str, R: torch.Tensor, W: torch.Tensor,
               b: torch.Tensor) -> torch.Tensor:
    """Apply intervention idx[t] to row t of h [N, d]; rows with idx -1 pass through unchanged.

    For DiReFT, `R` holds W1 and `W` holds W2. Grouped by intervention like the LoRA segment op,
    and out of place so that autograd can train through it.
    """
    if not bool((idx >= 0).any()):
        return h
    out = h.clone()
    rows = torch.nonzero(idx >= 0, as_tuple=True)[0]
    for slot in torch.unique(idx[rows]).tolist():
        seg = rows[idx[rows] == slot]
        out[seg] = reft_direct(h[seg], kind, R[slot], W[slot], b[slot])
    return out


def orthonormal_rows(r: int, d: int, generator: torch.Generator | None = None) -> torch.Tensor:
    """A random [r, d] matrix with orthonormal rows (QR of a Gaussian), as LoReFT initialises R."""
    q, _ = torch.linalg.qr(torch.randn(d, r, generator=generator))
    return q.T.contiguous()
