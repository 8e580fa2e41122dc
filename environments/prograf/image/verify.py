"""The image-only verifier: a PNG (from a text-to-image generator) and a task's points -> a
verdict per point that is `pass`, `fail` or `undecided`.

Pixels decide only what they decide reliably: labels by OCR (`ocr.py`, its matching rule
stated there), circle counts by OpenCV (`cv.py`), and a flowchart's or diagram's nodes,
shapes and arrows from the structure read off the pixels (`graph.py`; the task's nodes bound
to the drawn ones by their text as one assignment, `binding.bind`), and a geometry figure's
segments, circles and relations (issue 39 item 5, 2026-12-07: `geometry.py` reads segments,
circles, dots and letters from pixels, then `check_geometry`'s own binding and checks run with a
margin for reading; the rule that enables its types is stated in that module's docstring), and a
circuit's parts, the names and values by them and the nets their terminals sit on
(`circuit.py`: `check_circuit`'s own checks on the netlist read, undecidable wherever a
part or terminal they need is not read; its enabling rule in that module's docstring). Every
other point -- a part's kind, group membership -- is `undecided (needs the vision judge)`,
never guessed. A check type is used only if calibration (`calibrate.py`) found it precise enough;
`ENABLED` records the committed calibration's verdict, and a disabled type is undecided too.
The graph types (session 23) were tuned on even-index tasks and judged on odd-index ones not
looked at: enabled only if the rule (precision and pass precision >= 0.9, >= 5 known failures)
holds both on clean renders of references, mutants and foreign-style outputs and on the same
drawn varied by `image_augment` (rule written before either held-out run; docs/prograf.md).
A check may also find that the pixels cannot decide its point (`Undecidable`: e.g. a label written
fewer times than the arrows that carry it -- which arrow lost it is not read from pixels); that
point is undecided too. Dependency gating as in the structural verifier: a point whose parent *failed* is gated; a parent
left undecided gates nothing.

The image is model output: bytes only, size-checked before decoding (`png.py`); an image
that cannot be read fails every point with `rejected_input`, and is never an exception.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, Field

from environments.prograf.check.findings import Finding, count_finding, fail, ok
from environments.prograf.image import circuit as image_circuit
from environments.prograf.image import cv as image_cv
from environments.prograf.image import geometry as image_geometry
from environments.prograf.image import graph as image_graph
from environments.prograf.image.ocr import DOTS, TextLine, normalise, occurrences, read_text
from environments.prograf.image.png import decode_png
from environments.prograf.parse.binding import bind
from environments.prograf.parse.scene import InputRejected, Scene
from environments.prograf.task import GEOMETRY_RELATIONS, CircuitSpec, GeometrySpec, GraphSpec, Task, VerificationPoint

Status = Literal["pass", "fail", "undecided"]
NEEDS_JUDGE = "undecided (needs the vision judge)"

# the check types, by the verification point's check they decide
CHECK_TYPES: dict[str, str] = {
    "point": "ocr_point_letter",
    "point_count": "ocr_letter_count",
    "length_label": "cv_length_label",
    "component": "ocr_part_name",
    "value": "ocr_part_value",
    "node": "ocr_node_label",
    "cluster": "ocr_group_label",
    "edge_label": "ocr_edge_label",
    "circle_count": "cv_circle_count",
    "node_count": "cv_node_count",
    "shape": "cv_node_shape",
    "edge": "cv_edge",
    "no_edge": "cv_no_edge",
    "no_out_edges": "cv_no_out_edges",
    "edge_count": "cv_edge_count",
    # geometry read from pixels (geometry.py; issue 39 item 5, 2026-12-07)
    "segment": "cv_segment",
    "no_segment": "cv_no_segment",
    "circle": "cv_circle",
} | {check: "cv_relation" for check in GEOMETRY_RELATIONS}
# circuits read from pixels (circuit.py; issue 39 item 5, circuits): component -> ocr_part_name
# and value -> ocr_part_value as before, the wiring, ground, whole-netlist and part-count points new
CHECK_TYPES |= image_circuit.CHECK_TYPES
# The committed calibration's verdict (docs/prograf.md, `harness prograf calibrate-image`): the
# types whose precision and pass-precision on our renders were both >= CALIBRATION_THRESHOLD.
CALIBRATION_THRESHOLD = 0.9
# Full-corpus run of 2026-12-03 (304 tasks, 2,745 images): circle counts and group titles passed.
# Session 23 (docs/prograf.md): node labels read through the drawn nodes pass on held-out clean and
# varied renders with foreign-style outputs; group titles fail there (precision 0.40 on varied
# foreign Mermaid), so they are undecided now.
# Session 29 (docs/prograf.md, helper A's section): with frames holding unread nodes and nodes a
# line runs through read (fe272f9), the node count passes on held-out clean (flowchart/diagram-041
# .. -049) and varied (seed 29, -051 .. -057) renders with foreign-style outputs; node labels pass
# there again; arrows, arrow counts, absent arrows, out-edges, shapes and edge labels do not.
# Issue 39 item 5 (2026-12-07, docs/prograf.md): geometry segments and metric relations read as a
# figure (geometry.py) pass the rule on held-out clean and varied renders with foreign-style
# outputs; circle counts pass there again; circles through a point, absent segments and length
# labels do not.
# Issue 39 item 5, circuits (2026-12-07, docs/prograf.md; rule in circuit.py, committed in
# 29a5902 before its held-out runs): the wiring relations, the whole netlist, the part count and
# a part's value read as a schematic pass on held-out clean and varied renders with foreign-style
# outputs; part names (ocr_part_name) and ground (cv_grounded) do not.
# Session 29 (docs/prograf.md, helper B's section; the rule and the new held-out set in circuit.py's
# docstring, committed in 9841ced before its runs): with grounds read by their shape and a name lost
# under a part's outline left undecided, part names and ground pass on held-out clean and varied
# (seed 43) renders of circuit-025 .. -047 odd with foreign-style outputs (1.00 / 1.00 on both).
ENABLED: frozenset[str] = frozenset(
    {
        "cv_circle_count",
        "ocr_node_label",
        "cv_node_count",
        "cv_segment",
        "cv_relation",
        "cv_wiring",
        "cv_netlist",
        "cv_part_count",
        "ocr_part_value",
        "ocr_part_name",
        "cv_grounded",
    }
)


Undecidable = image_geometry.Undecidable  # raised by a check whose point these pixels cannot decide


def vocabulary(spec: Any) -> frozenset[str]:
    """Every label text the task's picture should carry (for reading labels run together)."""
    if isinstance(spec, GraphSpec):
        texts = [n.label for n in spec.nodes] + [e.label or "" for e in spec.edges] + [c.label for c in spec.clusters]
    elif isinstance(spec, CircuitSpec):
        texts = [p.id for p in spec.parts] + [p.value or "" for p in spec.parts]
    elif isinstance(spec, GeometrySpec):
        texts = list(spec.points) + list(spec.length_labels.values())
    else:
        texts = []
    return frozenset(t for t in texts if t)


