"""The circuit reader (`image_circuit`): a schematic drawn by the project's own render path
(schemdraw JSON -> `pictures.drawing_of` -> resvg) read back from pixels -- parts, the names and
values bound to them, the nets their terminals sit on, the ground -- and the circuit checks'
pass / fail / undecided on it. The text is given where the SVG writes it (no OCR runs), so only
the pixel reading is under test."""

from __future__ import annotations

import random
import re

import numpy as np
import pytest

from environments.prograf.generate.builders import circuit_task
from environments.prograf.generate.emit import CircuitPart
from environments.prograf.image.circuit import (CHECK_TYPES, PixelCircuit, PixPart, c_netlist, c_value, read_circuit,
                                               split_text, task_names, unsure_names)
from environments.prograf.image.ocr import TextLine
from environments.prograf.image.pictures import drawing_of
from environments.prograf.image.png import decode_png
from environments.prograf.image.verify import ENABLED, Pixels, Undecidable, decide, vocabulary

cv2 = pytest.importorskip("cv2")
SCALE = 2
PARTS = [
    CircuitPart("V1", "voltage_source", "9V", ("n0", "n1")),
    CircuitPart("R1", "resistor", "1kΩ", ("n1", "n2")),
    CircuitPart("C1", "capacitor", "10µF", ("n2", "n0")),
    CircuitPart("L1", "inductor", "1mH", ("n2", "n0")),
]
TEXT = re.compile(r'<text x="([-\d.]+)" y="([-\d.]+)">([^<]*)</text>')
ALL = frozenset(CHECK_TYPES.values())


@pytest.fixture(scope="module")
def task():
    return circuit_task("circuit-t", "generated", PARTS, "n0", "a test circuit", random.Random(3))


def _picture(code: str, renderer, fmt: str = "schemdraw-json") -> tuple[np.ndarray, list[TextLine]]:
    """The PNG our render path draws of schemdraw code, and its labels as OCR would box them
    (where the SVG writes them: 14-unit sans, centred)."""
    drawing = drawing_of(fmt, code, "circuit")
    img = decode_png(renderer.png(drawing.svg, drawing.width * SCALE, drawing.height * SCALE))
    k = img.shape[1] / (drawing.canvas[2] - drawing.canvas[0])  # pixels per SVG unit
    lines = []
    for x, y, text in TEXT.findall(drawing.svg):
        cx, base, half = float(x) * k, float(y) * k, 0.3 * 14 * len(text) * k
        lines.append(TextLine(text, (cx - half, base - 12 * k, cx + half, base + 4 * k), 0.9))
    return img, lines


@pytest.fixture(scope="module")
def reference(task, renderer):
    """The reference drawn once for the tests that read it."""
    return _picture(task.reference[0].code, renderer)


def _pixels(img: np.ndarray, lines: list[TextLine], task) -> Pixels:
    px = Pixels(img)
    px.__dict__["lines"] = lines  # the text given: no OCR
    px.labels = vocabulary(task.spec)
    return px


def test_a_drawn_circuit_is_read_back(task, reference):
    img, lines = reference
    circ = read_circuit(img, lines, task.spec, vocabulary(task.spec))
    by = {p.name: p for p in circ.parts}
    assert sorted(by) == ["C1", "L1", "R1", "V1"]
    assert {n: by[n].value for n in by} == {"V1": "9V", "R1": "1kΩ", "C1": "10µF", "L1": "1mH"}
    assert None not in {n for p in circ.parts for n in p.nets}
    v1, r1, c1, l1 = (set(by[n].nets) for n in ("V1", "R1", "C1", "L1"))
    assert len(v1 & r1) == 1 and c1 == l1 and len(c1) == 2  # V1-R1 in series, C1 || L1
    assert len(r1 & c1) == 1 and v1 & c1 and (v1 & c1) != (v1 & r1)
    assert circ.ground_nets == v1 & c1  # the ground symbol on the node back to V1
    assert not circ.orphans and not circ.uncertain


def test_the_reference_passes_every_decided_point(task, reference):
    px = _pixels(*reference, task)
    got = {vp.check: decide(px, task, vp, ALL).status for vp in task.points}
    assert {got[c] for c in ("component", "value", "connected", "series", "parallel_parts", "grounded")} == {"pass"}
    assert {got[c] for c in ("topology", "no_short", "no_open", "component_count")} == {"pass"}
    assert got["kind_count"] == "undecided"  # a part's kind is never read from its box


