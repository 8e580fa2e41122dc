"""Circuits written a second way (issue 39, the foreign-style corpus), and their one-fault variants.

Not `emit.py`'s bus layout (vertical buses, horizontal parts, absolute `at`/`to`): here nets are
horizontal rails, the ground rail at the bottom, and each part stands vertically in a column of its
own from one rail to the other, placed with `.at(...)` and a direction with `.toy(...)` or a length;
rails are wires run with `.right().tox(...)` (or, in the `pushpop` style, built left to right with
`d.push()` / `d.pop()` around each hanging part). A single loop is drawn the way people draw one:
the source up, the parts along the top and down the right, a wire back along the bottom closed with
`.tox(V1.start)`, the ground put `.at(...)` an element's anchor. Labels as 'R1\\n10kΩ', two
`.label()` calls, a `label=` keyword or math text ($R_1$); `d.add(...)` or `d += ...`, a
`with` block or `d = schemdraw.Drawing()` with `d.draw()`. The JSON writer says the same with `d`
and `l`, element ids and "NAME.end" anchors.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass

from environments.prograf.task import CircuitSpec, Task

ELEMENT = {
    "resistor": ["Resistor", "ResistorIEC"],
    "capacitor": ["Capacitor"],
    "inductor": ["Inductor2", "Inductor"],
    "voltage_source": ["SourceV", "Battery"],
    "current_source": ["SourceI"],
    "diode": ["Diode"],
    "led": ["LED"],
    "lamp": ["Lamp"],
    "switch": ["Switch"],
    "fuse": ["Fuse"],
}


@dataclass(frozen=True)
class P:
    id: str
    kind: str
    value: str | None
    nets: tuple[str, str]


@dataclass
class Circuit:
    parts: list[P]
    ground: str | None


def circuit_of(spec: CircuitSpec) -> Circuit:
    return Circuit([P(p.id, p.kind, p.value, p.nets) for p in spec.parts], spec.ground)


def faults(task: Task, kind: str, rng: random.Random) -> tuple[Circuit, str, str] | None:
    spec = task.spec
    assert isinstance(spec, CircuitSpec)
    c = circuit_of(spec)
    vp_of = {(vp.check, tuple(vp.args)): vp.id for vp in task.points}
    if kind == "missing_object":
        gone = rng.choice(c.parts)
        return (
            Circuit([p for p in c.parts if p != gone], c.ground),
            vp_of[("component", (gone.id,))],
            f"{gone.id} left out",
        )
    if kind == "wrong_relation":
        series = [vp for vp in task.points if vp.check == "series"]
        parallel = [vp for vp in task.points if vp.check == "parallel_parts"]
        if series:
            vp = rng.choice(series)
            a = next(p for p in c.parts if p.id == vp.args[0])
            parts = [P(p.id, p.kind, p.value, a.nets) if p.id == vp.args[1] else p for p in c.parts]
            return Circuit(parts, c.ground), vp.id, f"{vp.args[1]} put across {vp.args[0]} instead of in series with it"
        if parallel:
            vp = rng.choice(parallel)
            b = next(p for p in c.parts if p.id == vp.args[1])
            others = sorted({n for p in c.parts for n in p.nets} - set(b.nets))
            if others:
                parts = [P(p.id, p.kind, p.value, (b.nets[0], others[0])) if p.id == b.id else p for p in c.parts]
                return Circuit(parts, c.ground), vp.id, f"{b.id} moved from {vp.args[0]}'s nodes to another node"
        topo = next(vp.id for vp in task.points if vp.check == "topology")
        for p in c.parts:
            others = sorted({n for q in c.parts for n in q.nets} - set(p.nets))
            if others:
                parts = [P(q.id, q.kind, q.value, (q.nets[0], others[0])) if q.id == p.id else q for q in c.parts]
                return Circuit(parts, c.ground), topo, f"{p.id} reconnected to another node"
        return None
    if kind == "broken_connection":
        p = rng.choice(c.parts)
        target = next(vp.id for vp in task.points if vp.check == "no_open")
        parts = [P(q.id, q.kind, q.value, (q.nets[0], "open")) if q.id == p.id else q for q in c.parts]
        return Circuit(parts, c.ground), target, f"{p.id}'s second terminal left unconnected"
    if kind == "extra_element":
        like = rng.choice(c.parts)
        letter = like.id.rstrip("0123456789")
        taken = {p.id for p in c.parts}
        name = next(f"{letter}{k}" for k in range(2, 99) if f"{letter}{k}" not in taken)
        target = next(vp.id for vp in task.points if vp.check == "component_count")
        return (
            Circuit(c.parts + [P(name, like.kind, like.value, like.nets)], c.ground),
            target,
            f"an extra {like.kind} {name}",
        )
    raise ValueError(f"unknown fault kind {kind!r}")


# ---------------------------------------------------------------------- layout
def _loop(c: Circuit) -> list[tuple[P, str, str]] | None:
    """The parts in ring order with the net each enters and leaves by, if the circuit is one loop."""
    nets: dict[str, list[P]] = {}
    for p in c.parts:
        if p.nets[0] == p.nets[1]:
            return None
        for n in p.nets:
            nets.setdefault(n, []).append(p)
    if len(c.parts) < 2 or any(len(v) != 2 for v in nets.values()):
        return None
    first = next((p for p in c.parts if p.kind in ("voltage_source", "current_source")), c.parts[0])
    ring = [(first, first.nets[0], first.nets[1])]
    while len(ring) < len(c.parts):
        p, _, out = ring[-1]
        q = next(x for x in nets[out] if x is not p)
        if q is first:
            return None
        ring.append((q, out, q.nets[1] if q.nets[0] == out else q.nets[0]))
    if ring[-1][2] != first.nets[0]:
        return None
    return ring


@dataclass
class Placed:
    part: P
    x: float
    y0: float  # the rail it starts on
    y1: float  # the rail it ends on


def rails(c: Circuit) -> tuple[dict[str, float], list[Placed], dict[str, tuple[float, float]]]:
    """Net -> rail height (ground lowest), each part's column, each rail's extent."""
    order: list[str] = [c.ground] if c.ground else []
    for p in c.parts:
        for n in p.nets:
            if n not in order:
                order.append(n)
    y = {n: 2.5 * i for i, n in enumerate(order)}
    placed = []
    for k, p in enumerate(c.parts):
        a, b = sorted(p.nets, key=lambda n: y[n])
        placed.append(Placed(p, 2.0 + 2.5 * k, y[a], y[b]))
    extent: dict[str, tuple[float, float]] = {}
    for pl in placed:
        for n in pl.part.nets:
            lo, hi = extent.get(n, (pl.x, pl.x))
            extent[n] = (min(lo, pl.x), max(hi, pl.x))
    if c.ground:
        lo, hi = extent.get(c.ground, (0.0, 0.0))
        extent[c.ground] = (min(lo, 0.0), hi)
    return y, placed, extent


def _num(v: float) -> str:
    return f"{v:.2f}".rstrip("0").rstrip(".") or "0"


class Py:
    """Python source in one of the code styles."""

    def __init__(self, style: int, rng: random.Random):
        self.style = style
        self.rng = rng
        self.lines = ["import schemdraw", "import schemdraw.elements as elm", ""]
        if style % 2 == 0:
            self.lines += ["with schemdraw.Drawing() as d:", "    d.config(fontsize=12)"]
            self.ind = "    "
        else:
            self.lines += ["d = schemdraw.Drawing(unit=2.5)"]
            self.ind = ""

    def elem(self, p: P | None) -> str:
        if p is None:
            return "elm.Line()"
        name = ELEMENT[p.kind][self.rng.randrange(len(ELEMENT[p.kind]))]
        return f"elm.{name}()"

    def label(self, p: P) -> str:
        value = p.value or ""
        if self.style == 0:
            return f".label({(p.id + chr(10) + value).strip()!r})" if value else f".label({p.id!r})"
        if self.style == 1:
            return f".label({p.id!r}, loc='top')" + (f".label({value!r}, loc='bottom')" if value else "")
        if self.style == 2:
            digits = p.id.lstrip("ABCDEFGHIJKLMNOPQRSTUVWXYZ")
            tex = f"${p.id[: len(p.id) - len(digits)]}_{{{digits}}}$" if digits else p.id
            return f".label({(tex + ' ' + value).strip()!r})"
        return ""  # style 3: the label= keyword, see add()

    def add(self, call: str, p: P | None = None, name: str | None = None) -> None:
        if p is not None and self.style == 3:
            text = f"{p.id} {p.value or ''}".strip()
            call = call.replace("()", f"(label={text!r})", 1)
        elif p is not None:
            call += self.label(p)
        if name:
            self.lines.append(f"{self.ind}{name} = d.add({call})")
        elif self.style in (0, 2):
            self.lines.append(f"{self.ind}d += {call}")
        else:
            self.lines.append(f"{self.ind}d.add({call})")

    def raw(self, text: str) -> None:
        self.lines.append(self.ind + text)

    def done(self) -> str:
        if self.style % 2 == 1:
            self.lines += ["", "d.draw()"]
        return "\n".join(self.lines) + "\n"


def write_py(c: Circuit, style: int, rng: random.Random) -> str:
    ring = _loop(c)
    if ring is not None and style != 1:
        return _loop_py(c, ring, style, rng)
    if style == 1:
        return _pushpop_py(c, rng)
    py = Py(style, rng)
    y, placed, extent = rails(c)
    for pl in placed:
        top = pl.y1 - (0.6 if "open" in pl.part.nets else 0.0)
        py.add(f"{py.elem(pl.part)}.at(({_num(pl.x)}, {_num(pl.y0)})).up().toy({_num(top)})", pl.part)
    for net, (lo, hi) in extent.items():
        if net != "open" and hi > lo:
            py.add(f"elm.Line().at(({_num(lo)}, {_num(y[net])})).right().tox({_num(hi)})")
            if style == 2:  # a junction dot where a part meets the rail inside it
                for pl in placed:
                    if net in pl.part.nets and lo < pl.x < hi:
                        py.add(f"elm.Dot().at(({_num(pl.x)}, {_num(y[net])}))")
    if c.ground:
        py.add(f"elm.Ground().at((0, {_num(y[c.ground])}))")
    return py.done()


def _pushpop_py(c: Circuit, rng: random.Random) -> str:
    """Each rail walked left to right; a part starting on it is hung from the cursor between
    d.push() and d.pop(), so the walk goes on from where the part was put."""
    py = Py(1, rng)
    y, placed, extent = rails(c)
    for net in sorted(extent, key=lambda n: y[n]):
        if net == "open":
            continue
        lo, hi = extent[net]
        here: float | None = None
        stops = sorted({pl.x for pl in placed if pl.y0 == y[net]} | {hi})
        for x in stops:
            if here is None:
                py.add(
                    f"elm.Line().at(({_num(lo)}, {_num(y[net])})).right().tox({_num(x)})"
                    if x > lo
                    else f"elm.Dot().at(({_num(x)}, {_num(y[net])}))"
                )
            elif x > here:
                py.add(f"elm.Line().right().tox({_num(x)})")
            here = x
            for pl in placed:
                if pl.x == x and pl.y0 == y[net]:
                    length = pl.y1 - pl.y0 - (0.6 if "open" in pl.part.nets else 0.0)
                    py.raw("d.push()")
                    py.add(f"{py.elem(pl.part)}.up({_num(length)})", pl.part)
                    py.raw("d.pop()")
        if net == c.ground:
            py.add(f"elm.Ground().at(({_num(lo)}, {_num(y[net])}))")
    return py.done()


def _loop_py(c: Circuit, ring: list[tuple[P, str, str]], style: int, rng: random.Random) -> str:
    """Source up the left, parts right along the top, the last part down the right, a wire home."""
    py = Py(style, rng)
    names = [f"E{i}" for i in range(len(ring))]
    n = len(ring)
    for i, (p, _, _) in enumerate(ring):
        if "open" in p.nets:
            raise ValueError("a loop has no open terminal")
        if i == 0:
            py.add(f"{py.elem(p)}.up()", p, names[i])
        elif i < n - 1:
            py.add(f"{py.elem(p)}.right()", p, names[i])
        else:
            if n == 2:
                py.add("elm.Line().right()")
            py.add(f"{py.elem(p)}.down()", p, names[i])
    py.add(f"elm.Line().left().tox({names[0]}.start)")
    if c.ground:
        k = next(i for i, (_, _, out) in enumerate(ring) if out == c.ground)
        py.add(f"elm.Ground().at({names[k]}.end)")
    return py.done()


def write_json(c: Circuit, style: int, rng: random.Random) -> str:
    """The same layouts as element records: d and l, ids and "NAME.end" anchors, labels as one string."""
    elements: list[dict[str, object]] = []

    def part(p: P, **placement: object) -> dict[str, object]:
        name = ELEMENT[p.kind][rng.randrange(len(ELEMENT[p.kind]))]
        label = f"{p.id} {p.value}" if p.value else p.id
        el: dict[str, object] = {"type": name, "id": p.id, "label": label}
        el.update(placement)
        return el

    ring = _loop(c)
    if ring is not None and style % 2 == 0:
        for i, (p, _, _) in enumerate(ring):
            d = "up" if i == 0 else "right" if i < len(ring) - 1 else "down"
            if i == len(ring) - 1 and len(ring) == 2:
                elements.append({"type": "Line", "d": "right"})
            elements.append(part(p, d=d))
        first = ring[0][0].id
        elements.append({"type": "Line", "d": "left", "to": f"{first}.start"})
        if c.ground:
            k = next(i for i, (_, _, out) in enumerate(ring) if out == c.ground)
            elements.append({"type": "Ground", "at": f"{ring[k][0].id}.end"})
    else:
        y, placed, extent = rails(c)
        for pl in placed:
            dangling = "open" in pl.part.nets
            length = pl.y1 - pl.y0 - (0.6 if dangling else 0.0)
            if dangling and pl.part.nets[0] == "open":
                elements.append(part(pl.part, at=[pl.x, pl.y1], d="down", l=round(length, 3)))
            else:
                elements.append(part(pl.part, at=[pl.x, pl.y0], d="up", l=round(length, 3)))
        for net, (lo, hi) in extent.items():
            if net != "open" and hi > lo:
                elements.append({"type": "Line", "at": [lo, y[net]], "to": [hi, y[net]]})
        if c.ground:
            elements.append({"type": "Ground", "at": [0, y[c.ground]]})
    if style == 1:
        return json.dumps(elements, ensure_ascii=False)
    return json.dumps({"elements": elements}, ensure_ascii=False, indent=2)


STYLES = (0, 1, 2, 3)
