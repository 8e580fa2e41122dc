"""Reading SVG as code-writing models write it (issue 39, item 1 for SVG, and its bad-input bounds):
each construct below is a correct drawing written by hand in a style the reader met in the wild,
and each test asserts the scene read from it -- or the one clear error it is refused with."""

from __future__ import annotations

import time

import pytest

from environments.prograf.check.geometry import CHECKS as GEOMETRY_CHECKS
from environments.prograf.check.geometry import GeometryView
from environments.prograf.parse.scene import InputRejected, Scene
from environments.prograf.parse.svg import parse_svg
from environments.prograf.parse.svg_graph import extract_graph
from environments.prograf.parse.svg_path import path_subpaths
from environments.prograf.task import VerificationPoint

NS = 'xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink"'


def graph(svg: str) -> Scene:
    scene = parse_svg(svg)
    extract_graph(scene)
    return scene


def edges_by_label(scene: Scene) -> dict[tuple[str, str], object]:
    label = {n.key: n.label for n in scene.nodes}
    return {(label[e.src], label[e.dst]): e for e in scene.edges}


def vp(check: str, kind: str, args: list[str], value: object = None) -> VerificationPoint:
    return VerificationPoint(id="v", kind=kind, check=check, component="c", args=args, value=value, text="t")


# ---------------------------------------------------------------------- <use>, <symbol>, <defs>
def test_use_expands_symbols_and_defs_with_position_transform_and_style():
    scene = graph(f'''<svg {NS} viewBox="0 0 500 300" width="500" height="300">
  <defs>
    <symbol id="step" viewBox="0 0 50 20"><rect x="0.5" y="0.5" width="49" height="19" rx="3" fill="#dde"/></symbol>
    <g id="dot"><circle r="6"/></g>
    <marker id="tip" markerWidth="8" markerHeight="8" refX="8" refY="4" orient="auto"><path d="M0,0 L8,4 L0,8 z"/></marker>
  </defs>
  <g stroke="#222">
    <use href="#step" x="40" y="40" width="100" height="40"/>
    <use xlink:href="#step" transform="translate(300 200)" width="100" height="40"/>
  </g>
  <use href="#dot" x="250" y="150" fill="red"/>
  <text x="90" y="65" text-anchor="middle">Brew coffee</text>
  <text x="350" y="225" text-anchor="middle">Drink it</text>
  <line x1="140" y1="60" x2="297" y2="218" stroke="black" marker-end="url(#tip)"/>
</svg>''')
    nodes = {n.label: n for n in scene.nodes}
    # the symbol's 50 x 20 viewBox is scaled x2 into the use's 100 x 40 box, at the use's x/y
    assert nodes["Brew coffee"].box == pytest.approx((41, 41, 139, 79))
    assert nodes["Drink it"].box == pytest.approx((301, 201, 399, 239))
    assert nodes["Brew coffee"].shape == "rounded"
    assert [(e.directed) for e in scene.edges] == [True] and ("Brew coffee", "Drink it") in edges_by_label(scene)
    # a plain group from <defs>, moved by the use's x/y: a circle at (250, 150) (defs draw nothing themselves)
    assert [(c.cx, c.cy, c.r) for c in scene.circles] == [(250, 150, 6)]


def test_use_of_a_plain_element_carries_its_own_transform_after_the_uses():
    scene = parse_svg(f'''<svg {NS} viewBox="0 0 200 200">
  <defs><line id="tick" x1="0" y1="0" x2="10" y2="0" transform="rotate(90)" stroke="black"/></defs>
  <use href="#tick" x="50" y="20" transform="scale(2)"/></svg>''')
    s = scene.segments[0]
    # scale(2) . translate(50, 20) . rotate(90): (0,0) -> (100, 40), (10, 0) -> (100, 60)
    assert (s.x1, s.y1) == pytest.approx((100, 40)) and (s.x2, s.y2) == pytest.approx((100, 60))


