"""Graphviz DOT into the scene's graph layer, with our own small parser (linear time, no backtracking:
a model's DOT can be hostile; no layout is needed to check structure).

The grammar is Graphviz's: `[strict] (graph|digraph) [ID] { stmts }` with node, edge (chains,
subgraph operands, `dir=`) and attribute statements, scoped defaults, ports, quoted (`+`
concatenated) and HTML strings, comments. `subgraph cluster*` is a cluster (the only kind Graphviz
draws). Attributes that make Graphviz read files or link out (image, shapefile, fontpath, URL...)
are dropped and noted; HTML labels keep their text only; `style=invis` elements are not drawn.
Labels read as Graphviz shows them: character entities (`&gt;`, `&amp;`, `&#62;`) decoded in HTML
and quoted labels alike, record labels (`{a|<p> b}`) as their fields' text, an edge's text from
`label`, else `xlabel`, else `taillabel` / `headlabel`, a node's from `label`, else `xlabel` when
the label is empty. Input that is not DOT is an "unsupported construct X at line N" error.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field

from environments.prograf.parse.scene import Cluster, Edge, InputRejected, Node, Scene

MAX_CHARS = 100_000
MAX_DEPTH = 40
FILE_ATTRS = {"image", "imagepath", "shapefile", "fontpath", "fontnames", "stylesheet", "url", "href", "labelurl",
              "labelhref", "headurl", "headhref", "tailurl", "tailhref", "edgeurl", "edgehref", "target", "id"}
TOKEN = re.compile(r"""
    (?P<ws>\s+|//[^\n]*|/\*.*?\*/|^\#[^\n]*)
  | (?P<edgeop>->|--)
  | (?P<punct>[{}\[\];,=:])
  | (?P<qstr>"(?:[^"\\]|\\.)*")
  | (?P<num>-?(?:\.\d+|\d+(?:\.\d*)?))
  | (?P<id>[A-Za-z_\u0080-\uffff][A-Za-z_0-9\u0080-\uffff]*)
  | (?P<html><)
  | (?P<plus>\+)
