"""Flowchart and diagram tasks, seeded.

Flowcharts: a random structured program (steps, input/output, if/else, while loops) over one of
eight domains' vocabularies, turned into Start -> ... -> End with yes/no branches and loop-back
arrows. Diagrams: one of five kinds -- a tiered architecture (groups), a state machine (labelled
transitions), a hierarchy, a pipeline with a branch, an undirected network. Each task is a pure
function of (seed, index) and rules out one plausible arrow in its prompt.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Literal

from environments.prograf.generate.builders import graph_task
from environments.prograf.generate.emit import EdgeRow, GraphDrawing, NodeRow
from environments.prograf.task import Task

DOMAINS = {
    "processing an order": (["Validate order", "Charge card", "Pack items", "Ship order", "Update stock", "Refund payment",
                             "Apply discount", "Reserve items"],
                            ["Read order", "Print label", "Show error", "Send receipt"],
                            ["Payment ok?", "In stock?", "Address valid?", "Express shipping?", "More items?"]),
    "logging in a user": (["Check password", "Lock account", "Create session", "Hash password", "Log attempt",
                           "Reset counter", "Load profile"],
                          ["Read username", "Show login page", "Show error", "Send alert email"],
                          ["Password correct?", "Attempts < 3?", "Account active?", "2FA enabled?"]),
    "summing a list": (["Set sum to 0", "Set i to 0", "Add item to sum", "Increase i", "Divide by count",
                        "Sort the list", "Skip item"],
                       ["Read list", "Print sum", "Print average", "Print error"],
                       ["i < length?", "Item negative?", "List empty?", "Sum > limit?"]),
    "brewing tea": (["Boil water", "Warm the pot", "Add tea leaves", "Pour water", "Steep 3 minutes", "Add milk",
                     "Add sugar"],
                    ["Choose a tea", "Serve the cup", "Ask for milk"],
                    ["Water boiled?", "Milk wanted?", "Strong enough?", "Sugar wanted?"]),
    "handling a support ticket": (["Assign agent", "Reproduce issue", "Write fix", "Escalate", "Close ticket",
                                   "Merge duplicate", "Update status"],
                                  ["Receive ticket", "Ask for details", "Notify customer"],
                                  ["Is it a bug?", "Duplicate?", "Fixed?", "Urgent?", "Details complete?"]),
    "grading an exam": (["Compute score", "Add bonus", "Record grade", "Round score", "Flag for review",
                         "Mark as pass", "Mark as fail"],
                        ["Read answers", "Print report", "Email student"],
                        ["Score >= 50?", "Late submission?", "All graded?", "Appeal filed?"]),
    "washing clothes": (["Sort laundry", "Load machine", "Add detergent", "Run wash", "Run spin", "Hang to dry",
                         "Run dryer"],
                        ["Pick program", "Show done light"],
                        ["Whites only?", "Stains left?", "Sunny outside?", "Machine full?"]),
    "booking a flight": (["Search flights", "Select seat", "Hold booking", "Pay fare", "Issue ticket", "Cancel hold",
                          "Add baggage"],
                         ["Enter dates", "Show results", "Email ticket"],
                         ["Flights found?", "Seat available?", "Payment ok?", "Baggage needed?"]),
}


class Flow:
    def __init__(self) -> None:
        self.nodes: list[tuple[str, str, str | None]] = []
        self.edges: list[tuple[str, str, str | None]] = []

    def node(self, label: str, role: str) -> str:
        nid = f"n{len(self.nodes) + 1}"
        self.nodes.append((nid, label, role))
        return nid

    def link(self, pending: list[tuple[str, str | None]], target: str) -> None:
        for src, label in pending:
            if not any(e[:2] == (src, target) for e in self.edges):
                self.edges.append((src, target, label))


@dataclass
class Step:
    kind: Literal["proc", "io"]
    text: str


@dataclass
class If:
    cond: str
    then: list[Stmt]
    other: list[Stmt]


@dataclass
class While:
    cond: str
    body: list[Stmt]


Stmt = Step | If | While


def program(rng: random.Random, steps: int, pools: dict[str, list[str]], depth: int = 0) -> list[Stmt]:
    out: list[Stmt] = []
    for _ in range(steps):
        r = rng.random()
        if depth < 2 and r < 0.4 and pools["cond"]:
            cond = pools["cond"].pop()
            if r < 0.25:
                then = program(rng, rng.randint(1, 2), pools, depth + 1)
                other = program(rng, rng.randint(0, 1), pools, depth + 1)
                if then:
                    out.append(If(cond, then, other))
                    continue
            else:
                body = program(rng, rng.randint(1, 2), pools, depth + 1)
                if body:
                    out.append(While(cond, body))
                    continue
        kind: Literal["proc", "io"] = "io" if rng.random() < 0.3 and pools["io"] else "proc"
        if pools[kind]:
            out.append(Step(kind, pools[kind].pop()))
    return out


def emit(flow: Flow, stmts: list[Stmt], pending: list[tuple[str, str | None]]) -> list[tuple[str, str | None]]:
    for st in stmts:
        if isinstance(st, Step):
            nid = flow.node(st.text, "process" if st.kind == "proc" else "io")
            flow.link(pending, nid)
            pending = [(nid, None)]
        elif isinstance(st, If):
            d = flow.node(st.cond, "decision")
            flow.link(pending, d)
            yes = emit(flow, st.then, [(d, "yes")])
            no: list[tuple[str, str | None]] = emit(flow, st.other, [(d, "no")]) if st.other else [(d, "no")]
            pending = yes + no
        else:
            d = flow.node(st.cond, "decision")
            flow.link(pending, d)
            flow.link(emit(flow, st.body, [(d, "yes")]), d)
            pending = [(d, "no")]
    return pending


def forbid(rng: random.Random, nodes: list[tuple[str, str, str | None]], edges: list[tuple[str, str, str | None]],
           banned_src: set[str], banned_dst: set[str]) -> list[tuple[str, str]]:
    linked = {e[:2] for e in edges} | {(e[1], e[0]) for e in edges}
    pairs = [(a, b) for a, _, _ in nodes for b, _, _ in nodes
             if a != b and (a, b) not in linked and a not in banned_src and b not in banned_dst]
    return [rng.choice(pairs)] if pairs else []


def flowchart(seed: int, index: int, attempt: int = 0) -> Task:
    rng = random.Random(f"prograf/{seed}/flowchart/{index}" + (f"/{attempt}" if attempt else ""))
    domain = rng.choice(sorted(DOMAINS))
    procs, ios, conds = (list(x) for x in DOMAINS[domain])
    for pool in (procs, ios, conds):
        rng.shuffle(pool)
    pools = {"proc": procs, "io": ios, "cond": conds}
    steps = 2 + index % 4
    while True:
        stmts = program(rng, steps, pools)
        if any(isinstance(s, If | While) for s in stmts) or index % 4 == 0:
            break
        pools = {"proc": list(DOMAINS[domain][0]), "io": list(DOMAINS[domain][1]), "cond": list(DOMAINS[domain][2])}
        for pool in pools.values():
            rng.shuffle(pool)
    flow = Flow()
    start = flow.node("Start", "terminator")
    pending = emit(flow, stmts, [(start, None)])
    end = flow.node("End", "terminator")
    flow.link(pending, end)
    g = GraphDrawing(title=domain, directed=True, nodes=flow.nodes, edges=flow.edges, clusters=[])
    forbidden = forbid(rng, flow.nodes, flow.edges, {end}, {start})
    intro = (f"Draw a flowchart of {domain}. Shapes: terminators as ovals (ellipses or rounded boxes), processes as "
             "rectangles, decisions as diamonds, input/output steps as parallelograms.")
    return graph_task(f"flowchart-{index:03d}", "flowchart", "generated", g, forbidden, intro, rng, ends=[end])


# ---------------------------------------------------------------------- diagrams
TIERS = [("Clients", ["Web app", "Mobile app", "Admin console", "Partner API"]),
         ("Services", ["API gateway", "Auth service", "Order service", "Search service", "Worker"]),
         ("Storage", ["Database", "Cache", "Message queue", "Object store", "Search index"])]
PROTOCOLS = ["HTTPS", "gRPC", "SQL", "AMQP", "REST", "TCP"]
MACHINES = {
    "a vending machine": (["Idle", "Has coin", "Selecting", "Dispensing", "Out of stock"],
                          ["insert coin", "press button", "refund", "item dropped", "restock", "timeout"]),
    "a door": (["Closed", "Open", "Locked", "Opening", "Closing"],
               ["open", "close", "lock", "unlock", "obstacle", "done"]),
    "an order": (["New", "Paid", "Shipped", "Delivered", "Cancelled", "Returned"],
                 ["pay", "ship", "deliver", "cancel", "return", "refund"]),
    "a media player": (["Stopped", "Playing", "Paused", "Buffering", "Error"],
                       ["play", "pause", "stop", "stall", "resume", "fail"]),
    "a traffic light": (["Red", "Green", "Yellow", "Flashing"],
                        ["timer", "fault", "reset", "night mode"]),
}
HIERARCHIES = {
    "a company": ("CEO", [("CTO", ["Engineering", "IT support"]), ("CFO", ["Accounting", "Payroll"]),
                          ("COO", ["Operations", "Logistics"])]),
    "the animal kingdom (simplified)": ("Animals", [("Vertebrates", ["Mammals", "Birds", "Fish"]),
                                                    ("Invertebrates", ["Insects", "Molluscs"])]),
    "a website's pages": ("Home", [("Products", ["Laptops", "Phones"]), ("Blog", ["Archive", "Authors"]),
                                   ("About", ["Team", "Careers"])]),
    "a file system": ("/", [("home", ["alice", "bob"]), ("etc", ["ssh", "nginx"]), ("var", ["log", "www"])]),
}
PIPELINES = {
    "a machine-learning pipeline": ["Collect data", "Clean data", "Split data", "Train model", "Evaluate model",
                                    "Deploy model", "Monitor"],
    "a compiler": ["Source code", "Lexer", "Parser", "Type checker", "Optimizer", "Code generator", "Executable"],
    "a CI pipeline": ["Commit", "Build", "Unit tests", "Integration tests", "Package", "Deploy staging", "Release"],
    "a newspaper workflow": ["Pitch", "Research", "Draft", "Edit", "Fact check", "Layout", "Publish"],
}
NETWORKS = {
    "a small office network": ["Router", "Firewall", "Switch", "PC 1", "PC 2", "Printer", "Access point", "Laptop"],
    "a home network": ["Modem", "Router", "TV", "Phone", "Tablet", "NAS", "Game console"],
    "a campus network": ["Core switch", "Library", "Lab", "Dorm", "Admin", "Data center", "Gateway"],
}


def architecture(rng: random.Random, size: int) -> tuple[GraphDrawing, str]:
    nodes: list[NodeRow] = []
    clusters: list[tuple[str, str, list[str]]] = []
    tiers = []
    for k, (title, names) in enumerate(TIERS[: 2 + size % 2]):
        chosen = rng.sample(names, rng.randint(1, 2 + size // 3 if k else 2))
        ids = [f"t{k}{i}" for i in range(len(chosen))]
        nodes += [(i, n, None) for i, n in zip(ids, chosen)]
        clusters.append((f"g{k}", title, ids))
        tiers.append(ids)
    edges: list[EdgeRow] = []
    for upper, lower in zip(tiers, tiers[1:]):
        for a in upper:
            for b in rng.sample(lower, rng.randint(1, len(lower))):
                edges.append((a, b, rng.choice(PROTOCOLS) if rng.random() < 0.5 else None))
    return GraphDrawing("", True, nodes, edges, clusters), "a three-tier system architecture" if len(tiers) == 3 else "a two-tier system architecture"


def state_machine(rng: random.Random, size: int) -> tuple[GraphDrawing, str]:
    name = rng.choice(sorted(MACHINES))
    states, events = MACHINES[name]
    states = states[: 3 + size % (len(states) - 2)]
    ids = [f"s{i}" for i in range(len(states))]
    nodes: list[NodeRow] = [(i, s, "state") for i, s in zip(ids, states)]
    events = list(events)
    rng.shuffle(events)
    edges: list[EdgeRow] = [(ids[i], ids[(i + 1) % len(ids)], events[i % len(events)]) for i in range(len(ids))]
    for _ in range(size % 3):
        a, b = rng.sample(ids, 2)
        if not any(e[:2] == (a, b) for e in edges):
            edges.append((a, b, events[len(edges) % len(events)]))
    return GraphDrawing("", True, nodes, edges, []), f"the states of {name} and the events that move between them"


def hierarchy(rng: random.Random, size: int) -> tuple[GraphDrawing, str]:
    name = rng.choice(sorted(HIERARCHIES))
    root, branches = HIERARCHIES[name]
    nodes: list[NodeRow] = [("h0", root, None)]
    edges: list[EdgeRow] = []
    for k, (mid_label, leaves) in enumerate(rng.sample(branches, min(len(branches), 2 + size % 2))):
        mid_id = f"h{k + 1}"
        nodes.append((mid_id, mid_label, None))
        edges.append(("h0", mid_id, None))
        for j, leaf in enumerate(leaves[: 1 + size % 3]):
            leaf_id = f"h{k + 1}{j}"
            nodes.append((leaf_id, leaf, None))
            edges.append((mid_id, leaf_id, None))
    return GraphDrawing("", True, nodes, edges, []), f"the hierarchy of {name} (arrows from parent to child)"


def pipeline(rng: random.Random, size: int) -> tuple[GraphDrawing, str]:
    name = rng.choice(sorted(PIPELINES))
    stages = PIPELINES[name][: 4 + size % 4]
    ids = [f"p{i}" for i in range(len(stages))]
    nodes: list[NodeRow] = [(i, s, None) for i, s in zip(ids, stages)]
    edges: list[EdgeRow] = [(a, b, None) for a, b in zip(ids, ids[1:])]
    back_from = rng.randrange(2, len(ids))
    edges.append((ids[back_from], ids[rng.randrange(1, back_from)], "on failure"))
    return GraphDrawing("", True, nodes, edges, []), f"{name}, stage by stage"


def network(rng: random.Random, size: int) -> tuple[GraphDrawing, str]:
    name = rng.choice(sorted(NETWORKS))
    devices = NETWORKS[name][: 4 + size % 4]
    ids = [f"d{i}" for i in range(len(devices))]
    nodes: list[NodeRow] = [(i, s, None) for i, s in zip(ids, devices)]
    edges: list[EdgeRow] = [(ids[rng.randrange(0, i)], ids[i], None) for i in range(1, len(ids))]
    return GraphDrawing("", False, nodes, edges, []), f"{name} (plain lines for cables)"


def diagram(seed: int, index: int, attempt: int = 0) -> Task:
    rng = random.Random(f"prograf/{seed}/diagram/{index}" + (f"/{attempt}" if attempt else ""))
    make = [architecture, state_machine, hierarchy, pipeline, network][index % 5]
    g, what = make(rng, index // 5)
    forbidden = forbid(rng, g.nodes, g.edges, set(), set())
    intro = f"Draw a diagram of {what}."
    if make is state_machine:
        intro += " Draw each state as a circle, an oval or a rounded box."
    return graph_task(f"diagram-{index:03d}", "diagram", "generated", g, forbidden, intro, rng)
