"""SVG from a model, made safe to read and to render (`svg.py` parses what this leaves).

The XML parser refuses DTDs and entities (defusedxml); scripts, images, animation, event handlers,
empty `<foreignObject>`s and every reference that is not to `#an-id` in the same file are stripped
and noted. Nesting deeper than MAX_DEPTH, a `<use>` cycle, `<use>`s that expand to more than
MAX_EXPANDED elements or MAX_PIECES line pieces, and any construct the reader cannot place (a
`<foreignObject>` holding text, `<textPath>`, an unknown SVG element) are refused as "... at line N",
so nothing is silently misread. Only the sanitised tree is ever re-serialised (for the rasteriser).
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from functools import lru_cache

from defusedxml.common import DefusedXmlException
from defusedxml.ElementTree import DefusedXMLParser

from environments.prograf.parse.scene import InputRejected
from environments.prograf.parse.svg_css import read_sheet

MAX_CHARS = 200_000
MAX_ELEMENTS = 5_000
MAX_DEPTH = 64  # nesting of elements, <use> expansions included: real drawings stay under 20
MAX_EXPANDED = 10_000  # elements drawn once every <use> is expanded (a use-of-uses doubles per level)
MAX_PIECES = 100_000  # straight pieces in the scene: a curve is 8, so a path used many times is bounded too
SVG_NS = "http://www.w3.org/2000/svg"
XLINK = "{http://www.w3.org/1999/xlink}href"
STRIP = {"script", "image", "iframe", "object", "embed", "audio", "video", "animate",
         "animateMotion", "animateTransform", "set", "feImage", "handler", "listener"}
NOT_DRAWN = {"defs", "marker", "symbol", "clipPath", "mask", "pattern", "title", "desc", "metadata",
             "linearGradient", "radialGradient", "filter", "style"}
DRAWN = {"svg", "g", "a", "switch", "use", "text", "tspan", "line", "polyline", "polygon", "rect", "circle",
         "ellipse", "path"}
# known SVG elements that draw nothing by themselves (their content is read where it is used, or never)
INERT = NOT_DRAWN | {"stop", "view", "cursor", "font", "font-face", "glyph", "missing-glyph", "hkern", "vkern",
                     "color-profile", "font-face-src", "font-face-name", "font-face-uri"}


@lru_cache(maxsize=1024)  # a drawing has a few distinct tags, each looked up many times
def local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def svg_element(tag: str) -> bool:
    """In the SVG namespace, or in none (models often leave xmlns out; renderers then read SVG)."""
    return not tag.startswith("{") or tag.startswith("{" + SVG_NS + "}")


def href(el: ET.Element) -> str:
    return (el.get("href") or el.get(XLINK) or "").strip()


# ---------------------------------------------------------------------- sanitise
class _LineBuilder(ET.TreeBuilder):
    """A tree builder that remembers each element's source line, so a refusal can name it."""

    def __init__(self) -> None:
        super().__init__()
        self.expat: object = None
        self.lines: dict[int, int] = {}
        self.keep: list[ET.Element] = []  # holds every element, so no id() in `lines` is reused
        self.uses = False  # any <use> at all (most drawings have none: their check is skipped)

    def start(self, tag: str, attrs: dict[str, str]) -> ET.Element:
        el = super().start(tag, attrs)
        self.lines[id(el)] = int(getattr(self.expat, "CurrentLineNumber", 0))
        self.keep.append(el)
        self.uses = self.uses or local(tag) == "use"
        return el


def sanitise(code: str) -> tuple[ET.Element, list[str]]:
    """The parsed, stripped tree and a note per thing stripped; InputRejected if unreadable."""
    if len(code) > MAX_CHARS:
        raise InputRejected(f"SVG of {len(code)} characters (at most {MAX_CHARS})")
    builder = _LineBuilder()
    try:
        parser = DefusedXMLParser(target=builder, forbid_dtd=True, forbid_entities=True, forbid_external=True)
        builder.expat = parser.parser
        parser.feed(code)
        root = parser.close()
    except DefusedXmlException as exc:
        raise InputRejected(f"SVG refused: {type(exc).__name__} (no DTDs, entities or external references)") from None
    except ET.ParseError as exc:
        raise InputRejected(f"SVG does not parse: {exc}") from None
    if local(root.tag) != "svg":
        raise InputRejected(f"root element is <{local(root.tag)}>, not <svg>")
    if len(builder.keep) > MAX_ELEMENTS:  # every element the parser made is in the tree
        raise InputRejected(f"SVG with more than {MAX_ELEMENTS} elements")
    lines = builder.lines
    _check_depth(root, lines)  # before anything below recurses over the tree
    notes: list[str] = []
    _strip(root, notes, lines)
    _check_constructs(root, lines)
    for el in root.iter():  # every sheet, wherever it sits: a rule the reader cannot match is refused by line
        if isinstance(el.tag, str) and local(el.tag) == "style":
            read_sheet(el.text or "", _line(el, lines))
    if builder.uses:
        _check_uses(root, lines)
    return root, notes


