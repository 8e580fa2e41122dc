"""The geometry figure read from pixels (`image_geometry`) and its checks, on small drawn pictures
whose segments, circle and dots are known; text given, so no OCR runs."""

from __future__ import annotations

import math

import numpy as np
import pytest

from environments.prograf.image.geometry import Undecidable, read_scene
from environments.prograf.image.ocr import TextLine
from environments.prograf.image.verify import ENABLED, Pixels, decide
from environments.prograf.task import GeometrySpec, Task, VerificationPoint

cv2 = pytest.importorskip("cv2")

A, B, C = (120, 400), (480, 400), (300, 120)
M = (300, 400)  # AB's midpoint


def _letter(text: str, at: tuple[int, int]) -> TextLine:
    x, y = at
    return TextLine(text, (x - 9, y - 12, x + 9, y + 12), 0.9)


def _figure(draw_bc: bool = True, m_at: tuple[int, int] = M) -> tuple[np.ndarray, list[TextLine]]:
    """Triangle ABC (BC optional), a dot M on AB, a circle about C through nothing; each point's
    dot, and its letter set off beside it (as the OCR would report it)."""
    img = np.full((520, 600, 3), 255, np.uint8)
    ink = (0, 0, 0)
    cv2.line(img, A, B, ink, 3, cv2.LINE_AA)
    cv2.line(img, A, C, ink, 3, cv2.LINE_AA)
    if draw_bc:
        cv2.line(img, B, C, ink, 3, cv2.LINE_AA)
    cv2.circle(img, C, 80, ink, 3, cv2.LINE_AA)
    for p in (A, B, C, m_at):
        cv2.circle(img, p, 7, ink, -1, cv2.LINE_AA)
    lines = [
        _letter("A", (A[0] - 24, A[1] + 20)),
        _letter("B", (B[0] + 24, B[1] + 20)),
        _letter("C", (C[0] + 26, C[1] - 26)),
        _letter("M", (m_at[0], m_at[1] + 28)),
    ]
    for t in lines:  # the letters' ink, so they are there to be mistaken for strokes
        cv2.putText(img, t.text, (int(t.box[0]), int(t.box[3])), cv2.FONT_HERSHEY_SIMPLEX, 0.8, ink, 2)
    return img, lines


def _close(p: tuple[float, float], q: tuple[float, float], px: float = 3.0) -> bool:
    return math.dist(p, q) <= px


def test_segments_circle_and_dots_are_read_back():
    scene = read_scene(*_figure())
    segs = [((s.x1, s.y1), (s.x2, s.y2)) for s in scene.segments]
    # AB (through M, one straight line), AC and BC, and nothing else: no letter stroke is a segment
    assert len(segs) == 3
    for a, b in ((A, B), (A, C), (B, C)):
        assert any((_close(p, a) and _close(q, b)) or (_close(p, b) and _close(q, a)) for p, q in segs), (a, b, segs)
    big = [c for c in scene.circles if c.r > 20]
    assert len(big) == 1 and _close((big[0].cx, big[0].cy), C, 1.5) and abs(big[0].r - 80) <= 1.5
    dots = sorted((round(c.cx), round(c.cy)) for c in scene.circles if c.r <= 20)
    assert len(dots) == 4 and all(any(_close(d, p) for d in dots) for p in (A, B, C, M))


def _task(points: list[VerificationPoint]) -> Task:
    spec = GeometrySpec(
        points={"A": (0, 0), "B": (4, 0), "C": (2, 3), "M": (2, 0)}, segments=[("A", "B"), ("A", "C"), ("B", "C")]
    )
    return Task.model_construct(id="geometry-test", category="geometry", spec=spec, points=points)


def _vp(vid: str, check: str, args: list[str], kind: str, **kw: object) -> VerificationPoint:
    return VerificationPoint(id=vid, kind=kind, check=check, component="x", args=args, text="t", **kw)


def _px(img: np.ndarray, lines: list[TextLine]) -> Pixels:
    px = Pixels(img)
    px.__dict__["lines"] = lines  # the OCR's reading, given
    return px


