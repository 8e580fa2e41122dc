"""The network `ptq_priced_bitalloc` quantises: a small CNN trained here in torch on `load_digits`,
as plain weight matrices, with the pieces the prices need (layer inputs, layer-output errors and
the Fisher factor of each layer's output).

Layers (each weight a fan-in x outputs matrix; a convolution's kernel unfolded in `F.unfold`'s
order): conv 1->16 3x3, conv 16->32 3x3 stride 2, conv 32->64 3x3, each + ReLU, global average
pool, linear 64->10. Their sizes (144 / 4,608 / 18,432 / 640 weights) and their places in the
network differ, so their sensitivities differ: what a price has to get right.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

# (kind, in channels, out channels, stride); convolutions are 3x3 with padding 1
LAYERS = (("conv", 1, 16, 1), ("conv", 16, 32, 2), ("conv", 32, 64, 1), ("fc", 64, 10, 1))
KERNEL = 3
N_TRAIN, N_CALIB = 1000, 256
EPOCHS, BATCH, LR = 40, 64, 3e-3


@dataclass
class CNN:
    """Weights (fan-in x outputs) and biases per layer, float64."""

    weights: list[np.ndarray]
    biases: list[np.ndarray]

    def rows_per_channel(self, layer: int) -> int:
        return KERNEL * KERNEL if LAYERS[layer][0] == "conv" else 1

    def in_channels(self, layer: int) -> int:
        return LAYERS[layer][1]


def _torch() -> Any:
    import torch

    torch.set_num_threads(1)  # small tensors; threads fighting over 2 shared cores only slow it down
    return torch


def layer_forward(layer: int, a: Any, w: Any, b: Any | None) -> Any:
    """Layer `layer`'s pre-activation output for input a (torch), weight matrix w, bias b or None."""
    import torch.nn.functional as F

    kind, cin, cout, stride = LAYERS[layer]
    if kind == "fc":
        return a @ w + (b if b is not None else 0.0)
    kernel = w.T.reshape(cout, cin, KERNEL, KERNEL)
    return F.conv2d(a, kernel, b, stride=stride, padding=1)


def forward(weights: list[Any], biases: list[Any], x: Any) -> tuple[Any, list[Any], list[Any]]:
    """Logits, each layer's input and each layer's pre-activation output (torch tensors)."""
    a, inputs, outputs = x, [], []
    for layer in range(len(LAYERS)):
        inputs.append(a)
        z = layer_forward(layer, a, weights[layer], biases[layer])
        outputs.append(z)
        if layer < len(LAYERS) - 1:
            a = z.relu()
            if LAYERS[layer + 1][0] == "fc":
                a = a.mean(dim=(2, 3))  # global average pool
    return outputs[-1], inputs, outputs


def as_images(x: np.ndarray) -> np.ndarray:
    return x.reshape(-1, 1, 8, 8)


def logits(net: CNN, x: np.ndarray, weights: list[np.ndarray] | None = None) -> np.ndarray:
    torch = _torch()
    ws = [torch.from_numpy(w) for w in (weights or net.weights)]
    bs = [torch.from_numpy(b) for b in net.biases]
    with torch.no_grad():
        return np.asarray(forward(ws, bs, torch.from_numpy(as_images(x)))[0].numpy())


