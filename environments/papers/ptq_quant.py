"""The candidate configurations of `ptq_priced_bitalloc`: finite formats, quantiser families,
granularities and equivalent transformations of one layer's weight matrix, and their storage cost.

A layer's weight is a matrix W (fan-in x outputs: a convolution's kernel unfolded, as `F.unfold`
orders its input). A candidate is (format, granularity, transform):
- formats: symmetric uniform integers (`int2`..`int8`), the FP4 E2M1 grid (`fp4`), a normal-float
  grid (`nf4`: levels at normal quantiles, an exact zero) and a k-means codebook (`km2`..`km4`:
  Lloyd's algorithm in one dimension, 2^b centroids per group);
- granularity: one scale or codebook per tensor, or per output channel (a column);
- transform, an equivalent transformation applied before quantising and undone after:
  `rotate` (W -> Q^T W with a seeded random orthogonal Q; the layer computes (a Q)(Q^T W) = a W),
  `smooth` (W -> diag(s) W with s from the calibration activations' mean magnitude; the layer
  computes (a / s)(diag(s) W) = a W), or `none`.
The effective weight the network runs with is T^{-1}(q(T(W))); only q changes the layer's output.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

INT_BITS = {"int2": 2, "int3": 3, "int4": 4, "int8": 8}
KMEANS_BITS = {"km2": 2, "km3": 3, "km4": 4}
FORMATS = (*INT_BITS, "fp4", "nf4", *KMEANS_BITS)
GRANULARITIES = ("tensor", "channel")
TRANSFORMS = ("none", "rotate", "smooth")
STORE_BITS = 16  # each scale, codebook entry and smoothing factor is stored in fp16
FP4_E2M1 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])


@dataclass(frozen=True)
class Candidate:
    fmt: str
    granularity: str
    transform: str

    def label(self) -> str:
        return f"{self.fmt}/{self.granularity}/{self.transform}"


def candidates(formats: tuple[str, ...] = FORMATS, transforms: tuple[str, ...] = TRANSFORMS) -> tuple[Candidate, ...]:
    """Every admissible (format, granularity, transform); unknown names are one error naming the option."""
    check_names("formats", formats, FORMATS)
    check_names("transforms", transforms, TRANSFORMS)
    return tuple(Candidate(f, g, t) for f in formats for g in GRANULARITIES for t in transforms)


def check_names(option: str, given: tuple[str, ...], known: tuple[str, ...]) -> None:
    unknown = [name for name in given if name not in known]
    if unknown or not given:
        what = f"unknown {option[:-1]} {unknown[0]!r}" if unknown else f"no {option} given"
        raise ValueError(f"option {option}: {what}; choose from {', '.join(known)}")


def format_bits(fmt: str) -> int:
    if fmt in INT_BITS:
        return INT_BITS[fmt]
    if fmt in KMEANS_BITS:
        return KMEANS_BITS[fmt]
    if fmt in ("fp4", "nf4"):
        return 4
    raise ValueError(f"option formats: unknown format {fmt!r}; choose from {', '.join(FORMATS)}")


def cost_bits(shape: tuple[int, int], cand: Candidate, in_channels: int) -> int:
    """Storage of one quantised layer: codes, plus per group a scale (grids) or a codebook
    (k-means), plus a smoothing factor per input channel. A rotation is regenerated from its seed."""
    fan_in, outputs = shape
    bits = format_bits(cand.fmt)
    groups = outputs if cand.granularity == "channel" else 1
    per_group = (2**bits) * STORE_BITS if cand.fmt in KMEANS_BITS else STORE_BITS
    smooth = in_channels * STORE_BITS if cand.transform == "smooth" else 0
    return bits * fan_in * outputs + groups * per_group + smooth


@lru_cache(maxsize=1)
def nf4_levels() -> np.ndarray:
    """16 levels in [-1, 1]: 8 positive and 7 negative normal quantiles, scaled so the largest is 1,
    and an exact zero (equal-mass bins of N(0, 1) on each side; the extreme probability 1 - 1/32
    keeps the largest level finite)."""
    from scipy.stats import norm

    top = 1.0 - 1.0 / 32.0
    pos = norm.ppf(np.linspace(0.5, top, 9)[1:])
    neg = norm.ppf(np.linspace(0.5, top, 8)[1:])
    return np.sort(np.concatenate([-neg / neg.max(), [0.0], pos / pos.max()]))


def _nearest(x: np.ndarray, levels: np.ndarray) -> np.ndarray:
    """Each entry of x rounded to the nearest of the sorted levels."""
    idx = np.clip(np.searchsorted(levels, x), 1, len(levels) - 1)
    lo, hi = levels[idx - 1], levels[idx]
    return np.where(np.abs(x - lo) <= np.abs(hi - x), lo, hi)


def _grid_quantise(w: np.ndarray, unit_levels: np.ndarray) -> np.ndarray:
    """Scale w (one group) so its peak is the grid's largest magnitude, round to the grid, rescale."""
    peak = np.abs(w).max()
    if peak == 0:
        return np.zeros_like(w)
    scale = peak / np.abs(unit_levels).max()
    return np.asarray(_nearest(w / scale, unit_levels) * scale)


