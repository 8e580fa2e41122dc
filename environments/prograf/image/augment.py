"""Seeded variations of a drawing, so the image verifier is calibrated on pictures unlike our clean
renders: other fonts and stroke widths (changed in the SVG before it is rendered), other ink and
page colours, a dark page, thicker strokes, grain, another scale and JPEG compression (changed in
the pixels after). Every choice is drawn from `random.Random(seed)`, so a seed names one picture;
`describe` says what was drawn, for the calibration's examples.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

import numpy as np

FONTS = ("DejaVu Serif", "Liberation Mono", "Liberation Sans Narrow", "DejaVu Sans", "Liberation Serif")


@dataclass(frozen=True)
class Variation:
    font: str
    stroke: float  # times the drawing's own stroke widths
    ink: tuple[int, int, int]
    page: tuple[int, int, int]
    dark: bool  # light ink on a dark page
    thicken: bool
    noise: float  # grain's standard deviation, grey levels
    scale: float
    jpeg: int  # JPEG quality

    def describe(self) -> str:
        return (
            f"font {self.font}, stroke x{self.stroke:.2f}, ink {self.ink}, page {self.page}"
            f"{', dark' if self.dark else ''}{', thickened' if self.thicken else ''}, noise {self.noise:.1f}, "
            f"scale {self.scale:.2f}, JPEG q{self.jpeg}"
        )


def draw(seed: int | str) -> Variation:
    rng = random.Random(seed)
    dark = rng.random() < 0.15
    return Variation(
        font=rng.choice(FONTS),
        stroke=rng.choice((0.6, 1.0, 1.5, 2.0)),
        ink=(rng.randint(0, 90), rng.randint(0, 90), rng.randint(0, 120)),
        page=(rng.randint(225, 255), rng.randint(225, 255), rng.randint(215, 255)),
        dark=dark,
        thicken=rng.random() < 0.3,
        noise=rng.uniform(0, 6),
        scale=rng.uniform(0.8, 1.3),
        jpeg=rng.randint(35, 90),
    )


def vary_svg(svg: str, v: Variation) -> str:
    """The SVG with every font family replaced and every stroke width scaled."""
    svg = re.sub(r'font-family="[^"]*"', f'font-family="{v.font}"', svg)
    svg = re.sub(r"font-family:\s*[^;\"}]*", f"font-family: {v.font}", svg)
    svg = re.sub(r"<svg\b", f'<svg font-family="{v.font}"', svg, count=1)

    def scaled(m: re.Match[str]) -> str:
        return f"{m.group(1)}{float(m.group(2)) * v.stroke:.3g}"

    svg = re.sub(r'(stroke-width=")([0-9.]+)', scaled, svg)
    return re.sub(r"(stroke-width:\s*)([0-9.]+)", scaled, svg)


def vary_pixels(img: np.ndarray, v: Variation) -> np.ndarray:
    """RGB pixels recoloured, thickened, grained, rescaled and JPEG-compressed."""
    import cv2

    grey = img.astype(np.float32).mean(axis=2, keepdims=True) / 255.0  # 1 = page, 0 = ink
    if v.thicken:
        grey = cv2.erode(grey, np.ones((2, 2), np.uint8))[..., None]
    ink, page = np.array(v.ink, np.float32), np.array(v.page, np.float32)
    if v.dark:
        ink, page = 255 - ink * 0.3, 255 - page * 0.85
    colour = ink + (page - ink) * grey
    colour += np.random.default_rng(abs(hash((v.noise, v.jpeg))) % 2**32).normal(0, v.noise, colour.shape)
    out = np.clip(colour, 0, 255).astype(np.uint8)
    h, w = out.shape[:2]
    out = cv2.resize(out, (max(8, round(w * v.scale)), max(8, round(h * v.scale))), interpolation=cv2.INTER_AREA)
    ok, data = cv2.imencode(".jpg", out[..., ::-1], [cv2.IMWRITE_JPEG_QUALITY, v.jpeg])
    decoded = cv2.imdecode(data, cv2.IMREAD_COLOR) if ok else None
    if decoded is None:
        raise ValueError("JPEG encoding failed")
    return np.asarray(decoded[..., ::-1])