def test_use_cycles_and_use_bombs_are_refused_quickly_naming_the_line():
    cycle = f'''<svg {NS} viewBox="0 0 10 10">
<g id="a"><rect width="1" height="1"/>
<use href="#b"/></g>
<g id="b"><use href="#a"/></g>
</svg>'''
    with pytest.raises(InputRejected, match=r"<use> cycle through #a at line 4"):
        parse_svg(cycle)
    with pytest.raises(InputRejected, match="cycle"):
        parse_svg(f'<svg {NS}><use id="me" href="#me"/></svg>')
    # ten uses of the level below, eight levels deep: 10^8 elements if it were expanded
    levels = ['<g id="l0"><rect width="1" height="1"/></g>']
    levels += [f'<g id="l{k}">' + f'<use href="#l{k - 1}"/>' * 10 + "</g>" for k in range(1, 9)]
    bomb = f'<svg {NS} viewBox="0 0 10 10"><defs>' + "".join(levels) + '</defs><use href="#l8"/></svg>'
    start = time.perf_counter()
    with pytest.raises(InputRejected, match="expands to more than 10000 elements"):
        parse_svg(bomb)
    assert time.perf_counter() - start < 20.0  # expanded, 10^8 elements would take hours; < 0.5 s idle
    # few elements, but one long curved path used 500 times: bounded by the pieces drawn, read once
    wiggle = "M0 5" + " a1 1 0 0 1 2 0" * 2000
    many = f'<svg {NS} viewBox="0 0 10 10"><defs><path id="w" d="{wiggle}" stroke="black"/></defs>' \
        + '<use href="#w"/>' * 500 + "</svg>"
    start = time.perf_counter()
    with pytest.raises(InputRejected, match="more than 100000 line pieces"):
        parse_svg(many)
    assert time.perf_counter() - start < 20.0  # loose for a loaded machine; the refusal is the point


def test_deep_nesting_is_refused_within_the_bound():
    deep = f'<svg {NS} viewBox="0 0 10 10">\n' + '<g transform="translate(0.01 0)">' * 500 + "<rect width='1' height='1'/>" \
        + "</g>" * 500 + "</svg>"
    with pytest.raises(InputRejected, match=r"nested more than 64 deep at line 2"):
        parse_svg(deep)
    # nesting by <use> counts too: a chain of 70 uses, each of the one before
    chain = "".join(f'<g id="c{k}"><use href="#c{k - 1}"/></g>' for k in range(1, 70))
    with pytest.raises(InputRejected, match="nested more than 64 deep"):
        parse_svg(f'<svg {NS}><defs><rect id="c0" width="1" height="1"/>{chain}</defs><use href="#c69"/></svg>')
    # within the bound it reads: 30 translates of 1 compose to 30
    ok = f'<svg {NS} viewBox="0 0 100 100">' + '<g transform="translate(1 0)">' * 30 \
        + '<line x1="0" y1="5" x2="10" y2="5" stroke="black"/>' + "</g>" * 30 + "</svg>"
    assert parse_svg(ok).segments[0].x1 == pytest.approx(30)


# ---------------------------------------------------------------------- transforms and nested viewports
def test_nested_transforms_compose_in_order():
    scene = parse_svg(f'''<svg {NS} viewBox="0 0 400 400">
  <g transform="translate(100,100)">
    <g transform="scale(2) rotate(90)">
      <g transform="matrix(1 0 0 1 10 0)"><line x1="0" y1="0" x2="5" y2="0" stroke="black"/></g>
    </g>
    <g transform="rotate(180 50 0)"><line x1="0" y1="0" x2="10" y2="0" stroke="black"/></g>
  </g>
  <svg x="200" y="200" width="100" height="100" viewBox="0 0 10 10">
    <line x1="0" y1="0" x2="10" y2="10" stroke="black"/>
  </svg>
</svg>''')
    a, b, c = scene.segments
    # translate . scale(2) . rotate(90) . translate(10,0): (0,0) -> (100, 120), (5,0) -> (100, 130)
    assert (a.x1, a.y1, a.x2, a.y2) == pytest.approx((100, 120, 100, 130))
    # rotate 180 about (50, 0), then translate: (0,0) -> (200, 100), (10,0) -> (190, 100)
    assert (b.x1, b.y1, b.x2, b.y2) == pytest.approx((200, 100, 190, 100))
    # a nested <svg>'s viewBox 0..10 maps onto its 100 x 100 box at (200, 200)
    assert (c.x1, c.y1, c.x2, c.y2) == pytest.approx((200, 200, 300, 300))


