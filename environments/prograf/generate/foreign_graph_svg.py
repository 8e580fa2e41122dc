"""Flowcharts and diagrams drawn as SVG a second way (issue 39, the foreign-style corpus).

Not `emit.py`'s SVG writer, nor its layout: a left-to-right layered grid (layers are columns,
clusters are rows), nodes as translated `<g>`s, ovals as pills (`rx` half the height) or ellipses,
parallelograms as a skewed `<rect>` or a `<path>`, long labels in two tspans, edges as orthogonal
`<path>`s through the gaps between nodes, arrowheads by a `<polygon>` marker or by a triangle drawn
at the end, edge labels on a white backdrop on the line. The graph and its faults, and the styles
that rotate over the tasks, are `foreign_graph.py`'s.
"""

from __future__ import annotations

import math
import random
from html import escape

from environments.prograf.generate.foreign_graph import Graph


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
    role = {n[0]: g.role_of(n[0], n[2]) for n in g.nodes}
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
    for j, (_, _, elab) in enumerate(g.edges):
        if elab:
            mx, my = _label_spot(j, paths, 7.0 * len(elab) + 8, boxes)
            w = 7.0 * len(elab) + 8
            edge_labels.append(
                f'<rect x="{mx - w / 2:.1f}" y="{my - 9:.1f}" width="{w:.1f}" height="18" fill="white"/>'
                f'<text x="{mx:.1f}" y="{my + 4:.1f}" text-anchor="middle" font-size="12">{escape(elab)}</text>'
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
