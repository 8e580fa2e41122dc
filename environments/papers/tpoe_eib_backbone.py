"""The pretrained, frozen EEG backbone of `tpoe_eib_synth_eeg` (torch, one thread).

The paper's head adapts a pretrained, frozen EEG backbone. Ours is pretrained here, self-supervised,
on synthetic EEG of *other* tasks: the task's background (AR(1) noise plus an alpha rhythm) carrying
events that are not the task's evidence -- sleep spindles, eye blinks, muscle bursts, isolated spikes
and sharp waves; never a spike-wave complex. It reads a recording as the task's tokens (channel x
segment, SEGMENT samples each): a linear patch embedding plus learned channel and segment embeddings,
then DEPTH pre-norm transformer blocks over all CHANNELS x SEGMENTS tokens (so every token's feature
carries context, as in EEG foundation models). Pretraining is masked-token reconstruction: MASK_SHARE
of the tokens are replaced by a learned mask vector and a linear decoder reconstructs every token's
samples (a masked token only from its context). The decoder is dropped afterwards; the heads read the
per-token features (n, CHANNELS, SEGMENTS, WIDTH) with the backbone frozen.
"""

from __future__ import annotations

import hashlib
import json
import os
from functools import lru_cache
from pathlib import Path
from typing import Any, TypedDict

import numpy as np

from environments.papers.tpoe_eib_signals import (
    AMPLITUDE,
    CHANNELS,
    SEGMENT,
    SEGMENTS,
    WIDTH,
    background,
    spike_only,
    tokens,
    torch_single_thread,
)

DEPTH, HEADS = 2, 2
PRETRAIN_RECORDINGS, PRETRAIN_HELD_OUT, PRETRAIN_STEPS, PRETRAIN_BATCH, PRETRAIN_LR = 2000, 200, 400, 32, 1e-3
MASK_SHARE = 0.5
EVENTS = ("spindle", "blink", "muscle", "spike", "sharp_wave")
# Trained backbones and fine-tuned models are kept on disk, keyed by their whole configuration, so a
# check stopped between cells (or run in chunks) does not train them again; None: memory only.
CACHE_DIR: Path | None = Path(os.environ.get("HARNESS_TPOE_CACHE", Path.home() / ".cache" / "harness" / "tpoe_eib"))


class PretrainingConfig(TypedDict):
    """Everything the pretrained backbone depends on (its disk-cache key, hashed as JSON)."""

    width: int
    depth: int
    heads: int
    recordings: int
    held_out: int
    steps: int
    batch: int
    lr: float
    mask: float
    events: tuple[str, ...]
    version: int


class FineTuneConfig(TypedDict):
    """Everything a fine-tuned model depends on (`tpoe_eib_model.fine_tune_config`; its disk-cache key)."""

    backbone: str  # the pretrained backbone's fingerprint
    n_train: int
    amplitude: float
    steps: int
    batch: int
    lr: float
    backbone_lr: float
    hidden: int
    features: int
    version: int


def cache_path(kind: str, seed: int, config: PretrainingConfig | FineTuneConfig) -> Path | None:
    """Where a trained module of this configuration is kept (None: no disk cache)."""
    if CACHE_DIR is None:
        return None
    key = hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest()[:16]
    return Path(CACHE_DIR) / f"{kind}-seed{seed}-{key}.pt"


def pretraining_config() -> PretrainingConfig:
    return {
        "width": WIDTH,
        "depth": DEPTH,
        "heads": HEADS,
        "recordings": PRETRAIN_RECORDINGS,
        "held_out": PRETRAIN_HELD_OUT,
        "steps": PRETRAIN_STEPS,
        "batch": PRETRAIN_BATCH,
        "lr": PRETRAIN_LR,
        "mask": MASK_SHARE,
        "events": EVENTS,
        "version": 1,
    }


