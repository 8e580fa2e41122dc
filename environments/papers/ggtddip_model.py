"""GG-TD-DIP's parts: the analytic cine phantom (and its out-of-distribution variant), the
training families of the priors (cardiac; head, the mismatched anatomy), the Cartesian k-t
sampling, the measurement operator, the non-learned reconstructions (zero-filled, view sharing, k-t low-rank SVT), the
rank-4 temporal subspace (the old stand-in tangent, kept as an ablation) and the noise-level
gate. `ggtddip_prior.py` holds the learned denoising prior, its Jacobian tangent and the
diffusion-only sampler; `ggtddip.py` the DIP solvers and the task.

Images are real, 48x48, 16 frames; k-space is the orthonormal 2-D FFT of each frame (so k-space
noise of std sigma is image noise of std sigma), sampled on whole phase-encode lines (rows).
"""

from __future__ import annotations

import numpy as np

SIDE, FRAMES, SIGMA = 48, 16, 0.05
RANK = 4
BODY, MYO, BLOOD, SPOT = 0.3, 0.6, 1.0, 0.8
OOD_BLOOD, OOD_LESION = 0.1, 0.95
ANATOMIES = ("cardiac", "head")
SVT_ITERS = 100


def ellipse(x: np.ndarray, y: np.ndarray, cx: float, cy: float, ax: float, ay: float) -> np.ndarray:
    return ((x - cx) / ax) ** 2 + ((y - cy) / ay) ** 2 <= 1.0


def phantom(seed: int) -> np.ndarray:
    """(FRAMES, SIDE, SIDE) one cardiac cycle: a body ellipse with two static spots, and a heart
    (myocardium ring around a blood pool) whose radii contract and relax periodically. Each seed
    moves the heart's centre and the phase of its cycle a little. Values are exact indicators at
    the pixel centres (coordinates in [-1, 1])."""
    rng = np.random.default_rng([seed, 10])
    cx, cy = rng.uniform(-0.08, 0.08, size=2) + (0.05, -0.05)
    phase0 = rng.uniform(0, 2 * np.pi)
    c = (np.arange(SIDE) + 0.5) / SIDE * 2 - 1
    y, x = np.meshgrid(c, c, indexing="ij")
    base = np.where(ellipse(x, y, 0, 0, 0.9, 0.75), BODY, 0.0)
    base = np.where(ellipse(x, y, -0.5, 0.35, 0.1, 0.12) | ellipse(x, y, 0.55, 0.4, 0.08, 0.08), SPOT, base)
    frames = []
    for t in range(FRAMES):
        beat = np.cos(2 * np.pi * t / FRAMES + phase0)  # 1: relaxed, -1: contracted
        outer, inner = 0.36 + 0.06 * beat, 0.24 + 0.09 * beat
        frame = np.where(ellipse(x, y, cx, cy, outer, 0.9 * outer), MYO, base)
        frames.append(np.where(ellipse(x, y, cx, cy, inner, 0.9 * inner), BLOOD, frame))
    return np.array(frames)


def phantom_ood(seed: int) -> np.ndarray:
    """The out-of-distribution test sequence for a prior trained on bright-blood cardiac frames: the
    same anatomy and motion as `phantom(seed)` in black-blood contrast (the pool dark, OOD_BLOOD),
    with a bright lesion (OOD_LESION) in the body wall that no training frame has."""
    frames = phantom(seed)
    rng = np.random.default_rng([seed, 13])
    c = (np.arange(SIDE) + 0.5) / SIDE * 2 - 1
    y, x = np.meshgrid(c, c, indexing="ij")
    lesion = ellipse(x, y, -0.45 + rng.uniform(-0.05, 0.05), -0.35 + rng.uniform(-0.05, 0.05), 0.09, 0.07)
    frames = np.where(frames == BLOOD, OOD_BLOOD, frames)
    return np.where(lesion[None], OOD_LESION, frames)


