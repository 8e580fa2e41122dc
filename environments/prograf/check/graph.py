"""Graph checks for flowcharts and diagrams: spec nodes matched one to one to drawn nodes by
label, then shapes, groups, arrows (direction included), labels, counts and forbidden arrows."""

from __future__ import annotations

import re
from typing import Any

from environments.prograf.check.findings import Finding, count_finding, fail, ok
from environments.prograf.parse.scene import Cluster, Node, Scene, norm_text
from environments.prograf.task import GraphSpec, VerificationPoint


class GraphView:
    """Spec nodes matched one to one to drawn nodes by label: exact (normalised) matches first,
    then a drawn label containing the spec label as whole words, among the nodes still free."""

    def __init__(self, scene: Scene, spec: GraphSpec):
        self.scene = scene
        self.spec = spec
        self.by_id = {n.id: n for n in spec.nodes}
        labels = [(norm_text(n.label), n) for n in scene.nodes]
        self.matched: dict[str, Node] = {}
        taken: set[str] = set()
        for n in spec.nodes:
            want = norm_text(n.label)
            hit = next((d for label, d in labels if label == want and d.key not in taken), None)
            if hit is not None:
                self.matched[n.id] = hit
                taken.add(hit.key)
        for n in spec.nodes:
            if n.id in self.matched:
                continue
            want = norm_text(n.label)
            pattern = re.compile(r"(?<!\w)" + re.escape(want) + r"(?!\w)")
            loose = [d for label, d in labels if want and d.key not in taken and pattern.search(label)]
            if loose:
                hit = min(loose, key=lambda d: len(d.label))
                self.matched[n.id] = hit
                taken.add(hit.key)

    def node(self, spec_id: str) -> Node | None:
        return self.matched.get(spec_id)

    def cluster(self, spec_id: str) -> Cluster | None:
        spec_cluster = next((c for c in self.spec.clusters if c.id == spec_id), None)
        want = norm_text(spec_cluster.label if spec_cluster else spec_id)
        found = [c for c in self.scene.clusters if norm_text(c.label) == want]
        found = found or [c for c in self.scene.clusters if want and want in norm_text(c.label)]
        return found[0] if found else None

    def edges(self, a: Node, b: Node) -> list[Any]:
        return [e for e in self.scene.edges if (e.src, e.dst) == (a.key, b.key)
                or (not e.directed and (e.src, e.dst) == (b.key, a.key))]


def _nodes(view: GraphView, ids: list[str]) -> list[Node] | Finding:
    found = [view.node(i) for i in ids]
    missing = [view.by_id[i].label if i in view.by_id else i for i, n in zip(ids, found) if n is None]
    if missing:
        return fail("missing_object", None, "no node labelled " + ", ".join(repr(m) for m in missing))
    return [n for n in found if n is not None]


def _label(view: GraphView, spec_id: str) -> str:
    return repr(view.by_id[spec_id].label) if spec_id in view.by_id else spec_id


def n_node(view: GraphView, vp: VerificationPoint, spec: GraphSpec) -> Finding:
    n = _nodes(view, vp.args)
    return n if isinstance(n, Finding) else ok(n[0].label, f"node {_label(view, vp.args[0])} is drawn")


def n_cluster(view: GraphView, vp: VerificationPoint, spec: GraphSpec) -> Finding:
    c = view.cluster(vp.args[0])
    if c is None:
        return fail("missing_object", [x.label for x in view.scene.clusters], f"no group titled {vp.value or vp.args[0]!r}")
    return ok(c.label, f"group {c.label!r} is drawn")


def n_shape(view: GraphView, vp: VerificationPoint, spec: GraphSpec) -> Finding:
    n = _nodes(view, vp.args)
    if isinstance(n, Finding):
        return n
    accepted = vp.value if isinstance(vp.value, list) else [str(vp.value)]
    if n[0].shape in accepted:
        return ok(n[0].shape, f"{_label(view, vp.args[0])} is a {n[0].shape}")
    return fail("wrong_relation", n[0].shape, f"{_label(view, vp.args[0])} is a {n[0].shape}, expected {' or '.join(accepted)}")


