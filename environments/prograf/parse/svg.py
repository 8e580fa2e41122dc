"""SVG from a model: sanitised, then parsed into scene primitives (and, for graphs, nodes/edges).

Sanitising (`svg_sanitise.py`) comes first; path data is `svg_path.py`'s.

Parsing: transforms are composed, styles inherited (attributes, `style=`, and `<style>` rules,
in CSS's cascade: `svg_css.py`), `<use>` expanded (of a `<symbol>` or nested `<svg>` through its
viewBox), path curves and arcs followed, tspans joined into lines, and an element counts only if
it paints something inside the canvas (the viewBox): a line with no stroke, `display:none`, zero
opacity, a shape wholly outside the canvas, or an unoutlined shape in the page's own colour (a
label's backdrop) is `hidden`, i.e. not drawn.
"""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from functools import lru_cache

from environments.prograf.parse.scene import Box, Circle, InputRejected, Scene, Segment, Shape, Text, box_union
from environments.prograf.parse.svg_css import Stylesheet, split_declarations
from environments.prograf.parse.svg_marker import path_heads
from environments.prograf.parse.svg_path import SubPath, curved_family, path_subpaths
from environments.prograf.parse.svg_sanitise import (DRAWN, MAX_PIECES, NOT_DRAWN, svg_element, href, local,
                                              sanitise)
from environments.prograf.parse.svg_transform import (IDENTITY, Matrix, Point, apply, multiply, num, number_or_none, numbers,
                                               parse_transform, scale_of)

INHERITED = ("fill", "stroke", "stroke-width", "visibility", "font-size", "text-anchor", "marker-start", "marker-mid",
             "marker-end")
# ---------------------------------------------------------------------- styles


def declarations(text: str) -> dict[str, str]:
    """A `style=` attribute's declarations, `!important` or not."""
    normal, important = split_declarations(text)
    return normal | important


@dataclass
class Style:
    fill: str = "black"
    stroke: str = "none"
    stroke_width: float = 1.0
    visibility: str = "visible"
    font_size: float = 16.0
    text_anchor: str = "start"
    marker_start: str = "none"
    marker_mid: str = "none"
    marker_end: str = "none"
    opacity: float = 1.0


STYLE_ATTRIBUTES = frozenset((*INHERITED, "display", "opacity", "fill-opacity", "stroke-opacity"))


def element_style(el: ET.Element, parent: Style, sheet: Stylesheet) -> tuple[Style, bool]:
    """This element's style and whether it is displayed at all, by CSS's cascade: presentation
    attributes, then the sheet's rules, then `style=`, then the sheet's `!important`. An element
    that sets nothing gets its parent's style object itself (styles are never changed once made):
    most elements of a drawing set nothing, and this is the reader's most frequent call."""
    props: dict[str, str] = {}
    for key, value in el.attrib.items():
        if key in STYLE_ATTRIBUTES:
            props[key] = value
    normal, important = sheet.props(el)
    props.update(normal)
    inline, inline_important = split_declarations(el.get("style") or "")
    props.update(inline)
    props.update(important)
    props.update(inline_important)
    if not props:
        return parent, True
    s = Style(**vars(parent))
    s.fill = props.get("fill", s.fill).strip()
    s.stroke = props.get("stroke", s.stroke).strip()
    s.stroke_width = num(props.get("stroke-width"), s.stroke_width)
    s.visibility = props.get("visibility", s.visibility).strip()
    s.font_size = num(props.get("font-size"), s.font_size)
    s.text_anchor = props.get("text-anchor", s.text_anchor).strip()
    # `marker` is CSS's shorthand for all three, in a style only: a shorthand is no presentation attribute, so
    # `marker="..."` draws nothing (a longhand set beside the shorthand wins here)
    s.marker_start = props.get("marker-start", props.get("marker", s.marker_start)).strip()
    s.marker_mid = props.get("marker-mid", props.get("marker", s.marker_mid)).strip()
    s.marker_end = props.get("marker-end", props.get("marker", s.marker_end)).strip()
    s.opacity = parent.opacity * num(props.get("opacity"), 1.0)
    if num(props.get("fill-opacity"), 1.0) == 0:
        s.fill = "none"
    if num(props.get("stroke-opacity"), 1.0) == 0:
        s.stroke = "none"
    return s, props.get("display", "").strip() != "none"


