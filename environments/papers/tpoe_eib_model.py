"""The synthetic EEG, the heads of `tpoe_eib_synth_eeg` and their explanations (torch, one thread,
imported only when a head trains).

Every head reads the recording as tokens (channel x segment, 16 samples each): the features a
pretrained, frozen backbone gives each token (`tpoe_eib_backbone.py`), through a shared token
network. The EIB head (the method): per token a Gaussian expert N(mu, diag 1/lambda) over a
K-dimensional evidence variable and a hard-concrete gate g in [0, 1] (exact zeros at test time);
the posterior is the tempered product of the gated experts and the prior N(0, I / PRIOR_PRECISION):
precision P = PRIOR_PRECISION + sum_i g_i lambda_i / TAU, mean m = (sum_i g_i lambda_i mu_i / TAU) / P;
the class-1 logit is linear in a posterior draw (the mean at test time). Loss: cross-entropy +
BETA x KL(posterior || prior) (the rate) + GATE_COST x the expected share of open gates (L0), both
annealed: off for the first WARMUP of training, then ramped linearly to full weight over RAMP.
Its explanation is each token's weight in the posterior: g x mean(lambda) / TAU. The unconstrained
head: the token network, mean and max pooling over tokens, a linear read-out; explained by gradient
saliency (|d logit / d x| summed over a token) or integrated gradients (zero baseline). The linear
probe: a linear read-out of the pooled frozen features. The fine-tuned model: a copy of the backbone
trained end to end with the unconstrained head. With no backbone (`backbone=None`) a head reads the
raw samples (the hand-built heads of the tests).
"""

from __future__ import annotations

import copy
from functools import lru_cache
from typing import TYPE_CHECKING, Any, NamedTuple, TypedDict

import numpy as np
from pydantic import JsonValue

from environments.papers.tpoe_eib_signals import (  # noqa: F401 - re-exported: the suite and the tests read them here
    ALPHA_AMP,
    AMPLITUDE,
    AR_PHI,
    CHANNELS,
    SAMPLES,
    SEGMENT,
    SEGMENTS,
    WIDTH,
    background,
    spike_only,
    spike_wave,
    tokens,
    torch_single_thread,
)

if TYPE_CHECKING:
    from environments.papers.tpoe_eib_backbone import FineTuneConfig

N_TRAIN, N_TEST = 1200, 400

K, HIDDEN, PLAIN_FEATURES = 4, 32, 16
TAU, PRIOR_PRECISION, BETA, GATE_COST = 2.0, 1.0, 0.01, 0.5
HC_BETA, HC_LOW, HC_HIGH = 2.0 / 3.0, -0.1, 1.1  # hard-concrete temperature and stretch (Louizos et al.)
TRAIN_STEPS, BATCH, LR = 800, 64, 3e-3
WARMUP, RAMP = 0.5, 0.25  # shares of TRAIN_STEPS: penalties off, then ramped linearly to full weight
IG_STEPS = 16
# the fine-tuned baseline: its backbone's learning rate (its head's is LR) and batch (smaller than the
# heads': every step goes through the transformer, the CPU budget's largest item)
FINE_TUNE_LR, FINE_TUNE_BATCH = 1e-3, 32
FEATURE_CHUNK = 200  # recordings per backbone pass when computing frozen features (bounds the attention's memory)
SOLVERS = ("tpoe_eib", "saliency", "integrated_gradients", "linear_probe", "fine_tuned")
# the model each solver explains: the EIB head; the unconstrained head (explained post hoc by saliency
# or integrated gradients); the linear probe; the fine-tuned backbone + unconstrained head
SOLVER_MODEL = {
    "tpoe_eib": "eib",
    "saliency": "plain",
    "integrated_gradients": "plain",
    "linear_probe": "probe",
    "fine_tuned": "fine_tuned",
}
KINDS = ("eib", "plain", "probe", "fine_tuned")


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
        clean[i, c, s * SEGMENT : (s + 1) * SEGMENT] += AMPLITUDE * spike_only()
        if y[i] == 1:
            c, s = burst_c[i], burst_s[i]
            clean[i, c : c + 2, s * SEGMENT : (s + 1) * SEGMENT] += AMPLITUDE * spike_wave()
            evidence[i, c : c + 2, s] = True
    x = background(rng, n) + clean
    return x.astype(np.float32), y, evidence, clean


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
    return 0.5 * (ratio + PRIOR_PRECISION * mean**2 - 1.0 - torch.log(ratio)).sum(-1)


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


