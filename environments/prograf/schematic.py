"""Schemdraw circuits, as JSON (a component list) or as Python source read through an AST allow-list
(never executed, never imported: each allowed call is rebuilt as one of our element records).

Placement follows schemdraw's drawing cursor: an element starts where the previous one ended
(or `at` a point or another element's `start`/`end`), goes `d` (right, left, up, down or an angle)
for `l` units (3, schemdraw's unit), or ends exactly `to` a point or anchor. Nets: every element
end is snapped to a 1e-3 grid; `Line` elements join their ends, an end lying on a line's interior
joins it (a T junction; crossing lines do not connect), a `Ground` marks its net as ground.
"""

from __future__ import annotations

import ast
import json
import math
from typing import Any

from environments.prograf.scene import Component, InputRejected, Scene

UNIT = 3.0
MAX_ELEMENTS = 400
KINDS = {
    "resistor": "resistor", "resistoriec": "resistor", "resistorieee": "resistor", "potentiometer": "resistor",
    "capacitor": "capacitor", "capacitor2": "capacitor", "inductor": "inductor", "inductor2": "inductor",
    "sourcev": "voltage_source", "sourcesin": "voltage_source", "battery": "voltage_source",
    "batterycell": "voltage_source", "sourcei": "current_source", "diode": "diode", "schottky": "diode",
    "zener": "diode", "led": "led", "lamp": "lamp", "lamp2": "lamp", "switch": "switch", "switchspst": "switch",
    "fuse": "fuse", "line": "wire", "wire": "wire", "ground": "ground", "groundsignal": "ground",
    "groundchassis": "ground", "dot": "dot",
}
DIRECTIONS = {"right": 0.0, "up": 90.0, "left": 180.0, "down": 270.0}
XY = tuple[float, float]


def element_kind(type_name: str) -> str:
    return KINDS.get(type_name.lower().replace("_", ""), f"unknown:{type_name}")


def split_label(label: str) -> tuple[str, str]:
    """`R1 10 kOhm` -> (R1, 10 kOhm): the first word names the part, the rest is its value."""
    words = label.replace("\n", " ").split()
    return (words[0], " ".join(words[1:])) if words else ("", "")


def _point(value: Any, placed: dict[str, tuple[XY, XY]], where: str) -> XY:
    if isinstance(value, (list, tuple)) and len(value) == 2 and all(isinstance(v, (int, float)) for v in value):
        x, y = float(value[0]), float(value[1])
        if not (math.isfinite(x) and math.isfinite(y) and abs(x) <= 1e4 and abs(y) <= 1e4):
            raise InputRejected(f"{where}: coordinates must be finite and within 10000")
        return (x, y)
    if isinstance(value, str):
        name, _, anchor = value.partition(".")
        if name not in placed:
            raise InputRejected(f"{where}: {value!r} names no earlier element (give it an id or a label first)")
        start, end = placed[name]
        if anchor in ("", "end"):
            return end
        if anchor == "start":
            return start
        if anchor == "center":
            return ((start[0] + end[0]) / 2, (start[1] + end[1]) / 2)
        raise InputRejected(f"{where}: anchor {anchor!r} (use start, end or center)")
    raise InputRejected(f"{where}: a position is [x, y] or 'NAME.start' / 'NAME.end', got {value!r}")


