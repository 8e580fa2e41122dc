"""Schemdraw circuits, as JSON (a component list), placed and read into a netlist; Python source is
read into the same element records by `schematic_source.py` (an AST allow-list, never executed).

Placement follows schemdraw's drawing cursor: an element starts where the previous one ended
(or `at` a point or another element's `start`/`end`), goes `d` (right, left, up, down or an angle)
for `l` units (3, schemdraw's unit), or ends exactly `to` a point or anchor. Nets: every element
end is snapped to a 1e-3 grid; `Line` elements join their ends, an end lying on a line's interior
joins it (a T junction; crossing lines do not connect), a `Ground` marks its net as ground. A
`Wire` is drawn as its shape's legs (`-|`, `|-`, `z`, `N`, `n`, `c`) and turns the heading as schemdraw
does. A `Label` is text standing free at a point, an `Annotate` text about the point its arrow's head
points at; marks drawn over a circuit (current and voltage arrows, loop currents, tags, outlines) join
nothing, name nothing and leave the cursor where it was. The texts of a drawing are bound to the parts as one
assignment (`bind_texts`), a name to an unnamed part, a value to a part without one.
"""

from __future__ import annotations

import json
import math
import re
import statistics
from collections.abc import Callable, Sequence
from typing import Any

from environments.prograf.parse.binding import bind
from environments.prograf.parse.scene import Component, InputRejected, Scene

UNIT = 3.0
MAX_ELEMENTS = 400
KINDS = {
    "resistor": "resistor", "resistoriec": "resistor", "resistorieee": "resistor", "potentiometer": "resistor",
    "capacitor": "capacitor", "capacitor2": "capacitor", "inductor": "inductor", "inductor2": "inductor",
    "sourcev": "voltage_source", "sourcesin": "voltage_source", "battery": "voltage_source",
    "batterycell": "voltage_source", "sourcei": "current_source", "diode": "diode", "schottky": "diode",
    "zener": "diode", "led": "led", "lamp": "lamp", "lamp2": "lamp", "switch": "switch", "switchspst": "switch",
    "fuse": "fuse", "line": "wire", "wire": "wire", "ground": "ground", "groundsignal": "ground",
    "groundchassis": "ground", "dot": "dot", "label": "text",
    # schemdraw's Arrow is a Line with heads (a wire); a Gap is two terminals with nothing between (open)
    "arrow": "wire", "gap": "gap",
    # Annotate: a curved arrow whose text (at its tail) says what it points at (its head, `at`)
    "annotate": "annotation",
    # drawn over the circuit, joining nothing and naming no part: current and voltage arrows, loop currents,
    # impedance marks, signal tags, outlines around parts; none moves the drawing's cursor (schemdraw: no drop)
    "currentlabel": "mark", "currentlabelinline": "mark", "voltagelabelarc": "mark", "zlabel": "mark",
    "looparrow": "mark", "loopcurrent": "mark", "tag": "mark", "encircle": "mark", "encirclebox": "mark",
    "rect": "mark",
}
NOT_PARTS = ("wire", "dot", "gap", "annotation", "mark")  # kinds that are no component of the netlist
FREE = ("text", "annotation", "mark")  # kinds whose text names no element of their own: keyed by id, not label
DIRECTIONS = {"right": 0.0, "up": 90.0, "left": 180.0, "down": 270.0}
XY = tuple[float, float]


def element_kind(type_name: str) -> str:
    """The kind of a schemdraw element type; one not read is refused, never guessed into a part
    (an annotation such as LoopCurrent or Tag would otherwise join two nets)."""
    kind = KINDS.get(type_name.lower().replace("_", ""))
    if kind is None:
        raise InputRejected(f"unsupported construct: schemdraw element {type_name!r} is not read (read: Resistor,"
                            " Capacitor, Inductor, SourceV, SourceI, Battery, Diode, LED, Lamp, Switch, Fuse,"
                            " Line, Arrow, Wire, Gap, Ground, Dot, Label, Annotate and the marks CurrentLabel,"
                            " CurrentLabelInline, VoltageLabelArc, ZLabel, LoopCurrent, LoopArrow, Tag, Encircle,"
                            " EncircleBox, Rect)")
    return kind


