"""SVG path data (`d=`) as straight pieces: every command (M L H V C S Q T A Z, absolute and
relative), curves followed in CURVE_PIECES pieces, arcs by the spec's endpoint-to-centre
conversion, and what family a closed outline is (circle, ellipse, stadium, rounded box)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from environments.prograf.parse.scene import box_union

NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


# ---------------------------------------------------------------------- paths
@dataclass
class SubPath:
    """One subpath, flattened: its points, which of them are drawn vertices (a command's end, not
    a point inside a flattened curve), closed or not, curved or not, and the circle it traces when
    it is nothing but arcs of one circle sweeping all the way round."""

    pts: list[tuple[float, float]] = field(default_factory=list)
    anchors: list[bool] = field(default_factory=list)
    closed: bool = False
    curved: bool = False
    circle: tuple[float, float, float] | None = None
    straight: bool = False  # has at least one straight piece
    arcs: list[tuple[float, float, float, float]] = field(default_factory=list)  # cx, cy, r, sweep (radians)


CURVE_PIECES = 8  # a cubic or quadratic curve is followed by this many straight pieces


def _arc_centre(x1: float, y1: float, rx: float, ry: float, phi_deg: float, large: bool, sweep: bool,
                x2: float, y2: float) -> tuple[float, float, float, float, float, float]:
    """SVG's endpoint arc in centre form: (cx, cy, rx, ry, start angle, sweep angle), radii scaled
    up when they cannot reach (the SVG spec's conversion)."""
    phi = math.radians(phi_deg)
    cos, sin = math.cos(phi), math.sin(phi)
    dx, dy = (x1 - x2) / 2, (y1 - y2) / 2
    xp, yp = cos * dx + sin * dy, -sin * dx + cos * dy
    rx, ry = abs(rx), abs(ry)
    lam = (xp * xp) / (rx * rx) + (yp * yp) / (ry * ry)
    if lam > 1:
        rx, ry = rx * math.sqrt(lam), ry * math.sqrt(lam)
    num_ = rx * rx * ry * ry - rx * rx * yp * yp - ry * ry * xp * xp
    den = rx * rx * yp * yp + ry * ry * xp * xp
    k = math.sqrt(max(0.0, num_ / den)) if den else 0.0
    if large == sweep:
        k = -k
    cxp, cyp = k * rx * yp / ry, -k * ry * xp / rx
    cx, cy = cos * cxp - sin * cyp + (x1 + x2) / 2, sin * cxp + cos * cyp + (y1 + y2) / 2

    def angle(ux: float, uy: float, vx: float, vy: float) -> float:
        return math.atan2(ux * vy - uy * vx, ux * vx + uy * vy)

    t1 = angle(1, 0, (xp - cxp) / rx, (yp - cyp) / ry)
    dt = angle((xp - cxp) / rx, (yp - cyp) / ry, (-xp - cxp) / rx, (-yp - cyp) / ry)
    if not sweep and dt > 0:
        dt -= 2 * math.pi
    elif sweep and dt < 0:
        dt += 2 * math.pi
    return cx, cy, rx, ry, t1, dt


def path_subpaths(d: str) -> list[SubPath]:
    """Every subpath of a path's `d`, with curves (C S Q T) and arcs (A), absolute or relative,
    followed by short straight pieces, so an edge drawn as a curve ends where it really ends and
    points the way its last piece points."""
    tokens = re.findall(r"[MmLlHhVvZzCcSsQqTtAa]|" + NUMBER.pattern, d or "")
    out: list[SubPath] = []
    sub = SubPath()
    x = y = 0.0
    start = (0.0, 0.0)
    last_ctrl: tuple[str, float, float] | None = None  # for S and T: the previous curve's control point
    cmd = ""
    i = 0
    arity = {"M": 2, "L": 2, "H": 1, "V": 1, "C": 6, "S": 4, "Q": 4, "T": 2, "A": 7, "Z": 0}

    def add(px: float, py: float, anchor: bool) -> None:
        sub.pts.append((px, py))
        sub.anchors.append(anchor)

    while i < len(tokens):
        if tokens[i].isalpha():
            cmd = tokens[i]
            i += 1
            if cmd in "Zz":
                sub.closed = True
                x, y = start
                last_ctrl = None
                continue
        if not cmd or cmd in "Zz":
            break
        n = arity[cmd.upper()]
        chunk = tokens[i:i + n]
        if len(chunk) < n or any(t.isalpha() for t in chunk):
            break
        a = [float(t) for t in chunk]
        i += n
        rel = cmd.islower()
        up = cmd.upper()
        ox, oy = (x, y) if rel else (0.0, 0.0)
        if up == "M":
            if sub.pts:
                out.append(sub)
            sub = SubPath()
            x, y = ox + a[0], oy + a[1]
            start = (x, y)
            add(x, y, True)
            cmd = "l" if rel else "L"  # further pairs after a moveto are linetos
            last_ctrl = None
            continue
        if not sub.pts:  # a drawing command with no moveto starts at the current point
            add(x, y, True)
        if up in "LHV":
            if up == "H":
                x = ox + a[0] if rel else a[0]
            elif up == "V":
                y = oy + a[0] if rel else a[0]
            else:
                x, y = ox + a[0], oy + a[1]
            sub.straight = True
            add(x, y, True)
            last_ctrl = None
        elif up in "CSQT":
            if up == "C":
                c1, c2, end = (ox + a[0], oy + a[1]), (ox + a[2], oy + a[3]), (ox + a[4], oy + a[5])
            elif up == "S":
                c1 = (2 * x - last_ctrl[1], 2 * y - last_ctrl[2]) if last_ctrl and last_ctrl[0] == "C" else (x, y)
                c2, end = (ox + a[0], oy + a[1]), (ox + a[2], oy + a[3])
            elif up == "Q":
                q, end = (ox + a[0], oy + a[1]), (ox + a[2], oy + a[3])
            else:
                q = (2 * x - last_ctrl[1], 2 * y - last_ctrl[2]) if last_ctrl and last_ctrl[0] == "Q" else (x, y)
                end = (ox + a[0], oy + a[1])
            for k in range(1, CURVE_PIECES + 1):
                t = k / CURVE_PIECES
                u = 1 - t
                if up in "CS":
                    px = u ** 3 * x + 3 * u * u * t * c1[0] + 3 * u * t * t * c2[0] + t ** 3 * end[0]
                    py = u ** 3 * y + 3 * u * u * t * c1[1] + 3 * u * t * t * c2[1] + t ** 3 * end[1]
                else:
                    px = u * u * x + 2 * u * t * q[0] + t * t * end[0]
                    py = u * u * y + 2 * u * t * q[1] + t * t * end[1]
                add(*((px, py) if k < CURVE_PIECES else end), k == CURVE_PIECES)
            last_ctrl = ("C", *c2) if up in "CS" else ("Q", *q)
            x, y = end
            sub.curved = True
        else:  # A: rx ry x-axis-rotation large-arc sweep x y
            end = (ox + a[5], oy + a[6])
            last_ctrl = None
            if a[0] == 0 or a[1] == 0 or (x, y) == end:
                sub.straight = True  # zero radii: the spec draws a straight line
                x, y = end
                add(x, y, True)
                continue
            cx, cy, rx, ry, t1, dt = _arc_centre(x, y, a[0], a[1], a[2], a[3] != 0, a[4] != 0, *end)
            pieces = max(2, math.ceil(abs(dt) / (math.pi / 8)))
            phi = math.radians(a[2])
            for k in range(1, pieces + 1):
                t = t1 + dt * k / pieces
                ex, ey = rx * math.cos(t), ry * math.sin(t)
                if k == pieces:
                    add(*end, True)  # exactly where the command ends, so a path that returns to its start closes
                else:
                    add(cx + math.cos(phi) * ex - math.sin(phi) * ey, cy + math.sin(phi) * ex + math.cos(phi) * ey, False)
            if abs(rx - ry) <= 0.02 * max(rx, ry):
                sub.arcs.append((cx, cy, rx, dt))
            else:
                sub.arcs.append((cx, cy, math.nan, dt))
            x, y = end
            sub.curved = True
    if sub.pts:
        out.append(sub)
    for sp in out:
        sp.circle = _arc_circle(sp)
    return out


def _arc_circle(sp: SubPath) -> tuple[float, float, float] | None:
    """A subpath of arcs only, all of one circle, turning a full turn: that circle (two half-circle
    arcs are how code draws a circle as a path)."""
    if sp.straight or not sp.arcs or any(math.isnan(r) for _, _, r, _ in sp.arcs):
        return None
    cx, cy, r, _ = sp.arcs[0]
    if any(math.dist((cx, cy), (c2x, c2y)) > 0.02 * r or abs(r2 - r) > 0.02 * r for c2x, c2y, r2, _ in sp.arcs):
        return None
    turn = abs(sum(dt for *_, dt in sp.arcs))
    return (cx, cy, r) if turn >= 2 * math.pi * 0.98 else None


def path_points(d: str) -> list[tuple[list[tuple[float, float]], bool, bool]]:
    """Subpaths of a path as (points, closed, curved), curves followed piece by piece."""
    return [(sp.pts, sp.closed, sp.curved) for sp in path_subpaths(d)]


def curved_family(pts: list[tuple[float, float]]) -> str:
    """What a closed shape with curves is: circle / ellipse (no straight run along its box),
    stadium (a pill: straight sides, half-circle ends), rounded (a box with round corners) or other.
    Read off the flattened outline: how far its boundary stays from the box's corners gives the
    corner radius (a corner of radius r passes r(sqrt 2 - 1) from the box corner)."""
    box = box_union([(x, y, x, y) for x, y in pts])
    w, h = box[2] - box[0], box[3] - box[1]
    if w <= 0 or h <= 0:
        return "other"
    short = min(w, h)
    edge = 0.01 * max(w, h)
    on_box = [min(abs(x - box[0]), abs(x - box[2]), abs(y - box[1]), abs(y - box[3])) <= edge for x, y in pts]
    if not all(min(abs(x - box[0]), abs(x - box[2]), abs(y - box[1]), abs(y - box[3])) <= 0.5 * short + edge
               for x, y in pts):
        return "other"
    corners = [(box[0], box[1]), (box[2], box[1]), (box[2], box[3]), (box[0], box[3])]
    gaps = [min(math.dist(c, p) for p in _densified(pts)) for c in corners]
    radius = max(gaps) / (math.sqrt(2) - 1)
    straight = sum(on_box) / len(pts)
    if max(gaps) <= 0.02 * short:
        return "box"
    if abs(min(gaps) - max(gaps)) > 0.15 * short:
        return "other"  # corners unlike one another: not a symmetric rounded shape
    ellipse_like = all(abs(((x - (box[0] + box[2]) / 2) / (w / 2)) ** 2 + ((y - (box[1] + box[3]) / 2) / (h / 2)) ** 2 - 1)
                       <= 0.08 for x, y in pts)
    if ellipse_like and straight < 0.3:
        return "circle" if abs(w - h) <= 0.05 * max(w, h) else "ellipse"
    if radius >= 0.45 * short:
        return "stadium"
    return "rounded" if radius >= 0.1 * short else "box"


def _densified(pts: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The outline with points every quarter-piece, so a corner cut by one long chord still shows."""
    out = []
    for (x1, y1), (x2, y2) in zip(pts, pts[1:] + pts[:1]):
        out += [(x1 + (x2 - x1) * t, y1 + (y2 - y1) * t) for t in (0.0, 0.25, 0.5, 0.75)]
    return out
