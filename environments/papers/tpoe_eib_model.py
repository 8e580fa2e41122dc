"""The synthetic EEG, the heads of `tpoe_eib_synth_eeg` and their explanations (torch, one thread,
imported only when a head trains).

Both heads read the recording as tokens (channel x segment, 16 samples each) through a shared
token network. The EIB head (the method): per token a Gaussian expert N(mu, diag 1/lambda) over a
K-dimensional evidence variable and a hard-concrete gate g in [0, 1] (exact zeros at test time);
the posterior is the tempered product of the gated experts and the prior N(0, I / PRIOR_PRECISION):
precision P = PRIOR_PRECISION + sum_i g_i lambda_i / TAU, mean m = (sum_i g_i lambda_i mu_i / TAU) / P;
the class-1 logit is linear in a posterior draw (the mean at test time). Loss: cross-entropy +
BETA x KL(posterior || prior) (the rate) + GATE_COST x the expected share of open gates (L0), both
annealed: off for the first WARMUP of training, then ramped linearly to full weight over RAMP.
Its explanation is each token's weight in the posterior: g x mean(lambda) / TAU. The unconstrained
head: the token network, mean and max pooling over tokens, a linear read-out; explained by gradient
saliency (|d logit / d x| summed over a token) or integrated gradients (zero baseline).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np

from scipy.signal import lfilter

CHANNELS, SAMPLES, SEGMENT = 16, 128, 16
SEGMENTS = SAMPLES // SEGMENT
N_TRAIN, N_TEST = 1200, 400
AMPLITUDE, AR_PHI, ALPHA_AMP = 1.5, 0.9, 0.5

K, HIDDEN, PLAIN_FEATURES = 4, 32, 16
TAU, PRIOR_PRECISION, BETA, GATE_COST = 2.0, 1.0, 0.01, 0.5
HC_BETA, HC_LOW, HC_HIGH = 2.0 / 3.0, -0.1, 1.1  # hard-concrete temperature and stretch (Louizos et al.)
TRAIN_STEPS, BATCH, LR = 800, 64, 3e-3
WARMUP, RAMP = 0.5, 0.25  # shares of TRAIN_STEPS: penalties off, then ramped linearly to full weight
IG_STEPS = 16
SOLVERS = ("tpoe_eib", "saliency", "integrated_gradients")


def spike_wave() -> np.ndarray:
    """One spike-wave complex over a segment: a sharp 3-sample spike, then a slow negative wave."""
    shape = np.zeros(SEGMENT)
    shape[1:4] = [0.5, 1.0, 0.5]
    shape[5:15] = -0.6 * np.sin(np.linspace(0, np.pi, 10))
    return shape


def spike_only() -> np.ndarray:
    shape = np.zeros(SEGMENT)
    shape[1:4] = [0.5, 1.0, 0.5]
    return shape


def background(rng: np.random.Generator, n: int) -> np.ndarray:
    """AR(1) noise of unit variance per channel plus an alpha rhythm (10 cycles per recording)."""
    eps = rng.normal(size=(n, CHANNELS, SAMPLES)) * np.sqrt(1 - AR_PHI ** 2)
    eps[..., 0] = rng.normal(size=(n, CHANNELS))  # the stationary start
    x = lfilter([1.0], [1.0, -AR_PHI], eps, axis=-1)  # x_t = phi x_{t-1} + eps_t
    phase = rng.uniform(0, 2 * np.pi, size=(n, CHANNELS, 1))
    return x + ALPHA_AMP * np.sin(2 * np.pi * 10 * np.arange(SAMPLES) / SAMPLES + phase)


def recordings(seed: int, split: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(x (n, C, T) float32, y (n,), evidence (n, C, SEGMENTS) bool, clean (n, C, T): x minus the
    background, i.e. exactly the inserted distractor and evidence waveforms)."""
    if split not in ("train", "test"):
        raise ValueError(f"unknown split {split!r}: use 'train' or 'test'")
    n = N_TRAIN if split == "train" else N_TEST
    rng = np.random.default_rng([seed, 0 if split == "train" else 1])
    y = np.arange(n) % 2
    rng.shuffle(y)
    clean = np.zeros((n, CHANNELS, SAMPLES))
    evidence = np.zeros((n, CHANNELS, SEGMENTS), dtype=bool)
    distractor_c, distractor_s = rng.integers(0, CHANNELS, n), rng.integers(0, SEGMENTS, n)
    burst_c, burst_s = rng.integers(0, CHANNELS - 1, n), rng.integers(0, SEGMENTS, n)
    for i in range(n):
        c, s = distractor_c[i], distractor_s[i]
        clean[i, c, s * SEGMENT:(s + 1) * SEGMENT] += AMPLITUDE * spike_only()
        if y[i] == 1:
            c, s = burst_c[i], burst_s[i]
            clean[i, c:c + 2, s * SEGMENT:(s + 1) * SEGMENT] += AMPLITUDE * spike_wave()
            evidence[i, c:c + 2, s] = True
    x = background(rng, n) + clean
    return x.astype(np.float32), y, evidence, clean


