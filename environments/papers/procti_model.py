"""ProCTI's parts: the synthetic regime series, the two missingness generators, the prototype bank
and its top-3 retrieval, and the small conditional DDPM (trained as CSDI is, with or without the
retrieved prototype as extra conditioning). `procti.py` is the task that uses them.

Every imputer gets `(observed, mask)` and nothing else: `sanitise` replaces every masked entry by
NaN before any solver looks, so what sits behind the mask cannot reach it (tested with garbage).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

import numpy as np

CHANNELS, LENGTH, REGIMES = 6, 48, 5
N_TRAIN, N_TEST = 400, 64
NOISE, PHASE_JITTER, SCALE = 0.1, 0.5, (0.6, 1.4)
MCAR_RATE, ATTR_MISSING = 0.5, 3
BANK_SIZE, TOP_K, KMEANS_ITERS = 16, 3, 100
DIFF_STEPS, BETA_START, BETA_END = 50, 1e-4, 0.5
HIDDEN, BLOCKS, TRAIN_STEPS, BATCH, LR, N_SAMPLES = 256, 2, 600, 64, 1e-3, 4
Pattern = Literal["random", "attribute"]


def regime_series(seed: int, split: Literal["train", "test"]) -> np.ndarray:
    """(n, CHANNELS, LENGTH): each series follows one of REGIMES templates (per channel a sine of
    1-3 cycles with its own phase, amplitude and offset, drawn per seed), scaled by a per-series
    amplitude, shifted by a per-series phase jitter shared by its channels, plus white noise."""
    templates = np.random.default_rng([seed, 0])
    freq = templates.integers(1, 4, size=(REGIMES, CHANNELS))
    phase = templates.uniform(0, 2 * np.pi, size=(REGIMES, CHANNELS))
    amp = templates.uniform(0.5, 1.5, size=(REGIMES, CHANNELS))
    offset = templates.normal(0, 0.5, size=(REGIMES, CHANNELS))
    n = N_TRAIN if split == "train" else N_TEST
    rng = np.random.default_rng([seed, 1 if split == "train" else 2])
    regime = rng.integers(0, REGIMES, size=n)
    scale = rng.uniform(*SCALE, size=(n, 1, 1))
    jitter = rng.normal(0, PHASE_JITTER, size=(n, 1, 1))
    t = np.arange(LENGTH)[None, None, :]
    clean = amp[regime][..., None] * np.sin(
        2 * np.pi * freq[regime][..., None] * t / LENGTH + phase[regime][..., None] + jitter
    )
    return scale * clean + offset[regime][..., None] + rng.normal(0, NOISE, size=(n, CHANNELS, LENGTH))


def missing_mask(pattern: Pattern, n: int, rng: np.random.Generator) -> np.ndarray:
    """True = observed. `random` (MCAR): exactly half of each series' entries missing, uniformly;
    `attribute`: exactly ATTR_MISSING whole channels missing per series, the rest fully observed."""
    mask = np.ones((n, CHANNELS, LENGTH), dtype=bool)
    for i in range(n):
        if pattern == "random":
            hidden = rng.permutation(CHANNELS * LENGTH)[: round(MCAR_RATE * CHANNELS * LENGTH)]
            mask[i].reshape(-1)[hidden] = False
        elif pattern == "attribute":
            mask[i, rng.permutation(CHANNELS)[:ATTR_MISSING]] = False
        else:
            raise ValueError(f"missingness pattern must be 'random' or 'attribute', got {pattern!r}")
    return mask


def sanitise(observed: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """What an imputer may see: the observed entries, NaN elsewhere."""
    if observed.shape != mask.shape or mask.dtype != bool:
        raise ValueError(
            f"observed {observed.shape} and a boolean mask of the same shape are required, got mask "
            f"{mask.shape} {mask.dtype}"
        )
    return np.where(mask, observed, np.nan)


def kmeans_bank(train: np.ndarray, seed: int) -> np.ndarray:
    """(BANK_SIZE, CHANNELS, LENGTH): Lloyd's k-means (k-means++ start) on the training series only;
    once converged, every prototype is the mean of the training series nearest to it."""
    flat = train.reshape(len(train), -1)
    rng = np.random.default_rng([seed, 3])
    centres = [flat[rng.integers(len(flat))]]
    for _ in range(BANK_SIZE - 1):
        d2 = ((flat[:, None] - np.array(centres)[None]) ** 2).sum(-1).min(1)
        centres.append(flat[rng.choice(len(flat), p=d2 / d2.sum())])
    c, assign = np.array(centres), None
    for _ in range(KMEANS_ITERS):  # until the assignment is stable (a Lloyd fixed point), at most KMEANS_ITERS
        new = ((flat[:, None] - c[None]) ** 2).sum(-1).argmin(1)
        if assign is not None and np.array_equal(new, assign):
            break
        assign = new
        c = np.array([flat[assign == m].mean(0) if (assign == m).any() else c[m] for m in range(BANK_SIZE)])
    return c.reshape(BANK_SIZE, CHANNELS, LENGTH)


def retrieve(values: np.ndarray, mask: np.ndarray, bank: np.ndarray) -> np.ndarray:
    """Top-3 attention over the bank: scores are the mean squared distance on the observed entries
    only; weights softmax(-d / mean of the top-3 d); returns the weighted prototype per series."""
    obs = np.where(mask, values, 0.0)[:, None]
    m = mask[:, None].astype(float)
    d = (m * (obs - bank[None]) ** 2).sum((2, 3)) / np.maximum(m.sum((2, 3)), 1.0)
    top = np.argsort(d, axis=1)[:, :TOP_K]
    dt = np.take_along_axis(d, top, 1)
    w = np.exp(-(dt - dt[:, :1]) / (dt.mean(1, keepdims=True) + 1e-8))
    w /= w.sum(1, keepdims=True)
    return np.asarray((w[..., None, None] * bank[top]).sum(1))


def torch_single_thread() -> Any:
    import torch

    # One thread: tiny tensors, and threads fighting over 2 shared cores only slow each other.
    torch.set_num_threads(1)
    return torch


def noise_schedule() -> np.ndarray:
    """CSDI's quadratic schedule: the beta of each of the DIFF_STEPS steps."""
    betas = np.linspace(BETA_START**0.5, BETA_END**0.5, DIFF_STEPS) ** 2
    return betas


