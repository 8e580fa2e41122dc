"""The prompt-derived checker: the loop's checks read from the task's prompt alone, never from its
hidden points.

`read_prompt(task)` looks only at `task.prompt` (and the id, category and allowed formats, which a
generator is told too). Our own deterministic parser reads the prompt back into what the
generators' templates wrote it from -- a geometry figure (named points, segments, circles, facts,
given lengths), a circuit (parts, values and, where the prompt gives it, the topology) or a graph
(nodes, roles, groups, arrows and their labels, forbidden arrows) -- and hands that to the SAME
builder that turned the generator's figure into the hidden points (`generate/builders.py`). So a check means
exactly what the hidden point of the same fact means; only what the prompt does not say is
missing. The templates are ours, so their phrasing is known; hand-written prompts use freer
wording and yield fewer checks (the coverage report says how many).

A figure read from a geometry prompt has no coordinates; the builder is given points on a circle,
which only its (discarded) reference drawing uses -- the checks work up to similarity and never read
coordinates.

`PromptChecks` is what `verify()` runs on (the same verifier, the derived spec and points).
`coverage` and `agreement` measure the checker against the hidden points: the share of hidden
points it recovers, per category, and its verdicts against the hidden verifier's on every
reference and structural mutant (precision/recall of "this output is wrong").
"""

from __future__ import annotations

import ast
import math
import random
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, TypedDict

from environments.prograf.check.verify import verify
from environments.prograf.generate.builders import KIND_WORDS, ROLE_WORDS, GeoFigure, circuit_task, geometry_task, graph_task
from environments.prograf.generate.circuit import assign
from environments.prograf.generate.emit import CircuitPart, GraphDrawing
from environments.prograf.task import CATEGORIES, CircuitSpec, GeometrySpec, GraphSpec, Spec, Task, VerificationPoint

# ---------------------------------------------------------------------- what verify() runs on


@dataclass(frozen=True)
class PromptChecks:
    """The checks one prompt yields: duck-types the parts of a Task that `verify()` reads."""

    id: str
    category: str
    formats: list[str]
    spec: Spec
    points: list[VerificationPoint]


def read_prompt(task: Task) -> PromptChecks:
    """The checks the prompt of `task` states (cached per prompt: a pure function of it)."""
    return _read(task.id, task.category, task.source, tuple(task.formats), task.prompt)


@lru_cache(maxsize=1024)
def _read(task_id: str, category: str, source: str, formats: tuple[str, ...], prompt: str) -> PromptChecks:
    reader = {"geometry": read_geometry, "circuit": read_circuit}.get(category, read_graph)
    derived = reader(task_id, category, source, prompt)
    if derived is None:
        return PromptChecks(task_id, category, list(formats), _empty_spec(category), [])
    spec, points = derived
    return PromptChecks(task_id, category, list(formats), spec, points)


def _empty_spec(category: str) -> Spec:
    if category == "geometry":
        return GeometrySpec(points={})
    if category == "circuit":
        return CircuitSpec(parts=[])
    return GraphSpec(title="", nodes=[], edges=[])


Derived = tuple[Spec, list[VerificationPoint]] | None


# ---------------------------------------------------------------------- graphs (flowcharts, diagrams)
ROLE_OF_WORDS = {words: role for role, words in ROLE_WORDS.items()}
STRING = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"")
EDGE_LINE = re.compile(r'^- "(?P<a>.+?)" (?P<arrow>→|—) "(?P<b>.+?)"(?:, labelled "(?P<label>.*)")?$')
NODE_LINE = re.compile(r'^- "(?P<label>.*?)"(?:: (?P<role>.+))?$')
GROUP_LINE = re.compile(r'^Group (?P<members>.+) inside a box titled "(?P<title>.*)"\.$')
NO_EDGE_LINE = re.compile(r'^There is no (?:arrow|line) from "(?P<a>.+?)" to "(?P<b>.+?)"\.$')


