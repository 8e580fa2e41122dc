"""Which way an SVG marker's arrowhead points, so an edge's direction is read from what is drawn.

A marker is drawn in its own coordinates, then turned: with `orient="auto"` its x-axis follows the
path at that vertex, with `auto-start-reverse` the same but turned round at the path's start, with an
angle (or no `orient`, which means 0) it is fixed in the drawing's axes. An arrowhead's tip is the
narrow end of its outline along one of the marker's axes (a triangle or chevron: one vertex at one
extreme, two at the other). The head then points at the node its tip faces: a marker-end drawn
backwards points at the path's start, whatever end it sits on.

A mark with no narrow end -- a circle, a cross, a diamond, a square, a bar -- is a head at the end it
sits on (session 28, issue 39 item 1). That is what the writers that draw such marks mean by them:
Mermaid draws `A --o B` / `A --x B` with its `...-circleEnd` / `...-crossEnd` marker on the path's end
(its flowDb gives the link `arrowTypeEnd: arrow_circle`, an edge A -> B), and Graphviz's `arrowhead=dot`,
`odot`, `tee`, `box`, `diamond` are heads of other shapes; the Mermaid and DOT readers read them so, and
the SVG of a drawing must read as its source does. Until then a tipless mark was no head (it "gives no
direction"), a rule written from geometry alone, not for any output in the corpus or the references:
none draws a tipless marker. One family is kept out, by the marker's id: Mermaid's ER cardinality marks
(`ONLY_ONE_START`, `ZERO_OR_MORE_END`, `MD_PARENT_START`... in erMarkers), which it draws at both ends of
every relationship as counts, not as a direction; read as heads they would turn each relationship into
two arrows. A tipped mark that points sideways to its piece still gives no head.

A `marker-mid` is drawn at every vertex of the path but its first and last, turned (with `orient="auto"`)
along the path there, halfway between the directions in and out: it heads neither end. An arrow drawn
there says which way the path runs, and that is how a reader sees it -- D3 and hand-written SVG put
arrows mid-line that way, so `A -> B` drawn with a mid arrow is an edge A -> B. So a tipped mid marker
that points along the path at every vertex it sits on, all the same way, heads the end it points to
(`mid_way`); one that points sideways, or some vertices one way and some the other, gives no direction,
and a tipless mid mark (a dot at each bend) is decoration, no head. A two-point line has no mid vertex,
so its mid marker draws nothing.

`marker_outline` collects a marker's vertices in its own coordinates; `head_way` says which way one of a
path's end markers points, `mid_way` which way its mid markers point, and `path_heads` puts them together
for svg.py.
"""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET
from collections.abc import Mapping

from environments.prograf.parse.svg_path import path_subpaths
from environments.prograf.parse.svg_sanitise import local
from environments.prograf.parse.svg_transform import IDENTITY, Matrix, Point, apply, multiply, num, numbers, parse_transform

