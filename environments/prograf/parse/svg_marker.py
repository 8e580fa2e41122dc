"""Which way an SVG marker's arrowhead points, so an edge's direction is read from what is drawn.

A marker is drawn in its own coordinates, then turned: with `orient="auto"` its x-axis follows the
path at that vertex, with `auto-start-reverse` the same but turned round at the path's start, with an
angle (or no `orient`, which means 0) it is fixed in the drawing's axes. An arrowhead's tip is the
narrow end of its outline along one of the marker's axes (a triangle or chevron: one vertex at one
extreme, two at the other); a diamond (UML aggregation), a square, a bar or a dot has no narrow end,
so it gives no direction and is no arrowhead. The head then points at the node its tip faces: a
marker-end drawn backwards points at the path's start, whatever end it sits on.

`marker_outline` collects a marker's vertices in its own coordinates; svg.py asks `head_way` which
way each of a path's markers points.
"""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET

from environments.prograf.parse.svg_path import path_subpaths
from environments.prograf.parse.svg_sanitise import local
from environments.prograf.parse.svg_transform import IDENTITY, Matrix, Point, apply, multiply, num, numbers, parse_transform

NARROW = 0.2  # the tip side's spread, as a share of the base side's, at most
NEAR = 0.05  # vertices within this share of the outline's extent of an extreme belong to it
FACING = 0.5  # |cos| between the head and the path piece: below it the head points sideways, no direction

ANGLE = re.compile(r"^\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*(deg|rad|grad|turn)?\s*$")
TO_DEGREES = {"deg": 1.0, "rad": 180 / math.pi, "grad": 0.9, "turn": 360.0}


def tip_direction(points: list[Point]) -> Point | None:
    """The unit vector from the outline's base to its tip, along the marker's x- or y-axis; None when
    neither axis has exactly one narrow end."""
    unique = list(dict.fromkeys(points))
    if len(unique) < 2:
        return None
    found: list[Point] = []
    for axis in (0, 1):
        along = [p[axis] for p in unique]
        low, high = min(along), max(along)
        extent = high - low
        if extent <= 1e-9:
            continue
        near_low = [p[1 - axis] for p in unique if p[axis] <= low + NEAR * extent]
        near_high = [p[1 - axis] for p in unique if p[axis] >= high - NEAR * extent]
        spread_low, spread_high = max(near_low) - min(near_low), max(near_high) - min(near_high)
        if spread_high <= NARROW * spread_low and spread_low > 0:
            found.append((1.0, 0.0) if axis == 0 else (0.0, 1.0))
        elif spread_low <= NARROW * spread_high and spread_high > 0:
            found.append((-1.0, 0.0) if axis == 0 else (0.0, -1.0))
    return found[0] if len(found) == 1 else None


def orient_angle(orient: str | None) -> float | None:
    """A fixed `orient` in degrees; None for `auto` / `auto-start-reverse`. Missing or unreadable: 0,
    as SVG says."""
    value = (orient or "").strip()
    if value in ("auto", "auto-start-reverse"):
        return None
    m = ANGLE.match(value)
    return float(m.group(1)) * TO_DEGREES[m.group(2) or "deg"] if m else 0.0


def head_way(outline: list[Point], orient: str | None, piece: tuple[Point, Point], at_start: bool) -> int:
    """+1 when the marker on `piece` (the path's first piece if `at_start`, else its last, in the
    path's own coordinates, drawn start to end) points towards the path's end, -1 towards its start,
    0 when it is no arrowhead or points sideways."""
    tip = tip_direction(outline)
    (x0, y0), (x1, y1) = piece
    length = math.hypot(x1 - x0, y1 - y0)
    if tip is None or length <= 1e-12:
        return 0
    dx, dy = (x1 - x0) / length, (y1 - y0) / length
    angle = orient_angle(orient)
    if angle is None:
        ax, ay = (-dx, -dy) if at_start and orient is not None and orient.strip() == "auto-start-reverse" else (dx, dy)
    else:
        ax, ay = math.cos(math.radians(angle)), math.sin(math.radians(angle))
    # the marker's x-axis lies along (ax, ay): turn the tip with it
    hx, hy = tip[0] * ax - tip[1] * ay, tip[0] * ay + tip[1] * ax
    facing = hx * dx + hy * dy
    return 1 if facing > FACING else -1 if facing < -FACING else 0


def marker_outline(marker: ET.Element) -> list[Point]:
    """The vertices a marker draws (paths, polygons, polylines, lines, rects), in its own coordinates."""
    pts: list[Point] = []

    def visit(el: ET.Element, m: Matrix) -> None:
        for child in el:
            if not isinstance(child.tag, str):
                continue
            cm = multiply(m, parse_transform(child.get("transform")))
            name, g = local(child.tag), child.get
            if name == "path":
                pts.extend(apply(cm, *p) for sp in path_subpaths(g("d") or "") for p in sp.pts)
            elif name in ("polygon", "polyline"):
                v = numbers(g("points"))
                pts.extend(apply(cm, x, y) for x, y in zip(v[0::2], v[1::2]))
            elif name == "line":
                pts.extend([apply(cm, num(g("x1")), num(g("y1"))), apply(cm, num(g("x2")), num(g("y2")))])
            elif name == "rect":
                x, y, w, h = num(g("x")), num(g("y")), num(g("width")), num(g("height"))
                pts.extend(apply(cm, *p) for p in ((x, y), (x + w, y), (x + w, y + h), (x, y + h)))
            elif name == "g":
                visit(child, cm)

    visit(marker, IDENTITY)
    return pts