def read_graph(task_id: str, category: str, source: str, prompt: str) -> Derived:
    """The template of `builders.graph_task`: node list (with roles), groups, arrows, forbidden arrows."""
    lines = prompt.splitlines()
    ids: dict[str, str] = {}
    nodes: list[tuple[str, str, str | None]] = []
    edges: list[tuple[str, str, str | None]] = []
    clusters: list[tuple[str, str, list[str]]] = []
    forbidden: list[tuple[str, str]] = []
    section, directed = "", True
    for line in lines[1:]:
        if line.startswith("Nodes"):
            section = "nodes"
        elif line in ("Arrows:", "Lines (no arrowheads):"):
            section, directed = "edges", line == "Arrows:"
        elif (m := GROUP_LINE.match(line)) and all(lab in ids for lab in _strings(m["members"])):
            clusters.append((f"g{len(clusters) + 1}", m["title"], [ids[lab] for lab in _strings(m["members"])]))
        elif (m := NO_EDGE_LINE.match(line)) and m["a"] in ids and m["b"] in ids:
            forbidden.append((ids[m["a"]], ids[m["b"]]))
        elif section == "edges" and (m := EDGE_LINE.match(line)) and m["a"] in ids and m["b"] in ids:
            edges.append((ids[m["a"]], ids[m["b"]], m["label"]))
        elif section == "nodes" and (m := NODE_LINE.match(line)) and m["label"] not in ids:
            ids[m["label"]] = f"n{len(ids) + 1}"
            nodes.append((ids[m["label"]], m["label"], ROLE_OF_WORDS.get(m["role"] or "")))
    if not nodes:
        return None
    # "Draw no other ... arrows": a terminator no listed arrow leaves (the End) must have none leaving
    starts = {a for a, _, _ in edges}
    ends = [n for n, _, role in nodes if role == "terminator" and n not in starts]
    g = GraphDrawing(lines[0], directed, nodes, edges, clusters)
    task = graph_task(task_id, category, source, g, forbidden, lines[0], random.Random(0), ends=ends)
    return task.spec, task.points


def _strings(text: str) -> list[str]:
    """The quoted labels of a list written with Python reprs ('A', 'B' and "C's")."""
    return [ast.literal_eval(s) for s in STRING.findall(text)]


# ---------------------------------------------------------------------- circuits
PREFIX_KIND = {"R": "resistor", "C": "capacitor", "L": "inductor", "H": "lamp", "S": "switch", "V": "voltage_source",
               "I": "current_source", "F": "fuse", "D": "diode"}
PART_ID = re.compile(r"\b([RCLHSVIFD]\d+)\b")
NETLIST = re.compile(r"(?P<kind>[A-Z][a-z ]*?) (?P<id>[A-Z]+\d+)(?: \((?P<value>[^)]*)\))? connects node (?P<a>\d+)"
                     r" and node (?P<b>\d+)\.")
LOOP = re.compile(r"The (?P<kind>[a-z ]+) (?P<id>[A-Z]+\d+)(?: \((?P<value>[^)]*)\))? drives, in one closed loop, "
                  r"(?P<tree>.+?)\.(?=\s|$)(?: Ground the node where the loop returns to (?P<ground>\w+))?")
WORD_KIND = {words: kind for kind, words in KIND_WORDS.items()}


