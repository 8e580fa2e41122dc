"""Nodes, edges and clusters read off an SVG scene's shapes, lines and texts.

A closed shape that holds other shapes is a cluster, any other (not a dot, not an arrowhead) is
a node; a text belongs to the smallest node its centre lies in, else to the nearest edge (its
label), else to the smallest cluster around it (the cluster's title). Connected line pieces are
chained; a chain whose two ends touch two nodes' boxes is an edge (VFig's rule: an arrow belongs
to the nearest shape), directed by its markers or by a small mark drawn at one end (a triangle, or
a dot, bar, box or diamond as Graphviz draws its heads). A filled patch with no outline that a line
runs through is a label's backdrop, not a node. Every slack in pixels is multiplied by the scene's
units per pixel, so a drawing in a unit-scale viewBox reads as the same drawing at 400 pixels.
"""

from __future__ import annotations

import math

from environments.prograf.parse.binding import bind
from environments.prograf.parse.scene import Box, Cluster, Edge, Node, Scene, Segment, Shape, Text, box_contains, box_distance
from environments.prograf.parse.svg import clip

Point = tuple[float, float]
HEAD_MARK = 14.0  # pixels: a mark no larger than this drawn at a line's end is a head (split_shapes)


def tolerance(scene: Scene) -> float:
    """How far an arrow's end may stop short of a box: 3% of the canvas diagonal, >= 15 pixels."""
    c = scene.canvas or (0.0, 0.0, 400.0, 400.0)
    return max(15.0 * scene.px, 0.03 * math.dist((c[0], c[1]), (c[2], c[3])))


def _size(box: Box) -> tuple[float, float]:
    return box[2] - box[0], box[3] - box[1]


def _area(box: Box) -> float:
    w, h = _size(box)
    return w * h


def _inside(inner: Box, outer: Box, u: float = 1.0) -> bool:
    return outer[0] - u <= inner[0] and outer[1] - u <= inner[1] and inner[2] <= outer[2] + u and inner[3] <= outer[3] + u


def split_shapes(scene: Scene) -> tuple[list[Shape], list[Shape], list[Shape]]:
    """(nodes, clusters, arrowheads) among the scene's closed shapes. A head drawn as its own shape is a
    triangle of at most 24 pixels, or any mark of at most HEAD_MARK: Graphviz draws an edge's head in
    the edge's group as a polygon or an ellipse (`arrowhead=dot` a filled circle of radius 4, `odot` an
    open one, `box`, `diamond`, `tee`, `vee`, `inv` polygons of 2 to 12 points across), and a head of
    another shape is a head, as the DOT reader reads it. No node is that small: it could hold no label."""
    u = scene.px
    heads = [s for s in scene.shapes
             if max(_size(s.box)) <= (24 if s.family == "triangle" else HEAD_MARK) * u]
    shape_elements = {s.element for s in scene.shapes}
    lines = [g for g in scene.segments if g.element not in shape_elements]
    candidates = [s for s in scene.shapes if s not in heads and min(_size(s.box)) >= 8 * u
                  and not (not s.outlined and any(_crosses(g, s.box) for g in lines))]
    clusters: list[Shape] = []
    nodes: list[Shape] = []
    for s in candidates:
        holds = any(o is not s and _inside(o.box, s.box, u) and _area(s.box) > 1.2 * _area(o.box) for o in candidates)
        (clusters if holds else nodes).append(s)
    return nodes, clusters, heads


def _crosses(seg: Segment, box: Box) -> bool:
    """The segment runs through the box's inside (an edge under its label), not just to its border."""
    x0, y0, x1, y1 = box
    w, h = x1 - x0, y1 - y0
    return clip(seg, (x0 + 0.2 * w, y0 + 0.2 * h, x1 - 0.2 * w, y1 - 0.2 * h)) is not None


def chains(segments: list[Segment], boxes: list[Box], tol: float, u: float = 1.0) -> list[tuple[list[Point], bool, bool]]:
    """Line pieces joined into polylines: (points, arrow at the start, arrow at the end). The pieces
    of one element (a polyline, a path) always join; pieces of different elements join where
    exactly two meet, with no arrowhead there, away from every node (a bend, not an endpoint)."""
    pieces: list[tuple[list[Point], bool, bool]] = []
    last_element = None
    for s in segments:
        start, end = (s.x1, s.y1), (s.x2, s.y2)
        if pieces and s.element == last_element and math.dist(pieces[-1][0][-1], start) <= 1e-6:
            pts, head_start, _ = pieces[-1]
            pieces[-1] = (pts + [end], head_start, s.arrow_end)
        else:
            pieces.append(([start, end], s.arrow_start, s.arrow_end))
        last_element = s.element
    merged = True
    while merged:
        merged = False
        for i, (pa, sa, ea) in enumerate(pieces):
            for j in range(i + 1, len(pieces)):
                pb, sb, eb = pieces[j]
                joint = _joint(pa, pb, u)
                if (joint is None or _degree(pieces, joint, u) != 2 or _head_at(pieces[i], joint, u)
                        or _head_at(pieces[j], joint, u) or any(box_distance(b, *joint) <= tol for b in boxes)):
                    continue
                if math.dist(pa[-1], pb[0]) <= 1.5 * u:
                    new = (pa + pb[1:], sa, eb)
                elif math.dist(pa[-1], pb[-1]) <= 1.5 * u:
                    new = (pa + pb[::-1][1:], sa, sb)
                elif math.dist(pa[0], pb[-1]) <= 1.5 * u:
                    new = (pb + pa[1:], sb, ea)
                else:
                    new = (pb[::-1] + pa[1:], eb, ea)
                pieces[i] = new
                del pieces[j]
                merged = True
                break
            if merged:
                break
    return pieces