def build(torch: Any, out: int, inputs: int = SEGMENT) -> Any:
    """The token network a head applies to every token's features (`inputs` wide: the backbone's
    WIDTH, or SEGMENT raw samples for a head with no backbone)."""
    nn = torch.nn
    return nn.Sequential(
        nn.Linear(inputs, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, out)
    )


def penalty_weight(step: int, steps: int) -> float:
    """The rate and L0 penalties' weight at a training step: 0 during the warm-up, then a linear ramp to 1.

    Why: at full weight from step 0 the penalties close every gate within ~100 steps, before the
    cross-entropy has found the evidence (the head needs ~200 steps); a hard-concrete gate clamped
    at 0 in every sample passes no gradient, so that collapse is permanent and the head sits at
    chance (the posterior is the prior whatever the input)."""
    start, ramp = WARMUP * steps, max(RAMP * steps, 1.0)
    return float(min(1.0, max(0.0, (step - start) / ramp)))


def token_features(backbone: Any | None, x: Any) -> Any:
    """What a head reads per token: the backbone's features (n, C, SEGMENTS, WIDTH), or with no
    backbone the raw samples (n, C, SEGMENTS, SEGMENT)."""
    return tokens(x) if backbone is None else backbone(x)


class HeadOutput(TypedDict):
    """The EIB head's forward pass, each a torch tensor (Any here: torch is not analysed)."""

    logit: Any  # (n,) class-1 logit
    kl: Any  # (n,) KL rate of the posterior to the prior
    gate: Any  # (n, E) gates
    mu: Any  # (n, E, K) experts' means
    lam: Any  # (n, E, K) experts' precisions
    mean: Any  # (n, K) posterior mean
    precision: Any  # (n, K) posterior precision
    open: Any  # (n, E) each gate's chance of being open
    features: Any  # (n, C, SEGMENTS, F) the token features read


def eib_forward(
    net: Any,
    readout: Any,
    x: Any,
    generator: Any | None,
    *,
    backbone: Any | None = None,
    features: Any | None = None,
    gate: Any | None = None,
    posterior: tuple[Any, Any] | None = None,
) -> HeadOutput:
    """The EIB head on a recording's token features: experts, gates, posterior, KL rate and the
    class-1 logit.

    The audits intervene through the keywords, so that they act on this very forward pass:
    `features` (n, C, SEGMENTS, F) replaces the token features the head reads (do(features); x is then
    not read), `gate` (n, E) the gates the head computes (do(g)), `posterior` (mean, precision), each
    (n, K), the tempered product before the read-out (do(posterior))."""
    torch = torch_single_thread()
    if features is None:
        features = token_features(backbone, x)
    h = net(features).flatten(1, 2)  # (n, E, 2K+1)
    mu, lam = h[..., :K], torch.nn.functional.softplus(h[..., K : 2 * K]) + 1e-3
    log_alpha = h[..., 2 * K]
    if gate is None:
        gate = hard_concrete(log_alpha, generator)
    mean, precision = tempered_poe(mu, lam, gate) if posterior is None else posterior
    z = mean if generator is None else mean + torch.randn(mean.shape, generator=generator) / precision.sqrt()
    return {
        "logit": readout(z)[..., 0],
        "kl": kl_rate(mean, precision),
        "gate": gate,
        "mu": mu,
        "lam": lam,
        "mean": mean,
        "precision": precision,
        "open": open_probability(log_alpha),
        "features": features,
    }


def pooled(features: Any) -> Any:
    """Mean and max over the tokens: (n, C, SEGMENTS, F) -> (n, 2F)."""
    torch = torch_single_thread()
    flat = features.flatten(1, 2)
    return torch.cat([flat.mean(1), flat.amax(1)], -1)


def plain_forward(net: Any, readout: Any, x: Any, *, backbone: Any | None = None, features: Any | None = None) -> Any:
    """The unconstrained head (token network, mean + max pooling, linear read-out); with `net` None,
    the linear probe (the read-out on the pooled features themselves)."""
    torch = torch_single_thread()
    if features is None:
        features = token_features(backbone, x)
    return readout(pooled(features if net is None else torch.relu(net(features))))[..., 0]


class Model(NamedTuple):
    """A trained model: the backbone it reads (frozen, or the fine-tuned copy), its token network
    (None for the linear probe) and its read-out."""

    backbone: Any
    net: Any | None
    readout: Any


