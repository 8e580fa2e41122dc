"""Issue 39 item 1, session 28: a head with no tip -- a circle, a cross, a dot, a tee, a box, a diamond --
is a head at the end it is drawn at, in SVG as in the source it was rendered from. Each SVG below is
written as Mermaid or Graphviz writes it (Mermaid: `<marker id="...-circleEnd">` on the edge's path;
Graphviz: the head drawn as its own polygon or ellipse in the edge's group), and is read as the Mermaid
or DOT source it comes from is read."""

from __future__ import annotations

import math

import pytest

from environments.prograf.parse.dot import parse_dot
from environments.prograf.parse.mermaid import parse_mermaid
from environments.prograf.parse.scene import Scene
from environments.prograf.parse.svg import parse_svg
from environments.prograf.parse.svg_graph import extract_graph
from environments.prograf.parse.svg_marker import head_way, is_cardinality, mid_way


def edges(scene: Scene) -> set[tuple[str, str, bool]]:
    label = {n.key: n.label for n in scene.nodes}
    return {(label.get(e.src) or e.src, label.get(e.dst) or e.dst, e.directed) for e in scene.edges}


def svg_edges(svg: str) -> set[tuple[str, str, bool]]:
    scene = parse_svg(svg)
    extract_graph(scene)
    return edges(scene)


# Mermaid's flowchart markers as its markers.js writes them (ids: diagram id, type, then the mark and end).
MERMAID_MARKERS = {
    "pointEnd": 'viewBox="0 0 10 10" refX="5" refY="5"><path d="M 0 0 L 10 5 L 0 10 z"/>',
    "pointStart": 'viewBox="0 0 10 10" refX="4.5" refY="5"><path d="M 0 5 L 10 10 L 10 0 z"/>',
    "circleEnd": 'viewBox="0 0 10 10" refX="11" refY="5"><circle cx="5" cy="5" r="5"/>',
    "circleStart": 'viewBox="0 0 10 10" refX="-1" refY="5"><circle cx="5" cy="5" r="5"/>',
    "crossEnd": 'viewBox="0 0 11 11" refX="12" refY="5.2"><path d="M 1,1 l 9,9 M 10,1 l -9,9"/>',
    "crossStart": 'viewBox="0 0 11 11" refX="-1" refY="5.2"><path d="M 1,1 l 9,9 M 10,1 l -9,9"/>',
}


def mermaid_svg(start: str | None, end: str | None, ids: dict[str, str] | None = None) -> str:
    """A and B in a row, one link between them carrying Mermaid's markers `start` / `end` (or none)."""
    ids = ids or {k: f"mermaid-1_flowchart-v2-{k}" for k in MERMAID_MARKERS}
    defs = "".join(f'<marker id="{ids[k]}" class="marker flowchart-v2" markerUnits="userSpaceOnUse" markerWidth="11" '
                   f'markerHeight="11" orient="auto" {body}</marker>'.replace("/>", ' class="arrowMarkerPath"/>')
                   for k, body in MERMAID_MARKERS.items())
    marks = (f' marker-start="url(#{ids[start]})"' if start else "") + (f' marker-end="url(#{ids[end]})"' if end else "")
    return f'''<svg id="mermaid-1" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 400 100">
<style>#mermaid-1 .node rect{{fill:#ECECFF;stroke:#9370DB;}} #mermaid-1 .flowchart-link{{stroke:#333333;fill:none;}}</style>
<g>{defs}</g><g class="root"><g class="edgePaths">
<path d="M110,50L200,50L290,50" class="edge-thickness-normal edge-pattern-solid flowchart-link"{marks}/></g>
<g class="nodes"><g class="node default" transform="translate(60, 50)"><rect x="-50" y="-20" width="100" height="40"/>
<g class="label" transform="translate(0, 5)"><text text-anchor="middle">A</text></g></g>
<g class="node default" transform="translate(340, 50)"><rect x="-50" y="-20" width="100" height="40"/>
<g class="label" transform="translate(0, 5)"><text text-anchor="middle">B</text></g></g></g></g></svg>'''


@pytest.mark.parametrize("link, start, end", [
    ("-->", None, "pointEnd"), ("--o", None, "circleEnd"), ("--x", None, "crossEnd"),
    ("<-->", "pointStart", "pointEnd"), ("o--o", "circleStart", "circleEnd"), ("x--x", "crossStart", "crossEnd"),
    ("---", None, None),
])
def test_mermaid_svg_marks_read_as_the_mermaid_link_they_render(link, start, end):
    source = edges(parse_mermaid(f"flowchart LR\n  A {link} B"))
    assert svg_edges(mermaid_svg(start, end)) == source
    assert source != {("A", "B", False)} or link == "---"  # the marks are heads in the source, too


def test_a_tipless_mark_at_the_start_heads_the_start():
    # B --o A drawn from A's side: the circle sits on the path's start, so the arrow points at A
    assert svg_edges(mermaid_svg("circleStart", None)) == {("B", "A", True)}