def paints_stroke(s: Style) -> bool:
    return s.stroke not in ("none", "transparent", "") and s.stroke_width > 0 and s.opacity > 0 and s.visibility != "hidden"


def paints_fill(s: Style) -> bool:
    return s.fill not in ("none", "transparent", "") and s.opacity > 0 and s.visibility != "hidden"


# ---------------------------------------------------------------------- colours
NAMED = {"white": "#ffffff", "black": "#000000", "red": "#ff0000", "green": "#008000", "blue": "#0000ff",
         "gray": "#808080", "grey": "#808080", "yellow": "#ffff00", "silver": "#c0c0c0", "whitesmoke": "#f5f5f5",
         "snow": "#fffafa", "ivory": "#fffff0", "lightgray": "#d3d3d3", "lightgrey": "#d3d3d3"}


HEX3, HEX6 = re.compile(r"#[0-9a-f]{3}"), re.compile(r"#[0-9a-f]{6}")
RGB = re.compile(r"rgb\(\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*\)")


def colour(value: str) -> str:
    """A colour as #rrggbb where it can be read (names in NAMED, #rgb, #rrggbb, rgb()), else as written."""
    v = value.strip().lower()
    if v in NAMED:
        return NAMED[v]
    if HEX3.fullmatch(v):
        return "#" + "".join(c * 2 for c in v[1:])
    if HEX6.fullmatch(v):
        return v
    m = RGB.fullmatch(v)
    if m:
        return "#" + "".join(f"{min(255, int(g)):02x}" for g in m.groups())
    return v


# ---------------------------------------------------------------------- parse
def canvas_of(root: ET.Element) -> Box:
    vb = numbers(root.get("viewBox"))
    if len(vb) == 4 and vb[2] > 0 and vb[3] > 0:
        return (vb[0], vb[1], vb[0] + vb[2], vb[1] + vb[3])
    w, h = num(root.get("width"), 300.0), num(root.get("height"), 150.0)
    return (0.0, 0.0, w if w > 0 else 300.0, h if h > 0 else 150.0)


def units_per_pixel(root: ET.Element, canvas: Box) -> float:
    """Canvas units per CSS pixel, so the reader's pixel-sized slacks (how far an arrow may stop short
    of a box, how big a dot is) scale with a drawing made in a unit-scale viewBox. The root's width
    says how big the drawing is shown; without it a viewBox in the hundreds is taken as pixels (as
    a browser shows it), and a small one (under 50 units: "0 0 1 1", "0 0 10 10") as drawn at the
    render size, 400 pixels along its longer side."""
    w, h = canvas[2] - canvas[0], canvas[3] - canvas[1]
    width = root.get("width") or ""
    if width and not width.strip().endswith("%") and num(width) > 0:
        return w / num(width)
    return 1.0 if max(w, h) >= 50 else max(w, h) / 400.0


def length(value: str | None, reference: float, default: float = 0.0, font: float = 16.0) -> float:
    """An SVG length: a number, px, a percentage of `reference` (the viewport's width, height or
    diagonal), or em (the font size)."""
    if value is None:
        return default
    unit, n = _length_parts(value)
    if unit == "%":
        return (0.0 if n is None else n) * reference / 100
    if unit == "em":
        return (0.0 if n is None else n) * font
    return default if n is None else n


@lru_cache(maxsize=4096)  # coordinates repeat across a drawing's elements
def _length_parts(value: str) -> tuple[str, float | None]:
    """A length's unit ("%", "em" or "": a number or px) and its number (None if none is read)."""
    v = value.strip()
    if v.endswith("%"):
        return "%", number_or_none(v[:-1])
    if v.endswith("em"):
        return "em", number_or_none(v[:-2])
    return "", number_or_none(v)


