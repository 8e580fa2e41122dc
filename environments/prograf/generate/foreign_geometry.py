"""Geometry figures written a second way (issue 39, the foreign-style corpus), and their one-fault variants.

Not `emit.py`'s writer, on purpose: a different fit into the canvas, and three house styles a person
or a code-writing model uses -- (flip) math coordinates inside `translate(...) scale(k,-k)` with the
letters placed up and to the right of their points; (unit) a unit-scale viewBox with the figure's
cycles as one `<polygon>` or `<path>` and circles as two-arc paths; (css) a `<style>` sheet, each
point a translated `<g>` holding its dot and letter, right-angle marks at right angles, arcs at
given angles, ticks on equal segments and length labels turned along their segment; (naive) one flat
list in whole pixels, every letter 8 pixels up and right of its dot, circles as `<ellipse>`. A fault is made on the figure, never on the code, and is checked
true by this module's own arithmetic (`relation_error`), not by the verifier under audit.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field, replace

from environments.prograf.task import GEOMETRY_RELATIONS, GeometrySpec, Task, VerificationPoint

XY = tuple[float, float]
# how far past the verifier's default tolerance a moved point must put a relation (3 to 4 times it)
VIOLATION = {
    "midpoint": 0.1,
    "perpendicular": 10.0,
    "parallel": 10.0,
    "on_circle": 0.15,
    "angle": 10.0,
    "equal_angle": 10.0,
    "equal_length": 0.15,
    "collinear": 0.1,
    "on_segment": 0.1,
}


@dataclass
class Figure:
    points: dict[str, XY]  # math coordinates, y up
    segments: list[tuple[str, str]]
    circles: list[tuple[str, float]]  # centre name, radius (fixed when the figure is made)
    labelled: list[str]
    length_labels: dict[str, str]
    right_angles: list[tuple[str, str, str]] = field(default_factory=list)  # (a, vertex, c): a mark at vertex
    gaps: dict[tuple[str, str], float] = field(default_factory=dict)  # segment -> share cut off its end
    ticks: list[tuple[str, str]] = field(default_factory=list)  # segments marked equal by a tick
    arcs: list[tuple[str, str, str]] = field(default_factory=list)  # angles marked by an arc (a, vertex, c)


def figure_of(spec: GeometrySpec, points: list[VerificationPoint]) -> Figure:
    pts = dict(spec.points)
    marks: list[tuple[str, str, str]] = []
    ticks: list[tuple[str, str]] = []
    arcs: list[tuple[str, str, str]] = []
    for vp in points:
        if vp.check == "equal_length":
            ticks += [(vp.args[0], vp.args[1]), (vp.args[2], vp.args[3])]
        elif vp.check in ("angle", "equal_angle") and not (
            vp.check == "angle" and abs(vp.number() - 90) < 1e-6
        ):
            arcs.append((vp.args[0], vp.args[1], vp.args[2]))
            if vp.check == "equal_angle":
                arcs.append((vp.args[3], vp.args[4], vp.args[5]))
        if vp.check == "angle" and abs(vp.number() - 90) < 1e-6:
            marks.append((vp.args[0], vp.args[1], vp.args[2]))
        elif vp.check == "perpendicular" and len(set(vp.args)) == 3:  # two lines through a shared point
            shared = next(a for a in vp.args[:2] if a in vp.args[2:])
            others = [a for a in vp.args if a != shared]
            marks.append((others[0], shared, others[1]))
    return Figure(
        points=pts,
        segments=list(spec.segments),
        circles=[(o, math.dist(pts[o], pts[a])) for o, a in spec.circles],
        labelled=list(pts),
        length_labels=dict(spec.length_labels),
        right_angles=marks,
        ticks=ticks,
        arcs=arcs,
    )


def _length_labels(fig: Figure) -> list[tuple[tuple[str, str], str]]:
    """Each length label as ((a, b), text): the spec keys a segment by its two letters, "AB"."""
    return [((key[0], key[1]), text) for key, text in fig.length_labels.items()]


# ---------------------------------------------------------------------- the relations, by our own arithmetic
def _angle_at(a: XY, b: XY, c: XY) -> float:
    v, w = (a[0] - b[0], a[1] - b[1]), (c[0] - b[0], c[1] - b[1])
    n = math.hypot(*v) * math.hypot(*w)
    return math.degrees(math.acos(max(-1.0, min(1.0, (v[0] * w[0] + v[1] * w[1]) / n)))) if n else 0.0


def _line_angle(p: XY, q: XY, r: XY, s: XY) -> float:
    d = abs(math.degrees(math.atan2(q[1] - p[1], q[0] - p[0]) - math.atan2(s[1] - r[1], s[0] - r[0]))) % 180
    return min(d, 180 - d)


def _off_line(p: XY, a: XY, b: XY) -> tuple[float, float]:
    length = math.dist(a, b) or 1e-9
    t = ((p[0] - a[0]) * (b[0] - a[0]) + (p[1] - a[1]) * (b[1] - a[1])) / length**2
    d = abs((b[0] - a[0]) * (p[1] - a[1]) - (b[1] - a[1]) * (p[0] - a[0])) / length
    return d / length, t


def relation_error(fig: Figure, vp: VerificationPoint, radius: dict[str, float]) -> float:
    """How far the figure is from the relation, in the unit of VIOLATION (0 when it holds exactly)."""
    p = [fig.points[n] for n in vp.args]
    c = vp.check
    if c == "midpoint":
        return math.dist(p[0], ((p[1][0] + p[2][0]) / 2, (p[1][1] + p[2][1]) / 2)) / (math.dist(p[1], p[2]) or 1e-9)
    if c == "perpendicular":
        return 90 - _line_angle(*p)
    if c == "parallel":
        return _line_angle(*p)
    if c == "on_circle":
        r = radius[vp.args[1]]
        return abs(math.dist(p[0], p[1]) - r) / r
    if c == "angle":
        return abs(_angle_at(*p) - vp.number())
    if c == "equal_angle":
        return abs(_angle_at(*p[:3]) - _angle_at(*p[3:]))
    if c == "equal_length":
        return abs(math.dist(p[0], p[1]) / (math.dist(p[2], p[3]) or 1e-9) - 1)
    if c == "collinear":
        return _off_line(p[2], p[0], p[1])[0]
    d, t = _off_line(p[0], p[1], p[2])  # on_segment
    return d + max(0.0, -t, t - 1)


# ---------------------------------------------------------------------- faults
def _size(points: dict[str, XY]) -> float:
    xs, ys = [p[0] for p in points.values()], [p[1] for p in points.values()]
    return max(max(xs) - min(xs), max(ys) - min(ys), 1e-9)


def moved_for(fig: Figure, vp: VerificationPoint, radius: dict[str, float]) -> Figure | None:
    """The figure with one of the relation's points moved so that it clearly fails; None if no small move does."""
    size = _size(fig.points)
    for name in reversed(vp.args):  # the last argument is usually the constructed one
        for share in (0.08, 0.12, 0.18):
            for k in range(8):
                a = math.radians(22.5 + 45 * k)
                x, y = fig.points[name]
                moved = replace(
                    fig, points={**fig.points, name: (x + share * size * math.cos(a), y + share * size * math.sin(a))}
                )
                too_close = any(
                    math.dist(moved.points[name], q) < 0.05 * size for n, q in moved.points.items() if n != name
                )
                if not too_close and relation_error(moved, vp, radius) >= VIOLATION[vp.check]:
                    return moved
    return None


