"""The formats: what each parser reads into the scene, what the sanitisers strip, what is refused,
and that no output -- hostile, truncated or random -- makes the verifier raise or run anything."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from environments.prograf.check.render import Renderer
from environments.prograf.check.verify import verify
from environments.prograf.generate.build import CORPUS
from environments.prograf.parse.dot import parse_dot
from environments.prograf.parse.mermaid import parse_mermaid
from environments.prograf.parse.scene import InputRejected
from environments.prograf.parse.schematic import parse_schemdraw_json
from environments.prograf.parse.schematic_source import parse_schemdraw_source
from environments.prograf.parse.svg import parse_svg
from environments.prograf.parse.svg_graph import extract_graph
from environments.prograf.task import load_tasks

SVG_HEAD = '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 200 200">'


@pytest.fixture(scope="module")
def tasks():
    return {t.id: t for t in load_tasks(CORPUS)}


# ---------------------------------------------------------------------- DOT
def test_dot_reads_defaults_chains_clusters_ports_and_directions():
    scene = parse_dot('''
        /* comment */ digraph "G" {
          node [shape=box]; // default for what follows
          a [label="Start" shape=ellipse]; b -> c -> d [label=<<b>go</b>>];
          subgraph cluster_x { label="Group " + "X"; c; d:p1:n; }
          e [style=invis]; a -> e; d -> a [dir=back]; x [label="\\N\\nline"]; y -> z [dir=none]
        }''')
    nodes = {n.key: n for n in scene.nodes}
    assert nodes["a"].shape == "ellipse" and nodes["b"].shape == "box" and "e" not in nodes
    assert nodes["x"].label == "x line"
    edges = {(e.src, e.dst): e for e in scene.edges}
    assert edges[("b", "c")].label == "go" and edges[("c", "d")].label == "go"
    assert ("a", "d") in edges and ("d", "a") not in edges  # dir=back
    assert not edges[("y", "z")].directed
    assert scene.clusters[0].label == "Group X" and scene.clusters[0].members == {"c", "d"}
    assert nodes["c"].cluster == "cluster_x" and scene.hidden == 2  # e and the edge to it


def test_dot_drops_file_reading_attributes_and_refuses_bad_input():
    scene = parse_dot('digraph { a [image="/etc/passwd", shapefile="x.ps", fontpath="/", URL="http://x"];'
                      ' b [label=<<IMG SRC="/etc/passwd"/>text>]; a -> b }')
    assert {"dropped attribute image", "dropped attribute shapefile", "dropped attribute fontpath",
            "dropped attribute url", "dropped an <IMG> from an HTML label"} <= set(scene.notes)
    assert scene.nodes[1].label == "text"
    for bad, words in [("digraph { a -> }", "expected a name"), ("diagram { }", "starts with graph or digraph"),
                       ("digraph { a [label=<x }", "HTML label is not closed"), ("digraph { " + "{" * 60 + "}" * 60 + "}", "nested"),
                       ("x" * 100_001, "characters")]:
        with pytest.raises(InputRejected, match=words):
            parse_dot(bad)


# ---------------------------------------------------------------------- Mermaid
def test_mermaid_subset():
    scene = parse_mermaid('''flowchart LR
      %% a comment
      A(["Start"]) --> B[/"Read n"/]
      B --> C{"n > 0?"}
      C -->|yes| D["Print n"] & E((done))
      C -- no --> F[(store)]; F --- A
      subgraph g1 ["Group one"]
        D
      end
      click A "javascript:alert(1)"
      style A fill:#f9f
      A ~~~ F''')
    nodes = {n.key: n for n in scene.nodes}
    assert [nodes[k].shape for k in "ABCDEF"] == ["stadium", "parallelogram", "diamond", "box", "circle", "cylinder"]
    assert nodes["C"].label == "n > 0?"
    edges = {(e.src, e.dst): e for e in scene.edges}
    assert edges[("C", "D")].label == "yes" and edges[("C", "E")].label == "yes" and edges[("C", "F")].label == "no"
    assert not edges[("F", "A")].directed and ("A", "F") not in edges and scene.hidden == 1
    assert scene.clusters[0].label == "Group one" and nodes["D"].cluster == "g1"
    assert scene.notes == ["dropped a click directive"]
    for bad, words in [("graph XY\nA-->B", "first line"), ("flowchart TD\nsubgraph a\nA", "no 'end'"),
                       ("flowchart TD\nend", "without a subgraph"), ("flowchart TD\nA --> ", "expected a node")]:
        with pytest.raises(InputRejected, match=words):
            parse_mermaid(bad)


# ---------------------------------------------------------------------- SVG
def test_svg_transforms_styles_and_visibility():
    scene = parse_svg(SVG_HEAD + '''<style>.edge { stroke: black } .ghost { display: none }</style>
        <g transform="translate(10,20) scale(2)"><line class="edge" x1="0" y1="0" x2="10" y2="0"/></g>
        <line x1="0" y1="0" x2="50" y2="50"/>
        <line class="ghost" x1="0" y1="0" x2="50" y2="50" stroke="red"/>
        <line x1="300" y1="300" x2="400" y2="400" stroke="black"/>
        <circle cx="100" cy="100" r="30" stroke="black" fill="none" opacity="0"/>
        <path d="M 10 150 l 20 0 l 0 20 z" stroke="black" fill="none"/>
        <text x="100" y="190" text-anchor="middle">Hi <tspan>there</tspan></text></svg>''')
    first = scene.segments[0]
    assert (first.x1, first.y1, first.x2, first.y2) == (10, 20, 30, 20)
    assert len(scene.segments) == 4  # the transformed line and the path's triangle (three sides)
    assert scene.hidden == 4  # no stroke, display:none, outside the canvas, opacity 0
    assert scene.texts[0].text == "Hi there" and scene.shapes[0].family == "triangle"


def test_svg_graph_reads_arrows_by_markers_and_by_drawn_heads():
    scene = parse_svg('<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 600 300">'
                      '<defs><marker id="m"><path d="M0,0 L10,5 L0,10 z"/></marker></defs>'
                      '<g stroke="black" fill="none"><rect x="20" y="20" width="120" height="40"/>'
                      '<polygon points="300,10 360,40 300,70 240,40"/>'
                      '<rect x="420" y="20" width="120" height="40" rx="10"/>'
                      '<rect x="400" y="150" width="160" height="120"/><ellipse cx="480" cy="220" rx="50" ry="25"/>'
                      '<line x1="140" y1="40" x2="236" y2="40" marker-end="url(#m)"/>'
                      '<polyline points="360,40 390,40 390,41 416,41"/>'
                      '<line x1="480" y1="60" x2="480" y2="190"/></g>'
                      '<polygon points="480,195 475,185 485,185" fill="black"/>'
                      '<g font-size="14" text-anchor="middle"><text x="80" y="45">One</text><text x="300" y="45">Two?</text>'
                      '<text x="480" y="45">Three</text><text x="480" y="225">Four</text><text x="480" y="170">Box</text>'
                      '<text x="190" y="30">yes</text></g></svg>')
    extract_graph(scene)
    by_label = {n.label: n for n in scene.nodes}
    assert {n: by_label[n].shape for n in ("One", "Two?", "Three", "Four")} == {
        "One": "box", "Two?": "diamond", "Three": "rounded", "Four": "ellipse"}
    edges = {(by_key.label, to.label): e for e in scene.edges
             for by_key in scene.nodes if by_key.key == e.src for to in scene.nodes if to.key == e.dst}
    assert edges[("One", "Two?")].label == "yes" and edges[("One", "Two?")].directed
    assert not edges[("Two?", "Three")].directed  # two pieces joined in free space, no head
    assert edges[("Three", "Four")].directed  # a drawn triangle at its end
    assert scene.clusters[0].label == "Box" and by_label["Four"].cluster == scene.clusters[0].key


def test_svg_sanitiser_strips_and_refuses(tasks):
    scene = parse_svg(SVG_HEAD + '<script>alert(1)</script><foreignObject><div/></foreignObject>'
                      '<image href="http://x/y.png"/><a href="javascript:alert(1)"><line x1="0" y1="0" x2="9" y2="9" '
                      'stroke="black" onclick="alert(1)"/></a><use href="file:///etc/passwd"/>'
                      '<rect width="10" height="10" style="fill:url(http://evil/x)"/></svg>')
    assert {"stripped <script>", "stripped <foreignObject>", "stripped <image>", "stripped event handler onclick",
            "stripped an external href", "stripped attribute style with an external reference"} <= set(scene.notes)
    for bad, words in [('<?xml version="1.0"?><!DOCTYPE svg [<!ENTITY a "aaaa">]><svg>&a;</svg>', "refused"),
                       ('<svg><g></svg>', "does not parse"), ("<html/>", "not <svg>"), ("<svg>" + " " * 200_001 + "</svg>", "characters"),
                       ("<svg>" + "<g/>" * 5001 + "</svg>", "elements")]:
        with pytest.raises(InputRejected, match=words):
            parse_svg(bad)
    task = next(t for t in tasks.values() if t.category == "geometry")
    verdict = verify(task, "svg", '<!DOCTYPE svg [<!ENTITY x SYSTEM "file:///etc/passwd">]><svg>&x;</svg>')
    assert verdict.error and all(p.pattern == "rejected_input" and not p.passed for p in verdict.points)


# ---------------------------------------------------------------------- schemdraw
def test_schemdraw_json_follows_the_cursor_and_joins_at_t_junctions():
    scene = parse_schemdraw_json('{"elements": ['
                                 '{"type": "SourceV", "label": "V1 9V", "d": "up"},'
                                 '{"type": "Resistor", "label": "R1", "value": "1kΩ", "d": "right"},'
                                 '{"type": "Capacitor", "label": "C1 10µF", "d": "down"},'
                                 '{"type": "Line", "to": [0, 0]},'
                                 '{"type": "Resistor", "label": "R2", "at": [1.5, 3], "to": [1.5, 1.5]},'
                                 '{"type": "Line", "to": [1.5, 0]}, {"type": "Ground", "at": "C1.end"},'
                                 '{"type": "Resistor", "label": "R3", "at": [-1, -5], "to": [5, -5]}]}')
    parts = {c.label: c for c in scene.components}
    assert parts["V1"].value == "9V" and parts["R1"].value == "1kΩ" and parts["C1"].value == "10µF"
    assert parts["V1"].nets[1] == parts["R1"].nets[0] and parts["R1"].nets[1] == parts["C1"].nets[0]
    assert parts["C1"].nets[1] == parts["V1"].nets[0]  # the wire back to (0, 0)
    assert parts["R2"].nets[1] == parts["V1"].nets[0]  # its wire ends on the bottom wire's interior: a T junction
    assert parts["R2"].nets[0] not in {n for p in ("V1", "R1", "C1") for n in parts[p].nets}  # on R1's body: not joined
    assert parts["C1"].nets[1] in scene.ground_nets
    assert not set(parts["R3"].nets) & {n for p in ("V1", "R1", "C1", "R2") for n in parts[p].nets}  # crossing, not joined
    for bad, words in [('{"elements": [{"type": "Resistor", "at": "X9.end"}]}', "names no earlier element"),
                       ('{"elements": [{"type": "Resistor", "at": [1e9, 0]}]}', "within 10000"),
                       ('{"elements": [{"label": "R1"}]}', "with a 'type'"), ("[1, 2", "does not parse"),
                       ('{"elements": [{"type": "Resistor", "d": "sideways"}]}', "right, left, up, down")]:
        with pytest.raises(InputRejected, match=words):
            parse_schemdraw_json(bad)


def test_schemdraw_source_is_read_through_an_allow_list_and_never_run(tmp_path):
    scene = parse_schemdraw_source('''import schemdraw
import schemdraw.elements as elm
with schemdraw.Drawing(file="ignored.svg") as d:
    V1 = d.add(elm.SourceV().up().label("V1 9V"))
    d += elm.Resistor().right().label("R1").label("1kΩ")
    R2 = elm.Resistor().down(3).label("R2 2kΩ")
    d += R2
    d += elm.Line().to(V1.start)
    d.save("x.svg")
''')
    parts = {c.label: c for c in scene.components}
    assert parts["R1"].value == "1kΩ" and parts["R2"].nets[1] == parts["V1"].nets[0]
    marker = tmp_path / "pwned"
    for bad, words in [(f"import os\nos.system('touch {marker}')", "import os"),
                       (f"import schemdraw\n__import__('os').system('touch {marker}')", "line 2: Expr statement"),
                       ("import schemdraw.elements as elm\nimport schemdraw\nwith schemdraw.Drawing() as d:\n"
                        f"    d += elm.Resistor().label(open('{marker}', 'w'))", "not a literal"),
                       ("import schemdraw\nexec('1')", "Expr statement"), ("def f():\n    pass", "FunctionDef"),
                       ("import schemdraw.elements as elm\nimport schemdraw\nwith schemdraw.Drawing() as d:\n"
                        "    d += elm.Resistor().__class__()", "an element is"), ("x = (", "does not parse")]:
        with pytest.raises(InputRejected, match=words):
            parse_schemdraw_source(bad)
    assert not marker.exists()


# ---------------------------------------------------------------------- the verifier never raises
def test_random_and_truncated_outputs_are_recorded_failures_never_exceptions(tasks):
    rng = random.Random(0)
    chosen = [tasks[i] for i in ("geometry-000", "circuit-000", "flowchart-000", "diagram-000", "circuit-hw06")]
    for task in chosen:
        for ref in task.reference:
            for _ in range(40):
                code = ref.code
                cut = rng.randrange(len(code))
                choice = rng.random()
                if choice < 0.4:
                    code = code[:cut]
                elif choice < 0.8:
                    code = code[:cut] + rng.choice(["<", "{", "}", "]", '"', "&", "\x00", "->", "(", "\\"]) + code[cut:]
                else:
                    code = "".join(rng.choice("<>{}[]()\"'=;:,.-&#/\\ abcAB01\n") for _ in range(rng.randrange(1, 200)))
                verdict = verify(task, ref.format, code)
                assert len(verdict.points) == len(task.points)
                if verdict.error:
                    assert all(p.pattern in ("rejected_input", "render_error") for p in verdict.points)
    verdict = verify(chosen[0], "dot", "digraph {}")
    assert verdict.error and "not allowed" in verdict.error


# ---------------------------------------------------------------------- the renderer
def test_renders_are_cached_and_a_hung_or_starved_renderer_is_a_render_error(tasks, tmp_path, monkeypatch):
    task = tasks["geometry-000"]
    renderer = Renderer(timeout_s=10, disk_cache=tmp_path)
    try:
        first = verify(task, "svg", task.reference[0].code, renderer)
        second = verify(task, "svg", task.reference[0].code, renderer)
        assert first.passed and second.passed and first.rendered
        assert renderer.stats.renders == 1 and renderer.stats.cache_hits == 1 and list(tmp_path.glob("*/*.png"))
        white = next(m for m in task.mutants if m.needs_render)
        assert verify(task, "svg", white.code).passed  # structurally it is all there ...
        assert not next(p for p in verify(task, "svg", white.code, renderer).points if p.id == white.target).passed
    finally:
        renderer.close()
    hung = Renderer(timeout_s=1)
    monkeypatch.setattr(hung, "_worker", lambda: _sleeper(hung))
    try:
        verdict = verify(task, "svg", task.reference[0].code.replace("400", "401"), hung)
        assert verdict.error == "render failed: killed after 1 s" and verdict.points[0].pattern == "render_error"
    finally:
        hung.close()
    monkeypatch.setenv("PROGRAF_RENDER_MEMORY", str(8 << 20))  # too little for a render: the worker dies
    starved = Renderer(timeout_s=20)
    try:
        verdict = verify(task, "svg", task.reference[0].code.replace("400", "402"), starved)
        assert verdict.points[0].pattern == "render_error" and "died" in (verdict.error or "")
    finally:
        starved.close()


def _sleeper(renderer: Renderer):
    import subprocess
    import sys

    if renderer._proc is None:
        renderer._proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                                          stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    return renderer._proc


def test_no_file_was_written_by_any_payload():
    assert not Path("/tmp/prograf-pwned").exists() and not os.path.exists("x.svg")