def clip(seg: Segment, box: Box) -> Segment | None:
    """The part of a segment inside the canvas (Liang-Barsky), None if none is."""
    dx, dy = seg.x2 - seg.x1, seg.y2 - seg.y1
    t0, t1 = 0.0, 1.0
    for p, q in ((-dx, seg.x1 - box[0]), (dx, box[2] - seg.x1), (-dy, seg.y1 - box[1]), (dy, box[3] - seg.y1)):
        if p == 0:
            if q < 0:
                return None
            continue
        t = q / p
        if p < 0:
            t0 = max(t0, t)
        else:
            t1 = min(t1, t)
        if t0 > t1:
            return None
    return Segment(seg.x1 + t0 * dx, seg.y1 + t0 * dy, seg.x1 + t1 * dx, seg.y1 + t1 * dy,
                   seg.arrow_start and t0 == 0.0, seg.arrow_end and t1 == 1.0, seg.element,
                   (seg.ends[0] or t0 > 0.0, seg.ends[1] or t1 < 1.0))


@dataclass
class _Context:
    sheet: Stylesheet
    scene: Scene
    ids: dict[str, ET.Element]
    viewport: tuple[float, float]
    background: str = "#ffffff"
    counter: int = 0
    paths: dict[str, list[SubPath]] = field(default_factory=dict)  # a path's d read once, however often used
    pieces: int = 0  # path points followed so far, drawn or clipped away


def parse_svg(code: str) -> Scene:
    """The scene of an SVG: visible segments, circles, texts and closed shapes, in canvas units."""
    root, notes = sanitise(code)
    canvas = canvas_of(root)
    scene = Scene(format="svg", canvas=canvas, notes=notes, px=units_per_pixel(root, canvas))
    ids = {el.get("id", ""): el for el in root.iter() if el.get("id")}
    ctx = _Context(Stylesheet(root), scene, ids, (canvas[2] - canvas[0], canvas[3] - canvas[1]))
    root_style, _ = element_style(root, Style(), ctx.sheet)
    _walk(root, IDENTITY, root_style, ctx)
    return scene


def _walk(el: ET.Element, m: Matrix, style: Style, ctx: _Context) -> None:
    for child in el:
        if isinstance(child.tag, str) and svg_element(child.tag):
            _draw(child, m, style, ctx)


def _draw(child: ET.Element, m: Matrix, style: Style, ctx: _Context) -> None:
    """One element (and what it holds) under matrix `m` and the style it inherits."""
    name = local(child.tag)
    if name in NOT_DRAWN or name not in DRAWN:
        return
    s, displayed = element_style(child, style, ctx.sheet)
    if not displayed:
        ctx.scene.hidden += 1
        return
    transform = child.get("transform")
    cm = multiply(m, parse_transform(transform)) if transform else m
    ctx.counter += 1
    if name == "svg":  # a nested viewport: its x, y, size and viewBox place its content
        vw, vh = ctx.viewport
        x, y = length(child.get("x"), vw), length(child.get("y"), vh)
        w, h = length(child.get("width"), vw, vw), length(child.get("height"), vh, vh)
        _walk(child, multiply(cm, _viewbox(child, x, y, w, h)), s, ctx)
    elif name in ("g", "a", "switch"):
        _walk(child, cm, s, ctx)
    elif name == "use":
        _use(child, cm, s, ctx)
    elif name == "text":
        _text(child, cm, s, ctx.scene, ctx.counter)
    else:
        _shape(name, child, cm, s, ctx)


