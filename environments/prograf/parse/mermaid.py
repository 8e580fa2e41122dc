"""A Mermaid flowchart subset into the scene's graph layer.

`flowchart|graph DIR`, node shapes (`[box]`, `(rounded)`, `([stadium])`, `[[subroutine]]`,
`[(cylinder)]`, `((circle))`, `{diamond}`, `{{hexagon}}`, `[/parallelogram/]`, `>flag]`), links as
Mermaid's lexer reads them (solid, thick `==` and dotted `-.-`, any length, ending in an arrow `>`, a
circle `o`, a cross `x` or nothing; two-headed `<-->`, `o--o`, `x--x`; `~~~` invisible; labelled
`|label|` or `-- label -->`; `A --o B` is an arrow A -> B with a circle head, see
`MermaidParser.link`; Mermaid 11's edge ids, `A e1@--> B`), chains and `&` groups, `subgraph id [title] ...
end`, and Mermaid 11.3's shape data, `A@{ shape: NAME, label: "..." }` (one line or several, after a
bracket shape or alone, in links and `&` groups; each documented shape name read as its outline's family,
any other refused: `mermaid_shapes.py`; an `icon:` or `img:` node refused). `e1@{ animate: true }` on an
edge id sets how the edge moves, no structure, and is skipped. `click` (callbacks and
links) is dropped and noted; style, classDef, class and direction lines and a node's `:::class` do
not change structure and are skipped; `%%` comments and a leading `---` front-matter block are
skipped. Labels
read as Mermaid shows them: quotes, HTML tags and markdown marks removed, entities (`&gt;`,
Mermaid's `#gt;` / `#35;`) decoded. Anything else -- a link to a subgraph, an edge id used as a node, a
statement that is not a node or a link -- is an "unsupported construct X at line N" error.
"""

from __future__ import annotations

import html
import re

from environments.prograf.parse.mermaid_shapes import SHAPE_FAMILY, ShapeDataError, closing_brace, shape_data
from environments.prograf.parse.scene import Cluster, Edge, InputRejected, Node, Scene

MAX_CHARS = 50_000
MAX_DEPTH = 40
SHAPES = [  # (opening, closing, family), longest opening first
    ("(((", ")))", "circle"), ("((", "))", "circle"), ("([", "])", "stadium"), ("[[", "]]", "box"),
    ("[(", ")]", "cylinder"), ("{{", "}}", "hexagon"), ("[/", "/]", "parallelogram"), ("[\\", "\\]", "parallelogram"),
    ("[/", "\\]", "trapezoid"), ("[\\", "/]", "trapezoid"), ("[", "]", "box"), ("(", ")", "rounded"),
    ("{", "}", "diamond"), (">", "]", "flag"),
]
NODE_ID = re.compile(r"\s*(\w+)", re.U)
# Mermaid's own link tokens (its lexer, flow.jison): a whole link -- solid `--+` ending in - x o >, thick `==+`
# ending in = x o >, dotted `-.+-` with an optional x o > -- each with an optional x o < before it, or `~~~`; and
# the opening of a link with its text inside (`-- text -->`, `== text ==>`, `-. text .->`)
WHOLE = re.compile(r"\s*(?P<tok>[xo<]?(?:--+[-xo>]|==+[=xo>]|-?\.+-[xo>]?)|~~~+)\s*")
OPENING = re.compile(r"\s*(?P<tok>[xo<]?(?:--|==|-\.))\s*")
CLOSING = {"--": re.compile(r"([xo<]?--+[-xo>])\s*"), "==": re.compile(r"([xo<]?==+[=xo>])\s*"),
           "-.": re.compile(r"([xo<]?-?\.+-[xo>]?)\s*")}
INSIDE = {"--": "--", "==": "==", "-.": ".-"}  # what a link's text cannot hold: its closing starts there
# Mermaid 11's edge id before a link: a name, then `@` not opening shape data or a string (its lexer's LINK_ID
# takes any run of characters but space and quotes; a name is what ids are, and it keeps an `@` inside a
# link's text, `A -->|me@x| B`, the text it is)
LINK_ID = re.compile(r'\s*(?P<id>\w[\w.-]*)@(?=[^{"])')
PIPE = re.compile(r"\s*\|(?P<text>[^|]*)\|")
HEADS = {">": "arrow", "o": "circle", "x": "cross"}  # the mark at a link's end
TAILS = {"<": ">", "o": "o", "x": "x"}  # the mark before a link that makes it two-headed with that end
HEADER = re.compile(r"^\s*(flowchart|graph)(?:\s+(TB|TD|BT|RL|LR))?\s*;?\s*$", re.I)


