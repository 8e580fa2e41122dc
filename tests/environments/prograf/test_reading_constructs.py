"""Issue 39, item 1 for DOT, Mermaid, schemdraw and SVG <style> sheets: correct diagrams written by hand in the styles
code-writing models use are read with each construct's real meaning -- the scene's nodes, edges,
labels and netlist are asserted -- and a construct the reader does not know is a clear "unsupported
construct X at line N" error, which the verifier records as a format failure on every point."""

from __future__ import annotations

import time

import pytest

from environments.prograf.check.verify import verify
from environments.prograf.parse.dot import parse_dot
from environments.prograf.parse.mermaid import parse_mermaid
from environments.prograf.parse.scene import InputRejected, Scene
from environments.prograf.parse.schematic import parse_schemdraw_json
from environments.prograf.parse.schematic_source import parse_schemdraw_source
from environments.prograf.parse.svg import parse_svg


SVG_HEAD = '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 200 200">\n'


def parts(scene: Scene) -> dict[str, tuple[str, str, frozenset[int]]]:
    """label -> (kind, value, the set of its nets): orientation-free, as the netlist checks compare."""
    return {c.label: (c.kind, c.value, frozenset(c.nets)) for c in scene.components}


def edges(scene: Scene) -> dict[tuple[str, str], tuple[str, bool]]:
    return {(e.src, e.dst): (e.label, e.directed) for e in scene.edges}


# ---------------------------------------------------------------------- schemdraw
def test_schemdraw_push_pop_starts_a_parallel_branch_at_the_pushed_place():
    # the drawing-stack style (no `d +=`): elements made inside `with` add themselves
    scene = parse_schemdraw_source('''import schemdraw
import schemdraw.elements as elm

with schemdraw.Drawing() as d:
    d.config(unit=2.5)
    V1 = elm.SourceV().up().label('V1\\n12 V')
    elm.Line().right()
    d.push()
    elm.Resistor().down().label('R1 4.7kΩ')
    d.pop()
    elm.Line().right()
    elm.Resistor().down().label('R2 10kΩ')
    elm.Line().left().tox(V1.start)
    elm.Ground()
''')
    p = parts(scene)
    assert set(p) == {"V1", "R1", "R2"} and p["V1"][1] == "12 V" and p["R1"][1] == "4.7kΩ"
    # both resistors sit across the source: the branch after pop() starts at the top wire, not at R1's foot
    assert p["R1"][2] == p["R2"][2] == p["V1"][2] and len(p["V1"][2]) == 2
    bottom = next(c.nets[0] for c in scene.components if c.label == "V1")
    assert scene.ground_nets == {bottom}


def test_schemdraw_pop_matters_a_branch_without_it_is_read_as_a_series_chain():
    # the same drawing without push/pop is a different circuit: R2 hangs off R1's foot
    scene = parse_schemdraw_source('''import schemdraw
import schemdraw.elements as elm
with schemdraw.Drawing() as d:
    V1 = elm.SourceV().up().label('V1 12V')
    elm.Line().right()
    elm.Resistor().down().label('R1 4.7k')
    elm.Line().right()
    elm.Resistor().down().label('R2 10k')
''')
    p = parts(scene)
    assert p["R1"][2] != p["R2"][2] and len(p["R1"][2] & p["R2"][2]) == 1


