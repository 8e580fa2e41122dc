"""A Mermaid flowchart subset into the scene's graph layer.

`flowchart|graph DIR`, node shapes (`[box]`, `(rounded)`, `([stadium])`, `[[subroutine]]`,
`[(cylinder)]`, `((circle))`, `{diamond}`, `{{hexagon}}`, `[/parallelogram/]`, `>flag]`), links
(`-->`, `---`, `-.->`, `==>`, `<-->`, `--o`, `--x`, with `|label|` or `-- label -->`), chains and `&`
groups, `subgraph id [title] ... end`. `click` (callbacks and links) is dropped and noted; style,
class and direction lines do not change structure and are skipped; `~~~` links are invisible.
"""

from __future__ import annotations

import re

from environments.prograf.scene import Cluster, Edge, InputRejected, Node, Scene

MAX_CHARS = 50_000
SHAPES = [  # (opening, closing, family), longest opening first
    ("(((", ")))", "circle"), ("((", "))", "circle"), ("([", "])", "stadium"), ("[[", "]]", "box"),
    ("[(", ")]", "cylinder"), ("{{", "}}", "hexagon"), ("[/", "/]", "parallelogram"), ("[\\", "\\]", "parallelogram"),
    ("[/", "\\]", "trapezoid"), ("[\\", "/]", "trapezoid"), ("[", "]", "box"), ("(", ")", "rounded"),
    ("{", "}", "diamond"), (">", "]", "flag"),
]
NODE_ID = re.compile(r"\s*(\w+)", re.U)
LINK = re.compile(r"""\s*(?:
    (?P<inline>(?P<lo><)?(?:--|==|-\.)\s*(?P<itext>[^|>\-=.][^|]*?)\s*(?P<ihead>-->|==>|\.->|---|===|\.-|--x|--o))
  | (?P<plain><?(?:-{2,}>|={2,}>|-\.+->|-{3,}|={3,}|-\.+-|~~~|--[ox]|<-->))
)\s*(?:\|(?P<ptext>[^|]*)\|)?""", re.X)
HEADER = re.compile(r"^\s*(flowchart|graph)(?:\s+(TB|TD|BT|RL|LR))?\s*;?\s*$", re.I)


def clean_label(text: str) -> str:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] == '"':
        text = text[1:-1]
    text = re.sub(r"<br\s*/?>", " ", text, flags=re.I)
    text = re.sub(r"<[^>]*>", "", text).replace("`", "").replace("**", "")
    return " ".join(text.split())


class MermaidParser:
    def __init__(self) -> None:
        self.nodes: dict[str, Node] = {}
        self.edges: list[Edge] = []
        self.clusters: list[Cluster] = []
        self.stack: list[Cluster] = []
        self.notes: list[str] = []
        self.hidden = 0

    def node_ref(self, text: str, pos: int) -> tuple[str, int]:
        m = NODE_ID.match(text, pos)
        if not m:
            raise InputRejected(f"Mermaid: expected a node at {text[pos:pos + 20]!r}")
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
        node = self.nodes.get(key)
        if node is None:
            node = self.nodes[key] = Node(key=key, label=key, shape="box")
        if label is not None and family is not None:
            node.label, node.shape = label, family
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
            m = LINK.match(line, pos)
            if not m:
                if line[pos:].strip():
                    raise InputRejected(f"Mermaid: cannot read {line[pos:pos + 30]!r}")
                break
            arrow = m.group("plain") or (m.group("lo") or "") + m.group("ihead")
            label = clean_label(m.group("ptext") or m.group("itext") or "")
            right, pos = self.group(line, m.end())
            for a in left:
                for b in right:
                    self.link(a, b, arrow, label)
            left = right

    def link(self, a: str, b: str, arrow: str, label: str) -> None:
        if arrow == "~~~":
            self.hidden += 1
            return
        head = arrow.endswith(">")
        if arrow.startswith("<") and head:
            self.edges += [Edge(a, b, label), Edge(b, a, label)]
        else:
            self.edges.append(Edge(a, b, label, directed=head))


def parse_mermaid(code: str) -> Scene:
    if len(code) > MAX_CHARS:
        raise InputRejected(f"Mermaid of {len(code)} characters (at most {MAX_CHARS})")
    lines = [ln.split("%%", 1)[0].strip() for ln in code.splitlines()]
    lines = [ln for ln in lines if ln]
    if not lines or not HEADER.match(lines[0]):
        raise InputRejected("Mermaid: the first line must be 'flowchart TD' (or graph, with TB/TD/BT/RL/LR)")
    parser = MermaidParser()
    for line in lines[1:]:
        for stmt in line.split(";"):
            if stmt.strip():
                parser.statement(stmt.strip())
    if parser.stack:
        raise InputRejected(f"Mermaid: subgraph {parser.stack[-1].key!r} has no 'end'")
    scene = Scene(format="mermaid", notes=parser.notes, hidden=parser.hidden)
    scene.nodes = list(parser.nodes.values())
    scene.edges = parser.edges
    scene.clusters = sorted(parser.clusters, key=lambda c: len(c.members))
    return scene