def test_mermaids_er_cardinality_marks_are_no_heads():
    ids = {k: f"mermaid-1_{k}" for k in MERMAID_MARKERS}
    ids["circleStart"], ids["circleEnd"] = "mermaid-1_er-zeroOrOneStart", "ZERO_OR_MORE_END"
    assert svg_edges(mermaid_svg("circleStart", "circleEnd", ids)) == {("A", "B", False)}
    assert is_cardinality("ONLY_ONE_START") and is_cardinality("x_er-mdParentEnd") and not is_cardinality("x-circleEnd")


def test_head_way_of_tipless_and_empty_marks():
    piece = ((0.0, 0.0), (10.0, 0.0))
    square = [(0.0, 0.0), (6.0, 0.0), (6.0, 6.0), (0.0, 6.0)]
    assert head_way(square, "auto", piece, at_start=False) == 1
    assert head_way(square, "auto", piece, at_start=True) == -1
    assert head_way([], "auto", piece, at_start=False) == 0  # a marker that draws nothing
    assert head_way([(0.0, 0.0), (0.0, 8.0), (8.0, 4.0)], None, ((0.0, 0.0), (0.0, 10.0)), at_start=False) == 0  # sideways


def graphviz_svg(head: str) -> str:
    """`digraph { rankdir=LR; node [shape=box]; A -> B [arrowhead=HEAD] }` as Graphviz writes its SVG: y
    upwards under a translate, polygons closed by their first point again, the head in the edge's group."""
    p, t = 130.0, 140.0  # where the edge's spline stops, and B's border: Graphviz's arrow is 10 long
    def at(f: float, g: float) -> str:
        return f"{p + f:.2f},{-50 + g:.2f}"
    shapes = {
        "normal": f'<polygon fill="black" stroke="black" points="{at(0, -3.5)} {at(10, 0)} {at(0, 3.5)} {at(0, -3.5)}"/>',
        "inv": f'<polygon fill="black" stroke="black" points="{at(10, -3.5)} {at(0, 0)} {at(10, 3.5)} {at(10, -3.5)}"/>',
        "vee": f'<polygon fill="black" stroke="black" points="{at(0, -4.5)} {at(10, 0)} {at(0, 4.5)} {at(3, 0)} {at(0, -4.5)}"/>',
        "dot": f'<ellipse fill="black" stroke="black" cx="{p + 5:.2f}" cy="-50" rx="4" ry="4"/>',
        "odot": f'<ellipse fill="none" stroke="black" cx="{p + 5:.2f}" cy="-50" rx="4" ry="4"/>',
        "tee": f'<polygon fill="black" stroke="black" points="{at(2, -5)} {at(2, 5)} {at(6, 5)} {at(6, -5)} {at(2, -5)}"/>'
               f'<polyline fill="none" stroke="black" points="{at(0, 0)} {at(10, 0)} "/>',
        "box": f'<polygon fill="black" stroke="black" points="{at(0, -4)} {at(0, 4)} {at(8, 4)} {at(8, -4)} {at(0, -4)}"/>'
               f'<polyline fill="none" stroke="black" points="{at(8, 0)} {at(10, 0)} "/>',
        "diamond": f'<polygon fill="black" stroke="black" points="{at(-2, 0)} {at(4, -4)} {at(10, 0)} {at(4, 4)} {at(-2, 0)}"/>',
        "none": "",
    }
    end = t if head == "none" else p
    return f'''<svg width="260pt" height="100pt" viewBox="0.00 0.00 260.00 100.00" xmlns="http://www.w3.org/2000/svg">
<g id="graph0" class="graph" transform="scale(1 1) rotate(0) translate(4 96)">
<polygon fill="white" stroke="transparent" points="-4,4 -4,-96 256,-96 256,4 -4,4"/>
<g id="node1" class="node"><title>A</title><polygon fill="none" stroke="black" points="60,-68 0,-68 0,-32 60,-32 60,-68"/>
<text text-anchor="middle" x="30" y="-45.8" font-family="Times,serif" font-size="14.00">A</text></g>
<g id="node2" class="node"><title>B</title><polygon fill="none" stroke="black" points="200,-68 140,-68 140,-32 200,-32 200,-68"/>
<text text-anchor="middle" x="170" y="-45.8" font-family="Times,serif" font-size="14.00">B</text></g>
<g id="edge1" class="edge"><title>A&#45;&gt;B</title><path fill="none" stroke="black" d="M60,-50C80,-50 100,-50 {end:.2f},-50"/>
{shapes[head]}</g></g></svg>'''