def torch_single_thread() -> Any:
    import torch

    # One thread: tiny tensors, and threads fighting over 2 shared cores only slow each other.
    torch.set_num_threads(1)
    return torch


def tokens(x: Any) -> Any:
    """(n, C, T) -> (n, C, SEGMENTS, SEGMENT)."""
    return x.reshape(x.shape[0], CHANNELS, SEGMENTS, SEGMENT)


def tempered_poe(mu: Any, lam: Any, gate: Any) -> tuple[Any, Any]:
    """Posterior (mean, precision) of the tempered product of gated Gaussian experts and the prior;
    experts on the axes before the last of mu/lam (..., E, K), gate (..., E)."""
    weight = gate[..., None] * lam / TAU
    precision = PRIOR_PRECISION + weight.sum(-2)
    return (weight * mu).sum(-2) / precision, precision


def kl_rate(mean: Any, precision: Any) -> Any:
    """KL(N(mean, diag 1/precision) || N(0, I / PRIOR_PRECISION)), per recording."""
    torch = torch_single_thread()
    ratio = PRIOR_PRECISION / precision
    return 0.5 * (ratio + PRIOR_PRECISION * mean ** 2 - 1.0 - torch.log(ratio)).sum(-1)


def hard_concrete(log_alpha: Any, generator: Any | None) -> Any:
    """Training (generator given): a stretched, clipped concrete sample; test: its deterministic value."""
    torch = torch_single_thread()
    if generator is None:
        s = torch.sigmoid(log_alpha)
    else:
        u = torch.rand(log_alpha.shape, generator=generator).clamp(1e-6, 1 - 1e-6)
        s = torch.sigmoid((torch.log(u) - torch.log(1 - u) + log_alpha) / HC_BETA)
    return (s * (HC_HIGH - HC_LOW) + HC_LOW).clamp(0.0, 1.0)


def open_probability(log_alpha: Any) -> Any:
    torch = torch_single_thread()
    return torch.sigmoid(log_alpha - HC_BETA * np.log(-HC_LOW / HC_HIGH))


def build(torch: Any, out: int) -> Any:
    nn = torch.nn
    return nn.Sequential(nn.Linear(SEGMENT, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, out))


def penalty_weight(step: int, steps: int) -> float:
    """The rate and L0 penalties' weight at a training step: 0 during the warm-up, then a linear ramp to 1.

    Why: at full weight from step 0 the penalties close every gate within ~100 steps, before the
    cross-entropy has found the evidence (the head needs ~200 steps); a hard-concrete gate clamped
    at 0 in every sample passes no gradient, so that collapse is permanent and the head sits at
    chance (the posterior is the prior whatever the input)."""
    start, ramp = WARMUP * steps, max(RAMP * steps, 1.0)
    return float(min(1.0, max(0.0, (step - start) / ramp)))


def eib_forward(net: Any, readout: Any, x: Any, generator: Any | None, *, gate: Any | None = None,
                posterior: tuple[Any, Any] | None = None) -> dict[str, Any]:
    """The EIB head: experts, gates, posterior, KL rate and the class-1 logit.

    The audits intervene through the keywords, so that they act on this very forward pass: `gate`
    (n, E) replaces the gates the head computes (do(g)); `posterior` (mean, precision), each (n, K),
    replaces the tempered product before the read-out (do(posterior))."""
    torch = torch_single_thread()
    h = net(tokens(x)).flatten(1, 2)  # (n, E, 2K+1)
    mu, lam = h[..., :K], torch.nn.functional.softplus(h[..., K:2 * K]) + 1e-3
    log_alpha = h[..., 2 * K]
    if gate is None:
        gate = hard_concrete(log_alpha, generator)
    mean, precision = tempered_poe(mu, lam, gate) if posterior is None else posterior
    z = mean if generator is None else mean + torch.randn(mean.shape, generator=generator) / precision.sqrt()
    return {"logit": readout(z)[..., 0], "kl": kl_rate(mean, precision), "gate": gate, "mu": mu, "lam": lam,
            "mean": mean, "precision": precision, "open": open_probability(log_alpha)}


def plain_forward(net: Any, readout: Any, x: Any) -> Any:
    torch = torch_single_thread()
    h = torch.relu(net(tokens(x)).flatten(1, 2))  # (n, E, F)
    return readout(torch.cat([h.mean(1), h.amax(1)], -1))[..., 0]


