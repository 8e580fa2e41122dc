"""Geometry checks on an SVG scene: labelled points bound to drawn vertices, then objects and
relations up to similarity (relative tolerances and angles: the generator picks its coordinates)."""

from __future__ import annotations

import math
import re

from environments.prograf.check.findings import Finding, count_finding, fail, ok
from environments.prograf.parse.binding import bind
from environments.prograf.parse.scene import Circle, Scene, norm_text
from environments.prograf.task import GeometrySpec, VerificationPoint

XY = tuple[float, float]


class GeometryView:
    """Labelled points bound to drawn vertices (segment ends, circle centres and dots), all labels
    at once (`bind_labels`). Slacks are relative to the drawing: a share of the canvas diagonal,
    with floors in pixels times the scene's units per pixel (a unit-scale viewBox reads as the
    same figure drawn at 400 pixels)."""

    def __init__(self, scene: Scene, names: list[str]):
        self.scene = scene
        c = scene.canvas or (0.0, 0.0, 400.0, 400.0)
        self.diag = math.dist((c[0], c[1]), (c[2], c[3]))
        self.px = scene.px
        self.dot_r = max(4.0 * self.px, 0.012 * self.diag)
        self.points, self.ambiguous = bind_labels(scene, names, max(20.0 * self.px, 0.07 * self.diag), self.diag)
        for name, (where, other) in sorted(self.ambiguous.items()):
            scene.notes.append(f"label {name} is ambiguous: bound to ({where[0]:.4g}, {where[1]:.4g}), but "
                               f"({other[0]:.4g}, {other[1]:.4g}) is nearly as good")
        self.big_circles = [ci for ci in scene.circles if ci.r > self.dot_r]
        self.label_names = {t.text.strip() for t in scene.texts if re.fullmatch(r"[A-Z][0-9']?", t.text.strip())}

    def slack(self, pixels: float) -> float:
        """A slack of so many pixels, in canvas units."""
        return pixels * self.px

    def circle_at(self, centre: XY, tol: float) -> Circle | None:
        near = [ci for ci in self.big_circles if math.dist((ci.cx, ci.cy), centre) <= tol * ci.r + self.slack(2)]
        return min(near, key=lambda ci: math.dist((ci.cx, ci.cy), centre)) if near else None


MARK_SIZE = 0.06  # an element smaller than this share of the diagonal is a mark (right angle, arc, tick)


def bind_labels(scene: Scene, names: list[str], reach: float, diag: float) -> tuple[dict[str, XY], dict[str, tuple[XY, XY]]]:
    """Each name's label bound to a drawn vertex as one assignment (distinct vertices, least total
    distance; scipy's linear_sum_assignment), not each to its nearest: a label between two
    vertices goes where the other labels leave room. A vertex that only a small mark draws (the
    corner of a right-angle mark, an angle arc's end) costs a whole reach extra, so it is bound
    only when no vertex of the figure itself is in reach: a label is never captured by its
    point's mark. Returns the bound points, and for each name whose second-best assignment is
    nearly as good (within a quarter of its distance) the runner-up vertex (`binding.bind`, the
    one assignment every reader's labels go through)."""
    wanted = [n for n in names if any(t.text.strip() == n for t in scene.texts)]
    if not wanted:
        return {}, {}
    spans: dict[int, list[float]] = {}  # element -> its extent, to tell marks from figure lines
    for s in scene.segments:
        b = spans.setdefault(s.element, [math.inf, math.inf, -math.inf, -math.inf])
        b[:] = [min(b[0], s.x1, s.x2), min(b[1], s.y1, s.y2), max(b[2], s.x1, s.x2), max(b[3], s.y1, s.y2)]
    small = {e for e, b in spans.items() if math.dist((b[0], b[1]), (b[2], b[3])) < MARK_SIZE * diag}
    grid = max(1e-9, 0.002 * diag)  # vertices this close are one point drawn twice
    where: dict[tuple[int, int], list[float]] = {}  # cell -> [x, y, is a mark only]
    for s in scene.segments:
        for (x, y), end in (((s.x1, s.y1), s.ends[0]), ((s.x2, s.y2), s.ends[1])):
            if end:
                cell = where.setdefault((round(x / grid), round(y / grid)), [x, y, 1.0])
                cell[2] = min(cell[2], 1.0 if s.element in small else 0.0)
    for ci in scene.circles:
        cell = where.setdefault((round(ci.cx / grid), round(ci.cy / grid)), [ci.cx, ci.cy, 0.0])
        cell[2] = 0.0
    texts = {n: [(t.x, t.y) for t in scene.texts if t.text.strip() == n] for n in wanted}
    vertices = [(v[0], v[1], v[2] > 0) for v in where.values()
                if any(math.dist(p, (v[0], v[1])) < reach for n in wanted for p in texts[n])]
    if not vertices:
        return {}, {}
    cost: list[list[float | None]] = [[None] * len(vertices) for _ in wanted]
    for i, n in enumerate(wanted):
        for j, (x, y, mark) in enumerate(vertices):
            d = min(math.dist(p, (x, y)) for p in texts[n])
            if d < reach:
                cost[i][j] = d + (reach if mark else 0.0)
    found = bind(cost)
    points = {wanted[i]: (vertices[j][0], vertices[j][1]) for i, j in found.pairs.items()}
    ambiguous = {wanted[i]: (points[wanted[i]], (vertices[k][0], vertices[k][1])) for i, k in found.runner_up.items()}
    return points, ambiguous


