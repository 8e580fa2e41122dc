"""A failure's filmstrip: highway-env's own top-down frames (rendered offscreen while an episode
runs with `frames=True`) saved as a few small PNGs, one horizontal strip PNG and an animated GIF.

Rendering costs time (pygame draws every simulation frame), so episodes render only when asked;
the caller keeps the strip of the episodes that failed (`HighwayEpisode.filmstrip`).

A closed-loop attacker's filmstrip carries its decisions: under every frame (stills and GIF) a
caption band names the frame's time and the decision in force then -- the attacker's latest decision
at or before that time, with its time and, where the policy is known, its probability
(`frame_captions`). `decision_sequence` lists every decision for the picture's caption. A one-shot
attacker's filmstrip has no band.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from PIL.Image import Image as PILImage

    from environments.adv0.sim.closed_loop import ClosedLoopPolicy
    from environments.adv0.sim.scenario import AttackerTrajectory

# Headless rendering: SDL's "offscreen" driver. Not "dummy": highway-env 1.12.1 disables its viewer
# under "dummy" and returns black frames.
if os.environ.get("SDL_VIDEODRIVER", "dummy") == "dummy":
    os.environ["SDL_VIDEODRIVER"] = "offscreen"
os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")

STRIP_FRAMES = 5  # stills in the strip: evenly spaced over the kept frames, the last one always in
MAX_WIDTH = 480  # px: stills are downscaled to this width (highway-env renders 600 px)
GIF_MS = 200  # per frame: the 5 Hz simulation in real time
BAND_PX = 14  # the caption band under a closed-loop attacker's frame
TIME_TOL_S = 1e-6  # frame and decision times are both multiples of the simulation step


@dataclass(frozen=True)
class Decision:
    """One closed-loop decision as the filmstrip shows it: when, which action, and its probability
    under the policy that chose it (None where the policy is not at hand)."""

    t: float
    action: str
    p: float | None = None

    def label(self) -> str:
        p = "" if self.p is None else f" (p={self.p:.2f})"
        return f"{self.action}{p}"


def decisions_of(trajectory: AttackerTrajectory, policy: ClosedLoopPolicy | None = None) -> list[Decision]:
    """The trajectory's decisions in order; with `policy`, each with its exact probability
    pi(a_t | s_t), recomputed from the recorded features and mask."""
    from environments.adv0.sim.closed_loop import ACTIONS

    out = []
    for i, (t, action) in enumerate(zip(trajectory.t, trajectory.actions, strict=True)):
        p = None
        if policy is not None:
            log_p = policy.log_probs(
                np.asarray(trajectory.features[i], dtype=float), np.asarray(trajectory.feasible[i], dtype=bool)
            )
            p = float(np.exp(log_p[ACTIONS.index(action)]))
        out.append(Decision(float(t), action, p))
    return out


def decision_in_force(t: float, decisions: Sequence[Decision]) -> Decision | None:
    """The latest decision taken at or before time `t` (the frame at a decision's own time shows the
    state the attacker decided on); None before the first."""
    current = None
    for d in decisions:
        if d.t > t + TIME_TOL_S:
            break
        current = d
    return current


def frame_captions(times: Sequence[float], decisions: Sequence[Decision]) -> list[str]:
    """One caption per frame: its time and the attacker's decision in force then."""
    captions = []
    for t in times:
        d = decision_in_force(t, decisions)
        what = "no decision yet" if d is None else f"@{d.t:.1f} s {d.label()}"
        captions.append(f"t={t:.1f} s  attacker {what}")
    return captions


def decision_sequence(decisions: Sequence[Decision]) -> str:
    """Every decision in order, for a picture's caption: "0.0 s keep:hold (p=0.52), 1.0 s ..."."""
    return ", ".join(f"{d.t:.1f} s {d.label()}" for d in decisions)


def pick_frames(n: int, k: int = STRIP_FRAMES) -> list[int]:
    """k indices spread evenly over n frames, ending at the last (the contact)."""
    if n <= 0:
        return []
    if n <= k:
        return list(range(n))
    return sorted({int(round(x)) for x in np.linspace(0, n - 1, k)})


def _image(frame: np.ndarray) -> PILImage:
    from PIL import Image

    img = Image.fromarray(np.asarray(frame, dtype=np.uint8))
    if img.width > MAX_WIDTH:
        img = img.resize((MAX_WIDTH, max(1, round(img.height * MAX_WIDTH / img.width))))
    return img


def _captioned(img: PILImage, text: str) -> PILImage:
    """`img` with a white band underneath holding `text` (the scene itself is left uncovered)."""
    from PIL import Image, ImageDraw

    out = Image.new("RGB", (img.width, img.height + BAND_PX), "white")
    out.paste(img, (0, 0))
    ImageDraw.Draw(out).text((3, img.height + 1), text, fill=(90, 0, 90))  # the attacker's magenta, darker
    return out


def save_filmstrip(
    frames: Sequence[np.ndarray],
    directory: str | Path,
    *,
    root: str | Path | None = None,
    stem: str = "episode",
    times: Sequence[float] | None = None,
    decisions: Sequence[Decision] | None = None,
) -> list[str]:
    """Save `frames` (H x W x 3 uint8 arrays, oldest first) under `directory`: STRIP_FRAMES stills
    `<stem>-<i>.png`, the strip `<stem>-strip.png` and `<stem>.gif`. With `decisions` (a closed-loop
    attacker's) and `times` (each frame's simulation time), every frame gets its caption band
    (`frame_captions`). Returns their paths relative to `root` (default: `directory`), stills first,
    then the strip, then the GIF; [] without frames."""
    from PIL import Image

    if not frames:
        return []
    if decisions is not None and (times is None or len(times) != len(frames)):
        raise ValueError(
            f"save_filmstrip: decisions need one time per frame (got {len(frames)} frames and "
            f"{'no' if times is None else len(times)} times)"
        )
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    base = Path(root) if root is not None else out
    images = [_image(f) for f in frames]
    if decisions is not None and times is not None:
        images = [_captioned(img, text) for img, text in zip(images, frame_captions(times, decisions), strict=True)]
    paths: list[Path] = []
    stills = [images[i] for i in pick_frames(len(images))]
    for i, img in enumerate(stills):
        paths.append(out / f"{stem}-{i}.png")
        img.save(paths[-1], optimize=True)
    strip = Image.new(
        "RGB", (sum(im.width for im in stills) + 4 * (len(stills) - 1), max(im.height for im in stills)), "white"
    )
    x = 0
    for im in stills:
        strip.paste(im, (x, 0))
        x += im.width + 4
    paths.append(out / f"{stem}-strip.png")
    strip.save(paths[-1], optimize=True)
    paths.append(out / f"{stem}.gif")
    images[0].save(paths[-1], save_all=True, append_images=images[1:], duration=GIF_MS, loop=0, optimize=True)
    return [os.path.relpath(p, base) for p in paths]