def read_circuit(task_id: str, category: str, source: str, prompt: str) -> Derived:
    """Parts (kind from the word before the id, else the id's letter), values written `ID (value)`,
    and the topology from the seeded templates (a series-parallel loop, or a netlist) or a plain
    series loop; without a topology only the part, value, count and no-short/no-open checks."""
    body = prompt.split(" Write each component's name", 1)[0]
    parts, ground = _netlist(body) or _sp_loop(body) or _node_phrases(body) or (None, None)
    topology = parts is not None
    if parts is None:
        parts = _named_parts(body)
        if not parts:
            return None
        if re.search(r"series loop|in series in one loop|in series drive", body) and not re.search(
                r"parallel|ground|node", body, re.I):
            parts = [CircuitPart(p.id, p.kind, p.value, (f"n{k}", f"n{(k + 1) % len(parts)}")) for k, p in enumerate(parts)]
            topology = True
        else:  # unknown topology: each part on nets of its own (no connection checks follow from these)
            parts = [CircuitPart(p.id, p.kind, p.value, (f"{p.id}_a", f"{p.id}_b")) for p in parts]
    task = circuit_task(task_id, source, parts, ground, "", random.Random(0))
    points = task.points if topology else [vp for vp in task.points if vp.check != "topology"]
    return task.spec, points


def _kind(pid: str, body: str) -> str:
    before = re.search(r"([A-Za-z]+(?: [a-z]+)?) " + re.escape(pid) + r"\b", body)
    if before:
        words = before.group(1).lower()
        for phrase, kind in sorted(WORD_KIND.items(), key=lambda kv: -len(kv[0])):
            if words.endswith(phrase.lower()):
                return kind
    return PREFIX_KIND[pid[0]]


def _named_parts(body: str) -> list[CircuitPart]:
    out: list[CircuitPart] = []
    for pid in dict.fromkeys(PART_ID.findall(body)):
        value = re.search(re.escape(pid) + r" \(([^)]*?)(?: each)?\)", body)
        before = re.search(r"the (\S+) source " + re.escape(pid) + r"\b", body)
        text = value.group(1) if value else (before.group(1) if before else None)
        out.append(CircuitPart(pid, _kind(pid, body), text, ("", "")))
    return out


def _netlist(body: str) -> tuple[list[CircuitPart], str | None] | None:
    rows = list(NETLIST.finditer(body))
    if not rows:
        return None
    parts = [CircuitPart(m["id"], WORD_KIND.get(m["kind"].lower(), PREFIX_KIND.get(m["id"][0], "resistor")), m["value"],
                         (f"n{m['a']}", f"n{m['b']}")) for m in rows]
    g = re.search(r"Node (\d+) is ground", body)
    return parts, f"n{g.group(1)}" if g else None


# Free wording: each part placed by a phrase naming its two nodes ("R1 (1kΩ) from the input to the
# middle node", "R1 top to left", "V1 between the top node and the bottom node", "a load R1 across
# the output", "V1 at the input"). Used only when every named part is placed, so a half-read
# circuit never yields connection checks.
NODE = r"(?:the )?(?:node )?(?P<{0}>\w+)(?: node)?"
LEAD = r"^\s*(?:\([^)]*\)\s*)?(?::\s*)?"  # after the part's id: its value, a colon
PLACEMENTS = [
    re.compile(LEAD + r"from " + NODE.format("a") + " to " + NODE.format("b") + r"\b"),
    re.compile(LEAD + r"between " + NODE.format("a") + " and " + NODE.format("b") + r"\b"),
    re.compile(LEAD + r"" + NODE.format("a") + " to " + NODE.format("b") + r"\b"),
    re.compile(LEAD + r"across " + NODE.format("a") + r"\b"),
    re.compile(LEAD + r"at " + NODE.format("a") + r"\b"),
]
def _node_phrases(body: str) -> tuple[list[CircuitPart], str | None] | None:
    named = _named_parts(body)
    if not named:
        return None
    placed, mentions_ground = [], bool(re.search(r"\bground\b", body))
    for part in named:
        clause = next((body[m.end():] for m in re.finditer(r"\b" + re.escape(part.id) + r"\b", body)), "")
        clause = re.split(r";|\.(?!\d)|,(?! \d)", clause, maxsplit=1)[0]  # a clause ends; 4.7kΩ does not
        hit = next((m for rx in PLACEMENTS if (m := rx.search(clause))), None)
        if hit is None:
            return None
        a = hit["a"]
        b = hit.groupdict().get("b") or ("ground" if mentions_ground else "reference")  # across / at a node
        nets = tuple("ground" if n in ("ground", "gnd") else n for n in (a, b))
        if nets[0] == nets[1]:
            return None
        placed.append(CircuitPart(part.id, part.kind, part.value, (nets[0], nets[1])))
    ground = "ground" if any("ground" in p.nets for p in placed) else None
    return placed, ground


