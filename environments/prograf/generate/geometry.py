"""Geometry tasks: seeded constructions on a base figure, and hand-written textbook figures.

A seeded task is a pure function of (seed, index): a base figure (triangle, right, isosceles or
equilateral triangle, parallelogram, rectangle, square) and 1-3 constructions in the spirit of
AlphaGeometry's vocabulary (midpoint, foot of an altitude, circumcircle, angle bisector, parallel
through a vertex, midsegment, centroid, circle through a vertex, a length label, a diagonal).
Each construction draws its objects and states its facts; a figure whose named points crowd
each other on the canvas is drawn again.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable

from environments.prograf.generate.builders import GeoFigure, geometry_task
from environments.prograf.generate.emit import fit
from environments.prograf.task import Task

XY = tuple[float, float]


def mid(p: XY, q: XY) -> XY:
    return ((p[0] + q[0]) / 2, (p[1] + q[1]) / 2)


def foot(p: XY, a: XY, b: XY) -> tuple[XY, float]:
    """The foot of the perpendicular from p to line ab, and its parameter along ab."""
    dx, dy = b[0] - a[0], b[1] - a[1]
    t = ((p[0] - a[0]) * dx + (p[1] - a[1]) * dy) / (dx * dx + dy * dy)
    return (a[0] + t * dx, a[1] + t * dy), t


def circumcentre(a: XY, b: XY, c: XY) -> XY:
    d = 2 * (a[0] * (b[1] - c[1]) + b[0] * (c[1] - a[1]) + c[0] * (a[1] - b[1]))
    ux = ((a[0] ** 2 + a[1] ** 2) * (b[1] - c[1]) + (b[0] ** 2 + b[1] ** 2) * (c[1] - a[1]) + (c[0] ** 2 + c[1] ** 2) * (a[1] - b[1])) / d
    uy = ((a[0] ** 2 + a[1] ** 2) * (c[0] - b[0]) + (b[0] ** 2 + b[1] ** 2) * (a[0] - c[0]) + (c[0] ** 2 + c[1] ** 2) * (b[0] - a[0])) / d
    return (ux, uy)


def interior_angle(a: XY, b: XY, c: XY) -> float:
    v1, v2 = (a[0] - b[0], a[1] - b[1]), (c[0] - b[0], c[1] - b[1])
    return math.degrees(math.acos(max(-1, min(1, (v1[0] * v2[0] + v1[1] * v2[1]) / (math.hypot(*v1) * math.hypot(*v2))))))


def polar(r: float, deg: float, about: XY = (0.0, 0.0)) -> XY:
    return (about[0] + r * math.cos(math.radians(deg)), about[1] + r * math.sin(math.radians(deg)))


class Letters:
    def __init__(self, used: str):
        self.free = [c for c in "MNHOPDEFGKLQRSTIJUVW" if c not in used]

    def take(self, prefer: str) -> str:
        name = prefer if prefer in self.free else self.free[0]
        self.free.remove(name)
        return name


# ---------------------------------------------------------------------- base figures
def base_triangle(rng: random.Random, fig: GeoFigure, kind: str) -> None:
    rot = rng.uniform(-20, 20)
    if kind == "right":
        a, b = rng.uniform(3, 6), rng.uniform(3, 6)
        c0 = (0.0, 0.0)
        pts = {"C": c0, "A": polar(a, rot), "B": polar(b, rot + 90)}
        fig.say("Draw triangle ABC with a right angle at C.")
        fig.fact("angle", ["A", "C", "B"], "angle ACB is 90°", 90.0)
    elif kind == "isosceles":
        apex_angle = rng.uniform(40, 100)
        side = rng.uniform(4, 6)
        pts = {"A": (0.0, 0.0), "B": polar(side, 270 - apex_angle / 2 + rot), "C": polar(side, 270 + apex_angle / 2 + rot)}
        fig.say("Draw an isosceles triangle ABC with AB = AC.")
        fig.fact("equal_length", ["A", "B", "A", "C"], "AB = AC")
    elif kind == "equilateral":
        side = rng.uniform(4, 6)
        pts = {"A": (0.0, 0.0), "B": polar(side, rot), "C": polar(side, rot + 60)}
        fig.say("Draw an equilateral triangle ABC.")
        fig.fact("equal_length", ["A", "B", "B", "C"], "AB = BC")
        fig.fact("equal_length", ["B", "C", "C", "A"], "BC = CA")
    else:
        while True:
            pts = {"A": (0.0, 0.0), "B": (rng.uniform(4, 7), 0.0), "C": (rng.uniform(0.5, 5), rng.uniform(3, 6))}
            angles = [interior_angle(pts["C"], pts["A"], pts["B"]), interior_angle(pts["A"], pts["B"], pts["C"]),
                      interior_angle(pts["B"], pts["C"], pts["A"])]
            if min(angles) >= 35 and max(angles) <= 95:
                break
        fig.say("Draw triangle ABC.")
    for name in "ABC":
        fig.point(name, pts[name])
    for s in (("A", "B"), ("B", "C"), ("C", "A")):
        fig.seg(*s)


def base_quad(rng: random.Random, fig: GeoFigure, kind: str) -> None:
    rot = rng.uniform(-15, 15)
    w, h = rng.randint(8, 20) / 2, rng.randint(6, 14) / 2
    angle = 90.0 if kind != "parallelogram" else float(rng.choice(range(55, 85, 5)))
    if kind == "square":
        h = w
    a = (0.0, 0.0)
    b = polar(w, rot)
    d = polar(h, rot + angle)
    c = (b[0] + d[0], b[1] + d[1])
    for name, p in zip("ABCD", (a, b, c, d)):
        fig.point(name, p)
    for s in (("A", "B"), ("B", "C"), ("C", "D"), ("D", "A")):
        fig.seg(*s)
    fig.length_labels["AB"] = f"{w:g} cm"
    if kind == "parallelogram":
        fig.length_labels["DA"] = f"{h:g} cm"
        fig.say(f"Draw parallelogram ABCD (vertices in order) with AB = {w:g} cm, AD = {h:g} cm and angle DAB = {angle:g}°.")
        fig.fact("parallel", ["A", "B", "D", "C"], "AB ∥ DC")
        fig.fact("parallel", ["A", "D", "B", "C"], "AD ∥ BC")
        fig.fact("angle", ["D", "A", "B"], f"angle DAB is {angle:g}°", angle)
    else:
        if kind == "rectangle":
            fig.length_labels["BC"] = f"{h:g} cm"
        sides = f"side {w:g} cm" if kind == "square" else f"AB = {w:g} cm and BC = {h:g} cm"
        fig.say(f"Draw {'square' if kind == 'square' else 'rectangle'} ABCD (vertices in order) with {sides}.")
        fig.fact("angle", ["D", "A", "B"], "angle DAB is 90°", 90.0)
        fig.fact("angle", ["A", "B", "C"], "angle ABC is 90°", 90.0)
        fig.fact("angle", ["B", "C", "D"], "angle BCD is 90°", 90.0)
        if kind == "square":
            fig.fact("equal_length", ["A", "B", "B", "C"], "AB = BC")


# ---------------------------------------------------------------------- constructions
def c_median(rng: random.Random, fig: GeoFigure, letters: Letters) -> bool:
    x, y, z = rng.choice([("B", "C", "A"), ("C", "A", "B"), ("A", "B", "C")])
    m = letters.take("M")
    fig.point(m, mid(fig.points[x], fig.points[y]))
    fig.seg(z, m)
    fig.say(f"Let {m} be the midpoint of {x}{y}; draw segment {z}{m}.")
    fig.fact("midpoint", [m, x, y], f"{m} is the midpoint of {x}{y}")
    return True


def c_altitude(rng: random.Random, fig: GeoFigure, letters: Letters) -> bool:
    for x, y, z in rng.sample([("B", "C", "A"), ("C", "A", "B"), ("A", "B", "C")], 3):
        h, t = foot(fig.points[z], fig.points[x], fig.points[y])
        if 0.2 <= t <= 0.8:
            name = letters.take("H")
            fig.point(name, h)
            fig.seg(z, name)
            fig.say(f"Draw the altitude from {z} to {x}{y}, with foot {name}.")
            fig.fact("perpendicular", [z, name, x, y], f"{z}{name} ⟂ {x}{y}")
            fig.fact("on_segment", [name, x, y], f"{name} lies on {x}{y}")
            return True
    return False


def c_circumcircle(rng: random.Random, fig: GeoFigure, letters: Letters) -> bool:
    if fig.circles:
        return False
    o = letters.take("O")
    fig.point(o, circumcentre(fig.points["A"], fig.points["B"], fig.points["C"]))
    fig.circles.append((o, "A"))
    fig.say(f"Draw the circle through A, B and C and mark its centre {o}.")
    fig.fact("on_circle", ["B", o], f"B lies on the circle centred at {o}")
    fig.fact("on_circle", ["C", o], f"C lies on the circle centred at {o}")
    return True


def c_bisector(rng: random.Random, fig: GeoFigure, letters: Letters) -> bool:
    x, y, z = rng.choice([("B", "C", "A"), ("C", "A", "B"), ("A", "B", "C")])
    px, py, pz = fig.points[x], fig.points[y], fig.points[z]
    zx, zy = math.dist(pz, px), math.dist(pz, py)
    t = zx / (zx + zy)  # the bisector divides XY in the ratio of the sides
    d = letters.take("D")
    fig.point(d, (px[0] + t * (py[0] - px[0]), px[1] + t * (py[1] - px[1])))
    fig.seg(z, d)
    fig.say(f"Draw the bisector of angle {x}{z}{y}, meeting {x}{y} at {d}.")
    fig.fact("equal_angle", [x, z, d, d, z, y], f"angle {x}{z}{d} = angle {d}{z}{y}")
    fig.fact("on_segment", [d, x, y], f"{d} lies on {x}{y}")
    return True


def c_parallel(rng: random.Random, fig: GeoFigure, letters: Letters) -> bool:
    x, y, z = rng.choice([("A", "B", "C"), ("B", "C", "A"), ("C", "A", "B")])
    px, py, pz = fig.points[x], fig.points[y], fig.points[z]
    p = letters.take("P")
    k = rng.choice([-0.6, 0.6])
    fig.point(p, (pz[0] + k * (py[0] - px[0]), pz[1] + k * (py[1] - px[1])))
    fig.seg(z, p)
    fig.say(f"Through {z} draw a segment {z}{p} parallel to {x}{y}.")
    fig.fact("parallel", [z, p, x, y], f"{z}{p} ∥ {x}{y}")
    return True


def c_midsegment(rng: random.Random, fig: GeoFigure, letters: Letters) -> bool:
    x, y, z = rng.choice([("A", "B", "C"), ("B", "C", "A"), ("C", "A", "B")])
    m, n = letters.take("M"), letters.take("N")
    fig.point(m, mid(fig.points[z], fig.points[x]))
    fig.point(n, mid(fig.points[z], fig.points[y]))
    fig.seg(m, n)
    fig.say(f"Let {m} and {n} be the midpoints of {z}{x} and {z}{y}; draw segment {m}{n}.")
    fig.fact("midpoint", [m, z, x], f"{m} is the midpoint of {z}{x}")
    fig.fact("midpoint", [n, z, y], f"{n} is the midpoint of {z}{y}")
    fig.fact("parallel", [m, n, x, y], f"{m}{n} ∥ {x}{y}")
    return True


def c_vertex_circle(rng: random.Random, fig: GeoFigure, letters: Letters) -> bool:
    if fig.circles:
        return False
    x, y = rng.choice([("A", "B"), ("B", "C"), ("C", "A")])
    fig.circles.append((x, y))
    fig.say(f"Draw the circle centred at {x} passing through {y}.")
    return True


def c_length(rng: random.Random, fig: GeoFigure, letters: Letters) -> bool:
    if fig.length_labels:
        return False
    a, b = rng.choice(fig.segments[:3])
    text = f"{rng.randint(3, 12)} cm"
    fig.length_labels[a + b] = text
    fig.say(f"Side {a}{b} is {text} long.")
    return True


def c_diagonals(rng: random.Random, fig: GeoFigure, letters: Letters) -> bool:
    o = letters.take("O")
    pa, pc = fig.points["A"], fig.points["C"]
    fig.point(o, mid(pa, pc))
    fig.seg("A", "C")
    fig.seg("B", "D")
    fig.say(f"Draw both diagonals; they meet at {o}.")
    fig.fact("midpoint", [o, "A", "C"], f"{o} is the midpoint of AC")
    fig.fact("on_segment", [o, "B", "D"], f"{o} lies on BD")
    return True


def c_one_diagonal(rng: random.Random, fig: GeoFigure, letters: Letters) -> bool:
    fig.seg("A", "C")
    fig.forbidden.append(("B", "D"))
    fig.say("Draw diagonal AC only.")
    return True


def c_quad_midpoint(rng: random.Random, fig: GeoFigure, letters: Letters) -> bool:
    x, y = rng.choice([("A", "B"), ("B", "C"), ("C", "D"), ("D", "A")])
    m = letters.take("M")
    fig.point(m, mid(fig.points[x], fig.points[y]))
    other = {"A": "C", "B": "D", "C": "A", "D": "B"}[x]
    fig.seg(other, m)
    fig.say(f"Let {m} be the midpoint of {x}{y}; draw segment {other}{m}.")
    fig.fact("midpoint", [m, x, y], f"{m} is the midpoint of {x}{y}")
    return True


TRIANGLE_STEPS: list[Callable[[random.Random, GeoFigure, Letters], bool]] = [
    c_median, c_altitude, c_circumcircle, c_bisector, c_parallel, c_midsegment, c_vertex_circle, c_length]
QUAD_STEPS: list[Callable[[random.Random, GeoFigure, Letters], bool]] = [c_quad_midpoint, c_length]


def crowded(fig: GeoFigure) -> bool:
    """Named points closer than 40 px once drawn (their letters would be read as each other's)."""
    pts = list(fit(fig.points, fig.circles).values())
    return any(math.dist(p, q) < 40 for i, p in enumerate(pts) for q in pts[i + 1:])


def generate(seed: int, index: int, attempt: int = 0) -> Task:
    """Task `index`; `attempt` > 0 draws it again (the corpus builder's answer to a repeated prompt)."""
    rng = random.Random(f"prograf/{seed}/geometry/{index}" + (f"/{attempt}" if attempt else ""))
    steps_wanted = 1 + index % 3
    for _ in range(200):
        fig = GeoFigure()
        kind = rng.choice(["triangle", "triangle", "right", "isosceles", "equilateral", "parallelogram", "rectangle", "square"])
        if kind in ("parallelogram", "rectangle", "square"):
            base_quad(rng, fig, kind)
            letters = Letters("ABCD")
            steps = [rng.choice([c_diagonals, c_one_diagonal])] + rng.sample(QUAD_STEPS, min(steps_wanted - 1, 2))
        else:
            base_triangle(rng, fig, kind)
            letters = Letters("ABC")
            steps = rng.sample(TRIANGLE_STEPS, 5)
        done = 0
        for step in steps:
            if done < steps_wanted and step(rng, fig, letters):
                done += 1
        if done == steps_wanted and not crowded(fig):
            return geometry_task(f"geometry-{index:03d}", "generated", fig, rng)
    raise RuntimeError(f"geometry task {index}: no uncrowded figure in 200 draws")
