"""Issue 39 item 1: Mermaid 11's edge ids (`A e1@--> B`) and 11.3's shape data (`A@{ shape: rect, label: "..." }`)
read with Mermaid's own meaning: a documented shape name is the family of the outline Mermaid draws, any other
name is refused by line, an edge's own data (`e1@{ animate: true }`) carries no structure. Both were refused
before."""

from __future__ import annotations

import pytest

from environments.prograf.parse.mermaid import parse_mermaid
from environments.prograf.parse.mermaid_shapes import FAMILIES, SHAPE_FAMILY, shape_data
from environments.prograf.parse.scene import InputRejected, Scene


def nodes(scene: Scene) -> dict[str, tuple[str, str]]:
    return {n.key: (n.label, n.shape) for n in scene.nodes}


def edges(scene: Scene) -> list[tuple[str, str, str, bool]]:
    return [(e.src, e.dst, e.label, e.directed) for e in scene.edges]


@pytest.mark.parametrize("name, family", [
    ("rect", "box"), ("proc", "box"), ("rounded", "rounded"), ("event", "rounded"), ("stadium", "stadium"),
    ("pill", "stadium"), ("fr-rect", "box"), ("subproc", "box"), ("cyl", "cylinder"), ("db", "cylinder"),
    ("circle", "circle"), ("circ", "circle"), ("diam", "diamond"), ("decision", "diamond"), ("question", "diamond"),
    ("hex", "hexagon"), ("lean-r", "parallelogram"), ("in-out", "parallelogram"), ("lean-l", "parallelogram"),
    ("trap-b", "trapezoid"), ("trap-t", "trapezoid"), ("dbl-circ", "circle"), ("text", "text"),
    ("odd", "flag"), ("tri", "triangle"), ("notch-rect", "polygon"), ("doc", "other"), ("flag", "other"),
    ("fork", "other"), ("das", "cylinder"), ("framed-circle", "circle"),
])
def test_a_documented_shape_name_is_read_as_its_outlines_family(name, family):
    scene = parse_mermaid(f'flowchart TD\n  A@{{ shape: {name}, label: "Step one" }}\n  A --> B')
    assert nodes(scene)["A"] == ("Step one", family)


def test_the_shape_table_names_each_shape_once_and_families_are_the_readers_vocabulary():
    names = [n for group in FAMILIES.values() for n in group]
    assert len(names) == len(set(names)) == len(SHAPE_FAMILY)
    assert set(FAMILIES) <= {"box", "rounded", "stadium", "cylinder", "circle", "diamond", "hexagon", "parallelogram",
                             "trapezoid", "triangle", "flag", "text", "polygon", "other"}


@pytest.mark.parametrize("name", ["circel", "lean_right", "squareRect", "Rect", "double circle", "state"])
def test_a_shape_name_mermaid_does_not_document_is_refused_with_its_line(name):
    with pytest.raises(InputRejected, match=r"unsupported construct 'shape: .*' at line 3 \(not a shape name"):
        parse_mermaid(f"flowchart TD\n  A --> B\n  B@{{ shape: {name} }}")


def test_shape_data_keeps_a_bracket_label_sets_the_shape_and_works_in_links_and_groups():
    scene = parse_mermaid('flowchart LR\n'
                          '  A[Start]@{ shape: stadium }\n'
                          '  A --> B@{ shape: diam, label: "Is it ok?" } & C:::hot@{ label: "No, stop" }\n'
                          '  D@{ shape: rect } -->|yes| E')
    assert nodes(scene) == {"A": ("Start", "stadium"), "B": ("Is it ok?", "diamond"), "C": ("No, stop", "box"),
                            "D": ("D", "box"), "E": ("E", "box")}
    assert edges(scene) == [("A", "B", "", True), ("A", "C", "", True), ("D", "E", "yes", True)]


def test_shape_data_over_several_lines_is_one_statement_numbered_by_its_first_line():
    scene = parse_mermaid('flowchart TD\n'
                          '  A@{\n'
                          '    shape: circle\n'
                          '    label: "Two\n'
                          '      lines, one } inside"\n'
                          '    other: "ignored by Mermaid"\n'
                          '  }\n'
                          '  A --> B')
    assert nodes(scene)["A"] == ("Two lines, one } inside", "circle")
    assert edges(scene) == [("A", "B", "", True)]
    with pytest.raises(InputRejected, match="at line 4"):
        parse_mermaid("flowchart TD\n  A --> B\n\n  B@{\n    label: |\n      block\n  }")