NARROW = 0.2  # the tip side's spread, as a share of the base side's, at most
NEAR = 0.05  # vertices within this share of the outline's extent of an extreme belong to it
FACING = 0.5  # |cos| between the head and the path piece: below it the head points sideways, no direction
# Mermaid's ER cardinality markers (erMarkers: ONLY_ONE, ZERO_OR_ONE, ONE_OR_MORE, ZERO_OR_MORE, MD_PARENT),
# by id, however the renderer prefixes it: counts drawn at both ends of a relationship, not heads
CARDINALITY = re.compile(r"(only_?one|zero_?or_?(one|more)|one_?or_?more|md_?parent)", re.IGNORECASE)

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
    path's own coordinates, drawn start to end) heads the path's end, -1 its start, 0 when it draws
    nothing or its tip points sideways. A mark with no tip heads the end it sits on."""
    if len(set(outline)) < 2:
        return 0
    tip = tip_direction(outline)
    if tip is None:
        return -1 if at_start else 1
    (x0, y0), (x1, y1) = piece
    length = math.hypot(x1 - x0, y1 - y0)
    if length <= 1e-12:
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


def _unit(dx: float, dy: float) -> Point | None:
    length = math.hypot(dx, dy)
    return (dx / length, dy / length) if length > 1e-12 else None


def mid_way(outline: list[Point], orient: str | None, pts: list[Point], anchors: list[bool]) -> int:
    """+1 when the marker drawn at the path's inner vertices (`pts` the path's points in its own
    coordinates, `anchors` which of them are vertices rather than points inside a flattened curve)
    points along the path towards its end at every one, -1 towards its start, 0 otherwise (see the
    module's docstring)."""
    if len(pts) < 3 or len(set(outline)) < 2:
        return 0
    tip = tip_direction(outline)
    if tip is None:
        return 0
    angle = orient_angle(orient)
    ways = set()
    for k in range(1, len(pts) - 1):
        if not anchors[k]:
            continue
        into = _unit(pts[k][0] - pts[k - 1][0], pts[k][1] - pts[k - 1][1])
        out = _unit(pts[k + 1][0] - pts[k][0], pts[k + 1][1] - pts[k][1])
        if into is None or out is None:
            along = into or out
        else:  # SVG's auto orientation at an inner vertex: the bisector of the directions in and out
            along = _unit(into[0] + out[0], into[1] + out[1]) or into
        if along is None:
            continue
        ax, ay = along if angle is None else (math.cos(math.radians(angle)), math.sin(math.radians(angle)))
        hx, hy = tip[0] * ax - tip[1] * ay, tip[0] * ay + tip[1] * ax
        facing = hx * along[0] + hy * along[1]
        ways.add(1 if facing > FACING else -1 if facing < -FACING else 0)
    return ways.pop() if len(ways) == 1 else 0


def is_cardinality(marker_id: str) -> bool:
    """Whether a marker is one of Mermaid's ER cardinality marks (see the module's docstring)."""
    return CARDINALITY.search(marker_id) is not None


def marker_outline(marker: ET.Element) -> list[Point]:
    """The vertices a marker draws (paths, polygons, polylines, lines, rects; a circle or an ellipse as
    its bounding box's corners, a shape with no tip), in its own coordinates."""
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
            elif name in ("circle", "ellipse"):
                cx, cy = num(g("cx")), num(g("cy"))
                rx = num(g("r") if name == "circle" else g("rx"))
                ry = num(g("r") if name == "circle" else g("ry"))
                if rx > 0 and ry > 0:
                    pts.extend(apply(cm, *p) for p in ((cx - rx, cy - ry), (cx + rx, cy - ry), (cx + rx, cy + ry), (cx - rx, cy + ry)))
            elif name == "g":
                visit(child, cm)

    visit(marker, IDENTITY)
    return pts


MARKER_REF = re.compile(r"url\(\s*['\"]?#([^)'\"]+)")


def _marker(value: str, ids: Mapping[str, ET.Element]) -> ET.Element | None:
    """The marker a `marker-*` value names; None for none, a reference to nothing or to something that is
    not a marker, or one of Mermaid's ER cardinality marks."""
    m = MARKER_REF.match(value) if value != "none" else None
    marker = ids.get(m.group(1).strip()) if m else None
    if marker is None or local(str(marker.tag)) != "marker" or is_cardinality(marker.get("id") or ""):
        return None
    return marker


def path_heads(refs: tuple[str, str, str], ids: Mapping[str, ET.Element], first: tuple[Point, Point],
               last: tuple[Point, Point], pts: list[Point], anchors: list[bool]) -> tuple[bool, bool]:
    """Whether a drawn path points into its start and into its end, given its `marker-start`, `marker-mid`
    and `marker-end` values, its first and last pieces and its points in its own coordinates: each end
    marker counts for the end its tip faces or, with no tip, the end it sits on; the mid marker for the end
    it points to along the path, if it points one way."""
    heads = [False, False]
    start, mid, end = (_marker(v, ids) for v in refs)
    for marker, piece, at_start in ((start, first, True), (end, last, False)):
        if marker is not None:
            way = head_way(marker_outline(marker), marker.get("orient"), piece, at_start)
            if way:
                heads[0 if way < 0 else 1] = True
    if mid is not None:
        way = mid_way(marker_outline(mid), mid.get("orient"), pts, anchors)
        if way:
            heads[0 if way < 0 else 1] = True
    return heads[0], heads[1]
