"""A geometry figure read back from pixels: the segments, circles and dots drawn, and the OCR'd
letters and labels, as a `scene.Scene` -- so the structural verifier's own geometry checks
(`check_geometry`: labels bound to drawn vertices as one assignment, then segments, circles and
relations up to similarity) run on it unchanged.

What is read (sizes relative to the picture, so a render at another scale reads the same):
- ink: `image_graph.ink_mask` (ink against the page's colour: coloured ink and a dark page read
  like black on white) and the stroke width;
- circles: the Hough gradient transform on the ink, each kept only if ink lies along at least
  `CIRCLE_INK` of its circumference (a Hough circle through a few segments is not drawn);
- dots: blobs of ink thicker than `DOT` times the stroke (a point's dot), outside text;
- segments: probabilistic Hough lines on the ink with the circles and the text (pieces of ink
  wholly inside an OCR box) taken out, merged per line (same direction, one stroke apart),
  followed along the ink past the Hough pieces, and split where that ink breaks;
- vertices: segment ends within `SNAP` of a dot or of each other are one point (a dot's centre
  wins), so a letter binds to one vertex, not to the several ends that meet there;
- texts: each OCR word at its place in the line (a box taller than `TEXT_HEIGHT` is the drawing
  read as a character, and dropped); a lone capital (after `image_verify`'s letter
  folds: a point's dot dropped, 0 -> O) is a point letter.
The scene is drawn in pixels with `px` = the longer side / 400: the verifier's pixel floors (how
far a vertex may be from its letter, a dot's size) mean what they mean on a 400-px render.
A letter read over a point's dot (two segments meeting read as "A") or read at two places binds
to nothing, so its points are undecided.

Checks from pixels (`CHECKS_FROM_PIXELS`) are the structural ones with a margin for reading:
a letter not bound leaves its points undecided; a relation fails only when off by more than
`MARGIN` times its tolerance; a segment fails only when less than `GONE` of it is read, a
forbidden one only when `THERE` of it is; a circle about a centre that Hough did not read is
undecided, never absent. Check types: `cv_segment`, `cv_no_segment`, `cv_circle`,
`cv_length_label` (the label read beside its segment) and `cv_relation` (every metric relation:
midpoint, perpendicular, parallel, on_circle, angle, equal_angle, equal_length, collinear,
on_segment; one type because they share one way of failing, the bound points' positions, and a
type per relation would see too few known failures to be judged).

Enabling rule, written before the first held-out run (issue 39 item 5, 2026-12-07): rules tuned on
even-index geometry tasks only; then two held-out runs of `harness prograf calibrate-image --tasks
odd --categories geometry --foreign --limit 14` on the same 14 odd-index tasks, one clean and one
varied (`--augment 42`). A geometry type (the five above, and the older `ocr_point_letter`,
`ocr_letter_count`, `cv_circle_count` judged again on the same runs) is enabled only if precision
>= 0.9, pass precision >= 0.9 and >= 5 known failures hold on both runs; otherwise it is disabled
(`cv_circle_count`, enabled by the 2026-12-03 clean-render calibration, included).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from environments.prograf.check.findings import Finding, fail, ok
from environments.prograf.check.geometry import CHECKS, GeometryView, g_segment, line_distance, segment_cover
from environments.prograf.image.graph import ink_mask, stroke_width
from environments.prograf.image.ocr import DOTS, TextLine, label_matches, occurrences
from environments.prograf.parse.scene import Circle, Scene, Segment, Text
from environments.prograf.task import GEOMETRY_RELATIONS, GeometrySpec, VerificationPoint

CIRCLE_INK = 0.8  # share of a circle's circumference that must be ink
DOT_SIZE = 0.0045  # of the longer side: a dot's radius is at least this (a thin figure's letters are thicker)
DOT = 2.2  # a blob this many times thicker than the stroke is a point's dot
MIN_SEGMENT = 0.035  # of the longer side: shorter straight pieces are letters, ticks or noise
ANGLE_TOL = math.radians(6.0)  # Hough pieces this close in direction (and near the line) may be one line
TRIM = 0.06  # of the longer side: how far past its last dot a segment's end may be carried (then cut back)
SNAP = 0.012  # of the longer side: segment ends this close to a dot (or each other) are one vertex
TEXT_HEIGHT = 0.1  # of the longer side: a taller OCR box is the drawing read as a character, not text
LETTER = re.compile(r"^[A-Z][′'’]?$")


def _as_letter(word: str) -> str:
    word = word.strip(DOTS)
    return "O" + word[1:] if word[:1] in ("0", "o") else word


def words(lines: list[TextLine]) -> list[Text]:
    """Each OCR word as a Text at its share of its line's box (words read as one line apart)."""
    out = []
    for line in lines:
        text = line.text
        x0, y0, x1, y1 = line.box
        step = (x1 - x0) / max(len(text), 1)
        for m in re.finditer(r"\S+", text):
            word = _as_letter(m.group()) if LETTER.match(_as_letter(m.group())) else m.group()
            cx = x0 + step * (m.start() + m.end()) / 2
            out.append(Text(text=word, x=cx, y=(y0 + y1) / 2, size=y1 - y0))
    return out


