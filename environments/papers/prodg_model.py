"""ProDG's numerics: the data (scikit-learn's digits at 16x16), the frozen CNN classifier and its
feature space, the conv-decoder generator trained from the classifier's weights alone, the
data-free baselines (activation maximisation, DeepInversion), the data-based prototypes (class mean,
class medoid) and the metrics. The task (`prodg.py`) wires them into cells.

Only `digits_split` reads images. The data-free builders (`prodg_prototypes`, `direct_prototypes`)
take the frozen model and a seed and nothing else, so a test can replace the loader with one that
raises and see them run unchanged.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np

CLASSES, RAW_SIDE, SIDE, N_TRAIN = 10, 8, 16, 1200
CLF_EPOCHS, FEATURES = 20, 32
Z_DIM, GEN_STEPS, GEN_BATCH, PROTO_SAMPLES = 32, 600, 64, 256
DIRECT_STEPS, DI_PER_CLASS = 400, 16
W_BN, W_TV, W_DIV, W_L2 = 1.0, 0.05, 0.1, 0.01


def digits_split(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(x_train, y_train, x_test, y_test); images in [0, 1], bilinearly upsampled 8x8 -> 16x16."""
    from scipy.ndimage import zoom
    from sklearn.datasets import load_digits

    x, y = load_digits(return_X_y=True)
    x = (x / 16.0).reshape(-1, RAW_SIDE, RAW_SIDE)
    x = np.clip(zoom(x, (1, SIDE / RAW_SIDE, SIDE / RAW_SIDE), order=1, mode="nearest"), 0.0, 1.0).astype(np.float32)
    order = np.random.default_rng(seed).permutation(len(y))
    return x[order[:N_TRAIN]], y[order[:N_TRAIN]], x[order[N_TRAIN:]], y[order[N_TRAIN:]]


def torch_single_thread() -> Any:
    import torch

    # One thread: small tensors, and threads fighting over 2 shared cores only slow each other.
    torch.set_num_threads(1)
    return torch


def classifier_net(seed: int) -> Any:
    """The classifier's architecture, freshly initialised: three conv layers with BatchNorm, global
    average pooling to a 32-d feature (the explanation space), a linear read-out."""
    torch = torch_single_thread()
    nn = torch.nn
    torch.manual_seed(seed)
    return nn.Sequential(
        nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
        nn.Conv2d(8, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, FEATURES, 3, padding=1), nn.BatchNorm2d(FEATURES), nn.ReLU(), nn.MaxPool2d(2),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(FEATURES, CLASSES),
    )  # fmt: skip


@lru_cache(maxsize=8)
def frozen_classifier(seed: int) -> Any:
    """The CNN trained on the seed's train split, then frozen (eval mode, no grads). Cached: every
    arm of a seed explains the same network."""
    torch = torch_single_thread()
    nn = torch.nn
    x_train, y_train, _, _ = digits_split(seed)
    model = classifier_net(seed)
    x, y = torch.from_numpy(x_train)[:, None], torch.from_numpy(y_train).long()
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    gen = torch.Generator().manual_seed(seed)
    for _ in range(CLF_EPOCHS):
        for batch in torch.randperm(len(y), generator=gen).split(64):
            opt.zero_grad()
            nn.functional.cross_entropy(model(x[batch]), y[batch]).backward()
            opt.step()
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return model


def features(model: Any, images: np.ndarray) -> np.ndarray:
    """The frozen model's penultimate features (everything but the last linear layer), (n, 32)."""
    torch = torch_single_thread()
    with torch.no_grad():
        return np.asarray(model[:-1](torch.from_numpy(images.astype(np.float32))[:, None]).numpy())


def classify(model: Any, images: np.ndarray) -> np.ndarray:
    """Softmax probabilities of the frozen model, (n, 10)."""
    torch = torch_single_thread()
    with torch.no_grad():
        return np.asarray(torch.softmax(model(torch.from_numpy(images.astype(np.float32))[:, None]), dim=1).numpy())