def faults(task: Task, kind: str, rng: random.Random) -> tuple[Figure, str, str] | None:
    """(faulty figure, the target point's id, what was done) for a fault of `kind`, or None if the task has none."""
    spec = task.spec
    assert isinstance(spec, GeometrySpec)
    fig = figure_of(spec, task.points)
    radius = {o: r for o, r in fig.circles}
    by = {(vp.check, tuple(vp.args)): vp.id for vp in task.points}
    if kind == "missing_object":
        if fig.circles and rng.random() < 0.4:
            o, a = spec.circles[0]
            return replace(fig, circles=fig.circles[1:]), by[("circle", (o, a))], f"circle centred at {o} left out"
        s = rng.choice(fig.segments)
        return (
            replace(fig, segments=[x for x in fig.segments if x != s]),
            by[("segment", s)],
            f"segment {''.join(s)} left out",
        )
    if kind == "wrong_relation":
        facts = [vp for vp in task.points if vp.check in GEOMETRY_RELATIONS]
        rng.shuffle(facts)
        for vp in facts:
            moved = moved_for(fig, vp, radius)
            if moved is not None:
                return moved, vp.id, f"a point moved: {vp.text} no longer holds"
        if spec.circles:
            o, a = spec.circles[0]
            return (
                replace(fig, circles=[(o, 1.3 * radius[o])] + fig.circles[1:]),
                by[("circle", (o, a))],
                f"the circle centred at {o} drawn 30% too large: it misses {a}",
            )
        return None
    if kind == "broken_connection":
        s = rng.choice(fig.segments)
        return replace(fig, gaps={s: 0.25}), by[("segment", s)], f"segment {''.join(s)} stops a quarter short of {s[1]}"
    if kind == "extra_element":
        forbidden = [vp for vp in task.points if vp.check == "no_segment"]
        if forbidden:
            vp = forbidden[0]
            s = (vp.args[0], vp.args[1])
            return replace(fig, segments=fig.segments + [s]), vp.id, f"the forbidden segment {''.join(s)} drawn"
        count = next(vp.id for vp in task.points if vp.check == "point_count")
        name = next(ch for ch in "PQRSTUVWXYZ" if ch not in fig.points)
        xs, ys = [p[0] for p in fig.points.values()], [p[1] for p in fig.points.values()]
        extra = (max(xs) + 0.3 * _size(fig.points), (min(ys) + max(ys)) / 2)
        return (
            replace(fig, points={**fig.points, name: extra}, labelled=fig.labelled + [name]),
            count,
            f"an extra labelled point {name}",
        )
    raise ValueError(f"unknown fault kind {kind!r}")