@dataclass
class Pixels:
    """One decoded image and what is read off it, each read once and only when a check needs it."""

    img: np.ndarray
    labels: frozenset[str] = frozenset()  # the task's label texts (`vocabulary`), set by `decide`
    _binds: dict[tuple[str, ...], dict[str, int]] = field(default_factory=dict, init=False, repr=False)
    _figures: dict[tuple[str, ...], image_geometry.Figure] = field(default_factory=dict, init=False, repr=False)
    _circuits: dict[tuple[str, ...], image_circuit.PixelCircuit] = field(default_factory=dict, init=False, repr=False)

    @cached_property
    def lines(self) -> list[TextLine]:
        return read_text(self.img)

    @cached_property
    def circles(self) -> list[tuple[float, float, float]]:
        return image_cv.big_circles(self.img)

    @cached_property
    def shapes(self) -> list[tuple[int, int, int, int]]:
        return image_cv.node_shapes(self.img)

    @cached_property
    def graph(self) -> image_graph.PixelGraph:
        return image_graph.read_graph(self.img, self.lines)

    @cached_property
    def scene(self) -> Scene:
        return image_geometry.read_scene(self.img, self.lines)

    def figure(self, spec: GeometrySpec) -> image_geometry.Figure:
        """The figure read off the pixels, with the spec's letters bound to its drawn points."""
        key = tuple(spec.points)
        if key not in self._figures:
            self._figures[key] = image_geometry.figure(self.scene, spec, self.lines, self.labels)
        return self._figures[key]

    def circuit(self, spec: CircuitSpec) -> image_circuit.PixelCircuit:
        """The schematic read off the pixels, its texts bound to its parts (`image_circuit`)."""
        key = tuple(p.id for p in spec.parts)
        if key not in self._circuits:
            self._circuits[key] = image_circuit.read_circuit(self.img, self.lines, spec, self.labels)
        return self._circuits[key]

    def bound(self, spec: GraphSpec) -> dict[str, int]:
        """The spec's nodes bound to the nodes read off the pixels, as one assignment (`binding.bind`)
        on how unlike a node's label and a drawn node's text are; a label like no drawn node's text
        (similarity under BIND_FLOOR) is left unbound."""
        key = tuple(n.id for n in spec.nodes)
        if key not in self._binds:
            texts = [n.text for n in self.graph.nodes]
            cost = [
                [None if (sim := similarity(n.label, t)) < BIND_FLOOR else 1 - sim for t in texts] for n in spec.nodes
            ]
            pairs = bind(cost).pairs if texts and spec.nodes else {}
            self._binds[key] = {spec.nodes[i].id: j for i, j in pairs.items()}
        return self._binds[key]


