"""From a figure (what to draw, as generators and hand-written tasks describe it) to a task:
the prompt, the hidden spec, the verification points with their dependencies, the reference
solution(s) and the mutants, each mutant changing the drawing so that the point it targets fails.

Mutants are made by changing the drawing (move a point, drop a label, reverse an arrow, open a
net...), then writing it with the same code writer as the reference; which point each must fail
is decided here, and the tests check it with the verifier.
"""

from __future__ import annotations

import copy
import math
import random
from dataclasses import dataclass, field
from typing import Any

from environments.prograf.generate.emit import (
    CircuitPart,
    GeometryDrawing,
    GraphDrawing,
    geometry_svg,
    graph_dot,
    graph_mermaid,
    graph_svg,
    schemdraw_json,
    schemdraw_py,
)
from environments.prograf.task import (
    CircuitSpec,
    GeometrySpec,
    GraphCluster,
    GraphEdge,
    GraphNode,
    GraphSpec,
    Part,
    Solution,
    Task,
    VerificationPoint,
)

XY = tuple[float, float]


class Points:
    """Verification points in the making: ids in order, parents before children."""

    def __init__(self) -> None:
        self.items: list[VerificationPoint] = []

    def add(self, kind: str, check: str, component: str, args: list[str], text: str, *, value: Any = None,
            tolerance: float | None = None, deps: list[str] | None = None) -> str:
        vp_id = f"vp{len(self.items) + 1}"
        self.items.append(VerificationPoint(id=vp_id, kind=kind, check=check, component=component, args=args,
                                            value=value, tolerance=tolerance,
                                            depends_on=sorted(set(deps or []), key=lambda d: int(d[2:])), text=text))
        return vp_id

    def by_check(self, check: str) -> list[VerificationPoint]:
        return [vp for vp in self.items if vp.check == check]


def quote_list(names: list[str]) -> str:
    return ", ".join(names[:-1]) + (" and " if len(names) > 1 else "") + names[-1]


# ---------------------------------------------------------------------- geometry
RELATION_COMPONENT = {"midpoint": "midpoint", "perpendicular": "perpendicular", "parallel": "parallel",
                      "on_circle": "incidence", "on_segment": "incidence", "collinear": "incidence",
                      "angle": "angle", "equal_angle": "angle", "equal_length": "length"}


@dataclass
class Fact:
    check: str
    args: list[str]
    text: str
    value: float | None = None


@dataclass
class GeoFigure:
    """Points in math coordinates (y up), what is drawn, and the facts the prompt states."""

    points: dict[str, XY] = field(default_factory=dict)
    segments: list[tuple[str, str]] = field(default_factory=list)
    circles: list[tuple[str, str]] = field(default_factory=list)
    facts: list[Fact] = field(default_factory=list)
    sentences: list[str] = field(default_factory=list)
    length_labels: dict[str, str] = field(default_factory=dict)
    forbidden: list[tuple[str, str]] = field(default_factory=list)

    def point(self, name: str, xy: XY) -> str:
        self.points[name] = (round(xy[0], 4), round(xy[1], 4))
        return name

    def seg(self, a: str, b: str) -> None:
        if (a, b) not in self.segments and (b, a) not in self.segments:
            self.segments.append((a, b))

    def fact(self, check: str, args: list[str], text: str, value: float | None = None) -> None:
        self.facts.append(Fact(check, args, text, value))

    def say(self, sentence: str) -> None:
        self.sentences.append(sentence)


def _rotate(p: XY, about: XY, deg: float) -> XY:
    r = math.radians(deg)
    x, y = p[0] - about[0], p[1] - about[1]
    return (about[0] + x * math.cos(r) - y * math.sin(r), about[1] + x * math.sin(r) + y * math.cos(r))