def training_sequence(anatomy: str, rng: np.random.Generator) -> np.ndarray:
    """(FRAMES, SIDE, SIDE) one sequence of a prior's training family. `cardiac`: the test
    phantom's anatomy with every size, position and intensity drawn more widely (so the test
    phantoms lie inside the family, none of them in it exactly); `head`: another anatomy and contrast
    (a bright skull ring, grey brain, dark ventricles that pulse, small bright spots) -- the
    mismatched prior's family."""
    c = (np.arange(SIDE) + 0.5) / SIDE * 2 - 1
    y, x = np.meshgrid(c, c, indexing="ij")
    u = rng.uniform
    phase0 = u(0, 2 * np.pi)
    frames = []
    if anatomy == "cardiac":
        ax, ay = 0.9 * u(0.85, 1.1), 0.75 * u(0.85, 1.1)
        body, myo, blood, spot = (v * u(0.85, 1.15) for v in (BODY, MYO, BLOOD, SPOT))
        spots = [
            (-0.5 + u(-0.1, 0.1), 0.35 + u(-0.1, 0.1), 0.1 * u(0.7, 1.3), 0.12 * u(0.7, 1.3)),
            (0.55 + u(-0.1, 0.1), 0.4 + u(-0.1, 0.1), 0.08 * u(0.7, 1.3), 0.08 * u(0.7, 1.3)),
        ]
        cx, cy = u(-0.15, 0.15) + 0.05, u(-0.15, 0.15) - 0.05
        size, squash = u(0.85, 1.15), u(0.8, 1.0)
        base = np.where(ellipse(x, y, 0, 0, ax, ay), body, 0.0)
        for sx, sy, rx, ry in spots:
            base = np.where(ellipse(x, y, sx, sy, rx, ry), spot, base)
        for t in range(FRAMES):
            beat = np.cos(2 * np.pi * t / FRAMES + phase0)
            outer, inner = size * (0.36 + 0.06 * beat), size * (0.24 + 0.09 * beat)
            frame = np.where(ellipse(x, y, cx, cy, outer, squash * outer), myo, base)
            frames.append(np.where(ellipse(x, y, cx, cy, inner, squash * inner), blood, frame))
    elif anatomy == "head":
        ax, ay = 0.7 * u(0.9, 1.1), 0.85 * u(0.9, 1.1)
        skull, brain, csf, spot = 0.9 * u(0.9, 1.1), 0.45 * u(0.85, 1.15), 0.12 * u(0.5, 1.5), 0.7 * u(0.85, 1.15)
        vx, vy = u(-0.05, 0.05), u(-0.1, 0.1)
        round_spots = [(u(-0.4, 0.4), u(-0.5, 0.5), u(0.04, 0.08)) for _ in range(3)]  # (x, y, radius)
        base = np.where(ellipse(x, y, 0, 0, ax, ay), skull, 0.0)
        base = np.where(ellipse(x, y, 0, 0, 0.88 * ax, 0.9 * ay), brain, base)
        for sx, sy, r in round_spots:
            base = np.where(ellipse(x, y, sx, sy, r, r), spot, base)
        for t in range(FRAMES):
            pulse = 1 + 0.15 * np.cos(2 * np.pi * t / FRAMES + phase0)
            ventricles = ellipse(x, y, vx - 0.12, vy, 0.06 * pulse, 0.22 * pulse) | ellipse(
                x, y, vx + 0.12, vy, 0.06 * pulse, 0.22 * pulse
            )
            frames.append(np.where(ventricles, csf, base))
    else:
        raise ValueError(f"anatomy must be 'cardiac' or 'head', got {anatomy!r}")
    return np.array(frames)


def training_frames(anatomy: str, sequences: int, seed: int) -> np.ndarray:
    """(sequences * FRAMES, SIDE, SIDE) float32 frames of one anatomy's family, from a seed stream
    that no test cell uses."""
    rng = np.random.default_rng([seed, 20, ANATOMIES.index(anatomy) if anatomy in ANATOMIES else 99])
    return np.concatenate([training_sequence(anatomy, rng) for _ in range(sequences)]).astype(np.float32)


