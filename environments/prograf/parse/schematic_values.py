"""The values schemdraw drawing code computes, read from its AST, never run: numbers, strings, points
(schemdraw's `Point` arithmetic), anchors, elements made by calls such as `elm.Resistor().right().label('R1')`
(rebuilt as `schematic.py`'s element records), and the drawing stack that reading them moves (schemdraw adds
an element made inside `with Drawing()` as soon as the next one is made or the drawing is read). The
statements that use these values -- imports, `d += ...`, `with`, push / pop -- are read by `schematic_source.py`.
Anything else is refused as "unsupported construct X at line N"."""

from __future__ import annotations

import ast
import math
from typing import Any

from pydantic import JsonValue

from environments.prograf.parse.scene import InputRejected
from environments.prograf.parse.schematic import DIRECTIONS, FREE, Placer, element_kind, number, split_label

# ---------------------------------------------------------------------- Python source, allow-listed
# Element methods and what they set on our element record; the rest of METHODS change only the look.
METHODS = {"right", "left", "up", "down", "length", "at", "to", "tox", "toy", "endpoints", "label", "theta",
           "anchor", "hold", "drop", "reverse", "flip", "color", "fill", "dot", "idot", "scale", "scalex", "scaley",
           "linewidth", "linestyle", "zorder", "style", "shift", "delta"}
LABEL_KWARGS = ("label", "toplabel", "botlabel", "lftlabel", "rgtlabel", "clabel")
MAX_STEPS = 100_000  # statements and expression nodes read (linear in the source, which is capped anyway)
MAX_NESTING = 60  # expressions nested deeper are refused before Python's own recursion limit is near


class SourceRejected(InputRejected):
    pass


def reject(node: ast.AST, why: str) -> SourceRejected:
    line = getattr(node, "lineno", "?")
    try:
        text = ast.unparse(node).split("\n", 1)[0]
    except Exception:  # noqa: BLE001 -- only for the message
        text = type(node).__name__
    text = text if len(text) <= 60 else text[:57] + "..."
    return SourceRejected(f"schemdraw source line {line}: {why}: unsupported construct {text!r} at line {line}"
                          " (only schemdraw drawing code is read, never run)")


def _math_text(label: str) -> str:
    r"""Matplotlib math in a label ($R_1$, $10\,k\Omega$) as the text it shows (R1, 10 kΩ)."""
    if "$" not in label:
        return label
    for tex, plain in (("\\Omega", "Ω"), ("\\mu", "µ"), ("\\omega", "ω"), ("\\cdot", "·"), ("\\,", " "),
                       ("\\;", " "), ("\\ ", " "), ("\\mathrm", ""), ("\\text", ""), ("\\rm", "")):
        label = label.replace(tex, plain)
    return "".join(ch for ch in label if ch not in "${}_^\\")


def _label_text(value: Any) -> str:
    """A label is a string, or a sequence of strings spread along the element (schemdraw's ('+', 'V1', '-')):
    its words without the bare polarity signs."""
    if isinstance(value, (list, tuple)):
        parts = [str(v) for v in value if str(v).strip() not in ("", "+", "-", "−", "–")]
        return " ".join(_math_text(p) for p in parts)
    return _math_text(str(value))


class SPoint(tuple[float, float]):
    """A point as schemdraw makes it (an anchor, `here`, `Point(...)`): unlike a plain tuple it adds, subtracts
    and scales as a vector; Python's own tuple rules still hold for a plain tuple on the left."""


class Elem:
    """An element read from the source, before it is added: its record and, once placed, its name."""

    def __init__(self, record: dict[str, Any], line: int):
        self.record = record
        self.line = line
        self.key: str | None = None  # the name its anchors are kept under, once placed

    @property
    def placed(self) -> bool:
        return self.key is not None