def test_schemdraw_at_anchors_here_length_unit_to_tox_toy():
    # the older explicit style: a drawing object, d.add(...), keyword labels, anchors of named elements
    scene = parse_schemdraw_source('''import schemdraw
from schemdraw import elements as elm

d = schemdraw.Drawing(unit=3)
Vin = d.add(elm.SourceSin(label='Vin 5V').up())
R1 = d.add(elm.Resistor().right().label('R1 1kΩ'))
C1 = d.add(elm.Capacitor().down().label('C1 100nF'))
d.add(elm.Line().left().tox(Vin.start))
d.add(elm.Line().at(R1.end).right().length(d.unit / 2))
d.add(elm.Resistor().down().toy(C1.end).label('RL 10kΩ'))
d.add(elm.Line().left().to(C1.end))
d.here = Vin.start
d.add(elm.Ground())
d.draw()
''')
    p = parts(scene)
    a, b = p["R1"][2]
    vin, c1, rl = p["Vin"][2], p["C1"][2], p["RL"][2]
    gnd = next(iter(scene.ground_nets))
    assert vin == {gnd, a} and c1 == {b, gnd} and rl == {b, gnd} and p["Vin"][0] == "voltage_source"


def test_schemdraw_hold_move_endpoints_anchor_math_labels_and_points():
    scene = parse_schemdraw_source('''import schemdraw
import schemdraw.elements as elm
from schemdraw.util import Point

with schemdraw.Drawing() as d:
    B1 = elm.Battery().up().label(('−', '$B_1$ 9 V', '+'))
    R1 = elm.Resistor().right().label('$R_1$ 220$\\\\Omega$')
    with d.hold():
        elm.Resistor().down().label('R2 1k')
    elm.Line().right(2)
    elm.LED().down().label('D1 red').hold()
    d.move(2, 0)
    elm.Capacitor().endpoints(d.here, (7, 0)).label('C1', loc='bottom').label('1µF')
    elm.Line().at((R1, 'end')).to(Point((7, 3)))
    elm.Line().at(B1.start).tox(7)
    elm.Resistor().down().anchor('end').at(B1.start).label('R3 47')
    d += elm.Dot().at(R1.end + Point((0, 0)))
''')
    p = parts(scene)
    assert p["B1"][1] == "9 V" and p["R1"][1] == "220Ω" and p["C1"][1] == "1µF" and p["D1"][0] == "led"
    # hold() and `with d.hold()` leave the cursor on the rail after R1, so R2, D1 and C1 all hang from it
    # to the bottom wire: three parts in parallel, in series with R1 across the battery
    assert p["R2"][2] == p["D1"][2] == p["C1"][2] and len(p["R2"][2]) == 2
    assert len(p["R1"][2] & p["R2"][2]) == 1 and len(p["R1"][2] & p["B1"][2]) == 1
    (bottom,) = p["B1"][2] - p["R1"][2]
    assert bottom in p["R2"][2]
    assert p["R3"][2] == p["B1"][2]  # anchor('end') at B1.start: R3 runs down from B1's top *to* its foot


def test_schemdraw_json_reads_the_same_state_words():
    scene = parse_schemdraw_json('{"elements": ['
                                 '{"type": "SourceV", "label": "V1 5V", "d": "up"},'
                                 '{"type": "Resistor", "label": "R1", "d": "right", "hold": true},'
                                 '{"type": "Resistor", "label": "R2", "d": "down", "anchor": "end", "at": "V1.start"},'
                                 '{"type": "Line", "at": "R1.end", "toy": 0},'
                                 '{"type": "Line", "at": "V1.start", "tox": [3, 9]}]}')
    p = parts(scene)
    assert p["R2"][2] == p["V1"][2]  # R2 ends at V1's foot and starts at its top
    assert p["R1"][2] == p["V1"][2]  # R1's far end is wired down to the bottom rail


@pytest.mark.parametrize("code, words", [
    ("for i in range(3):\n    d += elm.Resistor()", "unsupported construct 'for i in range"),
    ("d += elm.Resistor().at(R9.end)", "R9 is not a literal"),
    ("d += elm.Resistor().at((1, 2) - (1, 1))", "unsupported construct"),
    ("d.save_everything()", "drawing method save_everything"),
    ("elm.Resistor().at(d.here.z)", "unsupported construct"),
    ("d += elm.Resistor().tox(elm.Line())", "needs a number or a point"),
    ("d += elm.Resistor().at(" + "(" * 30 + "1" + "+1)" * 30 + ", 0)", "unsupported construct"),
])
def test_schemdraw_unknown_constructs_are_named_with_their_line(code, words):
    src = "import schemdraw\nimport schemdraw.elements as elm\nwith schemdraw.Drawing() as d:\n"
    src += "".join("    " + ln + "\n" for ln in code.splitlines())
    with pytest.raises(InputRejected, match=words) as info:
        parse_schemdraw_source(src)
    assert "at line 4" in str(info.value) or "line 4" in str(info.value)


