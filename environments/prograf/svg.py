"""SVG from a model: sanitised, then parsed into scene primitives (and, for graphs, nodes/edges).

Sanitising: the XML parser refuses DTDs and entities (defusedxml); scripts, foreignObject,
images, animation, event handlers and every reference that is not to `#an-id` in the same file
are stripped and noted. Only the sanitised tree is ever re-serialised (for the rasteriser).

Parsing: transforms are composed, styles inherited (attributes, `style=`, and simple `<style>`
rules by tag, class or id), and an element counts only if it paints something inside the canvas
(the viewBox): a line with no stroke, `display:none`, zero opacity or a shape wholly outside the
canvas is `hidden`, i.e. not drawn.
"""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass

import defusedxml.ElementTree as SafeET
from defusedxml.common import DefusedXmlException

from environments.prograf.scene import Box, Circle, InputRejected, Scene, Segment, Shape, Text, box_union

MAX_CHARS = 200_000
MAX_ELEMENTS = 5_000
SVG_NS = "http://www.w3.org/2000/svg"
XLINK = "{http://www.w3.org/1999/xlink}href"
STRIP = {"script", "foreignObject", "image", "iframe", "object", "embed", "audio", "video", "animate",
         "animateMotion", "animateTransform", "set", "feImage", "handler", "listener"}
NOT_DRAWN = {"defs", "marker", "symbol", "clipPath", "mask", "pattern", "title", "desc", "metadata",
             "linearGradient", "radialGradient", "filter", "style"}
INHERITED = ("fill", "stroke", "stroke-width", "visibility", "font-size", "text-anchor", "marker-start", "marker-end")
Matrix = tuple[float, float, float, float, float, float]  # a b c d e f, as SVG's matrix()
IDENTITY: Matrix = (1.0, 0.0, 0.0, 1.0, 0.0, 0.0)


def local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


# ---------------------------------------------------------------------- sanitise
def sanitise(code: str) -> tuple[ET.Element, list[str]]:
    """The parsed, stripped tree and a note per thing stripped; InputRejected if unreadable."""
    if len(code) > MAX_CHARS:
        raise InputRejected(f"SVG of {len(code)} characters (at most {MAX_CHARS})")
    try:
        root = SafeET.fromstring(code, forbid_dtd=True, forbid_entities=True, forbid_external=True)
    except DefusedXmlException as exc:
        raise InputRejected(f"SVG refused: {type(exc).__name__} (no DTDs, entities or external references)") from None
    except ET.ParseError as exc:
        raise InputRejected(f"SVG does not parse: {exc}") from None
    if local(root.tag) != "svg":
        raise InputRejected(f"root element is <{local(root.tag)}>, not <svg>")
    if sum(1 for _ in root.iter()) > MAX_ELEMENTS:
        raise InputRejected(f"SVG with more than {MAX_ELEMENTS} elements")
    notes: list[str] = []
    _strip(root, notes)
    return root, notes


def _external(value: str) -> bool:
    """A reference that leaves the file: anything but `#id` (url(#id) in styles)."""
    refs = re.findall(r"url\(\s*['\"]?([^)'\"]*)", value)
    return any(not r.strip().startswith("#") for r in refs) or "@import" in value


def _strip(el: ET.Element, notes: list[str]) -> None:
    for child in list(el):
        name = local(child.tag) if isinstance(child.tag, str) else ""
        if not name or name in STRIP:
            el.remove(child)
            notes.append(f"stripped <{name or 'comment'}>" if name else "stripped a processing instruction")
            continue
        if name == "style" and _external(child.text or ""):
            el.remove(child)
            notes.append("stripped <style> with an external reference")
            continue
        _strip(child, notes)
    for key in list(el.attrib):
        value = el.attrib[key]
        name = local(key).lower()
        if name.startswith("on"):
            del el.attrib[key]
            notes.append(f"stripped event handler {name}")
        elif name == "href" and not value.strip().startswith("#"):
            del el.attrib[key]
            notes.append("stripped an external href")
        elif _external(value):
            del el.attrib[key]
            notes.append(f"stripped attribute {name} with an external reference")


def serialise(root: ET.Element) -> str:
    """The sanitised tree as text (what the rasteriser gets)."""
    ET.register_namespace("", SVG_NS)
    ET.register_namespace("xlink", "http://www.w3.org/1999/xlink")
    return ET.tostring(root, encoding="unicode")


# ---------------------------------------------------------------------- numbers, transforms, styles
NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


def num(value: str | None, default: float = 0.0) -> float:
    if value is None:
        return default
    m = NUMBER.match(value.strip())
    return float(m.group()) if m else default


