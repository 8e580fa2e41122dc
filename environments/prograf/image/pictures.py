"""Pictures of what a generator wrote, with the failed verification points drawn on them.

Every format goes through the one sandboxed render path (`render.Renderer`: resvg in a worker
process with time and memory limits, cached by content hash). SVG is sanitised and rendered as the
verifier renders it. DOT and Mermaid are never handed to Graphviz or Mermaid: their parsed graph
(nodes, edges, groups) is laid out and written as SVG by our own writer (`emit.graph_svg`, the
layout the reference solutions use). Schemdraw (JSON, or Python read through the AST allow-list) is
placed by our cursor-following reader (`schematic.place`) and drawn by `circuit_svg` below. So the
picture of a DOT or schemdraw output shows its structure as we read it, not Graphviz's or
schemdraw's own styling.

Each failed point is marked where the scene locates it: the bound points of a geometry fact, the
matched nodes (or group members) of a graph fact, the named parts of a circuit fact, boxed and
tagged with the point's id; a legend under the image lists every failed point, and says when the
drawing gives it no place (a missing object has none).
"""

from __future__ import annotations

import base64
import io
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from html import escape
from typing import Any

from environments.prograf.check.geometry import GeometryView
from environments.prograf.check.graph import GraphView
from environments.prograf.check.render import Renderer, prepare
from environments.prograf.check.verify import Checkable, Verdict, verify
from environments.prograf.generate.emit import NODE_H, GraphDrawing, graph_svg, node_width, positions
from environments.prograf.parse.dot import parse_dot
from environments.prograf.parse.mermaid import parse_mermaid
from environments.prograf.parse.scene import Box, InputRejected, Scene, box_union
from environments.prograf.parse.schematic import place, schemdraw_json_elements
from environments.prograf.parse.schematic_source import schemdraw_source_elements
from environments.prograf.parse.svg import parse_svg
from environments.prograf.parse.svg_graph import extract_graph
from environments.prograf.parse.svg_sanitise import sanitise, serialise
from environments.prograf.task import CircuitSpec, GeometrySpec

MARK = (220, 0, 0)
PIXELS_PER_UNIT = 40.0  # schemdraw units (a part is 3 long) to SVG units
UNREADABLE = (InputRejected, ValueError, KeyError, TypeError, IndexError, ZeroDivisionError, RecursionError,
              OverflowError)


@dataclass
class Drawing:
    """What is rendered (sanitised SVG with its viewBox pinned) and where things are on it."""

    svg: str
    width: int
    height: int
    canvas: Box
    scene: Scene  # the scene the checks ran on (its keys and labels)
    boxes: dict[str, Box] = field(default_factory=dict)  # node key / part name -> box in canvas units


def drawing_of(fmt: str, code: str, category: str) -> Drawing:
    """The drawable form of `code`; InputRejected (or a parser's ValueError) if it cannot be read."""
    if fmt == "svg":
        scene = parse_svg(code)
        if category in ("flowchart", "diagram"):
            extract_graph(scene)
        boxes = {n.key: n.box for n in scene.nodes if n.box is not None}
        return _prepared(code, scene, boxes)
    if fmt in ("dot", "mermaid"):
        scene = parse_dot(code) if fmt == "dot" else parse_mermaid(code)
        graph = graph_drawing(scene)
        if not graph.nodes:
            raise InputRejected(f"the {fmt} has no node to draw")
        centres = positions(graph)
        boxes = {k: (x - node_width(lbl) / 2, y - NODE_H / 2, x + node_width(lbl) / 2, y + NODE_H / 2)
                 for (k, lbl, _), (x, y) in ((n, centres[n[0]]) for n in graph.nodes)}
        return _prepared(graph_svg(graph), scene, boxes)
    if fmt in ("schemdraw-json", "schemdraw-py"):
        elements = schemdraw_json_elements(code) if fmt == "schemdraw-json" else schemdraw_source_elements(code)
        svg, boxes = circuit_svg(place(elements))
        return _prepared(svg, Scene(format=fmt), boxes)
    raise InputRejected(f"unknown format {fmt!r}")