def _in_text(x: float, y: float, boxes: list[tuple[float, float, float, float]], pad: float) -> bool:
    return any(b[0] - pad <= x <= b[2] + pad and b[1] - pad <= y <= b[3] + pad for b in boxes)


def circles(ink: np.ndarray, stroke: float) -> list[tuple[float, float, float]]:
    """(cx, cy, r) of each circle drawn (ink along CIRCLE_INK of it), dots excluded."""
    import cv2

    h, w = ink.shape
    side = min(h, w)
    g = cv2.GaussianBlur(((1 - ink) * 255).astype(np.uint8), (5, 5), 1.2)
    found = cv2.HoughCircles(
        g,
        cv2.HOUGH_GRADIENT_ALT,
        dp=1.5,
        minDist=2,  # concentric circles are distinct circles; one circle found twice is merged below
        param1=300,
        param2=0.8,
        minRadius=max(4, int(side * 0.04)),
        maxRadius=int(side * 0.6),
    )
    if found is None:
        return []
    near = cv2.dilate(ink, np.ones((3, 3), np.uint8), iterations=max(1, round(stroke / 2)))
    kept: list[tuple[float, float, float]] = []
    ys_ink, xs_ink = np.nonzero(ink)
    for x, y, r in (_refined(c, xs_ink, ys_ink, stroke) for c in found.reshape(-1, 3)):
        t = np.linspace(0, 2 * np.pi, 360, endpoint=False)
        xs, ys = np.round(x + r * np.cos(t)).astype(int), np.round(y + r * np.sin(t)).astype(int)
        inside = (xs >= 0) & (xs < w) & (ys >= 0) & (ys < h)
        if inside.mean() < CIRCLE_INK or near[ys[inside], xs[inside]].sum() < CIRCLE_INK * len(t):
            continue
        same = max(3.0, 2 * stroke)
        if not any(math.dist((x, y), k[:2]) <= same and abs(r - k[2]) <= same for k in kept):
            kept.append((float(x), float(y), float(r)))
    return kept


def _refined(c: np.ndarray, xs: np.ndarray, ys: np.ndarray, stroke: float) -> tuple[float, float, float]:
    """The circle fitted (least squares, Kasa's algebraic fit) to the ink in a band around the Hough
    candidate c = (x, y, r): Hough's centre is a few pixels off on a big circle."""
    x, y, r = (float(v) for v in c)
    for _ in range(2):
        d = np.hypot(xs - x, ys - y)
        band = np.abs(d - r) <= max(3 * stroke, 0.03 * r)
        if band.sum() < 20:
            break
        bx, by = xs[band].astype(np.float64), ys[band].astype(np.float64)
        a = np.column_stack([bx, by, np.ones_like(bx)])
        sol, *_ = np.linalg.lstsq(a, bx**2 + by**2, rcond=None)
        x, y = sol[0] / 2, sol[1] / 2
        r = float(np.sqrt(max(sol[2] + x * x + y * y, 0.0)))
    return float(x), float(y), r


def dots(
    ink: np.ndarray, stroke: float, boxes: list[tuple[float, float, float, float]]
) -> list[tuple[float, float, float]]:
    """(cx, cy, r) of each filled dot: ink thicker than DOT strokes, in a small blob, not in text."""
    import cv2

    dist = cv2.distanceTransform(ink, cv2.DIST_L2, 3)
    side = max(ink.shape)
    core = (dist >= max(DOT * stroke / 2, DOT_SIZE * side)).astype(np.uint8)
    n, _, stats, centres = cv2.connectedComponentsWithStats(core)
    out = []
    for k in range(1, n):
        x, y, w, h, _ = stats[k]
        if max(w, h) > 0.03 * side or max(w, h) > 2.5 * min(w, h) + 2:
            continue  # a filled region, or where two lines cross at a narrow angle: not a dot
        cx, cy = centres[k]
        if _in_text(cx, cy, boxes, 0.0):
            continue
        out.append((float(cx), float(cy), float(dist[int(round(cy)), int(round(cx))])))
    return out