@pytest.mark.parametrize(
    "fault",
    [
        "labelled with a wrong value",
        "disconnected from",
        "moved in parallel",
        "moved off",
        "ground symbol left out",
        "left open",
        "drawn without its name",
    ],
)
def test_each_fault_fails_its_target_point(task, renderer, fault):
    mutant = next(m for m in task.mutants if fault in (m.fault or ""))
    px = _pixels(*_picture(mutant.code, renderer, mutant.format), task)
    target = next(vp for vp in task.points if vp.id == mutant.target)
    assert decide(px, task, target, ALL).status == "fail", fault


def test_a_crossing_without_a_dot_leaves_its_nets_undecided(task):
    img = np.full((300, 500, 3), 255, np.uint8)
    black = (0, 0, 0)
    for x0, x1 in ((20, 120), (200, 300)):  # two parts on the row y = 100, a wire between them
        cv2.rectangle(img, (x0 + 30, 90), (x1 - 30, 110), black, 2)
    cv2.line(img, (20, 100), (50, 100), black, 2)
    cv2.line(img, (90, 100), (230, 100), black, 2)
    cv2.line(img, (270, 100), (300, 100), black, 2)
    cv2.line(img, (160, 30), (160, 200), black, 2)  # a wire crossing the one between them
    lines = [TextLine("R1 1kΩ", (40, 115, 100, 130), 0.9), TextLine("C1 10µF", (220, 115, 280, 130), 0.9)]
    circ = read_circuit(img, lines, task.spec, vocabulary(task.spec))
    assert sorted(p.name or "" for p in circ.parts) == ["C1", "R1"]
    shared = set(circ.parts[0].nets) & set(circ.parts[1].nets)
    assert shared and shared <= circ.uncertain
    cv2.circle(img, (160, 100), 10, black, -1)  # a junction dot: joined as drawn
    circ = read_circuit(img, lines, task.spec, vocabulary(task.spec))
    assert not circ.uncertain


def test_a_reading_short_of_the_whole_netlist_is_undecided(task):
    part = PixPart((0, 0, 60, 20), True, ((-4, 10), (64, 10)), "R1 1kΩ", "R1", "1kΩ", (1, 2))
    vp = next(vp for vp in task.points if vp.check == "topology")
    with pytest.raises(Undecidable, match="written where no part"):
        c_netlist(PixelCircuit([part], orphans=["C1"]), vp, task.spec)
    with pytest.raises(Undecidable, match="not read on a wire"):
        c_netlist(PixelCircuit([PixPart(part.box, True, part.ends, "R1", "R1", "", (1, None))]), vp, task.spec)
    value = next(vp for vp in task.points if vp.check == "value" and vp.args == ["R1"])
    misread = PixPart(part.box, True, part.ends, "R1 1kQ", "R1", "1kQ", (1, 2))
    assert c_value(PixelCircuit([misread]), value, task.spec).passed  # Ω read as Q: the same value
    near = PixPart(part.box, True, part.ends, "R1 7kΩ", "R1", "7kΩ", (1, 2))
    with pytest.raises(Undecidable, match="too like"):
        c_value(PixelCircuit([near]), value, task.spec)


def test_circuit_types_are_refused_unless_enabled(task, reference):
    # every circuit type is enabled now (session 29), so each is refused under an empty enabled set
    px = _pixels(*reference, task)
    refused = set()
    for vp in task.points:
        kind = CHECK_TYPES.get(vp.check)
        if kind:
            got = decide(px, task, vp, frozenset())
            assert got.status == "undecided" and "disabled by calibration" in got.reason
            refused.add(kind)
    assert refused and refused <= ENABLED


def test_ocr_folds_of_i1_and_l1_name_a_part_only_when_the_drawing_has_one_of_them():
    # OCR reads I1 as "l1" or "11" and L1 as "I1": folded to the drawing's one name of that spelling
    one = task_names(["V1", "I1", "R1"])
    assert split_text("l1 5mA", one, frozenset()) == ("I1", "5mA")
    assert split_text("11 5mA", one, frozenset()) == ("I1", "5mA")
    assert split_text("I1 1mH", task_names(["V1", "L1"]), frozenset()) == ("L1", "1mH")
    # with both, a word of that spelling names neither: unnamed, and not a value only
    both = task_names(["V1", "I1", "L1"])
    assert split_text("I1 5mA", both, frozenset()) == (None, "I1 5mA")
    assert split_text("L1 1mH", both, frozenset()) == (None, "L1 1mH")
    assert split_text("V1 9V", both, frozenset()) == ("V1", "9V")
    assert unsure_names("l1", both) == ["I1", "L1"] and unsure_names("V1 9V", both) == []


