"""The neural decoders of `qec_precision_pyramid`: numpy MLPs with binarised (W1) weights and
quantised hidden activations, trained quantisation-aware with hand-written back-propagation.

A decoder reads a shot's detector bits and predicts each logical observable's flip (one logit an
observable; a shot is decoded correctly when every observable is). Weights of a binarised layer
are sign(W) times the mean |W| of each output unit; a k-bit activation is the midrise uniform grid
of 2^k levels on [-1, 1] (1 bit is exactly sign); None is the float hardtanh. Quantisers and
binarisation pass gradients straight through inside the clip range |z| <= 1.

Training (the budget is fixed in advance and is part of the criterion's protocol): Adam, batch
1024, the rate decayed by LR_DECAY per epoch; after each epoch the binary cross-entropy on a
held-out validation split decides: training stops ("converged") at the first epoch that improves
it by less than TOLERANCE (relative), or at the epoch cap ("capped"); the best epoch's parameters
are kept. Quantised decoders start from the seed's float decoder.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

Params = list[tuple[np.ndarray, np.ndarray]]
BATCH = 1024
LR_DECAY = 0.7
TOLERANCE = 0.002  # relative validation-loss improvement below which an epoch counts as converged


@dataclass(frozen=True)
class Budget:
    """The training budget fixed before any run: epoch caps and learning rates."""

    float_epochs: int = 4
    qat_epochs: int = 3
    float_lr: float = 3e-3
    qat_lr: float = 1e-3


def quantise_activation(x: np.ndarray, bits: int | None) -> np.ndarray:
    """Midrise uniform grid of 2^bits levels on [-1, 1]: levels (2i + 1 - 2^bits) / (2^bits - 1);
    1 bit is exactly sign (0 -> +1); None is the float hardtanh."""
    if bits is None:
        return np.asarray(np.clip(x, -1.0, 1.0))
    n = 2**bits
    idx = np.clip(np.floor((x + 1.0) / 2.0 * n), 0, n - 1)
    return np.asarray(((2 * idx + 1 - n) / (n - 1)).astype(x.dtype))


def binarise(w: np.ndarray) -> np.ndarray:
    """sign(W) (0 -> +1) times the mean |W| of each output unit (column)."""
    return np.asarray(np.where(w >= 0, 1.0, -1.0).astype(w.dtype) * np.abs(w).mean(axis=0, keepdims=True))


def forward(
    params: Params, x: np.ndarray, bits: tuple[int | None, ...], binary: bool
) -> tuple[np.ndarray, list[tuple[np.ndarray, np.ndarray, np.ndarray]]]:
    """The logits (rows x observables), and each layer's (input, used weights, pre-activation)."""
    if len(bits) != len(params) - 1:
        raise ValueError(f"activation bits {bits}: give one per hidden layer ({len(params) - 1})")
    a, cache = x, []
    for i, (w, b) in enumerate(params):
        used = binarise(w) if binary else w
        z = a @ used + b
        cache.append((a, used, z))
        a = quantise_activation(z, bits[i]) if i < len(params) - 1 else z
    return a, cache


def gradients(
    params: Params, x: np.ndarray, y: np.ndarray, bits: tuple[int | None, ...], binary: bool
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Gradients of the binary cross-entropy summed over observables, averaged over rows."""
    logit, cache = forward(params, x, bits, binary)
    g = ((1.0 / (1.0 + np.exp(-logit)) - y.reshape(logit.shape)) / len(logit)).astype(np.float32)
    grads: list[tuple[np.ndarray, np.ndarray]] = []
    for i in range(len(params) - 1, -1, -1):
        a, used, z = cache[i]
        if i < len(params) - 1:
            g = g * (np.abs(z) <= 1.0)
        grads.insert(0, (a.T @ g, g.sum(axis=0)))
        g = g @ used.T
    return grads


def loss(params: Params, x: np.ndarray, y: np.ndarray, bits: tuple[int | None, ...], binary: bool) -> float:
    logit = np.concatenate([forward(params, x[i : i + 8192], bits, binary)[0] for i in range(0, len(x), 8192)])
    return float(np.mean(np.sum(np.logaddexp(0, logit) - y.reshape(logit.shape) * logit, axis=1)))


def initial(sizes: tuple[int, ...], rng: np.random.Generator) -> Params:
    return [
        (rng.normal(0, 1 / math.sqrt(m), (m, n)).astype(np.float32), np.zeros(n, np.float32))
        for m, n in zip(sizes[:-1], sizes[1:])
    ]


@dataclass
class Trained:
    params: Params
    epochs: int
    converged: bool
    valid_loss: float


def train(
    data: tuple[np.ndarray, np.ndarray],
    valid: tuple[np.ndarray, np.ndarray],
    bits: tuple[int | None, ...],
    binary: bool,
    epochs: int,
    lr: float,
    seed: int,
    start: Params,
) -> Trained:
    """Adam over shuffled mini-batches, early-stopped on the validation loss (module docstring)."""
    x, y = data
    rng = np.random.default_rng(seed)
    params = [(w.copy(), b.copy()) for w, b in start]
    moments = [[np.zeros_like(p) for p in layer for _ in (0, 1)] for layer in params]
    best = [(w.copy(), b.copy()) for w, b in params]
    best_loss = loss(params, *valid, bits, binary)
    step, per_epoch = 0, max(1, len(x) // BATCH)
    for epoch in range(1, epochs + 1):
        rate = lr * LR_DECAY ** (epoch - 1)
        order = rng.permutation(len(x))
        for k in range(per_epoch):
            batch = order[k * BATCH : (k + 1) * BATCH]
            step += 1
            for layer, grads, mom in zip(params, gradients(params, x[batch], y[batch], bits, binary), moments):
                for j, g in enumerate(grads):
                    mom[2 * j] = 0.9 * mom[2 * j] + 0.1 * g
                    mom[2 * j + 1] = 0.999 * mom[2 * j + 1] + 0.001 * g * g
                    m_hat, v_hat = mom[2 * j] / (1 - 0.9**step), mom[2 * j + 1] / (1 - 0.999**step)
                    layer[j][...] -= rate * m_hat / (np.sqrt(v_hat) + 1e-8)
        now = loss(params, *valid, bits, binary)
        improved = now < best_loss * (1 - TOLERANCE)
        if now < best_loss:
            best, best_loss = [(w.copy(), b.copy()) for w, b in params], now
        if not improved:
            return Trained(best, epoch, True, best_loss)
    return Trained(best, epochs, False, best_loss)


def predict(params: Params, x: np.ndarray, bits: tuple[int | None, ...], binary: bool) -> np.ndarray:
    """Predicted flips (rows x observables)."""
    return np.concatenate([forward(params, x[i : i + 8192], bits, binary)[0] > 0 for i in range(0, len(x), 8192)])