def segments(
    ink: np.ndarray,
    stroke: float,
    rings: list[tuple[float, float, float]],
    boxes: list[tuple[float, float, float, float]],
) -> list[tuple[float, float, float, float]]:
    """(x1, y1, x2, y2) of each straight segment drawn, merged from Hough pieces; text's ink (the
    pieces of ink wholly inside an OCR box) is no segment and does not lengthen one."""
    import cv2

    side = max(ink.shape)
    followed = without_text(ink, boxes)
    lines_only = followed.copy()
    for x, y, r in rings:
        cv2.circle(lines_only, (round(x), round(y)), round(r), 0, thickness=max(3, round(2.5 * stroke)))
    min_len = max(12, round(MIN_SEGMENT * side / 2))  # pieces: a segment's end beyond a circle is short
    found = cv2.HoughLinesP(
        lines_only,
        1,
        math.pi / 720,
        threshold=max(8, int(min_len * 0.7)),
        minLineLength=min_len,
        maxLineGap=max(3, round(2 * stroke)),
    )
    if found is None:
        return []
    pieces = [tuple(float(v) for v in p) for p in found.reshape(-1, 4)]
    return _merged(pieces, followed, stroke)


def without_text(ink: np.ndarray, boxes: list[tuple[float, float, float, float]]) -> np.ndarray:
    """The ink less every connected piece of it that lies wholly inside a text box (a letter);
    a line passing under a box is one piece with the rest of the figure, so it stays."""
    import cv2

    n, labels, stats, _ = cv2.connectedComponentsWithStats(ink, connectivity=8)
    text = np.zeros(n, bool)
    for k in range(1, n):
        x, y, w, h, _ = stats[k]
        text[k] = any(b[0] - 2 <= x and b[1] - 2 <= y and x + w <= b[2] + 2 and y + h <= b[3] + 2 for b in boxes)
    return np.where(text[labels], 0, ink).astype(np.uint8)


def _merged(pieces: list[tuple[float, ...]], ink: np.ndarray, stroke: float) -> list[tuple[float, float, float, float]]:
    """Pieces on one line (direction within ANGLE_TOL, a stroke or two apart) joined, then split
    where the ink along the joined line breaks for more than a few strokes (all the ink: a circle
    crossing the line does not cut it; an end carried on along a circle it touches is trimmed back
    to its dot, `_trimmed`)."""
    import cv2

    pieces = sorted(pieces, key=lambda p: -math.dist(p[:2], p[2:]))
    groups: list[list[tuple[float, ...]]] = []
    for p in pieces:
        for g in groups:
            a = g[0]
            if _same_line(a, p, stroke):
                g.append(p)
                break
        else:
            groups.append([p])
    out: list[tuple[float, float, float, float]] = []
    h, w = ink.shape
    near = _near_ink(ink)
    for g in groups:
        # the line fitted to points along every piece (one piece's direction is a degree or two
        # off on a thick stroke, and its end would be followed off the ink)
        pts = np.concatenate([np.linspace(p[:2], p[2:], max(2, int(math.dist(p[:2], p[2:]) / 4))) for p in g])
        ux, uy, ox, oy = (float(v) for v in cv2.fitLine(pts.astype(np.float32), cv2.DIST_L2, 0, 0.01, 0.01).ravel())
        ts = (pts[:, 0] - ox) * ux + (pts[:, 1] - oy) * uy
        lo, hi = float(ts.min()), float(ts.max())
        reach = 0.1 * max(h, w)  # a line's ends are followed on the ink past its Hough pieces
        for t0, t1 in _ink_runs(near, (ox, oy), (ux, uy), (lo - reach, hi + reach), max(4.0, 2 * stroke)):
            if t1 < lo or t0 > hi:
                continue
            out.append((ox + ux * t0, oy + uy * t0, ox + ux * t1, oy + uy * t1))
    min_len = max(20.0, MIN_SEGMENT * max(h, w))
    out = sorted((s for s in out if math.dist(s[:2], s[2:]) >= min_len), key=lambda s: -math.dist(s[:2], s[2:]))
    kept: list[tuple[float, float, float, float]] = []
    for s in out:  # a piece lying along a longer one kept already is that one drawn again
        if not any(_covers(k, s, stroke) for k in kept):
            kept.append(s)
    return kept