def _viewbox(el: ET.Element, x: float, y: float, w: float, h: float) -> Matrix:
    """The map from an element's viewBox into the box (x, y, w, h), by its preserveAspectRatio
    (default: uniform scale, centred)."""
    vb = numbers(el.get("viewBox"))
    if len(vb) != 4 or vb[2] <= 0 or vb[3] <= 0 or w <= 0 or h <= 0:
        return (1.0, 0.0, 0.0, 1.0, x, y)
    par = (el.get("preserveAspectRatio") or "xMidYMid meet").split()
    sx, sy = w / vb[2], h / vb[3]
    if par and par[0] != "none":
        sx = sy = max(sx, sy) if "slice" in par else min(sx, sy)
        align = par[0]
        fx = 0.0 if "xMin" in align else 1.0 if "xMax" in align else 0.5
        fy = 0.0 if "YMin" in align else 1.0 if "YMax" in align else 0.5
        x += fx * (w - vb[2] * sx)
        y += fy * (h - vb[3] * sy)
    return (sx, 0.0, 0.0, sy, x - vb[0] * sx, y - vb[1] * sy)


def _use(el: ET.Element, m: Matrix, s: Style, ctx: _Context) -> None:
    """A <use>: the referenced element drawn at (x, y), inheriting the use's style; a <symbol> or
    <svg> through its viewBox into the use's width and height. Cycles and bombs were refused by
    the sanitiser."""
    ref_id = href(el)
    ref = ctx.ids.get(ref_id[1:]) if ref_id.startswith("#") else None
    if ref is None or not isinstance(ref.tag, str):
        ctx.scene.hidden += 1
        ctx.scene.notes.append(f"<use> of {ref_id or 'nothing'}: no such element, nothing drawn")
        return
    vw, vh = ctx.viewport
    x, y = length(el.get("x"), vw), length(el.get("y"), vh)
    um = multiply(m, (1.0, 0.0, 0.0, 1.0, x, y))
    kind = local(ref.tag)
    if kind in ("symbol", "svg"):
        w = length(el.get("width") or ref.get("width"), vw, vw)
        h = length(el.get("height") or ref.get("height"), vh, vh)
        rs, displayed = element_style(ref, s, ctx.sheet)
        if not displayed:
            ctx.scene.hidden += 1
            return
        if kind == "svg":
            um = multiply(um, (1.0, 0.0, 0.0, 1.0, length(ref.get("x"), vw), length(ref.get("y"), vh)))
        _walk(ref, multiply(multiply(um, parse_transform(ref.get("transform")) if kind == "svg" else IDENTITY),
                            _viewbox(ref, 0.0, 0.0, w, h)), rs, ctx)
    elif kind not in NOT_DRAWN:
        _draw(ref, um, s, ctx)


def _text(el: ET.Element, m: Matrix, s: Style, scene: Scene, index: int) -> None:
    """A text's words joined over its tspans; its place the centre of the lines they make (a tspan
    with its own x or y starts a line; dx / dy move the pen, in em too)."""
    lines: list[list[float | str]] = []  # [x of the pen at the line's start, baseline y, width, words]
    anchor = s.text_anchor

    def pen_line(x: float, y: float, new: bool) -> list[float | str]:
        if new or not lines:
            lines.append([x, y, 0.0, ""])
        return lines[-1]

    def visit(node: ET.Element, x: float, y: float, size: float, first: bool) -> tuple[float, float]:
        explicit = node.get("x") is not None or node.get("y") is not None
        fs = size
        if node is not el:
            fs = num(declarations(node.get("style") or "").get("font-size") or node.get("font-size"), size)
        # x="10 20 30" places each character: the first places the run, which is what a label needs
        nx = length(_first(node.get("x")), 0.0, x, fs) + length(_first(node.get("dx")), 0.0, 0.0, fs)
        ny = length(_first(node.get("y")), 0.0, y, fs) + length(_first(node.get("dy")), 0.0, 0.0, fs)
        new = first or explicit or ny != y
        x, y = nx, ny
        if node.text and node.text.strip():
            line = pen_line(x, y, new)
            new = False
            line[2] = float(line[2]) + 0.55 * fs * len(node.text.strip())
            line[3] = f"{line[3]} {node.text}"
            x += 0.55 * fs * len(node.text)
        for child in node:
            if not isinstance(child.tag, str) or local(child.tag) not in ("tspan", "a"):
                continue
            x, y = visit(child, x, y, fs, new)
            new = False
            if child.tail and child.tail.strip():
                line = pen_line(x, y, False)
                line[2] = float(line[2]) + 0.55 * fs * len(child.tail.strip())
                line[3] = f"{line[3]} {child.tail}"
                x += 0.55 * fs * len(child.tail)
        return x, y

    visit(el, 0.0, 0.0, s.font_size, True)
    lines = [ln for ln in lines if str(ln[3]).strip()]
    content = " ".join(" ".join(str(ln[3]) for ln in lines).split())
    if not content or not paints_fill(s) or s.font_size <= 0:
        scene.hidden += bool(content)
        return
    # the anchor is each line's baseline start (or middle/end): the label's centre is what sits on an object
    boxes = []
    for x0, y0, width, _ in lines:
        x0, y0, width = float(x0), float(y0), float(width)
        left = {"middle": x0 - width / 2, "end": x0 - width}.get(anchor, x0)
        boxes.append((left, y0 - 0.7 * s.font_size, left + width, y0))
    box = box_union(boxes)
    px, py = apply(m, (box[0] + box[2]) / 2, (box[1] + box[3]) / 2)
    canvas = scene.canvas
    if canvas and not (canvas[0] <= px <= canvas[2] and canvas[1] <= py <= canvas[3]):
        scene.hidden += 1
        return
    scene.texts.append(Text(content, px, py, index, s.font_size * scale_of(m)))