# ---------------------------------------------------------------------- label backdrops and the page
def test_a_white_box_behind_an_edge_label_is_no_node():
    scene = graph(f'''<svg {NS} viewBox="0 0 600 200">
  <rect width="100%" height="100%" fill="white"/>
  <defs><marker id="a" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="6" markerHeight="6" orient="auto-start-reverse">
    <path d="M 0 0 L 10 5 L 0 10 z"/></marker></defs>
  <rect x="20" y="70" width="140" height="60" fill="#e3f2fd" stroke="#1565c0" stroke-width="2"/>
  <text x="90" y="105" text-anchor="middle">Validate</text>
  <rect x="440" y="70" width="140" height="60" fill="#e3f2fd" stroke="#1565c0" stroke-width="2"/>
  <text x="510" y="105" text-anchor="middle">Save</text>
  <line x1="160" y1="100" x2="440" y2="100" stroke="#333" stroke-width="2" marker-end="url(#a)"/>
  <rect x="270" y="88" width="60" height="24" fill="#ffffff" stroke="none"/>
  <text x="300" y="105" text-anchor="middle" font-size="14">valid</text>
</svg>''')
    assert sorted(n.label for n in scene.nodes) == ["Save", "Validate"]  # no node "valid", no page-sized cluster
    assert scene.clusters == []
    assert edges_by_label(scene)[("Validate", "Save")].label == "valid"


def test_a_backdrop_on_a_tinted_group_is_no_node_either():
    # a pale patch unlike the page, with no outline, that the edge runs under: a backdrop, not a node
    scene = graph(f'''<svg {NS} viewBox="0 0 600 300">
  <rect x="10" y="10" width="580" height="280" fill="#f0f0f0" stroke="#999"/>
  <text x="30" y="35">Backend</text>
  <rect x="40" y="120" width="120" height="50" fill="#fff" stroke="black"/><text x="100" y="150" text-anchor="middle">API</text>
  <rect x="440" y="120" width="120" height="50" fill="#fff" stroke="black"/><text x="500" y="150" text-anchor="middle">DB</text>
  <path d="M160 145 L440 145" stroke="black" marker-end="url(#m)"/>
  <rect x="275" y="133" width="50" height="24" fill="#fffde7"/><text x="300" y="150" text-anchor="middle">SQL</text>
</svg>''')
    assert sorted(n.label for n in scene.nodes) == ["API", "DB"]
    assert edges_by_label(scene)[("API", "DB")].label == "SQL"
    assert [c.label for c in scene.clusters] == ["Backend"]


# ---------------------------------------------------------------------- pills, rounded boxes, arcs and curves
def test_pills_and_rounded_boxes_read_as_their_shapes():
    scene = graph(f'''<svg {NS} viewBox="0 0 700 200">
  <g fill="none" stroke="black">
    <path d="M 50 20 H 150 A 30 30 0 0 1 150 80 H 50 A 30 30 0 0 1 50 20 Z"/>
    <path d="M260,20 h80 a10,10 0 0 1 10,10 v40 a10,10 0 0 1 -10,10 h-80 a10,10 0 0 1 -10,-10 v-40 a10,10 0 0 1 10,-10 z"/>
    <rect x="400" y="20" width="120" height="60" rx="30" ry="30"/>
    <rect x="560" y="20" width="120" height="60" ry="8"/>
    <path d="M 100 150 m -40 0 a 40 25 0 1 0 80 0 a 40 25 0 1 0 -80 0"/>
  </g>
  <text x="100" y="55" text-anchor="middle">Start</text><text x="300" y="55" text-anchor="middle">Load</text>
  <text x="460" y="55" text-anchor="middle">Stop</text><text x="620" y="55" text-anchor="middle">Note</text>
  <text x="100" y="155" text-anchor="middle">Idle</text>
</svg>''')
    shapes = {n.label: n.shape for n in scene.nodes}
    assert shapes == {"Start": "stadium", "Load": "rounded", "Stop": "stadium", "Note": "rounded", "Idle": "ellipse"}
    by_label = {n.label: n for n in scene.nodes}
    assert by_label["Start"].box == pytest.approx((20, 20, 180, 80))  # the arcs bulge past the straight runs