def split_label(label: str) -> tuple[str, str]:
    """`R1 10 kOhm` -> (R1, 10 kOhm): the first word names the part, the rest is its value."""
    words = label.replace("\n", " ").split()
    return (words[0], " ".join(words[1:])) if words else ("", "")


ANCHORS_2TERM = ("start", "end", "center")


def finite(p: Sequence[float], where: str) -> XY:
    x, y = float(p[0]), float(p[1])
    if not (math.isfinite(x) and math.isfinite(y) and abs(x) <= 1e4 and abs(y) <= 1e4):
        raise InputRejected(f"{where}: coordinates must be finite and within 10000")
    return (x, y)


def _heading(d: Any, where: str) -> float:
    """schemdraw reads a direction by its first letter (u, r, l, d) or as an angle (a number or a numeric string)."""
    if isinstance(d, (int, float)) and not isinstance(d, bool):
        return float(d)
    if isinstance(d, str):
        try:
            return float(d)
        except ValueError:
            pass
        if d.lower() in DIRECTIONS:
            return DIRECTIONS[d.lower()]
    raise InputRejected(f"{where}: d must be right, left, up, down or an angle, got {d!r}")


def number(value: Any, where: str, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise InputRejected(f"{where}: {what} must be a number, got {value!r}")
    return float(value)


class Placer:
    """schemdraw's drawing state: the position `here`, the heading `theta`, the push/pop stack, the unit
    (a two-terminal element's default length) and every named element's anchors. Both readers place
    through it, so JSON and Python mean the same thing by the same words."""

    def __init__(self, unit: float = UNIT):
        self.here: XY = (0.0, 0.0)
        self.theta = 0.0
        self.unit = unit
        self.stack: list[tuple[XY, float]] = []
        self.anchors: dict[str, dict[str, XY]] = {}
        self.out: list[tuple[str, str, str, XY, XY]] = []
        self.added = 0

    def point(self, value: Any, where: str) -> XY:
        if isinstance(value, (list, tuple)) and len(value) == 2 and all(
                isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
            return finite(value, where)
        if isinstance(value, str):
            name, _, anchor = value.partition(".")
            return self.anchor(name, anchor or "end", where)
        raise InputRejected(f"{where}: a position is [x, y] or 'NAME.start' / 'NAME.end', got {value!r}")

    def anchor(self, name: str, anchor: str, where: str) -> XY:
        if name not in self.anchors:
            raise InputRejected(f"{where}: {name!r} names no earlier element (give it an id or a label first)")
        if anchor not in self.anchors[name]:
            raise InputRejected(f"{where}: anchor {anchor!r} (use start, end or center): unsupported construct")
        return self.anchors[name][anchor]

    def push(self) -> None:
        self.stack.append((self.here, self.theta))

    def pop(self) -> None:
        if self.stack:  # schemdraw ignores a pop with nothing pushed
            self.here, self.theta = self.stack.pop()

    def add(self, el: dict[str, Any], index: int) -> tuple[str, str, str, XY, XY]:
        """Place one element as schemdraw's `Drawing.add` does and move `here` / `theta` as it does."""
        self.added += 1  # elements, not drawn pieces (a Wire draws up to three)
        if self.added > MAX_ELEMENTS:
            raise InputRejected(f"more than {MAX_ELEMENTS} elements")
        where = f"element {index + 1}"
        if not isinstance(el, dict) or not isinstance(el.get("type"), str):
            raise InputRejected(f"{where}: an element is an object with a 'type' (e.g. Resistor, Line)")
        try:
            kind = element_kind(el["type"])
        except InputRejected as exc:
            raise InputRejected(f"{where}: {exc}") from None
        name, value = split_label(str(el.get("label") or ""))
        value = str(el["value"]) if el.get("value") is not None else value
        at = self.point(el["at"], where) if "at" in el else self.here
        if kind in ("text", "mark"):
            # schemdraw's Label: text at a point; a mark (a current arrow, a tag) is drawn over the circuit.
            # Neither moves the cursor or the heading. Their anchors go by id or place in the list, never by
            # their text (that names a part)
            self.anchors[str(el.get("id") or f"#{index + 1}")] = {"start": at, "end": at, "center": at}
            self.out.append((kind, name, value, at, at))
            return self.out[-1]
        if kind == "annotation" or (kind == "wire" and el["type"].lower() == "wire"):
            return self._between(el, kind, name, value, at, index)
        if "delta" in el:  # schemdraw has no delta() on other elements: it would fail there
            raise InputRejected(f"{where}: delta is read on Wire and Annotate only: unsupported construct")
        if kind in ("ground", "dot"):
            # one-terminal: all anchors at its position; it leaves the heading alone and, unless held,
            # moves `here` to where it was put
            start = end = at
            if not el.get("hold"):
                self.here = at
            self._record(el, name, index, start, end, {"start": at, "end": at, "center": at})
            self.out.append((kind, name, value, start, end))
            return self.out[-1]
        theta = self.theta
        if el.get("theta") is not None:
            theta = _heading(el["theta"], where)
        d = el.get("d", el.get("direction"))
        if d is not None:
            theta = _heading(d, where)
        if "endpoints" in el:
            pts = el["endpoints"]
            if not isinstance(pts, (list, tuple)) or len(pts) != 2:
                raise InputRejected(f"{where}: endpoints are two positions")
            start, end = self.point(pts[0], where), self.point(pts[1], where)
            at = start
            theta = _angle(start, end, theta)
        elif "to" in el:
            start, end = at, self.point(el["to"], where)
            theta = _angle(start, end, theta)
        elif "tox" in el or "toy" in el:
            axis = 0 if "tox" in el else 1
            target = el["tox" if axis == 0 else "toy"]
            goal = number(target, where, "tox/toy") if isinstance(target, (int, float)) else \
                self.point(target, where)[axis]
            if el.get("theta") is not None:  # an explicit angle is kept; the length reaches the x (or y)
                c = (math.cos if axis == 0 else math.sin)(math.radians(theta))
                length = abs(goal - at[axis]) / abs(c) if abs(c) > 1e-9 else 0.0
                start, end = at, _step(at, theta, length)
            else:
                start = at
                end = (goal, at[1]) if axis == 0 else (at[0], goal)
                theta = (180.0 if at[0] > goal else 0.0) if axis == 0 else (270.0 if at[1] > goal else 90.0)
        else:
            length = number(el.get("l", self.unit), where, "l")
            if not 0 <= length <= 1e3:
                raise InputRejected(f"{where}: l must be a number of units between 0 and 1000")
            start, end = at, _step(at, theta, length)
        anchor = el.get("anchor")
        if anchor is not None:  # the named anchor, not the start, goes to the `at` position
            if anchor not in ANCHORS_2TERM:
                raise InputRejected(f"{where}: anchor {anchor!r} (use start, end or center): unsupported construct")
            shift = {"start": 0.0, "center": 0.5, "end": 1.0}[anchor]
            dx, dy = (end[0] - start[0]) * shift, (end[1] - start[1]) * shift
            start, end = (start[0] - dx, start[1] - dy), (end[0] - dx, end[1] - dy)
        start, end = finite(start, where), finite(end, where)
        # after a two-terminal element schemdraw heads its way and stands at its end, or (held) where it was put
        self.theta = theta
        self.here = at if el.get("hold") else end
        center = ((start[0] + end[0]) / 2, (start[1] + end[1]) / 2)
        self._record(el, name, index, start, end, {"start": start, "end": end, "center": center})
        self.out.append((kind, name, value, start, end))
        return self.out[-1]

    def _between(self, el: dict[str, Any], kind: str, name: str, value: str, at: XY, index: int) -> tuple[str, str, str, XY, XY]:
        """schemdraw's Wire and Annotate, drawn from `at` to `to` (or `at` + `delta`; with neither, to a fixed
        drawing point: (3, -2) for a Wire, (1, 1) for an Annotate). A Wire is drawn as its shape's legs; an
        Annotate joins nothing. After either the cursor stands at its end, the heading unchanged except
        where a Wire's last leg turns it (schemdraw's droptheta); held, neither moves; `drop` names the
        anchor to stand at (the heading then 0, as schemdraw leaves it)."""
        where = f"element {index + 1}"
        if el.get("d", el.get("direction")) is not None:  # schemdraw turns the whole drawing about `at` then
            raise InputRejected(f"{where}: a direction on a {el['type']} (give its end with to or delta):"
                                " unsupported construct")
        if "delta" in el:
            d = self.point(el["delta"], where)
            end = finite((at[0] + d[0], at[1] + d[1]), where)
        elif "to" in el:
            end = self.point(el["to"], where)
        else:
            end = (3.0, -2.0) if kind == "wire" else (1.0, 1.0)
        anchors = {"start": at, "end": end, "center": ((at[0] + end[0]) / 2, (at[1] + end[1]) / 2)}
        theta: float | None = None
        if kind == "wire":
            legs, anchors["mid"], theta = wire_path(at, end, el.get("shape", "-"), el.get("k", 1), where)
            self.out.extend(("wire", "", "", a, b) for a, b in zip(legs, legs[1:]))
            self._record(el, name, index, at, end, anchors)
        else:  # its text says what its head points at: keyed by id, never by that text
            self.anchors[str(el.get("id") or f"#{index + 1}")] = anchors
            self.out.append((kind, name, value, at, end))
        drop = el.get("drop")
        if drop is not None:
            if drop not in anchors:
                raise InputRejected(f"{where}: drop {drop!r} (use {', '.join(anchors)}): unsupported construct")
            self.here, self.theta = anchors[drop], 0.0
        elif not el.get("hold"):
            self.here = end
            self.theta = self.theta if theta is None else theta
        return (kind, name, value, at, end)

    def _record(self, el: dict[str, Any], name: str, index: int, start: XY, end: XY, anchors: dict[str, XY]) -> None:
        self.anchors[str(el.get("id") or name or f"#{index + 1}")] = anchors


WIRE_SHAPES = "- -| |- z Z -/- N |/| n |-| c -|-".split()


def wire_path(a: XY, b: XY, shape: Any, k_value: Any, where: str) -> tuple[list[XY], XY, float | None]:
    """The corners of schemdraw's `Wire(shape, k)` from a to b, its `mid` anchor and the heading its last
    leg leaves (None: a straight wire leaves the heading as it was), as schemdraw's `Wire._place` draws it."""
    if shape not in WIRE_SHAPES:
        raise InputRejected(f"{where}: Wire shape {shape!r} (schemdraw's: {' '.join(WIRE_SHAPES)}): unsupported construct")
    k = number(k_value, where, "k")
    dx, dy = b[0] - a[0], b[1] - a[1]
    turn: float | None
    if shape == "-":
        pts, mid, turn = [(0.0, 0.0), (dx, dy)], (dx / 2, dy / 2), None
    elif shape == "-|":
        pts, mid, turn = [(0.0, 0.0), (dx, 0.0), (dx, dy)], (dx, dy / 2), 90.0 if dy > 0 else -90.0
    elif shape == "|-":
        pts, mid, turn = [(0.0, 0.0), (0.0, dy), (dx, dy)], (dx / 2, dy), 0.0 if dx > 0 else 180.0
    elif shape in ("z", "Z", "-/-"):
        k = abs(k) if dx > 0 else -abs(k)
        pts, mid, turn = [(0.0, 0.0), (k, 0.0), (dx - k, dy), (dx, dy)], (dx / 2, dy / 2), 0.0 if dx > 0 else 180.0
    elif shape in ("N", "|/|"):
        k = abs(k) if dy > 0 else -abs(k)
        pts, mid, turn = [(0.0, 0.0), (0.0, k), (dx, dy - k), (dx, dy)], (dx / 2, dy / 2), 90.0 if dy > 0 else -90.0
    elif shape in ("n", "|-|"):
        pts, mid, turn = [(0.0, 0.0), (0.0, k), (dx, k), (dx, dy)], (dx / 2, k), 90.0 if dy > k else -90.0
    else:  # c, -|-
        pts, mid, turn = [(0.0, 0.0), (k, 0.0), (k, dy), (dx, dy)], (k, dy / 2), 0.0 if dx > k else 180.0
    corners = [finite((a[0] + x, a[1] + y), where) for x, y in pts]
    return corners, finite((a[0] + mid[0], a[1] + mid[1]), where), turn


def _step(p: XY, theta: float, length: float) -> XY:
    return (p[0] + length * math.cos(math.radians(theta)), p[1] + length * math.sin(math.radians(theta)))


def _angle(a: XY, b: XY, fallback: float) -> float:
    if a == b:
        return fallback
    return math.degrees(math.atan2(b[1] - a[1], b[0] - a[0])) % 360.0


def place(elements: list[dict[str, Any]]) -> list[tuple[str, str, str, XY, XY]]:
    """(kind, name, value, start, end) of each element, following the drawing cursor."""
    if len(elements) > MAX_ELEMENTS:
        raise InputRejected(f"{len(elements)} elements (at most {MAX_ELEMENTS})")
    placer = Placer()
    for i, el in enumerate(elements):
        placer.add(el, i)
    return placer.out


def _snap(p: XY) -> tuple[int, int]:
    return (round(p[0] * 1000), round(p[1] * 1000))


def _on_interior(p: tuple[int, int], a: tuple[int, int], b: tuple[int, int]) -> bool:
    cross = (b[0] - a[0]) * (p[1] - a[1]) - (b[1] - a[1]) * (p[0] - a[0])
    length = math.dist(a, b)
    if length == 0 or abs(cross) / length > 1:
        return False
    t = ((p[0] - a[0]) * (b[0] - a[0]) + (p[1] - a[1]) * (b[1] - a[1])) / length**2
    return 0 < t < 1


def build_scene(elements: list[dict[str, Any]], fmt: str) -> Scene:
    return scene_of(place(elements), fmt)


def scene_of(placed: list[tuple[str, str, str, XY, XY]], fmt: str) -> Scene:
    """The circuit of placed elements: nets by union-find over their ends, with T junctions on wires."""
    parent: dict[tuple[int, int], tuple[int, int]] = {}

    def find(p: tuple[int, int]) -> tuple[int, int]:
        parent.setdefault(p, p)
        while parent[p] != p:
            parent[p] = parent[parent[p]]
            p = parent[p]
        return p

    def union(a: tuple[int, int], b: tuple[int, int]) -> None:
        parent[find(a)] = find(b)

    wires = [(_snap(s), _snap(e)) for kind, _, _, s, e in placed if kind == "wire"]
    ends = [_snap(p) for kind, _, _, s, e in placed if kind not in ("dot", "gap", *FREE) for p in (s, e)]
    for a, b in wires:
        union(a, b)
    for p in ends:
        find(p)
        for a, b in wires:
            if _on_interior(p, a, b):
                union(p, a)
    ids: dict[tuple[int, int], int] = {}

    def net(p: XY) -> int:
        return ids.setdefault(find(_snap(p)), len(ids))

    scene = Scene(format=fmt)
    lines: list[tuple[XY, XY]] = []
    texts: list[tuple[str, XY]] = []
    for kind, name, value, start, end in placed:
        if kind == "ground":
            scene.ground_nets.add(net(start))
        elif kind in ("text", "annotation"):  # an Annotate's text is about what its head (start) points at
            text = " ".join(t for t in (name, value) if t)
            if text:
                texts.append((text, start))
        elif kind not in NOT_PARTS:
            scene.components.append(Component(label=name, kind=kind, value=value, nets=(net(start), net(end))))
            lines.append((start, end))
    if texts:
        bind_texts(scene, lines, texts)
    return scene


PART_NAME = re.compile(r"[A-Za-z]{1,4}\d+[\w']*")  # R1, C2, SW1, LED3, Q1a: letters then a number


def bind_texts(scene: Scene, lines: list[tuple[XY, XY]], texts: list[tuple[str, XY]]) -> None:
    """Free texts bound to the parts (`lines[i]` is part i's lead) as one assignment each
    (`binding.bind`, cost the distance to the lead, out of reach past half the median part's
    length): texts that start with a part name (R1, or R1 10k) to the parts drawn without a name,
    the other texts (10k) as values to the parts drawn without a value. Not each to its nearest:
    a value between two parts goes where the other values leave room. A near-tie, and a text no
    part is left for, is noted on the scene."""
    reach = 0.5 * statistics.median(math.dist(a, b) for a, b in lines) if lines else 0.0
    parts = scene.components
    naming = [(t, p) for t, p in texts if PART_NAME.fullmatch(t.split()[0])]
    values = [(t, p) for t, p in texts if not PART_NAME.fullmatch(t.split()[0])]
    rules: list[tuple[list[tuple[str, XY]], Callable[[Component], bool]]] = [
        (naming, lambda c: not c.label), (values, lambda c: not c.value)]
    for group, free in rules:
        if not group:
            continue
        dist = [[_lead_distance(p, lines[j]) if free(c) else None for j, c in enumerate(parts)] for _, p in group]
        cost = [[d if d is not None and d <= reach else None for d in row] for row in dist]
        bound = bind(cost)
        for i, (text, _) in enumerate(group):
            j = bound.pairs.get(i)
            if j is None:
                scene.notes.append(f"label {text!r} is near no part left without one: not read")
                continue
            if group is naming:
                parts[j].label, rest = text.split()[0], " ".join(text.split()[1:])
                parts[j].value = parts[j].value or rest
            else:
                parts[j].value = text
            if i in bound.runner_up:
                scene.notes.append(f"label {text!r} is ambiguous: bound to {_part_name(parts, j)}, but "
                                   f"{_part_name(parts, bound.runner_up[i])} is nearly as good")


def _lead_distance(p: XY, lead: tuple[XY, XY]) -> float:
    (ax, ay), (bx, by) = lead
    dx, dy = bx - ax, by - ay
    n = dx * dx + dy * dy
    t = 0.0 if n == 0 else max(0.0, min(1.0, ((p[0] - ax) * dx + (p[1] - ay) * dy) / n))
    return math.dist(p, (ax + t * dx, ay + t * dy))


def _part_name(parts: list[Component], j: int) -> str:
    return parts[j].label or f"the {parts[j].kind} #{j + 1}"


def parse_schemdraw_json(code: str) -> Scene:
    return build_scene(schemdraw_json_elements(code), "schemdraw-json")


def schemdraw_json_elements(code: str) -> list[Any]:
    """The element list of schemdraw JSON; InputRejected if it is not one."""
    if len(code) > 100_000:
        raise InputRejected("schemdraw JSON over 100000 characters")
    try:
        data = json.loads(code)
    except json.JSONDecodeError as exc:
        raise InputRejected(f"schemdraw JSON does not parse: {exc.msg} (line {exc.lineno})") from None
    elements = data.get("elements") if isinstance(data, dict) else data
    if not isinstance(elements, list):
        raise InputRejected("schemdraw JSON is {\"elements\": [...]} or a list of elements")
    return elements