def _covers(a: tuple[float, ...], b: tuple[float, ...], stroke: float) -> bool:
    """Whether both ends of b lie on segment a (within a stroke and a half)."""
    n2 = (a[2] - a[0]) ** 2 + (a[3] - a[1]) ** 2
    for x, y in (b[:2], b[2:]):
        t = ((x - a[0]) * (a[2] - a[0]) + (y - a[1]) * (a[3] - a[1])) / n2
        px, py = a[0] + t * (a[2] - a[0]), a[1] + t * (a[3] - a[1])
        if not (-0.02 <= t <= 1.02 and math.dist((px, py), (x, y)) <= max(2.0, 1.5 * stroke)):
            return False
    return True


def _ink_runs(
    near: np.ndarray, origin: tuple[float, float], u: tuple[float, float], span: tuple[float, float], max_gap: float
) -> list[tuple[float, float]]:
    """The stretches [t0, t1] of the line origin + t * u, t in span, that run on ink with no break
    longer than max_gap pixels."""
    h, w = near.shape
    runs: list[tuple[float, float]] = []
    start = last = None
    for t in np.arange(span[0], span[1] + 1, 1.0):
        x, y = round(origin[0] + u[0] * t), round(origin[1] + u[1] * t)
        if not (0 <= x < w and 0 <= y < h and near[y, x]):
            continue
        if start is None or last is None or t - last > max_gap:
            if start is not None and last is not None:
                runs.append((start, last))
            start = float(t)
        last = float(t)
    if start is not None and last is not None:
        runs.append((start, last))
    return runs


def _near_ink(ink: np.ndarray) -> np.ndarray:
    """Ink grown by one pixel: a fitted line a pixel off a thin stroke's middle still runs on it."""
    import cv2

    return np.asarray(cv2.dilate(ink, np.ones((3, 3), np.uint8)))


def _same_line(a: tuple[float, ...], p: tuple[float, ...], stroke: float) -> bool:
    da = math.atan2(a[3] - a[1], a[2] - a[0])
    dp = math.atan2(p[3] - p[1], p[2] - p[0])
    diff = abs(da - dp) % math.pi
    if min(diff, math.pi - diff) > ANGLE_TOL:
        return False
    n = math.dist(a[:2], a[2:])
    ux, uy = (a[2] - a[0]) / n, (a[3] - a[1]) / n
    return all(abs(-(x - a[0]) * uy + (y - a[1]) * ux) <= max(2.0, 1.5 * stroke) for x, y in (p[:2], p[2:]))


def _trimmed(
    segs: list[tuple[float, float, float, float]], spots: list[tuple[float, float, float]], reach: float, stroke: float
) -> list[tuple[float, float, float, float]]:
    """Each end cut back to the last dot on the segment within reach of it: followed ink runs on
    a little past a vertex where a circle or another line leaves it in nearly the same direction."""
    out = []
    for s in segs:
        a, b = (s[0], s[1]), (s[2], s[3])
        length = math.dist(a, b)
        ux, uy = (b[0] - a[0]) / length, (b[1] - a[1]) / length
        on = []
        for x, y, _ in spots:
            t = (x - a[0]) * ux + (y - a[1]) * uy
            if 0 <= t <= length and abs(-(x - a[0]) * uy + (y - a[1]) * ux) <= max(2.0, stroke):
                on.append(t)
        t0 = min((t for t in on if t <= reach), default=0.0)
        t1 = max((t for t in on if t >= length - reach), default=length)
        if t1 - t0 > reach:
            out.append((a[0] + ux * t0, a[1] + uy * t0, a[0] + ux * t1, a[1] + uy * t1))
    return out


def _snapped(
    segs: list[tuple[float, float, float, float]], spots: list[tuple[float, float, float]], reach: float
) -> list[tuple[float, float, float, float]]:
    """Segment ends moved onto the dot within reach, else onto the mean of the ends near them."""
    ends = [(s[0], s[1]) for s in segs] + [(s[2], s[3]) for s in segs]
    moved = []
    for x, y in ends:
        dot = min(spots, key=lambda d: math.dist(d[:2], (x, y)), default=None)
        if dot is not None and math.dist(dot[:2], (x, y)) <= reach + dot[2]:
            moved.append((dot[0], dot[1]))
            continue
        near = [e for e in ends if math.dist(e, (x, y)) <= reach]
        moved.append((sum(e[0] for e in near) / len(near), sum(e[1] for e in near) / len(near)))
    k = len(segs)
    return [(moved[i][0], moved[i][1], moved[k + i][0], moved[k + i][1]) for i in range(k)]