def test_schemdraw_arrow_is_a_wire_gap_joins_nothing_and_elements_not_read_are_refused():
    head = "import schemdraw\nimport schemdraw.elements as elm\nwith schemdraw.Drawing() as d:\n"
    scene = parse_schemdraw_source(head + "    V1 = elm.SourceV().up().label('V1 5V')\n"
                                          "    elm.Arrow().right().label('I1')\n"  # a Line with a head: the top wire
                                          "    R1 = elm.Resistor().down().label('R1 1k')\n"
                                          "    elm.Line().left().tox(V1.start)\n"
                                          "    elm.Gap().at(R1.start).right().label(['+', 'Vout', '-'])\n"
                                          "    elm.Gap().endpoints(R1.start, R1.end).label('V2')\n")
    p = parts(scene)
    # no part "I1", "Vout" or "V2": R1 sits straight across V1, and the gaps join and add nothing
    assert set(p) == {"V1", "R1"} and p["R1"][2] == p["V1"][2] and len(p["R1"][2]) == 2
    assert p["V1"][0] == "voltage_source" and p["R1"][1] == "1k"
    for code in ("elm.Opamp().label('U1')", "elm.BjtNpn().label('Q1')"):  # session 28: marks are read (test_reading_links)
        with pytest.raises(InputRejected, match=r"element '(Opamp|BjtNpn)' is not read.*at line 5"):
            parse_schemdraw_source(head + "    V1 = elm.SourceV().up().label('V1 5V')\n    " + code + "\n")
    with pytest.raises(InputRejected, match="element 2: .*element 'Opamp' is not read"):
        parse_schemdraw_json('{"elements": [{"type": "Resistor", "label": "R1"}, {"type": "Opamp"}]}')


def test_schemdraw_drawing_stack_adds_each_element_once():
    head = "import schemdraw\nimport schemdraw.elements as elm\nwith schemdraw.Drawing() as d:\n"
    # made, then added at once: one element (schemdraw adds it on `d +=`, not again when the next is made)
    scene = parse_schemdraw_source(head + "    R1 = elm.Resistor().label('R1')\n    d += R1\n"
                                          "    d += elm.Capacitor().down().label('C1')\n")
    assert [c.label for c in scene.components] == ["R1", "C1"] and len(set(parts(scene)["R1"][2])) == 2
    # made, then another made, then added: schemdraw would draw it twice, somewhere else -- refused, not guessed
    with pytest.raises(InputRejected, match="added twice.*at line 6"):
        parse_schemdraw_source(head + "    V1 = elm.SourceV().label('V1')\n    R1 = elm.Resistor().label('R1')\n"
                                      "    d += V1\n")


def test_schemdraw_sandbox_still_refuses_imports_and_io(tmp_path):
    marker = tmp_path / "touched"
    for code in (f"import os\nos.remove('{marker}')", "from schemdraw.elements import *",
                 "import schemdraw\nimport schemdraw.elements as elm\nwith schemdraw.Drawing() as d:\n"
                 f"    d += elm.Resistor().label(open('{marker}', 'w').name)",
                 "import schemdraw\nwith schemdraw.Drawing() as d:\n    d.here = __import__('os').getcwd()",
                 "import schemdraw\nwith schemdraw.Drawing() as d:\n    d += eval('1')"):
        with pytest.raises(InputRejected, match="unsupported construct"):
            parse_schemdraw_source(code)
    assert not marker.exists()


