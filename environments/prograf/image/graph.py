"""A flowchart or diagram read back from pixels: nodes and their shapes, the text inside each node,
and the arrows -- which nodes each one meets and at which end its arrowhead is.

How (OpenCV; every size relative to the image or to the measured stroke, so scale, stroke width,
colours and a dark page read alike):
- ink: pixels much darker than the page (the commonest colour; lighter, on a dark page), so a
  coloured or light-on-dark drawing reads like black on white and a pale node fill stays paper;
- nodes: the enclosed paper regions (holes in the ink) that are big, nearly convex and hold an OCR
  line near their middle; a region holding another such region is a group frame, not a node;
  its shape from the region's outline (`shape_of`): box, diamond, parallelogram or round (ellipse,
  circle, stadium, rounded box -- the verifier's round family);
- text: each OCR line whose centre lies in a node is that node's text (lines joined top to
  bottom); other lines are free labels;
- arrows: the ink left after the nodes (outline included) and the free labels are removed, in
  connected pieces; two pieces that touch one free label are one (a label drawn over its arrow
  cuts it); a piece meets a node when it comes within `GAP` of its outline, and has an arrowhead
  at that node when it is much thicker there than the stroke (a filled head).
A piece meeting two nodes is one arrow (directed when one end, and only one, has a head). A piece
meeting more nodes, or with a head at both ends, is arrows crossed or merged: its nodes are
`tangled` and the checks about them are undecidable rather than guessed (fan-in read from the heads
was tried on the development half and made false arrows where a node was not read).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from environments.prograf.image.ocr import TextLine

INK_DIFF = 56  # grey levels from the page's: ink (pale node fills and JPEG noise stay under it)
MIN_NODE_AREA = 0.0012  # of the image: smaller enclosed regions are letters' holes or arrowheads
MIN_SOLIDITY = 0.9  # region area / its convex hull's
CENTRED = 0.3  # the node's text centre within this share of the region's size from its centre
GAP = 0.02  # of the longer side: how far an arrow's end may stop short of a node's outline
HEAD = 1.9  # an end this many times thicker than the stroke holds a filled arrowhead
MIN_PIECE = 0.02  # of the longer side: a piece whose extent is shorter is a stray mark, not an arrow


@dataclass
class PixNode:
    box: tuple[int, int, int, int]  # x, y, w, h of the enclosed region
    shape: str | None
    lines: list[TextLine] = field(default_factory=list)

    @property
    def text(self) -> str:
        return " ".join(line.text for line in sorted(self.lines, key=lambda t: (round(t.box[1] / 8), t.box[0])))


@dataclass(frozen=True)
class PixEdge:
    src: int
    dst: int
    directed: bool


@dataclass
class PixelGraph:
    nodes: list[PixNode]
    edges: list[PixEdge]
    tangled: set[int]  # nodes met by a piece of ink whose arrows could not be told apart
    loose: set[int]  # nodes met by a long piece of ink that meets no other node (an arrow lost on the way)
    free: list[TextLine]  # OCR lines in no node (edge labels, titles)
    stroke: float
    unread: int = 0  # node-like regions holding ink but no text OCR read (a node whose label was missed)

    def between(self, a: int, b: int) -> list[PixEdge]:
        return [e for e in self.edges if e.src == a and e.dst == b]


def page_colour(img: np.ndarray) -> np.ndarray:
    """The commonest colour (quantised to 8 levels per channel): the page."""
    q = (img // 32).reshape(-1, 3).astype(np.int32)
    keys = q[:, 0] * 64 + q[:, 1] * 8 + q[:, 2]
    top = int(np.bincount(keys).argmax())
    mask = keys == top
    return np.asarray(img.reshape(-1, 3)[mask].mean(axis=0))


def luminance(img: np.ndarray) -> np.ndarray:
    return np.asarray(img.astype(np.float32) @ np.array([0.299, 0.587, 0.114], np.float32))


def ink_mask(img: np.ndarray) -> np.ndarray:
    """Pixels darker than a light page (lighter than a dark one) by INK_DIFF grey levels."""
    page = float(luminance(page_colour(img)[None, None, :].astype(np.float32))[0, 0])
    grey = luminance(img)
    diff = page - grey if page >= 128 else grey - page
    return (diff >= INK_DIFF).astype(np.uint8)


def stroke_width(ink: np.ndarray) -> float:
    """The drawing's line width in pixels: twice the typical distance from ink's middle to its edge."""
    import cv2

    dist = cv2.distanceTransform(ink, cv2.DIST_L2, 3)
    ridge = dist[(dist > 0) & (dist >= cv2.dilate(dist, np.ones((3, 3), np.uint8)) - 1e-6)]
    return float(max(1.0, 2 * np.median(ridge))) if ridge.size else 1.0


def shape_of(contour: np.ndarray) -> str | None:
    """box, diamond, parallelogram or round, from an enclosed region's outline; None if unclear.
    Read from how much of its bounding box the region fills and how far the outline stays from
    each corner of that box (a box reaches all four, a rounded box or an ellipse none, a
    parallelogram two opposite ones, a diamond none while filling about half)."""
    import cv2

    area = cv2.contourArea(contour)
    x, y, w, h = cv2.boundingRect(contour)
    if w < 4 or h < 4 or area <= 0:
        return None
    fill = area / (w * h)
    pts = contour.reshape(-1, 2).astype(np.float32)
    corners = [(x, y), (x + w - 1, y), (x + w - 1, y + h - 1), (x, y + h - 1)]
    cut = [float(np.hypot(pts[:, 0] - cx, pts[:, 1] - cy).min()) for cx, cy in corners]
    sharp = max(1.5, 0.02 * min(w, h))  # a square corner, blurred by antialiasing or JPEG
    rounded = max(2.5, 0.05 * min(w, h))  # a rounded corner cuts at least this much
    if all(c <= sharp for c in cut) and fill >= 0.9:
        return "box"
    far = 0.2 * min(w, h)
    if all(c >= far for c in cut) and fill < 0.62:
        return "diamond"
    if all(c >= rounded for c in cut) and fill >= 0.72:
        return "round"
    near = [c <= sharp for c in cut]
    if (
        near in ([True, False, True, False], [False, True, False, True])
        and all(c >= far for c, n in zip(cut, near) if not n)
        and 0.5 <= fill < 0.92
    ):
        return "parallelogram"
    return None


def _nodes(ink: np.ndarray, lines: list[TextLine]) -> tuple[list[PixNode], list[np.ndarray], int]:
    """The nodes, their outlines, and how many node-like regions hold ink but no text OCR read."""
    import cv2

    contours, hierarchy = cv2.findContours(ink, cv2.RETR_CCOMP, cv2.CHAIN_APPROX_NONE)
    if hierarchy is None:
        return [], [], 0
    blank: list[tuple[int, int, int, int]] = []
    min_area = MIN_NODE_AREA * ink.size
    found: list[tuple[PixNode, np.ndarray]] = []
    for contour, (_, _, _, parent) in zip(contours, hierarchy[0]):
        if parent < 0:
            continue
        area = cv2.contourArea(contour)
        hull = cv2.contourArea(cv2.convexHull(contour))
        if area < min_area or hull <= 0 or area / hull < MIN_SOLIDITY:
            continue
        x, y, w, h = cv2.boundingRect(contour)
        inside = [t for t in lines if cv2.pointPolygonTest(contour, _centre(t), False) > 0]
        if not inside:
            if ink[y + 3 : y + h - 3, x + 3 : x + w - 3].any():
                blank.append((x, y, w, h))
            continue
        cx = sum(_centre(t)[0] for t in inside) / len(inside)
        cy = sum(_centre(t)[1] for t in inside) / len(inside)
        if abs(cx - (x + w / 2)) > CENTRED * w or abs(cy - (y + h / 2)) > CENTRED * h:
            continue  # text off the middle: a region closed by arrows around a free label
        found.append((PixNode((x, y, w, h), shape_of(contour), inside), contour))
    keep = [(n, c) for n, c in found if not any(o is not n and _inside(o.box, n.box) for o, _ in found)]
    unread = sum(1 for b in blank if not any(_inside(n.box, b) for n, _ in found))
    return [n for n, _ in keep], [c for _, c in keep], unread


def _centre(t: TextLine) -> tuple[float, float]:
    return ((t.box[0] + t.box[2]) / 2, (t.box[1] + t.box[3]) / 2)


def _inside(inner: tuple[int, int, int, int], outer: tuple[int, int, int, int]) -> bool:
    return (
        outer[0] <= inner[0]
        and outer[1] <= inner[1]
        and inner[0] + inner[2] <= outer[0] + outer[2]
        and inner[1] + inner[3] <= outer[1] + outer[3]
    )


def read_graph(img: np.ndarray, lines: list[TextLine]) -> PixelGraph:
    """Nodes, arrows and free labels of an RGB image, given its OCR lines."""
    import cv2

    ink = ink_mask(img)
    stroke = stroke_width(ink)
    nodes, contours, unread = _nodes(ink, lines)
    in_node = {id(t) for n in nodes for t in n.lines}
    free = [t for t in lines if id(t) not in in_node]
    h, w = ink.shape
    # each node's body: its region and outline, grown past the outline's far side
    reach = int(np.ceil(stroke)) + 1
    kernel = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * reach + 1, 2 * reach + 1))
    bodies = []
    for contour in contours:
        body = np.zeros_like(ink)
        cv2.drawContours(body, [contour], -1, 1, thickness=cv2.FILLED)
        bodies.append(cv2.dilate(body, kernel))
    rest = ink.copy()
    for body in bodies:
        rest[body > 0] = 0
    boxes = []
    for t in free:
        if sum(ch.isalnum() for ch in t.text) < 2:
            continue  # an arrowhead read as "V" or "4" is ink to keep, not a label
        x0, y0, x1, y1 = (int(round(v)) for v in t.box)
        x0, y0, x1, y1 = max(0, x0 - 1), max(0, y0 - 1), min(w, x1 + 2), min(h, y1 + 2)
        rest[y0:y1, x0:x1] = 0
        boxes.append((x0, y0, x1, y1))
    count, labels = cv2.connectedComponents(rest, connectivity=8)
    parent = list(range(count))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    # pieces a free label cut apart (one meets the box on one side, the other on the opposite
    # side), joined again; a piece merely passing by the label is left alone
    for x0, y0, x1, y1 in boxes:
        pad = reach + 1 + (y1 - y0) // 2  # a label's backdrop reaches past its letters
        ya, xa = max(0, y0 - pad), max(0, x0 - pad)
        window = labels[ya : y1 + pad, xa : x1 + pad]
        cx, cy = (x0 + x1) / 2 - xa, (y0 + y1) / 2 - ya
        sides: dict[int, tuple[float, float]] = {}
        for lab in set(np.unique(window).tolist()) - {0}:
            yy, xx = np.nonzero(window == lab)
            sides[lab] = (float(xx.mean() - cx), float(yy.mean() - cy))
        for a in sides:
            for b in sides:
                (ax, ay), (bx, by) = sides[a], sides[b]
                across = (ax * bx < 0 and min(abs(ax), abs(bx)) > (x1 - x0) / 4) or (
                    ay * by < 0 and min(abs(ay), abs(by)) > (y1 - y0) / 4
                )
                if a < b and across:
                    parent[find(a)] = find(b)
    root = np.array([find(i) for i in range(count)])
    pieces = root[labels]
    pieces[labels == 0] = 0
    side = max(h, w)
    gap = GAP * side + stroke
    head_reach = gap + 6 * stroke
    dist = cv2.distanceTransform(rest, cv2.DIST_L2, 3)
    away = [cv2.distanceTransform((b == 0).astype(np.uint8), cv2.DIST_L2, 3) for b in bodies]
    edges: list[PixEdge] = []
    tangled: set[int] = set()
    loose: set[int] = set()
    for piece in sorted(set(np.unique(pieces).tolist()) - {0}):
        mask = pieces == piece
        ys, xs = np.nonzero(mask)
        if max(xs.max() - xs.min(), ys.max() - ys.min()) < MIN_PIECE * side:
            continue
        to_node = [a[ys, xs] for a in away]  # distance from each pixel of the piece to each node
        met = [i for i, r in enumerate(to_node) if r.min() <= gap]
        if len(met) == 1 and max(xs.max() - xs.min(), ys.max() - ys.min()) >= 2 * gap:
            loose.update(met)
        if len(met) < 2:
            continue
        nearest = np.argmin(np.stack([to_node[i] for i in met]), axis=0)
        thick = dist[ys, xs]
        heads = set()
        for k, i in enumerate(met):
            end = (nearest == k) & (to_node[i] <= head_reach)
            if end.any() and float(thick[end].max()) >= HEAD * stroke / 2 + 0.5:
                heads.add(i)
        tails = [i for i in met if i not in heads]
        if len(met) == 2 and len(heads) == 1:
            edges.append(PixEdge(tails[0], next(iter(heads)), True))
        elif len(met) == 2 and not heads:
            edges.append(PixEdge(met[0], met[1], False))
        else:  # two heads, or arrows merged into one piece: which end belongs to which is not read
            tangled.update(met)
    return PixelGraph(nodes, edges, tangled, loose, free, stroke, unread)