BIND_FLOOR = 0.5  # difflib similarity under which a node's text is not its label at all
SURE = 0.8  # similarity at or over which a bound node's text is its label


def similarity(label: str, text: str) -> float:
    """The difflib ratio of the label and a drawn node's whole text, both normalised (`image_ocr`'s
    folds). Whole against whole: a label inside a longer text ("Vertebrates" in "Invertebrates")
    is not that text."""
    import difflib

    a, b = normalise(label), normalise(text)
    return difflib.SequenceMatcher(None, a, b).ratio() if a and b else 0.0


def _found(px: Pixels, text: str, what: str) -> Finding:
    hits = occurrences(text, px.lines, px.labels)
    if hits:
        return ok(hits[0].text, f"{what} {text!r} is written (OCR read {hits[0].text!r})")
    return fail("missing_object", None, f"OCR found no {what} {text!r}")


def i_point(px: Pixels, vp: VerificationPoint, spec: Any) -> Finding:
    return _found(px, vp.args[0], "point letter")


LETTER = re.compile(r"^[A-Z][′'’]?$")


def _as_letter(word: str) -> str:
    """A word as a point letter: a point's dot read beside it dropped, and a lone 0 or o read as
    O (the centre O is the letter OCR most often reads as a digit or in lower case)."""
    word = word.strip(DOTS)
    return "O" + word[1:] if word[:1] in ("0", "o") else word


def i_point_count(px: Pixels, vp: VerificationPoint, spec: Any) -> Finding:
    letters = sorted({_as_letter(w) for line in px.lines for w in line.text.split() if LETTER.match(_as_letter(w))})
    found = count_finding(len(letters), vp.count(), "distinct point letters read")
    return Finding(found.passed, letters, found.reason + f" ({', '.join(letters) or 'none'})", found.pattern)


def i_figure(px: Pixels, vp: VerificationPoint, spec: GeometrySpec) -> Finding:
    """A geometry point decided on the figure read off the pixels (`image_geometry`)."""
    return image_geometry.CHECKS_FROM_PIXELS[vp.check](px.figure(spec), vp, spec)


