"""ScienceWorld's state as facts, and the typed CDWM `Delta` between two states.

ScienceWorld keeps no ledger, so the ground truth of a step is a diff: the object tree
(`ScienceWorldEnv.getObjectTree()`, every object with its uuid, name, properties and contents)
and the agent's room as `look` prints it (doors are not in the tree), read before and after.

Naming (what a world model must write):
- an entity is the object's name as the simulator prints it and as actions refer to it: `metal pot`,
  `water`, `sink`, `agent`, `inventory`, rooms (`kitchen`); doors `door to kitchen` (seen from the
  agent's room); animals with their life stage as printed (`baby brown bear`, `butterfly egg`), which
  the tree lacks and the referent table has. Names are not unique (every room has `air`): facts
  about two same-named objects coincide, as they would in the agent's reading of the world.
- an existing entity keeps the name it had before the action: water that boils is
  ("attr", "water", "state of matter", "gas") plus ("attr", "water", "name", "steam").
- electrical connection points are named `<object> <point>`: `battery anode`, `black wire terminal 1`.

Facts:
- containment: ("rel-", x, "in", old container), ("rel+", x, "in", new container) -- the direct
  container; the agent moving is ("agent", "in", room); holding is (x, "in", "inventory").
- created: ("create", x) and where it appeared, ("rel+", x, "in", container); deleted: ("delete", x).
- attributes (`ATTRIBUTES`): is open, is activated, is broken, state of matter, temperature, color,
  is combusting, has combusted, is dead, is sickly, is poisonous, life stage, name. Temperature is
  whole degrees Celsius (the thermometer's precision), reported when it moved at least 1 degree in
  this step or the state of matter changed: heating on a stove is a fact, ambient drift (about 0.1
  degree per tick in every room) is not.
- wires: ("rel+"/"rel-", a, "connected to", b), the pair in alphabetical order.
- the environment adds ("rel+", "agent", "focus on", x) and ("attr", "task", "status", "failed" |
  "completed") from the simulator's answer (see env.py).

Irreversible (`irreversible_facts`): what no later action can undo -- a deletion (eaten, burnt up,
mixed into something else; except water, which the world renews), a death, ignition and
combustion, breaking, a focus (the task's commitment: the wrong one ends the episode at -100) and a
failed task. State changes of matter, moves, opening, switching, connecting, creating and growing
are reversible or are the world's own course.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from pydantic import JsonValue

from environments.cdwm.deltas import AttributeChange, Delta, Relation

# Electrical connection points are parts of their object, never entities of their own.
CONNECTION_POINTS = frozenset({"terminal 1", "terminal 2", "anode", "cathode"})
# (property group, key) in the object tree -> the attribute's name in facts.
ATTRIBUTES = {
    ("propContainer", "isOpen"): "is open",
    ("propDevice", "isActivated"): "is activated",
    ("propDevice", "isBroken"): "is broken",
    ("propMaterial", "stateOfMatter"): "state of matter",
    ("propMaterial", "color"): "color",
    ("propMaterial", "isCombusting"): "is combusting",
    ("propMaterial", "hasCombusted"): "has combusted",
    ("propLife", "isDead"): "is dead",
    ("propLife", "isSickly"): "is sickly",
    ("propEdibility", "isPoisonous"): "is poisonous",
}
TEMPERATURE_STEP_C = 1.0
# Attribute values that cannot be undone once reached.
IRREVERSIBLE_VALUES = {("is dead", "true"), ("has combusted", "true"), ("is combusting", "true"),
                       ("is broken", "true"), ("status", "failed")}
# Water in any state: taps, the fountain and self-watering flower pots make more at will, so water
# that is used up (plants drink, pots drain) is no loss the agent cannot make good.
RENEWABLE = frozenset({"water", "ice", "steam"})
FOCUS = "focus on"
_DOOR = re.compile(r"^\s*A door to the (.+?) \(that is (open|closed)\)", re.M | re.I)
_STAGE = re.compile(r"^.+ in the (\w+) stage$")
_ROOM = re.compile(r"^This [a-z ]*? is called the (.+?)\.", re.M)


@dataclass(frozen=True)
class Thing:
    name: str
    parent: str | None  # uuid of the direct container
    attrs: dict[str, JsonValue]  # attribute -> the simulator's value (ATTRIBUTES, and the life stage)
    temperature: float | None


@dataclass
class WorldState:
    things: dict[str, Thing] = field(default_factory=dict)  # uuid -> thing, live objects only
    points: dict[str, tuple[str, str]] = field(default_factory=dict)  # connection point uuid -> (owner uuid, point name)
    connections: frozenset[frozenset[str]] = frozenset()  # pairs of connection point uuids
    room: str | None = None  # the agent's room, from `look`
    doors: dict[str, bool] = field(default_factory=dict)  # "door to X" -> open, in the agent's room

    def name(self, uuid: str | None) -> str:
        thing = self.things.get(uuid or "")
        return thing.name if thing else "?"

    def point_name(self, uuid: str) -> str:
        owner, point = self.points[uuid]
        return f"{self.name(owner)} {point}"


def parse_state(tree: dict[str, Any], look: str, referents: dict[str, Any] | None = None) -> WorldState:
    """The tree (`getObjectTree()`), the free `look` text and the referent table
    (`get_all_object_ids_types_referents_LUTJSON()`, for life stages) as a `WorldState`."""
    state = WorldState()
    links: set[frozenset[str]] = set()

    def walk(node: dict[str, Any], parent: str | None) -> None:
        uuid, name = str(node.get("uuid")), str(node.get("name") or "")
        if node.get("isDeleted"):
            return
        conn = node.get("propElectricalConnection")
        if name in CONNECTION_POINTS or isinstance(conn, dict):
            if parent is not None:
                state.points[uuid] = (parent, name)
                links.update(frozenset((uuid, str(other))) for other in (conn or {}).get("connectedTo") or [])
            return  # a connection point has no contents worth a fact
        attrs: dict[str, JsonValue] = {}
        for (group, key), attribute in ATTRIBUTES.items():
            props = node.get(group)
            if isinstance(props, dict) and key in props:
                attrs[attribute] = props[key]
        stage, printed = _life_stage(node, (referents or {}).get(uuid))
        if stage:
            attrs["life stage"] = stage
        if printed:  # printed as "a baby brown bear", "a butterfly egg": the tree says "brown bear", "moth"
            name = printed
        temp = (node.get("propMaterial") or {}).get("temperatureC")
        state.things[uuid] = Thing(name, parent, attrs, float(temp) if temp is not None else None)
        for child in (node.get("contents") or {}).values():
            walk(child, uuid)

    # The root (`universe`) is the world itself, not an entity: rooms have no container.
    for child in (tree.get("contents") or {}).values():
        walk(child, None)
    # A link whose other end is gone (or never was a connection point) is not a connection.
    state.connections = frozenset(p for p in links if len(p) == 2 and all(u in state.points for u in p))
    room = _ROOM.search(look)
    state.room = room.group(1) if room else None
    state.doors = {f"door to {m.group(1)}": m.group(2).lower() == "open" for m in _DOOR.finditer(look)}
    return state


def diff(before: WorldState, after: WorldState) -> Delta:
    """Every fact that changed from `before` to `after`, in a deterministic order."""
    created: list[str] = []
    deleted: list[str] = []
    attrs: list[AttributeChange] = []
    added: list[Relation] = []
    removed: list[Relation] = []
    for uuid in sorted(set(before.things) | set(after.things), key=_uuid_order):
        old, new = before.things.get(uuid), after.things.get(uuid)
        if old is None:
            assert new is not None  # the uuid is in one of the two states
            created.append(new.name)
            if new.parent is not None:
                added.append(Relation(subject=new.name, relation="in", object=after.name(new.parent)))
            continue
        if new is None:
            deleted.append(old.name)
            continue
        name = old.name  # facts name an entity as the agent knew it before acting
        if old.parent != new.parent:
            if old.parent is not None:
                removed.append(Relation(subject=name, relation="in", object=before.name(old.parent)))
            if new.parent is not None:
                added.append(Relation(subject=name, relation="in", object=after.name(new.parent)))
        for attribute in sorted(set(old.attrs) | set(new.attrs)):
            if old.attrs.get(attribute) != new.attrs.get(attribute):
                attrs.append(AttributeChange(entity=name, attribute=attribute,
                                             before=old.attrs.get(attribute), after=new.attrs.get(attribute)))
        if new.temperature is not None and old.temperature is not None and (
                abs(new.temperature - old.temperature) >= TEMPERATURE_STEP_C
                or old.attrs.get("state of matter") != new.attrs.get("state of matter")):
            t_old, t_new = round(old.temperature), round(new.temperature)
            if t_old != t_new:
                attrs.append(AttributeChange(entity=name, attribute="temperature", before=t_old, after=t_new))
        if old.name != new.name:
            attrs.append(AttributeChange(entity=name, attribute="name", before=old.name, after=new.name))
    for pair in sorted(after.connections - before.connections, key=sorted):
        a, b = sorted(after.point_name(u) for u in pair)
        added.append(Relation(subject=a, relation="connected to", object=b))
    for pair in sorted(before.connections - after.connections, key=sorted):
        a, b = sorted(before.point_name(u) for u in pair)
        removed.append(Relation(subject=a, relation="connected to", object=b))
    if before.room is not None and before.room == after.room:  # doors can only change where the agent is
        for door in sorted(set(before.doors) & set(after.doors)):
            if before.doors[door] != after.doors[door]:
                attrs.append(AttributeChange(entity=door, attribute="is open",
                                             before=before.doors[door], after=after.doors[door]))
    return Delta(created=created, deleted=deleted, attributes=attrs, relations_added=added, relations_removed=removed)


def _life_stage(node: dict[str, Any], entry: Any) -> tuple[str | None, str | None]:
    """(life stage, printed name) of a living thing, from its referents: plants list "apple seed in
    the seed stage"; animals, whose tree name lacks the stage, list their printed name once more
    with the stage in front ("baby baby brown bear", "egg butterfly egg"). None where unknown."""
    if not isinstance(node.get("propLife"), dict) or not isinstance(entry, dict):
        return None, None
    stage = printed = None
    for ref in sorted(str(r) for r in entry.get("referents") or []):
        plant = _STAGE.match(ref)
        words = ref.split()
        if plant:
            stage = plant.group(1)
        elif len(words) >= 3 and words[0] in words[1:]:
            stage, printed = words[0], " ".join(words[1:])
    return (stage if stage != "none" else None), printed


def irreversible_facts(delta: Delta) -> set[tuple[str, ...]]:
    """The facts of `delta` (normalised as in `Delta.facts`) that no later action can undo."""
    out: set[tuple[str, ...]] = set()
    for fact in delta.facts():
        kind = fact[0]
        if (kind == "delete" and fact[1] not in RENEWABLE) or (kind == "rel+" and fact[2] == FOCUS) or (
                kind == "attr" and (fact[2], fact[3]) in IRREVERSIBLE_VALUES):
            out.add(fact)
    return out


def settle(delta: Delta) -> Delta:
    """Set `reversible` and `irreversible_cost` (one per irreversible fact) from the facts."""
    n = len(irreversible_facts(delta))
    delta.reversible, delta.irreversible_cost = n == 0, float(n)
    return delta


def as_predicate(fact: tuple[str, ...]) -> dict[str, JsonValue]:
    """A normalised fact as a requirement predicate (the language of `cdwm.metrics.delta_matches`)."""
    kind = fact[0]
    if kind in ("create", "delete"):
        return {"kind": kind, "entity": fact[1], "irreversible": True}
    if kind == "attr":
        return {"kind": kind, "entity": fact[1], "attribute": fact[2], "value": fact[3], "irreversible": True}
    return {"kind": kind, "entity": fact[1], "relation": fact[2], "object": fact[3], "irreversible": True}


def _uuid_order(uuid: str) -> tuple[int, str]:
    return (int(uuid), uuid) if uuid.isdigit() else (1 << 62, uuid)
