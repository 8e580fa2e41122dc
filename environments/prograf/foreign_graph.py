"""Flowcharts and diagrams written a second way (issue 39, the foreign-style corpus), and their faults.

Not `emit.py`'s writers. DOT: node ids made from the labels (or the quoted labels themselves as
ids, no label attribute), `rankdir=LR`, node and edge defaults, `style="rounded,filled"` ovals,
edges chained where they can be, clusters numbered `cluster_0`, edges declared inside clusters,
HTML-like labels with entities. Mermaid: `graph LR`, letter ids, nodes defined at their first use
inside a link, unquoted labels where Mermaid allows, `-- yes -->` labels, `&` fan-outs, `classDef`
with `:::class`, `style` lines, `subgraph id["Title"]` with `direction`. SVG: a left-to-right layered
grid (layers are columns, clusters are rows), nodes as translated `<g>`s, ovals as pills (`rx` half
the height) or ellipses, parallelograms as a skewed `<rect>` or a `<path>`, long labels in two
tspans, edges as orthogonal `<path>`s through the gaps between nodes, arrowheads by a `<polygon>`
marker or by a triangle drawn at the end, edge labels on a white backdrop on the line.
"""

from __future__ import annotations

import math
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
        options = []
        if g.directed:
            options += [("reverse", e) for e in g.edges if (e[1], e[0]) not in {x[:2] for x in g.edges}]
        options += [("outside", (m, c)) for c, _, ms in g.clusters if len(ms) > 1 for m in ms]
        options += [("shape", n) for n in g.nodes if n[2]]
        if not options:
            return None
        what, item = rng.choice(options)
        if what == "reverse":
            a, b, lab = item  # type: ignore[misc]
            edges = [(b, a, lab) if e[:2] == (a, b) else e for e in g.edges]
            return replace(g, edges=edges), vp_of[("edge", (a, b))], f"arrow {label[a]!r} → {label[b]!r} reversed"
        if what == "outside":
            m, cid = item  # type: ignore[misc]
            clusters = [(c, t, [x for x in ms if x != m]) if c == cid else (c, t, ms) for c, t, ms in g.clusters]
            return replace(g, clusters=clusters), vp_of[("inside", (m, cid))], f"{label[m]!r} drawn outside its group"
        nid, _, role = item  # type: ignore[misc]
        return (
            replace(g, shapes={nid: WRONG_ROLE[role]}),
            vp_of[("shape", (nid,))],  # type: ignore[index]
            f"{label[nid]!r} drawn as a {WRONG_ROLE[role]} shape",
        )  # type: ignore[index]
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


def _role(g: Graph, nid: str, role: str | None) -> str | None:
    return g.shapes.get(nid, role)


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
        n[0]: DOT_SHAPE[_role(g, n[0], n[2])][rng.randrange(len(DOT_SHAPE[_role(g, n[0], n[2])]))] for n in g.nodes
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
    for nid, lab, _ in g.nodes:
        if nid not in in_cluster:
            out.append("    " + node_line(nid, lab))
    inner: set[int] = set()
    for k, (_, title, members) in enumerate(g.clusters):
        out += ["", f"    subgraph cluster_{k} {{", f"        label = {dot_q(title)};", "        style = dashed;"]
        out += ["        " + node_line(nid, lab) for nid, lab, _ in g.nodes if nid in members]
        for j, (a, b, lab) in enumerate(g.edges):  # edges between two members go inside, as people write them
            if a in members and b in members:
                out.append("        " + _dot_edge(ids, a, b, lab, op, style))
                inner.add(j)
        out.append("    }")
    out.append("")
    rest = [(j, e) for j, e in enumerate(g.edges) if j not in inner]
    k = 0
    while k < len(rest):  # unlabelled edges a -> b, b -> c written as one chain a -> b -> c
        j, (a, b, lab) = rest[k]
        chain = [a, b]
        while not lab and k + 1 < len(rest) and rest[k + 1][1][0] == chain[-1] and not rest[k + 1][1][2] and style == 0:
            k += 1
            chain.append(rest[k][1][1])
        if len(chain) > 2:
            out.append("    " + f" {op} ".join(ids[c] for c in chain) + ";")
        else:
            out.append("    " + _dot_edge(ids, a, b, lab, op, style))
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
        n[0]: MERMAID_SHAPE[_role(g, n[0], n[2])][rng.randrange(len(MERMAID_SHAPE[_role(g, n[0], n[2])]))]
        for n in g.nodes
    }
    label = {n[0]: n[1] for n in g.nodes}
    role = {n[0]: _role(g, n[0], n[2]) for n in g.nodes}

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


