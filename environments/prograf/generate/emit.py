"""Code writers for reference solutions and mutants: a drawing in, SVG / DOT / Mermaid / schemdraw out.

A drawing is the spec as drawn (coordinates for geometry, a netlist for circuits, a graph for
flowcharts and diagrams) plus what a mutant changed (a label left off, a stroke made white, a
segment moved off the canvas). Everything is deterministic: same drawing, same bytes.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from html import escape
from typing import Required, TypedDict

XY = tuple[float, float]
CANVAS = 400.0
MARGIN = 48.0


def fmt(v: float) -> str:
    return f"{v:.1f}".rstrip("0").rstrip(".")


# ---------------------------------------------------------------------- geometry
@dataclass
class GeometryDrawing:
    points: dict[str, XY]
    segments: list[tuple[str, str]]
    circles: list[tuple[str, str]]
    labelled: list[str]  # points drawn with a dot and their letter
    length_labels: dict[str, str] = field(default_factory=dict)
    segment_style: dict[tuple[str, str], str] = field(default_factory=dict)  # extra attributes (mutants)
    segment_shift: dict[tuple[str, str], float] = field(default_factory=dict)  # moved by dx (mutants)


def fit(points: dict[str, XY], circles: list[tuple[str, str]]) -> dict[str, XY]:
    """Scale and move the figure (points and circles) into the canvas, keeping its shape."""
    xs, ys = [p[0] for p in points.values()], [p[1] for p in points.values()]
    for o, a in circles:
        r = math.dist(points[o], points[a])
        xs += [points[o][0] - r, points[o][0] + r]
        ys += [points[o][1] - r, points[o][1] + r]
    span = max(max(xs) - min(xs), max(ys) - min(ys), 1e-9)
    k = (CANVAS - 2 * MARGIN) / span
    ox = MARGIN + ((CANVAS - 2 * MARGIN) - k * (max(xs) - min(xs))) / 2
    oy = MARGIN + ((CANVAS - 2 * MARGIN) - k * (max(ys) - min(ys))) / 2
    # math coordinates have y up; SVG has y down
    return {n: (ox + k * (x - min(xs)), oy + k * (max(ys) - y)) for n, (x, y) in points.items()}


def geometry_svg(d: GeometryDrawing) -> str:
    pts = fit(d.points, d.circles)
    cx = sum(p[0] for p in pts.values()) / len(pts)
    cy = sum(p[1] for p in pts.values()) / len(pts)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {fmt(CANVAS)} {fmt(CANVAS)}" width="400" height="400">',
           '<g stroke="black" stroke-width="2" fill="none">']
    for a, b in d.segments:
        (x1, y1), (x2, y2) = pts[a], pts[b]
        dx = d.segment_shift.get((a, b), 0.0)
        style = d.segment_style.get((a, b), "")
        out.append(f'<line x1="{fmt(x1 + dx)}" y1="{fmt(y1)}" x2="{fmt(x2 + dx)}" y2="{fmt(y2)}"{style}/>')
    for o, a in d.circles:
        out.append(f'<circle cx="{fmt(pts[o][0])}" cy="{fmt(pts[o][1])}" r="{fmt(math.dist(pts[o], pts[a]))}"/>')
    out.append('</g><g fill="black" font-family="sans-serif" font-size="16" text-anchor="middle">')
    for name in d.labelled:
        x, y = pts[name]
        ux, uy = x - cx, y - cy
        n = math.hypot(ux, uy) or 1.0
        lx, ly = x + 16 * ux / n, y + 16 * uy / n
        out.append(f'<circle cx="{fmt(x)}" cy="{fmt(y)}" r="3"/><text x="{fmt(lx)}" y="{fmt(ly + 6)}">{escape(name)}</text>')
    for key, text in d.length_labels.items():
        (x1, y1), (x2, y2) = pts[key[0]], pts[key[1]]
        mx, my = (x1 + x2) / 2, (y1 + y2) / 2
        nx, ny = -(y2 - y1), x2 - x1
        n = math.hypot(nx, ny) or 1.0
        if (mx + nx / n - cx) ** 2 + (my + ny / n - cy) ** 2 < (mx - cx) ** 2 + (my - cy) ** 2:
            nx, ny = -nx, -ny  # outside the figure
        out.append(f'<text x="{fmt(mx + 18 * nx / n)}" y="{fmt(my + 18 * ny / n + 5)}" font-size="13">{escape(text)}</text>')
    out.append("</g></svg>")
    return "\n".join(out)


# ---------------------------------------------------------------------- circuits
SCHEMDRAW_TYPES = {"resistor": "Resistor", "capacitor": "Capacitor", "inductor": "Inductor",
                   "voltage_source": "SourceV", "current_source": "SourceI", "diode": "Diode", "led": "LED",
                   "lamp": "Lamp", "switch": "Switch", "fuse": "Fuse"}


@dataclass
class CircuitPart:
    id: str
    kind: str
    value: str | None
    nets: tuple[str, str]
    named: bool = True  # mutants: drawn without its name


class Element(TypedDict, total=False):
    """One schemdraw element as schemdraw JSON writes it (`type` always; the rest where it applies)."""

    type: Required[str]
    at: list[float]
    to: list[float]
    label: str
    value: str


def circuit_layout(parts: list[CircuitPart], ground: str | None) -> list[Element]:
    """Elements on a bus layout: net i is a vertical bus at x = 3i; part k is row y = -2k, drawn
    horizontally from its first net's bus to its second's (crossing a bus is not a junction)."""
    order: list[str] = []
    for p in parts:
        for n in p.nets:
            if n not in order:
                order.append(n)
    if ground and ground not in order:
        order.append(ground)
    x = {n: 3.0 * i for i, n in enumerate(order)}
    elements: list[Element] = []
    rows: dict[str, list[float]] = {n: [] for n in order}
    for k, p in enumerate(parts):
        y = -2.0 * k
        a, b = p.nets
        el: Element = {"type": SCHEMDRAW_TYPES.get(p.kind, p.kind), "at": [x[a], y], "to": [x[b], y]}
        if a == b:  # a shorted part: a loop out and back to its one bus
            el["to"] = [x[a], y - 1.0]
            rows[a].append(y - 1.0)
        if p.named:
            el["label"] = p.id
        if p.value:
            el["value"] = p.value
        elements.append(el)
        rows[a].append(y)
        rows[b].append(y)
    if ground:
        rows[ground].append(-2.0 * len(parts))
    for n in order:
        ys = sorted(set(rows[n]))
        if len(ys) > 1:
            elements.append({"type": "Line", "at": [x[n], ys[-1]], "to": [x[n], ys[0]]})
    if ground:
        elements.append({"type": "Ground", "at": [x[ground], -2.0 * len(parts)]})
    return elements


def schemdraw_json(parts: list[CircuitPart], ground: str | None) -> str:
    return json.dumps({"elements": circuit_layout(parts, ground)}, ensure_ascii=False)


def schemdraw_py(parts: list[CircuitPart], ground: str | None) -> str:
    lines = ["import schemdraw", "import schemdraw.elements as elm", "", "with schemdraw.Drawing() as d:"]
    for el in circuit_layout(parts, ground):
        call = f"elm.{el['type']}()"
        for key, xy in (("at", el.get("at")), ("to", el.get("to"))):
            if xy is not None:
                call += f".{key}(({fmt(xy[0])}, {fmt(xy[1])}))"
        label = " ".join(s for s in (el.get("label"), el.get("value")) if s is not None)
        if label:
            call += f".label({label!r})"
        lines.append(f"    d += {call}")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------- graphs
DOT_SHAPES = {"terminator": "ellipse", "process": "box", "decision": "diamond", "io": "parallelogram",
              "state": "ellipse", None: "box"}
MERMAID_SHAPES = {"terminator": ("([", "])"), "process": ("[", "]"), "decision": ("{", "}"), "io": ("[/", "/]"),
                  "state": ("(", ")"), None: ("[", "]")}


NodeRow = tuple[str, str, str | None]  # id, label, role
EdgeRow = tuple[str, str, str | None]  # src, dst, label


@dataclass
class GraphDrawing:
    title: str
    directed: bool
    nodes: list[NodeRow]
    edges: list[EdgeRow]
    clusters: list[tuple[str, str, list[str]]]  # id, title, members
    shape_override: dict[str, str] = field(default_factory=dict)  # node id -> dot shape (mutants)


def dot_quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def graph_dot(g: GraphDrawing) -> str:
    head = "digraph" if g.directed else "graph"
    op = "->" if g.directed else "--"
    out = [f"{head} G {{", '  node [fontname="Helvetica"];']
    in_cluster = {m for _, _, members in g.clusters for m in members}
    for nid, label, role in g.nodes:
        if nid not in in_cluster:
            out.append(f"  {nid} [label={dot_quote(label)}, shape={g.shape_override.get(nid, DOT_SHAPES[role])}];")
    for cid, title, members in g.clusters:
        out.append(f"  subgraph cluster_{cid} {{")
        out.append(f"    label={dot_quote(title)};")
        for nid, label, role in g.nodes:
            if nid in members:
                out.append(f"    {nid} [label={dot_quote(label)}, shape={g.shape_override.get(nid, DOT_SHAPES[role])}];")
        out.append("  }")
    for a, b, edge_label in g.edges:
        out.append(f"  {a} {op} {b}" + (f" [label={dot_quote(edge_label)}];" if edge_label else ";"))
    out.append("}")
    return "\n".join(out)


def mermaid_text(text: str) -> str:
    return '"' + text.replace('"', "'") + '"'


MERMAID_OVERRIDE = {"box": ("[", "]"), "ellipse": ("([", "])"), "diamond": ("{", "}"), "parallelogram": ("[/", "/]")}


def graph_mermaid(g: GraphDrawing) -> str:
    out = ["flowchart TD"]
    in_cluster = {m for _, _, members in g.clusters for m in members}

    def node(nid: str, label: str, role: str | None) -> str:
        o, c = MERMAID_OVERRIDE[g.shape_override[nid]] if nid in g.shape_override else MERMAID_SHAPES[role]
        return f"{nid}{o}{mermaid_text(label)}{c}"

    for nid, label, role in g.nodes:
        if nid not in in_cluster:
            out.append(f"  {node(nid, label, role)}")
    for cid, title, members in g.clusters:
        out.append(f"  subgraph {cid} [{mermaid_text(title)}]")
        out += [f"    {node(nid, label, role)}" for nid, label, role in g.nodes if nid in members]
        out.append("  end")
    arrow = "-->" if g.directed else "---"
    for a, b, edge_label in g.edges:
        out.append(f"  {a} {arrow}|{mermaid_text(edge_label)}| {b}" if edge_label else f"  {a} {arrow} {b}")
    return "\n".join(out)


# -- SVG: a simple layout of our own (no Graphviz binary is needed)
NODE_H = 44.0
ROW = 110.0


def node_width(label: str) -> float:
    return max(110.0, 8.5 * len(label) + 36)


def layers(g: GraphDrawing) -> dict[str, int]:
    """Longest-path layers over the graph without its back edges (found by DFS in node order)."""
    ids = [n[0] for n in g.nodes]
    succ: dict[str, list[str]] = {i: [] for i in ids}
    for a, b, _ in g.edges:
        succ[a].append(b)
    state: dict[str, int] = {}
    back: set[tuple[str, str]] = set()

    def dfs(u: str) -> None:
        state[u] = 1
        for v in succ[u]:
            if state.get(v) == 1:
                back.add((u, v))
            elif v not in state:
                dfs(v)
        state[u] = 2

    for i in ids:
        if i not in state:
            dfs(i)
    layer = {i: 0 for i in ids}
    for _ in ids:
        for a, b, _ in g.edges:
            if (a, b) not in back and layer[b] < layer[a] + 1:
                layer[b] = layer[a] + 1
    return layer


def positions(g: GraphDrawing) -> dict[str, tuple[float, float]]:
    """Node centres: clusters as columns (members stacked), else layers as rows."""
    pos: dict[str, tuple[float, float]] = {}
    if g.clusters:
        in_cluster = {m for _, _, members in g.clusters for m in members}
        columns = [members for _, _, members in g.clusters]
        rest = [n[0] for n in g.nodes if n[0] not in in_cluster]
        if rest:
            columns = [rest] + columns
        labels = {n[0]: n[1] for n in g.nodes}
        x = 40.0
        for col in columns:
            w = max(node_width(labels[m]) for m in col)
            for k, m in enumerate(col):
                pos[m] = (x + 20 + w / 2, 100 + k * ROW)
            x += w + 120
        return pos
    layer = layers(g)
    rows: dict[int, list[str]] = {}
    for nid, _, _ in g.nodes:
        rows.setdefault(layer[nid], []).append(nid)
    labels = {n[0]: n[1] for n in g.nodes}
    width = max(sum(node_width(labels[m]) + 60 for m in row) for row in rows.values())
    for r, row in rows.items():
        total = sum(node_width(labels[m]) + 60 for m in row)
        x = 40 + (width - total) / 2
        for m in row:
            w = node_width(labels[m])
            pos[m] = (x + 30 + w / 2, 60 + r * ROW)
            x += w + 60
    return pos


def _shape_svg(role: str | None, override: str | None, cx: float, cy: float, w: float) -> str:
    h = NODE_H
    kind = override or {"terminator": "ellipse", "state": "ellipse", "decision": "diamond",
                        "io": "parallelogram"}.get(role or "", "box")
    if kind == "ellipse":
        return f'<ellipse cx="{fmt(cx)}" cy="{fmt(cy)}" rx="{fmt(w / 2)}" ry="{fmt(h / 2 + 4)}"/>'
    if kind == "diamond":
        pts = [(cx, cy - h / 2 - 12), (cx + w / 2 + 10, cy), (cx, cy + h / 2 + 12), (cx - w / 2 - 10, cy)]
    elif kind == "parallelogram":
        pts = [(cx - w / 2 + 12, cy - h / 2), (cx + w / 2 + 12, cy - h / 2), (cx + w / 2 - 12, cy + h / 2),
               (cx - w / 2 - 12, cy + h / 2)]
    else:
        return f'<rect x="{fmt(cx - w / 2)}" y="{fmt(cy - h / 2)}" width="{fmt(w)}" height="{fmt(h)}"/>'
    return '<polygon points="' + " ".join(f"{fmt(x)},{fmt(y)}" for x, y in pts) + '"/>'


def _border(cx: float, cy: float, w: float, tx: float, ty: float) -> XY:
    """Where the line from a node's centre towards (tx, ty) leaves its box (with a small gap)."""
    dx, dy = tx - cx, ty - cy
    if dx == 0 and dy == 0:
        return cx, cy
    sx = (w / 2 + 8) / abs(dx) if dx else math.inf
    sy = (NODE_H / 2 + 8) / abs(dy) if dy else math.inf
    s = min(sx, sy)
    return cx + dx * s, cy + dy * s