def event_shape(kind: str, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """(waveform over one segment, number of adjacent channels it covers) of a pretraining event."""
    t = np.arange(SEGMENT)
    if kind == "spindle":  # a 12-14 cycles-per-second burst (16 samples = 1/8 of a recording), Gaussian envelope
        wave = np.sin(2 * np.pi * rng.uniform(0.35, 0.45) * t) * np.exp(-0.5 * ((t - 7.5) / 3.5) ** 2)
        return wave, 3
    if kind == "blink":  # a slow positive deflection on the frontal channels
        return 2.0 * np.sin(np.pi * t / (SEGMENT - 1)), 2
    if kind == "muscle":  # broadband high-frequency noise
        return rng.normal(scale=0.8, size=SEGMENT), 1
    if kind == "spike":
        return spike_only(), 1
    if kind == "sharp_wave":  # a broader triangular transient, no slow wave after it
        return np.interp(t, [2, 6, 10], [0.0, 1.0, 0.0]), 1
    raise ValueError(f"unknown pretraining event {kind!r}: use one of {EVENTS}")


def pretraining_recordings(seed: int, n: int) -> np.ndarray:
    """(n, CHANNELS, SAMPLES) float32: the task's background with 1-3 events of the other tasks each."""
    rng = np.random.default_rng([seed, 7])
    x = background(rng, n)
    for i in range(n):
        for _ in range(rng.integers(1, 4)):
            kind = EVENTS[rng.integers(len(EVENTS))]
            wave, span = event_shape(kind, rng)
            c = 0 if kind == "blink" else int(rng.integers(0, CHANNELS - span + 1))
            s = int(rng.integers(0, SEGMENTS))
            x[i, c : c + span, s * SEGMENT : (s + 1) * SEGMENT] += AMPLITUDE * wave
    return x.astype(np.float32)


def backbone_class() -> Any:
    torch = torch_single_thread()
    nn = torch.nn

    class Block(nn.Module):  # type: ignore[misc,name-defined]  # nn: torch.nn loaded at call time, Any
        """A pre-norm transformer block (written out: the same arithmetic with and without autograd)."""

        def __init__(self) -> None:
            super().__init__()
            self.norm1, self.norm2 = nn.LayerNorm(WIDTH), nn.LayerNorm(WIDTH)
            self.qkv, self.proj = nn.Linear(WIDTH, 3 * WIDTH), nn.Linear(WIDTH, WIDTH)
            self.mlp = nn.Sequential(nn.Linear(WIDTH, 2 * WIDTH), nn.GELU(), nn.Linear(2 * WIDTH, WIDTH))

        def forward(self, h: Any) -> Any:
            n, e, _ = h.shape
            q, k, v = self.qkv(self.norm1(h)).reshape(n, e, 3, HEADS, WIDTH // HEADS).permute(2, 0, 3, 1, 4)
            attention = torch.softmax(q @ k.transpose(-1, -2) / (WIDTH // HEADS) ** 0.5, -1)
            h = h + self.proj((attention @ v).transpose(1, 2).reshape(n, e, WIDTH))
            return h + self.mlp(self.norm2(h))

    class Backbone(nn.Module):  # type: ignore[misc,name-defined]  # nn: torch.nn loaded at call time, Any
        """Raw recordings (n, CHANNELS, SAMPLES) -> token features (n, CHANNELS, SEGMENTS, WIDTH)."""

        def __init__(self) -> None:
            super().__init__()
            self.patch = nn.Linear(SEGMENT, WIDTH)
            self.channel = nn.Parameter(0.02 * torch.randn(CHANNELS, 1, WIDTH))
            self.segment = nn.Parameter(0.02 * torch.randn(1, SEGMENTS, WIDTH))
            self.mask = nn.Parameter(torch.zeros(WIDTH))
            self.blocks = nn.ModuleList(Block() for _ in range(DEPTH))
            self.norm = nn.LayerNorm(WIDTH)

        def forward(self, x: Any, masked: Any | None = None) -> Any:
            h = self.patch(tokens(x))  # (n, C, S, WIDTH)
            if masked is not None:  # (n, C, S) bool: those tokens' content replaced by the mask vector
                h = torch.where(masked[..., None], self.mask, h)
            h = (h + self.channel + self.segment).flatten(1, 2)
            for block in self.blocks:
                h = block(h)
            return self.norm(h).reshape(len(x), CHANNELS, SEGMENTS, WIDTH)

    return Backbone


def freeze(module: Any) -> Any:
    """Eval mode, no gradients from now on, and none kept from its own training (so that a gradient
    found later can only have come from a head trained on it)."""
    module.eval()
    for p in module.parameters():
        p.requires_grad_(False)
        p.grad = None
    return module


def fingerprint(module: Any) -> str:
    """A hash of a module's parameters, bit for bit (a frozen backbone keeps it)."""
    digest = hashlib.sha256()
    for name, value in sorted(module.state_dict().items()):
        digest.update(name.encode())
        digest.update(value.detach().contiguous().numpy().tobytes())
    return digest.hexdigest()[:16]


def masked_mse(backbone: Any, decoder: Any, x: Any, generator: Any) -> tuple[Any, Any]:
    """(loss on every token, MSE on the masked tokens only) of one masked-reconstruction pass."""
    torch = torch_single_thread()
    masked = torch.rand(len(x), CHANNELS, SEGMENTS, generator=generator) < MASK_SHARE
    error = (decoder(backbone(x, masked)) - tokens(x)) ** 2  # (n, C, S, SEGMENT)
    return error.mean(), error[masked].mean()


@lru_cache(maxsize=8)
def pretrained(seed: int) -> tuple[Any, dict[str, float]]:
    """The backbone pretrained for a seed (frozen), and its held-out masked-token reconstruction:
    {'masked_mse', 'token_variance', 'masked_r2'} (R^2 of masked tokens against predicting zero)."""
    torch = torch_single_thread()
    path = cache_path("backbone", seed, pretraining_config())
    if path is not None and path.is_file():
        saved = torch.load(path, weights_only=True)
        with torch.random.fork_rng(devices=[]):
            backbone = backbone_class()()
        backbone.load_state_dict(saved["state"])
        return freeze(backbone), {k: float(v) for k, v in saved["info"].items()}
    x = torch.from_numpy(pretraining_recordings(seed, PRETRAIN_RECORDINGS + PRETRAIN_HELD_OUT))
    train, held_out = x[:PRETRAIN_RECORDINGS], x[PRETRAIN_RECORDINGS:]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(10_000 + seed)
        backbone, decoder = backbone_class()(), torch.nn.Linear(WIDTH, SEGMENT)
    opt = torch.optim.AdamW([*backbone.parameters(), *decoder.parameters()], lr=PRETRAIN_LR, weight_decay=0.01)
    gen = torch.Generator().manual_seed(10_000 + seed)
    for _ in range(PRETRAIN_STEPS):
        batch = torch.randint(0, len(train), (PRETRAIN_BATCH,), generator=gen)
        loss, _ = masked_mse(backbone, decoder, train[batch], gen)
        opt.zero_grad()
        loss.backward()
        opt.step()
    freeze(backbone)
    with torch.no_grad():
        _, masked = masked_mse(backbone, decoder, held_out, torch.Generator().manual_seed(seed))
    variance = float((tokens(held_out) ** 2).mean())
    info = {"masked_mse": float(masked), "token_variance": variance, "masked_r2": 1 - float(masked) / variance}
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        torch.save({"state": backbone.state_dict(), "info": info}, path.with_suffix(".tmp"))
        path.with_suffix(".tmp").replace(path)  # whole or absent, if the check is stopped here
    return backbone, info


def save_backbone(backbone: Any, path: str | Path) -> None:
    torch = torch_single_thread()
    torch.save(backbone.state_dict(), path)


@lru_cache(maxsize=8)
def load_backbone(path: str) -> Any:
    """A backbone from a checkpoint written by `save_backbone`, frozen; one ValueError naming the
    option when the file is missing or holds a backbone of another shape."""
    torch = torch_single_thread()
    if not Path(path).is_file():
        raise ValueError(f"backbone_checkpoint {path!r} is not a file: save one with tpoe_eib_backbone.save_backbone")
    with torch.random.fork_rng(devices=[]):
        backbone = backbone_class()()
    try:
        backbone.load_state_dict(torch.load(path, weights_only=True))
    except (RuntimeError, KeyError, TypeError, ValueError, AttributeError) as err:
        raise ValueError(
            f"backbone_checkpoint {path!r} does not fit the backbone (width {WIDTH}, depth {DEPTH}, "
            f"{CHANNELS} x {SEGMENTS} tokens of {SEGMENT} samples): {str(err).splitlines()[0]}"
        ) from err
    return freeze(backbone)


def backbone_for(seed: int, checkpoint: str | None = None) -> Any:
    """The frozen backbone a seed's heads read: pretrained here for the seed, or the checkpoint's."""
    return pretrained(seed)[0] if checkpoint is None else load_backbone(checkpoint)