def test_a_drawing_with_both_i1_and_l1_leaves_their_points_undecided(renderer):
    parts = [CircuitPart("V1", "voltage_source", "9V", ("n0", "n1")),
             CircuitPart("I1", "current_source", "5mA", ("n1", "n2")),
             CircuitPart("L1", "inductor", "1mH", ("n2", "n0"))]
    both = circuit_task("circuit-il", "generated", parts, "n0", "a test circuit", random.Random(3))
    img, lines = _picture(both.reference[0].code, renderer)
    circ = read_circuit(img, lines, both.spec, vocabulary(both.spec))
    assert sorted(p.name or "-" for p in circ.parts) == ["-", "-", "V1"]  # not I1's part read as a second L1
    px = _pixels(img, lines, both)
    got = {vp.id: decide(px, both, vp, ALL).status for vp in both.points}
    netlist = [vp.id for vp in both.points if vp.check == "topology"]
    named = [vp.id for vp in both.points if vp.check == "component" and vp.args[0] in ("I1", "L1")]
    assert netlist and named and {got[i] for i in netlist + named} == {"undecided"}
    assert "fail" not in got.values()  # the reference: nothing it draws fails


VERTICAL = """{"elements": [
 {"type": "SourceV", "d": "up", "label": "V1 9V"}, {"type": "Resistor", "d": "right", "label": "R1 1kΩ"},
 {"type": "Capacitor", "d": "down", "label": "C1 10µF"}, {"type": "Line", "at": [3, 3], "to": [6, 3]},
 {"type": "Inductor", "d": "down", "label": "L1 1mH"}, {"type": "Line", "d": "left", "to": [0, 0]},
 {"type": "Ground", "at": [0, 0]}]}"""


def test_a_name_lost_where_a_vertical_parts_outline_crosses_its_label_is_undecided(task, renderer):
    # C1 and L1 are drawn downwards: our renderer writes their labels beside them, across the outline
    img, lines = _picture(VERTICAL, renderer)
    circ = read_circuit(img, lines, task.spec, vocabulary(task.spec))
    by = {p.name: p for p in circ.parts}
    assert sorted(by) == ["C1", "L1", "R1", "V1"] and by["C1"].crossed and not by["R1"].crossed
    c1 = next(vp for vp in task.points if vp.check == "component" and vp.args[0] == "C1")
    assert decide(_pixels(img, lines, task), task, c1, ALL).status == "pass"
    # OCR read only the value where the outline runs through the label: C1's name is not known lost
    lost = [TextLine("10µF", (t.box[0] + 0.45 * (t.box[2] - t.box[0]), *t.box[1:]), t.score) if t.text == "C1 10µF"
            else t for t in lines]
    assert decide(_pixels(img, lost, task), task, c1, ALL).status == "undecided"


def _rail(thick: int, merged_bars: bool) -> tuple[np.ndarray, list[TextLine]]:
    """R1 and C1 on one row, a wire from C1 down to a ground symbol: three bars, or (thick strokes,
    a blurred render) one blob they run into."""
    img = np.full((320, 560, 3), 255, np.uint8)
    black = (0, 0, 0)
    for x0 in (60, 300):
        cv2.rectangle(img, (x0, 85), (x0 + 100, 115), black, thick)
    for a, b in (((20, 100), (60, 100)), ((160, 100), (300, 100)), ((400, 100), (450, 100)), ((450, 100), (450, 200))):
        cv2.line(img, a, b, black, thick)
    if merged_bars:
        cv2.fillPoly(img, [np.array([(428, 197), (472, 197), (458, 218), (442, 218)], np.int32)], black)
    else:
        for k, half in enumerate((20, 13, 6)):
            cv2.line(img, (450 - half, 200 + 7 * k), (450 + half, 200 + 7 * k), black, thick)
    lines = [TextLine("R1 1kΩ", (80, 125, 140, 142), 0.9), TextLine("C1 10µF", (320, 125, 385, 142), 0.9)]
    return img, lines