def test_a_circle_drawn_as_two_arcs_is_a_circle():
    scene = parse_svg(f'<svg {NS} viewBox="0 0 200 200"><path d="M 60 100 A 40 40 0 1 1 140 100 A 40 40 0 1 1 60 100 Z" '
                      'fill="none" stroke="black"/></svg>')
    assert [(c.cx, c.cy, c.r) for c in scene.circles] == [pytest.approx((100, 100, 40))]
    assert scene.segments == []  # no chords: what is drawn is the circle


@pytest.mark.parametrize("d, end", [
    ("M 0 0 C 10 -20 40 -20 50 0", (50, 0)),
    ("M 0 0 c 10 -20 40 -20 50 0 s 40 20 50 0", (100, 0)),
    ("M 0 0 Q 25 -30 50 0 T 100 0", (100, 0)),
    ("m 10 10 q 25 -30 50 0 t 50 0", (110, 10)),
    ("M 0 0 A 25 25 0 0 1 50 0", (50, 0)),
    ("M 10 0 a 25 25 0 0 0 50 0 l 10 0", (70, 0)),
])
def test_curves_and_arcs_end_where_they_end_and_bend_on_the_way(d, end):
    sp = path_subpaths(d)[0]
    assert sp.pts[-1] == pytest.approx(end)
    assert sp.curved and len(sp.pts) > 3  # followed piece by piece, not a chord
    assert max(abs(y - sp.pts[0][1]) for _, y in sp.pts) > 5  # it bends away from the chord
    assert sp.anchors[0] and sp.anchors[-1] and not all(sp.anchors)  # steps along a curve are no vertices


def test_a_curved_edge_with_a_marker_connects_and_points_the_right_way():
    scene = graph(f'''<svg {NS} viewBox="0 0 500 400">
  <defs><marker id="h" markerWidth="10" markerHeight="7" refX="10" refY="3.5" orient="auto"><polygon points="0 0, 10 3.5, 0 7"/></marker>
    <marker id="back" markerWidth="10" markerHeight="7" refX="10" refY="3.5" orient="auto-start-reverse"><polygon points="0 0, 10 3.5, 0 7"/></marker></defs>
  <ellipse cx="100" cy="80" rx="60" ry="30" fill="#fafafa" stroke="black"/><text x="100" y="85" text-anchor="middle">Idle</text>
  <ellipse cx="400" cy="320" rx="60" ry="30" fill="#fafafa" stroke="black"/><text x="400" y="325" text-anchor="middle">Busy</text>
  <rect x="20" y="300" width="100" height="40" fill="none" stroke="black"/><text x="70" y="325" text-anchor="middle">Off</text>
  <path d="M 160 80 c 120 0 240 80 240 210" fill="none" stroke="black" marker-end="url(#h)"/>
  <path d="M 340 320 Q 230 380 120 320" fill="none" stroke="black" marker-start="url(#back)"/>
  <path d="M 70 110 L 70 300" stroke="black"/>
  <text x="330" y="150">job</text>
</svg>''')
    edges = edges_by_label(scene)
    assert edges[("Idle", "Busy")].directed and edges[("Idle", "Busy")].label == "job"
    assert ("Off", "Busy") in edges and ("Busy", "Off") not in edges  # marker-start: the head is at the start
    assert not edges[("Idle", "Off")].directed  # no marker, no drawn head
    assert len(scene.edges) == 3