def read_scene(img: np.ndarray, lines: list[TextLine]) -> Scene:
    """The figure in `img` (RGB) as a scene of segments, circles (dots as small circles) and texts."""
    ink = ink_mask(img)
    h, w = ink.shape
    side = max(h, w)
    stroke = stroke_width(ink)
    lines = [line for line in lines if line.height <= TEXT_HEIGHT * side]
    short = [line for line in lines if len(line.text.strip(DOTS + " ")) <= 2]
    spots = dots(ink, stroke, [line.box for line in lines if line not in short])
    # a "letter" read over a point's dot is the drawing itself (two segments meeting read as A, V)
    lines = [
        line
        for line in lines
        if line not in short
        or line.text.strip() != line.text.strip(DOTS)
        or not any(_in_text(x, y, [_shrunk(line.box, 0.2)], 0.0) for x, y, _ in spots)
    ]
    rings = circles(ink, stroke)
    segs = segments(ink, stroke, rings, [line.box for line in lines])
    segs = _snapped(_trimmed(segs, spots, TRIM * side, stroke), spots, SNAP * side)
    scene = Scene(format="png", canvas=(0.0, 0.0, float(w), float(h)), px=side / 400.0)
    scene.segments = [Segment(*s, element=k) for k, s in enumerate(segs)]
    n = len(segs)
    scene.circles = [Circle(x, y, r, element=n + k) for k, (x, y, r) in enumerate(rings)]
    scene.circles += [Circle(x, y, r, element=n + len(rings) + k) for k, (x, y, r) in enumerate(spots)]
    texts = words(lines)
    seen = [t.text for t in texts]
    # a letter read at two places: which one labels the point is not read, so neither does
    scene.texts = [t for t in texts if not (LETTER.match(t.text) and seen.count(t.text) > 1)]
    return scene


def _shrunk(box: tuple[float, float, float, float], share: float) -> tuple[float, float, float, float]:
    dx, dy = (box[2] - box[0]) * share, (box[3] - box[1]) * share
    return (box[0] + dx, box[1] + dy, box[2] - dx, box[3] - dy)


# ---------------------------------------------------------------------- checks from pixels
class Undecidable(Exception):
    """Raised by an image check whose point these pixels cannot decide; the message says why."""


MARGIN = 2.0  # a relation is failed from pixels only when off by more than MARGIN times its tolerance
GONE = 0.5  # a segment is failed from pixels only when less than this share of it is read as drawn
THERE = 0.9  # ... and a forbidden one only when at least this share is


# the structural checks' own defaults (`check_geometry`), for a point that names no tolerance
DEFAULT_TOLERANCE = {
    "perpendicular": 3.0,
    "parallel": 3.0,
    "angle": 3.0,
    "equal_angle": 3.0,
    "midpoint": 0.03,
    "on_circle": 0.04,
    "equal_length": 0.04,
    "collinear": 0.03,
    "on_segment": 0.03,
}


@dataclass
class Figure:
    """A figure read off pixels, with the task's letters bound to its drawn points
    (`check_geometry.GeometryView`: one assignment)."""

    view: GeometryView
    lines: list[TextLine]
    vocabulary: frozenset[str]


def _need(fig: Figure, names: list[str]) -> list[tuple[float, float]]:
    lost = [n for n in names if n not in fig.view.points]
    if lost:
        raise Undecidable(f"letter(s) {', '.join(lost)} not read beside a drawn point")
    return [fig.view.points[n] for n in names]


def c_segment(fig: Figure, vp: VerificationPoint, spec: GeometrySpec) -> Finding:
    _need(fig, vp.args)
    found = g_segment(fig.view, vp, spec)
    if not found.passed and float(found.measured or 0.0) >= GONE:
        raise Undecidable(f"{found.reason}: part of it is read, a gap may be a misreading")
    return found


