"""Circuit checks: parts matched by the name written on them, nets compared as a labelled
part-net graph (networkx isomorphism), series / parallel / ground / short / open."""

from __future__ import annotations

import re
from typing import Any

import networkx as nx

from environments.prograf.check.findings import Finding, count_finding, fail, ok
from environments.prograf.parse.scene import Component, Scene, norm_text
from environments.prograf.task import CircuitSpec, VerificationPoint


class CircuitView:
    def __init__(self, scene: Scene):
        self.scene = scene
        self.by_name: dict[str, Component] = {}
        for c in scene.components:
            self.by_name.setdefault(c.label.upper(), c)

    def terminals_on(self, net: int) -> int:
        return sum(c.nets.count(net) for c in self.scene.components)


def norm_value(text: str) -> str:
    return re.sub(r"ohms?|\s", "", norm_text(text))


def _parts(view: CircuitView, names: list[str]) -> list[Component] | Finding:
    missing = [n for n in names if n.upper() not in view.by_name]
    if missing:
        return fail("missing_object", None, f"no component labelled {', '.join(missing)}")
    return [view.by_name[n.upper()] for n in names]


def c_component(view: CircuitView, vp: VerificationPoint, spec: CircuitSpec) -> Finding:
    p = _parts(view, vp.args)
    if isinstance(p, Finding):
        return p
    if p[0].kind != vp.value:
        return fail("missing_object", p[0].kind, f"{vp.args[0]} is drawn as a {p[0].kind}, not a {vp.value}")
    return ok(p[0].kind, f"{vp.args[0]} is a {vp.value}")


def c_kind_count(view: CircuitView, vp: VerificationPoint, spec: CircuitSpec) -> Finding:
    n = sum(c.kind == vp.args[0] for c in view.scene.components)
    return count_finding(n, vp.count(), f"{vp.args[0]}s")


def c_component_count(view: CircuitView, vp: VerificationPoint, spec: CircuitSpec) -> Finding:
    return count_finding(len(view.scene.components), vp.count(), "components")


def c_connected(view: CircuitView, vp: VerificationPoint, spec: CircuitSpec) -> Finding:
    p = _parts(view, vp.args)
    if isinstance(p, Finding):
        return p
    shared = set(p[0].nets) & set(p[1].nets)
    if shared:
        return ok(sorted(shared), f"{vp.args[0]} and {vp.args[1]} are connected")
    return fail("broken_connection", None, f"{vp.args[0]} and {vp.args[1]} share no net")


def c_grounded(view: CircuitView, vp: VerificationPoint, spec: CircuitSpec) -> Finding:
    p = _parts(view, vp.args)
    if isinstance(p, Finding):
        return p
    if set(p[0].nets) & view.scene.ground_nets:
        return ok(True, f"{vp.args[0]} has a grounded terminal")
    return fail("broken_connection", False, f"no terminal of {vp.args[0]} is grounded"
                + ("" if view.scene.ground_nets else " (no ground symbol drawn)"))


def c_series(view: CircuitView, vp: VerificationPoint, spec: CircuitSpec) -> Finding:
    p = _parts(view, vp.args)
    if isinstance(p, Finding):
        return p
    shared = set(p[0].nets) & set(p[1].nets)
    only = [n for n in shared if view.terminals_on(n) == 2 and n not in view.scene.ground_nets]
    if len(shared) == 1 and only:
        return ok(only[0], f"{vp.args[0]} and {vp.args[1]} are in series")
    why = "share no net" if not shared else ("are in parallel" if len(shared) == 2 else "meet at a node other parts also touch")
    return fail("wrong_relation", sorted(shared), f"{vp.args[0]} and {vp.args[1]} are not in series: they {why}")


def c_parallel_parts(view: CircuitView, vp: VerificationPoint, spec: CircuitSpec) -> Finding:
    p = _parts(view, vp.args)
    if isinstance(p, Finding):
        return p
    if set(p[0].nets) == set(p[1].nets) and len(set(p[0].nets)) == 2:
        return ok(sorted(set(p[0].nets)), f"{vp.args[0]} and {vp.args[1]} are in parallel")
    return fail("wrong_relation", [list(p[0].nets), list(p[1].nets)], f"{vp.args[0]} and {vp.args[1]} are not in parallel")


def circuit_graph(parts: list[tuple[str, tuple[Any, ...]]], ground: set[Any]) -> nx.MultiGraph:
    """Bipartite part-net multigraph (terminal order ignored); ground is one labelled node."""
    g = nx.MultiGraph()
    for name, nets in parts:
        g.add_node(("part", name), label=name.upper())
        for n in nets:
            g.add_node(("net", n), label="")
            g.add_edge(("part", name), ("net", n))
    for n in ground:
        g.add_node("GND", label="GND")
        g.add_node(("net", n), label="")
        g.add_edge("GND", ("net", n))
    return g


def c_topology(view: CircuitView, vp: VerificationPoint, spec: CircuitSpec) -> Finding:
    want = circuit_graph([(p.id, p.nets) for p in spec.parts], {spec.ground} if spec.ground else set())
    scene = view.scene
    unnamed = [c.kind for c in scene.components if not c.label]
    got = circuit_graph([(c.label or f"?{i}", c.nets) for i, c in enumerate(scene.components)], scene.ground_nets)
    if nx.is_isomorphic(want, got, node_match=lambda a, b: a["label"] == b["label"]):
        return ok(True, "the netlist matches the specification")
    extra = sorted({c.label for c in scene.components} - {p.id for p in spec.parts} - {""})
    reason = "the netlist differs from the specification"
    if unnamed or extra:
        reason += f" (unlabelled: {len(unnamed)}, not asked for: {', '.join(extra) or 'none'})"
    return fail("broken_connection", False, reason)


def c_value(view: CircuitView, vp: VerificationPoint, spec: CircuitSpec) -> Finding:
    p = _parts(view, vp.args)
    if isinstance(p, Finding):
        return p
    if norm_value(str(vp.value)) and norm_value(str(vp.value)) in norm_value(p[0].value):
        return ok(p[0].value, f"{vp.args[0]} is labelled {vp.value}")
    return fail("wrong_label", p[0].value, f"{vp.args[0]} is labelled {p[0].value!r}, expected {vp.value}")


def c_no_short(view: CircuitView, vp: VerificationPoint, spec: CircuitSpec) -> Finding:
    shorted = [c.label or c.kind for c in view.scene.components if len(c.nets) == 2 and c.nets[0] == c.nets[1]]
    if shorted:
        return fail("broken_connection", shorted, f"shorted: both terminals of {', '.join(shorted)} on one net")
    return ok([], "no part is shorted")


def c_no_open(view: CircuitView, vp: VerificationPoint, spec: CircuitSpec) -> Finding:
    count: dict[int, int] = {}
    for c in view.scene.components:
        for n in c.nets:
            count[n] = count.get(n, 0) + 1
    for n in view.scene.ground_nets:
        count[n] = count.get(n, 0) + 1
    dangling = [c.label or c.kind for c in view.scene.components if any(count[n] < 2 for n in c.nets)]
    if dangling:
        return fail("broken_connection", dangling, f"open: a terminal of {', '.join(dangling)} connects to nothing")
    return ok([], "every terminal is connected")


CHECKS = {
    "component": c_component, "kind_count": c_kind_count, "component_count": c_component_count,
    "connected": c_connected, "grounded": c_grounded, "series": c_series, "parallel_parts": c_parallel_parts,
    "topology": c_topology, "value": c_value, "no_short": c_no_short, "no_open": c_no_open,
}