def i_circuit(px: Pixels, vp: VerificationPoint, spec: CircuitSpec) -> Finding:
    """A circuit point decided on the schematic read off the pixels (`image_circuit`)."""
    return image_circuit.CHECKS_FROM_PIXELS[vp.check](px.circuit(spec), vp, spec)


def i_node(px: Pixels, vp: VerificationPoint, spec: GraphSpec) -> Finding:
    """Passes when a drawn node's text is the label (or OCR reads it anywhere); fails only when it
    is read nowhere and every drawn node is another label's -- a drawn node whose text is no
    label's may be this one misread, so then it is undecided."""
    label = next((n.label for n in spec.nodes if n.id == vp.args[0]), vp.args[0])
    bound = px.bound(spec)
    g = px.graph
    if vp.args[0] in bound and similarity(label, g.nodes[bound[vp.args[0]]].text) >= SURE:
        return ok(
            g.nodes[bound[vp.args[0]]].text,
            f"node {label!r} is drawn (its text read {g.nodes[bound[vp.args[0]]].text!r})",
        )
    hits = occurrences(label, px.lines, px.labels)
    if hits:
        return ok(hits[0].text, f"node label {label!r} is written (OCR read {hits[0].text!r})")
    spare = [g.nodes[j].text for j in range(len(g.nodes)) if j not in bound.values()] + ["(unread)"] * g.unread
    if len(g.nodes) < len(spec.nodes) - 1:  # more nodes lost than one fault removes: the reading failed
        raise Undecidable(f"{label!r} is not read, and only {len(g.nodes)} of {len(spec.nodes)} nodes are")
    if spare or vp.args[0] in bound:
        raise Undecidable(
            f"{label!r} is not read, but drawn node(s) {spare or [g.nodes[bound[vp.args[0]]].text]} "
            "are read as no label"
        )
    return fail("missing_object", None, f"OCR found no node label {label!r}, and every drawn node is another's")


def i_cluster(px: Pixels, vp: VerificationPoint, spec: GraphSpec) -> Finding:
    label = next((c.label for c in spec.clusters if c.id == vp.args[0]), str(vp.value or vp.args[0]))
    return _found(px, label, "group title")


def i_edge_label(px: Pixels, vp: VerificationPoint, spec: GraphSpec) -> Finding:
    """Which arrow a label sits on is not read from pixels: the label must be written at least as
    often as the spec's arrows carry it to pass, and nowhere to fail. Written fewer times, some
    arrow lacks it, but not which one -- this arrow's point is undecided."""
    want = str(vp.value)
    needed = sum(1 for e in spec.edges if e.label and normalise(e.label) == normalise(want)) or 1
    seen = len(occurrences(want, px.lines, px.labels))
    if seen >= needed:
        return ok(seen, f"{want!r} is written {seen} times ({needed} arrows carry it)")
    if seen:
        raise Undecidable(
            f"{want!r} is written {seen} times but {needed} arrows carry it; which arrow lacks it "
            "is not read from pixels"
        )
    why = _misread(px, spec, want)
    if why:
        raise Undecidable(f"{want!r} is read nowhere, but {why}")
    return fail("wrong_label", seen, f"{want!r} is written nowhere, but {needed} arrows carry it")


MISREAD = 0.5  # difflib similarity at or over which a text read as no label may be this one misread