def place(elements: list[dict[str, Any]]) -> list[tuple[str, str, str, XY, XY]]:
    """(kind, name, value, start, end) of each element, following the drawing cursor."""
    if len(elements) > MAX_ELEMENTS:
        raise InputRejected(f"{len(elements)} elements (at most {MAX_ELEMENTS})")
    placed: dict[str, tuple[XY, XY]] = {}
    out = []
    cursor: XY = (0.0, 0.0)
    heading = 0.0
    for i, el in enumerate(elements):
        where = f"element {i + 1}"
        if not isinstance(el, dict) or not isinstance(el.get("type"), str):
            raise InputRejected(f"{where}: an element is an object with a 'type' (e.g. Resistor, Line)")
        kind = element_kind(el["type"])
        label = str(el.get("label") or "")
        name, value = split_label(label)
        value = str(el["value"]) if el.get("value") is not None else value
        start = _point(el["at"], placed, where) if "at" in el else cursor
        d = el.get("d", el.get("direction"))
        if d is not None:
            if isinstance(d, (int, float)) and not isinstance(d, bool):
                heading = float(d)
            elif isinstance(d, str) and d.lower() in DIRECTIONS:
                heading = DIRECTIONS[d.lower()]
            else:
                raise InputRejected(f"{where}: d must be right, left, up, down or an angle, got {d!r}")
        if "to" in el:
            end = _point(el["to"], placed, where)
        elif kind in ("ground", "dot"):
            end = start
        else:
            length = el.get("l", UNIT)
            if not isinstance(length, (int, float)) or not 0 <= length <= 1e3:
                raise InputRejected(f"{where}: l must be a number of units between 0 and 1000")
            end = (start[0] + length * math.cos(math.radians(heading)), start[1] + length * math.sin(math.radians(heading)))
        key = str(el.get("id") or name or f"#{i + 1}")
        placed[key] = (start, end)
        out.append((kind, name, value, start, end))
        if kind not in ("ground", "dot"):
            cursor = end
    return out


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
    placed = place(elements)
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
    ends = [_snap(p) for kind, _, _, s, e in placed if kind != "dot" for p in (s, e)]
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
    for kind, name, value, start, end in placed:
        if kind == "ground":
            scene.ground_nets.add(net(start))
        elif kind not in ("wire", "dot"):
            scene.components.append(Component(label=name, kind=kind, value=value, nets=(net(start), net(end))))
    return scene


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


# ---------------------------------------------------------------------- Python source, allow-listed
METHODS = {"right", "left", "up", "down", "length", "at", "to", "label", "theta", "reverse", "flip", "color",
           "fill", "dot", "idot", "scale", "linewidth", "zorder", "anchor", "drop", "hold"}
IGNORED_CALLS = {"draw", "save", "config", "push", "pop", "move", "here"}


class SourceRejected(InputRejected):
    pass


def _reject(node: ast.AST, why: str) -> SourceRejected:
    return SourceRejected(f"schemdraw source line {getattr(node, 'lineno', '?')}: {why} (only schemdraw element calls are read)")


def _literal(node: ast.expr) -> Any:
    if isinstance(node, ast.Constant) and isinstance(node.value, (str, int, float)) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant):
        return -_literal(node.operand)
    if isinstance(node, (ast.Tuple, ast.List)):
        return [_literal(e) for e in node.elts]
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.attr in ("start", "end", "center"):
        return f"{node.value.id}.{node.attr}"
    raise _reject(node, f"{type(node).__name__} is not a literal or NAME.start/end")


def _element(node: ast.expr, modules: set[str], names: set[str]) -> dict[str, Any]:
    """`elm.Resistor().right().label('R1')` -> {"type": "Resistor", "d": "right", "label": "R1"}."""
    chain = []
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in METHODS:
        chain.append(node)
        node = node.func.value
    if not isinstance(node, ast.Call):
        raise _reject(node, "expected an element such as elm.Resistor()")
    func = node.func
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in modules:
        type_name = func.attr
    elif isinstance(func, ast.Name) and func.id in names:
        type_name = func.id
    else:
        raise _reject(node, "an element is elm.TYPE(...) from schemdraw.elements")
    el: dict[str, Any] = {"type": type_name}
    for kw in node.keywords:
        if kw.arg in ("d", "l", "label"):
            el[kw.arg] = _literal(kw.value)
        elif kw.arg is None:
            raise _reject(node, "** arguments are not read")
    for call in reversed(chain):
        method = call.func.attr  # type: ignore[union-attr]
        args = [_literal(a) for a in call.args]
        if method in DIRECTIONS:
            el["d"] = method
            if args:
                el["l"] = args[0]
        elif method == "theta" and args:
            el["d"] = args[0]
        elif method == "length" and args:
            el["l"] = args[0]
        elif method in ("at", "to") and args:
            el[method] = args[0]
        elif method == "label" and args:
            el["label"] = (str(el.get("label", "")) + " " + str(args[0])).strip()
    return el