def numbers(value: str | None) -> list[float]:
    return [float(x) for x in NUMBER.findall(value or "")]


def multiply(m: Matrix, n: Matrix) -> Matrix:
    a, b, c, d, e, f = m
    a2, b2, c2, d2, e2, f2 = n
    return (a * a2 + c * b2, b * a2 + d * b2, a * c2 + c * d2, b * c2 + d * d2, a * e2 + c * f2 + e, b * e2 + d * f2 + f)


def parse_transform(text: str | None) -> Matrix:
    m = IDENTITY
    for op, args in re.findall(r"(matrix|translate|scale|rotate|skewX|skewY)\s*\(([^)]*)\)", text or ""):
        v = numbers(args)
        if op == "matrix" and len(v) == 6:
            t: Matrix = (v[0], v[1], v[2], v[3], v[4], v[5])
        elif op == "translate" and v:
            t = (1, 0, 0, 1, v[0], v[1] if len(v) > 1 else 0.0)
        elif op == "scale" and v:
            t = (v[0], 0, 0, v[1] if len(v) > 1 else v[0], 0, 0)
        elif op == "rotate" and v:
            r = math.radians(v[0])
            t = (math.cos(r), math.sin(r), -math.sin(r), math.cos(r), 0, 0)
            if len(v) == 3:
                t = multiply(multiply((1, 0, 0, 1, v[1], v[2]), t), (1, 0, 0, 1, -v[1], -v[2]))
        elif op == "skewX" and v:
            t = (1, 0, math.tan(math.radians(v[0])), 1, 0, 0)
        elif op == "skewY" and v:
            t = (1, math.tan(math.radians(v[0])), 0, 1, 0, 0)
        else:
            continue
        m = multiply(m, t)
    return m


def apply(m: Matrix, x: float, y: float) -> tuple[float, float]:
    return (m[0] * x + m[2] * y + m[4], m[1] * x + m[3] * y + m[5])


def scale_of(m: Matrix) -> float:
    return math.sqrt(abs(m[0] * m[3] - m[1] * m[2])) or 1.0


def css_rules(root: ET.Element) -> list[tuple[str, dict[str, str]]]:
    """Simple `<style>` rules: selectors by tag, .class, tag.class or #id."""
    rules = []
    for el in root.iter():
        if isinstance(el.tag, str) and local(el.tag) == "style":
            text = re.sub(r"/\*.*?\*/", "", el.text or "", flags=re.S)
            for selectors, body in re.findall(r"([^{}]+)\{([^}]*)\}", text):
                decls = declarations(body)
                rules += [(s.strip(), decls) for s in selectors.split(",") if s.strip()]
    return rules


def declarations(text: str) -> dict[str, str]:
    out = {}
    for part in text.split(";"):
        key, sep, value = part.partition(":")
        if sep:
            out[key.strip().lower()] = value.strip()
    return out


def selector_matches(sel: str, el: ET.Element) -> bool:
    m = re.fullmatch(r"([a-zA-Z][\w-]*)?(?:([.#])([\w-]+))?", sel)
    if not m:
        return False
    tag, kind, name = m.groups()
    if tag and local(el.tag) != tag:
        return False
    if kind == ".":
        return name in (el.get("class") or "").split()
    if kind == "#":
        return el.get("id") == name
    return bool(tag)


@dataclass
class Style:
    fill: str = "black"
    stroke: str = "none"
    stroke_width: float = 1.0
    visibility: str = "visible"
    font_size: float = 16.0
    text_anchor: str = "start"
    marker_start: str = "none"
    marker_end: str = "none"
    opacity: float = 1.0


def element_style(el: ET.Element, parent: Style, rules: list[tuple[str, dict[str, str]]]) -> tuple[Style, bool]:
    """This element's style and whether it is displayed at all."""
    props: dict[str, str] = {}
    for sel, decls in rules:
        if selector_matches(sel, el):
            props.update(decls)
    for key in (*INHERITED, "display", "opacity", "fill-opacity", "stroke-opacity"):
        if el.get(key) is not None:
            props[key] = el.get(key, "")
    props.update(declarations(el.get("style") or ""))
    s = Style(**vars(parent))
    s.fill = props.get("fill", s.fill).strip()
    s.stroke = props.get("stroke", s.stroke).strip()
    s.stroke_width = num(props.get("stroke-width"), s.stroke_width)
    s.visibility = props.get("visibility", s.visibility).strip()
    s.font_size = num(props.get("font-size"), s.font_size)
    s.text_anchor = props.get("text-anchor", s.text_anchor).strip()
    s.marker_start = props.get("marker-start", s.marker_start).strip()
    s.marker_end = props.get("marker-end", s.marker_end).strip()
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