class BNStatLoss:
    """Sum over BatchNorm layers of ||batch mean - running mean||^2 + ||batch var - running var||^2,
    the batch statistics taken at each BN input during the last forward pass."""

    def __init__(self, model: Any):
        import torch

        self.terms: list[Any] = []
        self.handles = []
        for module in model.modules():
            if isinstance(module, torch.nn.BatchNorm2d):
                self.handles.append(module.register_forward_hook(self.hook))

    def hook(self, module: Any, inputs: Any, output: Any) -> None:
        a = inputs[0]
        mean, var = a.mean(dim=(0, 2, 3)), a.var(dim=(0, 2, 3), unbiased=False)
        self.terms.append(((mean - module.running_mean) ** 2).sum() + ((var - module.running_var) ** 2).sum())

    def take(self) -> Any:
        total = sum(self.terms)
        self.terms = []
        return total

    def close(self) -> None:
        for h in self.handles:
            h.remove()


def total_variation(x: Any) -> Any:
    return (x[..., 1:, :] - x[..., :-1, :]).abs().mean() + (x[..., :, 1:] - x[..., :, :-1]).abs().mean()


def conv_generator(seed: int) -> Any:
    """G(z, class): a DCGAN-style conv decoder, z 32 + one-hot 10 -> fc 64x4x4 -> transposed conv
    32x8x8 -> transposed conv 16x16x16 -> conv 1, sigmoid (84k parameters; the MLP it replaces had
    54k). GroupNorm, not BatchNorm: per-sample, so sampling and training behave alike and the
    diversity pairs do not leak into each other's statistics."""
    torch = torch_single_thread()
    nn = torch.nn
    torch.manual_seed(seed + 1000)

    class Decoder(nn.Module):  # type: ignore[misc,name-defined]  # nn: torch.nn loaded at call time, Any
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(Z_DIM + CLASSES, 64 * 4 * 4)
            self.body = nn.Sequential(
                nn.GroupNorm(8, 64), nn.ReLU(),
                nn.ConvTranspose2d(64, 32, 4, stride=2, padding=1), nn.GroupNorm(8, 32), nn.ReLU(),
                nn.ConvTranspose2d(32, 16, 4, stride=2, padding=1), nn.GroupNorm(4, 16), nn.ReLU(),
                nn.Conv2d(16, 1, 3, padding=1), nn.Sigmoid(),
            )  # fmt: skip

        def forward(self, z: Any, c: Any) -> Any:
            h = self.fc(torch.cat([z, nn.functional.one_hot(c, CLASSES).float()], 1))
            return self.body(h.view(-1, 64, 4, 4))

    return Decoder()


def prodg_prototypes(model: Any, seed: int) -> np.ndarray:
    """The method: train G(z, class) against the frozen model only (CE on the requested class +
    BN-statistics matching + TV - mode-seeking diversity); prototype = mean of 256 samples."""
    torch = torch_single_thread()
    nn = torch.nn
    g = conv_generator(seed)
    opt = torch.optim.Adam(g.parameters(), lr=1e-3)
    rng = torch.Generator().manual_seed(seed)
    half = GEN_BATCH // 2
    bn = BNStatLoss(model)
    try:
        for _ in range(GEN_STEPS):
            c = torch.randint(0, CLASSES, (half,), generator=rng).repeat(2)  # each class draw twice: diversity pairs
            z = torch.randn(GEN_BATCH, Z_DIM, generator=rng)
            x = g(z, c)
            logits = model(x)
            # mode-seeking diversity: image distance per latent distance, between the two samples of a pair
            div = (x[:half] - x[half:]).abs().mean(dim=(1, 2, 3)) / (z[:half] - z[half:]).abs().mean(dim=1)
            loss = (nn.functional.cross_entropy(logits, c) + W_BN * bn.take() + W_TV * total_variation(x)
                    - W_DIV * div.mean())  # fmt: skip
            opt.zero_grad()
            loss.backward()
            opt.step()
    finally:
        bn.close()  # the frozen model is shared: never leave hooks on it
    with torch.no_grad():
        z = torch.randn(PROTO_SAMPLES * CLASSES, Z_DIM, generator=rng)
        c = torch.arange(CLASSES).repeat_interleave(PROTO_SAMPLES)
        samples = g(z, c).view(CLASSES, PROTO_SAMPLES, SIDE, SIDE)
    return np.asarray(samples.mean(dim=1).numpy())