# ---------------------------------------------------------------------- the writer
def f(v: float, digits: int = 2) -> str:
    text = f"{v:.{digits}f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def _fit(fig: Figure, width: float, height: float, margin: float) -> tuple[float, float, float]:
    """(k, tx, ty): pixel = (tx + k x, ty - k y), the figure and its circles centred in the box."""
    xs = [p[0] for p in fig.points.values()] + [fig.points[o][0] + s * r for o, r in fig.circles for s in (-1, 1)]
    ys = [p[1] for p in fig.points.values()] + [fig.points[o][1] + s * r for o, r in fig.circles for s in (-1, 1)]
    k = min((width - 2 * margin) / max(max(xs) - min(xs), 1e-9), (height - 2 * margin) / max(max(ys) - min(ys), 1e-9))
    tx = width / 2 - k * (max(xs) + min(xs)) / 2
    ty = height / 2 + k * (max(ys) + min(ys)) / 2
    return k, tx, ty


def _cut(fig: Figure, a: XY, b: XY, s: tuple[str, str]) -> tuple[XY, XY]:
    share = fig.gaps.get(s, 0.0)
    return a, (b[0] - share * (b[0] - a[0]), b[1] - share * (b[1] - a[1]))


def _cycles(segments: list[tuple[str, str]]) -> tuple[list[list[str]], list[tuple[str, str]]]:
    """Triangles and quadrilaterals among the segments (drawn as one closed outline), and the rest."""
    edges = {frozenset(s) for s in segments}
    names = sorted({n for s in segments for n in s})
    used: set[frozenset[str]] = set()
    cycles = []
    for a in names:
        for b in names:
            for c in names:
                tri = [frozenset((a, b)), frozenset((b, c)), frozenset((c, a))]
                if a < b < c and all(e in edges and e not in used for e in tri):
                    cycles.append([a, b, c])
                    used.update(tri)
    rest = [s for s in segments if frozenset(s) not in used]
    return cycles, rest


def write_svg(fig: Figure, style: str) -> str:
    if style == "flip":
        return _flip(fig)
    if style == "unit":
        return _unit(fig)
    if style == "naive":
        return _naive(fig)
    return _css(fig)


def _outward(fig: Figure, name: str) -> XY:
    cx = sum(p[0] for p in fig.points.values()) / len(fig.points)
    cy = sum(p[1] for p in fig.points.values()) / len(fig.points)
    x, y = fig.points[name]
    n = math.hypot(x - cx, y - cy) or 1.0
    return (x - cx) / n, (y - cy) / n