# ---------------------------------------------------------------------- SVG
H = 40.0
GAP_X = 130.0
GAP_Y = 60.0


def _width(label: str) -> float:
    return min(max(100.0, 7.2 * len(label) + 30), 190.0)


def _lines(label: str) -> list[str]:
    """Two lines for a long label, split at the space nearest its middle."""
    if len(label) <= 22 or " " not in label:
        return [label]
    spaces = [i for i, ch in enumerate(label) if ch == " "]
    cut = min(spaces, key=lambda i: abs(i - len(label) / 2))
    return [label[:cut], label[cut + 1 :]]


def _layers(g: Graph) -> dict[str, int]:
    """Breadth-first depth from the first node (and from every node no earlier search reached)."""
    succ: dict[str, list[str]] = {n[0]: [] for n in g.nodes}
    for a, b, _ in g.edges:
        succ[a].append(b)
        if not g.directed:
            succ[b].append(a)
    depth: dict[str, int] = {}
    for start, _, _ in g.nodes:
        if start in depth:
            continue
        depth[start] = 0
        queue = [start]
        while queue:
            u = queue.pop(0)
            for v in succ[u]:
                if v not in depth:
                    depth[v] = depth[u] + 1
                    queue.append(v)
    return depth


def svg_layout(g: Graph) -> dict[str, tuple[float, float, float, float]]:
    """Node id -> (cx, cy, w, h) on a grid: columns by depth (no clusters) or rows by cluster."""
    cells: dict[str, tuple[int, int]] = {}
    if g.clusters:
        in_cluster = {m for _, _, ms in g.clusters for m in ms}
        rows = [[n[0] for n in g.nodes if n[0] not in in_cluster]] + [ms for _, _, ms in g.clusters]
        rows = [r for r in rows if r]
        for r, members in enumerate(rows):
            for c, m in enumerate(members):
                cells[m] = (c, r)
    else:
        depth = _layers(g)
        count: dict[int, int] = {}
        for nid, _, _ in g.nodes:
            cells[nid] = (depth[nid], count.get(depth[nid], 0))
            count[depth[nid]] = count.get(depth[nid], 0) + 1
    col_w = {
        c: max(_width(lab) for nid, lab, _ in g.nodes if cells[nid][0] == c) for c in {x for x, _ in cells.values()}
    }
    xs, x = {}, 40.0 + GAP_X / 2 + 20
    for c in sorted(col_w):
        xs[c] = x + col_w[c] / 2
        x += col_w[c] + GAP_X
    top = 70.0 if g.clusters else 40.0
    row_h = H + GAP_Y + (40.0 if g.clusters else 0.0)
    return {
        nid: (xs[c], top + H / 2 + r * row_h, _width(lab), H + (12.0 if len(_lines(lab)) > 1 else 0.0))
        for nid, lab, _ in g.nodes
        for c, r in [cells[nid]]
    }


def _shape(role: str | None, w: float, h: float, style: int) -> str:
    if role == "terminator":
        return (
            f'<rect x="{-w / 2:g}" y="{-h / 2:g}" width="{w:g}" height="{h:g}" rx="{h / 2:g}" ry="{h / 2:g}"/>'
            if style != 1
            else f'<ellipse rx="{w / 2:g}" ry="{h / 2 + 4:g}"/>'
        )
    if role == "state":
        return f'<ellipse rx="{w / 2:g}" ry="{h / 2 + 4:g}"/>'
    if role == "decision":
        return f'<polygon points="0,{-h / 2 - 14:g} {w / 2 + 14:g},0 0,{h / 2 + 14:g} {-w / 2 - 14:g},0"/>'
    if role == "io":
        if style == 1:
            return f'<rect x="{-w / 2:g}" y="{-h / 2:g}" width="{w:g}" height="{h:g}" transform="skewX(-20)"/>'
        s = 12.0
        return (
            f'<path d="M {-w / 2 + s:g} {-h / 2:g} L {w / 2 + s:g} {-h / 2:g} L {w / 2 - s:g} {h / 2:g}'
            f' L {-w / 2 - s:g} {h / 2:g} Z"/>'
        )
    rx = ' rx="2"' if role == "process" else ' rx="6"' if role is None and style == 2 else ""
    return f'<rect x="{-w / 2:g}" y="{-h / 2:g}" width="{w:g}" height="{h:g}"{rx}/>'


