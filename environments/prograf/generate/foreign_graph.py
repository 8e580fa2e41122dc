"""Flowcharts and diagrams written a second way (issue 39, the foreign-style corpus), and their faults.

Not `emit.py`'s writers. The graph of a task and its one-fault variants, and the DOT and Mermaid
writers; the SVG writer (a layout and edge routing of its own) is `foreign_graph_svg.py`. DOT: node
ids made from the labels (or the quoted labels themselves as ids, no label attribute),
`rankdir=LR`, node and edge defaults, `style="rounded,filled"` ovals, edges chained where they can
be, clusters numbered `cluster_0`, edges declared inside clusters, HTML-like labels with entities.
Mermaid: `graph LR`, letter ids, nodes defined at their first use inside a link, unquoted labels
where Mermaid allows, `-- yes -->` labels, `&` fan-outs, `classDef` with `:::class`, `style` lines,
`subgraph id["Title"]` with `direction`.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field, replace
from html import escape

from environments.prograf.task import GraphSpec, Task


@dataclass
class Graph:
    directed: bool
    nodes: list[tuple[str, str, str | None]]  # id, label, role
    edges: list[tuple[str, str, str | None]]
    clusters: list[tuple[str, str, list[str]]]
    shapes: dict[str, str] = field(default_factory=dict)  # node id -> a shape role forced (wrong shape faults)

    def role_of(self, nid: str, role: str | None) -> str | None:
        """The shape role node `nid` is drawn with: its own, unless a wrong-shape fault forced another."""
        return self.shapes.get(nid, role)


def graph_of(spec: GraphSpec) -> Graph:
    return Graph(
        spec.directed,
        [(n.id, n.label, n.shape) for n in spec.nodes],
        [(e.src, e.dst, e.label) for e in spec.edges],
        [(c.id, c.label, list(c.members)) for c in spec.clusters],
    )


WRONG_ROLE = {
    "terminator": "process",
    "process": "decision",
    "decision": "process",
    "io": "process",
    "state": "process",
}


def faults(task: Task, kind: str, rng: random.Random) -> tuple[Graph, str, str] | None:
    spec = task.spec
    assert isinstance(spec, GraphSpec)
    g = graph_of(spec)
    vp_of = {(vp.check, tuple(vp.args)): vp.id for vp in task.points}
    label = {n[0]: n[1] for n in g.nodes}
    if kind == "missing_object":
        gone = rng.choice(g.nodes)[0]
        clusters = [(c, t, [m for m in ms if m != gone]) for c, t, ms in g.clusters]
        return (
            replace(
                g,
                nodes=[n for n in g.nodes if n[0] != gone],
                edges=[e for e in g.edges if gone not in e[:2]],
                clusters=[c for c in clusters if c[2]],
            ),
            vp_of[("node", (gone,))],
            f"node {label[gone]!r} left out",
        )
    if kind == "wrong_relation":
        drawn = {x[:2] for x in g.edges}
        reversible = [e for e in g.edges if (e[1], e[0]) not in drawn] if g.directed else []
        outside = [(m, c) for c, _, ms in g.clusters if len(ms) > 1 for m in ms]
        shaped = [(nid, role) for nid, _, role in g.nodes if role]
        # one draw over all three kinds of fault, as (kind, index into its list)
        options = ([("reverse", i) for i in range(len(reversible))] + [("outside", i) for i in range(len(outside))]
                   + [("shape", i) for i in range(len(shaped))])
        if not options:
            return None
        what, i = rng.choice(options)
        if what == "reverse":
            a, b, lab = reversible[i]
            edges = [(b, a, lab) if e[:2] == (a, b) else e for e in g.edges]
            return replace(g, edges=edges), vp_of[("edge", (a, b))], f"arrow {label[a]!r} → {label[b]!r} reversed"
        if what == "outside":
            m, cid = outside[i]
            clusters = [(c, t, [x for x in ms if x != m]) if c == cid else (c, t, ms) for c, t, ms in g.clusters]
            return replace(g, clusters=clusters), vp_of[("inside", (m, cid))], f"{label[m]!r} drawn outside its group"
        nid, role = shaped[i]
        return (
            replace(g, shapes={nid: WRONG_ROLE[role]}),
            vp_of[("shape", (nid,))],
            f"{label[nid]!r} drawn as a {WRONG_ROLE[role]} shape",
        )
    if kind == "broken_connection":
        if not g.edges:
            return None
        a, b, _ = rng.choice(g.edges)
        return (
            replace(g, edges=[e for e in g.edges if e[:2] != (a, b)]),
            vp_of[("edge", (a, b))],
            f"the link {label[a]!r} → {label[b]!r} left out",
        )
    if kind == "extra_element":
        forbidden = [vp for vp in task.points if vp.check == "no_edge"]
        if forbidden and rng.random() < 0.5:
            vp = rng.choice(forbidden)
            a, b = vp.args
            return (
                replace(g, edges=g.edges + [(a, b, None)]),
                vp.id,
                f"the forbidden link {label[a]!r} → {label[b]!r} drawn",
            )
        if rng.random() < 0.5:
            target = next(vp.id for vp in task.points if vp.check == "node_count")
            host = rng.choice(g.nodes)[0]
            return (
                replace(g, nodes=g.nodes + [("xtra", "Review log", None)], edges=g.edges + [(host, "xtra", None)]),
                target,
                "an extra node 'Review log' linked from another",
            )
        ends = {vp.args[0] for vp in task.points if vp.check == "no_out_edges"}
        have = (
            {e[:2] for e in g.edges}
            | {(e[1], e[0]) for e in g.edges}
            | {(f.args[0], f.args[1]) for f in forbidden}
            | {(f.args[1], f.args[0]) for f in forbidden}
        )
        pairs = [
            (a[0], b[0]) for a in g.nodes for b in g.nodes if a != b and (a[0], b[0]) not in have and a[0] not in ends
        ]
        if not pairs:
            return None
        a, b = rng.choice(pairs)
        target = next(vp.id for vp in task.points if vp.check == "edge_count")
        return replace(g, edges=g.edges + [(a, b, None)]), target, f"an extra link {label[a]!r} → {label[b]!r}"
    raise ValueError(f"unknown fault kind {kind!r}")


# ---------------------------------------------------------------------- DOT
DOT_SHAPE = {
    "terminator": ['shape=box, style="rounded,filled", fillcolor="#d1fae5"', "shape=oval", "shape=ellipse"],
    "process": ["shape=box", "shape=rect", "shape=rectangle, style=filled, fillcolor=lightyellow"],
    "decision": ["shape=diamond", 'shape=diamond, style=filled, fillcolor="#fde68a"'],
    "io": ["shape=parallelogram"],
    "state": ["shape=circle", "shape=ellipse", "shape=box, style=rounded"],
    None: ["shape=box", 'shape=box, style="rounded"', "shape=component", "shape=box3d"],
}


def ident(label: str, taken: set[str]) -> str:
    base = re.sub(r"\W+", "_", label.lower()).strip("_") or f"n{len(taken)}"
    if base[0].isdigit() or base in ("node", "edge", "graph", "digraph", "subgraph", "strict"):
        base = "n_" + base
    name, k = base, 2
    while name in taken:
        name, k = f"{base}_{k}", k + 1
    taken.add(name)
    return name


def write_dot(g: Graph, style: int, rng: random.Random) -> str:
    """style 0: snake_case ids with labels; 1: the quoted labels are the ids; 2: HTML-like labels, LR."""
    taken: set[str] = set()
    ids = {n[0]: (dot_q(n[1]) if style == 1 else ident(n[1], taken)) for n in g.nodes}
    op = "->" if g.directed else "--"
    out = [f"{'digraph' if g.directed else 'graph'} {'flow' if style == 0 else dot_q('diagram')} {{"]
    if style != 1:
        out.append("    rankdir=LR;" if style == 2 else "    rankdir=TB;")
    out += ['    node [fontname="Arial", fontsize=11];', '    edge [fontname="Arial", fontsize=10];']
    shapes = {
        n[0]: DOT_SHAPE[g.role_of(n[0], n[2])][rng.randrange(len(DOT_SHAPE[g.role_of(n[0], n[2])]))] for n in g.nodes
    }

    if style == 0:  # a default shape, and each node's only where it differs
        out.append("    node [shape=box];")
        shapes = {k: ("" if v == "shape=box" else v) for k, v in shapes.items()}

    def node_line(nid: str, lab: str) -> str:
        if style == 1:
            return f"{ids[nid]} [{shapes[nid]}];" if shapes[nid] else f"{ids[nid]};"
        if not shapes[nid]:
            return f"{ids[nid]} [label={dot_q(lab)}];"
        text = f"<{escape(lab, quote=False)}>" if style == 2 else dot_q(lab)
        return f"{ids[nid]} [label={text}, {shapes[nid]}];"

    in_cluster = {m for _, _, ms in g.clusters for m in ms}
    for nid, text, _ in g.nodes:
        if nid not in in_cluster:
            out.append("    " + node_line(nid, text))
    inner: set[int] = set()
    for k, (_, title, members) in enumerate(g.clusters):
        out += ["", f"    subgraph cluster_{k} {{", f"        label = {dot_q(title)};", "        style = dashed;"]
        out += ["        " + node_line(nid, lab) for nid, lab, _ in g.nodes if nid in members]
        for j, (a, b, elab) in enumerate(g.edges):  # edges between two members go inside, as people write them
            if a in members and b in members:
                out.append("        " + _dot_edge(ids, a, b, elab, op, style))
                inner.add(j)
        out.append("    }")
    out.append("")
    rest = [(j, e) for j, e in enumerate(g.edges) if j not in inner]
    k = 0
    while k < len(rest):  # unlabelled edges a -> b, b -> c written as one chain a -> b -> c
        j, (a, b, elab) = rest[k]
        chain = [a, b]
        while not elab and k + 1 < len(rest) and rest[k + 1][1][0] == chain[-1] and not rest[k + 1][1][2] and style == 0:
            k += 1
            chain.append(rest[k][1][1])
        if len(chain) > 2:
            out.append("    " + f" {op} ".join(ids[c] for c in chain) + ";")
        else:
            out.append("    " + _dot_edge(ids, a, b, elab, op, style))
        k += 1
    out.append("}")
    return "\n".join(out)


def dot_q(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _dot_edge(ids: dict[str, str], a: str, b: str, lab: str | None, op: str, style: int) -> str:
    if not lab:
        return f"{ids[a]} {op} {ids[b]};"
    text = f"<<i>{escape(lab, quote=False)}</i>>" if style == 2 else dot_q(lab)
    return f"{ids[a]} {op} {ids[b]} [label={text}];"


# ---------------------------------------------------------------------- Mermaid
MERMAID_SHAPE = {
    "terminator": [("([", "])"), ("(", ")")],
    "process": [("[", "]")],
    "decision": [("{", "}")],
    "io": [("[/", "/]")],
    "state": [("((", "))"), ("(", ")"), ("([", "])")],
    None: [("[", "]"), ("(", ")"), ("[[", "]]")],
}
SAFE = re.compile(r"^[\w ,.+\-']+$")


def write_mermaid(g: Graph, style: int, rng: random.Random) -> str:
    """style 0: graph LR, nodes at first use, classDef; 1: flowchart TB, declared first, quoted,
    entities, inline `-- text -->`; 2: `&` fan-outs and `style` lines."""
    letters = [chr(65 + i) if i < 26 else f"N{i}" for i in range(len(g.nodes))]
    ids = {n[0]: letters[i] for i, n in enumerate(g.nodes)}
    shape = {
        n[0]: MERMAID_SHAPE[g.role_of(n[0], n[2])][rng.randrange(len(MERMAID_SHAPE[g.role_of(n[0], n[2])]))]
        for n in g.nodes
    }
    label = {n[0]: n[1] for n in g.nodes}
    role = {n[0]: g.role_of(n[0], n[2]) for n in g.nodes}

    def text(s: str) -> str:
        if style == 1:
            return '"' + s.replace('"', "#quot;").replace("<", "#lt;").replace(">", "#gt;") + '"'
        return s if SAFE.match(s) else '"' + s.replace('"', "#quot;") + '"'

    def node(nid: str) -> str:
        o, c = shape[nid]
        cls = f":::{role[nid]}" if style == 0 and role[nid] in ("decision", "io") else ""
        return f"{ids[nid]}{o}{text(label[nid])}{c}{cls}"

    out = ["graph LR" if style == 0 else "flowchart TB" if style == 1 else "flowchart TD"]
    if style == 0:
        out += ["    classDef decision fill:#fff3bf,stroke:#e67700", "    classDef io fill:#e7f5ff,stroke:#1971c2"]
    declared: set[str] = set()
    in_cluster = {m for _, _, ms in g.clusters for m in ms}
    if style != 0:
        for nid, _, _ in g.nodes:
            if nid not in in_cluster:
                out.append("    " + node(nid))
                declared.add(nid)
    for k, (_, title, members) in enumerate(g.clusters):
        out.append(f'    subgraph grp{k}["{title}"]' if style != 2 else f"    subgraph {text(title)}")
        out.append("        direction LR")
        for nid in members:
            out.append("        " + node(nid))
            declared.add(nid)
        out.append("    end")
    arrow = "-->" if g.directed else "---"

    def ref(nid: str) -> str:
        if nid in declared:
            return ids[nid]
        declared.add(nid)
        return node(nid)

    done: set[int] = set()
    for j, (a, b, lab) in enumerate(g.edges):
        if j in done:
            continue
        if style == 2 and not lab:  # fan-out: a --> b & c
            fan = [k for k, (x, y, lb) in enumerate(g.edges) if x == a and not lb and k not in done]
            if len(fan) > 1:
                targets = " & ".join(ref(g.edges[k][1]) for k in fan)
                out.append(f"    {ref(a)} {arrow} {targets}")
                done.update(fan)
                continue
        if style == 0 and not lab:  # a --> b --> c while each link leads on unlabelled from the last
            chain, k = [j], j
            while k + 1 < len(g.edges) and g.edges[k + 1][0] == g.edges[k][1] and not g.edges[k + 1][2]:
                k += 1
                chain.append(k)
            if len(chain) > 1:
                out.append("    " + f" {arrow} ".join([ref(a)] + [ref(g.edges[c][1]) for c in chain]))
                done.update(chain)
                continue
        left = ref(a)
        if lab and style == 1:
            mid = f"-- {text(lab)} {arrow}" if g.directed else f"-- {text(lab)} ---"
            out.append(f"    {left} {mid} {ref(b)}")
        elif lab:
            out.append(f"    {left} {arrow}|{text(lab)}| {ref(b)}")
        elif style == 1:
            out.append(f"    {left}{arrow}{ref(b)}")
        elif style == 2 and g.directed and j % 3 == 2:  # a dotted arrow is still an arrow
            out.append(f"    {left} -.-> {ref(b)}")
        else:
            out.append(f"    {left} {arrow} {ref(b)}")
        done.add(j)
    for nid, _, _ in g.nodes:
        if nid not in declared:
            out.append("    " + node(nid))
    if style == 2:
        for nid, _, _ in g.nodes:
            if role[nid] == "terminator":
                out.append(f"    style {ids[nid]} fill:#d3f9d8,stroke:#2b8a3e")
    return "\n".join(out)


STYLES = (0, 1, 2)  # the writers' styles (DOT, Mermaid and SVG alike)