""", re.X | re.S | re.M)
KEYWORDS = {"strict", "graph", "digraph", "node", "edge", "subgraph"}


class HtmlText(str):
    """The text of an HTML-like label, already decoded: escapes such as \\N and entities are not read twice."""


@dataclass
class Tok:
    kind: str  # edgeop, punct, id (ids, numbers, strings), kw
    text: str
    offset: int = 0  # where the token starts; DotParser.at turns it into a line number for an error


def unsupported(code: str, i: int) -> InputRejected:
    snippet = code[i:i + 30].split("\n", 1)[0]
    return InputRejected(f"DOT: unsupported construct {snippet!r} at line {code.count(chr(10), 0, i) + 1}")


def tokenize(code: str) -> list[Tok]:
    toks: list[Tok] = []
    i = 0
    while i < len(code):
        m = TOKEN.match(code, i)
        if not m:
            raise unsupported(code, i)
        offset = i
        kind = m.lastgroup or ""
        if kind == "html":
            end, depth = i, 0
            while end < len(code):
                depth += {"<": 1, ">": -1}.get(code[end], 0)
                end += 1
                if depth == 0:
                    break
            if depth:
                raise InputRejected("DOT: an HTML label is not closed")
            toks.append(Tok("html", code[i + 1:end - 1], offset))
            i = end
            continue
        i = m.end()
        text = m.group()
        if kind == "ws":
            continue
        if kind == "qstr":
            text = text[1:-1].replace('\\"', '"')
            if toks and toks[-1].kind == "plus":  # "a" + "b"
                toks.pop()
                toks[-1].text += text
                continue
            toks.append(Tok("id", text, offset))
        elif kind == "id" and text.lower() in KEYWORDS:
            toks.append(Tok("kw", text.lower(), offset))
        elif kind in ("id", "num"):
            toks.append(Tok("id", text, offset))
        else:
            toks.append(Tok(kind, text, offset))
    if any(t.kind == "plus" for t in toks):
        raise InputRejected("DOT: '+' joins two quoted strings only")
    return toks


@dataclass
class Scope:
    node: dict[str, str] = field(default_factory=dict)
    edge: dict[str, str] = field(default_factory=dict)
    graph: dict[str, str] = field(default_factory=dict)
    members: set[str] = field(default_factory=set)


class DotParser:
    def __init__(self, code: str):
        if len(code) > MAX_CHARS:
            raise InputRejected(f"DOT of {len(code)} characters (at most {MAX_CHARS})")
        self.code = code
        self.toks = tokenize(code)
        self.i = 0
        self.nodes: dict[str, dict[str, str]] = {}
        self.edges: list[tuple[str, str, dict[str, str]]] = []
        self.clusters: list[tuple[str, dict[str, str], set[str]]] = []
        self.notes: list[str] = []
        self.directed = True

    # -- token helpers
    def peek(self, k: int = 0) -> Tok | None:
        return self.toks[self.i + k] if self.i + k < len(self.toks) else None

    def take(self, kind: str | None = None, text: str | None = None) -> Tok:
        tok = self.peek()
        if tok is None or (kind and tok.kind != kind) or (text and tok.text != text):
            want = text or kind or "a token"
            raise InputRejected(f"DOT: expected {want!r}, got {tok.text if tok else 'end of input'!r}{self.at(tok)}")
        self.i += 1
        return tok

    def accept(self, text: str) -> bool:
        tok = self.peek()
        if tok is not None and tok.text == text and tok.kind in ("punct", "edgeop", "kw"):
            self.i += 1
            return True
        return False

    def ident(self) -> str:
        tok = self.take()
        if tok.kind not in ("id", "html"):
            raise InputRejected(f"DOT: expected a name, got {tok.text!r}: unsupported construct{self.at(tok)}")
        return html_text(tok.text, self.notes) if tok.kind == "html" else tok.text

    def at(self, tok: Tok | None) -> str:
        return f" at line {self.code.count(chr(10), 0, tok.offset) + 1}" if tok is not None else " at the end"

    # -- grammar
    def parse(self) -> None:
        self.accept("strict")
        head = self.take()
        if head.kind != "kw" or head.text not in ("graph", "digraph"):
            raise InputRejected(f"DOT: a graph starts with graph or digraph, not {head.text!r}{self.at(head)}")
        self.directed = head.text == "digraph"
        if (name := self.peek()) is not None and name.kind in ("id", "html"):
            self.ident()
        self.take("punct", "{")
        self.statements(Scope(), 0)
        self.take("punct", "}")
        if (extra := self.peek()) is not None:  # Graphviz would draw a second graph; we read one
            raise InputRejected(f"DOT: unsupported construct {extra.text!r} after the graph's closing brace"
                                f"{self.at(extra)} (one graph per answer)")

    def statements(self, scope: Scope, depth: int) -> None:
        if depth > MAX_DEPTH:
            raise InputRejected(f"DOT: subgraphs nested deeper than {MAX_DEPTH}")
        while (tok := self.peek()) is not None and tok.text != "}":
            self.statement(scope, depth)
            self.accept(";")

    def statement(self, scope: Scope, depth: int) -> None:
        tok = self.peek()
        assert tok is not None
        if tok.kind == "kw" and tok.text in ("graph", "node", "edge"):
            self.i += 1
            attrs = self.attr_lists()
            getattr(scope, tok.text).update(attrs)
            return
        if tok.kind in ("id", "html") and (eq := self.peek(1)) is not None and eq.text == "=":
            key = self.ident().lower()
            self.take("punct", "=")
            scope.graph[key] = self.ident()
            return
        operands = [self.operand(scope, depth)]
        while (op := self.peek()) is not None and op.kind == "edgeop":
            self.i += 1
            operands.append(self.operand(scope, depth))
        attrs = self.attr_lists() if (nxt := self.peek()) is not None and nxt.text == "[" else {}
        if len(operands) == 1:
            for name in operands[0]:
                self.nodes[name].update(attrs)
            return
        for left, right in zip(operands, operands[1:]):
            for a in left:
                for b in right:
                    self.edges.append((a, b, {**scope.edge, **attrs}))

    def operand(self, scope: Scope, depth: int) -> list[str]:
        tok = self.peek()
        if tok is not None and (tok.text == "{" or (tok.kind == "kw" and tok.text == "subgraph")):
            return sorted(self.subgraph(scope, depth))
        name = self.ident()
        while self.accept(":"):  # ports
            self.ident()
        self.touch(name, scope)
        return [name]

    def touch(self, name: str, scope: Scope) -> None:
        if name not in self.nodes:
            self.nodes[name] = dict(scope.node)
        scope.members.add(name)

    def subgraph(self, parent: Scope, depth: int) -> set[str]:
        name = ""
        if self.accept("subgraph"):
            tok = self.peek()
            if tok is not None and tok.kind in ("id", "html"):
                name = self.ident()
        self.take("punct", "{")
        scope = Scope(dict(parent.node), dict(parent.edge), {})
        self.statements(scope, depth + 1)
        self.take("punct", "}")
        if name.lower().startswith("cluster"):
            self.clusters.append((name, scope.graph, set(scope.members)))
        parent.members |= scope.members
        return scope.members

    def attr_lists(self) -> dict[str, str]:
        attrs: dict[str, str] = {}
        while self.accept("["):
            while not self.accept("]"):
                key = self.ident().lower()
                value = "true"
                if self.accept("="):
                    value = self.ident()
                if key in FILE_ATTRS:
                    self.notes.append(f"dropped attribute {key}")
                else:
                    attrs[key] = value
                self.accept(",") or self.accept(";")
        return attrs


def html_text(label: str, notes: list[str]) -> str:
    """An HTML-like label's text: tags (cells, fonts, <BR/>) are spacing, entities are their characters."""
    if re.search(r"<\s*img", label, re.I):
        notes.append("dropped an <IMG> from an HTML label")
    return HtmlText(" ".join(html.unescape(re.sub(r"<[^>]*>", " ", label)).split()))


