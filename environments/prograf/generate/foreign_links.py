"""A third writer for the foreign-style corpus (issue 39 item 3): outputs that draw their links and wires
with the constructs real writers reach for, which the second writer never uses.

Mermaid: every link kind a flowchart may carry -- circle and cross heads (`--o`, `--x`, `==o`, `-.-x`),
thick and dotted strokes, long links (`---->`), text links (`-- yes -->`, `== no ==>`, `-. retry .->`,
`-- ok --o`) and pipes on marked links (`--o|text|`); a pair of arrows each way between two nodes
drawn as one two-headed link (`<-->`, `o--o`, `x--x`, `<==>`: no task has such a pair unlabelled, so
these occur in the faults, where a two-headed link is an extra arrow); an undirected diagram with `---`, `===`,
`-.-`, `-----` and `-- text ---`. DOT: `dir=back` edges written head to tail, `dir=both` for a pair of
arrows each way (in the faults, as Mermaid's two-headed links), `dir=both, arrowtail=none`, heads of other shapes (`vee`, `odot`, `normal`), `xlabel`s,
and an undirected diagram written as a `digraph` with `edge [arrowhead=none]` or `edge [dir=none]`.
Schemdraw (Python): each part hung from its lower rail by `.at(...)`, its upper end taken to the upper
rail by a bent `Wire('-|')` (by `.to(...)` or `.delta(...)`), `Wire('|-')` or `Wire('c', k=0.5)`, rails run between `d.push()` / `d.pop()`,
some parts named by an `Annotate` arrow pointing at them (held or not), and marks over the circuit
(`CurrentLabel`, `Tag`, `LoopCurrent`) that join and name nothing.

Faults are made on the drawing before it is written (the second writer's `faults`, plus three of the
links' own: an arrow drawn the wrong way with its own head kind, an arrow drawn without its head, an
arrow drawn with a head at each end), so each is the named kind whatever the writer.
"""

from __future__ import annotations

import random
from dataclasses import replace
from html import escape

from environments.prograf.generate import foreign_circuit, foreign_graph
from environments.prograf.generate.foreign_circuit import Circuit, _num
from environments.prograf.generate.foreign_graph import DOT_SHAPE, MERMAID_SHAPE, Graph, dot_q, ident
from environments.prograf.task import GraphSpec, Task

Edge = tuple[str, str, str | None]
ARROWS = ["-->", "--o", "==>", "-.->", "--x", "---->", "==o", "-.-x"]
TEXT_ARROWS = [("--", "-->"), ("==", "==>"), ("-.", ".->"), ("--", "--o")]
LINES = ["---", "===", "-.-", "-----"]
TWO_WAY = ["<-->", "o--o", "x--x", "<==>"]


def _pairs(g: Graph) -> set[tuple[str, str]]:
    """Unlabelled arrows a -> b whose reverse is drawn too, unlabelled: each pair written once, as (a, b)."""
    plain = {(a, b) for a, b, lab in g.edges if not lab}
    return {(a, b) for a, b in plain if (b, a) in plain and a < b} if g.directed else set()


Heads = dict[tuple[str, str], str]  # an arrow a -> b drawn with "none" (no head) or "both" (a head each end)


def graph_faults(task: Task, kind: str, rng: random.Random) -> tuple[Graph, str, str, Heads] | None:
    """A one-fault drawing, its target point, what it is and the arrows whose heads are drawn otherwise."""
    assert isinstance(task.spec, GraphSpec)
    g = foreign_graph.graph_of(task.spec)
    vp_of = {(vp.check, tuple(vp.args)): vp.id for vp in task.points}
    label = {n[0]: n[1] for n in g.nodes}
    drawn = {e[:2] for e in g.edges}
    one_way = [e for e in g.edges if (e[1], e[0]) not in drawn] if g.directed else []
    if kind == "head_flip":  # wrong_relation: drawn with its own link kind, the head at the wrong end
        if not one_way:
            return None
        a, b, lab = rng.choice(one_way)
        edges = [(b, a, lab) if e[:2] == (a, b) else e for e in g.edges]
        return replace(g, edges=edges), vp_of[("edge", (a, b))], f"arrow {label[a]!r} → {label[b]!r} drawn the other way", {}
    if kind == "headless":  # wrong_relation: the link is there, its arrowhead is not
        if not one_way:
            return None
        a, b, _ = rng.choice(one_way)
        return g, vp_of[("edge", (a, b))], f"arrow {label[a]!r} → {label[b]!r} drawn without its head", {(a, b): "none"}
    if kind == "two_headed":  # extra_element: an arrow drawn with a head at each end is an arrow each way
        if not one_way:
            return None
        a, b, _ = rng.choice(one_way)
        target = next(vp.id for vp in task.points if vp.check == "edge_count")
        return g, target, f"arrow {label[a]!r} → {label[b]!r} drawn with a head at each end", {(a, b): "both"}
    made = foreign_graph.faults(task, kind, rng)
    return None if made is None else (*made, {})