@lru_cache(maxsize=16)
def trained_head(seed: int, kind: str) -> tuple[Any, Any]:
    """(token network, read-out) of the 'eib' or 'plain' head trained on the seed's train split, frozen."""
    if kind not in ("eib", "plain"):
        raise ValueError(f"unknown head {kind!r}: use 'eib' or 'plain'")
    torch = torch_single_thread()
    x_np, y_np, _, _ = recordings(seed, "train")
    x, y = torch.from_numpy(x_np), torch.from_numpy(y_np).float()
    torch.manual_seed(seed)
    net = build(torch, 2 * K + 1 if kind == "eib" else PLAIN_FEATURES)
    readout = torch.nn.Linear(K if kind == "eib" else 2 * PLAIN_FEATURES, 1)
    opt = torch.optim.Adam([*net.parameters(), *readout.parameters()], lr=LR)
    gen = torch.Generator().manual_seed(seed)
    bce = torch.nn.functional.binary_cross_entropy_with_logits
    for step in range(TRAIN_STEPS):
        batch = torch.randint(0, len(y), (BATCH,), generator=gen)
        if kind == "eib":
            out = eib_forward(net, readout, x[batch], gen)
            penalty = BETA * out["kl"].mean() + GATE_COST * out["open"].mean()
            loss = bce(out["logit"], y[batch]) + penalty_weight(step, TRAIN_STEPS) * penalty
        else:
            loss = bce(plain_forward(net, readout, x[batch]), y[batch])
        opt.zero_grad()
        loss.backward()
        opt.step()
    for p in [*net.parameters(), *readout.parameters()]:
        p.requires_grad_(False)
    return net, readout


def head_state(net: Any, readout: Any) -> dict[str, dict[str, Any]]:
    """The EIB head's parameters as nested lists (float32 values, exact through JSON): ~1.9k numbers."""
    return {"net": {k: v.tolist() for k, v in net.state_dict().items()},
            "readout": {k: v.tolist() for k, v in readout.state_dict().items()}}


def head_from_state(state: Any) -> tuple[Any, Any]:
    """(token network, read-out) of an EIB head rebuilt, frozen, from `head_state`'s record; ValueError
    when the record does not fit the architecture."""
    torch = torch_single_thread()
    with torch.random.fork_rng(devices=[]):  # building initialises weights: leave the global RNG as it was
        net, readout = build(torch, 2 * K + 1), torch.nn.Linear(K, 1)
    try:
        for module, key in ((net, "net"), (readout, "readout")):
            module.load_state_dict({k: torch.tensor(v, dtype=torch.float32) for k, v in state[key].items()})
    except (KeyError, TypeError, ValueError, RuntimeError, AttributeError) as err:
        raise ValueError(f"the recorded EIB head does not fit the architecture: {err}") from err
    for p in [*net.parameters(), *readout.parameters()]:
        p.requires_grad_(False)
    return net, readout


def head_for(solver: str) -> str:
    if solver not in SOLVERS:
        raise ValueError(f"unknown solver {solver!r}: use one of {SOLVERS}")
    return "eib" if solver == "tpoe_eib" else "plain"


def logit_fn(solver: str, seed: int) -> Any:
    net, readout = trained_head(seed, head_for(solver))
    if head_for(solver) == "eib":
        return lambda x: eib_forward(net, readout, x, None)["logit"]
    return lambda x: plain_forward(net, readout, x)


def predict_proba(solver: str, seed: int, x: np.ndarray) -> np.ndarray:
    """The solver's model's class-1 probability per recording."""
    torch = torch_single_thread()
    logit = logit_fn(solver, seed)  # trains on first use: outside no_grad
    with torch.no_grad():
        return torch.sigmoid(logit(torch.from_numpy(np.asarray(x, dtype=np.float32)))).numpy()


def explain(solver: str, seed: int, x_np: np.ndarray) -> np.ndarray:
    """Token attributions (n, C, SEGMENTS): the EIB head's posterior weights, or post-hoc
    saliency / integrated gradients of the unconstrained head's class-1 logit."""
    torch = torch_single_thread()
    x = torch.from_numpy(np.asarray(x_np, dtype=np.float32))
    if head_for(solver) == "eib":
        net, readout = trained_head(seed, "eib")
        with torch.no_grad():
            out = eib_forward(net, readout, x, None)
        weight = out["gate"] * out["lam"].mean(-1) / TAU
        return weight.reshape(len(x), CHANNELS, SEGMENTS).numpy()
    logit = logit_fn(solver, seed)
    if solver == "saliency":
        xg = x.clone().requires_grad_(True)
        (grad,) = torch.autograd.grad(logit(xg).sum(), xg)
        return tokens(grad.abs()).sum(-1).numpy()
    total = torch.zeros_like(x)
    for alpha in (np.arange(IG_STEPS) + 0.5) / IG_STEPS:  # midpoint rule along the straight path from zero
        xg = (alpha * x).requires_grad_(True)
        (grad,) = torch.autograd.grad(logit(xg).sum(), xg)
        total += grad
    return tokens(x * total / IG_STEPS).sum(-1).numpy()
