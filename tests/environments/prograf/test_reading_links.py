"""Issue 39, item 1, session 28: Mermaid's link kinds read as its lexer reads them (circle and cross heads,
two-headed links, thick and dotted strokes, any length, text inside) and schemdraw's Annotate and Wire read
with their real placement; what Mermaid or schemdraw would not draw is refused with its line."""

from __future__ import annotations

import re

import pytest

from environments.prograf.check.verify import verify
from environments.prograf.parse.dot import parse_dot
from environments.prograf.parse.mermaid import parse_mermaid
from environments.prograf.parse.scene import InputRejected
from environments.prograf.parse.schematic import place, wire_path
from environments.prograf.parse.schematic_source import parse_schemdraw_source, schemdraw_source_elements


def links(code: str) -> list[tuple[str, str, str, bool]]:
    scene = parse_mermaid("flowchart LR\n  " + code)
    return [(e.src, e.dst, e.label, e.directed) for e in scene.edges]


ONE_WAY = [("A", "B", "", True)]
BOTH_WAYS = [("A", "B", "", True), ("B", "A", "", True)]
OPEN = [("A", "B", "", False)]


# ---------------------------------------------------------------------- Mermaid link kinds
@pytest.mark.parametrize("code, want", [
    # a circle or a cross head is a head at the target, in every stroke and length (Mermaid draws it there)
    ("A --o B", ONE_WAY), ("A --x B", ONE_WAY), ("A ==o B", ONE_WAY), ("A ==x B", ONE_WAY),
    ("A -.-o B", ONE_WAY), ("A -.-x B", ONE_WAY), ("A ----o B", ONE_WAY), ("A -..-x B", ONE_WAY),
    # written against the target, as Mermaid's docs warn: A---oB is a circle edge to B
    ("A---oB", ONE_WAY), ("A---xB", ONE_WAY),
    # the same mark at both ends: one arrow each way, like <-->
    ("A o--o B", BOTH_WAYS), ("A x--x B", BOTH_WAYS), ("A <--> B", BOTH_WAYS), ("A o==o B", BOTH_WAYS),
    ("A <==> B", BOTH_WAYS), ("A x-.-x B", BOTH_WAYS), ("A <-.-> B", BOTH_WAYS),
    # no mark: a line; longer links are the same link
    ("A ---- B", OPEN), ("A -.- B", OPEN), ("A === B", OPEN), ("A ----> B", ONE_WAY), ("A ===> B", ONE_WAY),
])
def test_mermaid_link_marks_are_heads_at_the_end_they_are_written_at(code, want):
    assert links(code) == want


@pytest.mark.parametrize("code, want", [
    ("A -- No ----> E", [("A", "E", "No", True)]),  # extra dashes on the right of a text link (Mermaid's docs)
    ("A -- t --o B", [("A", "B", "t", True)]), ("A == t ==x B", [("A", "B", "t", True)]),
    ("A -. t .-o B", [("A", "B", "t", True)]), ("A -. re-try ..-> B", [("A", "B", "re-try", True)]),
    ("A o-- t --o B", [("A", "B", "t", True), ("B", "A", "t", True)]),
    ("A <-- t --> B", [("A", "B", "t", True), ("B", "A", "t", True)]),
    ("A --x|stop| B", [("A", "B", "stop", True)]),
])
def test_mermaid_text_links_keep_their_text_and_their_marks(code, want):
    assert links(code) == want


def test_mermaid_draws_only_the_end_mark_of_a_link_whose_marks_differ_and_the_note_says_so():
    scene = parse_mermaid("flowchart LR\n  A o--> B\n  C <--o D")
    assert [(e.src, e.dst, e.directed) for e in scene.edges] == [("A", "B", True), ("C", "D", True)]
    assert any("'o-->' at line 2" in n for n in scene.notes) and any("'<--o' at line 3" in n for n in scene.notes)


@pytest.mark.parametrize("code, what", [
    ("A x-- t --> B", "x-- t -->"),  # the marks of a text link disagree: Mermaid's INVALID link
    ("A <-- t --- B", "<-- t ---"),
    ("A -- t ==> B", "-- t ==> B"),  # a solid opening closed by a thick end
    ("A -- a -- b --> B", "-- a -- b"),  # a text cannot hold `--`
    ("A -- t -->|x| B", "expected a node"),  # a pipe label after a text link
])
def test_mermaid_links_mermaid_would_not_draw_are_refused_with_their_line(code, what):
    with pytest.raises(InputRejected, match=re.escape(what) + ".*line 2"):
        parse_mermaid("flowchart LR\n  " + code)


def test_a_long_unclosed_mermaid_link_is_refused_in_linear_time():
    import time
    start = time.perf_counter()
    for code in ("A -. " + "." * 40000 + " B", "A -- a" + " " * 40000 + "b", "A -. " + ". " * 20000 + ".-> B"):
        try:
            parse_mermaid("flowchart LR\n  " + code)
        except InputRejected:
            pass
    assert time.perf_counter() - start < 5.0  # quadratic scanning took ~1 s for the first alone