def _crosses(p: XY, q: XY, box: tuple[float, float, float, float]) -> bool:
    """Does segment pq pass through the box? (sampled: the boxes are far larger than the step)"""
    steps = max(2, int(math.dist(p, q) / 4))
    return any(box[0] <= p[0] + (q[0] - p[0]) * k / steps <= box[2] and box[1] <= p[1] + (q[1] - p[1]) * k / steps <= box[3]
               for k in range(1, steps))


def graph_svg(g: GraphDrawing) -> str:
    pos = positions(g)
    widths = {n[0]: node_width(n[1]) for n in g.nodes}
    shapes = {i: (x - widths[i] / 2 - 12, y - NODE_H / 2 - 12, x + widths[i] / 2 + 12, y + NODE_H / 2 + 12)
              for i, (x, y) in pos.items()}
    boxes = {i: (b[0] - 2, b[1] - 2, b[2] + 2, b[3] + 2) for i, b in shapes.items()}
    body = ['<g stroke="black" stroke-width="2" fill="white">']
    texts = []
    for _, title, members in g.clusters:
        x0 = min(boxes[m][0] for m in members) - 16
        y0 = min(boxes[m][1] for m in members) - 40
        x1 = max(boxes[m][2] for m in members) + 16
        y1 = max(boxes[m][3] for m in members) + 12
        body.append(f'<rect x="{fmt(x0)}" y="{fmt(y0)}" width="{fmt(x1 - x0)}" height="{fmt(y1 - y0)}" fill="none" stroke-dasharray="6 4"/>')
        texts.append(f'<text x="{fmt((x0 + x1) / 2)}" y="{fmt(y0 + 22)}">{escape(title)}</text>')
    for nid, label, role in g.nodes:
        x, y = pos[nid]
        body.append(_shape_svg(role, g.shape_override.get(nid), x, y, widths[nid]))
        texts.append(f'<text x="{fmt(x)}" y="{fmt(y + 5)}">{escape(label)}</text>')
    body.append('</g><g stroke="black" stroke-width="2" fill="none">')
    pairs = {(a, b) for a, b, _ in g.edges}
    marker = ' marker-end="url(#arrow)"' if g.directed else ""
    channel = max(b[2] for b in boxes.values()) + 10
    routed = 0
    paths: list[list[XY]] = []
    for a, b, _ in g.edges:
        (ax, ay), (bx, by) = pos[a], pos[b]
        shift = 7.0 if (b, a) in pairs else 0.0  # two arrows between one pair: side by side
        n = math.hypot(bx - ax, by - ay) or 1.0
        ox, oy = -(by - ay) / n * shift, (bx - ax) / n * shift
        x1, y1 = _border(ax, ay, widths[a], bx, by)
        x2, y2 = _border(bx, by, widths[b], ax, ay)
        p, q = (x1 + ox, y1 + oy), (x2 + ox, y2 + oy)
        if not any(_crosses(p, q, box) for k, box in boxes.items() if k not in (a, b)):
            paths.append([p, q])
            body.append(f'<line x1="{fmt(p[0])}" y1="{fmt(p[1])}" x2="{fmt(q[0])}" y2="{fmt(q[1])}"{marker}/>')
        else:  # around the right of everything, in a lane of its own
            routed += 1
            lane = channel + 16 * routed
            dy = 5.0 * (routed % 3) - 5.0
            pts = [(ax + widths[a] / 2 + 14, ay + dy), (lane, ay + dy), (lane, by - dy), (bx + widths[b] / 2 + 14, by - dy)]
            paths.append(pts)
            body.append('<polyline points="' + " ".join(f"{fmt(x)},{fmt(y)}" for x, y in pts) + f'"{marker}/>')
    for k, (_, _, edge_label) in enumerate(g.edges):
        if edge_label:
            lx, ly = _label_spot(k, paths, list(boxes.values()))
            texts.append(f'<text x="{fmt(lx)}" y="{fmt(ly + 5)}">{escape(edge_label)}</text>')
    body += ['</g><g font-family="sans-serif" font-size="14" text-anchor="middle">', *texts, "</g>"]
    right = max(max(b[2] for b in boxes.values()) + 60, channel + 16 * routed + 40)
    bottom = max(b[3] for b in boxes.values()) + 60
    defs = ('<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="8" markerHeight="8" '
            'orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="black"/></marker></defs>')
    return "\n".join([f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {fmt(right)} {fmt(bottom)}" '
                      f'width="{fmt(right)}" height="{fmt(bottom)}">', defs, *body, "</svg>"])