CLASS_SUFFIX = re.compile(r":::[\w-]+")


def _entity(m: re.Match[str]) -> str:
    """Mermaid writes entities as #name; or #35; -- decoded only when they name a character."""
    code = f"&{m.group(1)};"
    text = html.unescape(code)
    return text if text != code else m.group()


def clean_label(text: str) -> str:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] == '"':
        text = text[1:-1]
    text = re.sub(r"<br\s*/?>", " ", text, flags=re.I)
    text = re.sub(r"<[^>]*>", "", text).replace("`", "").replace("**", "")
    text = html.unescape(re.sub(r"#(\w+);", _entity, text))
    return " ".join(text.split())


class MermaidParser:
    def __init__(self) -> None:
        self.nodes: dict[str, Node] = {}
        self.edges: list[Edge] = []
        self.clusters: list[Cluster] = []
        self.stack: list[Cluster] = []
        self.notes: list[str] = []
        self.hidden = 0
        self.line = 0  # the source line being read, for errors
        self.node_lines: dict[str, int] = {}  # where each node was first named
        self.edge_ids: set[str] = set()  # Mermaid 11's `A e1@--> B`

    def unsupported(self, what: str, why: str = "") -> InputRejected:
        return InputRejected(f"Mermaid: unsupported construct {what.strip()[:40]!r} at line {self.line}"
                             + (f" ({why})" if why else ""))

    def node_ref(self, text: str, pos: int) -> tuple[str, int]:
        m = NODE_ID.match(text, pos)
        if not m:
            raise InputRejected(f"Mermaid: expected a node at {text[pos:pos + 20]!r}: unsupported construct"
                                f" at line {self.line}")
        key, pos = m.group(1), m.end()
        label, family = None, None
        for opening, closing, fam in SHAPES:
            if text.startswith(opening, pos):
                start = pos + len(opening)
                if text.startswith('"', start):
                    q = text.find('"', start + 1)
                    end = text.find(closing, q + 1) if q >= 0 else -1
                else:
                    end = text.find(closing, start)
                if end < 0:
                    continue
                label, family, pos = clean_label(text[start:end]), fam, end + len(closing)
                break
        if (cm := CLASS_SUFFIX.match(text, pos)) is not None:  # A:::hot only styles the node
            pos = cm.end()
        data: dict[str, str] = {}
        if text.startswith("@{", pos):  # Mermaid's grammar: the data after the bracket shape and the class
            end = closing_brace(text, pos + 2)
            if end < 0:
                raise self.unsupported(text[pos:])
            try:
                data = shape_data(text[pos + 2:end])
            except ShapeDataError as exc:
                raise self.unsupported(f"{key}@{{ {exc} }}", "shape data is key: value pairs,"
                                       " values plain or quoted") from None
            pos = end + 1
            if key in self.edge_ids:  # an edge's data (animate, animation, curve): how it is drawn, not what
                self.notes.append(f"skipped the data of edge {key!r} at line {self.line}")
                return key, pos
        if key in self.edge_ids:
            raise self.unsupported(key, "an edge id used as a node")
        if "icon" in data or "img" in data:
            raise self.unsupported(f"{key}@{{ {'icon' if 'icon' in data else 'img'}: ... }}",
                                   "an icon or image node is not read")
        if "shape" in data:
            if data["shape"] not in SHAPE_FAMILY:
                raise self.unsupported(f"shape: {data['shape']}", "not a shape name Mermaid documents; see its"
                                       " flowchart syntax, expanded node shapes")
            family = SHAPE_FAMILY[data["shape"]]
        if data.get("label"):
            label = clean_label(data["label"])
        node = self.nodes.get(key)
        if node is None:
            node = self.nodes[key] = Node(key=key, label=key, shape="box")
            self.node_lines[key] = self.line
        if label is not None:
            node.label = label
        if family is not None:
            node.shape = family
        for c in self.stack:
            c.members.add(key)
        if self.stack and node.cluster is None:
            node.cluster = self.stack[-1].key
        return key, pos

    def group(self, text: str, pos: int) -> tuple[list[str], int]:
        keys = []
        while True:
            key, pos = self.node_ref(text, pos)
            keys.append(key)
            m = re.match(r"\s*&\s*", text[pos:])
            if not m:
                return keys, pos
            pos += m.end()

    def statement(self, line: str) -> None:
        word = line.split(None, 1)[0].lower() if line.split() else ""
        if word == "subgraph":
            rest = line[len("subgraph"):].strip()
            m = re.match(r"^([\w\-.]+)\s*\[(.*)\]\s*$", rest)
            key, title = (m.group(1), clean_label(m.group(2))) if m else (rest.strip('"') or f"sub{len(self.clusters)}",
                                                                          clean_label(rest))
            if len(self.stack) >= MAX_DEPTH:  # each node joins every open subgraph: depth bounds that work
                raise InputRejected(f"Mermaid: subgraphs nested deeper than {MAX_DEPTH} at line {self.line}")
            cluster = Cluster(key=key, label=title)
            self.clusters.append(cluster)
            self.stack.append(cluster)
            return
        if word == "end":
            if not self.stack:
                raise InputRejected("Mermaid: 'end' without a subgraph")
            self.stack.pop()
            return
        if word == "click":
            self.notes.append("dropped a click directive")
            return
        if word in ("classdef", "class", "style", "linkstyle", "direction"):
            return
        left, pos = self.group(line, 0)
        while pos < len(line):
            link = self.read_link(line, pos)
            if link is None:
                if line[pos:].strip():
                    raise self.unsupported(line[pos:])
                break
            kind, label, pos = link
            right, pos = self.group(line, pos)
            for a in left:
                for b in right:
                    self.link(a, b, kind, label)
            left = right

    def read_link(self, line: str, pos: int) -> tuple[str, str, int] | None:
        """The link at `pos` as Mermaid's lexer reads it: (kind, label, where the next node starts), kind one of
        open, head (one mark at the target: arrow, circle or cross), both (the same mark at both ends) or
        hidden; None when no link starts there. Mermaid draws only the end mark of a link whose marks differ
        (`o-->` is an arrow): read so, with a note; a text link whose two ends disagree (`x-- t -->`) is an error."""
        if (lid := LINK_ID.match(line, pos)) is not None:
            link_id = lid.group("id")
            if link_id in self.nodes:
                raise self.unsupported(f"{link_id}@", "an edge id that is a node's id")
            self.edge_ids.add(link_id)
            pos = lid.end()
            if not (WHOLE.match(line, pos) or OPENING.match(line, pos)):
                raise self.unsupported(line[lid.start():])
        m = WHOLE.match(line, pos)
        if m:
            tok = m.group("tok")
            if tok.startswith("~"):
                kind = "hidden"
            else:
                kind = self.link_kind(tok)
            p = PIPE.match(line, m.end())
            return kind, clean_label(p.group("text")) if p else "", p.end() if p else m.end()
        m = OPENING.match(line, pos)
        if not m:
            return None
        opening = m.group("tok")
        stroke = opening[1:] if opening[0] in TAILS else opening
        start = m.end()
        i = line.find(INSIDE[stroke], start)  # the first place the text cannot go on: its closing starts there
        while stroke == "-." and i > start and line[i - 1] == ".":
            i -= 1
        i -= int(stroke == "-." and i > start and line[i - 1] == "-")
        i -= int(i > start and line[i - 1] in TAILS)
        end = CLOSING[stroke].match(line, i) if i >= 0 else None
        if end is None:
            raise self.unsupported(line[pos:])
        text = line[start:i]
        kind = self.link_kind(end.group(1))
        if opening[0] in TAILS:  # `<-- text -->`: the opening's mark must be the closing's (Mermaid: else INVALID)
            if kind != "head" or TAILS[opening[0]] != end.group(1)[-1]:
                raise self.unsupported(line[pos:end.end()])
            kind = "both"
        return kind, clean_label(text), end.end()

    def link_kind(self, tok: str) -> str:
        head = tok[-1] if tok[-1] in HEADS else None
        tail = tok[0] if tok[0] in TAILS else None
        if tail is not None and head is not None and TAILS[tail] == head:
            return "both"
        if tail is not None:
            self.notes.append(f"Mermaid draws only the end mark of {tok!r} at line {self.line}: read as {tok[1:]!r}")
        return "open" if head is None else "head"

    def link(self, a: str, b: str, kind: str, label: str) -> None:
        """One link as the relation it draws. A circle or cross head is a head: Mermaid's docs list `--o` and
        `--x` among its arrow types and `o--o`, `x--x` with `<-->` as multi-directional arrows, and it draws
        each mark at the end it is written at, so `A --o B` is an arrow A -> B and `A x--x B` one each way."""
        for key in (a, b):
            if key in self.edge_ids:  # Mermaid would link a node it never draws
                raise self.unsupported(key, "an edge id used as a node")
        if kind == "hidden":
            self.hidden += 1
        elif kind == "both":
            self.edges += [Edge(a, b, label), Edge(b, a, label)]
        else:
            self.edges.append(Edge(a, b, label, directed=kind == "head"))