def test_a_flowchart_drawn_with_circle_heads_passes_and_one_drawn_with_lines_fails(corpus):
    task = next(t for t in corpus.values() if t.category == "flowchart"
                and any(r.format == "mermaid" and "-->" in r.code for r in t.reference))
    ref = next(r.code for r in task.reference if r.format == "mermaid")
    assert verify(task, "mermaid", ref).passed
    assert verify(task, "mermaid", ref.replace("-->", "--o")).passed
    lines = verify(task, "mermaid", ref.replace("-->", "---"))
    unheaded = [p for p in lines.points if not p.passed and "without an arrowhead" in p.reason]
    assert not lines.passed and unheaded and all(p.pattern == "wrong_relation" for p in unheaded)



@pytest.mark.parametrize("body, want", [
    ("a -> b [arrowhead=none]", [("a", "b", False)]),  # Graphviz draws no head: a line, as in Mermaid's ---
    ("edge [arrowhead=none]; a -> b", [("a", "b", False)]),
    ("a -> b [arrowhead=dot]", [("a", "b", True)]),  # a head of another shape is a head, as Mermaid's --o
    ("a -> b [dir=both, arrowtail=none]", [("a", "b", True)]),
    ("a -> b [dir=back]", [("b", "a", True)]), ("a -> b [dir=back, arrowtail=none]", [("a", "b", False)]),
    ("a -> b [dir=both]", [("a", "b", True), ("b", "a", True)]),
])
def test_dot_edges_carry_the_heads_graphviz_draws(body, want):
    assert [(e.src, e.dst, e.directed) for e in parse_dot("digraph { " + body + " }").edges] == want


# ---------------------------------------------------------------------- schemdraw: Annotate, Wire, marks
HEAD = "import schemdraw\nimport schemdraw.elements as elm\nwith schemdraw.Drawing() as d:\n"


def source(*lines: str) -> str:
    return HEAD + "".join(f"    {ln}\n" for ln in lines)


def parts(code: str) -> dict[str, tuple[str, frozenset[int]]]:
    return {c.label: (c.value, frozenset(c.nets)) for c in parse_schemdraw_source(code).components}


def test_an_annotate_names_what_its_head_points_at_and_moves_the_cursor_to_its_tail_unless_held():
    held = parts(source("V1 = elm.SourceV().up().label('V1 5V')", "R = elm.Resistor().right()",
                        "elm.Annotate().at(R.center).delta(1, 1).label('R1 1k').hold()",  # held: R's end stays `here`
                        "elm.Line().down()", "elm.Line().left().tox(V1.start)"))
    assert held["R1"] == ("1k", held["V1"][1])  # named by the arrow pointing at it, and wired across V1
    # not held, schemdraw leaves the cursor at the Annotate's tail: the next line starts there
    records = schemdraw_source_elements(source("R = elm.Resistor().right().label('R1')",
                                                "elm.Annotate().at(R.center).delta(1, 1).label('load')", "elm.Line().down()"))
    assert records[1]["at"] == [1.5, 0.0] and records[1]["to"] == [2.5, 1.0] and records[2]["at"] == [2.5, 1.0]


@pytest.mark.parametrize("shape, corners, turn", [
    ("-", [(0, 0), (4, -2)], None), ("-|", [(0, 0), (4, 0), (4, -2)], -90), ("|-", [(0, 0), (0, -2), (4, -2)], 0),
    ("z", [(0, 0), (1, 0), (3, -2), (4, -2)], 0), ("N", [(0, 0), (0, -1), (4, -1), (4, -2)], -90),
    ("n", [(0, 0), (0, 1), (4, 1), (4, -2)], -90), ("c", [(0, 0), (1, 0), (1, -2), (4, -2)], 0),
])
def test_a_wire_is_drawn_as_its_shapes_legs_as_schemdraw_draws_it(shape, corners, turn):
    got, _, heading = wire_path((0.0, 0.0), (4.0, -2.0), shape, 1, "element 1")
    assert got == [(float(x), float(y)) for x, y in corners] and heading == turn


def test_a_wires_bend_joins_what_meets_it_and_turns_the_heading():
    # R1 hangs from the middle of the wire's first leg: read straight (corner to corner) it would meet nothing
    p = parts(source("V1 = elm.SourceV().up().label('V1 5V')", "elm.Wire('-|').to((4, 0))",
                     "elm.Capacitor().left().tox(V1.start).label('C1')", "elm.Resistor().at((2, 3)).down().label('R1')"))
    assert len(p["R1"][1] & p["V1"][1]) == 1 and len(p["C1"][1] & p["V1"][1]) == 2
    # after a '-|' wire going down, an element given no direction goes down (schemdraw's droptheta)
    records = schemdraw_source_elements(source("elm.Line().right()", "elm.Wire('-|').to((6, -3))", "elm.Resistor().label('R1')"))
    assert records[2]["at"] == [6.0, -3.0] and [round(v, 9) for v in records[2]["to"]] == [6.0, -6.0]
    # the pictures re-place the records: the bend is drawn where it was read
    assert [(k, s, e) for k, _, _, s, e in place(records) if k == "wire"][1:] == [
        ("wire", (3.0, 0.0), (6.0, 0.0)), ("wire", (6.0, 0.0), (6.0, -3.0))]