def perturb(points: dict[str, XY], fact: Fact) -> dict[str, XY]:
    """Move one point so that the fact no longer holds (by 15 degrees or 15-30% of a length)."""
    p = dict(points)
    a = fact.args
    if fact.check == "midpoint":
        m, x, y = a
        p[m] = (p[x][0] + 0.3 * (p[y][0] - p[x][0]), p[x][1] + 0.3 * (p[y][1] - p[x][1]))
    elif fact.check in ("perpendicular", "parallel"):
        p[a[1]] = _rotate(p[a[1]], p[a[0]], 15)
    elif fact.check == "on_circle":
        pt, o = a
        p[pt] = (p[o][0] + 1.25 * (p[pt][0] - p[o][0]), p[o][1] + 1.25 * (p[pt][1] - p[o][1]))
    elif fact.check in ("angle", "equal_angle"):
        p[a[0]] = _rotate(p[a[0]], p[a[1]], 15)
    elif fact.check == "equal_length":
        c, d = a[2], a[3]
        p[d] = (p[c][0] + 1.3 * (p[d][0] - p[c][0]), p[c][1] + 1.3 * (p[d][1] - p[c][1]))
    elif fact.check in ("collinear", "on_segment"):
        mover, (x, y) = (a[2], a[:2]) if fact.check == "collinear" else (a[0], a[1:])
        length = math.dist(p[x], p[y])
        nx, ny = -(p[y][1] - p[x][1]) / length, (p[y][0] - p[x][0]) / length
        p[mover] = (p[mover][0] + 0.15 * length * nx, p[mover][1] + 0.15 * length * ny)
    return p