# ---------------------------------------------------------------------- text in tspans
def test_tspans_join_into_one_label_centred_on_its_lines():
    scene = graph(f'''<svg {NS} viewBox="0 0 400 200">
  <rect x="100" y="40" width="200" height="100" fill="none" stroke="black"/>
  <text x="200" y="80" text-anchor="middle" font-size="16"><tspan x="200" dy="0">Check the</tspan><tspan x="200" dy="1.5em">input <tspan font-weight="bold">again</tspan></tspan></text>
</svg>''')
    assert [n.label for n in scene.nodes] == ["Check the input again"]
    t = scene.texts[0]
    assert t.x == pytest.approx(200)
    # two baselines, at 80 and 104: the label's centre lies between them, not on the first line
    assert 80 < t.y < 104


# ---------------------------------------------------------------------- unit-scale viewBoxes
def test_geometry_in_a_unit_viewbox_reads_with_relative_tolerances():
    scene = parse_svg(f'''<svg {NS} viewBox="0 0 1 1" width="400" height="400">
  <g stroke="black" stroke-width="0.005" fill="none">
    <polygon points="0.2,0.8 0.8,0.8 0.5,0.3"/>
    <circle cx="0.5" cy="0.6333" r="0.3"/>
  </g>
  <g font-size="0.05" text-anchor="middle">
    <text x="0.17" y="0.86">A</text><text x="0.83" y="0.86">B</text><text x="0.5" y="0.27">C</text>
    <circle cx="0.5" cy="0.8" r="0.008"/><text x="0.5" y="0.87">M</text>
  </g>
</svg>''')
    view = GeometryView(scene, ["A", "B", "C", "M"])
    assert view.points["A"] == pytest.approx((0.2, 0.8)) and view.points["C"] == pytest.approx((0.5, 0.3))
    assert view.points["M"] == pytest.approx((0.5, 0.8))
    assert len(view.big_circles) == 1  # r = 0.3 is a circle, not a dot; the 0.008 dot is a dot
    check = GEOMETRY_CHECKS
    assert check["segment"](view, vp("segment", "exists", ["A", "B"]), None).passed
    assert check["midpoint"](view, vp("midpoint", "relation", ["M", "A", "B"]), None).passed
    # MC is not drawn: a fixed slack of 2 canvas units would have found every line of the figure along it
    assert not check["segment"](view, vp("segment", "exists", ["M", "C"]), None).passed
    assert check["no_segment"](view, vp("no_segment", "absent", ["M", "C"]), None).passed
    assert check["circle_count"](view, vp("circle_count", "count", [], 1), None).passed


def test_a_flowchart_in_a_ten_unit_viewbox_keeps_arrows_that_stop_short_but_not_far():
    scene = graph(f'''<svg {NS} viewBox="0 0 10 10">
  <g fill="none" stroke="black" stroke-width="0.05">
    <rect x="1" y="1" width="3" height="1.5"/><rect x="6" y="1" width="3" height="1.5"/><rect x="6" y="7" width="3" height="1.5"/>
    <line x1="4.1" y1="1.75" x2="5.9" y2="1.75" marker-end="url(#m)"/>
    <line x1="2.5" y1="2.5" x2="2.5" y2="8"/>
  </g>
  <g font-size="0.5" text-anchor="middle"><text x="2.5" y="1.9">A</text><text x="7.5" y="1.9">B</text><text x="7.5" y="7.9">C</text></g>
</svg>''')
    assert scene.px == pytest.approx(10 / 400)
    edges = edges_by_label(scene)
    assert ("A", "B") in edges  # 0.1 short of each box: within the relative slack
    assert len(scene.edges) == 1  # the line from A ends in empty space 3.5 units from C: no edge