PHRASINGS = ("{kind} {id}{value} from {a} to {b}", "{id}{value} between {a} and {b}", "the {kind} {id}{value}: {a} to {b}")


def paraphrase_netlist(task: Task) -> Task | None:
    """The task with its netlist prompt ("Resistor R1 (1kΩ) connects node 1 and node 2. ... Node 0 is
    ground") reworded freely (three rotating phrasings, the ground node named "ground"), for
    measuring the free-wording reader; None if the prompt is not a netlist."""
    rows = list(NETLIST.finditer(task.prompt))
    g = re.search(r"Node (\d+) is ground \(draw a ground symbol on it\)\. ", task.prompt)
    if not rows:
        return None

    def node(n: str) -> str:
        return "ground" if g and n == g.group(1) else f"node {n}"

    said = [PHRASINGS[k % len(PHRASINGS)].format(kind=m["kind"].lower(), id=m["id"], a=node(m["a"]), b=node(m["b"]),
                                                   value=f" ({m['value']})" if m["value"] else "")
            for k, m in enumerate(rows)]
    text = "Wire up the following: " + "; ".join(said) + "." + (" Draw a ground symbol on ground." if g else "")
    prompt = task.prompt[:rows[0].start()].replace("Use these nodes and parts: ", "") + text + " " \
        + task.prompt[rows[-1].end():].lstrip().removeprefix(g.group(0) if g else "")
    return task.model_copy(update={"prompt": prompt})


def _sp_loop(body: str) -> tuple[list[CircuitPart], str | None] | None:
    m = LOOP.search(body)
    if m is None:
        return None
    source = CircuitPart(m["id"], WORD_KIND.get(m["kind"], "voltage_source"), m["value"], ("n0", "n1"))
    tree = _sp_tree(m["tree"])
    if tree is None:
        return None
    parts = [source]
    assign(tree, "n1", "n0", parts, [1])
    return parts, "n0" if m["ground"] == source.id else None


def _sp_tree(text: str) -> Any:
    """`describe()` read back: 'X, Y and Z in series' / 'the parallel combination of X and Y', nested in [ ]."""
    if text.startswith("the parallel combination of "):
        mode, inner = "p", text.removeprefix("the parallel combination of ")
    elif text.endswith(" in series"):
        mode, inner = "s", text.removesuffix(" in series")
    else:
        m = re.fullmatch(r"(?P<kind>[a-zA-Z ]+) (?P<id>[A-Z]+\d+)(?: \((?P<value>[^)]*)\))?", text)
        if m is None:
            return None
        return CircuitPart(m["id"], WORD_KIND.get(m["kind"], PREFIX_KIND.get(m["id"][0], "resistor")), m["value"], ("", ""))
    items, depth, start = [], 0, 0
    k = 0
    while k < len(inner):  # split on ", " and " and " outside brackets
        ch = inner[k]
        depth += (ch == "[") - (ch == "]")
        sep = next((s for s in (", ", " and ") if depth == 0 and inner.startswith(s, k)), None)
        if sep:
            items.append(inner[start:k])
            k += len(sep)
            start = k
            continue
        k += 1
    items.append(inner[start:])
    children = [_sp_tree(i[1:-1] if i.startswith("[") and i.endswith("]") else i) for i in items]
    if len(children) < 2 or any(c is None for c in children):
        return None
    return (mode, children)


