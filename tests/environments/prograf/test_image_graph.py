"""The structured-image reader (`image_graph`) and its checks on small drawn images: nodes and their
shapes, arrows and their heads, which node an arrow meets; text given, so no OCR runs."""

from __future__ import annotations

import numpy as np
import pytest

from environments.prograf.image.augment import draw, vary_pixels, vary_svg
from environments.prograf.image.graph import PixEdge, PixelGraph, PixNode, read_graph, shape_of
from environments.prograf.image.ocr import TextLine
from environments.prograf.image.verify import Pixels, Undecidable, i_edge, i_no_edge, i_shape
from environments.prograf.task import GraphEdge, GraphNode, GraphSpec, VerificationPoint

cv2 = pytest.importorskip("cv2")


def _outline(points: list[tuple[int, int]]) -> np.ndarray:
    return np.array(points, np.int32).reshape(-1, 1, 2)


@pytest.mark.parametrize(
    ("points", "shape"),
    [
        ([(10, 10), (110, 10), (110, 60), (10, 60)], "box"),
        ([(60, 10), (110, 35), (60, 60), (10, 35)], "diamond"),
        ([(30, 10), (110, 10), (90, 60), (10, 60)], "parallelogram"),
    ],
)
def test_outlines_are_read_as_their_shapes(points, shape):
    assert shape_of(_outline(points)) == shape


def test_an_ellipse_is_round():
    ellipse = cv2.ellipse2Poly((60, 40), (50, 25), 0, 0, 360, 5).reshape(-1, 1, 2)
    assert shape_of(ellipse) == "round"


def _two_nodes(head_at_right: bool) -> tuple[np.ndarray, list[TextLine]]:
    img = np.full((200, 400, 3), 255, np.uint8)
    cv2.rectangle(img, (20, 70), (120, 130), (0, 0, 0), 2)
    cv2.ellipse(img, (320, 100), (60, 30), 0, 0, 360, (0, 0, 0), 2)
    cv2.line(img, (126, 100), (254, 100), (0, 0, 0), 2)
    tip, base = (256, 100), (240, 100)
    if not head_at_right:
        tip, base = (124, 100), (140, 100)
    cv2.fillPoly(img, [np.array([tip, (base[0], 92), (base[0], 108)], np.int32)], (0, 0, 0))
    lines = [TextLine("Start", (50, 92, 90, 108), 0.9), TextLine("End", (305, 92, 335, 108), 0.9)]
    return img, lines


@pytest.mark.parametrize("head_at_right", [True, False])
def test_an_arrow_is_read_with_its_direction(head_at_right):
    g = read_graph(*_two_nodes(head_at_right))
    assert sorted((n.text, n.shape) for n in g.nodes) == [("End", "round"), ("Start", "box")]
    start = next(i for i, n in enumerate(g.nodes) if n.text == "Start")
    end = 1 - start
    want = (start, end) if head_at_right else (end, start)
    assert [(e.src, e.dst, e.directed) for e in g.edges] == [(*want, True)]
    assert not g.tangled and not g.loose


def test_the_arrow_survives_colour_a_dark_page_grain_and_jpeg():
    img, lines = _two_nodes(True)
    for seed in range(6):
        v = draw(seed)
        varied = vary_pixels(img, v)
        scale = varied.shape[1] / img.shape[1]
        moved = [TextLine(t.text, tuple(c * scale for c in t.box), t.score) for t in lines]  # type: ignore[arg-type]
        g = read_graph(varied, moved)
        assert [(g.nodes[e.src].text, g.nodes[e.dst].text, e.directed) for e in g.edges] == [("Start", "End", True)], (
            v.describe()
        )


def test_variations_are_seeded_and_change_the_svg():
    assert draw(3) == draw(3) and draw(3) != draw(4)
    v = draw(1)
    svg = vary_svg('<svg><g stroke-width="2" font-family="sans-serif"><text>A</text></g></svg>', v)
    assert f'font-family="{v.font}"' in svg and f'stroke-width="{2 * v.stroke:.3g}"' in svg