def _line(el: ET.Element, lines: dict[int, int]) -> int:
    return lines.get(id(el), 0)


def _check_depth(root: ET.Element, lines: dict[int, int]) -> None:
    stack = [(root, 0)]
    while stack:
        el, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise InputRejected(f"elements nested more than {MAX_DEPTH} deep at line {_line(el, lines)}")
        stack.extend((c, depth + 1) for c in el)


def _check_constructs(el: ET.Element, lines: dict[int, int]) -> None:
    """Refuse what the reader cannot place rather than misread it."""
    for child in el:
        tag = child.tag if isinstance(child.tag, str) else ""
        if not tag or not svg_element(tag):
            continue  # editor metadata (inkscape:, sodipodi:) draws nothing in any renderer
        name = local(tag)
        if name in ("textPath", "tref"):
            raise InputRejected(f"unsupported construct <{name}> at line {_line(child, lines)}: "
                                "text placed along a path or by reference is not read")
        if name not in DRAWN and name not in INERT:
            raise InputRejected(f"unsupported construct <{name}> at line {_line(child, lines)}")
        if name in DRAWN or name in ("defs", "symbol"):  # defs and symbols are drawn through <use>
            _check_constructs(child, lines)


def _check_uses(root: ET.Element, lines: dict[int, int]) -> None:
    """Expanding every <use> must end (no cycle), stay shallow and stay small: counted with a
    memo per element, so a use-of-uses bomb is refused in time linear in the file."""
    ids = {el.get("id"): el for el in root.iter() if el.get("id")}
    memo: dict[int, tuple[int, int]] = {}  # element -> (elements drawn in it, its expanded height)
    active: set[int] = set()

    def size(el: ET.Element, depth: int) -> tuple[int, int]:
        key = id(el)
        if key in memo:
            if depth + memo[key][1] > MAX_DEPTH:
                raise InputRejected(f"<use> expansion nested more than {MAX_DEPTH} deep at line {_line(el, lines)}")
            return memo[key]
        if depth > MAX_DEPTH:
            raise InputRejected(f"<use> expansion nested more than {MAX_DEPTH} deep at line {_line(el, lines)}")
        active.add(key)
        kids = list(el)
        if isinstance(el.tag, str) and local(el.tag) == "use":
            ref = ids.get(href(el)[1:]) if href(el).startswith("#") else None
            if ref is not None and id(ref) in active:
                raise InputRejected(f"a <use> cycle through #{ref.get('id')} at line {_line(el, lines)}")
            kids = [ref] if ref is not None else []
        total, height = 1, 0
        for kid in kids:
            n, h = size(kid, depth + 1)
            total, height = total + n, max(height, h + 1)
            if total > MAX_EXPANDED:
                raise InputRejected(f"<use> expands to more than {MAX_EXPANDED} elements at line {_line(el, lines)}")
        active.discard(key)
        memo[key] = (total, height)
        return total, height

    size(root, 0)


URL_REF = re.compile(r"url\(\s*['\"]?([^)'\"]*)")


def _external(value: str) -> bool:
    """A reference that leaves the file: anything but `#id` (url(#id) in styles)."""
    if "url(" not in value:  # what the pattern needs to match at all: most attributes are numbers
        return "@import" in value
    return any(not r.strip().startswith("#") for r in URL_REF.findall(value)) or "@import" in value


def _strip(el: ET.Element, notes: list[str], lines: dict[int, int]) -> None:
    for child in list(el):
        name = local(child.tag) if isinstance(child.tag, str) else ""
        if name == "foreignObject":
            if "".join(child.itertext()).strip():
                raise InputRejected(f"unsupported construct <foreignObject> at line {_line(child, lines)}: "
                                    "its HTML text would be a label, and HTML is not read")
            el.remove(child)
            notes.append("stripped <foreignObject>")
            continue
        if not name or name in STRIP:
            el.remove(child)
            notes.append(f"stripped <{name or 'comment'}>" if name else "stripped a processing instruction")
            continue
        if name == "style" and _external(child.text or ""):
            el.remove(child)
            notes.append("stripped <style> with an external reference")
            continue
        _strip(child, notes, lines)
    for key, value in list(el.attrib.items()):
        name = local(key).lower()
        if name.startswith("on"):
            del el.attrib[key]
            notes.append(f"stripped event handler {name}")
        elif name == "href" and not value.strip().startswith("#"):
            del el.attrib[key]
            notes.append("stripped an external href")
        elif ("url(" in value or "@import" in value) and _external(value):  # the test inlined: most values are numbers
            del el.attrib[key]
            notes.append(f"stripped attribute {name} with an external reference")


def serialise(root: ET.Element) -> str:
    """The sanitised tree as text (what the rasteriser gets)."""
    ET.register_namespace("", SVG_NS)
    ET.register_namespace("xlink", "http://www.w3.org/1999/xlink")
    return ET.tostring(root, encoding="unicode")
