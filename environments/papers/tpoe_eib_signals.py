"""The signals of `tpoe_eib_synth_eeg`'s synthetic EEG (shapes, the background, tokens), shared by
the heads (`tpoe_eib_model.py`) and the pretrained backbone (`tpoe_eib_backbone.py`), which the heads
read: here so that neither imports the other's module at load time."""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.signal import lfilter

CHANNELS, SAMPLES, SEGMENT = 16, 128, 16
SEGMENTS = SAMPLES // SEGMENT
AMPLITUDE, AR_PHI, ALPHA_AMP = 1.5, 0.9, 0.5
WIDTH = 16  # the backbone's feature width per token (tpoe_eib_backbone.py)


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
    eps = rng.normal(size=(n, CHANNELS, SAMPLES)) * np.sqrt(1 - AR_PHI**2)
    eps[..., 0] = rng.normal(size=(n, CHANNELS))  # the stationary start
    x = lfilter([1.0], [1.0, -AR_PHI], eps, axis=-1)  # x_t = phi x_{t-1} + eps_t
    phase = rng.uniform(0, 2 * np.pi, size=(n, CHANNELS, 1))
    return np.asarray(x + ALPHA_AMP * np.sin(2 * np.pi * 10 * np.arange(SAMPLES) / SAMPLES + phase))


def torch_single_thread() -> Any:
    import torch

    # One thread: tiny tensors, and threads fighting over 2 shared cores only slow each other.
    torch.set_num_threads(1)
    return torch


def tokens(x: Any) -> Any:
    """(n, C, T) -> (n, C, SEGMENTS, SEGMENT)."""
    return x.reshape(x.shape[0], CHANNELS, SEGMENTS, SEGMENT)