# ---------------------------------------------------------------------- paths
def path_points(d: str) -> list[tuple[list[tuple[float, float]], bool, bool]]:
    """Subpaths of a path as (points, closed, curved): curves contribute their end points only."""
    tokens = re.findall(r"[MmLlHhVvZzCcSsQqTtAa]|" + NUMBER.pattern, d or "")
    subpaths: list[tuple[list[tuple[float, float]], bool, bool]] = []
    pts: list[tuple[float, float]] = []
    closed = curved = False
    x = y = 0.0
    cmd = ""
    i = 0
    arity = {"M": 2, "L": 2, "H": 1, "V": 1, "C": 6, "S": 4, "Q": 4, "T": 2, "A": 7, "Z": 0}
    while i < len(tokens):
        if tokens[i].isalpha():
            cmd = tokens[i]
            i += 1
            if cmd in "Zz":
                closed = True
                if pts:
                    x, y = pts[0]
                continue
        if not cmd or cmd in "Zz":
            break
        n = arity[cmd.upper()]
        chunk = tokens[i:i + n]
        if len(chunk) < n or any(t.isalpha() for t in chunk):
            break
        args = [float(t) for t in chunk]
        i += n
        rel = cmd.islower()
        up = cmd.upper()
        if up == "H":
            x = x + args[0] if rel else args[0]
        elif up == "V":
            y = y + args[0] if rel else args[0]
        else:
            nx, ny = args[-2], args[-1]
            x, y = (x + nx, y + ny) if rel else (nx, ny)
        if up == "M":
            if pts:
                subpaths.append((pts, closed, curved))
            pts, closed, curved = [(x, y)], False, False
            cmd = "l" if rel else "L"  # further pairs after a moveto are linetos
            continue
        curved = curved or up in "CSQTA"
        pts.append((x, y))
    if pts:
        subpaths.append((pts, closed, curved))
    return subpaths


# ---------------------------------------------------------------------- parse
def canvas_of(root: ET.Element) -> Box:
    vb = numbers(root.get("viewBox"))
    if len(vb) == 4 and vb[2] > 0 and vb[3] > 0:
        return (vb[0], vb[1], vb[0] + vb[2], vb[1] + vb[3])
    w, h = num(root.get("width"), 300.0), num(root.get("height"), 150.0)
    return (0.0, 0.0, w if w > 0 else 300.0, h if h > 0 else 150.0)


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
                   seg.arrow_start and t0 == 0.0, seg.arrow_end and t1 == 1.0, seg.element)


def parse_svg(code: str) -> Scene:
    """The scene of an SVG: visible segments, circles, texts and closed shapes, in canvas units."""
    root, notes = sanitise(code)
    scene = Scene(format="svg", canvas=canvas_of(root), notes=notes)
    _walk(root, IDENTITY, Style(), css_rules(root), scene, [0])
    return scene


def _walk(el: ET.Element, m: Matrix, style: Style, rules: list[tuple[str, dict[str, str]]], scene: Scene,
          counter: list[int]) -> None:
    for child in el:
        if not isinstance(child.tag, str):
            continue
        name = local(child.tag)
        if name in NOT_DRAWN:
            continue
        s, displayed = element_style(child, style, rules)
        if not displayed:
            scene.hidden += 1
            continue
        cm = multiply(m, parse_transform(child.get("transform")))
        counter[0] += 1
        if name in ("g", "a", "svg", "switch"):
            _walk(child, cm, s, rules, scene, counter)
        elif name == "text":
            _text(child, cm, s, scene, counter[0])
        else:
            _shape(name, child, cm, s, scene, counter[0])


def _text(el: ET.Element, m: Matrix, s: Style, scene: Scene, index: int) -> None:
    content = " ".join(" ".join(el.itertext()).split())
    x, y = num(el.get("x")), num(el.get("y"))
    for span in el:
        if local(str(span.tag)) == "tspan" and (span.get("x") or span.get("y")) and not el.get("x"):
            x, y = num(span.get("x"), x), num(span.get("y"), y)
            break
    if not content or not paints_fill(s) or s.font_size <= 0:
        scene.hidden += bool(content)
        return
    # the anchor is the baseline start (or middle/end): the label's centre is what sits on an object
    width = 0.55 * s.font_size * len(content)
    cx = {"middle": x, "end": x - width / 2}.get(s.text_anchor, x + width / 2)
    px, py = apply(m, cx, y - 0.35 * s.font_size)
    box = scene.canvas
    if box and not (box[0] <= px <= box[2] and box[1] <= py <= box[3]):
        scene.hidden += 1
        return
    scene.texts.append(Text(content, px, py, index))


