"""Schemdraw Python source read through an AST allow-list: never executed, never imported; each
allowed call (elements, their placement methods, the drawing's state: push/pop, hold, here, move,
anchors, unit) is rebuilt as one of `schematic.py`'s element records and placed as schemdraw would.
Anything else is refused as "unsupported construct X at line N"."""

from __future__ import annotations

import ast
from typing import Any, TypeGuard

from pydantic import JsonValue

from environments.prograf.parse.scene import InputRejected, Scene
from environments.prograf.parse.schematic import finite, number, scene_of
from environments.prograf.parse.schematic_values import Elem, ValueReader, reject

DRAWING_NOOPS = {"draw", "save", "show", "interactive", "add_svgdef"}


class SourceReader(ValueReader):
    """Reads schemdraw Python as schemdraw would run it -- `d += ...`, `d.add(...)`, elements made inside
    `with Drawing() as d:` added by themselves (schemdraw's drawing stack), `push`/`pop`, `here`,
    `move`, `move_from`, `theta`, `unit`, `with d.hold():`, anchors, point arithmetic -- and places
    every element through one `Placer`. Nothing is executed or imported; any other construct is an
    "unsupported construct" error naming its line."""

    # -- statements
    def add(self, value: Any, node: ast.AST) -> Elem:
        if not isinstance(value, Elem):
            raise reject(node, "only an element is added to the drawing")
        if self.pending is not None and self.pending is not value:
            self.flush()
        self.place(value, node)
        if self.pending is value:
            self.pending = None
        return value

    def made(self, elem: Elem) -> None:
        """An element just made: inside `with` it is added by itself unless the user adds it first."""
        if self.in_with:
            self.pending = elem

    def statement(self, st: ast.stmt) -> None:
        self.tick(st)
        if isinstance(st, ast.Import):
            for a in st.names:
                if a.name not in ("schemdraw", "schemdraw.elements"):
                    raise reject(st, f"import {a.name}")
                if a.name == "schemdraw.elements" and a.asname:
                    self.modules.add(a.asname)
                else:
                    self.schemdraw.add("schemdraw")
            return
        if isinstance(st, ast.ImportFrom):
            if st.module not in ("schemdraw", "schemdraw.elements", "schemdraw.util"):
                raise reject(st, f"from {st.module} import")
            for a in st.names:
                if st.module == "schemdraw" and a.name == "elements":
                    self.modules.add(a.asname or "elements")
                elif st.module == "schemdraw" and a.name == "Drawing":
                    self.names.add("<Drawing>")
                elif st.module == "schemdraw.elements":
                    if a.name == "*":
                        raise reject(st, "import *")
                    self.names.add(a.asname or a.name)
                elif st.module == "schemdraw.util" and a.name == "Point":
                    self.point_names.add(a.asname or a.name)
                else:
                    raise reject(st, f"from {st.module} import {a.name}")
            return
        if isinstance(st, ast.With):
            self.with_block(st)
            return
        if isinstance(st, ast.Assign) and len(st.targets) == 1:
            self.assign(st.targets[0], st.value, st)
            return
        if isinstance(st, ast.AnnAssign) and st.value is not None and st.simple:
            self.assign(st.target, st.value, st)
            return
        if isinstance(st, ast.AugAssign) and isinstance(st.op, ast.Add) and isinstance(st.target, ast.Name) \
                and st.target.id in self.drawings:
            self.add(self.operand(st.value), st)
            return
        if isinstance(st, ast.Expr) and isinstance(st.value, ast.Constant) and isinstance(st.value.value, str):
            return  # a docstring
        if isinstance(st, ast.Expr) and isinstance(st.value, ast.Call):
            self.call(st.value, st)
            return
        if isinstance(st, ast.Pass):
            return
        raise reject(st, f"{type(st).__name__} statement")

    def with_block(self, st: ast.With) -> None:
        if len(st.items) != 1:
            raise reject(st, "one drawing per with statement")
        item = st.items[0]
        expr = item.context_expr
        if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr == "hold" \
                and isinstance(expr.func.value, ast.Name) and expr.func.value.id in self.drawings and not expr.args:
            self.flush()  # `with d.hold():` is push ... pop around its body
            self.placer.push()
            for inner in st.body:
                self.statement(inner)
            self.flush()
            self.placer.pop()
            return
        if not self.is_drawing(expr) or not isinstance(item.optional_vars, ast.Name):
            raise reject(st, "with ... as d: must open a schemdraw.Drawing()")
        if self.drawings:
            raise reject(st, "a second drawing")
        self.drawings.add(item.optional_vars.id)
        self.drawing_options(expr)
        self.in_with += 1
        for inner in st.body:
            self.statement(inner)
        self.flush()
        self.in_with -= 1

    def assign(self, target: ast.expr, value_node: ast.expr, st: ast.stmt) -> None:
        if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id in self.drawings:
            v = self.value(value_node)
            self.flush()
            if target.attr == "here" and isinstance(v, tuple):
                self.placer.here = finite(v, f"line {st.lineno}")
            elif target.attr == "theta" and isinstance(v, (int, float)) and not isinstance(v, bool):
                self.placer.theta = float(v)
            elif target.attr == "unit" and isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v <= 100:
                self.placer.unit = float(v)
            else:
                raise reject(st, f"setting the drawing's {target.attr}")
            return
        if not isinstance(target, ast.Name):
            raise reject(st, "assignment to something other than a name")
        if self.is_drawing(value_node):
            if self.drawings:
                raise reject(st, "a second drawing")
            self.drawings.add(target.id)
            self.drawing_options(value_node)
            return
        if self.is_add(value_node):
            elem = self.add(self.operand(value_node.args[0]), st)
            elem.record.setdefault("id", target.id)
            if elem.key is not None and elem.key != target.id:  # the name it was given is the one code refers to
                self.placer.anchors[target.id] = self.placer.anchors[elem.key]
            self.vars[target.id] = elem
            return
        v = self.value(value_node)
        if isinstance(v, Elem):
            v.record.setdefault("id", target.id)
            self.made(v)
        self.vars[target.id] = v

    def call(self, node: ast.Call, st: ast.stmt) -> None:
        f = node.func
        if self.is_add(node):
            self.add(self.operand(node.args[0]), st)
            return
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id in self.drawings:
            args = [self.value(a) for a in node.args]
            kwargs = {kw.arg: self.value(kw.value) for kw in node.keywords if kw.arg is not None}
            if f.attr in DRAWING_NOOPS:
                return
            self.flush()
            if f.attr == "push" and not args:
                self.placer.push()
            elif f.attr == "pop" and not args:
                self.placer.pop()
            elif f.attr == "move":
                dx = number(kwargs.get("dx", args[0] if args else 0), f"line {st.lineno}", "dx")
                dy = number(kwargs.get("dy", args[1] if len(args) > 1 else 0), f"line {st.lineno}", "dy")
                self.placer.here = finite((self.placer.here[0] + dx, self.placer.here[1] + dy), f"line {st.lineno}")
            elif f.attr == "move_from" and args and isinstance(args[0], tuple):
                dx = number(kwargs.get("dx", args[1] if len(args) > 1 else 0), f"line {st.lineno}", "dx")
                dy = number(kwargs.get("dy", args[2] if len(args) > 2 else 0), f"line {st.lineno}", "dy")
                self.placer.here = finite((args[0][0] + dx, args[0][1] + dy), f"line {st.lineno}")
                theta = kwargs.get("theta", args[3] if len(args) > 3 else None)
                if theta is not None:
                    self.placer.theta = number(theta, f"line {st.lineno}", "theta")
            elif f.attr == "set_anchor" and len(args) == 1 and isinstance(args[0], str):
                self.placer.anchors.setdefault("<drawing>", {})[args[0]] = self.placer.here
            elif f.attr == "config":
                self.drawing_options(node)
            else:
                raise reject(st, f"drawing method {f.attr}")
            return
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id in self.schemdraw \
                and f.attr in ("use", "config", "theme", "debug"):
            for a in node.args:
                self.value(a)
            if f.attr == "config":
                self.drawing_options(node)
            return
        if self.in_with and self.looks_like_element(node):  # a bare element: inside `with` it adds itself
            self.made(self.element(node))
            return
        raise reject(st, "Expr statement")

    def drawing_options(self, call: ast.Call) -> None:
        for kw in call.keywords:
            if kw.arg is None:
                raise reject(call, "** arguments are not read")
            v = self.value(kw.value)
            if kw.arg == "unit":
                if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v <= 100:
                    raise reject(call, "unit must be a number between 0 and 100")
                self.placer.unit = float(v)

    def is_drawing(self, node: ast.expr) -> TypeGuard[ast.Call]:
        if not isinstance(node, ast.Call) or node.args:
            return False
        f = node.func
        return (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id in self.schemdraw
                and f.attr == "Drawing") or (isinstance(f, ast.Name) and f.id == "Drawing" and "<Drawing>" in self.names)

    def is_add(self, node: ast.expr) -> TypeGuard[ast.Call]:
        return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add"
                and isinstance(node.func.value, ast.Name) and node.func.value.id in self.drawings and len(node.args) == 1)


def schemdraw_source_elements(code: str) -> list[dict[str, JsonValue]]:
    """The elements of schemdraw Python, each with its absolute `at` / `to` (as placed by `SourceReader`)."""
    return _read_source(code).records


def _read_source(code: str) -> SourceReader:
    if len(code) > 50_000:
        raise InputRejected("schemdraw source over 50000 characters")
    try:
        tree = ast.parse(code)
    except SyntaxError as exc:
        raise InputRejected(f"schemdraw source does not parse: {exc.msg} (line {exc.lineno})") from None
    except (RecursionError, MemoryError):  # Python's own parser gives up on very deep expressions
        raise InputRejected("schemdraw source nested too deeply to read") from None
    reader = SourceReader()
    for st in tree.body:
        reader.statement(st)
    reader.flush()
    return reader


def parse_schemdraw_source(code: str) -> Scene:
    # the reader has placed every element already: its placements are the scene's (no second pass)
    return scene_of(_read_source(code).placer.out, "schemdraw-py")