# ---------------------------------------------------------------------- label binding as one assignment
def test_a_right_angle_mark_does_not_capture_the_vertex_label():
    scene = parse_svg(f'''<svg {NS} viewBox="0 0 400 400">
  <g stroke="black" fill="none" stroke-width="2">
    <line x1="100" y1="300" x2="300" y2="300"/><line x1="100" y1="300" x2="100" y2="100"/><line x1="100" y1="100" x2="300" y2="300"/>
    <polyline points="100,284 116,284 116,300"/>
  </g>
  <g font-size="16"><text x="108" y="280">C</text><text x="300" y="320">A</text><text x="90" y="95">B</text></g>
</svg>''')
    # the label C sits inside the angle: the mark's corner (116, 284) is nearer than C itself
    view = GeometryView(scene, ["A", "B", "C"])
    assert view.points["C"] == (100, 300)
    assert GEOMETRY_CHECKS["angle"](view, vp("angle", "relation", ["A", "C", "B"], 90), None).passed


def test_labels_are_bound_together_not_each_to_its_nearest():
    # P's label is nearer Q's point than its own; Q's label is right on Q's point: together, P gets P
    scene = parse_svg(f'''<svg {NS} viewBox="0 0 400 400">
  <g stroke="black"><line x1="100" y1="200" x2="140" y2="200"/><line x1="140" y1="200" x2="300" y2="100"/></g>
  <g font-size="12"><text x="121" y="208">P</text><text x="143" y="214">Q</text></g>
</svg>''')
    view = GeometryView(scene, ["P", "Q"])
    assert view.points == {"P": (100, 200), "Q": (140, 200)}
    # ... and a label halfway between two free vertices is reported as ambiguous
    odd = parse_svg(f'<svg {NS} viewBox="0 0 400 400"><g stroke="black"><line x1="100" y1="100" x2="140" y2="100"/>'
                    '<line x1="140" y1="100" x2="140" y2="300"/></g><text x="118" y="96" font-size="10">R</text></svg>')
    odd_view = GeometryView(odd, ["R"])
    assert "R" in odd_view.ambiguous and any(n.startswith("label R is ambiguous") for n in odd.notes)
    assert "P" not in view.ambiguous


# ---------------------------------------------------------------------- constructs refused, never misread
@pytest.mark.parametrize("body, words", [
    ('<rect width="10" height="10"/>\n<foreignObject x="0" y="0" width="80" height="30">'
     '<div xmlns="http://www.w3.org/1999/xhtml">Start</div></foreignObject>',
     r"unsupported construct <foreignObject> at line 3"),
    ('\n\n<text><textPath href="#p">along the curve</textPath></text>', r"unsupported construct <textPath> at line 4"),
    ('<circle r="3"/>\n<hatch id="h"/>', r"unsupported construct <hatch> at line 3"),
])
def test_unsupported_constructs_are_format_errors_naming_the_line(body, words):
    with pytest.raises(InputRejected, match=words):
        parse_svg(f'<svg {NS} viewBox="0 0 100 100">\n{body}</svg>')


def test_editor_metadata_and_empty_foreign_objects_are_no_error():
    scene = parse_svg(f'''<svg {NS} xmlns:sodipodi="http://sodipodi.sourceforge.net/DTD/sodipodi-0.dtd" viewBox="0 0 100 100">
  <sodipodi:namedview pagecolor="#ffffff"/><foreignObject width="1" height="1"></foreignObject>
  <line x1="0" y1="0" x2="50" y2="50" stroke="black"/></svg>''')
    assert len(scene.segments) == 1 and "stripped <foreignObject>" in scene.notes


