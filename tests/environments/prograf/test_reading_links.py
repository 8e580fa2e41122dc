"""Issue 39, item 1, session 28: Mermaid's link kinds read as its lexer reads them (circle and cross heads,
two-headed links, thick and dotted strokes, any length, text inside) and schemdraw's Annotate and Wire read
with their real placement; what Mermaid or schemdraw would not draw is refused with its line."""

from __future__ import annotations

import re

import pytest

from environments.prograf.check.verify import verify
from environments.prograf.parse.mermaid import parse_mermaid
from environments.prograf.parse.scene import InputRejected


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