def denoiser(use_prototypes: bool) -> Any:
    """x0-predictor over the whole series: the flattened [observed, noisy target, mask (, prototype)]
    -> a residual MLP of width HIDDEN with the diffusion step's embedding added -> the clean series.
    (It predicts x0, not the noise: noise does not pass a bottleneck narrower than the series. An MLP,
    not CSDI's transformers: on one shared CPU thread it learns the cross-channel, whole-window
    structure of these series in hundreds of steps where small convolutions need thousands.)"""
    torch = torch_single_thread()
    nn = torch.nn
    size = CHANNELS * LENGTH

    class Net(nn.Module):  # type: ignore[misc,name-defined]  # nn: torch.nn loaded at call time, Any
        def __init__(self) -> None:
            super().__init__()
            self.inp = nn.Linear((4 if use_prototypes else 3) * size, HIDDEN)
            self.embed = nn.Embedding(DIFF_STEPS, HIDDEN)
            self.blocks = nn.ModuleList(nn.Sequential(nn.SiLU(), nn.Linear(HIDDEN, HIDDEN)) for _ in range(BLOCKS))
            self.head = nn.Sequential(nn.SiLU(), nn.Linear(HIDDEN, size))

        def forward(self, x: Any, step: Any) -> Any:
            h = self.inp(x.flatten(1)) + self.embed(step)
            for block in self.blocks:
                h = h + block(h)
            return self.head(h).view(-1, CHANNELS, LENGTH)

    return Net()


@dataclass
class Imputer:
    """A trained conditional DDPM; `bank` is None for the no-prototype ablation."""

    net: Any
    mean: np.ndarray  # per-channel training mean / std (the network works in standardised units)
    std: np.ndarray
    bank: np.ndarray | None


