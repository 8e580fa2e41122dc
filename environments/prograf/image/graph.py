"""A flowchart or diagram read back from pixels: nodes and their shapes, the text inside each node,
and the arrows -- which nodes each one meets and at which end its arrowhead is.

How (OpenCV; every size relative to the image or to the measured stroke, so scale, stroke width,
colours and a dark page read alike):
- ink: pixels much darker than the page (the commonest colour; lighter, on a dark page), so a
  coloured or light-on-dark drawing reads like black on white and a pale node fill stays paper;
- nodes: the enclosed paper regions (holes in the ink) that are big, nearly convex and hold an OCR
  line near their middle; a region holding another region as big as a node (read as one or not)
  is a group frame, not a node; a node a line runs through (its inside cut in two) is made whole
  again and marked `crossed` (`_crossed_nodes`); its shape from the region's outline
  (`shape_of`): box, diamond, parallelogram or round (ellipse, circle, stadium, rounded box --
  the verifier's round family);
- text: each OCR line whose centre lies in a node is that node's text (lines joined top to
  bottom); other lines are free labels;
- arrows: the ink left after the nodes (outline included) and the free labels are removed, in
  connected pieces; two pieces a free label cut apart are one again when their cut ends line up
  (`_in_line`: two arrows drawn side by side under one label do not); a piece meets a node when it
  comes within `GAP` of its outline -- a straight piece that meets fewer than two is followed on
  along its line to the nodes it points at (`_short_ends`: a renderer's margin past a diamond's or
  an ellipse's side is wide) -- and has an arrowhead at that node when it is much thicker there
  than the stroke (a filled head).
A piece meeting two nodes is one arrow (directed when one end, and only one, has a head). A piece
meeting more nodes, or with a head at both ends, or at a crossed node, is arrows crossed or
merged: its nodes are `tangled` and the checks about them are undecidable rather than guessed
(fan-in read from the heads was tried on the development half and made false arrows where a node
was not read); so are the nodes on either side of a free label's box that no piece at the box
meets (`_hidden`: a label OCR read as one tall box wipes the arrows under it).
Session 29 (issue 39 item 5): the label join, the followed-on ends, crossed nodes, frames holding
unread nodes and hidden arrows were chosen on even-index tasks (docs/prograf.md).
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
REACH = 4  # times GAP: how far a straight arrow stopping short of every node is followed on
ALONG = 0.9  # |cos| of the angle under which two directions are one line's (26 degrees)


@dataclass
class PixNode:
    box: tuple[int, int, int, int]  # x, y, w, h of the enclosed region
    shape: str | None
    lines: list[TextLine] = field(default_factory=list)
    crossed: bool = False  # read as two regions a line runs between (`_crossed_nodes`): its arrows are not read

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


def _nodes(
    ink: np.ndarray, lines: list[TextLine], stroke: float
) -> tuple[list[PixNode], list[np.ndarray], int]:
    """The nodes, their outlines, and how many node-like regions hold ink but no text OCR read."""
    import cv2

    contours, hierarchy = cv2.findContours(ink, cv2.RETR_CCOMP, cv2.CHAIN_APPROX_NONE)
    if hierarchy is None:
        return [], [], 0
    blank: list[tuple[int, int, int, int]] = []
    parts: list[np.ndarray] = []  # enclosed regions too small or too hollow for a node alone
    min_area = MIN_NODE_AREA * ink.size
    found: list[tuple[PixNode, np.ndarray]] = []
    big: list[tuple[int, int, int, int]] = []  # every enclosed region a node could be
    for contour, (_, _, _, parent) in zip(contours, hierarchy[0]):
        if parent < 0:
            continue
        area = cv2.contourArea(contour)
        hull = cv2.contourArea(cv2.convexHull(contour))
        if area >= min_area:
            big.append(_rect(contour))
        if area < min_area or hull <= 0 or area / hull < MIN_SOLIDITY:
            if area >= min_area / 8:
                parts.append(contour)
            continue
        x, y, w, h = cv2.boundingRect(contour)
        inside = [t for t in lines if cv2.pointPolygonTest(contour, _centre(t), False) > 0]
        if not inside:
            if ink[y + 3 : y + h - 3, x + 3 : x + w - 3].any():
                blank.append((x, y, w, h))
            parts.append(contour)
            continue
        if not _centred(inside, (x, y, w, h)):
            parts.append(contour)
            continue  # text off the middle: a region closed by arrows around a free label
        found.append((PixNode((x, y, w, h), shape_of(contour), inside), contour))
    # a region holding another as big as a node is a group's frame (its nodes unread or not)
    found = [(n, c) for n, c in found if not any(b != n.box and _inside(b, n.box) for b in big)]
    taken = {id(t) for n, _ in found for t in n.lines}
    found = _crossed_nodes(ink.shape, found, [t for t in lines if id(t) not in taken], parts, stroke)
    keep = [(n, c) for n, c in found if not any(o is not n and _inside(o.box, n.box) for o, _ in found)]
    unread = sum(1 for b in blank if not any(_inside(n.box, b) or _inside(b, n.box) for n, _ in found))
    return [n for n, _ in keep], [c for _, c in keep], unread


def _rect(contour: np.ndarray) -> tuple[int, int, int, int]:
    import cv2

    x, y, w, h = cv2.boundingRect(contour)
    return int(x), int(y), int(w), int(h)


def _centred(inside: list[TextLine], box: tuple[int, int, int, int]) -> bool:
    x, y, w, h = box
    cx = sum(_centre(t)[0] for t in inside) / len(inside)
    cy = sum(_centre(t)[1] for t in inside) / len(inside)
    return abs(cx - (x + w / 2)) <= CENTRED * w and abs(cy - (y + h / 2)) <= CENTRED * h


def _crossed_nodes(
    shape: tuple[int, ...],
    found: list[tuple[PixNode, np.ndarray]],
    lines: list[TextLine],
    parts: list[np.ndarray],
    stroke: float,
) -> list[tuple[PixNode, np.ndarray]]:
    """`found` with the nodes a line runs through made whole (an arrow drawn across a node cuts
    its inside in two): a found node whose region, joined across a stroke-wide gap to an enclosed
    region beside it, makes one nearly convex region at least a fifth bigger; and a text line no
    node holds, over two or more enclosed regions that joined make one big, nearly convex region
    with the text in its middle. Such a node is `crossed`: which arrows end at it is not read."""
    import cv2

    reach = int(np.ceil(stroke)) + 2

    def filled(contour: np.ndarray) -> np.ndarray:
        region = np.zeros(shape[:2], np.uint8)
        cv2.drawContours(region, [contour], -1, 1, thickness=cv2.FILLED)
        return region

    def beside(box: tuple[int, int, int, int], contour: np.ndarray) -> bool:
        bx, by, bw, bh = cv2.boundingRect(contour)
        x0, y0, x1, y1 = box
        return not (bx > x1 + reach or by > y1 + reach or bx + bw < x0 - reach or by + bh < y0 - reach)

    out = []
    for node, contour in found:
        x, y, w, h = node.box
        near = [filled(c) for c in parts if beside((x, y, x + w, y + h), c)]
        joined = _joined([filled(contour), *near], stroke) if near else None
        if joined is not None and cv2.contourArea(joined) >= 1.2 * cv2.contourArea(contour):
            node, contour = PixNode(_rect(joined), shape_of(joined), node.lines, crossed=True), joined
        out.append((node, contour))
    for t in lines:
        if sum(ch.isalnum() for ch in t.text) < 2:
            continue
        x0, y0, x1, y1 = (int(round(v)) for v in t.box)
        over = [r for c in parts if beside((x0, y0, x1, y1), c) and (r := filled(c))[
            max(0, y0) : y1 + 1, max(0, x0) : x1 + 1].mean() >= 0.1]
        joined = _joined(over, stroke) if len(over) >= 2 else None
        if joined is None:
            continue
        box = _rect(joined)
        if cv2.contourArea(joined) >= MIN_NODE_AREA * shape[0] * shape[1] and _centred([t], box):
            out.append((PixNode(box, shape_of(joined), [t], crossed=True), joined))
    return out


def _joined(regions: list[np.ndarray], stroke: float) -> np.ndarray | None:
    """The outline of the regions joined across stroke-wide gaps, if that is one nearly convex region."""
    import cv2

    reach = int(np.ceil(stroke)) + 2
    kernel = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * reach + 1, 2 * reach + 1))
    union = cv2.morphologyEx(np.maximum.reduce(regions), cv2.MORPH_CLOSE, kernel)
    joined, _ = cv2.findContours(union, cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_NONE)
    if len(joined) != 1:
        return None
    hull = cv2.contourArea(cv2.convexHull(joined[0]))
    return joined[0] if hull > 0 and cv2.contourArea(joined[0]) / hull >= MIN_SOLIDITY else None


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
    nodes, contours, unread = _nodes(ink, lines, stroke)
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

    # pieces a free label cut apart, joined again: two pieces ending at the label from opposite
    # sides, each end lying on the other's line (`_in_line`); a piece merely passing by the label,
    # or another arrow's piece beside it (two arrows drawn close together), is left alone
    for x0, y0, x1, y1 in boxes:
        pad = reach + 1 + (y1 - y0) // 2  # a label's backdrop reaches past its letters
        ya, xa = max(0, y0 - pad), max(0, x0 - pad)
        window = labels[ya : y1 + pad, xa : x1 + pad]
        ends = {
            lab: end
            for lab in set(np.unique(window).tolist()) - {0}
            if (end := _cut_end(labels == lab, (x0, y0, x1, y1), 3 * pad + 4 * stroke)) is not None
        }
        for a in ends:
            for b in ends:
                if a < b and _in_line(ends[a], ends[b], stroke):
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
    meets: dict[int, list[int]] = {}  # piece -> the nodes it meets
    for piece in sorted(set(np.unique(pieces).tolist()) - {0}):
        mask = pieces == piece
        ys, xs = np.nonzero(mask)
        if max(xs.max() - xs.min(), ys.max() - ys.min()) < MIN_PIECE * side:
            continue
        to_node = [a[ys, xs] for a in away]  # distance from each pixel of the piece to each node
        met = meets[piece] = [i for i, r in enumerate(to_node) if r.min() <= gap]
        thick = dist[ys, xs]
        long = max(xs.max() - xs.min(), ys.max() - ys.min()) >= 2 * gap
        if len(met) < 2:
            followed = _short_ends(xs, ys, away, gap, stroke) if long else []
            if len({i for i, _ in followed}) == 2:
                met = meets[piece] = [i for i, _ in followed]
                heads = {i for i, end in followed if float(thick[end].max()) >= HEAD * stroke / 2 + 0.5}
            else:  # a long piece lost on the way: the nodes it comes near may have arrows unread
                if long:
                    loose.update(i for i, r in enumerate(to_node) if r.min() <= REACH * gap)
                continue
        elif any(nodes[i].crossed for i in met):
            tangled.update(met)  # a line through a node: where it ends is not read
            continue
        else:
            nearest = np.argmin(np.stack([to_node[i] for i in met]), axis=0)
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
    tangled |= _hidden(boxes, pieces, meets, away, gap)
    return PixelGraph(nodes, edges, tangled, loose, free, stroke, unread)


def _short_ends(
    xs: np.ndarray, ys: np.ndarray, away: list[np.ndarray], gap: float, stroke: float
) -> list[tuple[int, np.ndarray]]:
    """A straight piece stopping short of its nodes (a renderer leaves a margin; past a diamond's
    or an ellipse's side it is wide): followed on along its line from each end, up to REACH gaps,
    to the first node it runs into; for each end that does, the node and the piece's pixels
    within 8 strokes of that end (where its head would be)."""
    pts = np.stack([xs, ys], axis=1).astype(np.float64)
    mean = pts.mean(axis=0)
    _, spread, vt = np.linalg.svd(pts[:: max(1, len(pts) // 2000)] - mean, full_matrices=False)
    if spread[0] < 5 * max(spread[1], 1e-6):
        return []  # bent: where it would go on is not read
    along = (pts - mean) @ vt[0]
    h, w = away[0].shape if away else (0, 0)
    out = []
    for sign, t in ((-1.0, float(along.min())), (1.0, float(along.max()))):
        tip = mean + vt[0] * t
        for step in np.arange(0.0, REACH * gap, 1.0):
            x, y = (int(round(v)) for v in tip + sign * vt[0] * step)
            if not (0 <= x < w and 0 <= y < h):
                break
            hit = [i for i, a in enumerate(away) if a[y, x] <= 0]
            if hit:
                out.append((hit[0], np.abs(along - t) <= 8 * stroke))
                break
    return out


def _hidden(
    boxes: list[tuple[int, int, int, int]],
    pieces: np.ndarray,
    meets: dict[int, list[int]],
    away: list[np.ndarray],
    gap: float,
) -> set[int]:
    """Nodes an arrow may run between unseen, under a free label's box: a box within reach of two
    or more nodes, some of which no piece of ink at the box meets (a label OCR read as one tall
    box over two short arrows wipes both)."""
    hidden: set[int] = set()
    for x0, y0, x1, y1 in boxes:
        near = [i for i, a in enumerate(away) if float(a[y0:y1, x0:x1].min()) <= gap]
        if len(near) < 2:
            continue
        ring = pieces[max(0, y0 - 2) : y1 + 2, max(0, x0 - 2) : x1 + 2]
        seen = {i for p in set(np.unique(ring).tolist()) - {0} for i in meets.get(p, [])}
        if set(near) - seen:
            hidden.update(near)
    return hidden


@dataclass(frozen=True)
class CutEnd:
    """Where a piece of ink stops at a label's box: the middle of the piece's pixels nearest the
    box, the mean of its ink near there, that ink's main direction (unit) and how elongated it is
    (the ratio of its spreads along and across that direction)."""

    end: np.ndarray
    mean: np.ndarray
    axis: np.ndarray
    elongation: float


def _cut_end(mask: np.ndarray, box: tuple[int, int, int, int], radius: float) -> CutEnd | None:
    """The piece's end at the box, read from its ink within `radius` of the end; None when too
    few pixels lie there to say."""
    ys, xs = np.nonzero(mask)
    pts = np.stack([xs, ys], axis=1).astype(np.float64)
    x0, y0, x1, y1 = box
    off = np.hypot(
        np.maximum(np.maximum(x0 - pts[:, 0], pts[:, 0] - x1), 0),
        np.maximum(np.maximum(y0 - pts[:, 1], pts[:, 1] - y1), 0),
    )
    end = pts[off <= off.min() + 1.5].mean(axis=0)
    near = pts[np.hypot(*(pts - end).T) <= radius]
    if len(near) < 4:
        return None
    mean = near.mean(axis=0)
    _, spread, vt = np.linalg.svd(near - mean, full_matrices=False)
    return CutEnd(end, mean, vt[0], float(spread[0] / max(spread[1], 1e-6)))


def _in_line(a: CutEnd, b: CutEnd, stroke: float) -> bool:
    """Two cut ends are one line's: neither piece's ink runs on towards the other, and one of them
    is a line (elongated; an arrowhead cut short is not) pointing across the gap, with the other's
    end and ink on it within two strokes and a tenth of the gap (a curve bends a little under its
    label). Two arrows drawn side by side, or a line passing by the label, fail it."""
    gap = b.end - a.end
    span = float(np.hypot(*gap))
    if span < 1:
        return True  # touching: one piece in all but name
    u = gap / span
    if float((a.mean - a.end) @ u) > stroke / 2 or float((b.mean - b.end) @ u) < -stroke / 2:
        return False  # a piece's ink runs on past its end towards the other: not cut here
    tol = 2 * stroke + 0.1 * span

    def follows(line: CutEnd, other: CutEnd) -> bool:  # other's end and ink lie on line's line
        if line.elongation < 2 or (span >= 2 * stroke and abs(float(u @ line.axis)) < ALONG):
            return False
        return all(
            abs(float((p - line.mean)[0] * line.axis[1] - (p - line.mean)[1] * line.axis[0])) <= tol
            for p in (other.end, other.mean)
        )

    return follows(a, b) or follows(b, a)