# ---------------------------------------------------------------------- DOT
def test_dot_html_labels_entities_and_every_label_attribute():
    scene = parse_dot('''digraph loan {
    graph [rankdir=LR, fontname="Arial"];
    node [shape=box, style="rounded,filled", fillcolor="#eef"];
    edge [fontsize=10];
    start [shape=ellipse, label=<<b>Start</b>>];
    check [shape=diamond, label=<income &gt; 3 &times; rent<br/>&amp; score &#8805; 700?>];
    rec [shape=record, label="{<in> Apply|Tax &amp; fees}"];
    note [label="", xlabel="Archive"];
    start -> check;
    check -> rec [taillabel="yes"];
    check -> note [headlabel=<<i>no</i>>];
    rec -> note [xlabel="done", color=gray];
}''')
    nodes = {n.key: n for n in scene.nodes}
    assert nodes["start"].label == "Start" and nodes["start"].shape == "ellipse"
    assert nodes["check"].label == "income > 3 × rent & score ≥ 700?" and nodes["check"].shape == "diamond"
    assert nodes["rec"].label == "Apply Tax & fees" and nodes["note"].label == "Archive"
    assert nodes["rec"].shape == "rounded"  # the node default's style reaches it
    assert edges(scene) == {("start", "check"): ("", True), ("check", "rec"): ("yes", True),
                            ("check", "note"): ("no", True), ("rec", "note"): ("done", True)}


def test_dot_defaults_chains_clusters_ports_and_attribute_positions():
    scene = parse_dot('''graph net {
  edge [label="eth"]
  node [shape=circle]; r1; r2
  subgraph cluster_dmz { graph [label="DMZ"]; node [shape=box]
    web:p80 -- app:e -- db [label="sql"]
    subgraph cluster_inner { label = "Core"; db }
  }
  r1 -- r2 -- web:w
  lb [shape = "cylinder"] ; lb -- { r1 r2 } [style = dashed]
}''')
    nodes = {n.key: n for n in scene.nodes}
    assert nodes["r1"].shape == "circle" and nodes["web"].shape == "box" and nodes["lb"].shape == "cylinder"
    got = edges(scene)
    assert got[("web", "app")] == ("sql", False) and got[("app", "db")] == ("sql", False)
    assert got[("r1", "r2")] == ("eth", False) and got[("r2", "web")] == ("eth", False)
    assert {("lb", "r1"), ("lb", "r2")} <= set(got) and len(scene.edges) == 6
    clusters = {c.key: c for c in scene.clusters}
    assert clusters["cluster_dmz"].label == "DMZ" and clusters["cluster_dmz"].members == {"web", "app", "db"}
    assert clusters["cluster_inner"].label == "Core" and nodes["db"].cluster == "cluster_inner"
    assert nodes["web"].cluster == "cluster_dmz" and nodes["r1"].cluster is None


@pytest.mark.parametrize("code, words", [
    ("digraph {\n  a -> b\n  a => c\n}", "unsupported construct '> c' at line 3"),
    ("digraph {\n  a -> b;\n  -> c\n}", "unsupported construct at line 3"),
    ("digraph a { x }\ndigraph b { y }", "unsupported construct 'digraph' after .* at line 2"),
    ("digraph {\n  a @ b\n}", "unsupported construct '@ b' at line 2"),
])
def test_dot_unknown_constructs_are_named_with_their_line(code, words):
    with pytest.raises(InputRejected, match=words):
        parse_dot(code)