# ---------------------------------------------------------------------- geometry
NAMED = re.compile(r"Mark every named point \((?P<names>[^)]*)\)")
QUADS = ("square", "rectangle", "parallelogram", "rhombus", "trapezoid")


class _Figure:
    """A figure being read: facts and objects, kept only where every point is named."""

    def __init__(self, names: list[str]):
        self.fig = GeoFigure()
        self.names = names
        for k, n in enumerate(names):  # placeholder coordinates (see the module docstring)
            self.fig.point(n, (5 * math.cos(2 * math.pi * k / len(names)), 5 * math.sin(2 * math.pi * k / len(names))))

    def named(self, *letters: str) -> bool:
        return all(x in self.fig.points for x in letters)

    def seg(self, ab: str) -> None:
        if len(ab) == 2 and ab[0] != ab[1] and self.named(*ab):
            self.fig.seg(ab[0], ab[1])

    def fact(self, check: str, args: str, text: str, value: float | None = None) -> None:
        if self.named(*args) and not any(f.check == check and f.args == list(args) for f in self.fig.facts):
            self.fig.fact(check, list(args), text, value)

    def circle(self, centre: str, through: str) -> None:
        if self.named(centre, through) and not any(c[0] == centre for c in self.fig.circles):
            self.fig.circles.append((centre, through))


def read_geometry(task_id: str, category: str, source: str, prompt: str) -> Derived:
    m = NAMED.search(prompt)
    if m is None:
        return None
    names = re.findall(r"[A-Z]", m["names"])
    f = _Figure(names)
    statements = prompt[: m.start()]
    _polygons(f, statements)
    _constructions(f, statements)
    _circles(f, statements)
    for sentence in re.split(r"(?<=[.;])\s+", statements):  # every two-letter name in a drawing sentence is drawn
        if re.search(r"\bdraw\b", sentence, re.I) and not sentence.startswith("Do not"):
            for ab in re.findall(r"\b([A-Z]{2})\b", sentence):
                f.seg(ab)
    if "Write each given length beside its segment" in prompt:
        _lengths(f, statements)
    f.fig.forbidden = [(a, b) for a, b in re.findall(r"Do not draw segment ([A-Z])([A-Z])\.", prompt) if f.named(a, b)]
    f.fig.sentences = [prompt]
    task = geometry_task(task_id, source, f.fig, random.Random(0))
    return task.spec, task.points