def _prepared(svg: str, scene: Scene, boxes: dict[str, Box]) -> Drawing:
    root, _ = sanitise(svg)
    canvas = parse_svg(svg).canvas if scene.canvas is None else scene.canvas
    if canvas is None:
        raise InputRejected("no canvas to draw on")
    root, width, height = prepare(root, canvas)
    return Drawing(serialise(root), width, height, canvas, scene, boxes)


# ---------------------------------------------------------------------- parsed graphs and circuits as SVG
SHAPES = {"ellipse": "ellipse", "oval": "ellipse", "circle": "ellipse", "doublecircle": "ellipse", "stadium": "ellipse",
          "diamond": "diamond", "parallelogram": "parallelogram"}


def graph_drawing(scene: Scene) -> GraphDrawing:
    """A parsed graph as our writer's drawing: every node once, edges between drawn nodes, each node
    in its first group."""
    keys = [n.key for n in scene.nodes]
    known = set(keys)
    placed: set[str] = set()
    clusters = []
    for c in scene.clusters:
        members = [k for k in keys if k in c.members and k not in placed]
        placed.update(members)
        if members:
            clusters.append((c.key, c.label, members))
    return GraphDrawing(title="", directed=any(e.directed for e in scene.edges) or not scene.edges,
                        nodes=[(n.key, n.label or n.key, None) for n in scene.nodes],
                        edges=[(e.src, e.dst, e.label or None) for e in scene.edges if e.src in known and e.dst in known],
                        clusters=clusters, shape_override={n.key: SHAPES.get(n.shape, "box") for n in scene.nodes})


def _fmt(v: float) -> str:
    return f"{v:.1f}"


def circuit_svg(placed: list[tuple[str, str, str, tuple[float, float], tuple[float, float]]]) -> tuple[str, dict[str, Box]]:
    """Wires as lines, each part as a labelled body on its lead, grounds and dots; the box of each
    named part (SVG units). y points up in schemdraw, down in SVG."""
    if not placed:
        raise InputRejected("the schematic has no element to draw")
    xs = [p[0] for *_, s, e in placed for p in (s, e)]
    ys = [p[1] for *_, s, e in placed for p in (s, e)]
    x0, y1 = min(xs), max(ys)
    margin = 60.0

    def at(p: tuple[float, float]) -> tuple[float, float]:
        return (p[0] - x0) * PIXELS_PER_UNIT + margin, (y1 - p[1]) * PIXELS_PER_UNIT + margin

    lines, bodies, texts, boxes = [], [], [], {}
    for kind, name, value, start, end in placed:
        (ax, ay), (bx, by) = at(start), at(end)
        if kind == "ground":
            lines += [f'<line x1="{_fmt(ax)}" y1="{_fmt(ay)}" x2="{_fmt(ax)}" y2="{_fmt(ay + 12)}"/>']
            lines += [f'<line x1="{_fmt(ax - w)}" y1="{_fmt(ay + 12 + k * 5)}" x2="{_fmt(ax + w)}" y2="{_fmt(ay + 12 + k * 5)}"/>'
                      for k, w in enumerate((12.0, 8.0, 4.0))]
            continue
        if kind in ("text", "annotation"):  # a Label standing free; an Annotate's text at its tail (its end)
            x, y = (ax, ay) if kind == "text" else (bx, by)
            texts.append(f'<text x="{_fmt(x)}" y="{_fmt(y + 5)}">{escape(" ".join(t for t in (name, value) if t))}</text>')
            continue
        if kind == "mark":  # current arrows, tags, outlines: drawn over the circuit, not drawn here
            continue
        if kind == "dot":
            bodies.append(f'<circle cx="{_fmt(ax)}" cy="{_fmt(ay)}" r="4" fill="black"/>')
            continue
        lines.append(f'<line x1="{_fmt(ax)}" y1="{_fmt(ay)}" x2="{_fmt(bx)}" y2="{_fmt(by)}"/>')
        if kind == "wire":
            continue
        length = math.hypot(bx - ax, by - ay) or 1.0
        ux, uy = (bx - ax) / length, (by - ay) / length
        nx, ny = -uy, ux
        half, thick = min(length * 0.3, 30.0), 10.0
        mx, my = (ax + bx) / 2, (ay + by) / 2
        corners = [(mx + sx * half * ux + st * thick * nx, my + sx * half * uy + st * thick * ny)
                   for sx, st in ((-1, -1), (1, -1), (1, 1), (-1, 1))]
        bodies.append('<polygon points="' + " ".join(f"{_fmt(x)},{_fmt(y)}" for x, y in corners) + '"/>')
        label = " ".join(t for t in (name, value) if t) or kind
        lx, ly = mx + nx * 24, my + ny * 24 + 5
        texts.append(f'<text x="{_fmt(lx)}" y="{_fmt(ly)}">{escape(label)}</text>')
        if name:
            pts = corners + [(ax, ay), (bx, by), (lx, ly)]
            boxes[name] = (min(p[0] for p in pts) - 4, min(p[1] for p in pts) - 14,
                           max(p[0] for p in pts) + 4, max(p[1] for p in pts) + 4)
    width = (max(xs) - x0) * PIXELS_PER_UNIT + 2 * margin
    height = (y1 - min(ys)) * PIXELS_PER_UNIT + 2 * margin
    svg = "\n".join([f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {_fmt(width)} {_fmt(height)}" '
                     f'width="{_fmt(width)}" height="{_fmt(height)}">',
                     '<g stroke="black" stroke-width="2" fill="none">', *lines, "</g>",
                     '<g stroke="black" stroke-width="2" fill="white">', *bodies, "</g>",
                     '<g font-family="sans-serif" font-size="14" text-anchor="middle" fill="black">', *texts, "</g>",
                     "</svg>"])
    return svg, boxes