def schemdraw_source_elements(code: str) -> list[dict[str, Any]]:
    if len(code) > 50_000:
        raise InputRejected("schemdraw source over 50000 characters")
    try:
        tree = ast.parse(code)
    except SyntaxError as exc:
        raise InputRejected(f"schemdraw source does not parse: {exc.msg} (line {exc.lineno})") from None
    modules, names, drawings = set(), set(), set()
    elements: list[dict[str, Any]] = []
    pending: dict[str, dict[str, Any]] = {}

    def add(el: dict[str, Any], name: str | None = None) -> None:
        if name:
            el.setdefault("id", name)
        elements.append(el)

    def statement(st: ast.stmt) -> None:
        if isinstance(st, ast.Import):
            for a in st.names:
                if a.name not in ("schemdraw", "schemdraw.elements"):
                    raise _reject(st, f"import {a.name}")
                if a.name == "schemdraw.elements" and a.asname:
                    modules.add(a.asname)
            return
        if isinstance(st, ast.ImportFrom):
            if st.module not in ("schemdraw", "schemdraw.elements"):
                raise _reject(st, f"from {st.module} import")
            for a in st.names:
                if st.module == "schemdraw" and a.name == "elements":
                    modules.add(a.asname or "elements")
                elif st.module == "schemdraw.elements":
                    names.add(a.asname or a.name)
            return
        if isinstance(st, ast.With):
            for item in st.items:
                if not _is_drawing(item.context_expr) or not isinstance(item.optional_vars, ast.Name):
                    raise _reject(st, "with ... as d: must open a schemdraw.Drawing()")
                drawings.add(item.optional_vars.id)
            for inner in st.body:
                statement(inner)
            return
        if isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name):
            target, value = st.targets[0].id, st.value
            if _is_drawing(value):
                drawings.add(target)
            elif _is_add(value, drawings):
                add(_element(value.args[0], modules, names), target)  # type: ignore[attr-defined]
            else:
                pending[target] = _element(value, modules, names)
            return
        if isinstance(st, ast.AugAssign) and isinstance(st.op, ast.Add) and isinstance(st.target, ast.Name) \
                and st.target.id in drawings:
            if isinstance(st.value, ast.Name) and st.value.id in pending:
                add(pending.pop(st.value.id), st.value.id)
            else:
                add(_element(st.value, modules, names))
            return
        if isinstance(st, ast.Expr) and isinstance(st.value, ast.Call):
            if _is_add(st.value, drawings):
                arg = st.value.args[0]
                if isinstance(arg, ast.Name) and arg.id in pending:
                    add(pending.pop(arg.id), arg.id)
                else:
                    add(_element(arg, modules, names))
                return
            func = st.value.func
            if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in drawings \
                    and func.attr in IGNORED_CALLS:
                return
        if isinstance(st, ast.Pass):
            return
        raise _reject(st, f"{type(st).__name__} statement")

    for st in tree.body:
        statement(st)
    return elements


def _is_drawing(node: ast.expr) -> bool:
    if not isinstance(node, ast.Call) or node.args:
        return False
    f = node.func
    return (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "schemdraw"
            and f.attr == "Drawing") or (isinstance(f, ast.Name) and f.id == "Drawing")


def _is_add(node: ast.expr, drawings: set[str]) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add"
            and isinstance(node.func.value, ast.Name) and node.func.value.id in drawings and len(node.args) == 1)


def parse_schemdraw_source(code: str) -> Scene:
    return build_scene(schemdraw_source_elements(code), "schemdraw-py")