def _flip(fig: Figure) -> str:
    w, h = 520.0, 440.0
    k, tx, ty = _fit(fig, w, h, 56)
    out = [
        f'<svg width="{f(w)}" height="{f(h)}" xmlns="http://www.w3.org/2000/svg">',
        f'  <rect x="0" y="0" width="{f(w)}" height="{f(h)}" fill="#ffffff"/>',
        f'  <g transform="translate({f(tx)},{f(ty)}) scale({f(k, 4)},{f(-k, 4)})" fill="none" stroke="#1f2937"'
        f' stroke-width="{f(1.8 / k, 4)}">',
    ]
    for o, r in fig.circles:
        x, y = fig.points[o]
        out.append(f'    <circle cx="{f(x, 4)}" cy="{f(y, 4)}" r="{f(r, 4)}" stroke="#2563eb"/>')
    for s in fig.segments:
        a, b = _cut(fig, fig.points[s[0]], fig.points[s[1]], s)
        out.append(f'    <line x1="{f(a[0], 4)}" y1="{f(a[1], 4)}" x2="{f(b[0], 4)}" y2="{f(b[1], 4)}"/>')
    for n in fig.labelled:
        x, y = fig.points[n]
        out.append(f'    <circle cx="{f(x, 4)}" cy="{f(y, 4)}" r="{f(3.5 / k, 4)}" fill="#111827" stroke="none"/>')
    out.append("  </g>")
    out.append('  <g font-family="Georgia, serif" font-style="italic" font-size="18" fill="#111827">')
    for n in fig.labelled:  # up and to the right, nudged outward so the letter clears the lines
        x, y = fig.points[n]
        ux, uy = _outward(fig, n)
        px, py = tx + k * x + 7 + 6 * ux, ty - k * y - 7 - 6 * uy
        out.append(f'    <text x="{f(px, 1)}" y="{f(py, 1)}">{n}</text>')
    for (la, lb), text in _length_labels(fig):
        (x1, y1), (x2, y2) = fig.points[la], fig.points[lb]
        mx, my = (x1 + x2) / 2, (y1 + y2) / 2
        nx, ny = -(y2 - y1), x2 - x1
        norm = math.hypot(nx, ny) or 1.0
        ox, oy = _outward_at(fig, (mx, my))
        sign = 1 if nx * ox + ny * oy >= 0 else -1
        px, py = tx + k * mx + sign * 16 * nx / norm, ty - k * my - sign * 16 * ny / norm
        out.append(
            f'    <text x="{f(px, 1)}" y="{f(py + 5, 1)}" font-size="14" font-style="normal"'
            f' text-anchor="middle">{text}</text>'
        )
    out += ["  </g>", "</svg>"]
    return "\n".join(out)


def _outward_at(fig: Figure, p: XY) -> XY:
    cx = sum(q[0] for q in fig.points.values()) / len(fig.points)
    cy = sum(q[1] for q in fig.points.values()) / len(fig.points)
    n = math.hypot(p[0] - cx, p[1] - cy) or 1.0
    return (p[0] - cx) / n, (p[1] - cy) / n