# ---------------------------------------------------------------------- where a point is
def point_box(drawing: Drawing, spec: Any, args: list[str]) -> Box | None:
    """Where the drawing shows what a point is about (its bound points, matched nodes, named parts),
    in canvas units; None when the drawing has none of them."""
    found: list[Box] = []
    if isinstance(spec, GeometrySpec):
        view = GeometryView(drawing.scene, list(spec.points))
        found = [(x - 10, y - 10, x + 10, y + 10) for a in args if a in view.points for x, y in [view.points[a]]]
    elif isinstance(spec, CircuitSpec):
        found = [drawing.boxes[a] for a in args if a in drawing.boxes]
    else:
        graph = GraphView(drawing.scene, spec)
        for a in args:
            node = graph.node(a)
            if node is not None and node.key in drawing.boxes:
                found.append(drawing.boxes[node.key])
                continue
            group = graph.cluster(a) if any(c.id == a for c in spec.clusters) else None
            members = [drawing.boxes[k] for k in (group.members if group else ()) if k in drawing.boxes]
            if members:
                found.append(box_union(members))
    return box_union(found) if found else None


# ---------------------------------------------------------------------- the picture
LEGEND_MIN_WIDTH = 360  # pixels: a narrow render still gets a readable legend


@dataclass(frozen=True)
class Mark:
    """One failed point on the picture: its id, the fact in words, where (None: nowhere to draw),
    and why it has no box when it was gated by a failed parent."""

    id: str
    text: str
    box: Box | None
    gated_by: str = ""