def _polygons(f: _Figure, s: str) -> None:
    for tri in re.findall(r"triangle ([A-Z]{3})\b", s):
        for k in range(3):
            f.seg(tri[k] + tri[(k + 1) % 3])
        right = re.search(r"triangle " + tri + r" with (?:a|the) right angle at ([A-Z])", s)
        if right:
            c = right.group(1)
            a, b = [x for x in tri if x != c]
            f.fact("angle", a + c + b, f"angle {a}{c}{b} is 90°", 90.0)
    for a, b, c in re.findall(r"isosceles triangle [A-Z]{3} with ([A-Z])([A-Z]) = \1([A-Z])", s):
        f.fact("equal_length", a + b + a + c, f"{a}{b} = {a}{c}")
    for tri in re.findall(r"equilateral triangle ([A-Z]{3})", s):
        a, b, c = tri
        f.fact("equal_length", a + b + b + c, f"{a}{b} = {b}{c}")
        f.fact("equal_length", b + c + c + a, f"{b}{c} = {c}{a}")
    for kind, q in re.findall(r"\b(" + "|".join(QUADS) + r") ([A-Z]{4})\b", s):
        a, b, c, d = q
        for k in range(4):
            f.seg(q[k] + q[(k + 1) % 4])
        if kind in ("square", "rectangle"):
            for x, y, z in ((d, a, b), (a, b, c), (b, c, d)):
                f.fact("angle", x + y + z, f"angle {x}{y}{z} is 90°", 90.0)
        if kind in ("square", "rhombus"):
            f.fact("equal_length", a + b + b + c, f"{a}{b} = {b}{c}")
        if kind == "rhombus":
            f.fact("equal_length", b + c + c + d, f"{b}{c} = {c}{d}")
        if kind == "parallelogram":
            f.fact("parallel", a + b + d + c, f"{a}{b} ∥ {d}{c}")
            f.fact("parallel", a + d + b + c, f"{a}{d} ∥ {b}{c}")
        meet = re.search(r"(?:both (?:its )?diagonals|its diagonals(?: [A-Z]{2} and [A-Z]{2})?)[^.]*?meet at ([A-Z])", s)
        if meet:
            o = meet.group(1)
            f.seg(a + c)
            f.seg(b + d)
            f.fact("midpoint", o + a + c, f"{o} is the midpoint of {a}{c}")
            if kind != "trapezoid":
                f.fact("midpoint", o + b + d, f"{o} is the midpoint of {b}{d}")
            f.fact("on_segment", o + b + d, f"{o} lies on {b}{d}")
            if kind in ("square", "rhombus"):
                f.fact("perpendicular", a + c + b + d, f"{a}{c} ⟂ {b}{d}")
    for p, q, r, t in re.findall(r"with ([A-Z])([A-Z]) ∥ ([A-Z])([A-Z])", s):
        f.fact("parallel", p + q + r + t, f"{p}{q} ∥ {r}{t}")
    for ang, deg in re.findall(r"angle ([A-Z]{3}) (?:=|is) (\d+(?:\.\d+)?)°", s):
        f.fact("angle", ang, f"angle {ang} is {deg}°", float(deg))


def _constructions(f: _Figure, s: str) -> None:
    for m, x, y in re.findall(r"Let ([A-Z]) be the midpoint of ([A-Z])([A-Z])", s):
        f.fact("midpoint", m + x + y, f"{m} is the midpoint of {x}{y}")
    for m, n, z1, x, z2, y in re.findall(r"Let ([A-Z]) and ([A-Z]) be the midpoints of ([A-Z])([A-Z]) and ([A-Z])([A-Z])", s):
        f.fact("midpoint", m + z1 + x, f"{m} is the midpoint of {z1}{x}")
        f.fact("midpoint", n + z2 + y, f"{n} is the midpoint of {z2}{y}")
        if z1 == z2:  # the midsegment is parallel to the third side
            f.fact("parallel", m + n + x + y, f"{m}{n} ∥ {x}{y}")
    for z, x, y, h in re.findall(r"(?:altitude|perpendicular) from ([A-Z]) to (?:the hypotenuse )?([A-Z])([A-Z]), with foot ([A-Z])", s):
        f.seg(z + h)
        f.fact("perpendicular", z + h + x + y, f"{z}{h} ⟂ {x}{y}")
        f.fact("on_segment", h + x + y, f"{h} lies on {x}{y}")
    for x, z, y, x2, y2, d in re.findall(r"bisector of angle ([A-Z])([A-Z])([A-Z]), meeting ([A-Z])([A-Z]) at ([A-Z])", s):
        f.seg(z + d)
        f.fact("equal_angle", x + z + d + d + z + y, f"angle {x}{z}{d} = angle {d}{z}{y}")
        f.fact("on_segment", d + x2 + y2, f"{d} lies on {x2}{y2}")
    for z, p, x, y in re.findall(r"Through [A-Z] draw a segment ([A-Z])([A-Z]) parallel to ([A-Z])([A-Z])", s):
        f.fact("parallel", z + p + x + y, f"{z}{p} ∥ {x}{y}")
    for a, b, c, m in re.findall(r"median from ([A-Z]) to ([A-Z])([A-Z]), meeting [A-Z]{2} at ([A-Z])", s):
        f.seg(a + m)
        f.fact("midpoint", m + b + c, f"{m} is the midpoint of {b}{c}")
    for o, p, _, t in re.findall(r"radius ([A-Z])([A-Z]) and the tangent segment ([A-Z])([A-Z]) at \2", s):
        f.fact("perpendicular", o + p + p + t, f"{o}{p} ⟂ {p}{t}")