def direct_prototypes(model: Any, seed: int, deep_inversion: bool) -> np.ndarray:
    """Optimise images directly: activation maximisation (one per class, -logit + L2) or
    DeepInversion (16 per class, CE + BN matching + TV + L2; prototype = their mean)."""
    torch = torch_single_thread()
    nn = torch.nn
    per_class = DI_PER_CLASS if deep_inversion else 1
    rng = torch.Generator().manual_seed(seed + 2000)
    raw = (0.1 * torch.randn(CLASSES * per_class, 1, SIDE, SIDE, generator=rng)).requires_grad_(True)
    c = torch.arange(CLASSES).repeat_interleave(per_class)
    opt = torch.optim.Adam([raw], lr=0.05)
    bn = BNStatLoss(model) if deep_inversion else None
    try:
        for _ in range(DIRECT_STEPS):
            x = torch.sigmoid(raw)
            logits = model(x)
            l2 = (x**2).mean()
            if bn is not None:
                loss = nn.functional.cross_entropy(logits, c) + W_BN * bn.take() + W_TV * total_variation(x) + W_L2 * l2
            else:
                loss = -logits.gather(1, c[:, None]).mean() + W_L2 * l2
            opt.zero_grad()
            loss.backward()
            opt.step()
    finally:
        if bn is not None:
            bn.close()
    with torch.no_grad():
        return np.asarray(torch.sigmoid(raw).view(CLASSES, per_class, SIDE, SIDE).mean(dim=1).numpy())


def class_mean_prototypes(x_train: np.ndarray, y_train: np.ndarray) -> np.ndarray:
    """Data-based: each class's mean training image."""
    return np.stack([x_train[y_train == k].mean(axis=0) for k in range(CLASSES)])


def class_medoid_prototypes(x_train: np.ndarray, y_train: np.ndarray, feats: np.ndarray) -> np.ndarray:
    """Data-based: each class's medoid, the real training image whose summed Euclidean distance to
    the class's other images is least in the frozen model's feature space (`feats`, one row per
    training image) -- the space the explanation is made in."""
    out = []
    for k in range(CLASSES):
        members = np.flatnonzero(y_train == k)
        f = feats[members].astype(np.float64)
        dist = np.sqrt(np.maximum(((f[:, None, :] - f[None, :, :]) ** 2).sum(axis=2), 0.0))
        out.append(x_train[members[dist.sum(axis=1).argmin()]])
    return np.stack(out)


def nearest_prototype_agreement(query: np.ndarray, prototypes: np.ndarray, predicted: np.ndarray) -> float:
    """The share of queries whose nearest prototype (Euclidean, rows of `prototypes` are classes
    0..9) has the class in `predicted`: "this looks like that" agrees with the classifier."""
    q = query.reshape(len(query), -1).astype(np.float64)
    p = prototypes.reshape(len(prototypes), -1).astype(np.float64)
    dist = (q**2).sum(axis=1)[:, None] - 2.0 * q @ p.T + (p**2).sum(axis=1)[None, :]
    return float(np.mean(dist.argmin(axis=1) == predicted))


def prototype_metrics(prototypes: np.ndarray, probs_protos: np.ndarray, x_test: np.ndarray, y_test: np.ndarray,
                      predicted: np.ndarray, feat_protos: np.ndarray, feat_test: np.ndarray) -> dict[str, float]:  # fmt: skip
    """explanation_agreement: share of held-out images whose nearest prototype in the frozen model's
    feature space has the class the classifier predicts (the explanation's use); fidelity: the same
    in pixel space (the study's earlier measure); confidence: mean softmax of each prototype's own
    class; correlation: mean Pearson r of each prototype with its test class mean (reported only)."""
    truth = np.stack([x_test[y_test == k].mean(axis=0) for k in range(CLASSES)])
    corr = [float(np.corrcoef(p.ravel(), t.ravel())[0, 1]) if p.std() > 0 else 0.0 for p, t in zip(prototypes, truth)]
    return {
        "explanation_agreement": nearest_prototype_agreement(feat_test, feat_protos, predicted),
        "fidelity": nearest_prototype_agreement(x_test, prototypes, predicted),
        "confidence": float(np.mean(probs_protos[np.arange(CLASSES), np.arange(CLASSES)])),
        "correlation": float(np.mean(corr)),
    }
