"""The observation text: Chromium's accessibility tree (CDP `Accessibility.getFullAXTree`) as
WebArena-style lines, `[id] role 'name' prop: value`, indented by depth.

An element's id is its `backendDOMNodeId`: the same DOM node keeps its id for the life of the
page, so ids stay stable while the agent types into a form. Structural nodes without a name
(generic containers, ignored nodes) are left out and their children moved up, which keeps the
tree short; interactive elements are always kept.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

SKIP_ROLES = {"generic", "none", "InlineTextBox", "LineBreak", "ListMarker", "LabelText", "presentation"}
INTERACTIVE = {"link", "button", "textbox", "searchbox", "spinbutton", "checkbox", "radio", "combobox", "option",
               "listbox", "tab", "menuitem", "slider", "switch", "textarea"}
EDITABLE = {"textbox", "searchbox", "spinbutton", "combobox", "textarea"}
PROPS = ("focused", "checked", "selected", "expanded", "disabled", "required")
MAX_NAME = 200  # long names (page text) are cut; the agent can still read them via the page


@dataclass
class AxTree:
    text: str
    ids: dict[int, str]  # element id -> role, for every element shown
    title: str = ""  # the root's name: the page title


def _value(field: dict[str, Any] | None) -> Any:
    return None if not field else field.get("value")


def _name(node: dict[str, Any]) -> str:
    name = " ".join(str(_value(node.get("name")) or "").split())
    return name if len(name) <= MAX_NAME else name[:MAX_NAME] + "..."


def render(nodes: list[dict[str, Any]]) -> AxTree:
    """Lines for the nodes of one frame's full AX tree (the order CDP returns: root first)."""
    if not nodes:
        return AxTree("", {})
    by_id = {n["nodeId"]: n for n in nodes}
    children: dict[str, list[str]] = {n["nodeId"]: list(n.get("childIds", [])) for n in nodes}
    lines: list[str] = []
    ids: dict[int, str] = {}

    def visit(node_id: str, depth: int, parent_name: str, in_field: bool) -> None:
        node = by_id.get(node_id)
        if node is None:
            return
        role = str(_value(node.get("role")) or "")
        name = _name(node)
        backend = node.get("backendDOMNodeId")
        shown = not node.get("ignored") and role not in SKIP_ROLES and backend is not None and (
            role in INTERACTIVE or (name and not (role == "StaticText" and (in_field or name in parent_name))))
        if shown and backend is not None:  # (shown implies a backend id; said again for the type checker)
            parts = [f"[{backend}] {role} {name!r}"]
            value = _value(node.get("value"))
            if role in INTERACTIVE and value not in (None, ""):
                parts.append(f"value: {str(value)!r}")
            for prop in node.get("properties", []):
                pv = _value(prop.get("value"))
                if prop.get("name") in PROPS and pv not in (None, False, "false"):
                    parts.append(f"{prop['name']}: {pv}")
            lines.append("\t" * depth + " ".join(parts))
            ids[int(backend)] = role
        for child in children.get(node_id, []):
            # Text inside a field repeats its value; text inside a link or button repeats its name.
            visit(child, depth + 1 if shown else depth, name if shown else parent_name,
                  in_field or role in EDITABLE)

    visit(nodes[0]["nodeId"], 0, "", False)
    return AxTree("\n".join(lines), ids, _name(nodes[0]))