def _misread(px: Pixels, spec: GraphSpec, label: str) -> str | None:
    """Why a label OCR read nowhere may still be drawn: a free text that is no label of the task is
    like this one (a label drawn over a line or another label is misread: "resunheßtop"); another
    label is read, but fewer times than its arrows carry it (labels are lost in this picture); or
    some node's text is not read surely while OCR read text (the picture's text is not read well).
    A picture where OCR reads no text at all has no label written: that fails."""
    g = px.graph
    for t in g.free:
        if all(similarity(other, t.text) < SURE for other in px.labels) and similarity(label, t.text) >= MISREAD:
            return f"OCR read {t.text!r}, no label of the task, which may be it misread"
    carried: dict[str, int] = {}
    for e in spec.edges:
        if e.label and normalise(e.label) != normalise(label):
            carried[e.label] = carried.get(e.label, 0) + 1
    short = [t for t, k in carried.items() if 0 < len(occurrences(t, px.lines, px.labels)) < k]
    if short:
        return f"other labels ({', '.join(map(repr, short))}) are read fewer times than drawn too"
    bound = px.bound(spec)
    unsure = [n for n in spec.nodes if n.id not in bound or similarity(n.label, g.nodes[bound[n.id]].text) < SURE]
    if unsure and px.lines:
        return f"{len(unsure)} node(s) are not read surely, so the text is not read well"
    return None


def i_circle_count(px: Pixels, vp: VerificationPoint, spec: Any) -> Finding:
    return count_finding(len(px.circles), vp.count(), "circles found (Hough)")


def i_node_count(px: Pixels, vp: VerificationPoint, spec: Any) -> Finding:
    return count_finding(len(px.shapes), vp.count(), "closed shapes with a label")


def _pair(px: Pixels, vp: VerificationPoint, spec: GraphSpec) -> tuple[int, ...]:
    """The drawn nodes bound to the point's spec nodes; Undecidable if one is not bound, or if the
    arrows about them could not be told apart (`image_graph`: tangled) or one ends nowhere."""
    bound = px.bound(spec)
    names = {n.id: n.label for n in spec.nodes}
    texts = [n.text for n in px.graph.nodes]
    missing = [
        names.get(a, a) for a in vp.args if a not in bound or similarity(names.get(a, a), texts[bound[a]]) < SURE
    ]
    if missing:
        raise Undecidable(f"no drawn node read surely as {', '.join(map(repr, missing))}")
    return tuple(bound[a] for a in vp.args)


def _unsure(px: Pixels, spec: GraphSpec, nodes: tuple[int, ...]) -> str | None:
    """Why the arrows at these drawn nodes cannot be trusted, if they cannot: they cross or merge
    or end nowhere, or some node's label is written where no outline was read (an arrow may run
    through that node unseen)."""
    g = px.graph
    hit = [g.nodes[i].text for i in nodes if i in g.tangled or i in g.loose]
    if hit:
        return f"the arrows at {hit} cross or merge, or one of them ends nowhere"
    bound = px.bound(spec)
    stray = [
        n.label for n in spec.nodes if n.id not in bound and any(similarity(n.label, t.text) >= SURE for t in g.free)
    ]
    return f"node(s) {stray} are written but no outline around them was read" if stray else None


def i_shape(px: Pixels, vp: VerificationPoint, spec: GraphSpec) -> Finding:
    (i,) = _pair(px, vp, spec)
    node = px.graph.nodes[i]
    accepted = vp.value if isinstance(vp.value, list) else []
    if node.shape is None:
        raise Undecidable(f"the outline of {node.text!r} is not a shape read from pixels")
    family = {"round": {"ellipse", "rounded", "stadium", "circle"}}.get(node.shape, {node.shape})
    if node.shape == "box" and "rounded" in accepted and "box" not in accepted:
        raise Undecidable(f"{node.text!r} reads square-cornered, but a rounded box with a small radius reads so too")
    if family & set(accepted):
        return ok(node.shape, f"{node.text!r} is drawn as a {node.shape}")
    return fail(
        "wrong_relation", node.shape, f"{node.text!r} is drawn as a {node.shape}, expected {' or '.join(accepted)}"
    )