ALL_GEOMETRY = frozenset({"cv_segment", "cv_no_segment", "cv_circle", "cv_relation", "cv_length_label"})


def test_each_letter_binds_to_the_point_it_is_written_beside():
    px = _px(*_figure())
    task = _task([])
    fig = px.figure(task.spec)
    for name, at in (("A", A), ("B", B), ("C", C), ("M", M)):
        assert _close(fig.view.points[name], at), (name, fig.view.points)


def test_geometry_checks_pass_fail_and_stay_undecided_as_drawn():
    seg_bc = _vp("s", "segment", ["B", "C"], "exists")
    mid = _vp("m", "midpoint", ["M", "A", "B"], "relation")
    no_mc = _vp("n", "no_segment", ["M", "C"], "absent")
    task = _task([seg_bc, mid, no_mc])
    whole = _px(*_figure())
    assert [decide(whole, task, vp, ALL_GEOMETRY).status for vp in task.points] == ["pass", "pass", "pass"]
    # BC left out: failed; M drawn far off the middle: failed; a little off: within the margin, undecided
    broken = _px(*_figure(draw_bc=False, m_at=(220, 400)))
    assert decide(broken, task, seg_bc, ALL_GEOMETRY).status == "fail"
    assert decide(broken, task, mid, ALL_GEOMETRY).status == "fail"
    nudged = _px(*_figure(m_at=(318, 400)))  # 18 px of 360: 0.05 off, under twice the 0.03 tolerance
    got = decide(nudged, task, mid, ALL_GEOMETRY)
    assert got.status == "undecided" and "within" in got.reason


def test_a_letter_not_read_leaves_its_points_undecided():
    img, lines = _figure()
    px = _px(img, [t for t in lines if t.text != "C"])
    vp = _vp("s", "segment", ["B", "C"], "exists")
    got = decide(px, _task([vp]), vp, ALL_GEOMETRY)
    assert got.status == "undecided" and "C" in got.reason
    with pytest.raises(Undecidable):
        from environments.prograf.image.geometry import CHECKS_FROM_PIXELS

        CHECKS_FROM_PIXELS["segment"](px.figure(_task([]).spec), vp, _task([]).spec)


def test_a_check_type_not_enabled_is_refused():
    vp = _vp("s", "segment", ["B", "C"], "exists")
    got = decide(_px(*_figure(draw_bc=False)), _task([vp]), vp, ALL_GEOMETRY - {"cv_segment"})
    assert got.status == "undecided" and got.check_type == "cv_segment" and "disabled by calibration" in got.reason
    # the default set: a type calibration did not enable is refused there too
    one_each = {
        "cv_segment": _vp("s", "segment", ["B", "C"], "exists"),
        "cv_no_segment": _vp("n", "no_segment", ["M", "C"], "absent"),
        "cv_circle": _vp("c", "circle", ["C", "M"], "exists"),
        "cv_relation": _vp("m", "midpoint", ["M", "A", "B"], "relation"),
        "cv_length_label": _vp("l", "length_label", ["A", "B"], "label", value="4 cm"),
    }
    px = _px(*_figure())
    for check_type, vp in one_each.items():
        got = decide(px, _task([vp]), vp, ENABLED)
        assert got.check_type == check_type
        assert (got.status == "undecided" and "disabled" in got.reason) == (check_type not in ENABLED)


def test_a_letter_read_over_a_dot_is_the_drawing_not_a_label():
    img, lines = _figure()
    over_b = TextLine("A", (B[0] - 9, B[1] - 14, B[0] + 9, B[1] + 10), 0.6)  # the corner at B read as "A"
    fig = _px(img, [*lines, over_b]).figure(_task([]).spec)
    assert _close(fig.view.points["A"], A) and _close(fig.view.points["B"], B)
    # a letter read at two places (neither over a dot) binds to neither
    twice = TextLine("A", (C[0] - 60, C[1] + 40, C[0] - 42, C[1] + 64), 0.9)
    fig = _px(img, [*lines, twice]).figure(_task([]).spec)
    assert "A" not in fig.view.points and _close(fig.view.points["C"], C)