def n_inside(view: GraphView, vp: VerificationPoint, spec: GraphSpec) -> Finding:
    n = _nodes(view, vp.args[:1])
    if isinstance(n, Finding):
        return n
    c = view.cluster(vp.args[1])
    if c is None:
        return fail("missing_object", None, f"no group {vp.args[1]!r}")
    if n[0].key in c.members:
        return ok(c.label, f"{_label(view, vp.args[0])} is inside {c.label!r}")
    return fail("wrong_relation", n[0].cluster, f"{_label(view, vp.args[0])} is not inside {c.label!r}")


def n_edge(view: GraphView, vp: VerificationPoint, spec: GraphSpec) -> Finding:
    n = _nodes(view, vp.args)
    if isinstance(n, Finding):
        return n
    a, b = n
    what = f"{_label(view, vp.args[0])} → {_label(view, vp.args[1])}"
    found = view.edges(a, b)
    if spec.directed:
        if any(e.directed for e in found):
            return ok(True, f"arrow {what}")
        if found:
            return fail("wrong_relation", "undirected", f"{what} is joined without an arrowhead")
        if view.edges(b, a):
            return fail("wrong_relation", "reversed", f"the arrow between them points the other way ({what} wanted)")
        return fail("broken_connection", None, f"no arrow {what}")
    if found or view.edges(b, a):
        return ok(True, f"{what} are connected")
    return fail("broken_connection", None, f"{what} are not connected")


def n_edge_label(view: GraphView, vp: VerificationPoint, spec: GraphSpec) -> Finding:
    n = _nodes(view, vp.args)
    if isinstance(n, Finding):
        return n
    found = view.edges(*n) or ([] if spec.directed else view.edges(n[1], n[0]))
    want = norm_text(str(vp.value))
    labels = [e.label for e in found]
    if any(norm_text(x) == want or re.search(r"(?<!\w)" + re.escape(want) + r"(?!\w)", norm_text(x)) for x in labels):
        return ok(want, f"the arrow {_label(view, vp.args[0])} → {_label(view, vp.args[1])} is labelled {vp.value!r}")
    if not found:
        return fail("broken_connection", None, f"no arrow {_label(view, vp.args[0])} → {_label(view, vp.args[1])} to label")
    return fail("wrong_label", labels, f"the arrow is labelled {labels}, expected {vp.value!r}")


def n_node_count(view: GraphView, vp: VerificationPoint, spec: GraphSpec) -> Finding:
    return count_finding(len(view.scene.nodes), vp.count(), "nodes")


def n_edge_count(view: GraphView, vp: VerificationPoint, spec: GraphSpec) -> Finding:
    return count_finding(len(view.scene.edges), vp.count(), "edges")


def n_no_edge(view: GraphView, vp: VerificationPoint, spec: GraphSpec) -> Finding:
    n = _nodes(view, vp.args)
    if isinstance(n, Finding):
        return ok(None, "vacuous: a node is missing")
    # in an undirected diagram the pair must not be joined either way: an arrow drawn b -> a joins a and b too
    if view.edges(*n) or (not spec.directed and view.edges(n[1], n[0])):
        return fail("extra_element", True, f"an arrow {_label(view, vp.args[0])} → {_label(view, vp.args[1])} is drawn, though it must not be")
    return ok(False, f"no arrow {_label(view, vp.args[0])} → {_label(view, vp.args[1])}")


def n_no_out_edges(view: GraphView, vp: VerificationPoint, spec: GraphSpec) -> Finding:
    n = _nodes(view, vp.args)
    if isinstance(n, Finding):
        return ok(None, "vacuous: the node is missing")
    out = [e for e in view.scene.edges if e.src == n[0].key and e.directed]
    if out:
        return fail("extra_element", len(out), f"{_label(view, vp.args[0])} has {len(out)} outgoing arrows, expected none")
    return ok(0, f"nothing leaves {_label(view, vp.args[0])}")


CHECKS = {
    "node": n_node, "cluster": n_cluster, "shape": n_shape, "inside": n_inside, "edge": n_edge,
    "edge_label": n_edge_label, "node_count": n_node_count, "edge_count": n_edge_count, "no_edge": n_no_edge,
    "no_out_edges": n_no_out_edges,
}