def i_edge(px: Pixels, vp: VerificationPoint, spec: GraphSpec) -> Finding:
    a, b = _pair(px, vp, spec)
    g = px.graph
    what = f"{g.nodes[a].text!r} → {g.nodes[b].text!r}"
    forward = [e for e in g.edges if (e.src, e.dst) == (a, b)]
    back = [e for e in g.edges if (e.src, e.dst) == (b, a)]
    if any(e.directed for e in forward) or (not spec.directed and (forward or back)):
        return ok(True, f"arrow {what} read")
    why = _unsure(px, spec, (a, b))
    if why:
        raise Undecidable(why)
    if forward or any(not e.directed for e in back):
        raise Undecidable(f"{what} are joined, but no arrowhead was read")
    if back:
        return fail("wrong_relation", "reversed", f"the arrow between them points the other way ({what} wanted)")
    return fail("broken_connection", None, f"no arrow {what} read")


def i_no_edge(px: Pixels, vp: VerificationPoint, spec: GraphSpec) -> Finding:
    a, b = _pair(px, vp, spec)
    g = px.graph
    what = f"{g.nodes[a].text!r} → {g.nodes[b].text!r}"
    if any((e.src, e.dst) == (a, b) and e.directed for e in g.edges):
        return fail("extra_element", True, f"an arrow {what} is read, though it must not be drawn")
    why = _unsure(px, spec, (a, b))
    if why or any({e.src, e.dst} == {a, b} and not e.directed for e in g.edges):
        raise Undecidable(why or f"{what} are joined, but no arrowhead was read")
    return ok(False, f"no arrow {what} read")


def i_no_out_edges(px: Pixels, vp: VerificationPoint, spec: GraphSpec) -> Finding:
    (a,) = _pair(px, vp, spec)
    g = px.graph
    out = [e for e in g.edges if e.src == a and e.directed]
    if out:
        return fail("extra_element", len(out), f"{len(out)} arrows leave {g.nodes[a].text!r}")
    why = _unsure(px, spec, (a,))
    if why or any(a in (e.src, e.dst) and not e.directed for e in g.edges):
        raise Undecidable(why or f"a line at {g.nodes[a].text!r} has no arrowhead read")
    return ok(0, f"no arrow read leaving {g.nodes[a].text!r}")


def i_edge_count(px: Pixels, vp: VerificationPoint, spec: GraphSpec) -> Finding:
    g = px.graph
    why = _unsure(px, spec, tuple(range(len(g.nodes))))
    if why or len(px.bound(spec)) < len(spec.nodes):
        raise Undecidable(why or "some node is not read, so neither are its arrows")
    return count_finding(len(g.edges), vp.count(), "arrows read")


def i_graph_node_count(px: Pixels, vp: VerificationPoint, spec: Any) -> Finding:
    if not isinstance(spec, GraphSpec):
        return i_node_count(px, vp, spec)
    g, want = px.graph, vp.count()
    unbound = len(spec.nodes) - len(px.bound(spec))
    # fewer: decided only when exactly one node is missing and it is the one label not read;
    # more: only when every expected node is read besides the extra ones
    if len(g.nodes) < want and (g.unread or len(g.nodes) < want - 1 or unbound != want - len(g.nodes)):
        raise Undecidable(f"{len(g.nodes)} of {want} nodes read, {unbound} labels not bound, {g.unread} unread shapes")
    bound = px.bound(spec)
    written = [n.label for n in spec.nodes if n.id not in bound and occurrences(n.label, g.free, px.labels)]
    if len(g.nodes) < want and written:  # its label is drawn, so the node may be too, its outline unread
        raise Undecidable(f"{len(g.nodes)} of {want} nodes read, but {written} are written outside them")
    if len(g.nodes) > want and unbound:
        raise Undecidable(f"{len(g.nodes)} nodes read but {unbound} of the {want} expected are not among them")
    return count_finding(len(g.nodes), want, "closed shapes holding text")


CHECKS: dict[str, Callable[[Pixels, VerificationPoint, Any], Finding]] = {
    "point": i_point,
    "point_count": i_point_count,
    "length_label": i_figure,
    "node": i_node,
    "cluster": i_cluster,
    "edge_label": i_edge_label,
    "circle_count": i_circle_count,
    "node_count": i_graph_node_count,
    "shape": i_shape,
    "edge": i_edge,
    "no_edge": i_no_edge,
    "no_out_edges": i_no_out_edges,
    "edge_count": i_edge_count,
    **{check: i_figure for check in image_geometry.CHECKS_FROM_PIXELS},
    **{check: i_circuit for check in image_circuit.CHECKS_FROM_PIXELS},
}