LIST_SEPARATOR = re.compile(r"[\s,]+")


def _first(value: str | None) -> str | None:
    if value is None:
        return None
    parts = LIST_SEPARATOR.split(value.strip())
    return parts[0] if parts[0] else None


def _outlined(s: Style) -> bool:
    """A stroke of its own colour (a stroke the fill's colour adds no outline)."""
    return paints_stroke(s) and not (paints_fill(s) and colour(s.stroke) == colour(s.fill))


def _backdrop(s: Style, ctx: _Context) -> bool:
    """Filled in the page's colour and not outlined: it only hides what is under it (a label's
    background), so it is no shape a reader would see."""
    return paints_fill(s) and not _outlined(s) and colour(s.fill) == ctx.background


def _shape(name: str, el: ET.Element, m: Matrix, s: Style, ctx: _Context) -> None:
    scene, index = ctx.scene, ctx.counter
    stroke, fill = paints_stroke(s), paints_fill(s)
    vw, vh = ctx.viewport
    diag = math.hypot(vw, vh) / math.sqrt(2)
    g = el.get
    segs: list[tuple[tuple[float, float], tuple[float, float]]] = []
    family = ""
    local_pts: list[tuple[float, float]] = []
    if name == "line":
        segs = [((length(g("x1"), vw), length(g("y1"), vh)), (length(g("x2"), vw), length(g("y2"), vh)))]
        fill = False
    elif name in ("polyline", "polygon"):
        v = numbers(g("points"))
        local_pts = list(zip(v[0::2], v[1::2]))
        if name == "polygon" and len(local_pts) > 3 and local_pts[-1] == local_pts[0]:
            local_pts.pop()  # Graphviz writes a polygon's first point again at its end: one vertex, not two
        segs = list(zip(local_pts, local_pts[1:]))
        if name == "polygon" and len(local_pts) >= 3:
            segs.append((local_pts[-1], local_pts[0]))
            family = polygon_family([apply(m, *p) for p in local_pts])
        else:
            fill = False
    elif name == "rect":
        x, y = length(g("x"), vw), length(g("y"), vh)
        w, h = length(g("width"), vw), length(g("height"), vh)
        if w <= 0 or h <= 0:
            scene.hidden += 1
            return
        corners = [apply(m, x, y), apply(m, x + w, y), apply(m, x + w, y + h), apply(m, x, y + h)]
        if scene.canvas and fill and not _outlined(s) and _covers(corners, scene.canvas):
            # the page itself: its colour is what a label's backdrop is painted in
            ctx.background = colour(s.fill)
            scene.hidden += 1
            return
        local_pts = [(x, y), (x + w, y), (x + w, y + h), (x, y + h)]
        segs = list(zip(local_pts, local_pts[1:] + local_pts[:1]))
        rx = length(g("rx") or g("ry"), vw)  # one radius given: the other equals it
        ry = length(g("ry") or g("rx"), vh)
        r = min(max(rx, 0.0), w / 2, max(ry, 0.0), h / 2)
        family = "stadium" if r >= 0.45 * min(w, h) else "rounded" if r > 0.1 * min(w, h) else "box"
        if family == "box":
            # Its outline as drawn: a rect under skewX is a parallelogram, under a 45-degree rotation a
            # diamond (both are how people write a flowchart's I/O and decision shapes in SVG).
            family = polygon_family(corners)
    elif name in ("circle", "ellipse"):
        cx, cy = length(g("cx"), vw), length(g("cy"), vh)
        rx = length(g("r"), diag) if name == "circle" else length(g("rx"), vw)
        ry = length(g("r"), diag) if name == "circle" else length(g("ry"), vh, rx)
        if rx <= 0 or ry <= 0 or not (stroke or fill) or _backdrop(s, ctx):
            scene.hidden += 1
            return
        _round(scene, apply(m, cx, cy), rx * scale_of(m), ry * scale_of(m), index)
        return
    elif name == "path":
        d = g("d") or ""
        if d not in ctx.paths:
            ctx.paths[d] = path_subpaths(d)
        drawn = [sp for sp in ctx.paths[d] if len(sp.pts) >= 2]
        # markers sit on the path's first and last vertices, not on every subpath's
        heads = _heads(s, ctx, (drawn[0].pts[0], drawn[0].pts[1]), (drawn[-1].pts[-2], drawn[-1].pts[-1]),
                       [p for sp in drawn for p in sp.pts], [a for sp in drawn for a in sp.anchors]) \
            if drawn else (False, False)
        for sp in ctx.paths[d]:
            ctx.pieces += len(sp.pts)
            if ctx.pieces > MAX_PIECES:  # counted before the work, so a path used many times stays cheap
                raise InputRejected(f"the drawing expands to more than {MAX_PIECES} line pieces")
            wpts = [apply(m, *p) for p in sp.pts]
            if sp.circle is not None:
                if (stroke or fill) and not _backdrop(s, ctx):
                    cx, cy, r = sp.circle
                    _round(scene, apply(m, cx, cy), r * scale_of(m), r * scale_of(m), index)
                else:
                    scene.hidden += 1
                continue
            # a subpath that comes back to its start is a closed outline, Z or not (fill closes it anyway)
            closed = sp.closed or (len(wpts) >= 3 and wpts[0] == wpts[-1])
            if closed and len(wpts) >= 3 and (stroke or fill):
                if _backdrop(s, ctx):
                    scene.hidden += 1
                    continue
                fam = curved_family(wpts) if sp.curved else polygon_family([p for p, a in zip(wpts, sp.anchors) if a])
                _add_shape(scene, fam, wpts, index, _outlined(s))
            if stroke:
                pairs = list(zip(wpts, wpts[1:] + (wpts[:1] if sp.closed else [])))
                ends = list(zip(sp.anchors, sp.anchors[1:] + (sp.anchors[:1] if sp.closed else [])))
                own = (heads[0] and sp is drawn[0], heads[1] and sp is drawn[-1])
                _add_segments(scene, pairs, own, index, ends)
            elif not fill:
                scene.hidden += 1
        return
    else:
        return
    if family and fill and _backdrop(s, ctx):
        scene.hidden += 1
        return
    wsegs = [(apply(m, *a), apply(m, *b)) for a, b in segs]
    if family and (stroke or fill):
        _add_shape(scene, family, [apply(m, *p) for p in local_pts], index, _outlined(s))
    if stroke:
        verts = [segs[0][0], *(b for _, b in segs)] if segs else []
        _add_segments(scene, wsegs, _heads(s, ctx, segs[0], segs[-1], verts, [True] * len(verts))
                      if segs else (False, False), index)
    elif not family or not fill:
        scene.hidden += 1