@pytest.mark.parametrize("code, what", [
    ('flowchart TD\n  A@{ shape: rect', "'@{ shape: rect' at line 2"),
    ('flowchart TD\n  A@{ icon: "fa:user", label: "User" }', "'A@{ icon: ... }' at line 2"),
    ('flowchart TD\n  A@{ img: "https://example.com/a.png" }', "'A@{ img: ... }' at line 2"),
    ("flowchart TD\n  A @{ shape: rect }", "at line 2"),
    ("flowchart TD\n  A@{ label: [a, b] }", "at line 2"),
])
def test_shape_data_that_is_not_read_is_refused_with_its_line(code, what):
    with pytest.raises(InputRejected, match=r"unsupported construct .*" + what.replace("(", r"\(").replace("{", r"\{")
                       .replace("[", r"\[").replace(".", r"\.")):
        parse_mermaid(code)


def test_edge_ids_are_read_and_an_edges_data_carries_no_structure():
    scene = parse_mermaid("flowchart LR\n"
                          "  A e1@--> B\n"
                          "  B e2@-- go on --> C\n"
                          "  C e3@==>|done| D\n"
                          "  D e_4@--- A\n"
                          "  e1@{ animate: true }\n"
                          "  e2@{ animation: fast, curve: linear }\n"
                          "  class e3 animate\n"
                          "  classDef animate stroke-dasharray: 9\\,5\n")
    assert set(nodes(scene)) == {"A", "B", "C", "D"}
    assert edges(scene) == [("A", "B", "", True), ("B", "C", "go on", True), ("C", "D", "done", True),
                            ("D", "A", "", False)]
    assert any("edge 'e1'" in n for n in scene.notes)
    # an `@` inside a link's text is text, not an edge id
    scene = parse_mermaid("flowchart LR\n  A -->|me@x.org| B\n  B -- to ops@x.org --> C\n  C e-5@--> A")
    assert edges(scene) == [("A", "B", "me@x.org", True), ("B", "C", "to ops@x.org", True), ("C", "A", "", True)]


@pytest.mark.parametrize("code, what", [
    ("flowchart TD\n  A e1@--> B\n  e1 --> C", "'e1' at line 3 (an edge id used as a node)"),
    ("flowchart TD\n  A e1@--> B\n  e1@{ animate: true } --> C", "'e1' at line 3 (an edge id used as a node)"),
    ("flowchart TD\n  A --> B\n  B A@--> C", "'A@' at line 3 (an edge id that is a node's id)"),
    ("flowchart TD\n  A e1@ B", "'e1@ B' at line 2"),
])
def test_an_edge_id_mermaid_would_misdraw_is_refused_with_its_line(code, what):
    with pytest.raises(InputRejected, match=r"unsupported construct " + what.replace("(", r"\(").replace(")", r"\)")):
        parse_mermaid(code)


def test_shape_data_pairs_follow_yaml_quoting():
    assert shape_data(' shape: rounded , label: "DD, x"') == {"shape": "rounded", "label": "DD, x"}
    assert shape_data("label : 'it''s'") == {"label": "it's"}
    assert shape_data("\n shape: circle\n label: a, b\n") == {"shape": "circle", "label": "a, b"}


def test_an_unclosed_shape_data_block_is_refused_by_its_first_line():
    code = "flowchart TD\n  A@{\n" + "  x: y\n" * 6_000  # joined line by line, each character read once
    with pytest.raises(InputRejected, match="at line 2"):
        parse_mermaid(code)


def test_over_several_lines_a_comma_is_part_of_the_value_as_in_yaml():
    # a block mapping: `shape: rect,` names the shape "rect," (Mermaid: "No such shape"); on one line the
    # comma ends the pair (a flow mapping, a trailing comma allowed)
    with pytest.raises(InputRejected, match=r"'shape: rect,' at line 2"):
        parse_mermaid('flowchart TD\n  A@{ shape: rect,\n    label: "x" }')
    assert nodes(parse_mermaid('flowchart TD\n  A@{ shape: rect, label: "x", }'))["A"] == ("x", "box")


def test_the_corpus_pairs_in_these_constructs_pass_when_correct_and_fail_at_their_target():
    # the hand-written pairs of session 29: shape data and edge ids in Mermaid, mid-line arrows in SVG;
    # before these readers, every correct one was a false alarm
    from environments.prograf.check.audit import judge
    from environments.prograf.generate.build import CORPUS
    from environments.prograf.generate.foreign import handwritten
    from environments.prograf.task import load_tasks

    tasks = load_tasks(CORPUS)
    by_id = {t.id: t for t in tasks}
    mine = [o for o in handwritten(tasks) if ".mermaid11." in o.key or ".mid-arrows." in o.key
            or any(s in o.code for s in ("@{", "marker-mid"))]
    assert len(mine) == 8 and sum(o.fault is None for o in mine) == 4
    assert {o.fault for o in mine} == {None, "wrong_relation", "extra_element", "missing_object"}
    for o in mine:
        assert judge(by_id[o.task_id], o).result == ("pass" if o.fault is None else "caught"), o.key