def _shape(name: str, el: ET.Element, m: Matrix, s: Style, scene: Scene, index: int) -> None:
    stroke, fill = paints_stroke(s), paints_fill(s)
    g = el.get
    segs: list[tuple[tuple[float, float], tuple[float, float]]] = []
    family = ""
    local_pts: list[tuple[float, float]] = []
    if name == "line":
        segs = [((num(g("x1")), num(g("y1"))), (num(g("x2")), num(g("y2"))))]
        fill = False
    elif name in ("polyline", "polygon"):
        v = numbers(g("points"))
        local_pts = list(zip(v[0::2], v[1::2]))
        segs = list(zip(local_pts, local_pts[1:]))
        if name == "polygon" and len(local_pts) >= 3:
            segs.append((local_pts[-1], local_pts[0]))
            family = polygon_family([apply(m, *p) for p in local_pts])
        else:
            fill = False
    elif name == "rect":
        x, y, w, h = num(g("x")), num(g("y")), num(g("width")), num(g("height"))
        if w <= 0 or h <= 0:
            scene.hidden += 1
            return
        local_pts = [(x, y), (x + w, y), (x + w, y + h), (x, y + h)]
        segs = list(zip(local_pts, local_pts[1:] + local_pts[:1]))
        family = "rounded" if num(g("rx") or g("ry")) > 0.1 * min(w, h) else "box"
    elif name in ("circle", "ellipse"):
        cx, cy = num(g("cx")), num(g("cy"))
        rx = num(g("r")) if name == "circle" else num(g("rx"))
        ry = num(g("r")) if name == "circle" else num(g("ry"), rx)
        if rx <= 0 or ry <= 0 or not (stroke or fill):
            scene.hidden += 1
            return
        (px, py), k = apply(m, cx, cy), scale_of(m)
        box = (px - rx * k, py - ry * k, px + rx * k, py + ry * k)
        if scene.canvas and not _overlaps(box, scene.canvas):
            scene.hidden += 1
            return
        if abs(rx - ry) <= 0.05 * max(rx, ry):
            scene.circles.append(Circle(px, py, rx * k, index))
        scene.shapes.append(Shape("circle" if abs(rx - ry) <= 0.05 * max(rx, ry) else "ellipse", box, index))
        return
    elif name == "path":
        for pts, closed, curved in path_points(g("d") or ""):
            wpts = [apply(m, *p) for p in pts]
            if closed and len(wpts) >= 3:
                fam = "other" if curved else polygon_family(wpts)
                if stroke or fill:
                    _add_shape(scene, fam, wpts, index)
            if stroke:
                pairs = list(zip(wpts, wpts[1:] + (wpts[:1] if closed else [])))
                _add_segments(scene, pairs, s, index)
            elif not fill:
                scene.hidden += 1
        return
    else:
        return
    wsegs = [(apply(m, *a), apply(m, *b)) for a, b in segs]
    if family and (stroke or fill):
        _add_shape(scene, family, [apply(m, *p) for p in local_pts], index)
    if stroke:
        _add_segments(scene, wsegs, s, index)
    elif not family or not fill:
        scene.hidden += 1


def _overlaps(a: Box, b: Box) -> bool:
    return a[0] <= b[2] and b[0] <= a[2] and a[1] <= b[3] and b[1] <= a[3]


def _add_shape(scene: Scene, family: str, pts: list[tuple[float, float]], index: int) -> None:
    box = (min(p[0] for p in pts), min(p[1] for p in pts), max(p[0] for p in pts), max(p[1] for p in pts))
    if scene.canvas and not _overlaps(box, scene.canvas):
        scene.hidden += 1
        return
    scene.shapes.append(Shape(family, box, index))


def _add_segments(scene: Scene, pairs: list[tuple[tuple[float, float], tuple[float, float]]], s: Style, index: int) -> None:
    for k, ((x1, y1), (x2, y2)) in enumerate(pairs):
        seg = Segment(x1, y1, x2, y2, arrow_start=k == 0 and s.marker_start != "none",
                      arrow_end=k == len(pairs) - 1 and s.marker_end != "none", element=index)
        clipped = clip(seg, scene.canvas) if scene.canvas else seg
        if clipped is None or math.dist((clipped.x1, clipped.y1), (clipped.x2, clipped.y2)) < 1e-9:
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