def fine_tune_config(seed: int, checkpoint: str | None) -> FineTuneConfig:
    """Everything the fine-tuned model depends on (its disk-cache key): the backbone it starts from and its training."""
    from environments.papers.tpoe_eib_backbone import backbone_for, fingerprint

    return {
        "backbone": fingerprint(backbone_for(seed, checkpoint)),
        "n_train": N_TRAIN,
        "amplitude": AMPLITUDE,
        "steps": TRAIN_STEPS,
        "batch": FINE_TUNE_BATCH,
        "lr": LR,
        "backbone_lr": FINE_TUNE_LR,
        "hidden": HIDDEN,
        "features": PLAIN_FEATURES,
        "version": 1,
    }


def frozen_check(backbone: Any, before: str) -> None:
    """The backbone stayed frozen: no gradient reached it and its parameters are bit for bit the pretrained ones."""
    from environments.papers.tpoe_eib_backbone import fingerprint

    if any(p.requires_grad or p.grad is not None for p in backbone.parameters()) or fingerprint(backbone) != before:
        raise RuntimeError("the frozen backbone received a gradient or changed while a head trained on it")


@lru_cache(maxsize=24)
def trained_model(seed: int, kind: str, checkpoint: str | None = None) -> Model:
    """A model trained on the seed's train split, then frozen: 'eib' (the EIB head), 'plain' (the
    unconstrained head) or 'probe' (a linear probe), each on the frozen backbone (asserted: no gradient
    reaches it); or 'fine_tuned' (a copy of the backbone trained with the unconstrained head, end to end)."""
    if kind not in KINDS:
        raise ValueError(f"unknown model {kind!r}: use one of {KINDS}")
    from environments.papers.tpoe_eib_backbone import backbone_for, cache_path, fingerprint, freeze

    torch = torch_single_thread()
    backbone = backbone_for(seed, checkpoint)
    before = fingerprint(backbone)
    x_np, y_np, _, _ = recordings(seed, "train")
    x, y = torch.from_numpy(x_np), torch.from_numpy(y_np).float()
    tuned = kind == "fine_tuned"
    if tuned:
        backbone = copy.deepcopy(backbone).train()
        for p in backbone.parameters():
            p.requires_grad_(True)
    else:
        with torch.no_grad():  # the frozen backbone's features, once (the head never sees its parameters)
            features = torch.cat([backbone(part) for part in x.split(FEATURE_CHUNK)])
    torch.manual_seed(seed)
    net = None if kind == "probe" else build(torch, 2 * K + 1 if kind == "eib" else PLAIN_FEATURES, WIDTH)
    readout = torch.nn.Linear({"eib": K, "probe": 2 * WIDTH}.get(kind, 2 * PLAIN_FEATURES), 1)
    head = [*readout.parameters(), *(net.parameters() if net is not None else [])]
    groups = [{"params": head, "lr": LR}] + (
        [{"params": list(backbone.parameters()), "lr": FINE_TUNE_LR}] if tuned else []
    )
    opt = torch.optim.Adam(groups)
    gen = torch.Generator().manual_seed(seed)
    bce = torch.nn.functional.binary_cross_entropy_with_logits
    path = cache_path("fine_tuned", seed, fine_tune_config(seed, checkpoint)) if tuned else None
    cached = path is not None and path.is_file()
    if cached:
        assert net is not None  # only the fine-tuned model is cached, and it has a head net (a probe has none)
        saved = torch.load(path, weights_only=True)
        for module, key in ((backbone, "backbone"), (net, "net"), (readout, "readout")):
            module.load_state_dict(saved[key])
    for step in range(0 if cached else TRAIN_STEPS):
        batch = torch.randint(0, len(y), (FINE_TUNE_BATCH if tuned else BATCH,), generator=gen)
        if kind == "eib":
            out = eib_forward(net, readout, None, gen, features=features[batch])
            penalty = BETA * out["kl"].mean() + GATE_COST * out["open"].mean()
            loss = bce(out["logit"], y[batch]) + penalty_weight(step, TRAIN_STEPS) * penalty
        elif tuned:
            loss = bce(plain_forward(net, readout, x[batch], backbone=backbone), y[batch])
        else:
            loss = bce(plain_forward(net, readout, None, features=features[batch]), y[batch])
        opt.zero_grad()
        loss.backward()
        opt.step()
    if tuned:
        freeze(backbone)
        if path is not None and not cached:
            assert net is not None  # the fine-tuned model has a head net
            path.parent.mkdir(parents=True, exist_ok=True)
            states = {"backbone": backbone.state_dict(), "net": net.state_dict(), "readout": readout.state_dict()}
            torch.save(states, path.with_suffix(".tmp"))
            path.with_suffix(".tmp").replace(path)
    else:
        frozen_check(backbone, before)
    for p in head:
        p.requires_grad_(False)
    return Model(backbone, net, readout)