def _reach(
    cx: float, cy: float, w: float, h: float, role: str | None, side: str, dy: float = 0.0
) -> tuple[float, float]:
    """Where an edge meets the node's outline on one side (right, left, top, bottom); on the left or
    right `dy` off the centre line."""
    if side in ("top", "bottom"):
        pad = 14.0 if role == "decision" else 4.0 if role in ("state",) else 0.0
        return (cx, cy - h / 2 - pad) if side == "top" else (cx, cy + h / 2 + pad)
    half = w / 2
    if role == "decision":
        half = (w / 2 + 14) * (1 - abs(dy) / (h / 2 + 14))
    elif role == "state":
        half = w / 2 * math.sqrt(max(0.0, 1 - (dy / (h / 2 + 4)) ** 2))
    elif role == "terminator":
        r = h / 2
        half = w / 2 - r + math.sqrt(max(0.0, r * r - dy * dy))
    return (cx + half, cy + dy) if side == "right" else (cx - half, cy + dy)


def write_svg(g: Graph, style: int, rng: random.Random) -> str:
    """style 0: pills, polygon marker; 1: ellipses, skewed rect, triangles drawn at the ends; 2: plain."""
    pos = svg_layout(g)
    role = {n[0]: _role(g, n[0], n[2]) for n in g.nodes}
    right = max(x + w / 2 for x, _, w, _ in pos.values())
    bottom = max(y + h / 2 for _, y, _, h in pos.values())
    lanes_used = 0
    body: list[str] = []
    edge_labels: list[str] = []
    for _, title, members in g.clusters:
        x0 = min(pos[m][0] - pos[m][2] / 2 for m in members) - 24
        x1 = max(pos[m][0] + pos[m][2] / 2 for m in members) + 24
        y0 = min(pos[m][1] - pos[m][3] / 2 for m in members) - 40
        y1 = max(pos[m][1] + pos[m][3] / 2 for m in members) + 16
        body.append(
            f'<g class="cluster"><rect x="{x0:g}" y="{y0:g}" width="{x1 - x0:g}" height="{y1 - y0:g}" rx="8"'
            f' fill="#f8f9fa" stroke="#868e96" stroke-dasharray="5,3"/>'
            f'<text x="{x0 + 10:g}" y="{y0 + 20:g}" font-weight="bold">{escape(title)}</text></g>'
        )
    for nid, lab, _ in g.nodes:
        cx, cy, w, h = pos[nid]
        lines = _lines(lab)
        if len(lines) == 1:
            words = f'<text text-anchor="middle" dy="0.35em">{escape(lab)}</text>'
        else:
            words = (
                f'<text text-anchor="middle"><tspan x="0" y="-4">{escape(lines[0])}</tspan>'
                f'<tspan x="0" dy="16">{escape(lines[1])}</tspan></text>'
            )
        body.append(f'<g class="node" transform="translate({cx:g},{cy:g})">{_shape(role[nid], w, h, style)}{words}</g>')
    head = ' marker-end="url(#head)"' if g.directed and style != 1 else ""
    columns = sorted({round(x, 1) for x, _, _, _ in pos.values()})
    col = {n: columns.index(round(pos[n][0], 1)) for n in pos}
    sideways = [
        j
        for j, (a, b, _) in enumerate(g.edges)
        if not (col[a] == col[b] and abs(pos[b][1] - pos[a][1]) > 1 and _clear(pos, a, b))
    ]
    decisions = {n for n in pos if role[n] == "decision"}
    port_out = _ports([(j, g.edges[j][0], pos[g.edges[j][1]][1]) for j in sideways], pos, decisions)
    port_in = _ports([(j, g.edges[j][1], pos[g.edges[j][0]][1]) for j in sideways], pos, decisions)
    paths: list[list[tuple[float, float]]] = []
    for j, (a, b, _) in enumerate(g.edges):
        ax, ay, aw, ah = pos[a]
        bx, by, bw, bh = pos[b]
        if j not in port_out:  # one above the other: straight down or up
            down = by > ay
            pts = [
                _reach(ax, ay, aw, ah, role[a], "bottom" if down else "top"),
                _reach(bx, by, bw, bh, role[b], "top" if down else "bottom"),
            ]
        elif col[b] == col[a] + 1:  # the next column: across, one bend in the gap between the columns
            shift = 10.0 * (j % 7) - 30.0
            p = _reach(ax, ay, aw, ah, role[a], "right", port_out[j])
            q = _reach(bx, by, bw, bh, role[b], "left", port_in[j])
            gap = ax + _column_half(pos, ax) + GAP_X / 2 + shift
            pts = [p, (gap, p[1]), (gap, q[1]), q] if abs(p[1] - q[1]) > 1 else [p, q]
        else:  # around: out of the right side into the gap beside the column, along a lane under everything,
            # up the gap before b's column and into b's left side
            lanes_used += 1
            lane = bottom + 24 + 14 * lanes_used
            shift = 8.0 * (lanes_used % 10) - 36.0
            p = _reach(ax, ay, aw, ah, role[a], "right", port_out[j])
            q = _reach(bx, by, bw, bh, role[b], "left", port_in[j])
            gap_a = ax + _column_half(pos, ax) + GAP_X / 2 + shift
            gap_b = bx - _column_half(pos, bx) - GAP_X / 2 - shift
            pts = [p, (gap_a, p[1]), (gap_a, lane), (gap_b, lane), (gap_b, q[1]), q]
        if g.directed:
            pts[-1] = _shorten(pts[-2], pts[-1], 2.0)
        paths.append(pts)
        d = "M " + " L ".join(f"{x:.1f} {y:.1f}" for x, y in pts)
        body.append(f'<path d="{d}" fill="none" stroke="#343a40" stroke-width="1.5"{head}/>')
        if g.directed and style == 1:
            body.append(_triangle(pts[-2], pts[-1]))
    boxes = [(x - w / 2 - 14, y - h / 2 - 14, x + w / 2 + 14, y + h / 2 + 14) for x, y, w, h in pos.values()]
    for j, (_, _, lab) in enumerate(g.edges):
        if lab:
            mx, my = _label_spot(j, paths, 7.0 * len(lab) + 8, boxes)
            w = 7.0 * len(lab) + 8
            edge_labels.append(
                f'<rect x="{mx - w / 2:.1f}" y="{my - 9:.1f}" width="{w:.1f}" height="18" fill="white"/>'
                f'<text x="{mx:.1f}" y="{my + 4:.1f}" text-anchor="middle" font-size="12">{escape(lab)}</text>'
            )
    width = right + GAP_X / 2 + 60
    height = bottom + 60 + 14 * lanes_used
    defs = ""
    if head:
        defs = (
            '<defs><marker id="head" markerWidth="10" markerHeight="7" refX="10" refY="3.5" orient="auto">'
            '<polygon points="0 0, 10 3.5, 0 7" fill="#343a40"/></marker></defs>'
        )
    return "\n".join(
        [
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}"'
            f' viewBox="0 0 {width:.0f} {height:.0f}" font-family="Helvetica, Arial, sans-serif" font-size="13">',
            defs,
            '<rect width="100%" height="100%" fill="white"/>',
            '<g fill="white" stroke="#343a40" stroke-width="1.5">'
            if style != 2
            else '<g fill="#e7f5ff" stroke="#1c7ed6" stroke-width="1.5">',
            *[b for b in body if not b.startswith("<path")],
            "</g>",
            '<g fill="black" stroke="none">',
            *[b for b in body if b.startswith("<path")],
            *edge_labels,
            "</g>",
            "</svg>",
        ]
    )