def _pixels(graph: PixelGraph) -> Pixels:
    px = Pixels(np.zeros((4, 4, 3), np.uint8))
    px.__dict__["lines"] = []
    px.__dict__["graph"] = graph
    return px


SPEC = GraphSpec(
    type="graph",
    title="t",
    directed=True,
    nodes=[
        GraphNode(id="a", label="Start", shape="terminator"),
        GraphNode(id="b", label="Check order", shape="process"),
    ],
    edges=[GraphEdge(src="a", dst="b")],
)


def _vp(check: str, *args: str, value: object = None) -> VerificationPoint:
    kind = {"edge": "connection", "no_edge": "absent", "shape": "relation"}[check]
    return VerificationPoint(id="vp1", kind=kind, check=check, component="c", text="t", args=list(args), value=value)


def _graph(edges: list[PixEdge], tangled: set[int] | None = None) -> PixelGraph:
    nodes = [
        PixNode((0, 0, 9, 9), "round", [TextLine("Start", (0, 0, 9, 9), 1)]),
        PixNode((20, 0, 9, 9), "box", [TextLine("Check ordr", (20, 0, 29, 9), 1)]),
    ]
    return PixelGraph(nodes, edges, tangled or set(), set(), [], 2.0)


def test_edge_checks_pass_fail_or_stay_undecided():
    assert i_edge(_pixels(_graph([PixEdge(0, 1, True)])), _vp("edge", "a", "b"), SPEC).passed
    reversed_ = i_edge(_pixels(_graph([PixEdge(1, 0, True)])), _vp("edge", "a", "b"), SPEC)
    assert not reversed_.passed and reversed_.measured == "reversed"
    assert not i_edge(_pixels(_graph([])), _vp("edge", "a", "b"), SPEC).passed
    with pytest.raises(Undecidable):  # joined, but which way is not read
        i_edge(_pixels(_graph([PixEdge(0, 1, False)])), _vp("edge", "a", "b"), SPEC)
    with pytest.raises(Undecidable):  # an arrow may hide in a tangle
        i_edge(_pixels(_graph([], tangled={0, 1})), _vp("edge", "a", "b"), SPEC)
    assert not i_no_edge(_pixels(_graph([PixEdge(0, 1, True)])), _vp("no_edge", "a", "b"), SPEC).passed
    assert i_no_edge(_pixels(_graph([PixEdge(1, 0, True)])), _vp("no_edge", "a", "b"), SPEC).passed


def test_shape_check_uses_the_bound_node():
    px = _pixels(_graph([]))
    assert i_shape(px, _vp("shape", "a", value=["ellipse", "rounded"]), SPEC).passed
    assert not i_shape(px, _vp("shape", "b", value=["diamond"]), SPEC).passed
    assert px.bound(SPEC) == {"a": 0, "b": 1}  # "Check ordr" is bound to "Check order" (one misread letter)


def test_calibration_samples_hold_foreign_outputs_and_varied_pictures(corpus, renderer):
    from environments.prograf.generate.foreign import generated
    from environments.prograf.image.calibrate import render_png, samples
    from environments.prograf.image.png import decode_png

    task = corpus["diagram-001"]
    outs = [o for o in generated([t for t in corpus.values() if t.category == "diagram"]) if o.task_id == task.id]
    names = [name for name, _ in samples(task, outs)]
    assert sum(n.startswith("foreign ") for n in names) == len(outs) > 0
    sol = task.reference[0]
    digest, clean = render_png(task, sol, renderer)
    same, varied = render_png(task, sol, renderer, augment=5)
    assert same == digest and varied != clean and varied == render_png(task, sol, renderer, augment=5)[1]
    assert decode_png(varied).shape[2] == 3