# ---------------------------------------------------------------------- Mermaid
def test_mermaid_shapes_classes_subgraphs_and_link_kinds():
    scene = parse_mermaid('''---
title: Order flow
---
%%{init: {"theme": "neutral"}}%%
flowchart LR
    %% shapes
    start([Start]):::term --> read[/Read order/]
    read --> ok{Valid?}
    ok -->|yes| pack[[Pack]]
    ok -- no --> fix(Fix order)
    fix -.-> read
    pack ==> db[(Orders DB)]
    db --- log>Log #gt; archive]
    hub((Hub)) <--> pack
    pack --ships--> trk{{Truck &amp; van}}
    subgraph wh [Warehouse]
        direction TB
        pack
        trk
    end
    classDef term fill:#9f9,stroke:#333;
    class read,ok highlight
    style db fill:#ccf
    linkStyle 0 stroke:red
''')
    nodes = {n.key: n for n in scene.nodes}
    shapes = {k: nodes[k].shape for k in ("start", "read", "ok", "pack", "fix", "db", "log", "hub", "trk")}
    assert shapes == {"start": "stadium", "read": "parallelogram", "ok": "diamond", "pack": "box", "fix": "rounded",
                      "db": "cylinder", "log": "flag", "hub": "circle", "trk": "hexagon"}
    assert nodes["log"].label == "Log > archive" and nodes["trk"].label == "Truck & van"
    assert nodes["start"].label == "Start" and len(nodes) == 9  # `:::term` and class lines add no node
    got = edges(scene)
    assert got[("ok", "pack")] == ("yes", True) and got[("ok", "fix")] == ("no", True)
    assert got[("fix", "read")] == ("", True) and got[("pack", "db")] == ("", True)
    assert got[("db", "log")] == ("", False) and got[("pack", "trk")] == ("ships", True)
    assert ("hub", "pack") in got and ("pack", "hub") in got
    assert scene.clusters[0].label == "Warehouse" and scene.clusters[0].members == {"pack", "trk"}


@pytest.mark.parametrize("code, words", [
    ("flowchart TD\n  A --> B\n  A@{ shape: diamnd } --> C", "unsupported construct 'shape: diamnd' at line 3"),
    ("flowchart TD\n  A --> B\n  B ->> C", "unsupported construct '->> C' at line 3"),
    ("flowchart TD\n  subgraph g [G]\n    A\n  end\n  g --> B", "unsupported construct 'g' used as a node"),
    ("flowchart TD\n  A --> B\n  title Orders", "unsupported construct 'Orders' at line 3"),
])
def test_mermaid_unknown_constructs_are_named_with_their_line(code, words):
    with pytest.raises(InputRejected, match=words):
        parse_mermaid(code)


# ---------------------------------------------------------------------- through the verifier
def test_an_unsupported_construct_is_a_format_failure_not_a_verdict(corpus):
    cases = []
    for task in corpus.values():
        for ref in task.reference:
            if ref.format == "dot" and not any(c[1] == "dot" for c in cases):
                cases.append((task, "dot", ref.code.rstrip().rstrip("}") + "  x => y\n}"))
            if ref.format == "mermaid" and not any(c[1] == "mermaid" for c in cases):
                cases.append((task, "mermaid", ref.code + "\n  A@{ shape: rectangel }"))
            if ref.format == "schemdraw-py" and not any(c[1] == "schemdraw-py" for c in cases):
                cases.append((task, "schemdraw-py", ref.code + "    for k in range(2):\n        d.push()\n"))
    assert {c[1] for c in cases} == {"dot", "mermaid", "schemdraw-py"}
    for task, fmt, code in cases:
        verdict = verify(task, fmt, code)
        assert verdict.error and "unsupported construct" in verdict.error and "at line" in verdict.error, fmt
        assert not verdict.passed and all(p.pattern == "rejected_input" and not p.passed for p in verdict.points)