class ValueReader:
    """The state of one drawing being read (the names imported, the drawing's variable, the `Placer`, the
    element made inside `with` and not yet added) and the values its expressions compute. `SourceReader`
    (schematic_source.py) adds the statements."""

    def __init__(self) -> None:
        self.modules: set[str] = set()  # names for schemdraw.elements
        self.names: set[str] = set()  # element classes imported by name
        self.schemdraw: set[str] = set()  # names for the schemdraw package
        self.point_names: set[str] = set()  # schemdraw.util.Point imported by name
        self.drawings: set[str] = set()
        self.in_with = 0  # open `with Drawing()` blocks: elements made there add themselves
        self.placer = Placer()
        self.records: list[dict[str, JsonValue]] = []  # placed: type, label, id and absolute ends
        self.vars: dict[str, Any] = {}
        self.pending: Elem | None = None  # made inside a with block, not yet added
        self.steps = 0
        self.depth = 0
        self.anon = 0

    # -- the drawing stack
    def flush(self) -> None:
        """schemdraw adds the element last made inside `with` before anything that reads or moves the drawing."""
        if self.pending is not None and not self.pending.placed:
            self.place(self.pending)
        self.pending = None

    def place(self, elem: Elem, node: ast.AST | None = None) -> None:
        if elem.placed:
            raise reject(node or ast.Pass(lineno=elem.line), "this element is added twice (inside `with`, schemdraw"
                          " adds an element by itself as soon as the next one is made)")
        record = dict(elem.record)
        self.anon += 1
        text = element_kind(str(record.get("type"))) in FREE  # a Label's (a mark's) text names no element
        key = str(record.get("id") or (not text and split_label(str(record.get("label") or ""))[0]) or f"#src{self.anon}")
        record["id"] = key
        try:
            kind, _, _, start, end = self.placer.add(record, len(self.records))
        except InputRejected as exc:  # the placer names the element by its place in the list: name its line
            why = str(exc).removeprefix(f"element {len(self.records) + 1}: ").removesuffix(": unsupported construct")
            raise SourceRejected(f"schemdraw source line {elem.line}: {why}: unsupported construct"
                                 f" {record.get('type')!r} at line {elem.line}") from None
        elem.key = key
        # pictures re-place these records with `place`: they carry absolute ends, so they land where they did here
        out = {k: v for k, v in record.items() if k in ("type", "label", "value", "id", "shape", "k")}
        out["at"] = list(start)
        if kind not in ("ground", "dot", "text", "mark"):
            out["to"] = list(end)
        self.records.append(out)

    # -- expressions
    def tick(self, node: ast.AST) -> None:
        self.steps += 1
        if self.steps > MAX_STEPS:
            raise reject(node, f"more than {MAX_STEPS} steps to read")

    def value(self, node: ast.expr) -> Any:
        """A number, a string, a point (x, y), a list, an `Elem` or None: the value schemdraw would see."""
        self.tick(node)
        self.depth += 1
        try:
            if self.depth > MAX_NESTING:
                raise reject(node, f"expressions nested deeper than {MAX_NESTING}")
            return self._value(node)
        finally:
            self.depth -= 1

    def _value(self, node: ast.expr) -> Any:
        if isinstance(node, ast.Constant) and (node.value is None or isinstance(node.value, (str, int, float, bool))):
            return node.value
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            v = self.value(node.operand)
            if isinstance(v, bool) or not isinstance(v, (int, float, SPoint)):
                raise reject(node, "a sign before something that is not a number or a Point")
            if node.op.__class__ is ast.UAdd:
                return v
            return SPoint((-v[0], -v[1])) if isinstance(v, SPoint) else -v
        if isinstance(node, ast.BinOp):
            return self.arith(node)
        if isinstance(node, (ast.Tuple, ast.List)):
            items = [self.value(e) for e in node.elts]
            if len(items) == 2 and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in items):
                return (float(items[0]), float(items[1]))
            return items
        if isinstance(node, ast.Name):
            if node.id in self.vars:
                v = self.vars[node.id]
                return v
            raise reject(node, f"{node.id} is not a literal or a name given earlier")
        if isinstance(node, ast.Attribute):
            return self.attribute(node)
        if isinstance(node, ast.Subscript):
            base = self.value(node.value)
            key = self.value(node.slice)
            if isinstance(base, Elem) and isinstance(key, str):
                return self.elem_anchor(base, key, node)
            if isinstance(base, tuple) and len(base) == 2 and key in (0, 1, -1, -2) and not isinstance(key, bool):
                return base[key]
            raise reject(node, "only a point's [0] / [1] or an element's ['anchor'] is read")
        if isinstance(node, ast.Call):
            f = node.func
            is_point = (isinstance(f, ast.Name) and f.id in self.point_names) or (
                isinstance(f, ast.Attribute) and f.attr == "Point" and isinstance(f.value, ast.Attribute)
                and f.value.attr == "util" and isinstance(f.value.value, ast.Name) and f.value.value.id in self.schemdraw)
            if is_point and len(node.args) == 1 and not node.keywords:
                p = self.value(node.args[0])
                if isinstance(p, tuple):
                    return SPoint(p)
            if self.looks_like_element(node):
                return self.element(node)
        raise reject(node, f"{type(node).__name__} is not a literal or NAME.start/end")

    def arith(self, node: ast.BinOp) -> Any:
        a, b = self.value(node.left), self.value(node.right)
        op = type(node.op)
        num = (int, float)
        if isinstance(a, bool) or isinstance(b, bool) or op not in (ast.Add, ast.Sub, ast.Mult, ast.Div):
            raise reject(node, "only + - * / on numbers and points are read")
        if isinstance(a, num) and isinstance(b, num):
            return _ops(op, float(a), float(b), node)
        # schemdraw's Point: with another Point it works per coordinate, with a number on both coordinates; a
        # plain tuple only meets it on the left of + (Python then asks the Point); the rest fails in schemdraw too
        if isinstance(a, SPoint) and isinstance(b, SPoint) or (isinstance(b, SPoint) and isinstance(a, tuple)
                                                              and op is ast.Add):
            return SPoint((_ops(op, a[0], b[0], node), _ops(op, a[1], b[1], node)))
        if isinstance(a, SPoint) and isinstance(b, num):
            return SPoint((_ops(op, a[0], float(b), node), _ops(op, a[1], float(b), node)))
        if isinstance(a, num) and isinstance(b, SPoint) and op in (ast.Add, ast.Mult, ast.Sub):
            return SPoint((_ops(op, float(a), b[0], node), _ops(op, float(a), b[1], node)))
        raise reject(node, "arithmetic schemdraw cannot do (a point is Point((x, y)) or an anchor)")

    def attribute(self, node: ast.Attribute) -> Any:
        base = node.value
        if isinstance(base, ast.Name) and base.id in self.drawings:
            if node.attr == "here":
                self.flush()
                return SPoint(self.placer.here)
            if node.attr == "theta":
                self.flush()
                return self.placer.theta
            if node.attr == "unit":
                return self.placer.unit
            if node.attr in self.placer.anchors.get("<drawing>", {}):
                return SPoint(self.placer.anchors["<drawing>"][node.attr])
            raise reject(node, f"the drawing has no {node.attr!r}")
        v = self.value(base)
        if isinstance(v, Elem):
            return self.elem_anchor(v, node.attr, node)
        if isinstance(v, SPoint) and node.attr in ("x", "y"):
            return v[0] if node.attr == "x" else v[1]
        raise reject(node, "only an element's anchor, a point's x / y or the drawing's here / theta / unit is read")

    def elem_anchor(self, elem: Elem, anchor: str, node: ast.AST) -> tuple[float, float]:
        if not elem.placed:
            if elem is self.pending:  # schemdraw adds an element made inside `with` when an anchor of it is read
                self.flush()
            else:
                raise reject(node, "an anchor of an element that is not in the drawing yet")
        assert elem.key is not None
        return SPoint(self.placer.anchor(elem.key, anchor, f"schemdraw source line {getattr(node, 'lineno', '?')}"))

    def looks_like_element(self, node: ast.expr) -> bool:
        while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in METHODS:
            node = node.func.value
        if not isinstance(node, ast.Call):
            return False
        f = node.func
        return (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id in self.modules) or (
            isinstance(f, ast.Name) and f.id in self.names) or (
            isinstance(f, ast.Attribute) and isinstance(f.value, ast.Attribute) and f.value.attr == "elements"
            and isinstance(f.value.value, ast.Name) and f.value.value.id in self.schemdraw)

    def operand(self, node: ast.expr) -> Elem:
        """What `d += X` / `d.add(X)` adds: an element named earlier, or one made here."""
        named = self.vars.get(node.id) if isinstance(node, ast.Name) else None
        return named if isinstance(named, Elem) else self.element(node)

    def element(self, node: ast.expr) -> Elem:
        """`elm.Resistor().right().label('R1')` -> an Elem with {"type": "Resistor", "d": "right", "label": "R1"}."""
        chain: list[tuple[ast.Call, str]] = []  # each method call, outermost first, and its name
        while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in METHODS:
            chain.append((node, node.func.attr))
            node = node.func.value
        if isinstance(node, ast.Name) and node.id in self.vars and isinstance(self.vars[node.id], Elem) and chain:
            raise reject(node, "methods on an element after it was made")
        if not isinstance(node, ast.Call):
            raise reject(node, "expected an element such as elm.Resistor()")
        func = node.func
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in self.modules:
            type_name = func.attr
        elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Attribute) and func.value.attr == "elements" \
                and isinstance(func.value.value, ast.Name) and func.value.value.id in self.schemdraw:
            type_name = func.attr
        elif isinstance(func, ast.Name) and func.id in self.names:
            type_name = func.id
        else:
            raise reject(node, "an element is elm.TYPE(...) from schemdraw.elements")
        try:
            kind = element_kind(type_name)
        except InputRejected as exc:
            raise reject(node, str(exc).removeprefix("unsupported construct: ")) from None
        if self.in_with:  # making an element adds the one made before it
            self.flush()
        el: dict[str, Any] = {"type": type_name}
        labels: list[str] = []
        unit: Any = None
        for k, a in enumerate(node.args):  # positional arguments change the look only, but a Label's text
            v = self.value(a)  # and a Wire's shape and k
            if k == 0 and kind == "text" and isinstance(v, (str, list)):
                labels.append(_label_text(v))
            elif k < 2 and type_name.lower() == "wire":
                el[("shape", "k")[k]] = v
        for kw in node.keywords:
            if kw.arg is None:
                raise reject(node, "** arguments are not read")
            v = self.value(kw.value)
            if kw.arg in LABEL_KWARGS and v is not None:
                labels.append(_label_text(v))
            elif kw.arg in ("d", "l", "theta", "to", "tox", "toy", "anchor", "shape", "k", "delta", "drop"):
                el[kw.arg] = v
            elif kw.arg in ("at", "xy"):
                el["at"] = v
            elif kw.arg == "endpts":
                el["endpoints"] = v
            elif kw.arg == "unit":  # a two-terminal's length falls back to its own unit (schemdraw's params)
                unit = v
            elif kw.arg == "move_cur" and v is not True:  # what .hold() sets (a `hold=True` argument sets nothing)
                if v is not False:
                    raise reject(node, f"move_cur={v!r}")
                el["hold"] = True
            elif kw.arg == "extend" and v is not True:
                raise reject(node, f"extend={v!r} (a part's length without its leads is not read)")
        for call, method in reversed(chain):
            args = [self.value(a) for a in call.args]
            kwargs = {kw.arg: self.value(kw.value) for kw in call.keywords if kw.arg is not None}
            if any(kw.arg is None for kw in call.keywords):
                raise reject(call, "** arguments are not read")
            if method in DIRECTIONS:
                el["d"] = method
                length = args[0] if args else kwargs.get("length")
                if length:  # schemdraw: a zero or missing length keeps the default
                    el["l"] = length
            elif method == "theta" and args:  # schemdraw lets a direction (d) win over theta, in any order
                el["theta"] = args[0]
            elif method == "length" and args:
                el["l"] = args[0]
            elif method in ("at", "to"):
                point = args[0] if args else kwargs.get("xy")
                if isinstance(point, list) and len(point) == 2 and isinstance(point[0], Elem):  # (R1, 'end')
                    point = self.elem_anchor(point[0], str(point[1]), call)
                elif isinstance(point, Elem) and method == "at" and kind == "mark":  # a current arrow over R1
                    point = self.elem_anchor(point, "center", call)
                where = f"line {call.lineno}"
                dx = number(kwargs.get("dx", args[1] if len(args) > 1 else 0), where, "dx")
                dy = number(kwargs.get("dy", args[2] if len(args) > 2 else 0), where, "dy")
                if not isinstance(point, tuple):
                    raise reject(call, f".{method}() needs a point (x, y) or an anchor such as R1.end")
                el[method] = [point[0] + dx, point[1] + dy]
            elif method in ("tox", "toy") and args:
                target = args[0]
                if not isinstance(target, (tuple, int, float)) or isinstance(target, bool):
                    raise reject(call, f".{method}() needs a number or a point")
                el[method] = list(target) if isinstance(target, tuple) else target
            elif method == "endpoints" and len(args) == 2:
                if not all(isinstance(a, tuple) for a in args):
                    raise reject(call, ".endpoints() needs two points")
                el["endpoints"] = [list(args[0]), list(args[1])]
            elif method == "anchor" and args:
                el["anchor"] = args[0]
            elif method == "delta":  # Wire, Annotate: the end relative to the start
                where = f"line {call.lineno}"
                el["delta"] = [number(kwargs.get("dx", args[0] if args else 0), where, "dx"),
                               number(kwargs.get("dy", args[1] if len(args) > 1 else 0), where, "dy")]
            elif method == "drop" and args:  # read where schemdraw reads it (Wire, Annotate); a part's end wins
                el["drop"] = args[0]
            elif method == "hold":
                el["hold"] = True
            elif method == "label" and args:
                labels.append(_label_text(args[0]))
        if unit is not None and "l" not in el:
            el["l"] = unit
        if labels:
            el["label"] = " ".join(t for t in labels if t.strip())
        return Elem(el, getattr(node, "lineno", 0))


def _ops(op: type, a: float, b: float, node: ast.AST) -> float:
    if op is ast.Add:
        r = a + b
    elif op is ast.Sub:
        r = a - b
    elif op is ast.Mult:
        r = a * b
    else:
        if b == 0:
            raise reject(node, "division by zero")
        r = a / b
    if not math.isfinite(r) or abs(r) > 1e6:
        raise reject(node, "a number out of range")
    return r