def _unit(fig: Figure) -> str:
    """Everything in a 0..1 viewBox shown at 480 pixels: strokes, dots and fonts in units of the box."""
    k, tx, ty = _fit(fig, 1.0, 1.0, 0.12)

    def p(n: str) -> XY:
        x, y = fig.points[n]
        return tx + k * x, ty - k * y

    cycles, rest = _cycles([s for s in fig.segments if s not in fig.gaps])
    rest += [s for s in fig.segments if s in fig.gaps]
    out = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 1 1" width="480" height="480">',
        '<g fill="none" stroke="black" stroke-width="0.005" stroke-linejoin="round">',
    ]
    for cyc in cycles:
        pts = " ".join(f"{f(p(n)[0], 4)},{f(p(n)[1], 4)}" for n in cyc)
        out.append(f'<polygon points="{pts}"/>')
    for s in rest:
        a, b = _cut(fig, p(s[0]), p(s[1]), s)
        out.append(f'<path d="M {f(a[0], 4)} {f(a[1], 4)} L {f(b[0], 4)} {f(b[1], 4)}"/>')
    for o, r in fig.circles:
        (x, y), rr = p(o), k * r
        out.append(
            f'<path d="M {f(x - rr, 4)} {f(y, 4)} A {f(rr, 4)} {f(rr, 4)} 0 1 0 {f(x + rr, 4)} {f(y, 4)}'
            f' A {f(rr, 4)} {f(rr, 4)} 0 1 0 {f(x - rr, 4)} {f(y, 4)} Z" stroke="#555"/>'
        )
    out.append("</g>")
    out.append('<defs><circle id="dot" r="0.008"/></defs>')
    out.append('<g fill="black" stroke="none" font-family="Arial, sans-serif" font-size="0.045">')
    for n in fig.labelled:
        x, y = p(n)
        ux, uy = _outward(fig, n)
        out.append(f'<use href="#dot" x="{f(x, 4)}" y="{f(y, 4)}"/>')
        out.append(
            f'<text x="{f(x + 0.04 * ux, 4)}" y="{f(y - 0.04 * uy, 4)}" text-anchor="middle"'
            f' dominant-baseline="central">{n}</text>'
        )
    for (la, lb), text in _length_labels(fig):
        (x1, y1), (x2, y2) = p(la), p(lb)
        mx, my = (x1 + x2) / 2, (y1 + y2) / 2
        out.append(f'<text x="{f(mx, 4)}" y="{f(my - 0.02, 4)}" font-size="0.032" text-anchor="middle">{text}</text>')
    out += ["</g>", "</svg>"]
    return "\n".join(out)


def _css(fig: Figure) -> str:
    w = h = 400.0
    k, tx, ty = _fit(fig, w, h, 50)

    def p(n: str) -> XY:
        x, y = fig.points[n]
        return tx + k * x, ty - k * y

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {f(w)} {f(h)}">',
        "<style>",
        "  .edge { stroke: #000; stroke-width: 2; fill: none; }",
        "  .circ { stroke: #c0392b; stroke-width: 1.5; fill: none; }",
        "  .mark { stroke: #000; stroke-width: 1; fill: none; }",
        "  .pt circle { fill: #000; }",
        "  .pt text, .len { font: 16px sans-serif; fill: #000; }",
        "</style>",
        '<g id="figure">',
    ]
    for o, r in fig.circles:
        x, y = p(o)
        out.append(f'  <circle class="circ" cx="{f(x, 1)}" cy="{f(y, 1)}" r="{f(k * r, 1)}"/>')
    for s in fig.segments:
        e1, e2 = _cut(fig, p(s[0]), p(s[1]), s)
        out.append(f'  <line class="edge" x1="{f(e1[0], 1)}" y1="{f(e1[1], 1)}" x2="{f(e2[0], 1)}" y2="{f(e2[1], 1)}"/>')
    for a, v, c in fig.right_angles:  # a small square in the corner, 10 pixels a side
        pv, pa, pc = p(v), p(a), p(c)
        ua = _unit_vec(pv, pa)
        uc = _unit_vec(pv, pc)
        q1 = (pv[0] + 10 * ua[0], pv[1] + 10 * ua[1])
        q2 = (q1[0] + 10 * uc[0], q1[1] + 10 * uc[1])
        q3 = (pv[0] + 10 * uc[0], pv[1] + 10 * uc[1])
        out.append(
            f'  <polyline class="mark" points="{f(q1[0], 1)},{f(q1[1], 1)} {f(q2[0], 1)},{f(q2[1], 1)}'
            f' {f(q3[0], 1)},{f(q3[1], 1)}"/>'
        )
    for a, b in fig.ticks:  # a short stroke across the middle of each of two equal segments
        pa, pb = p(a), p(b)
        mx, my = (pa[0] + pb[0]) / 2, (pa[1] + pb[1]) / 2
        ux, uy = _unit_vec(pa, pb)
        out.append(
            f'  <line class="mark" x1="{f(mx - 6 * uy, 1)}" y1="{f(my + 6 * ux, 1)}" x2="{f(mx + 6 * uy, 1)}"'
            f' y2="{f(my - 6 * ux, 1)}"/>'
        )
    for a, v, c in fig.arcs:  # an arc of 18 pixels' radius inside the angle
        pv = p(v)
        ua, uc = _unit_vec(pv, p(a)), _unit_vec(pv, p(c))
        s1 = (pv[0] + 18 * ua[0], pv[1] + 18 * ua[1])
        s2 = (pv[0] + 18 * uc[0], pv[1] + 18 * uc[1])
        sweep = 1 if ua[0] * uc[1] - ua[1] * uc[0] > 0 else 0
        out.append(
            f'  <path class="mark" d="M {f(s1[0], 1)} {f(s1[1], 1)} A 18 18 0 0 {sweep} {f(s2[0], 1)} {f(s2[1], 1)}"/>'
        )
    out.append("</g>")
    for n in fig.labelled:
        x, y = p(n)
        ux, uy = _outward(fig, n)
        out.append(
            f'<g class="pt" transform="translate({f(x, 1)} {f(y, 1)})"><circle r="3"/>'
            f'<text x="{f(14 * ux - 5, 1)}" y="{f(-14 * uy + 5, 1)}">{n}</text></g>'
        )
    for (la, lb), text in _length_labels(fig):
        (x1, y1), (x2, y2) = p(la), p(lb)
        mx, my = (x1 + x2) / 2, (y1 + y2) / 2
        ang = math.degrees(math.atan2(y2 - y1, x2 - x1))
        if ang > 90 or ang < -90:
            ang -= 180 * (1 if ang > 0 else -1)
        nx, ny = -math.sin(math.radians(ang)), math.cos(math.radians(ang))
        sign = -1 if (nx * (mx - w / 2) + ny * (my - h / 2)) < 0 else 1
        lx, ly = mx + sign * 12 * nx, my + sign * 12 * ny
        out.append(
            f'<text class="len" x="{f(lx, 1)}" y="{f(ly, 1)}" text-anchor="middle"'
            f' transform="rotate({f(ang, 1)} {f(lx, 1)} {f(ly, 1)})">{text}</text>'
        )
    out.append("</svg>")
    return "\n".join(out)


