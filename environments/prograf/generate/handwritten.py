"""The hand-written, textbook-style tasks: 16 per category, written out here (no randomness but
the choice of which point a mutant drops, seeded by the task's id).

Geometry figures state classic facts (Thales, the inscribed angle, the midsegment, tangents);
circuits are the classic teaching circuits (divider, RC filter, bridge, rectifier, pi and T
networks); flowcharts are classic algorithms (Euclid, leap year, factorial, search); diagrams are
classic school and engineering pictures (MVC, TCP states, the water cycle, a neural network).
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

from environments.prograf.generate.builders import GeoFigure, circuit_task, geometry_task, graph_task
from environments.prograf.generate.emit import CircuitPart, EdgeRow, GraphDrawing, NodeRow
from environments.prograf.task import Task

XY = tuple[float, float]


def P(r: float, deg: float, c: XY = (0.0, 0.0)) -> XY:
    return (c[0] + r * math.cos(math.radians(deg)), c[1] + r * math.sin(math.radians(deg)))


def M(a: XY, b: XY) -> XY:
    return ((a[0] + b[0]) / 2, (a[1] + b[1]) / 2)


Fact = tuple[str, str, str] | tuple[str, str, str, float]  # (check, 'ARGS', text[, value])


def fig(points: dict[str, XY], segments: str, sentences: list[str], facts: Sequence[Fact], circles: str = "",
        lengths: dict[str, str] | None = None, forbidden: str = "") -> GeoFigure:
    """`segments` as 'AB BC CA', `circles` as 'OA' (centre, through), facts as (check, 'ARGS', text[, value])."""
    f = GeoFigure()
    for name, xy in points.items():
        f.point(name, xy)
    for s in segments.split():
        f.seg(s[0], s[1])
    f.circles = [(c[0], c[1]) for c in circles.split()]
    for fact in facts:
        f.fact(fact[0], list(fact[1]), fact[2], fact[3] if len(fact) > 3 else None)
    f.sentences = sentences
    f.length_labels = lengths or {}
    f.forbidden = [(s[0], s[1]) for s in forbidden.split()]
    return f


def geometry_figures() -> list[GeoFigure]:
    o = (0.0, 0.0)
    a, b, c = P(5, 180), P(5, 0), P(5, 115)
    thales = fig({"A": a, "B": b, "C": c, "O": o}, "AB AC BC",
                 ["Draw a circle with centre O and diameter AB.", "Pick a point C on the circle and draw triangle ABC."],
                 [("midpoint", "OAB", "O is the midpoint of AB"), ("on_circle", "CO", "C lies on the circle"),
                  ("angle", "ACB", "angle ACB is 90° (Thales)", 90.0)], circles="OA")
    a, b, c = (0.0, 0.0), (8.0, 0.0), (8 * 0.36, 8 * 0.48)
    h = (c[0], 0.0)
    altitude = fig({"A": a, "B": b, "C": c, "H": h}, "AB BC CA CH",
                   ["Draw a right triangle ABC with the right angle at C.",
                    "Draw the altitude from C to the hypotenuse AB, with foot H."],
                   [("angle", "ACB", "angle ACB is 90°", 90.0), ("perpendicular", "CHAB", "CH ⟂ AB"),
                    ("on_segment", "HAB", "H lies on AB")])
    sq = {"A": (0.0, 0.0), "B": (6.0, 0.0), "C": (6.0, 6.0), "D": (0.0, 6.0), "O": (3.0, 3.0)}
    square = fig(sq, "AB BC CD DA AC BD", ["Draw square ABCD and both its diagonals, which meet at O."],
                 [("angle", "DAB", "angle DAB is 90°", 90.0), ("equal_length", "ABBC", "AB = BC"),
                  ("midpoint", "OAC", "O is the midpoint of AC"), ("midpoint", "OBD", "O is the midpoint of BD"),
                  ("perpendicular", "ACBD", "AC ⟂ BD")])
    pg = {"A": (0.0, 0.0), "B": (7.0, 0.0), "C": (9.0, 4.0), "D": (2.0, 4.0)}
    pg["O"] = M(pg["A"], pg["C"])
    parallelogram = fig(pg, "AB BC CD DA AC BD",
                        ["Draw parallelogram ABCD.", "Draw its diagonals AC and BD; they meet at O."],
                        [("parallel", "ABDC", "AB ∥ DC"), ("parallel", "ADBC", "AD ∥ BC"),
                         ("midpoint", "OAC", "O is the midpoint of AC"), ("midpoint", "OBD", "O is the midpoint of BD")])
    iso = {"A": (0.0, 6.0), "B": (-3.5, 0.0), "C": (3.5, 0.0), "M": (0.0, 0.0)}
    isosceles = fig(iso, "AB BC CA AM", ["Draw an isosceles triangle ABC with AB = AC.",
                                          "Draw the median from A to BC, meeting BC at M."],
                    [("equal_length", "ABAC", "AB = AC"), ("midpoint", "MBC", "M is the midpoint of BC"),
                     ("perpendicular", "AMBC", "AM ⟂ BC (the median is also the altitude)")])
    p = P(4, 60)
    t = (p[0] + 4 * math.cos(math.radians(150)), p[1] + 4 * math.sin(math.radians(150)))
    tangent = fig({"O": o, "P": p, "T": t}, "OP PT", ["Draw a circle with centre O and a point P on it.",
                                                      "Draw the radius OP and the tangent segment PT at P."],
                  [("perpendicular", "OPPT", "OP ⟂ PT")], circles="OP")
    a, b, c = P(5, 200), P(5, 300), P(5, 100)
    inscribed = fig({"O": o, "A": a, "B": b, "C": c}, "OA OB CA CB",
                    ["Draw a circle with centre O and points A, B and C on it so that angle AOB is 100°,"
                     " with C on the major arc.", "Draw OA, OB, CA and CB."],
                    [("on_circle", "BO", "B lies on the circle"), ("on_circle", "CO", "C lies on the circle"),
                     ("angle", "AOB", "angle AOB is 100°", 100.0),
                     ("angle", "ACB", "angle ACB is 50° (half the central angle)", 50.0)], circles="OA")
    a, b, c = (0.0, 0.0), (8.0, 0.0), (2.5, 5.5)
    mid = fig({"A": c, "B": a, "C": b, "M": M(c, a), "N": M(c, b)}, "AB BC CA MN",
              ["Draw triangle ABC with BC = 8 cm.", "Let M and N be the midpoints of AB and AC; draw MN."],
              [("midpoint", "MAB", "M is the midpoint of AB"), ("midpoint", "NAC", "N is the midpoint of AC"),
               ("parallel", "MNBC", "MN ∥ BC"), ("equal_length", "MNMB", "MN = MB")][:3],
              lengths={"BC": "8 cm", "MN": "4 cm"})
    eq = {"A": (0.0, 0.0), "B": (8.0, 0.0), "C": (4.0, 8 * math.sqrt(3) / 2)}
    eq |= {"D": M(eq["B"], eq["C"]), "E": M(eq["A"], eq["C"]), "F": M(eq["A"], eq["B"])}
    eq["G"] = (4.0, 8 * math.sqrt(3) / 6)
    centroid = fig(eq, "AB BC CA AD BE CF", ["Draw an equilateral triangle ABC.",
                                              "Draw its three medians AD, BE and CF (D, E, F the midpoints of BC, CA, AB);"
                                              " they meet at G."],
                   [("equal_length", "ABBC", "AB = BC"), ("midpoint", "DBC", "D is the midpoint of BC"),
                    ("midpoint", "ECA", "E is the midpoint of CA"), ("midpoint", "FAB", "F is the midpoint of AB"),
                    ("on_segment", "GAD", "G lies on AD"), ("on_segment", "GBE", "G lies on BE")])
    rect = fig({"A": (0.0, 0.0), "B": (8.0, 0.0), "C": (8.0, 6.0), "D": (0.0, 6.0)}, "AB BC CD DA AC",
               ["Draw rectangle ABCD with AB = 8 cm and BC = 6 cm, and its diagonal AC = 10 cm.",
                "Draw only that one diagonal."],
               [("angle", "DAB", "angle DAB is 90°", 90.0), ("angle", "ABC", "angle ABC is 90°", 90.0)],
               lengths={"AB": "8 cm", "BC": "6 cm", "AC": "10 cm"}, forbidden="BD")
    a, b, c = (0.0, 0.0), (9.0, 0.0), (3.0, 6.0)
    ab, ac = math.dist(a, b), math.dist(a, c)
    d = (b[0] + ab / (ab + ac) * (c[0] - b[0]), b[1] + ab / (ab + ac) * (c[1] - b[1]))
    bisector = fig({"A": a, "B": b, "C": c, "D": d}, "AB BC CA AD",
                   ["Draw triangle ABC.", "Draw the bisector of angle BAC, meeting BC at D."],
                   [("equal_angle", "BADDAC", "angle BAD = angle DAC"), ("on_segment", "DBC", "D lies on BC")])
    tz = {"A": (0.0, 0.0), "B": (10.0, 0.0), "C": (7.0, 5.0), "D": (2.0, 5.0)}
    tz |= {"M": M(tz["A"], tz["D"]), "N": M(tz["B"], tz["C"])}
    trapezoid = fig(tz, "AB BC CD DA MN", ["Draw trapezoid ABCD with AB ∥ DC.",
                                           "Let M and N be the midpoints of AD and BC; draw the midline MN."],
                    [("parallel", "ABDC", "AB ∥ DC"), ("midpoint", "MAD", "M is the midpoint of AD"),
                     ("midpoint", "NBC", "N is the midpoint of BC"), ("parallel", "MNAB", "MN ∥ AB")])
    rh = {"A": (0.0, 0.0), "B": (5.0, 0.0), "C": (5 + 5 * math.cos(math.radians(55)), 5 * math.sin(math.radians(55))),
          "D": (5 * math.cos(math.radians(55)), 5 * math.sin(math.radians(55)))}
    rh["O"] = M(rh["A"], rh["C"])
    rhombus = fig(rh, "AB BC CD DA AC BD", ["Draw rhombus ABCD and its diagonals, meeting at O."],
                  [("equal_length", "ABBC", "AB = BC"), ("equal_length", "BCCD", "BC = CD"),
                   ("perpendicular", "ACBD", "AC ⟂ BD"), ("midpoint", "OAC", "O is the midpoint of AC")])
    a, b = P(5, 210), P(5, 330)
    chord = fig({"O": o, "A": a, "B": b, "M": M(a, b)}, "AB OM OA",
                ["Draw a circle with centre O and a chord AB.", "Draw the radius OA and the perpendicular from O to AB,"
                 " with foot M."],
                [("on_circle", "BO", "B lies on the circle"), ("perpendicular", "OMAB", "OM ⟂ AB"),
                 ("midpoint", "MAB", "M is the midpoint of AB")], circles="OA")
    hexa = {n: P(5, 90 + 60 * k) for k, n in enumerate("ABCDEF")} | {"O": o}
    hexagon = fig(hexa, "AB BC CD DE EF FA", ["Draw a regular hexagon ABCDEF inscribed in a circle with centre O."],
                  [("on_circle", n + "O", f"{n} lies on the circle") for n in "BCDEF"]
                  + [("equal_length", "ABBC", "AB = BC"), ("equal_length", "CDDE", "CD = DE"),
                     ("collinear", "ADO", "A, D and O are collinear (AD is a diameter)")], circles="OA")
    tri = fig({"C": (0.0, 0.0), "B": (0.0, 3.0), "A": (3 * math.sqrt(3), 0.0)}, "AB BC CA",
              ["Draw triangle ABC with a right angle at C and angle A = 30°; BC is 3 cm and AB is 6 cm."],
              [("angle", "ACB", "angle ACB is 90°", 90.0), ("angle", "CAB", "angle CAB is 30°", 30.0)],
              lengths={"BC": "3 cm", "AB": "6 cm"})
    return [thales, altitude, square, parallelogram, isosceles, tangent, inscribed, mid, centroid, rect, bisector,
            trapezoid, rhombus, chord, hexagon, tri]


def part(pid: str, kind: str, value: str | None, a: str, b: str) -> CircuitPart:
    return CircuitPart(id=pid, kind=kind, value=value, nets=(a, b))


CIRCUITS: list[tuple[list[CircuitPart], str | None, str]] = [
    ([part("V1", "voltage_source", "9V", "top", "gnd"), part("R1", "resistor", "10kΩ", "top", "out"),
      part("R2", "resistor", "10kΩ", "out", "gnd")], "gnd",
     "A voltage divider: the 9V source V1 feeds R1 (10kΩ) and R2 (10kΩ) in series; the output is the node between"
     " R1 and R2. Ground the bottom of V1 and R2."),
    ([part("V1", "voltage_source", "5V", "in", "gnd"), part("R1", "resistor", "1kΩ", "in", "out"),
      part("C1", "capacitor", "100nF", "out", "gnd")], "gnd",
     "An RC low-pass filter: source V1 (5V), then R1 (1kΩ) in series to the output node, and C1 (100nF) from the"
     " output node to ground. V1's other terminal is grounded."),
    ([part("V1", "voltage_source", "12V", "a", "d"), part("S1", "switch", None, "a", "b"),
      part("R1", "resistor", "100Ω", "b", "c"), part("L1", "inductor", "10mH", "c", "d")], None,
     "An RL circuit: battery V1 (12V), switch S1, resistor R1 (100Ω) and inductor L1 (10mH), all in one series loop."),
    ([part("V1", "voltage_source", "10V", "a", "d"), part("R1", "resistor", "50Ω", "a", "b"),
      part("L1", "inductor", "1mH", "b", "c"), part("C1", "capacitor", "1µF", "c", "d")], None,
     "A series RLC circuit: V1 (10V) drives R1 (50Ω), L1 (1mH) and C1 (1µF) in series in one loop."),
    ([part("V1", "voltage_source", "5V", "a", "gnd"), part("R1", "resistor", "330Ω", "a", "b"),
      part("D1", "led", None, "b", "gnd")], "gnd",
     "An LED with its current-limiting resistor: V1 (5V) feeds R1 (330Ω), then LED D1, back to V1. Ground the"
     " return node."),
    ([part("V1", "voltage_source", "6V", "a", "gnd"), part("S1", "switch", None, "a", "b"),
      part("H1", "lamp", "6V", "b", "gnd"), part("H2", "lamp", "6V", "b", "gnd")], None,
     "Two lamps H1 and H2 (6V each) in parallel, switched by S1 from battery V1 (6V): V1, then S1, then the two"
     " lamps side by side back to V1."),
    ([part("V1", "voltage_source", "10V", "t", "b"), part("R1", "resistor", "1kΩ", "t", "l"),
      part("R2", "resistor", "2kΩ", "l", "b"), part("R3", "resistor", "1kΩ", "t", "r"),
      part("R4", "resistor", "2kΩ", "r", "b"), part("R5", "resistor", "5kΩ", "l", "r")], None,
     "A Wheatstone bridge: V1 (10V) between the top node and the bottom node; R1 (1kΩ) top to left, R2 (2kΩ) left"
     " to bottom, R3 (1kΩ) top to right, R4 (2kΩ) right to bottom, and the bridge resistor R5 (5kΩ) from left to"
     " right."),
    ([part("I1", "current_source", "1mA", "a", "gnd"), part("R1", "resistor", "1kΩ", "a", "gnd"),
      part("R2", "resistor", "4.7kΩ", "a", "gnd")], "gnd",
     "A current source I1 (1mA) driving R1 (1kΩ) and R2 (4.7kΩ) in parallel. Ground the bottom node."),
    ([part("V1", "voltage_source", "12V", "a", "gnd"), part("D1", "diode", None, "a", "out"),
      part("R1", "resistor", "1kΩ", "out", "gnd")], "gnd",
     "A half-wave rectifier: AC source V1 (12V), diode D1 in series to the output node, load R1 (1kΩ) from the"
     " output to ground; V1's other terminal is grounded."),
    ([part("V1", "voltage_source", "5V", "in", "gnd"), part("C1", "capacitor", "10µF", "in", "gnd"),
      part("L1", "inductor", "10mH", "in", "out"), part("C2", "capacitor", "10µF", "out", "gnd"),
      part("R1", "resistor", "1kΩ", "out", "gnd")], "gnd",
     "A pi filter: V1 (5V) at the input; C1 (10µF) from the input to ground, L1 (10mH) from the input to the"
     " output, C2 (10µF) from the output to ground, and a load R1 (1kΩ) across the output."),
    ([part("V1", "voltage_source", "9V", "in", "gnd"), part("R1", "resistor", "1kΩ", "in", "mid"),
      part("R2", "resistor", "1kΩ", "mid", "out"), part("R3", "resistor", "2kΩ", "mid", "gnd"),
      part("R4", "resistor", "10kΩ", "out", "gnd")], "gnd",
     "A T network: V1 (9V) at the input; R1 (1kΩ) from the input to the middle node, R2 (1kΩ) from the middle node"
     " to the output, R3 (2kΩ) from the middle node to ground, and a load R4 (10kΩ) from the output to ground."),
    ([part("V1", "voltage_source", "12V", "a", "d"), part("F1", "fuse", "2A", "a", "b"),
      part("S1", "switch", None, "b", "c"), part("H1", "lamp", "12V", "c", "d")], None,
     "A protected lamp circuit: battery V1 (12V), fuse F1 (2A), switch S1 and lamp H1 (12V) in one series loop."),
    ([part("V1", "voltage_source", "12V", "a", "gnd"), part("R1", "resistor", "2kΩ", "a", "b"),
      part("R2", "resistor", "6kΩ", "b", "gnd"), part("R3", "resistor", "3kΩ", "b", "gnd")], None,
     "V1 (12V) drives R1 (2kΩ) in series with the parallel combination of R2 (6kΩ) and R3 (3kΩ)."),
    ([part("V1", "voltage_source", "9V", "a", "gnd"), part("C1", "capacitor", "10µF", "a", "b"),
      part("C2", "capacitor", "4.7µF", "b", "gnd"), part("C3", "capacitor", "4.7µF", "b", "gnd")], None,
     "V1 (9V) charges C1 (10µF) in series with the parallel combination of C2 (4.7µF) and C3 (4.7µF)."),
    ([part("V1", "voltage_source", "1.5V", "a", "b"), part("V2", "voltage_source", "1.5V", "b", "c"),
      part("R1", "resistor", "10Ω", "c", "a")], None,
     "Two 1.5V cells V1 and V2 in series drive resistor R1 (10Ω) in one loop."),
    ([part("V1", "voltage_source", "5V", "a", "gnd"), part("R1", "resistor", "100Ω", "a", "tank"),
      part("L1", "inductor", "1mH", "tank", "gnd"), part("C1", "capacitor", "100nF", "tank", "gnd")], "gnd",
     "An LC tank fed through a resistor: V1 (5V), R1 (100Ω) to the tank node, and L1 (1mH) in parallel with C1"
     " (100nF) from the tank node to ground; ground V1's other terminal."),
]

FLOWCHARTS: list[tuple[str, list[NodeRow], list[EdgeRow]]] = [
    ("Euclid's algorithm for the greatest common divisor",
     [("s", "Start", "terminator"), ("r", "Read a and b", "io"), ("d", "b = 0?", "decision"),
      ("m", "r = a mod b", "process"), ("x", "a = b, b = r", "process"), ("p", "Print a", "io"), ("e", "End", "terminator")],
     [("s", "r", None), ("r", "d", None), ("d", "p", "yes"), ("d", "m", "no"), ("m", "x", None), ("x", "d", None),
      ("p", "e", None)]),
    ("deciding whether a year is a leap year",
     [("s", "Start", "terminator"), ("r", "Read year", "io"), ("d4", "Divisible by 4?", "decision"),
      ("d100", "Divisible by 100?", "decision"), ("d400", "Divisible by 400?", "decision"),
      ("y", "Print leap year", "io"), ("n", "Print common year", "io"), ("e", "End", "terminator")],
     [("s", "r", None), ("r", "d4", None), ("d4", "n", "no"), ("d4", "d100", "yes"), ("d100", "y", "no"),
      ("d100", "d400", "yes"), ("d400", "y", "yes"), ("d400", "n", "no"), ("y", "e", None), ("n", "e", None)]),
    ("computing n factorial",
     [("s", "Start", "terminator"), ("r", "Read n", "io"), ("i", "f = 1", "process"), ("d", "n > 1?", "decision"),
      ("m", "f = f × n", "process"), ("k", "n = n − 1", "process"), ("p", "Print f", "io"), ("e", "End", "terminator")],
     [("s", "r", None), ("r", "i", None), ("i", "d", None), ("d", "m", "yes"), ("m", "k", None), ("k", "d", None),
      ("d", "p", "no"), ("p", "e", None)]),
    ("checking whether a number is even",
     [("s", "Start", "terminator"), ("r", "Read n", "io"), ("d", "n mod 2 = 0?", "decision"), ("y", "Print even", "io"),
      ("n", "Print odd", "io"), ("e", "End", "terminator")],
     [("s", "r", None), ("r", "d", None), ("d", "y", "yes"), ("d", "n", "no"), ("y", "e", None), ("n", "e", None)]),
    ("finding the largest of three numbers",
     [("s", "Start", "terminator"), ("r", "Read a, b, c", "io"), ("ab", "a > b?", "decision"), ("ac", "a > c?", "decision"),
      ("bc", "b > c?", "decision"), ("pa", "Print a", "io"), ("pb", "Print b", "io"), ("pc", "Print c", "io"),
      ("e", "End", "terminator")],
     [("s", "r", None), ("r", "ab", None), ("ab", "ac", "yes"), ("ab", "bc", "no"), ("ac", "pa", "yes"),
      ("ac", "pc", "no"), ("bc", "pb", "yes"), ("bc", "pc", "no"), ("pa", "e", None), ("pb", "e", None), ("pc", "e", None)]),
    ("a linear search through a list",
     [("s", "Start", "terminator"), ("r", "Read list and key", "io"), ("i", "i = 0", "process"),
      ("d", "i < length?", "decision"), ("m", "list[i] = key?", "decision"), ("k", "i = i + 1", "process"),
      ("f", "Print found at i", "io"), ("n", "Print not found", "io"), ("e", "End", "terminator")],
     [("s", "r", None), ("r", "i", None), ("i", "d", None), ("d", "m", "yes"), ("d", "n", "no"), ("m", "f", "yes"),
      ("m", "k", "no"), ("k", "d", None), ("f", "e", None), ("n", "e", None)]),
    ("logging in with at most three attempts",
     [("s", "Start", "terminator"), ("c", "attempts = 0", "process"), ("r", "Read password", "io"),
      ("d", "Password correct?", "decision"), ("k", "attempts = attempts + 1", "process"),
      ("t", "attempts < 3?", "decision"), ("ok", "Show welcome", "io"), ("lock", "Lock account", "process"),
      ("e", "End", "terminator")],
     [("s", "c", None), ("c", "r", None), ("r", "d", None), ("d", "ok", "yes"), ("d", "k", "no"), ("k", "t", None),
      ("t", "r", "yes"), ("t", "lock", "no"), ("ok", "e", None), ("lock", "e", None)]),
    ("withdrawing cash from an ATM",
     [("s", "Start", "terminator"), ("card", "Insert card", "io"), ("pin", "Enter PIN", "io"),
      ("pok", "PIN correct?", "decision"), ("amt", "Enter amount", "io"), ("bal", "Balance enough?", "decision"),
      ("cash", "Dispense cash", "process"), ("err", "Show error", "io"), ("ret", "Return card", "process"),
      ("e", "End", "terminator")],
     [("s", "card", None), ("card", "pin", None), ("pin", "pok", None), ("pok", "amt", "yes"), ("pok", "err", "no"),
      ("amt", "bal", None), ("bal", "cash", "yes"), ("bal", "err", "no"), ("cash", "ret", None), ("err", "ret", None),
      ("ret", "e", None)]),
    ("converting Celsius to Fahrenheit",
     [("s", "Start", "terminator"), ("r", "Read C", "io"), ("f", "F = C × 9/5 + 32", "process"), ("p", "Print F", "io"),
      ("e", "End", "terminator")],
     [("s", "r", None), ("r", "f", None), ("f", "p", None), ("p", "e", None)]),
    ("grading a test score",
     [("s", "Start", "terminator"), ("r", "Read score", "io"), ("a", "score >= 90?", "decision"),
      ("b", "score >= 75?", "decision"), ("ga", "Grade A", "process"), ("gb", "Grade B", "process"),
      ("gc", "Grade C", "process"), ("p", "Print grade", "io"), ("e", "End", "terminator")],
     [("s", "r", None), ("r", "a", None), ("a", "ga", "yes"), ("a", "b", "no"), ("b", "gb", "yes"), ("b", "gc", "no"),
      ("ga", "p", None), ("gb", "p", None), ("gc", "p", None), ("p", "e", None)]),
    ("checking a password's strength",
     [("s", "Start", "terminator"), ("r", "Read password", "io"), ("l", "Length >= 8?", "decision"),
      ("dg", "Has a digit?", "decision"), ("ok", "Accept password", "process"), ("no", "Reject password", "process"),
      ("e", "End", "terminator")],
     [("s", "r", None), ("r", "l", None), ("l", "dg", "yes"), ("l", "no", "no"), ("dg", "ok", "yes"),
      ("dg", "no", "no"), ("ok", "e", None), ("no", "e", None)]),
    ("a coffee machine serving a drink",
     [("s", "Start", "terminator"), ("coin", "Insert coin", "io"), ("v", "Coin valid?", "decision"),
      ("sel", "Select drink", "io"), ("w", "Water available?", "decision"), ("brew", "Brew drink", "process"),
      ("serve", "Serve cup", "process"), ("ref", "Refund coin", "process"), ("e", "End", "terminator")],
     [("s", "coin", None), ("coin", "v", None), ("v", "sel", "yes"), ("v", "ref", "no"), ("sel", "w", None),
      ("w", "brew", "yes"), ("w", "ref", "no"), ("brew", "serve", None), ("serve", "e", None), ("ref", "e", None)]),
    ("triaging a bug report",
     [("s", "Start", "terminator"), ("rep", "Receive report", "io"), ("rp", "Reproducible?", "decision"),
      ("asg", "Assign developer", "process"), ("fix", "Write fix", "process"), ("t", "Tests pass?", "decision"),
      ("cl", "Close report", "process"), ("ask", "Ask reporter", "io"), ("e", "End", "terminator")],
     [("s", "rep", None), ("rep", "rp", None), ("rp", "asg", "yes"), ("rp", "ask", "no"), ("ask", "rp", None),
      ("asg", "fix", None), ("fix", "t", None), ("t", "fix", "no"), ("t", "cl", "yes"), ("cl", "e", None)]),
    ("summing the numbers from 1 to n",
     [("s", "Start", "terminator"), ("r", "Read n", "io"), ("i", "sum = 0, i = 1", "process"),
      ("d", "i <= n?", "decision"), ("a", "sum = sum + i", "process"), ("k", "i = i + 1", "process"),
      ("p", "Print sum", "io"), ("e", "End", "terminator")],
     [("s", "r", None), ("r", "i", None), ("i", "d", None), ("d", "a", "yes"), ("a", "k", None), ("k", "d", None),
      ("d", "p", "no"), ("p", "e", None)]),
    ("a binary search step loop",
     [("s", "Start", "terminator"), ("r", "Read sorted list and key", "io"), ("i", "low = 0, high = n − 1", "process"),
      ("d", "low <= high?", "decision"), ("mid", "mid = (low + high) / 2", "process"), ("eq", "list[mid] = key?", "decision"),
      ("lt", "list[mid] < key?", "decision"), ("up", "low = mid + 1", "process"), ("dn", "high = mid − 1", "process"),
      ("f", "Print mid", "io"), ("n", "Print not found", "io"), ("e", "End", "terminator")],
     [("s", "r", None), ("r", "i", None), ("i", "d", None), ("d", "mid", "yes"), ("d", "n", "no"), ("mid", "eq", None),
      ("eq", "f", "yes"), ("eq", "lt", "no"), ("lt", "up", "yes"), ("lt", "dn", "no"), ("up", "d", None),
      ("dn", "d", None), ("f", "e", None), ("n", "e", None)]),
    ("making a phone call",
     [("s", "Start", "terminator"), ("dial", "Dial number", "process"), ("ans", "Answered?", "decision"),
      ("talk", "Talk", "process"), ("vm", "Voicemail on?", "decision"), ("msg", "Leave message", "process"),
      ("hang", "Hang up", "process"), ("e", "End", "terminator")],
     [("s", "dial", None), ("dial", "ans", None), ("ans", "talk", "yes"), ("ans", "vm", "no"), ("vm", "msg", "yes"),
      ("vm", "hang", "no"), ("talk", "hang", None), ("msg", "hang", None), ("hang", "e", None)]),
]

Diagram = tuple[str, bool, list[NodeRow], list[EdgeRow],
                list[tuple[str, str, list[str]]], list[tuple[str, str]]]
DIAGRAMS: list[Diagram] = [
    ("a client-server web application", True,
     [("c", "Browser", None), ("s", "Web server", None), ("db", "Database", None)],
     [("c", "s", "HTTP request"), ("s", "db", "SQL query"), ("db", "s", "rows"), ("s", "c", "HTML page")], [],
     [("c", "db")]),
    ("the Model-View-Controller pattern", True,
     [("u", "User", None), ("v", "View", None), ("c", "Controller", None), ("m", "Model", None)],
     [("u", "c", "input"), ("c", "m", "updates"), ("m", "v", "notifies"), ("v", "u", "shows")], [], [("v", "m")]),
    ("the states of a TCP connection (simplified)", True,
     [("cl", "CLOSED", "state"), ("li", "LISTEN", "state"), ("sr", "SYN RECEIVED", "state"),
      ("ss", "SYN SENT", "state"), ("es", "ESTABLISHED", "state")],
     [("cl", "li", "passive open"), ("cl", "ss", "active open"), ("li", "sr", "SYN"), ("sr", "es", "ACK"),
      ("ss", "es", "SYN+ACK"), ("es", "cl", "close")], [], [("li", "es")]),
    ("the water cycle", True,
     [("ev", "Evaporation", None), ("co", "Condensation", None), ("pr", "Precipitation", None), ("cl", "Collection", None)],
     [("ev", "co", None), ("co", "pr", None), ("pr", "cl", None), ("cl", "ev", None)], [], [("co", "ev")]),
    ("a food chain (arrows point from the eaten to the eater)", True,
     [("g", "Grass", None), ("gh", "Grasshopper", None), ("fr", "Frog", None), ("sn", "Snake", None), ("hk", "Hawk", None),
      ("rb", "Rabbit", None)],
     [("g", "gh", None), ("gh", "fr", None), ("fr", "sn", None), ("sn", "hk", None), ("g", "rb", None), ("rb", "hk", None)],
     [], [("hk", "g")]),
    ("the phases of a compiler, grouped into front end and back end", True,
     [("lx", "Lexer", None), ("ps", "Parser", None), ("sa", "Semantic analysis", None), ("ir", "IR generator", None),
      ("op", "Optimizer", None), ("cg", "Code generator", None)],
     [("lx", "ps", "tokens"), ("ps", "sa", "AST"), ("sa", "ir", None), ("ir", "op", "IR"), ("op", "cg", None)],
     [("fe", "Front end", ["lx", "ps", "sa"]), ("be", "Back end", ["ir", "op", "cg"])], [("cg", "lx")]),
    ("a class hierarchy (arrows from subclass to superclass)", True,
     [("an", "Animal", None), ("ma", "Mammal", None), ("bi", "Bird", None), ("dg", "Dog", None), ("ct", "Cat", None),
      ("pg", "Penguin", None)],
     [("ma", "an", "is a"), ("bi", "an", "is a"), ("dg", "ma", "is a"), ("ct", "ma", "is a"), ("pg", "bi", "is a")], [],
     [("an", "ma")]),
    ("photosynthesis: what goes into a leaf and what comes out", True,
     [("su", "Sunlight", None), ("wa", "Water", None), ("co2", "Carbon dioxide", None), ("lf", "Leaf", None),
      ("gl", "Glucose", None), ("ox", "Oxygen", None)],
     [("su", "lf", None), ("wa", "lf", None), ("co2", "lf", None), ("lf", "gl", None), ("lf", "ox", None)], [],
     [("ox", "lf")]),
    ("the basic Git workflow", True,
     [("wd", "Working directory", None), ("st", "Staging area", None), ("lr", "Local repository", None),
      ("rr", "Remote repository", None)],
     [("wd", "st", "git add"), ("st", "lr", "git commit"), ("lr", "rr", "git push"), ("rr", "wd", "git pull")], [],
     [("st", "rr")]),
    ("a microservice shop, grouped by layer", True,
     [("ui", "Web UI", None), ("gw", "API gateway", None), ("or", "Orders", None), ("pa", "Payments", None),
      ("odb", "Orders DB", None), ("pdb", "Payments DB", None)],
     [("ui", "gw", "HTTPS"), ("gw", "or", None), ("gw", "pa", None), ("or", "pa", "charge"), ("or", "odb", None),
      ("pa", "pdb", None)],
     [("fr", "Frontend", ["ui"]), ("svc", "Services", ["gw", "or", "pa"]), ("data", "Data", ["odb", "pdb"])],
     [("ui", "odb")]),
    ("how a DNS name is resolved", True,
     [("br", "Browser", None), ("rs", "Resolver", None), ("rt", "Root server", None), ("tld", "TLD server", None),
      ("au", "Authoritative server", None)],
     [("br", "rs", "query"), ("rs", "rt", "ask root"), ("rs", "tld", "ask .com"), ("rs", "au", "ask domain"),
      ("rs", "br", "IP address")], [], [("br", "rt")]),
    ("a small neural network, layer by layer", True,
     [("x1", "x1", None), ("x2", "x2", None), ("h1", "h1", None), ("h2", "h2", None), ("h3", "h3", None), ("y", "y", None)],
     [("x1", "h1", None), ("x1", "h2", None), ("x1", "h3", None), ("x2", "h1", None), ("x2", "h2", None),
      ("x2", "h3", None), ("h1", "y", None), ("h2", "y", None), ("h3", "y", None)],
     [("in", "Input layer", ["x1", "x2"]), ("hid", "Hidden layer", ["h1", "h2", "h3"]), ("out", "Output layer", ["y"])],
     [("x1", "y")]),
    ("a star network around one switch (plain lines)", False,
     [("sw", "Switch", None), ("p1", "PC 1", None), ("p2", "PC 2", None), ("p3", "PC 3", None), ("pr", "Printer", None),
      ("srv", "Server", None)],
     [("sw", "p1", None), ("sw", "p2", None), ("sw", "p3", None), ("sw", "pr", None), ("sw", "srv", None)], [],
     [("p1", "p2")]),
    ("the states of an operating-system process", True,
     [("nw", "New", "state"), ("rd", "Ready", "state"), ("rn", "Running", "state"), ("wt", "Waiting", "state"),
      ("tm", "Terminated", "state")],
     [("nw", "rd", "admit"), ("rd", "rn", "dispatch"), ("rn", "rd", "interrupt"), ("rn", "wt", "I/O wait"),
      ("wt", "rd", "I/O done"), ("rn", "tm", "exit")], [], [("wt", "rn")]),
    ("the layers of the TCP/IP model, each passing data down to the next", True,
     [("ap", "Application", None), ("tr", "Transport", None), ("ne", "Internet", None), ("li", "Link", None)],
     [("ap", "tr", "segments"), ("tr", "ne", "packets"), ("ne", "li", "frames")], [], [("li", "ap")]),
    ("the nitrogen cycle (simplified)", True,
     [("at", "Atmospheric nitrogen", None), ("fx", "Nitrogen fixation", None), ("am", "Ammonium", None),
      ("ni", "Nitrates", None), ("pl", "Plants", None), ("de", "Denitrification", None)],
     [("at", "fx", None), ("fx", "am", None), ("am", "ni", "nitrification"), ("ni", "pl", "absorbed"), ("ni", "de", None),
      ("de", "at", None)], [], [("pl", "at")]),
]


def tasks() -> list[Task]:
    out = []
    for k, f in enumerate(geometry_figures()):
        task_id = f"geometry-hw{k:02d}"
        out.append(geometry_task(task_id, "handwritten", f, random.Random(task_id)))
    for k, (parts, ground, text) in enumerate(CIRCUITS):
        task_id = f"circuit-hw{k:02d}"
        out.append(circuit_task(task_id, "handwritten", parts, ground, text, random.Random(task_id)))
    for k, (title, nodes, edges) in enumerate(FLOWCHARTS):
        task_id = f"flowchart-hw{k:02d}"
        rng = random.Random(task_id)
        g = GraphDrawing(title, True, nodes, edges, [])
        end = next(n[0] for n in nodes if n[1] == "End")
        start = next(n[0] for n in nodes if n[1] == "Start")
        linked = {e[:2] for e in edges} | {(e[1], e[0]) for e in edges}
        pairs = [(a[0], b[0]) for a in nodes for b in nodes if a != b and (a[0], b[0]) not in linked
                 and a[0] != end and b[0] != start]
        forbidden = [rng.choice(pairs)] if pairs else []
        intro = (f"Draw a flowchart of {title}. Shapes: terminators as ovals (ellipses or rounded boxes), processes as "
                 "rectangles, decisions as diamonds, input/output steps as parallelograms.")
        out.append(graph_task(task_id, "flowchart", "handwritten", g, forbidden, intro, rng, ends=[end]))
    for k, (title, directed, nodes, edges, clusters, forbidden) in enumerate(DIAGRAMS):
        task_id = f"diagram-hw{k:02d}"
        intro = f"Draw a diagram of {title}."
        if any(n[2] == "state" for n in nodes):
            intro += " Draw each state as a circle, an oval or a rounded box."
        g = GraphDrawing(title, directed, nodes, edges, clusters)
        out.append(graph_task(task_id, "diagram", "handwritten", g, forbidden, intro, random.Random(task_id)))
    return out

