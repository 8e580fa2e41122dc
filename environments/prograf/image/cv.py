"""Simple primitives counted in pixels with OpenCV (opencv-python-headless, pulled by rapidocr).

Only two counts, the ones a clean diagram makes unambiguous; calibration (`calibrate.py`)
decides whether each is trusted:
- big circles (geometry): the Hough gradient transform, "ALT" variant (its accumulator threshold
  is a perfectness score in [0, 1], so one setting suits every scale); radii from 4% to 60% of
  the shorter side, so a point's dot is never a circle;
- node shapes (flowcharts, diagrams): the white interiors of closed, nearly convex outlines
  (boxes, ellipses, diamonds) that hold ink (their label) and no other such interior -- a group's
  frame holds its nodes, so it is not a node; an arrowhead is filled, so it has no interior.
Sizes are relative to the image, so a render at another resolution counts the same.
"""

from __future__ import annotations

import numpy as np

INK_LEVEL = 128  # grey level below which a pixel is ink (light fills count as paper)
MIN_SHAPE_AREA = 0.0015  # of the image: smaller interiors are letters' holes
MIN_SOLIDITY = 0.93  # interior area / its convex hull's: loops closed by crossing edges are rarely convex


def grey(img: np.ndarray) -> np.ndarray:
    import cv2

    return np.asarray(cv2.cvtColor(img, cv2.COLOR_RGB2GRAY))


def big_circles(img: np.ndarray) -> list[tuple[float, float, float]]:
    """(cx, cy, r) in pixels of each circle drawn, dots excluded."""
    import cv2

    g = cv2.GaussianBlur(grey(img), (5, 5), 1.2)
    side = min(g.shape)
    found = cv2.HoughCircles(g, cv2.HOUGH_GRADIENT_ALT, dp=1.5, minDist=side * 0.05, param1=300, param2=0.9,
                             minRadius=max(4, int(side * 0.04)), maxRadius=int(side * 0.6))
    return [] if found is None else [(float(x), float(y), float(r)) for x, y, r in found[0]]


def node_shapes(img: np.ndarray) -> list[tuple[int, int, int, int]]:
    """Bounding boxes (x, y, w, h) of the interiors of closed shapes that hold a label."""
    import cv2

    ink = (grey(img) < INK_LEVEL).astype(np.uint8)
    contours, hierarchy = cv2.findContours(ink, cv2.RETR_CCOMP, cv2.CHAIN_APPROX_SIMPLE)
    if hierarchy is None:
        return []
    min_area = MIN_SHAPE_AREA * ink.size
    interiors = []
    for contour, (_, _, _, parent) in zip(contours, hierarchy[0]):
        if parent < 0:  # an outer boundary of ink, not an enclosed white region
            continue
        area = cv2.contourArea(contour)
        hull = cv2.contourArea(cv2.convexHull(contour))
        if area < min_area or hull <= 0 or area / hull < MIN_SOLIDITY:
            continue
        x, y, w, h = cv2.boundingRect(contour)
        if ink[y + 2:y + h - 2, x + 2:x + w - 2].any():  # holds its label
            interiors.append((x, y, w, h))
    return [b for b in interiors if not any(o != b and _inside(o, b) for o in interiors)]


def _inside(inner: tuple[int, int, int, int], outer: tuple[int, int, int, int]) -> bool:
    return (outer[0] <= inner[0] and outer[1] <= inner[1] and inner[0] + inner[2] <= outer[0] + outer[2]
            and inner[1] + inner[3] <= outer[1] + outer[3])