def train(x: np.ndarray, y: np.ndarray, seed: int) -> CNN:
    """Adam on cross-entropy, float32; returned as float64 matrices."""
    torch = _torch()
    torch.manual_seed(seed)
    shapes = [(cin * (KERNEL * KERNEL if kind == "conv" else 1), cout) for kind, cin, cout, _ in LAYERS]
    weights = [(torch.randn(*s) * (2.0 / s[0]) ** 0.5).requires_grad_() for s in shapes]
    biases = [torch.zeros(s[1], requires_grad=True) for s in shapes]
    opt = torch.optim.Adam(weights + biases, lr=LR)
    xt, yt = torch.from_numpy(as_images(x)).float(), torch.from_numpy(y).long()
    gen = torch.Generator().manual_seed(seed)
    for _ in range(EPOCHS):
        for idx in torch.randperm(len(yt), generator=gen).split(BATCH):
            loss = torch.nn.functional.cross_entropy(forward(weights, biases, xt[idx])[0], yt[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
    return CNN(
        [w.detach().double().numpy().copy() for w in weights], [b.detach().double().numpy().copy() for b in biases]
    )


Split = tuple[np.ndarray, np.ndarray]


@lru_cache(maxsize=8)
def trained(seed: int) -> tuple[CNN, Split, Split]:
    """The seed's CNN, its calibration split (the first N_CALIB training images; the method reads
    their inputs only) and its test split (the other 797 images)."""
    from sklearn.datasets import load_digits

    x, y = load_digits(return_X_y=True)
    x = x / 16.0
    order = np.random.default_rng(seed).permutation(len(y))
    train_idx, test_idx = order[:N_TRAIN], order[N_TRAIN:]
    net = train(x[train_idx], y[train_idx], seed)
    calib = train_idx[:N_CALIB]
    return net, (x[calib], y[calib]), (x[test_idx], y[test_idx])


def layer_inputs(net: CNN, x: np.ndarray) -> list[np.ndarray]:
    torch = _torch()
    with torch.no_grad():
        _, inputs, _ = forward(
            [torch.from_numpy(w) for w in net.weights],
            [torch.from_numpy(b) for b in net.biases],
            torch.from_numpy(as_images(x)),
        )
    return [a.numpy() for a in inputs]


def channel_mean_abs(a: np.ndarray) -> np.ndarray:
    """Mean |activation| per input channel (over samples and positions)."""
    return np.asarray(np.abs(a).mean(axis=(0, 2, 3)) if a.ndim == 4 else np.abs(a).mean(axis=0))


def output_error(layer: int, a: np.ndarray, dw: np.ndarray) -> np.ndarray:
    """dZ (samples x layer outputs, flattened): the layer-output error a weight error dW causes."""
    torch = _torch()
    with torch.no_grad():
        dz = layer_forward(layer, torch.from_numpy(a), torch.from_numpy(dw), None)
    return np.asarray(dz.reshape(len(a), -1).numpy())


def fisher_factors(net: CNN, x: np.ndarray) -> list[np.ndarray]:
    """G_l ((samples x classes) x layer-l outputs) with H_l = G_l^T G_l / samples the Fisher of the
    cross-entropy with respect to layer l's pre-activation output: per sample G_n = A_n J_n, J_n the
    Jacobian of the logits, A_n = diag(sqrt p) - sqrt(p) p^T so that A_n^T A_n = diag p - p p^T."""
    torch = _torch()
    ws = [torch.from_numpy(w) for w in net.weights]
    bs = [torch.from_numpy(b) for b in net.biases]
    with torch.no_grad():
        _, _, outputs = forward(ws, bs, torch.from_numpy(as_images(x)))
    p = torch.softmax(outputs[-1], dim=1)
    factors = []
    for layer in range(len(LAYERS)):
        z = outputs[layer].clone().requires_grad_()
        logit = _logits_from(layer, z, ws, bs)
        jac = torch.stack(
            [
                torch.autograd.grad(logit[:, k].sum(), z, retain_graph=True)[0].reshape(len(x), -1)
                for k in range(logit.shape[1])
            ],
            dim=1,
        )  # samples x classes x outputs
        centred = jac - torch.einsum("nk,nkd->nd", p, jac)[:, None, :]
        factors.append((p.sqrt()[:, :, None] * centred).reshape(-1, jac.shape[-1]).numpy())
    return factors


def _logits_from(layer: int, z: Any, ws: list[Any], bs: list[Any]) -> Any:
    """The logits as a function of layer `layer`'s output z (the layers above it)."""
    a = z
    for above in range(layer + 1, len(LAYERS)):
        a = a.relu()
        if LAYERS[above][0] == "fc":
            a = a.mean(dim=(2, 3))
        a = layer_forward(above, a, ws[above], bs[above])
    return a
