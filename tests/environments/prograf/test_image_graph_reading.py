"""Harder pictures for the structured-image reader (`image_graph`), drawn with OpenCV, text given
(no OCR): two arrows close together between one pair of nodes with labels over them, an arrow
stopping short of a diamond, a line run through a node, a group frame, a label box wiping two
arrows; and the edge-label and node-count rules that keep a misread picture undecided."""

from __future__ import annotations

import numpy as np
import pytest

from environments.prograf.image.graph import PixelGraph, PixNode, read_graph
from environments.prograf.image.ocr import TextLine
from environments.prograf.image.verify import Pixels, Undecidable, i_edge_label, i_graph_node_count
from environments.prograf.task import GraphEdge, GraphNode, GraphSpec, VerificationPoint

cv2 = pytest.importorskip("cv2")
BLACK = (0, 0, 0)


def _page(w: int = 400, h: int = 300) -> np.ndarray:
    return np.full((h, w, 3), 255, np.uint8)


def _arrow(img: np.ndarray, tail: tuple[int, int], tip: tuple[int, int]) -> None:
    """A line with a filled head at `tip`, as our renderer draws one (head 16 px long, 14 wide)."""
    cv2.line(img, tail, tip, BLACK, 2)
    d = np.subtract(tip, tail) / np.hypot(*np.subtract(tip, tail))
    n = np.array([-d[1], d[0]])
    base = np.array(tip) - 16 * d
    head = np.array([tip, base + 7 * n, base - 7 * n], np.int32)
    cv2.fillPoly(img, [head], BLACK)


def _label(img: np.ndarray, text: str, x: int, y: int) -> TextLine:
    """Text drawn with its box's top-left at (x, y); the box is what OCR would report."""
    cv2.putText(img, text, (x + 1, y + 13), cv2.FONT_HERSHEY_SIMPLEX, 0.45, BLACK, 1)
    (w, _), _ = cv2.getTextSize(text, cv2.FONT_HERSHEY_SIMPLEX, 0.45, 1)
    return TextLine(text, (x, y, x + w + 2, y + 16), 0.9)


def _boxes(img: np.ndarray) -> list[TextLine]:
    cv2.rectangle(img, (40, 40), (200, 90), BLACK, 2)
    cv2.rectangle(img, (40, 210), (200, 260), BLACK, 2)
    return [TextLine("Build", (100, 57, 140, 73), 0.9), TextLine("Test", (105, 227, 135, 243), 0.9)]


def _edges(g: PixelGraph) -> list[tuple[str, str, bool]]:
    return sorted((g.nodes[e.src].text, g.nodes[e.dst].text, e.directed) for e in g.edges)


def test_two_arrows_close_together_with_labels_over_them_keep_their_directions():
    img = _page()
    lines = _boxes(img)
    _arrow(img, (110, 96), (110, 204))  # Build -> Test
    _arrow(img, (132, 204), (132, 96))  # Test -> Build, 22 px beside it
    lines += [_label(img, "go", 100, 130), _label(img, "back", 122, 150)]  # each label over its own arrow
    g = read_graph(img, lines)
    assert _edges(g) == [("Build", "Test", True), ("Test", "Build", True)]
    assert not g.tangled and not g.loose


def test_a_label_over_an_arrow_keeps_it_one_arrow():
    img = _page()
    lines = _boxes(img)
    _arrow(img, (120, 96), (120, 204))
    lines.append(_label(img, "yes", 108, 140))
    assert _edges(read_graph(img, lines)) == [("Build", "Test", True)]


def test_one_label_box_over_two_arrows_leaves_them_undecided():
    img = _page()
    lines = _boxes(img)
    _arrow(img, (110, 96), (110, 204))
    _arrow(img, (132, 204), (132, 96))
    lines.append(TextLine("fflure", (95, 92, 150, 208), 0.5))  # OCR read one tall box over both
    g = read_graph(img, lines)
    assert not g.edges and {g.nodes[i].text for i in g.tangled} == {"Build", "Test"}


def test_an_arrow_stopping_short_of_a_diamond_is_followed_to_it():
    img = _page(420, 320)
    diamond = np.array([(120, 30), (200, 70), (120, 110), (40, 70)], np.int32)
    cv2.polylines(img, [diamond], True, BLACK, 2)
    cv2.ellipse(img, (320, 250), (60, 28), 0, 0, 360, BLACK, 2)
    _arrow(img, (185, 110), (262, 226))  # starts 20+ px off the diamond's side, past GAP
    lines = [TextLine("Full?", (100, 62, 140, 78), 0.9), TextLine("End", (305, 242, 335, 258), 0.9)]
    g = read_graph(img, lines)
    assert _edges(g) == [("Full?", "End", True)]


