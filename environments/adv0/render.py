"""A failure's filmstrip: highway-env's own top-down frames (rendered offscreen while an episode
runs with `frames=True`) saved as a few small PNGs, one horizontal strip PNG and an animated GIF.

Rendering costs time (pygame draws every simulation frame), so episodes render only when asked;
the caller keeps the strip of the episodes that failed (`HighwayEpisode.filmstrip`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

# Headless rendering: SDL's "offscreen" driver. Not "dummy": highway-env 1.12.1 disables its viewer
# under "dummy" and returns black frames.
if os.environ.get("SDL_VIDEODRIVER", "dummy") == "dummy":
    os.environ["SDL_VIDEODRIVER"] = "offscreen"
os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")

STRIP_FRAMES = 5  # stills in the strip: evenly spaced over the kept frames, the last one always in
MAX_WIDTH = 480  # px: stills are downscaled to this width (highway-env renders 600 px)
GIF_MS = 200  # per frame: the 5 Hz simulation in real time


def pick_frames(n: int, k: int = STRIP_FRAMES) -> list[int]:
    """k indices spread evenly over n frames, ending at the last (the contact)."""
    if n <= 0:
        return []
    if n <= k:
        return list(range(n))
    return sorted({int(round(x)) for x in np.linspace(0, n - 1, k)})


def _image(frame: np.ndarray):  # -> PIL.Image.Image
    from PIL import Image

    img = Image.fromarray(np.asarray(frame, dtype=np.uint8))
    if img.width > MAX_WIDTH:
        img = img.resize((MAX_WIDTH, max(1, round(img.height * MAX_WIDTH / img.width))))
    return img


def save_filmstrip(frames: Sequence[np.ndarray], directory: str | Path, *, root: str | Path | None = None,
                   stem: str = "episode") -> list[str]:
    """Save `frames` (H x W x 3 uint8 arrays, oldest first) under `directory`: STRIP_FRAMES stills
    `<stem>-<i>.png`, the strip `<stem>-strip.png` and `<stem>.gif`. Returns their paths relative to
    `root` (default: `directory`), stills first, then the strip, then the GIF; [] without frames."""
    from PIL import Image

    if not frames:
        return []
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    base = Path(root) if root is not None else out
    images = [_image(f) for f in frames]
    paths: list[Path] = []
    stills = [images[i] for i in pick_frames(len(images))]
    for i, img in enumerate(stills):
        paths.append(out / f"{stem}-{i}.png")
        img.save(paths[-1], optimize=True)
    strip = Image.new("RGB", (sum(im.width for im in stills) + 4 * (len(stills) - 1), max(im.height for im in stills)), "white")
    x = 0
    for im in stills:
        strip.paste(im, (x, 0))
        x += im.width + 4
    paths.append(out / f"{stem}-strip.png")
    strip.save(paths[-1], optimize=True)
    paths.append(out / f"{stem}.gif")
    images[0].save(paths[-1], save_all=True, append_images=images[1:], duration=GIF_MS, loop=0, optimize=True)
    return [os.path.relpath(p, base) for p in paths]