def test_only_a_marker_that_exists_is_a_head():
    scene = graph(f'''<svg {NS} viewBox="0 0 600 300">
  <defs><marker id="tip" orient="auto" markerWidth="8" markerHeight="8" refX="8" refY="4"><path d="M0 0 L8 4 L0 8 Z"/></marker>
    <marker id="dot" markerWidth="6" markerHeight="6" refX="3" refY="3"><circle cx="3" cy="3" r="3"/></marker></defs>
  <g fill="none" stroke="black">
    <rect x="20" y="20" width="100" height="40"/><rect x="300" y="20" width="100" height="40"/>
    <rect x="20" y="200" width="100" height="40"/><rect x="300" y="200" width="100" height="40"/>
    <line x1="120" y1="40" x2="300" y2="40" marker-end="url(#tip)"/>
    <line x1="120" y1="220" x2="300" y2="220" marker-end="url(#dot)"/>
    <line x1="70" y1="60" x2="70" y2="200" marker-end="url(#nowhere)"/>
  </g>
  <g text-anchor="middle"><text x="70" y="45">Ask</text><text x="350" y="45">Answer</text>
    <text x="70" y="225">Log</text><text x="350" y="225">Store</text></g>
</svg>''')
    edges = edges_by_label(scene)
    assert edges[("Ask", "Answer")].directed
    assert edges[("Log", "Store")].directed  # a dot at the end heads that end (Mermaid's --o, DOT's arrowhead=dot)
    assert ("Store", "Log") not in edges
    assert not edges[("Ask", "Log")].directed  # a marker that does not exist draws nothing



def test_a_marker_points_where_its_tip_faces():
    # Four boxes in a row, A B C D, and three more below; each edge is one way of drawing (or not) a head.
    scene = graph(f'''<svg {NS} viewBox="0 0 900 400">
  <defs>
    <marker id="fwd" orient="auto" markerWidth="8" markerHeight="8" refX="8" refY="4"><path d="M0 0 L8 4 L0 8 Z"/></marker>
    <marker id="back" orient="auto" markerWidth="8" markerHeight="8" refX="0" refY="4"><polygon points="8 0, 0 4, 8 8"/></marker>
    <marker id="rev" orient="auto-start-reverse" markerWidth="8" markerHeight="8" refX="8" refY="4"><path d="M0 0 L8 4 L0 8"/></marker>
    <marker id="fixed" markerWidth="8" markerHeight="8" refX="4" refY="8"><path d="M0 0 L8 0 L4 8 Z"/></marker>
    <marker id="turned" orient="180deg" markerWidth="8" markerHeight="8" refX="0" refY="4">
      <g transform="rotate(180 4 4)"><path d="M0 0 L8 4 L0 8 Z"/></g></marker>
    <marker id="diamond" orient="auto" markerWidth="12" markerHeight="8" refX="12" refY="4"><path d="M0 4 L6 0 L12 4 L6 8 Z"/></marker>
    <marker id="square" orient="auto" markerWidth="6" markerHeight="6" refX="3" refY="3"><path d="M0 0 H6 V6 H0 Z"/></marker>
  </defs>
  <g fill="none" stroke="black">
    <rect x="20" y="20" width="100" height="40"/><rect x="260" y="20" width="100" height="40"/>
    <rect x="500" y="20" width="100" height="40"/><rect x="740" y="20" width="100" height="40"/>
    <rect x="20" y="300" width="100" height="40"/><rect x="260" y="300" width="100" height="40"/>
    <rect x="500" y="300" width="100" height="40"/>
    <line x1="120" y1="40" x2="260" y2="40" marker-end="url(#back)"/>
    <line x1="360" y1="40" x2="500" y2="40" marker-start="url(#rev)"/>
    <line x1="600" y1="40" x2="740" y2="40" marker-start="url(#fwd)"/>
    <line x1="70" y1="60" x2="70" y2="300" marker-end="url(#fixed)"/>
    <line x1="310" y1="60" x2="310" y2="300" marker-end="url(#turned)"/>
    <line x1="120" y1="320" x2="260" y2="320" marker-end="url(#diamond)"/>
    <path d="M360 320 L500 320 M550 60 L550 300" marker-end="url(#square)"/>
  </g>
  <g text-anchor="middle"><text x="70" y="45">A</text><text x="310" y="45">B</text><text x="550" y="45">C</text>
    <text x="790" y="45">D</text><text x="70" y="325">E</text><text x="310" y="325">F</text><text x="550" y="325">G</text></g>
</svg>''')
    edges = edges_by_label(scene)
    # a head drawn backwards at the end points at the start: B -> A, however the line was written
    assert ("B", "A") in edges and edges[("B", "A")].directed
    # auto-start-reverse turns the start's marker round: it points at the start, C -> B
    assert ("C", "B") in edges and edges[("C", "B")].directed
    # an end's marker used at the start with plain auto points along the line: C -> D
    assert ("C", "D") in edges and edges[("C", "D")].directed
    # no orient (0): a head drawn pointing down in the drawing's axes, on a downward line: A -> E
    assert ("A", "E") in edges and edges[("A", "E")].directed
    # orient 180deg turns a group already turned by 180: a head pointing +x in the drawing, on a downward line: sideways
    assert not [e for k, e in edges.items() if set(k) == {"B", "F"} and e.directed]
    # a diamond and a square have no tip: each heads the end it sits on (DOT's arrowhead=diamond / box)
    assert edges[("E", "F")].directed and ("F", "E") not in edges
    assert edges[("C", "G")].directed and ("G", "C") not in edges  # the path's last subpath only
    assert not [e for k, e in edges.items() if set(k) == {"F", "G"} and e.directed]