@pytest.mark.parametrize("head", ["normal", "inv", "vee", "dot", "odot", "tee", "box", "diamond", "none"])
def test_graphviz_heads_drawn_in_the_edge_group_read_as_the_dot_source(head):
    source = edges(parse_dot(f"digraph {{ rankdir=LR; node [shape=box]; A -> B [arrowhead={head}] }}"))
    assert svg_edges(graphviz_svg(head)) == source
    assert source == ({("A", "B", False)} if head == "none" else {("A", "B", True)})


def test_graphviz_polygons_closed_by_their_first_point_keep_their_shape():
    scene = parse_svg(graphviz_svg("none"))
    extract_graph(scene)
    assert sorted(n.shape for n in scene.nodes) == ["box", "box"]
    assert math.isclose(scene.nodes[0].box[2] - scene.nodes[0].box[0], 60)  # type: ignore[index]


# ---------------------------------------------------------------------- marker-mid (issue 39 item 1, session 29)
ARROW = '<marker id="mid" viewBox="0 0 10 10" refX="5" refY="5" markerWidth="8" markerHeight="8" orient="{orient}">' \
        '<path d="{d}"/></marker>'
TRIANGLE, BACKWARDS, DOT = "M0,0 L10,5 L0,10 z", "M10,0 L0,5 L10,10 z", "M2,5 A3,3 0 1 1 8,5 A3,3 0 1 1 2,5 z"


def mid_svg(points: str, marks: str, d: str = TRIANGLE, orient: str = "auto", element: str = "polyline") -> str:
    """A and B in a row, joined by a line through `points` that carries the marker `marks` (a style)."""
    line = (f'<polyline points="{points}"' if element == "polyline"
            else f'<path d="M{points.replace(" ", " L")}"') + f' fill="none" stroke="black" style="{marks}"/>'
    return f'''<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 400 100"><defs>{ARROW.format(orient=orient, d=d)}</defs>
<rect x="10" y="30" width="100" height="40" fill="none" stroke="black"/><text x="60" y="55" text-anchor="middle">A</text>
<rect x="290" y="30" width="100" height="40" fill="none" stroke="black"/><text x="340" y="55" text-anchor="middle">B</text>
{line}</svg>'''


@pytest.mark.parametrize("points, want", [
    ("110,50 200,50 290,50", {("A", "B", True)}),  # the arrow at the middle vertex points from A to B
    ("290,50 200,50 110,50", {("B", "A", True)}),  # drawn from B's side
    ("110,50 160,40 240,60 290,50", {("A", "B", True)}),  # at every bend, along the bisector
    ("110,50 290,50", {("A", "B", False)}),  # two points: no inner vertex, nothing drawn
])
def test_an_arrow_drawn_mid_line_heads_the_end_it_points_to(points, want):
    for element in ("polyline", "path"):
        assert svg_edges(mid_svg(points, "marker-mid: url(#mid)", element=element)) == want


def test_a_mid_mark_that_gives_no_direction_is_no_head():
    points = "110,50 200,50 290,50"
    assert svg_edges(mid_svg(points, "marker-mid: url(#mid)", d=DOT)) == {("A", "B", False)}  # a dot at the bend
    assert svg_edges(mid_svg(points, "marker-mid: url(#mid)", orient="90")) == {("A", "B", False)}  # sideways
    assert svg_edges(mid_svg(points, "marker-mid: url(#mid)", d=BACKWARDS)) == {("B", "A", True)}  # tip at its left


def test_mid_arrows_pointing_both_ways_give_no_direction():
    # a fixed orient: the arrow points right at both bends, but the line doubles back between them
    assert mid_way([(0, 0), (10, 5), (0, 10)], "0", [(0, 0), (10, 0), (5, 0), (20, 0)], [True] * 4) == 0
    assert mid_way([(0, 0), (10, 5), (0, 10)], "0", [(0, 0), (10, 0), (20, 0)], [True] * 3) == 1
    assert mid_way([(0, 0), (10, 5), (0, 10)], "auto", [(0, 0), (5, 0), (10, 0)], [True, False, True]) == 0  # no vertex


def test_the_marker_shorthand_puts_the_marker_at_every_vertex():
    # `marker:` sets start, mid and end; a longhand set beside it wins for its own position
    assert svg_edges(mid_svg("110,50 200,50 290,50", "marker: url(#mid)", d=BACKWARDS)) == {("B", "A", True)}
    assert svg_edges(mid_svg("110,50 200,50 290,50", "marker: url(#mid); marker-start: none; marker-end: none",
                             d=BACKWARDS)) == {("B", "A", True)}  # the mid arrow alone
    assert svg_edges(mid_svg("110,50 200,50 290,50", "marker: url(#mid); marker-start: none; marker-mid: none;"
                             " marker-end: none")) == {("A", "B", False)}
    # as an attribute it is nothing: a shorthand is no presentation attribute (SVG; browsers draw no marker)
    svg = mid_svg("110,50 200,50 290,50", "").replace('style=""', 'marker="url(#mid)"')
    assert 'marker="url(#mid)"' in svg and svg_edges(svg) == {("A", "B", False)}