def _unit_vec(a: XY, b: XY) -> XY:
    n = math.dist(a, b) or 1.0
    return (b[0] - a[0]) / n, (b[1] - a[1]) / n


def _naive(fig: Figure) -> str:
    """What a model writes first: one flat list, every letter 8 pixels up and right of its dot
    whatever the figure, circles as <ellipse>, lengths just above the segment's middle."""
    k, tx, ty = _fit(fig, 500.0, 500.0, 60)

    def p(n: str) -> XY:
        x, y = fig.points[n]
        return tx + k * x, ty - k * y

    out = [
        '<svg width="500" height="500" xmlns="http://www.w3.org/2000/svg">',
        '  <rect width="500" height="500" fill="white" />',
    ]
    for s in fig.segments:
        a, b = _cut(fig, p(s[0]), p(s[1]), s)
        out.append(
            f'  <line x1="{a[0]:.0f}" y1="{a[1]:.0f}" x2="{b[0]:.0f}" y2="{b[1]:.0f}" stroke="black" stroke-width="2" />'
        )
    for o, r in fig.circles:
        x, y = p(o)
        out.append(
            f'  <ellipse cx="{x:.0f}" cy="{y:.0f}" rx="{k * r:.0f}" ry="{k * r:.0f}" stroke="blue" fill="none" />'
        )
    for n in fig.labelled:
        x, y = p(n)
        out.append(f'  <circle cx="{x:.0f}" cy="{y:.0f}" r="4" fill="black" />')
        out.append(f'  <text x="{x + 8:.0f}" y="{y - 8:.0f}" font-size="16" font-family="Arial">{n}</text>')
    for (la, lb), text in _length_labels(fig):
        (x1, y1), (x2, y2) = p(la), p(lb)
        out.append(
            f'  <text x="{(x1 + x2) / 2:.0f}" y="{(y1 + y2) / 2 - 8:.0f}" font-size="14" font-family="Arial"'
            f' text-anchor="middle">{text}</text>'
        )
    out.append("</svg>")
    return "\n".join(out)


STYLES = ("flip", "unit", "css", "naive")
