"""The typed scene every format is parsed into, and what the verifier checks.

Three layers, filled by the format: primitives (SVG: segments, circles, texts, shapes, with the
canvas they must be visible in), a graph (DOT, Mermaid, or shapes and arrows found in an SVG:
nodes, edges, clusters) and a circuit (schemdraw: components and the nets their terminals are on).
`notes` records what the sanitiser stripped or dropped, so a verdict can say so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

Box = tuple[float, float, float, float]  # x0, y0, x1, y1


@dataclass
class Segment:
    x1: float
    y1: float
    x2: float
    y2: float
    arrow_start: bool = False
    arrow_end: bool = False
    element: int = -1  # index of the SVG element it came from (a polyline gives several)
    # whether each end is a drawn vertex; False inside a flattened curve, where an end is only
    # a step along the curve and no point of the figure
    ends: tuple[bool, bool] = (True, True)


@dataclass
class Circle:
    cx: float
    cy: float
    r: float
    element: int = -1


@dataclass
class Text:
    text: str
    x: float
    y: float
    element: int = -1
    size: float = 0.0  # font size in canvas units (0: unknown)


@dataclass
class Shape:
    """A closed shape that may be a node or a cluster: its family and its bounding box."""

    family: str  # box, rounded, ellipse, circle, diamond, parallelogram, polygon, other
    box: Box
    element: int = -1
    outlined: bool = True  # a stroke unlike its fill: False for a filled patch (a label's backdrop?)


@dataclass
class Node:
    key: str
    label: str
    shape: str = "box"
    cluster: str | None = None
    box: Box | None = None


@dataclass
class Edge:
    src: str
    dst: str
    label: str = ""
    directed: bool = True


@dataclass
class Cluster:
    key: str
    label: str
    members: set[str] = field(default_factory=set)


@dataclass
class Component:
    label: str  # the name written on it, e.g. R1
    kind: str  # resistor, capacitor, ... (our vocabulary)
    value: str  # the rest of its label text, e.g. 10 kOhm
    nets: tuple[int, ...]  # the net of each terminal (one for ground)


@dataclass
class Scene:
    format: str
    canvas: Box | None = None
    segments: list[Segment] = field(default_factory=list)
    circles: list[Circle] = field(default_factory=list)
    texts: list[Text] = field(default_factory=list)
    shapes: list[Shape] = field(default_factory=list)
    nodes: list[Node] = field(default_factory=list)
    edges: list[Edge] = field(default_factory=list)
    clusters: list[Cluster] = field(default_factory=list)
    components: list[Component] = field(default_factory=list)
    ground_nets: set[int] = field(default_factory=set)
    notes: list[str] = field(default_factory=list)
    hidden: int = 0  # elements drawn but not visible (outside the canvas, no paint)
    px: float = 1.0  # canvas units per pixel: the reader's pixel-sized slacks are multiplied by it


def norm_text(text: str) -> str:
    """Labels compare case-, space- and quote-insensitively; symbols like ? > = stay meaningful."""
    text = text.replace("Ω", "ohm").replace("µ", "u").replace("μ", "u").replace("→", "->")
    text = re.sub(r"[\"'`*_.,:;!]", "", text.lower())
    return re.sub(r"\s+", " ", text).strip()


def box_union(boxes: list[Box]) -> Box:
    return (min(b[0] for b in boxes), min(b[1] for b in boxes), max(b[2] for b in boxes), max(b[3] for b in boxes))


def box_contains(outer: Box, x: float, y: float, pad: float = 0.0) -> bool:
    return outer[0] - pad <= x <= outer[2] + pad and outer[1] - pad <= y <= outer[3] + pad


def box_distance(b: Box, x: float, y: float) -> float:
    """Distance from a point to a box (0 inside)."""
    dx = max(b[0] - x, 0.0, x - b[2])
    dy = max(b[1] - y, 0.0, y - b[3])
    return float((dx * dx + dy * dy) ** 0.5)


class InputRejected(Exception):
    """Model output we will not read (hostile, too large, unparseable): recorded as a failure
    pattern (`rejected_input` or `render_error`) on every point, never raised out of the verifier."""

    def __init__(self, message: str, pattern: str = "rejected_input"):
        super().__init__(message)
        self.pattern = pattern