def _column_half(pos: dict[str, tuple[float, float, float, float]], cx: float) -> float:
    return max(w / 2 for x, _, w, _ in pos.values() if abs(x - cx) < 1) + 14.0


def _ports(
    ends: list[tuple[int, str, float]], pos: dict[str, tuple[float, float, float, float]], decisions: set[str]
) -> dict[int, float]:
    """Edge -> how far off its node's centre line it leaves (or enters): the edges at one side of a
    node spread out in the order of the heights they go to, so no two share a stretch of line."""
    by_node: dict[str, list[tuple[float, int]]] = {}
    for j, node, other_y in ends:
        by_node.setdefault(node, []).append((other_y, j))
    out = {}
    for node, items in by_node.items():
        h = pos[node][3] + (28.0 if node in decisions else 0.0)
        step = min(20.0, (h - 12) / max(1, len(items) - 1))
        for k, (_, j) in enumerate(sorted(items)):
            out[j] = (k - (len(items) - 1) / 2) * step
    return out


def _label_spot(
    j: int, paths: list[list[tuple[float, float]]], width: float, boxes: list[tuple[float, float, float, float]]
) -> tuple[float, float]:
    """The middle of the piece of edge j that fits the label and lies farthest from every other edge
    (a person puts a label where nobody can take it for another line's)."""
    best, spot = -1.0, paths[j][0]
    for p, q in zip(paths[j], paths[j][1:]):
        fits = math.dist(p, q) >= width + 10 if abs(p[1] - q[1]) < 1 else math.dist(p, q) >= 30
        mid = ((p[0] + q[0]) / 2, (p[1] + q[1]) / 2)
        clear = min((_to_path(mid, other) for k, other in enumerate(paths) if k != j), default=1e9)
        free = not any(b[0] <= mid[0] <= b[2] and b[1] <= mid[1] <= b[3] for b in boxes)
        score = clear + (1e6 if fits else 0.0) + (1e7 if free else 0.0)
        if score > best:
            best, spot = score, mid
    return spot