def geometry_task(task_id: str, source: str, fig: GeoFigure, rng: random.Random) -> Task:
    vps = Points()
    names = list(fig.points)
    point_vp = {n: vps.add("exists", "point", "point", [n], f"point {n} is drawn and labelled") for n in names}
    seg_vp = {s: vps.add("exists", "segment", "segment", list(s), f"segment {s[0]}{s[1]} is drawn",
                         deps=[point_vp[s[0]], point_vp[s[1]]]) for s in fig.segments}
    circle_vp = {c: vps.add("exists", "circle", "circle", list(c), f"a circle centred at {c[0]} passes through {c[1]}",
                            deps=[point_vp[c[0]], point_vp[c[1]]]) for c in fig.circles}
    fact_vp = {}
    for k, f in enumerate(fig.facts):
        deps = [point_vp[n] for n in f.args]
        if f.check == "on_circle":
            deps += [v for c, v in circle_vp.items() if c[0] == f.args[1]][:1]
        fact_vp[k] = vps.add("relation", f.check, RELATION_COMPONENT[f.check], f.args, f.text, value=f.value, deps=deps)
    label_vp = {s: vps.add("label", "length_label", "label", [s[0], s[1]], f"{s} is labelled {t!r}", value=t,
                           deps=[seg_vp.get((s[0], s[1])) or seg_vp[(s[1], s[0])]]) for s, t in fig.length_labels.items()}
    count_vp = vps.add("count", "point_count", "point", [], f"exactly {len(names)} labelled points", value=len(names))
    circle_count_vp = vps.add("count", "circle_count", "circle", [], f"exactly {len(fig.circles)} circles",
                              value=len(fig.circles)) if fig.circles else None
    absent_vp = {s: vps.add("absent", "no_segment", "segment", list(s), f"segment {s[0]}{s[1]} is not drawn",
                            deps=[point_vp[s[0]], point_vp[s[1]]]) for s in fig.forbidden}
    prompt = " ".join(fig.sentences)
    prompt += (f" Mark every named point ({quote_list(names)}) with a dot and write its letter next to it;"
               " write no other letters.")
    if fig.length_labels:
        prompt += " Write each given length beside its segment."
    if fig.forbidden:
        prompt += " " + " ".join(f"Do not draw segment {a}{b}." for a, b in fig.forbidden)
    drawing = GeometryDrawing(points=fig.points, segments=list(fig.segments), circles=list(fig.circles),
                              labelled=names, length_labels=dict(fig.length_labels))
    spec = GeometrySpec(points=fig.points, segments=fig.segments, circles=fig.circles, length_labels=fig.length_labels)

    mutants: list[Solution] = []

    def mutant(target: str, fault: str, d: GeometryDrawing, needs_render: bool = False) -> None:
        mutants.append(Solution(format="svg", code=geometry_svg(d), target=target, fault=fault, needs_render=needs_render))

    victim = rng.choice(names)
    d = copy.deepcopy(drawing)
    d.labelled.remove(victim)
    mutant(point_vp[victim], f"point {victim} drawn without its dot and letter", d)
    if fig.segments:
        s = rng.choice(fig.segments)
        d = copy.deepcopy(drawing)
        d.segments.remove(s)
        mutant(seg_vp[s], f"segment {s[0]}{s[1]} left out", d)
        s = rng.choice(fig.segments)
        d = copy.deepcopy(drawing)
        d.segment_shift[s] = 1000.0
        mutant(seg_vp[s], f"segment {s[0]}{s[1]} drawn outside the canvas", d)
        s = rng.choice(fig.segments)
        d = copy.deepcopy(drawing)
        d.segment_style[s] = ' stroke="white"'
        mutant(seg_vp[s], f"segment {s[0]}{s[1]} drawn white on white", d, needs_render=True)
    if fig.circles:
        c = rng.choice(fig.circles)
        d = copy.deepcopy(drawing)
        d.circles.remove(c)
        mutant(circle_vp[c], f"circle centred at {c[0]} left out", d)
    for k in rng.sample(range(len(fig.facts)), min(2, len(fig.facts))):
        f = fig.facts[k]
        d = copy.deepcopy(drawing)
        d.points = perturb(d.points, f)
        mutant(fact_vp[k], f"moved a point: {f.text} no longer holds", d)
    d = copy.deepcopy(drawing)
    xs = [p[0] for p in d.points.values()]
    ys = [p[1] for p in d.points.values()]
    d.points = {**d.points, "Z": (max(xs) + 0.25 * (max(xs) - min(xs) + 1), (max(ys) + min(ys)) / 2)}
    d.labelled.append("Z")
    mutant(count_vp, "an extra labelled point Z", d)
    if circle_count_vp:
        o, a = fig.circles[0]
        r = math.dist(fig.points[o], fig.points[a])
        through = [n for n in names if n != o and 0.25 * r < math.dist(fig.points[o], fig.points[n]) < 0.75 * r]
        if through:
            d = copy.deepcopy(drawing)
            d.circles.append((o, through[0]))
            mutant(circle_count_vp, "an extra circle", d)
    for s, v in absent_vp.items():
        d = copy.deepcopy(drawing)
        d.segments.append(s)
        mutant(v, f"the forbidden segment {s[0]}{s[1]} is drawn", d)
    for seg, v in label_vp.items():  # seg: the segment's two letters, "AB"
        d = copy.deepcopy(drawing)
        d.length_labels[seg] = str(int("".join(ch for ch in fig.length_labels[seg] if ch.isdigit()) or "1") + 3) + " cm"
        mutant(v, f"{seg} labelled with a wrong length", d)
    return Task(id=task_id, category="geometry", source=source,
                size=len(names) + len(fig.segments) + len(fig.circles) + len(fig.facts), prompt=prompt,
                formats=["svg"], spec=spec, points=vps.items,
                reference=[Solution(format="svg", code=geometry_svg(drawing))], mutants=mutants)


# ---------------------------------------------------------------------- circuits
KIND_WORDS = {"resistor": "resistor", "capacitor": "capacitor", "inductor": "inductor", "voltage_source": "voltage source",
              "current_source": "current source", "diode": "diode", "led": "LED", "lamp": "lamp", "switch": "switch",
              "fuse": "fuse"}