def angle_between(p: XY, q: XY, r: XY, s: XY) -> float:
    """Angle in degrees (0..90) between lines pq and rs."""
    a = math.atan2(q[1] - p[1], q[0] - p[0]) - math.atan2(s[1] - r[1], s[0] - r[0])
    deg = abs(math.degrees(a)) % 180
    return min(deg, 180 - deg)


def angle_at(a: XY, b: XY, c: XY) -> float:
    v1, v2 = (a[0] - b[0], a[1] - b[1]), (c[0] - b[0], c[1] - b[1])
    n = math.hypot(*v1) * math.hypot(*v2)
    return math.degrees(math.acos(max(-1.0, min(1.0, (v1[0] * v2[0] + v1[1] * v2[1]) / n)))) if n else 0.0


def line_distance(p: XY, a: XY, b: XY) -> tuple[float, float]:
    """(distance from p to line ab, parameter t of p's projection)."""
    dx, dy = b[0] - a[0], b[1] - a[1]
    n2 = dx * dx + dy * dy
    if n2 == 0:
        return math.dist(p, a), 0.0
    t = ((p[0] - a[0]) * dx + (p[1] - a[1]) * dy) / n2
    return abs(dx * (p[1] - a[1]) - dy * (p[0] - a[0])) / math.sqrt(n2), t


def segment_cover(view: GeometryView, a: XY, b: XY, tol: float) -> float:
    """Share of segment ab covered by drawn segments lying along it (AB may be drawn as AM + MB)."""
    length = math.dist(a, b)
    if length == 0:
        return 0.0
    slack = tol * length + view.slack(2)
    spans = []
    for s in view.scene.segments:
        d1, t1 = line_distance((s.x1, s.y1), a, b)
        d2, t2 = line_distance((s.x2, s.y2), a, b)
        if d1 <= slack and d2 <= slack:
            lo, hi = sorted((t1, t2))
            spans.append((max(lo, 0.0), min(hi, 1.0)))
    covered, reach = 0.0, 0.0
    gap = slack / length
    for lo, hi in sorted(spans):
        if hi <= lo:
            continue
        if lo > reach + gap:
            break
        covered = max(covered, hi)
        reach = max(reach, hi)
    start_ok = any(lo <= gap for lo, hi in spans if hi > lo)
    return covered if start_ok else 0.0


# ---------------------------------------------------------------------- geometry checks
def _pts(view: GeometryView, names: list[str]) -> list[XY] | Finding:
    missing = [n for n in names if n not in view.points]
    if missing:
        return fail("missing_object", None, f"no drawn point labelled {', '.join(missing)}")
    return [view.points[n] for n in names]


def g_point(view: GeometryView, vp: VerificationPoint, spec: GeometrySpec) -> Finding:
    p = _pts(view, vp.args)
    return p if isinstance(p, Finding) else ok([round(c, 1) for c in p[0]], f"{vp.args[0]} is labelled at a drawn vertex")