def _covers(pts: list[tuple[float, float]], canvas: Box) -> bool:
    box = box_union([(x, y, x, y) for x, y in pts])
    w, h = canvas[2] - canvas[0], canvas[3] - canvas[1]
    return (box[0] <= canvas[0] + 0.02 * w and box[1] <= canvas[1] + 0.02 * h
            and box[2] >= canvas[2] - 0.02 * w and box[3] >= canvas[3] - 0.02 * h)


def _round(scene: Scene, centre: tuple[float, float], rx: float, ry: float, index: int) -> None:
    """A circle or ellipse (an element, or a path of arcs going all the way round)."""
    px, py = centre
    box = (px - rx, py - ry, px + rx, py + ry)
    if scene.canvas and not _overlaps(box, scene.canvas):
        scene.hidden += 1
        return
    is_circle = abs(rx - ry) <= 0.05 * max(rx, ry)
    if is_circle:
        scene.circles.append(Circle(px, py, rx, index))
    scene.shapes.append(Shape("circle" if is_circle else "ellipse", box, index))


def _overlaps(a: Box, b: Box) -> bool:
    return a[0] <= b[2] and b[0] <= a[2] and a[1] <= b[3] and b[1] <= a[3]


def _add_shape(scene: Scene, family: str, pts: list[tuple[float, float]], index: int, outlined: bool = True) -> None:
    box = (min(p[0] for p in pts), min(p[1] for p in pts), max(p[0] for p in pts), max(p[1] for p in pts))
    if scene.canvas and not _overlaps(box, scene.canvas):
        scene.hidden += 1
        return
    scene.shapes.append(Shape(family, box, index, outlined))