def test_marks_over_a_circuit_join_nothing_name_nothing_and_leave_the_cursor():
    plain = ["V1 = elm.SourceV().up().label('V1 5V')", "R = elm.Resistor().right()", "elm.Line().down()",
             "C1 = elm.Capacitor().left().label('C1 1uF')"]
    marks = ["elm.CurrentLabel(top=False).at(R).label('I1')", "elm.CurrentLabelInline(direction='in').at(V1).label('I2')",
             "elm.VoltageLabelArc().at(C1).label('V')", "elm.ZLabel().at(R).label('Z')", "elm.Tag().at(V1.end).label('OUT')",
             "elm.LoopCurrent([R, R, C1, V1], direction='cw').label('I3')", "elm.Encircle([R, C1])", "elm.Rect((0, 0), (1, 1))"]
    with_marks = plain[:2] + marks[:2] + plain[2:] + marks[2:]
    assert parts(source(*plain)) == parts(source(*with_marks))
    assert "" in parts(source(*with_marks))  # the resistor stays unnamed: a current's name is not the part's


def test_schemdraw_keyword_arguments_that_move_the_cursor_are_read_or_refused():
    records = schemdraw_source_elements(source("elm.Resistor(unit=2).right().label('R1')",
                                               "elm.Resistor(move_cur=False).down().label('R2')",  # what .hold() sets
                                               "elm.Resistor(hold=True).down().label('R3')",  # sets nothing in schemdraw
                                               "elm.Resistor().drop('start').right().label('R4')",  # a part's end wins
                                               "elm.Resistor().label('R5')"))
    at = {r["label"]: ([round(v, 9) for v in r["at"]], [round(v, 9) for v in r["to"]]) for r in records}
    assert at["R1"] == ([0.0, 0.0], [2.0, 0.0]) and at["R2"][0] == [2.0, 0.0] and at["R3"][0] == [2.0, 0.0]
    assert at["R4"][0] == [2.0, -3.0] and at["R5"][0] == at["R4"][1]
    with pytest.raises(InputRejected, match=r"extend=False.*at line 5"):
        parse_schemdraw_source(source("elm.Line()", "elm.Resistor(extend=False).label('R1')"))
    with pytest.raises(InputRejected, match=r"Wire shape 'L'.*unsupported construct 'Wire' at line 5"):
        parse_schemdraw_source(source("elm.Line()", "elm.Wire('L').to((1, 1))"))
    with pytest.raises(InputRejected, match=r"delta is read on Wire and Annotate only.*'Resistor' at line 5"):
        parse_schemdraw_source(source("elm.Line()", "elm.Resistor().delta(1, 1)"))
    with pytest.raises(InputRejected, match=r"a direction on a Wire.*'Wire' at line 5"):
        parse_schemdraw_source(source("elm.Line()", "elm.Wire('-|').to((1, 1)).down()"))


def test_a_circuit_reference_with_marks_and_a_held_annotate_still_passes(corpus):
    task = next(t for t in corpus.values() if t.category == "circuit"
                and any(r.format == "schemdraw-py" and "with schemdraw.Drawing() as d:" in r.code for r in t.reference))
    ref = next(r.code for r in task.reference if r.format == "schemdraw-py").rstrip("\n") + "\n"
    marked = ref + "".join(f"    {ln}\n" for ln in ("d += elm.Tag().at(d.here).label('OUT')", "d += elm.LoopArrow().label('I')",
                                                    "d += elm.Annotate().at(d.here).delta(1, 1).label('node').hold()"))
    assert verify(task, "schemdraw-py", ref).passed and verify(task, "schemdraw-py", marked).passed


def test_an_arrow_either_way_joins_a_pair_an_undirected_diagram_rules_out(corpus):
    task = next(t for t in corpus.values() if t.spec.type == "graph" and not t.spec.directed and t.spec.forbidden
                and any(r.format == "mermaid" for r in t.reference))
    ref = next(r.code for r in task.reference if r.format == "mermaid").rstrip("\n")
    a, b = task.spec.forbidden[0]
    target = next(vp.id for vp in task.points if vp.check == "no_edge" and vp.args == [a, b])
    for extra in (f"{a} --- {b}", f"{a} --> {b}", f"{b} --> {a}", f"{b} --o {a}"):  # the last two passed before
        point = next(p for p in verify(task, "mermaid", f"{ref}\n  {extra}\n").points if p.id == target)
        assert not point.passed and point.pattern == "extra_element", extra