def c_no_segment(fig: Figure, vp: VerificationPoint, spec: GeometrySpec) -> Finding:
    a, b = _need(fig, vp.args)
    cover = segment_cover(fig.view, a, b, 0.06)
    name = "".join(vp.args)
    if cover >= THERE:
        return fail("extra_element", round(cover, 3), f"segment {name} is drawn, though it must not be")
    if cover > 1 - THERE:
        raise Undecidable(f"{cover:.0%} of {name} is read as drawn")
    return ok(round(cover, 3), f"no segment {name}")


def _about(fig: Figure, centre: tuple[float, float], tol: float) -> list[Circle]:
    return [c for c in fig.view.big_circles if math.dist((c.cx, c.cy), centre) <= tol * c.r + fig.view.slack(2)]


def _on_a_circle(fig: Figure, vp: VerificationPoint, tol: float, what: str) -> Finding:
    """The second point lies on some drawn circle about the first: any circle about the centre
    will do (Hough reads concentric circles too); none read about it is undecided (a circle
    Hough misses is not read as absent)."""
    centre, through = _need(fig, vp.args[::-1] if vp.check == "on_circle" else vp.args)
    about = _about(fig, centre, 0.06)
    if not about:
        raise Undecidable(f"no circle read about {vp.args[1] if vp.check == 'on_circle' else vp.args[0]}")
    err = min(abs(math.dist(centre, through) - c.r) / c.r for c in about)
    if err <= tol:
        return ok(round(err, 3), f"{what} (off by {err:.3g})")
    if err <= MARGIN * tol:
        raise Undecidable(f"not {what}: off by {err:.0%} of the radius, within the margin of reading from pixels")
    return fail(
        "wrong_relation", round(err, 3), f"not {what}: every circle read about the centre misses by >= {err:.0%}"
    )


def c_circle(fig: Figure, vp: VerificationPoint, spec: GeometrySpec) -> Finding:
    return _on_a_circle(fig, vp, vp.tolerance or 0.06, f"a circle centred at {vp.args[0]} through {vp.args[1]}")


def c_on_circle(fig: Figure, vp: VerificationPoint, spec: GeometrySpec) -> Finding:
    return _on_a_circle(fig, vp, vp.tolerance or 0.04, f"{vp.args[0]} lies on the circle centred at {vp.args[1]}")


def c_relation(fig: Figure, vp: VerificationPoint, spec: GeometrySpec) -> Finding:
    _need(fig, vp.args)
    found = CHECKS[vp.check](fig.view, vp, spec)
    if found.passed:
        return found
    if found.measured is None:
        raise Undecidable(f"{found.reason} read")
    tol = vp.tolerance or DEFAULT_TOLERANCE[vp.check]
    off = abs(float(found.measured) - vp.number()) if vp.check == "angle" else float(found.measured)
    if off <= MARGIN * tol:
        raise Undecidable(f"{found.reason}, within {MARGIN:g} times the tolerance read from pixels")
    return found


def c_length_label(fig: Figure, vp: VerificationPoint, spec: GeometrySpec) -> Finding:
    """The label must be read beside its segment (between its bound ends, within reach of it)."""
    a, b = _need(fig, vp.args)
    want, name = str(vp.value), "".join(vp.args)
    reach = max(fig.view.slack(30), 0.3 * math.dist(a, b))
    beside = []
    for line in fig.lines:
        d, u = line_distance(((line.box[0] + line.box[2]) / 2, (line.box[1] + line.box[3]) / 2), a, b)
        if d <= reach and -0.1 <= u <= 1.1:
            beside.append(line)
    hits = [line.text for line in beside if label_matches(want, line.text, fig.vocabulary)]
    if hits:
        return ok(hits[0], f"{name} is labelled {want} (OCR read {hits[0]!r})")
    if occurrences(want, fig.lines, fig.vocabulary):
        raise Undecidable(f"{want!r} is read, but not beside {name}")
    return fail("wrong_label", [line.text for line in beside] or None, f"no text {want!r} read beside {name}")


CHECKS_FROM_PIXELS: dict[str, Callable[[Figure, VerificationPoint, GeometrySpec], Finding]] = (
    {
        "segment": c_segment,
        "no_segment": c_no_segment,
        "circle": c_circle,
        "length_label": c_length_label,
        **{check: c_relation for check in GEOMETRY_RELATIONS if check != "on_circle"},
        "on_circle": c_on_circle,
    }
)


def figure(scene: Scene, spec: GeometrySpec, lines: list[TextLine], vocabulary: frozenset[str]) -> Figure:
    return Figure(GeometryView(scene, list(spec.points)), lines, vocabulary)