GRAPH_FAULTS = ("head_flip", "missing_object", "headless", "broken_connection", "two_headed", "extra_element")
NAMED = {"head_flip": "wrong_relation", "headless": "wrong_relation", "two_headed": "extra_element"}


# ---------------------------------------------------------------------- Mermaid
def write_mermaid(g: Graph, heads: Heads, rng: random.Random) -> str:
    """Nodes declared first (in their subgraphs), then one line per link in the link kinds above."""
    ids = {n[0]: f"n{i + 1}" for i, n in enumerate(g.nodes)}
    out = ["flowchart LR" if rng.random() < 0.5 else "flowchart TD"]

    def node(nid: str, lab: str, role: str | None) -> str:
        shapes = MERMAID_SHAPE[g.role_of(nid, role)]
        o, c = shapes[rng.randrange(len(shapes))]
        return f'{ids[nid]}{o}"{lab.replace(chr(34), "#quot;")}"{c}'

    in_cluster = {m for _, _, ms in g.clusters for m in ms}
    out += ["    " + node(nid, lab, role) for nid, lab, role in g.nodes if nid not in in_cluster]
    for k, (_, title, members) in enumerate(g.clusters):
        out.append(f'    subgraph s{k}["{title}"]')
        out += ["        " + node(nid, lab, role) for nid, lab, role in g.nodes if nid in members]
        out.append("    end")
    pairs = _pairs(g)
    for j, (a, b, lab) in enumerate(g.edges):
        if (b, a) in pairs:
            continue  # written with its pair
        text = lab.replace('"', "#quot;") if lab else None
        if (a, b) in pairs or heads.get((a, b)) == "both":
            link = TWO_WAY[sum(map(ord, a + b)) % len(TWO_WAY)]  # spread over the few two-headed links
        elif not g.directed or heads.get((a, b)) == "none":
            link = LINES[j % len(LINES)]
            if text:  # an undirected text link, or an arrow's text kept on its headless line
                start = "==" if link == "===" else "-." if link == "-.-" else "--"
                end = "===" if start == "==" else ".-" if start == "-." else "---"
                out.append(f'    {ids[a]} {start} "{text}" {end} {ids[b]}')
                continue
        elif text and j % 2 == 0:
            start, end = TEXT_ARROWS[(j // 2) % len(TEXT_ARROWS)]
            out.append(f'    {ids[a]} {start} "{text}" {end} {ids[b]}')
            continue
        else:
            link = ARROWS[j % len(ARROWS)]
        out.append(f'    {ids[a]} {link}|"{text}"| {ids[b]}' if text else f"    {ids[a]} {link} {ids[b]}")
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------------- DOT
def write_dot(g: Graph, heads: Heads, rng: random.Random) -> str:
    """Always a `digraph`: an undirected diagram's edges lose their heads by an edge default."""
    taken: set[str] = set()
    ids = {n[0]: ident(n[1], taken) for n in g.nodes}
    out = ["digraph G {", "    rankdir=LR;" if rng.random() < 0.5 else "    rankdir=TB;", '    node [fontname="Helvetica"];']
    if not g.directed:
        out.append("    edge [arrowhead=none];" if rng.random() < 0.5 else "    edge [dir=none];")

    def node(nid: str, lab: str, role: str | None) -> str:
        shapes = DOT_SHAPE[g.role_of(nid, role)]
        return f"{ids[nid]} [label={dot_q(lab)}, {shapes[rng.randrange(len(shapes))]}];"

    in_cluster = {m for _, _, ms in g.clusters for m in ms}
    out += ["    " + node(nid, lab, role) for nid, lab, role in g.nodes if nid not in in_cluster]
    for k, (_, title, members) in enumerate(g.clusters):
        out += [f"    subgraph cluster_{k} {{", f"        label={dot_q(title)};"]
        out += ["        " + node(nid, lab, role) for nid, lab, role in g.nodes if nid in members]
        out.append("    }")
    pairs = _pairs(g)
    for j, (a, b, lab) in enumerate(g.edges):
        if (b, a) in pairs:
            continue
        attrs = []
        if lab:
            key = "xlabel" if j % 3 == 1 else "label"
            attrs.append(f"{key}=<{escape(lab, quote=False)}>" if j % 2 else f"{key}={dot_q(lab)}")
        src, dst = a, b
        if (a, b) in pairs or heads.get((a, b)) == "both":
            attrs.append("dir=both")
        elif not g.directed:
            pass  # the default takes the head away
        elif heads.get((a, b)) == "none":
            attrs.append("arrowhead=none" if j % 2 else "dir=none")
        elif j % 4 == 1:  # written from its head: Graphviz draws the arrow at the tail, pointing at b
            src, dst = b, a
            attrs.append("dir=back")
        elif j % 4 == 2:
            attrs.append(["arrowhead=vee", "arrowhead=odot", "arrowhead=normal"][j % 3])
        elif j % 4 == 3:
            attrs.append("dir=both, arrowtail=none")
        tail = f" [{', '.join(attrs)}]" if attrs else ""
        out.append(f"    {ids[src]} -> {ids[dst]}{tail};")
    out.append("}")
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------------- schemdraw
CIRCUIT_FAULTS = ("missing_object", "broken_connection", "extra_element", "wrong_relation")


def write_py(c: Circuit, rng: random.Random) -> str:
    """Parts up from their lower rail; a bent `Wire` one step right and up to the upper rail, which
    reaches that far; rails walked with push/pop; names on `.label`, a `label=` or an Annotate."""
    y, placed, extent = foreign_circuit.rails(c)
    for pl in placed:  # the upper rail reaches the wire's vertical leg
        up = next(n for n in pl.part.nets if y[n] == pl.y1)
        if up != "open" and pl.y1 > pl.y0:
            lo, hi = extent[up]
            extent[up] = (lo, max(hi, pl.x + 1))
    lines = ["import schemdraw", "import schemdraw.elements as elm", "", "with schemdraw.Drawing() as d:"]
    names: list[str] = []
    for k, pl in enumerate(placed):
        p = pl.part
        kind = foreign_circuit.ELEMENT[p.kind][rng.randrange(len(foreign_circuit.ELEMENT[p.kind]))]
        text = f"{p.id} {p.value}" if p.value else p.id
        name = f"X{k}"
        names.append(name)
        where = f".at(({_num(pl.x)}, {_num(pl.y0)})).up(1.5)"
        if k % 3 == 0:
            lines.append(f"    {name} = elm.{kind}(){where}")
            dx, dy = (2.2, 0.4) if k % 2 else (-1.2, 0.6)
            held = ".hold()" if k % 2 == 0 else ""
            lines.append(f"    elm.Annotate().at({name}.center).delta({_num(dx)}, {_num(dy)}).label({text!r}){held}")
        elif k % 3 == 1:
            lines.append(f"    {name} = elm.{kind}(label={text!r}){where}")
        else:
            lines.append(f"    {name} = elm.{kind}(){where}.label({text!r}, loc='bottom')")
        up = next(n for n in p.nets if y[n] == pl.y1)
        if up != "open" and pl.y1 > pl.y0:
            rise = pl.y1 - pl.y0 - 1.5
            to = f".to(({_num(pl.x + 1)}, {_num(pl.y1)}))"
            wire = [f"'-|').at({name}.end){to}", f"'-|').at({name}.end).delta(1, {_num(rise)})",
                    f"'|-').at({name}.end){to}", f"'c', k=0.5).at({name}.end){to}"][k % 4]
            lines.append(f"    elm.Wire({wire}")
        if k == 0:
            lines.append(f"    elm.CurrentLabel(top=False).at({name}).label('I')")
    for net in sorted(extent, key=lambda n: y[n]):
        lo, hi = extent[net]
        if net == "open" or hi <= lo:
            continue
        lines += ["    d.push()", f"    elm.Line().at(({_num(lo)}, {_num(y[net])})).right().tox({_num(hi)})",
                  "    d.pop()"]
    if c.ground:
        lines.append(f"    elm.Ground().at((0, {_num(y[c.ground])}))")
    top = max(y.values()) if y else 0.0
    lines.append(f"    elm.Tag().at((0, {_num(top)})).label('OUT')")
    if len(names) >= 2:
        lines.append(f"    elm.LoopCurrent([{names[0]}, {names[1]}, {names[1]}, {names[0]}], direction='cw').label('I1')")
    return "\n".join(lines) + "\n"

