"""Ground symbols in a schematic's pixels, and the net each one grounds (`image.circuit` reads the rest).

A ground symbol is a short wire (the stub) ending in a bar drawn across it, with shorter bars
under it. The bars are read by shape, not as separate pieces of ink, because on varied renders
(thick strokes, a thickened or JPEG-blurred picture) the bars run together into one blob, and
that blob is joined to the stub, so it is no separate mark at all. What stays true however the
bars merge: the top bar is a horizontal run of ink, short (at most `GROUND_SIZE` of the median
part's long side), hung from a wire at its middle (ink above its middle third) and free at both
ends -- no vertical wire turns there (a wire's corner or T has one), no part and no text is
beside them. The net grounded is the wire piece the bar belongs to (the stub joins them); a bar
whose piece reaches no part's terminal is a ground read by no net (`PixelCircuit.stray`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np

GROUND_SIZE = 0.6  # of the median part's long side: a ground's top bar is at most this long
MIN_BAR = 0.12  # of the median part's long side: and at least this long (shorter runs are a wire's width)


class _Part(Protocol):
    box: tuple[int, int, int, int]


def _runs(wires: np.ndarray, length: int, horizontal: bool) -> np.ndarray:
    import cv2

    kernel = np.ones((1, length) if horizontal else (length, 1), np.uint8)
    return np.asarray(cv2.morphologyEx(wires, cv2.MORPH_OPEN, kernel))


def ground_bars(
    wires: np.ndarray,
    stroke: float,
    parts: Sequence[_Part],
    boxes: list[tuple[float, float, float, float]],
) -> list[tuple[int, int, int, int]]:
    """The top bars (x, y, w, h) of the ground symbols in `wires` (the ink less the parts and the
    text), given the stroke width, the parts read and the text boxes."""
    import cv2

    longs = [max(p.box[2:]) for p in parts]
    unit = float(np.median(longs)) if longs else 0.08 * max(wires.shape)
    short = max(int(np.ceil(3 * stroke)), int(MIN_BAR * unit))
    horizontal = _runs(wires, short, True)
    # a vertical wire: a run longer than a ground's merged bars are tall at their ends
    vertical = _runs(wires, max(int(np.ceil(4 * stroke)), int(0.25 * unit)), False)
    stubs = _runs(wires, int(np.ceil(2 * stroke)) + 2, False)  # a stub is a vertical run; a bar above is not
    count, _, stats, _ = cv2.connectedComponentsWithStats(horizontal, connectivity=8)
    H, W = wires.shape
    pad = int(np.ceil(stroke)) + 2
    reach = int(np.ceil(3 * stroke)) + 3
    bars = []
    for k in range(1, count):
        x, y, w, h, _ = (int(v) for v in stats[k])
        if w > GROUND_SIZE * unit or w < h:
            continue
        if any(_near((x, y, x + w, y + h), b, pad) for b in boxes):
            continue
        if any(
            _near((x, y, x + w, y + h), (px, py, px + pw, py + ph), 2 * pad)
            for px, py, pw, ph in (p.box for p in parts)
        ):
            continue
        ends = [(max(0, x - pad), x + pad), (max(0, x + w - pad), min(W, x + w + pad))]
        rows = slice(max(0, y - reach), min(H, y + h + reach))
        if any(vertical[rows, a:b].any() for a, b in ends):
            continue  # a wire turns or branches at an end: a corner or a T, not a free bar
        third = slice(x + w // 3, x + w - w // 3)
        if horizontal[max(0, y - h // 2 - 3) : y, third].any():
            continue  # a lower bar: another bar just above it
        above = stubs[max(0, y - int(np.ceil(stroke / 2)) - 1) : y, third]  # touching the bar
        if not above.any():
            continue  # hung from no stub: a lower bar (a bar above it, no wire), or a loose stroke
        bars.append((x, y, w, h))
    return bars


def _near(a: tuple[float, float, float, float], b: tuple[float, float, float, float], pad: float) -> bool:
    """Whether two boxes (x0, y0, x1, y1) overlap once `a` is grown by `pad`."""
    return a[0] - pad <= b[2] and b[0] <= a[2] + pad and a[1] - pad <= b[3] and b[1] <= a[3] + pad
