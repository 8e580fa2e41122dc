"""Mermaid 11's shape data, `A@{ shape: NAME, label: "..." }`: the shape names Mermaid documents and the
outline family each is read as, and the small YAML subset the braces hold.

*The names.* Mermaid 11.3 documents each shape by a short name and aliases (its flowchart syntax page,
"Expanded node shapes"); any other name -- a misspelling, one of its internal names such as `lean_right`
or `squareRect` -- makes Mermaid refuse the diagram ("No such shape"), so it is refused here too, by line.
Each is read as the family of the outline Mermaid draws, in the vocabulary the other readers and the checks
use (`box`, `rounded`, `stadium`, `circle`, `diamond`, `hexagon`, `parallelogram`, `trapezoid`,
`cylinder`, `triangle`, `flag`, `text`), the same family as the bracket syntax that draws that outline
(`A[[x]]` and `shape: subproc` are both boxes, `A(((x)))` and `dbl-circ` both circles, `A>x]` and `odd`
both flags). A rectangle with lines or a tag inside is a box; a straight-sided outline that is none of
these (a card's cut corner, an hourglass, a lightning bolt) is a `polygon`; a curved one (a document's
wavy edge, a half-rounded delay, braces) and a fork bar are `other`, so a check that wants a process box or
a terminator oval does not pass on them. Mermaid's own `flag` is paper tape (a wavy band), not the `>x]`
flag, and reads `other`.

*The braces.* Mermaid hands what is between `@{` and the first `}` outside a double-quoted string to a
YAML reader: on one line as a flow mapping (`key: value` pairs split by commas), over several lines as a
block mapping (one pair a line). Values are plain, double- or single-quoted scalars; a block scalar
(`label: |`) or a nested list or mapping is refused rather than half read.
"""

from __future__ import annotations

import re

FAMILIES: dict[str, tuple[str, ...]] = {
    "box": ("rect", "proc", "process", "rectangle",
            "fr-rect", "subprocess", "subproc", "framed-rectangle", "subroutine",
            "lin-rect", "lined-rectangle", "lined-process", "lin-proc", "shaded-process",
            "div-rect", "div-proc", "divided-rectangle", "divided-process",
            "win-pane", "internal-storage", "window-pane",
            "tag-rect", "tagged-rectangle", "tag-proc", "tagged-process",
            "st-rect", "procs", "processes", "stacked-rectangle"),
    "rounded": ("rounded", "event"),
    "stadium": ("stadium", "terminal", "pill"),
    "cylinder": ("cyl", "db", "database", "cylinder", "h-cyl", "das", "horizontal-cylinder",
                 "lin-cyl", "disk", "lined-cylinder"),
    "circle": ("circle", "circ", "dbl-circ", "double-circle", "sm-circ", "start", "small-circle",
               "fr-circ", "stop", "framed-circle", "f-circ", "junction", "filled-circle",
               "cross-circ", "summary", "crossed-circle"),
    "diamond": ("diam", "decision", "diamond", "question"),
    "hexagon": ("hex", "hexagon", "prepare"),
    "parallelogram": ("lean-r", "lean-right", "in-out", "lean-l", "lean-left", "out-in"),
    "trapezoid": ("trap-b", "priority", "trapezoid-bottom", "trapezoid",
                  "trap-t", "manual", "trapezoid-top", "inv-trapezoid"),
    "triangle": ("tri", "extract", "triangle", "flip-tri", "manual-file", "flipped-triangle"),
    "flag": ("odd",),
    "text": ("text",),
    "polygon": ("notch-rect", "card", "notched-rectangle", "notch-pent", "loop-limit", "notched-pentagon",
                "sl-rect", "manual-input", "sloped-rectangle", "hourglass", "collate",
                "bolt", "com-link", "lightning-bolt"),
    "other": ("doc", "document", "docs", "documents", "st-doc", "stacked-document", "lin-doc", "lined-document",
              "tag-doc", "tagged-document", "delay", "half-rounded-rectangle", "curv-trap", "curved-trapezoid",
              "display", "bow-rect", "stored-data", "bow-tie-rectangle", "flag", "paper-tape",
              "brace", "comment", "brace-l", "brace-r", "braces", "fork", "join"),
}
SHAPE_FAMILY = {name: family for family, names in FAMILIES.items() for name in names}
PAIR = re.compile(r"^\s*([A-Za-z_][\w-]*)\s*:(?:\s+(.*?)|\s*)\s*$", re.S)


class ShapeDataError(ValueError):
    """What in the braces is not read (the parser names its line)."""


def closing_brace(text: str, start: int) -> int:
    """Where the `}` that ends shape data opened just before `start` is: the first outside double quotes
    (Mermaid's lexer); -1 if none."""
    quoted = False
    for i in range(start, len(text)):
        ch = text[i]
        if ch == '"':
            quoted = not quoted
        elif ch == "}" and not quoted:
            return i
    return -1


def _split_commas(data: str) -> list[str]:
    out, start, quote = [], 0, ""
    for i, ch in enumerate(data):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "\"'":
            quote = ch
        elif ch == ",":
            out.append(data[start:i])
            start = i + 1
    out.append(data[start:])
    return out


def _scalar(value: str) -> str:
    value = value.strip()
    if value[:1] == '"':
        if len(value) < 2 or not value.endswith('"'):
            raise ShapeDataError(value)
        return value[1:-1]
    if value[:1] == "'":
        if len(value) < 2 or not value.endswith("'"):
            raise ShapeDataError(value)
        return value[1:-1].replace("''", "'")
    if value[:1] in ("|", ">", "[", "{", "&", "*", "!"):  # block scalars, collections, anchors, tags
        raise ShapeDataError(value)
    return value


def _quoted_breaks(data: str) -> str:
    """A line break inside a double-quoted string, with the indent after it, is a `<br/>` (Mermaid's lexer)."""
    parts = data.split('"')
    return '"'.join(re.sub(r"\r?\n\s*", "<br/>", p) if k % 2 else p for k, p in enumerate(parts))


def shape_data(data: str) -> dict[str, str]:
    """The `key: value` pairs between `@{` and `}` (see the module's docstring); the last of a repeated key."""
    data = _quoted_breaks(data)
    pieces = data.splitlines() if "\n" in data else _split_commas(data)
    out: dict[str, str] = {}
    for piece in pieces:
        if not piece.strip():
            continue
        m = PAIR.match(piece)
        if m is None:
            raise ShapeDataError(piece.strip())
        out[m.group(1)] = _scalar(m.group(2) or "")
    return out
