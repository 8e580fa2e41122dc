"""The pixel observation of `rcaux_pointmaze`: each state rendered as a small grayscale image of the
maze (the wall with its door, and the agent), and the small convolutional encoder that reads it into
the same latent as the coordinate setting's MLP encoder. There is no decoder here either: the
image is only ever encoded.

The image covers [-1, 1]^2 with IMAGE x IMAGE pixels (row = y, column = x, pixel centres at
-1 + (2 i + 1) / IMAGE). The wall is the two pixel columns either side of x = 0, at WALL_LEVEL,
except the rows whose centre lies inside the door. The agent is an anti-aliased dot -- a Gaussian of
standard deviation BLOB pixels and peak 1, added to the wall -- so its position is carried by the
intensities below the pixel size (a single lit pixel would quantise it to 0.125, coarser than a
step); the intensity-weighted centre of the dot is the state itself. The goal is rendered the same
way (the agent drawn at the goal), so the planner encodes a goal image as it encodes an observation.
"""

from __future__ import annotations

from typing import Any

import numpy as np

IMAGE = 16  # pixels per side
BLOB = 1.0  # the agent dot's standard deviation, in pixels
WALL_LEVEL = 0.5  # the wall's gray level (the agent's dot peaks at 1 on top of it)
PIXEL = 2.0 / IMAGE  # a pixel's width in world units
CENTRES = -1.0 + PIXEL * (np.arange(IMAGE) + 0.5)


def wall_image(door: float) -> np.ndarray:
    """(IMAGE, IMAGE) float32: the wall's pixels (the columns touching x = 0) outside the door."""
    column = np.abs(CENTRES) < PIXEL  # the two columns either side of x = 0
    row_in_door = np.abs(CENTRES) <= door
    return np.asarray((WALL_LEVEL * (column[None, :] & ~row_in_door[:, None])).astype(np.float32))


def agent_image(p: np.ndarray) -> np.ndarray:
    """(..., IMAGE, IMAGE): the agent's dot alone, for positions p (..., 2)."""
    p = np.asarray(p, dtype=float)
    sigma = BLOB * PIXEL
    gx = np.exp(-((CENTRES - p[..., 0:1]) ** 2) / (2 * sigma**2))  # (..., IMAGE) over columns
    gy = np.exp(-((CENTRES - p[..., 1:2]) ** 2) / (2 * sigma**2))  # (..., IMAGE) over rows
    return np.asarray(gy[..., :, None] * gx[..., None, :])


def render(p: np.ndarray, door: float) -> np.ndarray:
    """(..., IMAGE, IMAGE) float32 images of the maze with the agent at p (..., 2)."""
    return np.asarray((wall_image(door) + agent_image(p)).astype(np.float32))


def conv_encoder(torch: Any, hidden: int, latent: int) -> Any:
    """Image (..., IMAGE, IMAGE) -> latent (..., latent): two stride-2 3x3 convolutions (16 and 32
    channels) and an MLP head; leading axes (batch, time, population) are flattened and restored."""
    nn = torch.nn
    side = IMAGE // 4

    class PixelEncoder(nn.Module):  # type: ignore[misc,name-defined]  # nn: torch.nn loaded at call time, Any
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Sequential(
                nn.Conv2d(1, 16, 3, stride=2, padding=1), nn.ELU(), nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.ELU()
            )
            self.head = nn.Sequential(nn.Linear(32 * side * side, hidden), nn.ELU(), nn.Linear(hidden, latent))

        def forward(self, x: Any) -> Any:
            lead = x.shape[:-2]
            y = self.conv(x.reshape(-1, 1, IMAGE, IMAGE)).flatten(1)
            return self.head(y).reshape(*lead, latent)

    return PixelEncoder()