def g_segment(view: GeometryView, vp: VerificationPoint, spec: GeometrySpec) -> Finding:
    p = _pts(view, vp.args)
    if isinstance(p, Finding):
        return p
    cover = segment_cover(view, p[0], p[1], vp.tolerance or 0.06)
    name = "".join(vp.args)
    if cover >= 0.97:
        return ok(round(cover, 3), f"segment {name} is drawn")
    return fail("missing_object", round(cover, 3), f"segment {name} is not drawn ({cover:.0%} of it covered)")


def g_circle(view: GeometryView, vp: VerificationPoint, spec: GeometrySpec) -> Finding:
    p = _pts(view, vp.args)
    if isinstance(p, Finding):
        return p
    tol = vp.tolerance or 0.06
    centre, through = p
    ci = view.circle_at(centre, tol)
    if ci is None:
        return fail("missing_object", None, f"no circle centred at {vp.args[0]}")
    err = abs(math.dist(centre, through) - ci.r) / ci.r
    if err <= tol:
        return ok(round(err, 3), f"circle centred at {vp.args[0]} through {vp.args[1]}")
    return fail("wrong_relation", round(err, 3), f"the circle centred at {vp.args[0]} misses {vp.args[1]} by {err:.0%} of its radius")


def _relation(measured: float, tol: float, unit: str, what: str) -> Finding:
    if measured <= tol:
        return ok(round(measured, 3), f"{what} (off by {measured:.3g}{unit})")
    return fail("wrong_relation", round(measured, 3), f"not {what}: off by {measured:.3g}{unit} (tolerance {tol:g}{unit})")


def g_midpoint(view: GeometryView, vp: VerificationPoint, spec: GeometrySpec) -> Finding:
    p = _pts(view, vp.args)
    if isinstance(p, Finding):
        return p
    m, a, b = p
    mid = ((a[0] + b[0]) / 2, (a[1] + b[1]) / 2)
    return _relation(math.dist(m, mid) / max(math.dist(a, b), 1e-9), vp.tolerance or 0.03, "",
                     f"{vp.args[0]} is the midpoint of {vp.args[1]}{vp.args[2]}")


def g_perpendicular(view: GeometryView, vp: VerificationPoint, spec: GeometrySpec) -> Finding:
    p = _pts(view, vp.args)
    if isinstance(p, Finding):
        return p
    a = vp.args
    return _relation(90 - angle_between(*p), vp.tolerance or 3.0, "°", f"{a[0]}{a[1]} ⟂ {a[2]}{a[3]}")


def g_parallel(view: GeometryView, vp: VerificationPoint, spec: GeometrySpec) -> Finding:
    p = _pts(view, vp.args)
    if isinstance(p, Finding):
        return p
    a = vp.args
    return _relation(angle_between(*p), vp.tolerance or 3.0, "°", f"{a[0]}{a[1]} ∥ {a[2]}{a[3]}")


def g_on_circle(view: GeometryView, vp: VerificationPoint, spec: GeometrySpec) -> Finding:
    p = _pts(view, vp.args)
    if isinstance(p, Finding):
        return p
    point, centre = p
    ci = view.circle_at(centre, 0.06)
    if ci is None:
        return fail("missing_object", None, f"no circle centred at {vp.args[1]}")
    return _relation(abs(math.dist(point, (ci.cx, ci.cy)) - ci.r) / ci.r, vp.tolerance or 0.04, "",
                     f"{vp.args[0]} lies on the circle centred at {vp.args[1]}")


def g_angle(view: GeometryView, vp: VerificationPoint, spec: GeometrySpec) -> Finding:
    p = _pts(view, vp.args)
    if isinstance(p, Finding):
        return p
    measured = angle_at(*p)
    target = vp.number()
    tol = vp.tolerance or 3.0
    what = f"angle {''.join(vp.args)} = {target:g}°"
    if abs(measured - target) <= tol:
        return ok(round(measured, 2), f"{what} (measured {measured:.1f}°)")
    return fail("wrong_relation", round(measured, 2), f"not {what}: measured {measured:.1f}° (tolerance {tol:g}°)")