def _head_at(piece: tuple[list[Point], bool, bool], p: Point, u: float) -> bool:
    pts, head_start, head_end = piece
    return (head_start and math.dist(pts[0], p) <= 1.5 * u) or (head_end and math.dist(pts[-1], p) <= 1.5 * u)


def _joint(a: list[Point], b: list[Point], u: float) -> Point | None:
    for p in (a[0], a[-1]):
        for q in (b[0], b[-1]):
            if math.dist(p, q) <= 1.5 * u:
                return p
    return None


def _degree(pieces: list[tuple[list[Point], bool, bool]], p: Point, u: float) -> int:
    return sum((math.dist(p, q[0]) <= 1.5 * u) + (math.dist(p, q[-1]) <= 1.5 * u) for q, _, _ in pieces)


def point_polyline_distance(p: Point, pts: list[Point]) -> float:
    best = math.inf
    for a, b in zip(pts, pts[1:]):
        dx, dy = b[0] - a[0], b[1] - a[1]
        length2 = dx * dx + dy * dy
        t = 0.0 if length2 == 0 else max(0.0, min(1.0, ((p[0] - a[0]) * dx + (p[1] - a[1]) * dy) / length2))
        best = min(best, math.dist(p, (a[0] + t * dx, a[1] + t * dy)))
    return best


def extract_graph(scene: Scene) -> None:
    """Fill the scene's nodes, edges and clusters from its shapes, lines and texts."""
    nodes, clusters, heads = split_shapes(scene)
    tol, u = tolerance(scene), scene.px
    shape_elements = {s.element for s in scene.shapes}
    node_texts: dict[int, list[tuple[float, float, str]]] = {i: [] for i in range(len(nodes))}
    free = []
    for t in scene.texts:
        holders = [i for i, n in enumerate(nodes) if box_contains(n.box, t.x, t.y, pad=2 * u)]
        if holders:
            node_texts[min(holders, key=lambda i: _area(nodes[i].box))].append((t.y, t.x, t.text))
        else:
            free.append(t)
    scene.nodes = [Node(key=f"n{i}", label=" ".join(x[2] for x in sorted(node_texts[i])),
                        shape=n.family, box=n.box) for i, n in enumerate(nodes)]
    lines = [s for s in scene.segments if s.element not in shape_elements]
    found: list[tuple[list[Edge], list[Point]]] = []  # the edges one chain makes (two for a double arrow)
    for pts, head_start, head_end in chains(lines, [n.box for n in scene.nodes if n.box], tol, u):
        head_start = head_start or _near_head(pts[0], heads, u)
        head_end = head_end or _near_head(pts[-1], heads, u)
        a, b = _node_at(pts[0], scene.nodes, tol), _node_at(pts[-1], scene.nodes, tol)
        if a is None or b is None or a == b:
            continue
        if head_start != head_end:
            made = [Edge(a, b) if head_end else Edge(b, a)]
        else:
            made = [Edge(a, b), Edge(b, a)] if head_start else [Edge(a, b, directed=False)]
        found.append((made, pts))
    titles = [t for t in free if _is_title(t.x, t.y, clusters, scene.nodes, u)]
    labels, leftover = _edge_labels(scene, [t for t in free if t not in titles], found, 2 * tol, u)
    leftover = titles + leftover
    for k, (made, _) in enumerate(found):
        for e in made:
            e.label = " ".join(x[2] for x in sorted(labels.get(k, [])))
    scene.edges = [e for made, _ in found for e in made]
    for i, c in enumerate(sorted(clusters, key=lambda c: _area(c.box))):
        inside = sorted((t.y, t.x, t.text) for t in leftover if box_contains(c.box, t.x, t.y, pad=2 * u))
        leftover = [t for t in leftover if not box_contains(c.box, t.x, t.y, pad=2 * u)]
        members = {n.key for n in scene.nodes if n.box and _inside(n.box, c.box, u)}
        scene.clusters.append(Cluster(key=f"c{i}", label=" ".join(x[2] for x in inside), members=members))
    for n in scene.nodes:
        around = [c for c in scene.clusters if n.key in c.members]
        n.cluster = around[0].key if around else None  # clusters are sorted smallest first