def net_input(torch: Any, cond: Any, noisy: Any, mask: Any, proto: Any | None) -> Any:
    parts = [cond * mask, noisy * (1 - mask), mask] + ([proto] if proto is not None else [])
    return torch.cat(parts, dim=1)


@lru_cache(maxsize=16)
def train_imputer(seed: int, use_prototypes: bool) -> Imputer:
    """Train on the seed's complete training series, CSDI style: each step hides part of each series
    (half the batch MCAR 50%, half attribute-wise) and learns the clean hidden part from its noised
    version given the rest (and, with prototypes, the prototype retrieved from those visible entries)."""
    torch = torch_single_thread()
    train = regime_series(seed, "train")
    mean, std = train.mean((0, 2), keepdims=True)[0], train.std((0, 2), keepdims=True)[0]
    z = (train - mean) / std
    bank = kmeans_bank(z, seed) if use_prototypes else None
    torch.manual_seed(seed)
    net = denoiser(use_prototypes)
    opt = torch.optim.Adam(net.parameters(), lr=LR)
    abar = torch.tensor(np.cumprod(1 - noise_schedule()), dtype=torch.float32)
    rng = np.random.default_rng([seed, 4])
    for _ in range(TRAIN_STEPS):
        rows = rng.integers(0, len(z), size=BATCH)
        mask_np = np.concatenate(
            [missing_mask("random", BATCH // 2, rng), missing_mask("attribute", BATCH - BATCH // 2, rng)]
        )
        proto = torch.tensor(retrieve(z[rows], mask_np, bank), dtype=torch.float32) if bank is not None else None
        x0 = torch.tensor(z[rows], dtype=torch.float32)
        mask = torch.tensor(mask_np, dtype=torch.float32)
        step = torch.tensor(rng.integers(0, DIFF_STEPS, size=BATCH))
        eps = torch.tensor(rng.standard_normal(x0.shape), dtype=torch.float32)
        a = abar[step][:, None, None]
        noisy = a.sqrt() * x0 + (1 - a).sqrt() * eps
        pred = net(net_input(torch, x0, noisy, mask, proto), step)
        target = 1 - mask
        loss = (((pred - x0) * target) ** 2).sum() / target.sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
    net.eval()
    return Imputer(net=net, mean=mean, std=std, bank=bank)


def ddpm_impute(model: Imputer, visible: np.ndarray, mask: np.ndarray, seed: int) -> np.ndarray:
    """Ancestral sampling over DIFF_STEPS steps, N_SAMPLES samples per series, their median (CSDI);
    observed entries are returned as observed."""
    torch = torch_single_thread()
    z = np.where(mask, (visible - model.mean) / model.std, 0.0)
    proto = retrieve(z, mask, model.bank) if model.bank is not None else None

    def rep(a: np.ndarray) -> Any:
        return torch.tensor(np.repeat(a, N_SAMPLES, axis=0), dtype=torch.float32)

    cond, m = rep(z), rep(mask.astype(float))
    p = rep(proto) if proto is not None else None
    betas = torch.tensor(noise_schedule(), dtype=torch.float32)
    alphas, abar = 1 - betas, torch.cumprod(1 - betas, 0)
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(cond.shape, generator=gen)
    with torch.no_grad():
        for t in reversed(range(DIFF_STEPS)):
            x0 = model.net(net_input(torch, cond, x, m, p), torch.full((len(x),), t, dtype=torch.long))
            if t == 0:
                x = x0
                break
            # the Gaussian posterior q(x_{t-1} | x_t, x0) at the predicted x0
            mean = (abar[t - 1].sqrt() * betas[t] * x0 + alphas[t].sqrt() * (1 - abar[t - 1]) * x) / (1 - abar[t])
            sigma = ((1 - abar[t - 1]) / (1 - abar[t]) * betas[t]).sqrt()
            x = mean + sigma * torch.randn(x.shape, generator=gen)
    samples = x.numpy().reshape(len(z), N_SAMPLES, CHANNELS, LENGTH)
    imputed = np.median(samples, axis=1) * model.std + model.mean
    return np.where(mask, visible, imputed)