def _circles(f: _Figure, s: str) -> None:
    for x, y in re.findall(r"circle centred at ([A-Z]) passing through ([A-Z])", s):
        f.circle(x, y)
    for a, b, c, o in re.findall(r"circle through ([A-Z]), ([A-Z]) and ([A-Z]) and mark its centre ([A-Z])", s):
        f.circle(o, a)
        f.fact("on_circle", b + o, f"{b} lies on the circle centred at {o}")
        f.fact("on_circle", c + o, f"{c} lies on the circle centred at {o}")
    centre = re.search(r"circle with centre ([A-Z])", s)
    if centre is None:
        return
    o = centre.group(1)
    on: list[str] = []
    diameter = re.search(r"diameter ([A-Z])([A-Z])", s)
    if diameter:
        on += [diameter.group(1), diameter.group(2)]
        f.fact("midpoint", o + diameter.group(1) + diameter.group(2), f"{o} is the midpoint of {diameter.group(1)}{diameter.group(2)}")
    chord = re.search(r"chord ([A-Z])([A-Z])", s)
    if chord:
        on += [chord.group(1), chord.group(2)]
    listed = re.search(r"points? ((?:[A-Z](?:, | and )?)+) on (?:it|the circle)", s)
    if listed:
        on += re.findall(r"[A-Z]", listed.group(1))
    polygon = re.search(r"([A-Z]{3,}) inscribed in a circle", s)
    if polygon:
        on += list(polygon.group(1))
    on = [p for p in dict.fromkeys(on) if p != o]
    if on:
        f.circle(o, on[0])
        for p in on[1:]:
            f.fact("on_circle", p + o, f"{p} lies on the circle")


def _lengths(f: _Figure, s: str) -> None:
    found: dict[str, str] = {}
    for ab, n in re.findall(r"\b([A-Z]{2}) (?:=|is) (\d+(?:\.\d+)?) cm\b", s):
        found.setdefault(ab, f"{n} cm")
    side = re.search(r"(?:square) ([A-Z]{4})[^.]*? with side (\d+(?:\.\d+)?) cm", s)
    if side:
        found.setdefault(side.group(1)[:2], f"{side.group(2)} cm")
    for ab, n in re.findall(r"Side ([A-Z]{2}) is (\d+(?:\.\d+)?) cm long", s):
        found.setdefault(ab, f"{n} cm")
    segments = {a + b for a, b in f.fig.segments}
    for ab, text in found.items():
        key = ab if ab in segments else ab[::-1] if ab[::-1] in segments else None
        if key is not None and f.named(*ab):
            f.fig.length_labels[key] = text


# ---------------------------------------------------------------------- coverage and agreement
UNORDERED_PAIR = {"segment", "no_segment", "length_label", "connected", "series", "parallel_parts"}


def point_key(vp: VerificationPoint, spec: Spec) -> tuple[Any, ...]:
    """What a point states, independent of ids and argument order where order does not matter:
    graph node and group ids become their labels."""
    names: dict[str, str] = {}
    if isinstance(spec, GraphSpec):
        names = {n.id: n.label for n in spec.nodes} | {c.id: c.label for c in spec.clusters}
    args = [names.get(a, a) for a in vp.args]
    value: Any = vp.value
    if isinstance(value, float):
        value = round(value, 1)
    if isinstance(value, list):
        value = tuple(sorted(value))
    if vp.check in UNORDERED_PAIR:
        key: Any = frozenset(args)
    elif vp.check in ("perpendicular", "parallel", "equal_length"):
        key = frozenset((frozenset(args[:2]), frozenset(args[2:])))
    elif vp.check in ("midpoint", "on_segment"):
        key = (args[0], frozenset(args[1:]))
    elif vp.check == "angle":
        key = (args[1], frozenset((args[0], args[2])))
    elif vp.check == "equal_angle":
        key = frozenset(((args[1], frozenset((args[0], args[2]))), (args[4], frozenset((args[3], args[5])))))
    elif vp.check == "collinear":
        key = frozenset(args)
    elif vp.check == "circle":
        key, value = args[0], None  # a circle is its centre (through which named point is a detail)
    else:
        key = tuple(args)
    return (vp.check, key, value)