# ---------------------------------------------------------------------- bad input stays bounded
@pytest.mark.parametrize("parse, code, outcome", [
    (parse_dot, "digraph { " + "subgraph { " * 5000 + "a" + " }" * 5000 + " }", "nested deeper"),
    (parse_dot, "digraph { a -> " + " -> ".join(f"n{i}" for i in range(8000)) + " }", None),
    (parse_dot, "digraph { a [label=<" + "<b>" * 7000 + "x" + "</b>" * 7000 + ">] }", None),
    (parse_mermaid, "flowchart TD\n" + "subgraph s\n" * 3000 + "A\n" + "end\n" * 3000, "nested deeper"),
    (parse_mermaid, "flowchart TD\n" + " --> ".join(f"n{i}" for i in range(4000)), None),
    (parse_mermaid, "flowchart TD\n  A[\"" + "#gt;" * 10000 + "\"]", None),
    (parse_schemdraw_source, "import schemdraw\nwith schemdraw.Drawing() as d:\n    d.here = (" + "1+" * 500 + "1, 0)",
     "nested deeper"),
    (parse_schemdraw_source, "import schemdraw\nwith schemdraw.Drawing() as d:\n    d.here = (" + "1+" * 9000 + "1, 0)",
     "too deeply"),
    (parse_svg, SVG_HEAD + "<style>" + "".join(f"g.c{i} g g g g g g line {{ stroke: red }}" for i in range(1900))
     + "</style>" + "<g>" * 60 + '<line x2="9" y2="9"/>' * 3000 + "</g>" * 60 + "</svg>", "more than 300000 tests"),
])
def test_deeply_nested_or_long_input_is_read_or_refused_in_bounded_time(parse, code, outcome):
    start = time.perf_counter()
    if outcome is None:
        scene = parse(code)
        assert scene.nodes
    else:
        with pytest.raises(InputRejected, match=outcome):
            parse(code)
    # Generous for a loaded machine (under 0.1 s idle); unbounded reading would take minutes.
    assert time.perf_counter() - start < 20.0


# ---------------------------------------------------------------------- SVG <style> sheets


def test_svg_style_sheets_are_read_with_css_selectors_and_cascade():
    # what models write: descendant and child selectors, a selector list, !important, :hover
    scene = parse_svg(SVG_HEAD + '''<style>
  g.edge path { stroke: none }
  path, line { stroke: black; fill: none }
  .node > rect { fill: white; stroke: none }
  .ghost { stroke: none !important }
  line:hover { stroke: none }
</style>
<g class="edge"><path d="M 10 10 L 100 10"/></g>
<g class="edge"><g><path d="M 10 30 L 100 30"/></g></g>
<path d="M 10 50 L 100 50"/>
<g class="node"><rect x="10" y="80" width="50" height="30" stroke="black"/></g>
<g class="node"><g><rect x="100" y="80" width="50" height="30" stroke="black"/></g></g>
<line class="ghost" x1="0" y1="150" x2="100" y2="150" style="stroke: red"/>
<line x1="0" y1="170" x2="100" y2="170"/>
</svg>''')
    # `g.edge path` (more specific than `path`, though earlier) hides both edge paths, however deep;
    # the child rule beats the rect's own stroke attribute and makes the first box a white backdrop,
    # not the second (a grandchild); !important beats style=; :hover never holds in a picture
    assert sorted({s.y1 for s in scene.segments}) == [50, 80, 110, 170]
    assert len(scene.shapes) == 1 and scene.hidden == 4


@pytest.mark.parametrize("sheet, words", [
    ("rect { fill: none }\n  text + rect { fill: white }", "'text \\+ rect' in <style> at line 5"),
    ("\n  rect:first-child { fill: white }", "'rect:first-child' in <style> at line 5"),
    ("rect[fill] { stroke: none }", "'rect\\[fill\\]' in <style> at line 4"),
    ("@media print { rect { fill: white } }", "'@media' in <style> at line 4"),
    (".a { fill: none; .b { fill: white } }", "'a block nested in .a' in <style> at line 4"),
])
def test_svg_style_constructs_not_read_are_named_with_their_line(sheet, words):
    code = SVG_HEAD + '<rect width="9" height="9"/>\n<style>\n  ' + sheet + '</style>\n</svg>'
    with pytest.raises(InputRejected, match="unsupported construct " + words):
        parse_svg(code)
