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
from environments.prograf.parse.svg_marker import head_way, is_cardinality


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