def annotate(png: bytes, drawing: Drawing, marks: list[Mark]) -> bytes:
    """Boxes tagged with the ids of the failed points on the render (one box per place, its ids
    together), and a legend strip under it listing every failed point."""
    from PIL import Image, ImageDraw, ImageFont

    img = Image.open(io.BytesIO(png)).convert("RGB")
    font = ImageFont.load_default(size=12)
    c = drawing.canvas
    sx, sy = img.width / (c[2] - c[0]), img.height / (c[3] - c[1])
    draw = ImageDraw.Draw(img)
    places: dict[Box, list[str]] = {}
    for mark in marks:
        if mark.box is not None:
            places.setdefault(mark.box, []).append(mark.id)
    for box, ids in places.items():
        x0, y0 = (box[0] - c[0]) * sx - 3, (box[1] - c[1]) * sy - 3
        x1, y1 = max(x0 + 12, (box[2] - c[0]) * sx + 3), max(y0 + 12, (box[3] - c[1]) * sy + 3)
        draw.rectangle((x0, y0, x1, y1), outline=MARK, width=2)
        draw.text((x0 + 2, max(0.0, y0 - 14)), ", ".join(ids), fill=MARK, font=font)
    lines = [f"{len(marks)} failed point(s)" if marks else "every checked point passed"]
    for mark in marks:
        where = "" if mark.box else (f" (not checked: {mark.gated_by} failed)" if mark.gated_by
                                     else " (no place in the drawing)")
        lines.append(f"{mark.id}: {mark.text}{where}")
    width = max(img.width, LEGEND_MIN_WIDTH)
    out = Image.new("RGB", (width, img.height + 8 + 16 * len(lines)), "white")
    out.paste(img, (0, 0))
    ldraw = ImageDraw.Draw(out)
    for k, line in enumerate(lines):
        ldraw.text((6, img.height + 4 + 16 * k), _fit(line, width), fill=MARK if k else (0, 0, 0), font=font)
    buf = io.BytesIO()
    out.save(buf, format="PNG", optimize=True)
    return buf.getvalue()


GLYPHS = str.maketrans({"→": "->", "≠": "!=", "Ω": "Ohm", "µ": "u", "μ": "u", "≤": "<=", "≥": ">="})


def _fit(text: str, width: int) -> str:
    text = text.translate(GLYPHS)  # the built-in font has no arrows or math signs
    most = max(8, width // 7)  # about 7 pixels a character at this size
    return text if len(text) <= most else text[: most - 3] + "..."


def marks_for(checked: Checkable, drawing: Drawing, verdict: Verdict, only: Iterable[str] | None = None) -> list[Mark]:
    """The failed points of `verdict` (those in `only`, if given): a box where the drawing places
    what the point is about; a gated point gets no box (its failed parent has one)."""
    wanted = None if only is None else set(only)
    texts = {vp.id: vp for vp in checked.points}
    marks = []
    for p in verdict.points:
        if p.passed or (wanted is not None and p.id not in wanted) or p.id not in texts:
            continue
        vp = texts[p.id]
        parent = next((d for d in vp.depends_on if not _passed(verdict, d)), "") if p.gated else ""
        box = None if p.gated else point_box(drawing, checked.spec, list(vp.args))
        marks.append(Mark(p.id, vp.text, box, parent))
    return marks


def _passed(verdict: Verdict, vp_id: str) -> bool:
    return any(p.id == vp_id and p.passed for p in verdict.points)


def picture(checked: Checkable, fmt: str, code: str, renderer: Renderer, caption: str, *,
            verdict: Verdict | None = None, only: Iterable[str] | None = None) -> dict[str, str] | None:
    """`{"caption", "png"}`: the render (base64 PNG) with the failed points of `checked` (a Task, or
    the prompt's checks) marked, from `verdict` (default: the structural verdict of `code`); None
    when the code cannot be read or drawn (the verdict records why)."""
    try:
        drawing = drawing_of(fmt, code, checked.category)
        png = renderer.png(drawing.svg, drawing.width, drawing.height)
        verdict = verdict if verdict is not None else verify(checked, fmt, code)
        data = annotate(png, drawing, marks_for(checked, drawing, verdict, only))
    except UNREADABLE:
        return None
    return {"caption": caption, "png": base64.b64encode(data).decode("ascii")}