def circuit_task(task_id: str, source: str, parts: list[CircuitPart], ground: str | None, description: str,
                 rng: random.Random) -> Task:
    vps = Points()
    part_vp = {p.id: vps.add("exists", "component", p.kind, [p.id], f"{p.id} is a {KIND_WORDS[p.kind]}", value=p.kind)
               for p in parts}
    for p in parts:
        if p.value:
            vps.add("label", "value", p.kind, [p.id], f"{p.id} is labelled {p.value}", value=p.value, deps=[part_vp[p.id]])
    kinds = sorted({p.kind for p in parts})
    kind_vp = {k: vps.add("count", "kind_count", k, [k], f"exactly {sum(p.kind == k for p in parts)} {KIND_WORDS[k]}(s)",
                          value=sum(p.kind == k for p in parts)) for k in kinds}
    vps.add("count", "component_count", "part", [], f"exactly {len(parts)} components", value=len(parts))
    nets: dict[str, list[str]] = {}
    for p in parts:
        for n in p.nets:
            nets.setdefault(n, []).append(p.id)
    conn_vp = {}
    for members in nets.values():
        for a, b in zip(members, members[1:]):
            if a != b and (a, b) not in conn_vp and (b, a) not in conn_vp:
                conn_vp[(a, b)] = vps.add("connection", "connected", "wire", [a, b], f"{a} and {b} are connected",
                                          deps=[part_vp[a], part_vp[b]])
    series_vp, parallel_vp = {}, {}
    for i, p in enumerate(parts):
        for q in parts[i + 1:]:
            shared = set(p.nets) & set(q.nets)
            if set(p.nets) == set(q.nets) and len(shared) == 2:
                parallel_vp[(p.id, q.id)] = vps.add("relation", "parallel_parts", "wire", [p.id, q.id],
                                                    f"{p.id} and {q.id} are in parallel", deps=[part_vp[p.id], part_vp[q.id]])
            elif len(shared) == 1 and len(nets[next(iter(shared))]) == 2 and next(iter(shared)) != ground:
                series_vp[(p.id, q.id)] = vps.add("relation", "series", "wire", [p.id, q.id],
                                                  f"{p.id} and {q.id} are in series", deps=[part_vp[p.id], part_vp[q.id]])
    ground_vp = None
    if ground:
        grounded = nets[ground][0]
        ground_vp = vps.add("connection", "grounded", "ground", [grounded], f"{grounded} has a grounded terminal",
                            deps=[part_vp[grounded]])
    topo_vp = vps.add("relation", "topology", "wire", [], "the netlist is as specified", deps=list(part_vp.values()))
    short_vp = vps.add("absent", "no_short", "wire", [], "no component is shorted")
    open_vp = vps.add("absent", "no_open", "wire", [], "no terminal is left open")
    prompt = (f"Draw this circuit schematic. {description} Write each component's name and value on it"
              " (for example \"R1 10kΩ\").")
    spec = CircuitSpec(parts=[Part(id=p.id, kind=p.kind, value=p.value, nets=p.nets) for p in parts], ground=ground)

    mutants: list[Solution] = []

    def mutant(target: str, fault: str, ps: list[CircuitPart], g: str | None, fmt: str = "schemdraw-json") -> None:
        code = schemdraw_json(ps, g) if fmt == "schemdraw-json" else schemdraw_py(ps, g)
        mutants.append(Solution(format=fmt, code=code, target=target, fault=fault))

    def edited(pid: str, **changes: Any) -> list[CircuitPart]:
        return [CircuitPart(**{**vars(p), **changes}) if p.id == pid else p for p in parts]

    victim = rng.choice(parts)
    mutant(part_vp[victim.id], f"{victim.id} drawn without its name", edited(victim.id, named=False), ground, "schemdraw-py")
    other_kind = "inductor" if victim.kind != "inductor" else "capacitor"
    k = rng.choice(kinds)
    same = next(p for p in parts if p.kind == k)
    extra = CircuitPart(id=f"{same.id[0]}{same.id[1:]}9" if same.id[1:].isdigit() else f"{same.id}9", kind=k,
                        value=same.value, nets=same.nets)
    mutant(kind_vp[k], f"an extra {KIND_WORDS[k]} {extra.id}", parts + [extra], ground)
    if victim.kind != other_kind and sum(p.kind == victim.kind for p in parts) >= 1:
        mutant(part_vp[victim.id], f"{victim.id} drawn as a {other_kind}", edited(victim.id, kind=other_kind), ground)
    valued = [p for p in parts if p.value]
    if valued:
        v = rng.choice(valued)
        value_vp = next(x.id for x in vps.items if x.check == "value" and x.args == [v.id])
        mutant(value_vp, f"{v.id} labelled with a wrong value", edited(v.id, value="999"), ground)
    if conn_vp:
        (a, b) = rng.choice(sorted(conn_vp))
        pa = next(p for p in parts if p.id == a)
        nets_b = next(p for p in parts if p.id == b).nets
        nets_a = tuple(f"n_open{k}" if n in nets_b else n for k, n in enumerate(pa.nets))
        mutant(conn_vp[(a, b)], f"{a} disconnected from {b}", edited(a, nets=nets_a), ground)
    if series_vp:
        (a, b) = rng.choice(sorted(series_vp))
        pa = next(p for p in parts if p.id == a)
        mutant(series_vp[(a, b)], f"{b} moved in parallel with {a}", edited(b, nets=pa.nets), ground)
    if parallel_vp:
        (a, b) = rng.choice(sorted(parallel_vp))
        pb = next(p for p in parts if p.id == b)
        mutant(parallel_vp[(a, b)], f"{b} moved off {a}'s nodes", edited(b, nets=(pb.nets[0], "n_open")), ground)
    if ground_vp:
        mutant(ground_vp, "the ground symbol left out", parts, None)
    swap = rng.choice(parts)
    others = [n for n in nets if n not in swap.nets]
    if others:
        mutant(topo_vp, f"{swap.id} reconnected to another node", edited(swap.id, nets=(swap.nets[0], others[0])), ground)
    short = rng.choice(parts)
    mutant(short_vp, f"{short.id} shorted", edited(short.id, nets=(short.nets[0], short.nets[0])), ground)
    dangling = rng.choice(parts)
    mutant(open_vp, f"{dangling.id} left open", edited(dangling.id, nets=(dangling.nets[0], "n_open")), ground)
    return Task(id=task_id, category="circuit", source=source, size=len(parts) + len(nets), prompt=prompt,
                formats=["schemdraw-json", "schemdraw-py"], spec=spec, points=vps.items,
                reference=[Solution(format="schemdraw-json", code=schemdraw_json(parts, ground)),
                           Solution(format="schemdraw-py", code=schemdraw_py(parts, ground))],
                mutants=mutants)