class SourceCoverage(TypedDict):
    hidden: int
    recovered: int
    coverage: float


class Coverage(TypedDict):
    tasks: int
    hidden: int  # critical hidden points
    recovered: int  # of them, stated by a derived point too
    derived: int
    extra: int  # derived points that state no hidden fact
    by_source: dict[str, SourceCoverage]
    coverage: float  # recovered / hidden


class Agreement(TypedDict):
    tp: int  # wrong and flagged
    fp: int
    fn: int
    tn: int
    precision: float
    recall: float


def coverage(tasks: list[Task]) -> dict[str, Coverage]:
    """Per category (and 'all'): hidden critical points, how many the prompt checker recovers (a
    derived point stating the same fact), and how many derived points state no hidden fact."""
    rows: dict[str, Coverage] = {c: {"tasks": 0, "hidden": 0, "recovered": 0, "derived": 0, "extra": 0,
                                     "by_source": {}, "coverage": 0.0} for c in (*CATEGORIES, "all")}
    for t in tasks:
        derived = read_prompt(t)
        hidden = {point_key(vp, t.spec) for vp in t.points if vp.critical}
        mine = {point_key(vp, derived.spec) for vp in derived.points}
        for cat in (t.category, "all"):
            r = rows[cat]
            r["tasks"] += 1
            r["hidden"] += len(hidden)
            r["recovered"] += len(hidden & mine)
            r["derived"] += len(mine)
            r["extra"] += len(mine - hidden)
            src = r["by_source"].setdefault(t.source, {"hidden": 0, "recovered": 0, "coverage": 0.0})
            src["hidden"] += len(hidden)
            src["recovered"] += len(hidden & mine)
    for r in rows.values():
        r["coverage"] = r["recovered"] / r["hidden"] if r["hidden"] else 0.0
        for src in r["by_source"].values():
            src["coverage"] = src["recovered"] / src["hidden"] if src["hidden"] else 0.0
    return {c: r for c, r in rows.items() if r["tasks"]}


def agreement(tasks: list[Task]) -> dict[str, Agreement]:
    """The prompt checker's verdict ("this output is wrong": any derived check fails) against the
    hidden verifier's on every reference and structural mutant, per category: precision (of the
    outputs it flags, the share that are wrong) and recall (of the wrong outputs, the share it flags)."""
    rows: dict[str, dict[str, int]] = {c: {"tp": 0, "fp": 0, "fn": 0, "tn": 0} for c in (*CATEGORIES, "all")}
    for t in tasks:
        derived = read_prompt(t)
        for sol in t.reference + [m for m in t.mutants if not m.needs_render]:
            wrong = not verify(t, sol.format, sol.code).passed
            flagged = bool(derived.points) and not verify(derived, sol.format, sol.code).passed
            cell = ("tp" if flagged else "fn") if wrong else ("fp" if flagged else "tn")
            rows[t.category][cell] += 1
            rows["all"][cell] += 1
    out: dict[str, Agreement] = {}
    for c, r in rows.items():
        if sum(r.values()):
            tp, fp, fn, tn = r["tp"], r["fp"], r["fn"], r["tn"]
            out[c] = {"tp": tp, "fp": fp, "fn": fn, "tn": tn, "precision": tp / (tp + fp) if tp + fp else 0.0,
                      "recall": tp / (tp + fn) if tp + fn else 0.0}
    return out