def test_a_line_through_a_node_reads_the_node_but_not_its_arrows():
    img = _page()
    lines = _boxes(img)
    cv2.rectangle(img, (240, 120), (380, 170), BLACK, 2)
    lines.append(TextLine("Extra step", (270, 137, 350, 153), 0.9))
    cv2.line(img, (220, 145), (395, 145), BLACK, 2)  # through the box and its text's middle
    g = read_graph(img, lines)
    extra = next(n for n in g.nodes if n.text == "Extra step")
    assert extra.crossed and extra.box[3] >= 45  # the whole box, not one half
    assert g.nodes.index(extra) in g.tangled or not any(g.nodes.index(extra) in (e.src, e.dst) for e in g.edges)


def test_a_group_frame_is_not_a_node():
    img = _page()
    cv2.rectangle(img, (20, 20), (380, 280), BLACK, 2)  # the group's frame, its title at the top
    cv2.rectangle(img, (120, 120), (280, 180), BLACK, 2)
    cv2.line(img, (100, 150), (300, 150), BLACK, 2)  # an arrow through the node: no half of it is a node
    lines = [TextLine("Services", (160, 30, 240, 46), 0.9), TextLine("Search", (170, 142, 230, 158), 0.9)]
    g = read_graph(img, lines)
    assert [(n.text, n.crossed) for n in g.nodes] == [("Search", True)]


SPEC = GraphSpec(
    type="graph",
    title="t",
    directed=True,
    nodes=[GraphNode(id="a", label="Stopped"), GraphNode(id="b", label="Playing"), GraphNode(id="c", label="Halted")],
    edges=[
        GraphEdge(src="a", dst="b", label="resume"),
        GraphEdge(src="b", dst="c", label="pause"),
        GraphEdge(src="c", dst="a", label="pause"),
    ],
)


def _pixels(nodes: list[str], free: list[str]) -> Pixels:
    drawn = [PixNode((40 * k, 0, 30, 20), "round", [TextLine(t, (40 * k, 0, 30, 20), 1)]) for k, t in enumerate(nodes)]
    loose = [TextLine(t, (0, 100 + 20 * k, 50, 115 + 20 * k), 1) for k, t in enumerate(free)]
    px = Pixels(np.zeros((4, 4, 3), np.uint8))
    px.__dict__["lines"] = [t for n in drawn for t in n.lines] + loose
    px.__dict__["graph"] = PixelGraph(drawn, [], set(), set(), loose, 2.0)
    px.labels = frozenset({"Stopped", "Playing", "Halted", "resume", "pause"})
    return px


def _vp(check: str, value: object) -> VerificationPoint:
    kind, args = ("label", ["a", "b"]) if check == "edge_label" else ("count", [])
    return VerificationPoint(id="vp1", kind=kind, check=check, component="c", text="t", args=args, value=value)


def test_an_edge_label_read_nowhere_fails_only_where_the_text_reads_well():
    nodes = ["Stopped", "Playing", "Halted"]
    assert i_edge_label(_pixels(nodes, ["resume", "pause", "pause"]), _vp("edge_label", "resume"), SPEC).passed
    wrong = i_edge_label(_pixels(nodes, ["maybe", "pause", "pause"]), _vp("edge_label", "resume"), SPEC)
    assert not wrong.passed  # another text where it should be, and every other label read: it is not drawn
    assert not i_edge_label(_pixels([], []), _vp("edge_label", "resume"), SPEC).passed  # a blank picture
    with pytest.raises(Undecidable, match="misread"):  # drawn over a line: "resunhe" may be it
        i_edge_label(_pixels(nodes, ["resunhe", "pause", "pause"]), _vp("edge_label", "resume"), SPEC)
    with pytest.raises(Undecidable, match="fewer times"):  # 'pause' is read once of twice: labels are lost here
        i_edge_label(_pixels(nodes, ["maybe", "pause"]), _vp("edge_label", "resume"), SPEC)
    with pytest.raises(Undecidable, match="not read surely"):  # a node misread: so may the label be
        i_edge_label(_pixels(["Stopped", "Plng", "Halted"], ["pause", "pause"]), _vp("edge_label", "resume"), SPEC)


def test_a_node_count_short_by_a_label_written_outside_any_outline_is_undecided():
    assert not i_graph_node_count(_pixels(["Stopped", "Playing"], []), _vp("node_count", 3), SPEC).passed
    with pytest.raises(Undecidable, match="written outside"):
        i_graph_node_count(_pixels(["Stopped", "Playing"], ["Halted"]), _vp("node_count", 3), SPEC)