def _path_distance(p: XY, pts: list[XY]) -> float:
    best = math.inf
    for a, b in zip(pts, pts[1:]):
        dx, dy = b[0] - a[0], b[1] - a[1]
        n2 = dx * dx + dy * dy or 1.0
        t = max(0.0, min(1.0, ((p[0] - a[0]) * dx + (p[1] - a[1]) * dy) / n2))
        best = min(best, math.dist(p, (a[0] + t * dx, a[1] + t * dy)))
    return best


def _label_spot(k: int, paths: list[list[XY]], boxes: list[tuple[float, float, float, float]]) -> XY:
    """A spot beside edge k, outside every node box, as much nearer to edge k than to any other edge
    as can be found (a reader -- and the verifier -- attaches a label to the nearest edge)."""
    own = paths[k]
    best, spot = -math.inf, ((own[0][0] + own[1][0]) / 2 + 11, (own[0][1] + own[1][1]) / 2)
    for a, b in zip(own, own[1:]):
        n = math.hypot(b[0] - a[0], b[1] - a[1]) or 1.0
        nx, ny = -(b[1] - a[1]) / n, (b[0] - a[0]) / n
        for t in (0.5, 0.4, 0.6, 0.3, 0.7, 0.2, 0.8, 0.1, 0.9):
            for off in (11.0, -11.0, 15.0, -15.0, 20.0, -20.0):
                c = (a[0] + (b[0] - a[0]) * t + nx * off, a[1] + (b[1] - a[1]) * t + ny * off)
                if any(bx[0] - 4 <= c[0] <= bx[2] + 4 and bx[1] - 4 <= c[1] <= bx[3] + 4 for bx in boxes):
                    continue
                others = [_path_distance(c, p) for j, p in enumerate(paths) if j != k]
                margin = (min(others) if others else math.inf) - _path_distance(c, own)
                if margin > 8:
                    return c
                if margin > best:
                    best, spot = margin, c
    return spot