ENTITY_END = re.compile(r"[#&]#?\w+$")


def split_statements(line: str) -> list[str]:
    """A line's statements: `;` ends one, except inside quotes or as the end of an entity (`#gt;`, `&amp;`)."""
    if ";" not in line:  # most lines: nothing to split
        return [line]
    out, start, quoted = [], 0, False
    for i, ch in enumerate(line):
        if ch == '"':
            quoted = not quoted
        elif ch == ";" and not quoted and not ENTITY_END.search(line, max(start, i - 12), i):
            out.append(line[start:i])
            start = i + 1
    out.append(line[start:])
    return out


def join_shape_data(lines: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """Shape data written over several lines (`A@{` ... `}`) joined to the line that opens it, numbered by
    that line; each character looked at once."""
    out: list[tuple[int, str]] = []
    held: tuple[int, str] | None = None
    inside = quoted = False
    for number, line in lines:
        held = (number, line) if held is None else (held[0], held[1] + "\n" + line)
        prev = ""
        for ch in line:
            if inside:
                if ch == '"':
                    quoted = not quoted
                elif ch == "}" and not quoted:
                    inside = False
            elif prev == "@" and ch == "{":
                inside, quoted = True, False
            prev = ch
        if not inside:
            out.append(held)
            held = None
    if held is not None:  # never closed: the node's reader names its line
        out.append(held)
    return out


def parse_mermaid(code: str) -> Scene:
    if len(code) > MAX_CHARS:
        raise InputRejected(f"Mermaid of {len(code)} characters (at most {MAX_CHARS})")
    numbered = [(i + 1, ln.split("%%", 1)[0].strip()) for i, ln in enumerate(code.splitlines())]
    lines = [(n, ln) for n, ln in numbered if ln]
    if lines and lines[0][1] == "---":  # YAML front matter (title, config) before the diagram
        close = next((k for k in range(1, len(lines)) if lines[k][1] == "---"), None)
        if close is None:
            raise InputRejected("Mermaid: the front matter opened by '---' is not closed")
        lines = lines[close + 1:]
    if not lines or not HEADER.match(lines[0][1]):
        raise InputRejected("Mermaid: the first line must be 'flowchart TD' (or graph, with TB/TD/BT/RL/LR)")
    parser = MermaidParser()
    for number, line in join_shape_data(lines[1:]):
        parser.line = number
        for stmt in split_statements(line):
            if stmt.strip():
                parser.statement(stmt.strip())
    if parser.stack:
        raise InputRejected(f"Mermaid: subgraph {parser.stack[-1].key!r} has no 'end'")
    clashing = sorted(set(parser.nodes) & {c.key for c in parser.clusters})
    if clashing:  # a link to a subgraph would otherwise be read as a link to a node that is not drawn
        raise InputRejected(f"Mermaid: unsupported construct {clashing[0]!r} used as a node and a subgraph"
                            f" at line {parser.node_lines.get(clashing[0], 0)}")
    scene = Scene(format="mermaid", notes=parser.notes, hidden=parser.hidden)
    scene.nodes = list(parser.nodes.values())
    scene.edges = parser.edges
    scene.clusters = sorted(parser.clusters, key=lambda c: len(c.members))
    return scene