def _to_path(p: tuple[float, float], pts: list[tuple[float, float]]) -> float:
    best = math.inf
    for a, b in zip(pts, pts[1:]):
        dx, dy = b[0] - a[0], b[1] - a[1]
        t = max(0.0, min(1.0, ((p[0] - a[0]) * dx + (p[1] - a[1]) * dy) / ((dx * dx + dy * dy) or 1.0)))
        best = min(best, math.dist(p, (a[0] + t * dx, a[1] + t * dy)))
    return best


def _clear(pos: dict[str, tuple[float, float, float, float]], a: str, b: str) -> bool:
    """No other node's box lies within the band between a and b (a straight or one-bend edge fits)."""
    ax, ay = pos[a][:2]
    bx, by = pos[b][:2]
    x0, x1 = sorted((ax, bx))
    y0, y1 = sorted((ay, by))
    for k, (cx, cy, w, h) in pos.items():
        if k in (a, b):
            continue
        if cx + w / 2 + 20 > x0 and cx - w / 2 - 20 < x1 and cy + h / 2 + 20 > y0 and cy - h / 2 - 20 < y1:
            return False
    return True


def _shorten(p: tuple[float, float], q: tuple[float, float], by: float) -> tuple[float, float]:
    n = math.dist(p, q) or 1.0
    return (q[0] - by * (q[0] - p[0]) / n, q[1] - by * (q[1] - p[1]) / n)


def _triangle(p: tuple[float, float], q: tuple[float, float]) -> str:
    """An arrowhead drawn as its own triangle with its tip at q."""
    n = math.dist(p, q) or 1.0
    ux, uy = (q[0] - p[0]) / n, (q[1] - p[1]) / n
    bx, by = q[0] - 10 * ux, q[1] - 10 * uy
    pts = [(q[0], q[1]), (bx - 4 * uy, by + 4 * ux), (bx + 4 * uy, by - 4 * ux)]
    return '<path d="M ' + " L ".join(f"{x:.1f} {y:.1f}" for x, y in pts) + ' Z" fill="#343a40" stroke="none"/>'


STYLES = (0, 1, 2)