# ---------------------------------------------------------------------- flowcharts and diagrams
ROLE_SHAPES = {"terminator": ["ellipse", "rounded", "stadium", "circle"], "process": ["box"], "decision": ["diamond"],
               "io": ["parallelogram"], "state": ["ellipse", "circle", "rounded", "stadium"]}
ROLE_WORDS = {"terminator": "terminator (oval)", "process": "process (rectangle)", "decision": "decision (diamond)",
              "io": "input/output (parallelogram)", "state": "state (circle, oval or rounded box)"}
WRONG_SHAPE = {"terminator": "box", "process": "ellipse", "decision": "box", "io": "box", "state": "box"}
GRAPH_FORMATS = ["dot", "mermaid", "svg"]


def graph_code(fmt: str, g: GraphDrawing) -> str:
    return {"dot": graph_dot, "mermaid": graph_mermaid, "svg": graph_svg}[fmt](g)


def graph_task(task_id: str, category: str, source: str, g: GraphDrawing, forbidden: list[tuple[str, str]],
               intro: str, rng: random.Random, ends: list[str] | None = None) -> Task:
    vps = Points()
    label = {n[0]: n[1] for n in g.nodes}
    node_vp = {nid: vps.add("exists", "node", r or "node", [nid], f"node {lab!r} is drawn") for nid, lab, r in g.nodes}
    shape_vp = {nid: vps.add("relation", "shape", r, [nid], f"{lab!r} is drawn as a {ROLE_WORDS[r]}", value=ROLE_SHAPES[r],
                             deps=[node_vp[nid]]) for nid, lab, r in g.nodes if r}
    shaped = {nid: r for nid, _, r in g.nodes if r}  # the nodes with a shape role (shape_vp's), and theirs
    cluster_vp = {cid: vps.add("exists", "cluster", "cluster", [cid], f"a group titled {title!r}", value=title)
                  for cid, title, _ in g.clusters}
    inside_vp = {(m, cid): vps.add("relation", "inside", "cluster", [m, cid], f"{label[m]!r} is inside {title!r}",
                                   deps=[node_vp[m], cluster_vp[cid]]) for cid, title, members in g.clusters for m in members}
    arrow = "→" if g.directed else "—"
    edge_vp = {(a, b): vps.add("connection", "edge", "edge", [a, b], f"{label[a]!r} {arrow} {label[b]!r}",
                               deps=[node_vp[a], node_vp[b]]) for a, b, _ in g.edges}
    edge_label_vp = {(a, b): vps.add("label", "edge_label", "edge_label", [a, b],
                                     f"{label[a]!r} {arrow} {label[b]!r} is labelled {lab!r}", value=lab,
                                     deps=[edge_vp[(a, b)]]) for a, b, lab in g.edges if lab}
    node_count_vp = vps.add("count", "node_count", "node", [], f"exactly {len(g.nodes)} nodes", value=len(g.nodes))
    edge_count_vp = vps.add("count", "edge_count", "edge", [], f"exactly {len(g.edges)} {'arrows' if g.directed else 'lines'}",
                            value=len(g.edges))
    forbidden_vp = {(a, b): vps.add("absent", "no_edge", "edge", [a, b], f"no {'arrow' if g.directed else 'line'} "
                                    f"{label[a]!r} {arrow} {label[b]!r}", deps=[node_vp[a], node_vp[b]]) for a, b in forbidden}
    end_vp = {e: vps.add("absent", "no_out_edges", "edge", [e], f"nothing leaves {label[e]!r}", deps=[node_vp[e]])
              for e in ends or []}
    lines = [intro, "Nodes (write each text exactly as given):"]
    lines += [f"- \"{lab}\"" + (f": {ROLE_WORDS[r]}" if r else "") for _, lab, r in g.nodes]
    for _, title, members in g.clusters:
        lines.append(f"Group {quote_list([repr(label[m]) for m in members])} inside a box titled \"{title}\".")
    lines.append("Arrows:" if g.directed else "Lines (no arrowheads):")
    lines += [f"- \"{label[a]}\" {arrow} \"{label[b]}\"" + (f", labelled \"{lab}\"" if lab else "") for a, b, lab in g.edges]
    lines += [f"There is no {'arrow' if g.directed else 'line'} from \"{label[a]}\" to \"{label[b]}\"." for a, b in forbidden]
    lines.append(f"Draw no other nodes or {'arrows' if g.directed else 'lines'}.")
    spec = GraphSpec(title=intro, directed=g.directed,
                     nodes=[GraphNode(id=i, label=lab, shape=r) for i, lab, r in g.nodes],
                     edges=[GraphEdge(src=a, dst=b, label=lab) for a, b, lab in g.edges],
                     clusters=[GraphCluster(id=c, label=t, members=m) for c, t, m in g.clusters], forbidden=forbidden)

    mutants: list[Solution] = []

    def mutant(target: str, fault: str, d: GraphDrawing) -> None:
        fmt = GRAPH_FORMATS[len(mutants) % 3]
        mutants.append(Solution(format=fmt, code=graph_code(fmt, d), target=target, fault=fault))

    def edit(**changes: Any) -> GraphDrawing:
        d = copy.deepcopy(g)
        for k, v in changes.items():
            setattr(d, k, v)
        return d

    gone = rng.choice(g.nodes)[0]
    mutant(node_vp[gone], f"node {label[gone]!r} left out",
           edit(nodes=[n for n in g.nodes if n[0] != gone], edges=[e for e in g.edges if gone not in e[:2]],
                clusters=[(c, t, [m for m in ms if m != gone]) for c, t, ms in g.clusters if [m for m in ms if m != gone]]))
    if shape_vp:
        nid = rng.choice(sorted(shape_vp))
        d = edit()
        d.shape_override[nid] = WRONG_SHAPE[shaped[nid]]
        mutant(shape_vp[nid], f"{label[nid]!r} drawn in the wrong shape", d)
    if g.edges:
        a, b, lab = rng.choice(g.edges)
        mutant(edge_vp[(a, b)], f"arrow {label[a]!r} → {label[b]!r} left out", edit(edges=[e for e in g.edges if e[:2] != (a, b)]))
        if g.directed and (b, a) not in edge_vp:
            a, b, lab = rng.choice([e for e in g.edges if (e[1], e[0]) not in edge_vp])
            mutant(edge_vp[(a, b)], f"arrow {label[a]!r} → {label[b]!r} reversed",
                   edit(edges=[(b, a, lab) if e[:2] == (a, b) else e for e in g.edges]))
    if edge_label_vp:
        a, b = rng.choice(sorted(edge_label_vp))
        mutant(edge_label_vp[(a, b)], f"arrow {label[a]!r} → {label[b]!r} labelled wrongly",
               edit(edges=[(x, y, "maybe") if (x, y) == (a, b) else (x, y, lab) for x, y, lab in g.edges]))
    if g.clusters:
        cid, title, members = rng.choice(g.clusters)
        mutant(cluster_vp[cid], f"group {title!r} not drawn", edit(clusters=[c for c in g.clusters if c[0] != cid]))
        m = rng.choice(members)
        if len(members) > 1:
            mutant(inside_vp[(m, cid)], f"{label[m]!r} drawn outside {title!r}",
                   edit(clusters=[(c, t, [x for x in ms if x != m]) if c == cid else (c, t, ms) for c, t, ms in g.clusters]))
    mutant(node_count_vp, "an extra node", edit(nodes=g.nodes + [("extra", "Extra step", None)]))
    pairs = [(a, b) for a, _, _ in g.nodes for b, _, _ in g.nodes
             if a != b and (a, b) not in edge_vp and (b, a) not in edge_vp and (a, b) not in forbidden_vp
             and (b, a) not in forbidden_vp and a not in (ends or [])]
    if pairs:
        a, b = rng.choice(pairs)
        mutant(edge_count_vp, f"an extra arrow {label[a]!r} → {label[b]!r}", edit(edges=g.edges + [(a, b, None)]))
    for (a, b), v in forbidden_vp.items():
        mutant(v, f"the forbidden arrow {label[a]!r} → {label[b]!r} drawn", edit(edges=g.edges + [(a, b, None)]))
    for e, v in end_vp.items():
        mutant(v, f"an arrow leaving {label[e]!r}", edit(edges=g.edges + [(e, g.nodes[0][0], None)]))
    return Task(id=task_id, category=category, source=source, size=len(g.nodes) + len(g.edges),
                prompt="\n".join(lines), formats=["dot", "mermaid", "svg"], spec=spec, points=vps.items,
                reference=[Solution(format=f, code=graph_code(f, g)) for f in GRAPH_FORMATS],
                mutants=mutants)