def _heads(s: Style, ctx: _Context, first: tuple[Point, Point], last: tuple[Point, Point],
           pts: list[Point], anchors: list[bool]) -> tuple[bool, bool]:
    """Whether the drawn path points into its start and into its end, by its markers (svg_marker.py)."""
    return path_heads((s.marker_start, s.marker_mid, s.marker_end), ctx.ids, first, last, pts, anchors)


def _add_segments(scene: Scene, pairs: list[tuple[tuple[float, float], tuple[float, float]]], heads: tuple[bool, bool], index: int,
                  ends: list[tuple[bool, bool]] | None = None) -> None:
    for k, ((x1, y1), (x2, y2)) in enumerate(pairs):
        seg = Segment(x1, y1, x2, y2, arrow_start=k == 0 and heads[0],
                      arrow_end=k == len(pairs) - 1 and heads[1], element=index,
                      ends=ends[k] if ends else (True, True))
        clipped = clip(seg, scene.canvas) if scene.canvas else seg
        if clipped is None or math.dist((clipped.x1, clipped.y1), (clipped.x2, clipped.y2)) < 1e-9:
            if ends is None:
                scene.hidden += 1
            continue
        scene.segments.append(clipped)


def polygon_family(pts: list[tuple[float, float]]) -> str:
    """diamond (vertices at the box's side midpoints), parallelogram, box, or polygon."""
    box = box_union([(x, y, x, y) for x, y in pts])
    w, h = box[2] - box[0], box[3] - box[1]
    if w <= 0 or h <= 0:
        return "polygon"
    tol = 0.08 * max(w, h)
    if len(pts) == 4:
        mids = [((box[0] + box[2]) / 2, box[1]), (box[2], (box[1] + box[3]) / 2),
                ((box[0] + box[2]) / 2, box[3]), (box[0], (box[1] + box[3]) / 2)]
        if all(min(math.dist(p, q) for p in pts) <= tol for q in mids):
            return "diamond"
        corners = [(box[0], box[1]), (box[2], box[1]), (box[2], box[3]), (box[0], box[3])]
        if all(min(math.dist(p, q) for p in pts) <= tol for q in corners):
            return "box"
        ys = sorted(p[1] for p in pts)
        if abs(ys[0] - ys[1]) <= tol and abs(ys[2] - ys[3]) <= tol:
            return "parallelogram"
    if len(pts) == 6:
        return "hexagon"
    if len(pts) == 3:
        return "triangle"
    return "polygon"
