"""A small HTML tree for Mind2Web snapshots: parse a page (the standard library's tolerant parser),
number its elements the way a browser's DOM would (`backend_node_id`, document order), write the
cleaned HTML Mind2Web stores, and describe one element as the short snippet a model reads.

Only what the protocol needs: elements, attributes, text, and which elements can be acted on
(links, buttons, fields). Page text is data: nothing here runs or fetches anything.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from html import escape
from html.parser import HTMLParser

VOID = frozenset("area base br col embed hr img input link meta param source track wbr".split())
DROPPED = frozenset("head script style noscript template".split())  # never part of the cleaned page
# Attributes the cleaned HTML keeps (Mind2Web's cleaning keeps what identifies and labels an element).
KEPT = ("id", "name", "type", "value", "placeholder", "aria-label", "role", "href", "action", "method",
        "checked", "selected", "disabled", "for", "title", "alt")
SNIPPET_ATTRS = ("type", "name", "value", "placeholder", "aria-label", "href", "checked")
SNIPPET_TEXT = 80
TEXT_INPUTS = frozenset("text search number email password tel url date".split())


@dataclass
class Node:
    tag: str
    attrs: dict[str, str] = field(default_factory=dict)
    children: list["Node | str"] = field(default_factory=list)
    parent: "Node | None" = None
    bid: str = ""  # backend_node_id

    def elements(self) -> Iterator[Node]:
        """This node and every element below it, in document order."""
        yield self
        for c in self.children:
            if isinstance(c, Node):
                yield from c.elements()

    def text(self) -> str:
        parts: list[str] = []
        for c in self.children:
            parts.append(c if isinstance(c, str) else c.text())
        return " ".join(" ".join(parts).split())

    def ancestor(self, tag: str) -> "Node | None":
        node = self.parent
        while node is not None and node.tag != tag:
            node = node.parent
        return node


class _Builder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Node("#document")
        self.stack = [self.root]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        node = Node(tag, {k: ("" if v is None else v) for k, v in attrs}, parent=self.stack[-1])
        self.stack[-1].children.append(node)
        if tag not in VOID:
            self.stack.append(node)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        node = Node(tag, {k: ("" if v is None else v) for k, v in attrs}, parent=self.stack[-1])
        self.stack[-1].children.append(node)

    def handle_endtag(self, tag: str) -> None:
        # Tolerant: close up to the matching open element; a stray end tag is ignored.
        for i in range(len(self.stack) - 1, 0, -1):
            if self.stack[i].tag == tag:
                del self.stack[i:]
                return

    def handle_data(self, data: str) -> None:
        if data.strip():
            self.stack[-1].children.append(data)


def parse(html: str) -> Node:
    builder = _Builder()
    builder.feed(html)
    builder.close()
    return builder.root


def number(root: Node) -> Node:
    """Give every element a backend_node_id in document order (1, 2, ...) -- or, for cleaned HTML that
    already carries them, keep those (an element without one gets none, so no made-up id can collide)."""
    nodes = list(root.elements())
    carried = any("backend_node_id" in n.attrs for n in nodes)
    for i, node in enumerate(nodes):
        node.bid = node.attrs.get("backend_node_id", "") if carried else (str(i) if i else "")
    return root


def by_id(root: Node) -> dict[str, Node]:
    return {n.bid: n for n in root.elements() if n.bid}


def cleaned_html(root: Node) -> str:
    """The page as Mind2Web stores it: head, scripts and styles dropped, the kept attributes and a
    `backend_node_id` on every element, whitespace collapsed."""
    out: list[str] = []

    def write(node: Node | str) -> None:
        if isinstance(node, str):
            out.append(escape(re.sub(r"\s+", " ", node), quote=False))  # one space where the page had any
            return
        if node.tag in DROPPED:
            return
        if node.tag == "#document":
            for c in node.children:
                write(c)
            return
        attrs = "".join(f' {k}="{escape(v)}"' for k, v in node.attrs.items() if k in KEPT)
        out.append(f'<{node.tag} backend_node_id="{node.bid}"{attrs}>')
        for c in node.children:
            write(c)
        if node.tag not in VOID:
            out.append(f"</{node.tag}>")

    write(root)
    return "".join(out)


def actionable(node: Node) -> bool:
    """Elements a user can act on: links, buttons and form fields (not hidden ones)."""
    if node.tag == "a":
        return "href" in node.attrs
    if node.tag == "input":
        return node.attrs.get("type", "text") != "hidden"
    return node.tag in ("button", "select", "textarea")


def role(node: Node) -> str:
    """The element's role as Mind2Web's action_reprs name it ([link], [button], [textbox], ...)."""
    if node.tag == "a":
        return "link"
    if node.tag == "input":
        kind = node.attrs.get("type", "text")
        return {"checkbox": "checkbox", "radio": "radio", "submit": "button", "button": "button"}.get(kind, "textbox")
    return {"select": "combobox", "textarea": "textbox"}.get(node.tag, node.tag)


def label_of(node: Node) -> str:
    """What names a field: aria-label, the enclosing <label>'s text, a placeholder, its name."""
    if node.attrs.get("aria-label"):
        return node.attrs["aria-label"]
    label = node.ancestor("label")
    if label is not None and label.text():
        return label.text()
    return node.attrs.get("placeholder") or node.attrs.get("name", "")


def describe(node: Node) -> str:
    """The element's human-readable name (its text, or its label for a field)."""
    if node.tag in ("input", "select", "textarea") and node.attrs.get("type") not in ("submit", "button"):
        return label_of(node)
    return node.text() or node.attrs.get("value", "") or node.attrs.get("aria-label", "")


def snippet(node: Node) -> str:
    """The element as a short HTML snippet, e.g. `<button type="submit">Add to cart</button>`;
    a field also names its label."""
    attrs = "".join(f' {k}="{escape(node.attrs[k])}"' for k in SNIPPET_ATTRS if k in node.attrs)
    if node.tag in VOID:
        label = label_of(node)
        return f"<{node.tag}{attrs}>" + (f" (label: {label[:SNIPPET_TEXT]})" if label else "")
    text = node.text()[:SNIPPET_TEXT] or (label_of(node)[:SNIPPET_TEXT] if node.tag in ("select", "textarea") else "")
    return f"<{node.tag}{attrs}>{escape(text, quote=False)}</{node.tag}>"


def candidate_record(node: Node, target: bool) -> dict[str, object]:
    """A candidate in the release's form (attributes as a JSON string holding the backend_node_id)."""
    attrs = dict(node.attrs) | {"backend_node_id": node.bid}
    return {"tag": node.tag, "attributes": json.dumps(attrs, ensure_ascii=False), "backend_node_id": node.bid,
            "is_original_target": target, "is_top_level_target": target}
