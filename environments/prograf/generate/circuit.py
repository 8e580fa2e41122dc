"""Circuit tasks: seeded series-parallel networks on a source, described in words or as a netlist.

A seeded task is a pure function of (seed, index): 2-6 parts (resistors, capacitors, inductors,
lamps, a switch) arranged as a random series-parallel tree in one loop with a voltage or current
source, sometimes grounded. The prompt describes the tree ("R1 in series with the parallel
combination of ...") or, for every third task, lists which nodes each part joins.
"""

from __future__ import annotations

import random
from typing import Union

from environments.prograf.generate.builders import KIND_WORDS, circuit_task
from environments.prograf.generate.emit import CircuitPart
from environments.prograf.task import Task

VALUES: dict[str, list[str | None]] = {"resistor": ["100Ω", "220Ω", "330Ω", "1kΩ", "2.2kΩ", "4.7kΩ", "10kΩ", "47kΩ"],
          "capacitor": ["100nF", "1µF", "10µF", "47µF"], "inductor": ["1mH", "10mH", "100µH"],
          "lamp": ["6V", "12V"], "switch": [None]}
PREFIX = {"resistor": "R", "capacitor": "C", "inductor": "L", "lamp": "H", "switch": "S"}
Tree = Union[CircuitPart, tuple[str, list["Tree"]]]


def new_part(rng: random.Random, counts: dict[str, int]) -> CircuitPart:
    kind = rng.choice(["resistor"] * 5 + ["capacitor"] * 2 + ["inductor", "lamp", "switch"])
    if kind == "switch" and counts.get("switch"):
        kind = "resistor"
    counts[kind] = counts.get(kind, 0) + 1
    return CircuitPart(id=f"{PREFIX[kind]}{counts[kind]}", kind=kind, value=rng.choice(VALUES[kind]), nets=("", ""))


def sp_tree(rng: random.Random, n: int, mode: str, counts: dict[str, int]) -> Tree:
    if n == 1:
        return new_part(rng, counts)
    groups = rng.randint(2, min(3, n))
    cuts = sorted(rng.sample(range(1, n), groups - 1))
    sizes = [b - a for a, b in zip([0] + cuts, cuts + [n])]
    other = "p" if mode == "s" else "s"
    return (mode, [sp_tree(rng, k, other, counts) for k in sizes])


def assign(tree: Tree, a: str, b: str, parts: list[CircuitPart], fresh: list[int]) -> None:
    """Give every part its two nets: a series chain gets new inner nets, parallel branches share."""
    if isinstance(tree, CircuitPart):
        parts.append(CircuitPart(id=tree.id, kind=tree.kind, value=tree.value, nets=(a, b)))
        return
    mode, children = tree
    if mode == "p":
        for child in children:
            assign(child, a, b, parts, fresh)
        return
    ends = [a]
    for _ in children[:-1]:
        fresh[0] += 1
        ends.append(f"n{fresh[0]}")
    ends.append(b)
    for child, x, y in zip(children, ends, ends[1:]):
        assign(child, x, y, parts, fresh)


def describe(tree: Tree) -> str:
    if isinstance(tree, CircuitPart):
        value = f" ({tree.value})" if tree.value else ""
        return f"{KIND_WORDS[tree.kind]} {tree.id}{value}"
    mode, children = tree
    words = [describe(c) if isinstance(c, CircuitPart) else f"[{describe(c)}]" for c in children]
    joined = ", ".join(words[:-1]) + " and " + words[-1]
    return f"{joined} in series" if mode == "s" else f"the parallel combination of {joined}"


def generate(seed: int, index: int, attempt: int = 0) -> Task:
    rng = random.Random(f"prograf/{seed}/circuit/{index}" + (f"/{attempt}" if attempt else ""))
    n = 2 + index % 5
    counts: dict[str, int] = {}
    network = sp_tree(rng, n, "s", counts)
    if rng.random() < 0.8:
        source = CircuitPart(id="V1", kind="voltage_source", value=rng.choice(["5V", "9V", "12V", "24V"]), nets=("n0", "n1"))
    else:
        source = CircuitPart(id="I1", kind="current_source", value=rng.choice(["1mA", "10mA", "2A"]), nets=("n0", "n1"))
    parts = [source]
    assign(network, "n1", "n0", parts, [1])
    ground = "n0" if rng.random() < 0.5 else None
    if index % 3 == 2:
        names = {net: str(k) for k, net in enumerate(sorted({x for p in parts for x in p.nets}, key=lambda s: int(s[1:])))}
        lines = [f"{KIND_WORDS[p.kind].capitalize()} {p.id}" + (f" ({p.value})" if p.value else "")
                 + f" connects node {names[p.nets[0]]} and node {names[p.nets[1]]}." for p in parts]
        text = "Use these nodes and parts: " + " ".join(lines)
        if ground:
            text += f" Node {names[ground]} is ground (draw a ground symbol on it)."
    else:
        value = f" ({source.value})" if source.value else ""
        inner = describe(network)
        text = (f"The {KIND_WORDS[source.kind]} {source.id}{value} drives, in one closed loop, {inner}.")
        if ground:
            text += f" Ground the node where the loop returns to {source.id} (draw a ground symbol there)."
    return circuit_task(f"circuit-{index:03d}", "generated", parts, ground, text, rng)