def g_equal_angle(view: GeometryView, vp: VerificationPoint, spec: GeometrySpec) -> Finding:
    p = _pts(view, vp.args)
    if isinstance(p, Finding):
        return p
    a1, a2 = angle_at(*p[:3]), angle_at(*p[3:])
    a = vp.args
    return _relation(abs(a1 - a2), vp.tolerance or 3.0, "°", f"angle {''.join(a[:3])} = angle {''.join(a[3:])}")


def g_equal_length(view: GeometryView, vp: VerificationPoint, spec: GeometrySpec) -> Finding:
    p = _pts(view, vp.args)
    if isinstance(p, Finding):
        return p
    l1, l2 = math.dist(p[0], p[1]), math.dist(p[2], p[3])
    a = vp.args
    return _relation(abs(l1 / max(l2, 1e-9) - 1), vp.tolerance or 0.04, "", f"{a[0]}{a[1]} = {a[2]}{a[3]}")


def g_collinear(view: GeometryView, vp: VerificationPoint, spec: GeometrySpec) -> Finding:
    p = _pts(view, vp.args)
    if isinstance(p, Finding):
        return p
    d, _ = line_distance(p[2], p[0], p[1])
    return _relation(d / max(math.dist(p[0], p[1]), 1e-9), vp.tolerance or 0.03, "", f"{''.join(vp.args)} are collinear")


def g_on_segment(view: GeometryView, vp: VerificationPoint, spec: GeometrySpec) -> Finding:
    p = _pts(view, vp.args)
    if isinstance(p, Finding):
        return p
    d, t = line_distance(p[0], p[1], p[2])
    tol = vp.tolerance or 0.03
    off = d / max(math.dist(p[1], p[2]), 1e-9) + max(0.0, -t, t - 1)
    return _relation(off, tol, "", f"{vp.args[0]} lies on {vp.args[1]}{vp.args[2]}")


def g_point_count(view: GeometryView, vp: VerificationPoint, spec: GeometrySpec) -> Finding:
    n = len(view.label_names)
    return count_finding(n, vp.count(), "labelled points")


def g_circle_count(view: GeometryView, vp: VerificationPoint, spec: GeometrySpec) -> Finding:
    return count_finding(len(view.big_circles), vp.count(), "circles")


def g_no_segment(view: GeometryView, vp: VerificationPoint, spec: GeometrySpec) -> Finding:
    p = _pts(view, vp.args)
    if isinstance(p, Finding):
        return ok(None, "vacuous: an end point is not drawn")
    cover = segment_cover(view, p[0], p[1], 0.06)
    if cover >= 0.5:
        return fail("extra_element", round(cover, 3), f"segment {''.join(vp.args)} is drawn, though it must not be")
    return ok(round(cover, 3), f"no segment {''.join(vp.args)}")


def g_length_label(view: GeometryView, vp: VerificationPoint, spec: GeometrySpec) -> Finding:
    p = _pts(view, vp.args)
    if isinstance(p, Finding):
        return p
    a, b = p
    want = norm_text(str(vp.value))
    reach = max(view.slack(30), 0.3 * math.dist(a, b))
    near = []
    for t in view.scene.texts:
        d, u = line_distance((t.x, t.y), a, b)
        if d <= reach and -0.1 <= u <= 1.1:
            near.append(t.text)
    if any(want in norm_text(x) for x in near):
        return ok(want, f"{''.join(vp.args)} is labelled {vp.value}")
    return fail("wrong_label", near or None, f"no text {vp.value!r} beside {''.join(vp.args)}")


CHECKS = {
    "point": g_point, "segment": g_segment, "circle": g_circle, "midpoint": g_midpoint, "perpendicular": g_perpendicular,
    "parallel": g_parallel, "on_circle": g_on_circle, "angle": g_angle, "equal_angle": g_equal_angle,
    "equal_length": g_equal_length,
    "collinear": g_collinear, "on_segment": g_on_segment, "point_count": g_point_count, "circle_count": g_circle_count,
    "no_segment": g_no_segment, "length_label": g_length_label,
}
