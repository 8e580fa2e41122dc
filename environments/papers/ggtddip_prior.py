"""GG-TD-DIP's learned prior: a small noise-conditional denoiser (the score model of a variance-
exploding diffusion, in EDM's parametrisation) trained on phantom frames, the tangent it defines at
an estimate (the top-k subspace of its Jacobian, by randomized subspace iteration on JVPs), and the
diffusion-only reconstruction (reverse diffusion with a DDNM-style data-consistency projection).

A prior is trained once per (anatomy, scale) and cached as a checkpoint under `prior_dir` (the run
folder's cache, never git); a checkpoint records the image side it was trained for, and loading one
for another side is refused with the option's name. The denoiser works on single frames: the
temporal structure is the DIP's business.
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from environments.papers import ggtddip_model as gm

SIGMA_DATA, SIGMA_MIN, SIGMA_MAX = 0.3, 0.01, 2.0  # EDM preconditioning; training noise range
WIDTH, TRAIN_STEPS, BATCH, LR, SEQUENCES = 8, 800, 16, 2e-3, 100
PRIOR_VERSION = 1  # bump when the architecture or the training recipe changes (the cache key has it)
_LOCK = threading.Lock()  # cells may run in threads: one training per prior
_LOADED: dict[tuple[str, str, int, str], Prior] = {}


def torch_single_thread() -> Any:
    import torch

    # One thread: small tensors, and threads fighting over 2 shared cores only slow each other.
    torch.set_num_threads(1)
    return torch


def denoiser_network(width: int | None = None) -> Any:
    """A small U-Net F(c_in x, log sigma) at three resolutions (full, 1/2, 1/4), SiLU, skip
    connections; the denoiser is D(x, sigma) = c_skip x + c_out F (EDM), an x0 estimate."""
    torch = torch_single_thread()
    nn = torch.nn

    def block(a: int, b: int, stride: int = 1) -> Any:
        return nn.Sequential(nn.Conv2d(a, b, 3, stride=stride, padding=1), nn.SiLU())

    class UNet(nn.Module):  # type: ignore[misc,name-defined]  # nn: torch.nn loaded at call time, Any
        def __init__(self) -> None:
            super().__init__()
            w = width or WIDTH
            self.enc1 = nn.Sequential(block(2, w), block(w, w))
            self.enc2 = nn.Sequential(block(w, 2 * w, 2), block(2 * w, 2 * w))
            self.mid = nn.Sequential(block(2 * w, 2 * w, 2), block(2 * w, 2 * w))
            self.dec2 = block(4 * w, 2 * w)
            self.dec1 = nn.Sequential(block(3 * w, w), nn.Conv2d(w, 1, 3, padding=1))
            self.up = nn.Upsample(scale_factor=2, mode="nearest")

        def forward(self, x: Any, sigma: Any) -> Any:
            s = sigma.view(-1, 1, 1, 1)
            c_in = 1 / torch.sqrt(s**2 + SIGMA_DATA**2)
            c_skip = SIGMA_DATA**2 / (s**2 + SIGMA_DATA**2)
            c_out = s * SIGMA_DATA / torch.sqrt(s**2 + SIGMA_DATA**2)
            h1 = self.enc1(torch.cat([c_in * x, (torch.log(s) / 4).expand_as(x)], 1))
            h2 = self.enc2(h1)
            h3 = self.mid(h2)
            d2 = self.dec2(torch.cat([self.up(h3), h2], 1))
            out = self.dec1(torch.cat([self.up(d2), h1], 1))
            return c_skip * x + c_out * out

    return UNet()


@dataclass
class Prior:
    """A trained denoiser and what it was trained on."""

    net: Any
    anatomy: str
    side: int
    device: str

    def denoise(self, frames: np.ndarray, sigma: float) -> np.ndarray:
        """D(x, sigma) of each frame of a (T, S, S) array."""
        torch = torch_single_thread()
        with torch.no_grad():
            x = torch.as_tensor(frames, dtype=torch.float32, device=self.device)[:, None]
            s = torch.full((len(frames),), float(sigma), device=self.device)
            return np.asarray(self.net(x, s)[:, 0].double().cpu().numpy())


def train_prior(anatomy: str, scale: int = 1, device: str = "cpu", seed: int = 0) -> Any:
    """Denoising score matching on the anatomy's training frames (EDM loss weighting): sigma
    log-uniform in [SIGMA_MIN, SIGMA_MAX], Adam with a cosine-decayed rate; `scale` multiplies the
    training frames and steps. Deterministic given the seed (one thread)."""
    torch = torch_single_thread()
    frames = torch.as_tensor(gm.training_frames(anatomy, SEQUENCES * scale, seed), device=device)[:, None]
    torch.manual_seed(seed)
    net = denoiser_network().to(device)
    steps = TRAIN_STEPS * scale
    opt = torch.optim.Adam(net.parameters(), lr=LR)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps)
    gen = torch.Generator(device=device).manual_seed(seed)
    for _ in range(steps):
        idx = torch.randint(0, len(frames), (BATCH,), generator=gen, device=device)
        x0 = frames[idx]
        log_s = torch.rand(BATCH, generator=gen, device=device) * np.log(SIGMA_MAX / SIGMA_MIN) + np.log(SIGMA_MIN)
        s = torch.exp(log_s)
        noisy = x0 + s.view(-1, 1, 1, 1) * torch.randn(x0.shape, generator=gen, device=device)
        weight = (s**2 + SIGMA_DATA**2) / (s * SIGMA_DATA) ** 2  # 1 / c_out^2
        loss = (weight.view(-1, 1, 1, 1) * (net(noisy, s) - x0) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
    return net.eval()


def cache_path(prior_dir: str, anatomy: str, scale: int) -> Path:
    key = hashlib.sha256(f"{anatomy}-{gm.SIDE}-{scale}-{WIDTH}-{TRAIN_STEPS}-{SEQUENCES}-v{PRIOR_VERSION}".encode())
    return Path(prior_dir) / f"ggtddip_prior_{anatomy}_x{scale}_{key.hexdigest()[:12]}.pt"


def save_prior(net: Any, anatomy: str, side: int, path: Path) -> None:
    torch = torch_single_thread()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    width = int(net.enc1[1][0].out_channels)
    torch.save({"state_dict": net.state_dict(), "anatomy": anatomy, "side": side, "width": width}, tmp)
    tmp.replace(path)  # atomic: a killed training leaves no half-written checkpoint


def load_prior(path: Path, option: str, device: str = "cpu") -> Prior:
    """A checkpoint written by `save_prior`; one for another image side is refused, naming `option`."""
    torch = torch_single_thread()
    try:
        blob = torch.load(path, map_location=device, weights_only=True)
    except FileNotFoundError:
        raise ValueError(f"{option}: no checkpoint at {path}") from None
    except Exception as exc:  # a file that is not a checkpoint: name the option, not torch's internals
        raise ValueError(f"{option}: {path} is not a ggtddip prior checkpoint ({type(exc).__name__})") from None
    if not isinstance(blob, dict) or {"state_dict", "side", "anatomy"} - set(blob):
        raise ValueError(f"{option}: {path} is not a ggtddip prior checkpoint (no state_dict/side/anatomy)")
    if int(blob["side"]) != gm.SIDE:
        raise ValueError(
            f"{option}: the checkpoint {path} was trained on {blob['side']}x{blob['side']} images, "
            f"this task's frames are {gm.SIDE}x{gm.SIDE}: train one for {gm.SIDE}x{gm.SIDE} "
            f"(leave {option} unset and the task trains and caches it)"
        )
    net = denoiser_network(int(blob.get("width", WIDTH))).to(device)
    net.load_state_dict(blob["state_dict"])
    return Prior(net=net.eval(), anatomy=str(blob["anatomy"]), side=int(blob["side"]), device=device)


def get_prior(
    anatomy: str, prior_dir: str, scale: int = 1, device: str = "cpu", checkpoint: str | None = None
) -> Prior:
    """The anatomy's prior: `checkpoint` when given (option `prior_checkpoint`), else the cached one
    under `prior_dir`, trained and cached on first use."""
    key = (anatomy, checkpoint or prior_dir, scale, device)
    with _LOCK:
        if key in _LOADED:
            return _LOADED[key]
        if checkpoint is not None:
            prior = load_prior(Path(checkpoint), "prior_checkpoint", device)
        else:
            path = cache_path(prior_dir, anatomy, scale)
            if not path.exists():
                save_prior(train_prior(anatomy, scale, device), anatomy, gm.SIDE, path)
            prior = load_prior(path, "prior_dir", device)
        _LOADED[key] = prior
        return prior


def jacobian_tangent(
    prior: Prior, frames: np.ndarray, sigma: float, rank: int, iters: int, start: np.ndarray
) -> np.ndarray:
    """(T, S*S, rank) orthonormal (float64) per frame: the top-`rank` subspace of the denoiser's
    Jacobian dD(x, sigma)/dx at each frame, by `iters` steps of subspace iteration Q <- orth(J Q)
    from `start` (T, S*S, rank), each J Q one batched JVP (forward-mode AD: T * rank tangents)."""
    torch = torch_single_thread()
    t, n = frames.shape[0], frames.shape[1] * frames.shape[2]
    side = frames.shape[1]
    x = torch.as_tensor(frames, dtype=torch.float32, device=prior.device)[:, None]
    xs = x.repeat_interleave(rank, 0)  # (T*rank, 1, S, S): frame i's copy for each of its tangents
    s = torch.full((t * rank,), float(sigma), device=prior.device)
    q = orthonormal(start)
    for _ in range(iters):
        v = torch.as_tensor(
            np.ascontiguousarray(q.transpose(0, 2, 1)).reshape(t * rank, 1, side, side),
            dtype=torch.float32,
            device=prior.device,
        )
        _, jv = torch.func.jvp(lambda z: prior.net(z, s), (xs,), (v,))
        q = orthonormal(jv.detach().double().cpu().numpy().reshape(t, rank, n).transpose(0, 2, 1))
    return q


def orthonormal(q: np.ndarray) -> np.ndarray:
    """Per-frame QR in float64: exactly orthonormal columns, so the projector is exact."""
    return np.linalg.qr(q)[0]


def project(update: np.ndarray, basis: np.ndarray) -> np.ndarray:
    """P_T(update) per frame: Q Q^T g, Q = basis[t] (S*S, rank)."""
    g = update.reshape(len(update), -1)
    coeff = np.einsum("tnk,tn->tk", basis, g)
    return np.asarray(np.einsum("tnk,tk->tn", basis, coeff).reshape(update.shape))


def reverse_sigmas(steps: int) -> np.ndarray:
    """The reverse diffusion's noise levels: geometric from SIGMA_MAX / 2 down to SIGMA_MIN."""
    return np.geomspace(SIGMA_MAX / 2, SIGMA_MIN, steps)


def ddnm_reconstruct(
    prior: Prior, kspace: np.ndarray, mask: np.ndarray, seed: int, steps: int, eta: float = 0.5
) -> np.ndarray:
    """Diffusion-only: reverse diffusion of each frame from noise, every x0 estimate made data-
    consistent by the range-null projection x0 <- x0 - A^H (A x0 - y) (DDNM; A^H A is the sampled
    lines' projector), then the next noise level by DDIM with `eta` of fresh noise."""
    rng = np.random.default_rng([seed, 30])
    sigmas = reverse_sigmas(steps)
    x = sigmas[0] * rng.standard_normal(kspace.shape)
    x0 = x
    for i, sigma in enumerate(sigmas):
        x0 = prior.denoise(x, sigma)
        x0 = x0 - gm.adjoint(gm.forward(x0, mask) - kspace, mask)
        if i + 1 < len(sigmas):
            nxt = sigmas[i + 1]
            eps = (x - x0) / sigma
            x = x0 + nxt * (np.sqrt(1 - eta**2) * eps + eta * rng.standard_normal(x.shape))
    return np.asarray(x0)