class ImagePoint(BaseModel):
    id: str
    kind: str
    check: str
    component: str
    status: Status
    check_type: str | None = Field(None, description="the image check that decided it (None: no image check applies)")
    measured: Any = None
    reason: str
    pattern: str | None = None
    gated: bool = False
    critical: bool = True


class ImageVerdict(BaseModel):
    task_id: str
    passed: bool | None = Field(
        description="False if a critical point failed; True if every critical point "
        "was decided and passed; None: undecided"
    )
    decided: int
    undecided: int
    points: list[ImagePoint]
    error: str | None = Field(None, description="why the image could not be read, if it could not")
    seconds: float = 0.0


def decide(px: Pixels, task: Task, vp: VerificationPoint, enabled: frozenset[str] | set[str]) -> ImagePoint:
    """One point from pixels alone, ungated: pass / fail, or undecided when no trusted check applies."""
    base = {"id": vp.id, "kind": vp.kind, "check": vp.check, "component": vp.component, "critical": vp.critical}
    check_type = CHECK_TYPES.get(vp.check)
    if check_type is None:
        return ImagePoint(**base, status="undecided", reason=NEEDS_JUDGE)
    if check_type not in enabled:
        return ImagePoint(
            **base,
            status="undecided",
            check_type=check_type,
            reason=f"{NEEDS_JUDGE}: {check_type} is disabled by calibration",
        )
    px.labels = vocabulary(task.spec)
    try:
        finding = CHECKS[vp.check](px, vp, task.spec)
    except Undecidable as exc:
        return ImagePoint(**base, status="undecided", check_type=check_type, reason=f"{NEEDS_JUDGE}: {exc}")
    return ImagePoint(
        **base,
        status="pass" if finding.passed else "fail",
        check_type=check_type,
        measured=finding.measured,
        reason=finding.reason,
        pattern=finding.pattern,
    )


def verify_image(task: Task, png: object, enabled: frozenset[str] | set[str] = ENABLED) -> ImageVerdict:
    """Every point of `task` decided from the PNG bytes `png` where pixels can decide it."""
    start = time.perf_counter()
    try:
        px = Pixels(decode_png(png))
    except InputRejected as exc:
        points = [
            ImagePoint(
                id=vp.id,
                kind=vp.kind,
                check=vp.check,
                component=vp.component,
                status="fail",
                reason=str(exc),
                pattern=exc.pattern,
                critical=vp.critical,
            )
            for vp in task.points
        ]
        return ImageVerdict(
            task_id=task.id,
            passed=False,
            decided=len(points),
            undecided=0,
            points=points,
            error=str(exc),
            seconds=time.perf_counter() - start,
        )
    results: dict[str, ImagePoint] = {}
    for vp in task.points:
        parent = next((results[d] for d in vp.depends_on if results[d].status == "fail"), None)
        if parent is not None:
            results[vp.id] = ImagePoint(
                id=vp.id,
                kind=vp.kind,
                check=vp.check,
                component=vp.component,
                status="fail",
                reason=f"not checked: {parent.id} failed",
                pattern=parent.pattern,
                gated=True,
                critical=vp.critical,
            )
            continue
        results[vp.id] = decide(px, task, vp, enabled)
    points = list(results.values())
    critical = [p for p in points if p.critical]
    passed = (
        False
        if any(p.status == "fail" for p in critical)
        else (True if all(p.status == "pass" for p in critical) else None)
    )
    undecided = sum(p.status == "undecided" for p in points)
    return ImageVerdict(
        task_id=task.id,
        passed=passed,
        decided=len(points) - undecided,
        undecided=undecided,
        points=points,
        seconds=time.perf_counter() - start,
    )