@pytest.mark.parametrize(("thick", "merged"), [(2, False), (2, True), (5, True)])
def test_a_ground_symbol_is_read_whether_its_bars_stand_apart_or_run_together(task, thick, merged):
    circ = read_circuit(*_rail(thick, merged), task.spec, vocabulary(task.spec))
    by = {p.name: p for p in circ.parts}
    assert sorted(by) == ["C1", "R1"] and circ.grounds == 1 and not circ.stray  # the lower bars are no more grounds
    assert circ.ground_nets == {by["C1"].nets[1]} and by["C1"].nets[1] not in by["R1"].nets


def test_a_wire_corner_or_a_loose_end_is_no_ground(task):
    img, lines = _rail(2, False)
    img[190:260, 400:520] = 255  # the symbol taken away: a wire turning down, ending in nothing
    circ = read_circuit(img, lines, task.spec, vocabulary(task.spec))
    assert circ.grounds == 0 and not circ.ground_nets


def test_a_value_within_a_names_room_of_a_vertical_part_leaves_the_name_undecided(task, renderer):
    img, lines = _picture(VERTICAL, renderer)
    c1 = next(p for p in read_circuit(img, lines, task.spec, vocabulary(task.spec)).parts if p.name == "C1")
    x, y, w, h = c1.box
    point = next(vp for vp in task.points if vp.check == "component" and vp.args[0] == "C1")

    def with_c1_text(x0: float) -> str:  # C1's label read as its value alone, starting at x0, across C1's row
        given = [t for t in lines if not t.text.startswith("C1")]
        given.append(TextLine("10µF", (x0, y + 0.75 * h - 9, x0 + 45, y + 0.75 * h + 9), 0.9))  # off L1's row
        return decide(_pixels(img, given, task), task, point, ALL).status

    assert with_c1_text(x + w + 12) == "undecided"  # clear of the outline, but room for "C1" between
    assert with_c1_text(x + w + 60) == "fail"  # too far for a name lost under the outline: named otherwise


def test_a_label_left_by_no_part_leaves_the_name_and_the_count_undecided(task, renderer):
    shorted = next(m for m in task.mutants if "C1 shorted" in (m.fault or ""))
    img, lines = _picture(shorted.code, renderer, shorted.format)
    circ = read_circuit(img, lines, task.spec, vocabulary(task.spec))
    assert "C1" not in {p.name for p in circ.parts}  # its box is drawn too short to read as a part
    points = [vp for vp in task.points if vp.check == "component_count" or vp.args == ["C1"] and vp.check == "component"]
    misread = [TextLine("cl10]", t.box, t.score) if t.text.startswith("C1") else t for t in lines]
    assert {decide(_pixels(img, misread, task), task, vp, ALL).status for vp in points} == {"undecided"}
    gone = [t for t in lines if not t.text.startswith("C1")]  # no text there at all: the name is missing
    assert decide(_pixels(img, gone, task), task, points[0], ALL).status == "fail"


def test_a_value_read_from_two_labels_run_together_is_undecided(task):
    img = np.full((320, 420, 3), 255, np.uint8)
    black = (0, 0, 0)
    for x0 in (60, 300):  # two vertical parts, their labels written between them
        cv2.rectangle(img, (x0, 110), (x0 + 30, 210), black, 2)
        cv2.line(img, (x0 + 15, 40), (x0 + 15, 110), black, 2)
        cv2.line(img, (x0 + 15, 210), (x0 + 15, 280), black, 2)
    cv2.line(img, (75, 40), (315, 40), black, 2)
    cv2.line(img, (75, 280), (315, 280), black, 2)
    value = next(vp for vp in task.points if vp.check == "value" and vp.args == ["R1"])
    apart = [TextLine("R1 47Ω", (100, 150, 170, 170), 0.9), TextLine("C1 10µF", (230, 150, 290, 170), 0.9)]
    assert decide(_pixels(img, apart, task), task, value, ALL).status == "fail"  # 47Ω is not 1kΩ
    run = [TextLine("R1 47ΩC1 10µF", (92, 150, 298, 170), 0.9)]  # one line across both
    assert decide(_pixels(img, run, task), task, value, ALL).status == "undecided"