def label_text(raw: str | None, name: str, record: bool = False) -> str:
    if isinstance(raw, HtmlText):
        return str(raw)
    text = name if raw is None else raw.replace("\\N", name).replace("\\G", "")
    if record:  # a record's fields: braces and bars lay them out, <port> names them; neither is shown
        text = re.sub(r"(?<!\\)<[^>]*>", " ", text)
        text = re.sub(r"(?<!\\)[{}|]", " ", text).replace("\\{", "{").replace("\\}", "}").replace("\\|", "|")
    # Graphviz decodes character entities in ordinary labels too (&amp; shows as &)
    return " ".join(html.unescape(re.sub(r"\\[nlr]", " ", text)).split())


def edge_text(attrs: dict[str, str]) -> str:
    """The text that names an edge: its label, else its external label, else the label at its tail or head
    (a decision's yes / no is often put at the tail)."""
    for key in ("label", "xlabel", "taillabel", "headlabel"):
        text = label_text(attrs.get(key, ""), "")
        if text:
            return text
    return ""


def dot_family(shape: str, style: str) -> str:
    shape = shape.lower()
    if shape in ("box", "rect", "rectangle", "square", "record", "component", "note", "tab", "folder"):
        return "rounded" if "rounded" in style else "box"
    return {"mrecord": "rounded", "oval": "ellipse", "ellipse": "ellipse", "circle": "circle",
            "doublecircle": "circle", "point": "circle", "diamond": "diamond", "mdiamond": "diamond",
            "parallelogram": "parallelogram", "hexagon": "hexagon", "cylinder": "cylinder",
            "plaintext": "text", "plain": "text", "none": "text", "underline": "text"}.get(shape, shape)


def parse_dot(code: str) -> Scene:
    parser = DotParser(code)
    parser.parse()
    scene = Scene(format="dot", notes=parser.notes)
    visible = set()
    for name, attrs in parser.nodes.items():
        style = attrs.get("style", "").lower()
        if "invis" in style:
            scene.hidden += 1
            continue
        visible.add(name)
        shape = attrs.get("shape", "ellipse")
        label = label_text(attrs.get("label"), name, record=shape.lower() in ("record", "mrecord"))
        if not label and attrs.get("xlabel"):  # an empty box with its text outside it
            label = label_text(attrs["xlabel"], name)
        scene.nodes.append(Node(key=name, label=label, shape=dot_family(shape, style)))
    for a, b, attrs in parser.edges:
        if a not in visible or b not in visible or "invis" in attrs.get("style", "").lower():
            scene.hidden += 1
            continue
        label = edge_text(attrs)
        default = "forward" if parser.directed else "none"
        way = attrs.get("dir", default).lower()
        way = way if way in ("forward", "back", "both", "none") else default  # Graphviz ignores another value
        # the marks Graphviz draws: one at each end `dir` sends one to, unless that end's arrow is "none"
        # (a head of another shape -- dot, tee, inv -- is still a head)
        head = way in ("forward", "both") and attrs.get("arrowhead", "").strip().lower() != "none"
        tail = way in ("back", "both") and attrs.get("arrowtail", "").strip().lower() != "none"
        if head and tail:
            scene.edges += [Edge(a, b, label), Edge(b, a, label)]
        else:
            scene.edges.append(Edge(b, a, label) if tail else Edge(a, b, label, directed=head))
    for name, graph_attrs, members in parser.clusters:
        if "invis" in graph_attrs.get("style", "").lower():
            scene.hidden += 1
            continue
        scene.clusters.append(Cluster(key=name, label=label_text(graph_attrs.get("label", ""), ""),
                                      members=members & visible))
    for node in scene.nodes:  # the innermost cluster: clusters are recorded innermost first
        node.cluster = next((c.key for c in scene.clusters if node.key in c.members), None)
    return scene