def test_a_paths_markers_sit_on_its_first_and_last_vertex_only():
    # one path, two subpaths: the marker-end heads the second only (SVG puts it on the path's last vertex)
    scene = graph(f'''<svg {NS} viewBox="0 0 600 300">
  <defs><marker id="fwd" orient="auto" markerWidth="8" markerHeight="8" refX="8" refY="4"><path d="M0 0 L8 4 L0 8 Z"/></marker></defs>
  <g fill="none" stroke="black">
    <rect x="20" y="20" width="100" height="40"/><rect x="300" y="20" width="100" height="40"/>
    <rect x="20" y="200" width="100" height="40"/><rect x="300" y="200" width="100" height="40"/>
    <path d="M120 40 L300 40 M120 220 L300 220" marker-end="url(#fwd)"/>
  </g>
  <g text-anchor="middle"><text x="70" y="45">A</text><text x="350" y="45">B</text>
    <text x="70" y="225">C</text><text x="350" y="225">D</text></g>
</svg>''')
    edges = edges_by_label(scene)
    assert edges[("C", "D")].directed
    assert not [e for k, e in edges.items() if set(k) == {"A", "B"} and e.directed]

def test_a_refused_construct_is_the_verdicts_format_error_on_every_point():
    from environments.prograf.check.verify import verify
    from environments.prograf.generate.build import CORPUS
    from environments.prograf.task import load_tasks

    task = next(t for t in load_tasks(CORPUS) if t.category == "flowchart" and "svg" in t.formats)
    html_label = (f'<svg {NS} viewBox="0 0 200 100">\n<rect x="10" y="10" width="80" height="40" fill="none" stroke="black"/>'
                  '<foreignObject x="10" y="10" width="80" height="40"><div xmlns="http://www.w3.org/1999/xhtml">Start'
                  '</div></foreignObject></svg>')
    verdict = verify(task, "svg", html_label)
    assert verdict.error and "unsupported construct <foreignObject> at line 2" in verdict.error
    assert all(not p.passed and p.pattern == "rejected_input" for p in verdict.points)


def test_a_rect_is_classed_by_its_outline_as_drawn():
    # Found by the verifier audit (session 22): flowchart I/O nodes drawn as a skewed <rect> were
    # read as boxes; the outline under the transform is what a reader sees.
    def family(transform: str) -> str:
        scene = parse_svg('<svg xmlns="http://www.w3.org/2000/svg" width="400" height="200"><rect x="50" y="30" '
                          f'width="100" height="40"{transform} fill="none" stroke="black"/></svg>')
        [shape] = scene.shapes
        return shape.family

    assert family("") == "box" and family(' transform="scale(2,1)"') == "box"
    assert family(' transform="skewX(-20)"') == "parallelogram"
    assert family(' transform="rotate(90 100 50)"') == "box"