def head_state(net: Any, readout: Any) -> dict[str, dict[str, JsonValue]]:
    """The EIB head's parameters as nested lists (float32 values, exact through JSON): ~1.9k numbers."""
    return {
        "net": {k: v.tolist() for k, v in net.state_dict().items()},
        "readout": {k: v.tolist() for k, v in readout.state_dict().items()},
    }


def head_from_state(state: Any) -> tuple[Any, Any]:
    """(token network, read-out) of an EIB head (on the backbone's features) rebuilt, frozen, from
    `head_state`'s record; ValueError when the record does not fit the architecture."""
    torch = torch_single_thread()
    with torch.random.fork_rng(devices=[]):  # building initialises weights: leave the global RNG as it was
        net, readout = build(torch, 2 * K + 1, WIDTH), torch.nn.Linear(K, 1)
    try:
        for module, key in ((net, "net"), (readout, "readout")):
            module.load_state_dict({k: torch.tensor(v, dtype=torch.float32) for k, v in state[key].items()})
    except (KeyError, TypeError, ValueError, RuntimeError, AttributeError) as err:
        raise ValueError(f"the recorded EIB head does not fit the architecture: {err}") from err
    for p in [*net.parameters(), *readout.parameters()]:
        p.requires_grad_(False)
    return net, readout


def kind_for(solver: str) -> str:
    if solver not in SOLVERS:
        raise ValueError(f"unknown solver {solver!r}: use one of {SOLVERS}")
    return SOLVER_MODEL[solver]


def logit_fn(solver: str, seed: int, checkpoint: str | None = None) -> Any:
    model = trained_model(seed, kind_for(solver), checkpoint)
    if kind_for(solver) == "eib":
        return lambda x: eib_forward(model.net, model.readout, x, None, backbone=model.backbone)["logit"]
    return lambda x: plain_forward(model.net, model.readout, x, backbone=model.backbone)


def predict_proba(solver: str, seed: int, x: np.ndarray, checkpoint: str | None = None) -> np.ndarray:
    """The solver's model's class-1 probability per recording."""
    torch = torch_single_thread()
    logit = logit_fn(solver, seed, checkpoint)  # trains on first use: outside no_grad
    with torch.no_grad():
        return np.asarray(torch.sigmoid(logit(torch.from_numpy(np.asarray(x, dtype=np.float32)))).numpy())


def explain(solver: str, seed: int, x_np: np.ndarray, checkpoint: str | None = None) -> np.ndarray:
    """Token attributions (n, C, SEGMENTS): the EIB head's posterior weights, or the gradient saliency
    (every baseline but integrated_gradients) or integrated gradients of a baseline's class-1 logit
    with respect to the raw recording, through the backbone."""
    torch = torch_single_thread()
    x = torch.from_numpy(np.asarray(x_np, dtype=np.float32))
    if kind_for(solver) == "eib":
        model = trained_model(seed, "eib", checkpoint)
        with torch.no_grad():
            out = eib_forward(model.net, model.readout, x, None, backbone=model.backbone)
        weight = out["gate"] * out["lam"].mean(-1) / TAU
        return np.asarray(weight.reshape(len(x), CHANNELS, SEGMENTS).numpy())
    logit = logit_fn(solver, seed, checkpoint)
    if solver != "integrated_gradients":
        xg = x.clone().requires_grad_(True)
        (grad,) = torch.autograd.grad(logit(xg).sum(), xg)
        return np.asarray(tokens(grad.abs()).sum(-1).numpy())
    total = torch.zeros_like(x)
    for alpha in (np.arange(IG_STEPS) + 0.5) / IG_STEPS:  # midpoint rule along the straight path from zero
        xg = (alpha * x).requires_grad_(True)
        (grad,) = torch.autograd.grad(logit(xg).sum(), xg)
        total += grad
    return np.asarray(tokens(x * total / IG_STEPS).sum(-1).numpy())