def _kmeans_1d(w: np.ndarray, k: int, iters: int = 25) -> np.ndarray:
    """Lloyd's algorithm in one dimension, started at the quantiles; returns w's reconstruction."""
    flat = w.ravel()
    distinct = np.unique(flat)
    if len(distinct) <= k:  # a codebook of the values themselves is exact
        return w.copy()
    centres = np.unique(np.quantile(flat, (np.arange(k) + 0.5) / k))
    for _ in range(iters):
        assign = np.abs(flat[:, None] - centres[None, :]).argmin(axis=1)
        sums = np.bincount(assign, weights=flat, minlength=len(centres))
        counts = np.bincount(assign, minlength=len(centres))
        moved = np.where(counts > 0, sums / np.maximum(counts, 1), centres)
        if np.allclose(moved, centres):
            break
        centres = np.sort(moved)
    return np.asarray(centres[np.abs(flat[:, None] - centres[None, :]).argmin(axis=1)].reshape(w.shape))


def quantise_group(w: np.ndarray, fmt: str) -> np.ndarray:
    """One group (a tensor or a column) in one format."""
    if fmt in INT_BITS:
        qmax = 2 ** (INT_BITS[fmt] - 1) - 1
        return _grid_quantise(w, np.arange(-qmax, qmax + 1, dtype=float))
    if fmt == "fp4":
        return _grid_quantise(w, np.concatenate([-FP4_E2M1[:0:-1], FP4_E2M1]))
    if fmt == "nf4":
        return _grid_quantise(w, nf4_levels())
    if fmt in KMEANS_BITS:
        return _kmeans_1d(w, 2 ** KMEANS_BITS[fmt])
    raise ValueError(f"option formats: unknown format {fmt!r}; choose from {', '.join(FORMATS)}")


def quantise(w: np.ndarray, fmt: str, granularity: str) -> np.ndarray:
    if granularity == "channel":
        return np.stack([quantise_group(w[:, j], fmt) for j in range(w.shape[1])], axis=1)
    if granularity == "tensor":
        return quantise_group(w, fmt)
    raise ValueError(f"granularity {granularity!r}: choose from {', '.join(GRANULARITIES)}")


def rotation(fan_in: int, seed: int) -> np.ndarray:
    """A Haar-random orthogonal matrix (QR of a Gaussian, signs fixed), reproducible from its seed."""
    g = np.random.default_rng(seed).normal(size=(fan_in, fan_in))
    q, r = np.linalg.qr(g)
    return q * np.sign(np.diag(r))[None, :]


def smoothing(channel_mean_abs: np.ndarray, rows_per_channel: int, alpha: float = 0.5) -> np.ndarray:
    """Per-input-row factor: s_c = E|a_c|^alpha for input channel c (geometric mean 1), repeated
    over the channel's kernel rows. Channels that carry large inputs are scaled up, so their weights
    get relatively finer steps; a silent channel keeps s = 1."""
    s = np.where(channel_mean_abs > 0, channel_mean_abs, 1.0) ** alpha
    return np.repeat(s / np.exp(np.log(s).mean()), rows_per_channel)


def effective_weight(w: np.ndarray, cand: Candidate, rot: np.ndarray, smooth: np.ndarray) -> np.ndarray:
    """T^{-1}(q(T(W))): the weight the layer effectively runs with under the candidate."""
    if cand.transform == "rotate":
        return np.asarray(rot @ quantise(rot.T @ w, cand.fmt, cand.granularity))
    if cand.transform == "smooth":
        return np.asarray(quantise(smooth[:, None] * w, cand.fmt, cand.granularity) / smooth[:, None])
    if cand.transform == "none":
        return quantise(w, cand.fmt, cand.granularity)
    raise ValueError(f"option transforms: unknown transform {cand.transform!r}; choose from {', '.join(TRANSFORMS)}")