def _edge_labels(scene: Scene, texts: list[Text], found: list[tuple[list[Edge], list[Point]]], reach: float,
                 u: float) -> tuple[dict[int, list[tuple[float, float, str]]], list[Text]]:
    """Free texts bound to the edges' lines as one assignment (`binding.bind`, cost the distance to
    the line, out of reach past `reach`): one label per edge, so of two labels near one arrow the
    one an unlabelled arrow nearby can take goes there. The lines of one label (stacked, overlapping)
    are bound together. A label the assignment leaves over while an edge is in reach (more labels
    than edges there: a label at both ends of one arrow) joins its nearest edge; one with no edge in
    reach is left for the clusters. A near-tie is noted on the scene. Returns each chain's label
    lines (y, x, text) and the texts left over."""
    blocks = _label_blocks(texts, u)
    dist = [[min(point_polyline_distance((t.x, t.y), pts) for t in block) for _, pts in found] for block in blocks]
    cost: list[list[float | None]] = [[d if d <= reach else None for d in row] for row in dist]
    bound = bind(cost)
    labels: dict[int, list[tuple[float, float, str]]] = {}
    leftover: list[Text] = []
    for b, block in enumerate(blocks):
        k = bound.pairs.get(b)
        if k is None:
            near = [c for c, d in enumerate(cost[b]) if d is not None]
            k = min(near, key=dist[b].__getitem__) if near else None
        if k is None:
            leftover += block
            continue
        labels.setdefault(k, []).extend((t.y, t.x, t.text) for t in block)
        if b in bound.runner_up:
            scene.notes.append(f"edge label {' '.join(t.text for t in block)!r} is ambiguous: bound to the edge "
                               f"{_edge_name(scene, found[k][0][0])}, but {_edge_name(scene, found[bound.runner_up[b]][0][0])}"
                               " is nearly as good")
    return labels, leftover


def _label_blocks(texts: list[Text], u: float) -> list[list[Text]]:
    """Texts grouped into labels: two texts are lines of one label when one sits a line below the
    other (0.8 to 1.5 font sizes) and they are aligned as a writer aligns lines -- centres, left
    ends or right ends within 0.15 em (a character is taken as 0.55 em wide). Labels of two arrows
    that merely sit close are not aligned so."""
    parent = list(range(len(texts)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i, a in enumerate(texts):
        for j in range(i + 1, len(texts)):
            b = texts[j]
            line = max(a.size, b.size) or 16 * u
            if not 0.8 * line <= abs(a.y - b.y) <= 1.5 * line:
                continue
            half_a = 0.275 * (a.size or 16 * u) * len(a.text)
            half_b = 0.275 * (b.size or 16 * u) * len(b.text)
            shifts = (a.x - b.x, (a.x - half_a) - (b.x - half_b), (a.x + half_a) - (b.x + half_b))
            if min(abs(d) for d in shifts) <= 0.15 * line:
                parent[find(i)] = find(j)
    groups: dict[int, list[Text]] = {}
    for i, t in enumerate(texts):
        groups.setdefault(find(i), []).append(t)
    return list(groups.values())


def _edge_name(scene: Scene, e: Edge) -> str:
    names = {n.key: n.label or n.key for n in scene.nodes}
    return f"{names.get(e.src, e.src)!r} -> {names.get(e.dst, e.dst)!r}"


def _is_title(x: float, y: float, clusters: list[Shape], nodes: list[Node], u: float) -> bool:
    """A text in a cluster above all the nodes inside it is the cluster's title."""
    around = [c for c in clusters if box_contains(c.box, x, y, pad=2 * u)]
    if not around:
        return False
    c = min(around, key=lambda c: _area(c.box))
    tops = [n.box[1] for n in nodes if n.box and _inside(n.box, c.box, u)]
    return bool(tops) and y < min(tops)


def _near_head(p: Point, heads: list[Shape], u: float) -> bool:
    return any(box_distance(h.box, *p) <= 3 * u for h in heads)


def _node_at(p: Point, nodes: list[Node], tol: float) -> str | None:
    best, key = tol, None
    for n in nodes:
        assert n.box is not None
        d = box_distance(n.box, *p)
        if d < best or (d == 0 and key is not None and best == 0 and _area(n.box) < _area(_box_of(nodes, key))):
            best, key = d, n.key
    return key


def _box_of(nodes: list[Node], key: str) -> Box:
    box = next(n.box for n in nodes if n.key == key)
    assert box is not None
    return box