def sampling_mask(acceleration: int, seed: int) -> np.ndarray:
    """(FRAMES, SIDE) boolean, True = phase-encode line ky sampled in that frame (FFT order, ky = 0
    first). Every frame samples exactly SIDE // acceleration lines: the central SIDE // (3R) lines
    (ky = 0 and its neighbours) and the rest at random among the others, a new draw per frame."""
    if acceleration < 1 or SIDE % acceleration:
        raise ValueError(f"acceleration must divide {SIDE}, got {acceleration}")
    lines = SIDE // acceleration
    centre = np.fft.ifftshift(np.arange(SIDE) - SIDE // 2)  # signed ky of each FFT row
    order = np.argsort(np.abs(centre), kind="stable")
    acs = order[: max(1, lines // 3)]
    rng = np.random.default_rng([seed, 11, acceleration])
    mask = np.zeros((FRAMES, SIDE), dtype=bool)
    others = np.setdiff1d(np.arange(SIDE), acs)
    for t in range(FRAMES):
        mask[t, acs] = True
        mask[t, rng.choice(others, size=lines - len(acs), replace=False)] = True
    return mask


def forward(images: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """A x: orthonormal 2-D FFT of each frame, unsampled rows zeroed."""
    return np.asarray(np.fft.fft2(images, norm="ortho") * mask[:, :, None])


def adjoint(kspace: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """A^H y, real part (the images are real)."""
    return np.fft.ifft2(kspace * mask[:, :, None], norm="ortho").real


def measure(images: np.ndarray, mask: np.ndarray, seed: int, sigma: float = SIGMA) -> np.ndarray:
    """Noisy sampled k-space: complex Gaussian noise of std sigma per real and imaginary part."""
    rng = np.random.default_rng([seed, 12, int(mask.sum())])
    noise = sigma * (rng.standard_normal(images.shape) + 1j * rng.standard_normal(images.shape))
    return np.asarray((np.fft.fft2(images, norm="ortho") + noise) * mask[:, :, None])


def noise_level(kspace: np.ndarray, mask: np.ndarray) -> float:
    """Self-calibrated sigma: MAD of the real and imaginary parts in the outer fifth of the readout
    (|kx| >= 0.4 cycles per pixel) on the sampled lines, where the phantom's spectrum has mostly decayed
    (its sharp edges leave some: the estimate runs ~15% high, which closes the gate a little early)."""
    kx = np.abs(np.fft.fftfreq(SIDE))
    outer = kspace[:, :, kx >= 0.4][mask]
    values = np.concatenate([outer.real.ravel(), outer.imag.ravel()])
    return float(np.median(np.abs(values)) / 0.6745)


def zero_filled(kspace: np.ndarray, mask: np.ndarray) -> np.ndarray:
    return adjoint(kspace, mask)


def view_sharing(kspace: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Each unsampled line taken from the nearest frame (cyclic time) that sampled it."""
    filled = kspace.copy()
    for t in range(FRAMES):
        for ky in np.flatnonzero(~mask[t]):
            donors = np.flatnonzero(mask[:, ky])
            if donors.size:
                gap = np.minimum(np.abs(donors - t), FRAMES - np.abs(donors - t))
                filled[t, ky] = kspace[donors[np.argmin(gap)], ky]
    return np.fft.ifft2(filled, norm="ortho").real


def casorati(images: np.ndarray) -> np.ndarray:
    """(pixels, frames)."""
    return images.reshape(len(images), -1).T


def from_casorati(matrix: np.ndarray) -> np.ndarray:
    return matrix.T.reshape(-1, SIDE, SIDE)


def kt_svt(kspace: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """k-t low rank: proximal gradient on 1/2 ||A x - y||^2 + tau ||X||_* (X the Casorati matrix),
    step 1 (||A|| = 1), tau = sigma_hat (sqrt(pixels) + sqrt(frames)), the noise matrix's top
    singular value."""
    tau = noise_level(kspace, mask) * (np.sqrt(SIDE * SIDE) + np.sqrt(FRAMES))
    x = zero_filled(kspace, mask)
    for _ in range(SVT_ITERS):
        step = x - adjoint(forward(x, mask) - kspace, mask)
        u, s, vt = np.linalg.svd(casorati(step), full_matrices=False)
        x = from_casorati((u * np.maximum(s - tau, 0.0)) @ vt)
    return x


def temporal_basis(images: np.ndarray, rank: int = RANK) -> np.ndarray:
    """(frames, rank): the top right singular vectors of the Casorati matrix (its temporal subspace)."""
    return np.linalg.svd(casorati(images), full_matrices=False)[2][:rank].T


def tangent_projection(update: np.ndarray, basis: np.ndarray) -> np.ndarray:
    """P_T(D) = D V V^T on the Casorati matrix: the part of an image-sequence update that lies in
    the current rank-4 temporal subspace (an orthogonal projector in the Frobenius inner product)."""
    d = casorati(update)
    return from_casorati(d @ basis @ basis.T)


def gate(residual_energy: float, measured: int, sigma_hat: float) -> float:
    """The orthogonal (measurement-driven) part's weight: 1 - (expected noise energy / residual
    energy), clipped to [0, 1]. Far from the data it is ~1; once the residual is down to the noise
    floor (2 sigma^2 per complex sample) it closes, so what is left of the fit stays on the tangent."""
    if residual_energy <= 0:
        return 0.0
    return float(np.clip(1.0 - 2 * measured * sigma_hat**2 / residual_energy, 0.0, 1.0))


def psnr(recon: np.ndarray, truth: np.ndarray) -> float:
    """Over the whole sequence, peak = the truth's maximum."""
    mse = float(((recon - truth) ** 2).mean())
    return float(10 * np.log10(truth.max() ** 2 / mse)) if mse > 0 else float("inf")
