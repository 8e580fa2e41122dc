"""What the generated household scenes are made of: ALFRED's object and receptacle types, what
each object type affords (pick up, clean, heat, cool, slice, toggle) and which receptacle types
can hold it, and the room kinds a scene is drawn from.

Type names are ALFRED's (they become the PDDL `otype`/`rtype` constants `AppleType`,
`FridgeType`, ... of the bundled domain); the affordances follow the ALFRED/AI2-THOR object
properties, kept to what the six task types need.
"""

from __future__ import annotations

from dataclasses import dataclass

# Affordance flags of an object type.
PICKUP, CLEAN, HEAT, COOL, SLICE, TOGGLE, LIGHT = "pickup", "clean", "heat", "cool", "slice", "toggle", "light"

# Where kinds of object go. A receptacle type lists the object groups it accepts.
FOOD, DISH, UTENSIL, SMALL, BOOKISH, BATH = "food", "dish", "utensil", "small", "bookish", "bath"


@dataclass(frozen=True)
class ObjectType:
    name: str
    groups: frozenset[str]
    affords: frozenset[str]


def _obj(name: str, groups: str, affords: str) -> ObjectType:
    return ObjectType(name, frozenset(groups.split()), frozenset(affords.split()))


OBJECTS = {o.name: o for o in [
    _obj("Apple", FOOD, "pickup clean heat cool slice"),
    _obj("Tomato", FOOD, "pickup clean heat cool slice"),
    _obj("Potato", FOOD, "pickup clean heat cool slice"),
    _obj("Bread", FOOD, "pickup heat cool slice"),
    _obj("Lettuce", FOOD, "pickup clean cool slice"),
    _obj("Egg", FOOD, "pickup clean heat cool"),
    _obj("Mug", DISH, "pickup clean heat cool"),
    _obj("Cup", DISH, "pickup clean heat cool"),
    _obj("Plate", DISH, "pickup clean heat cool"),
    _obj("Bowl", DISH, "pickup clean heat cool"),
    _obj("Pan", DISH, "pickup clean cool"),
    _obj("Knife", UTENSIL, "pickup clean"),
    _obj("ButterKnife", UTENSIL, "pickup clean"),
    _obj("Spoon", UTENSIL, "pickup clean"),
    _obj("Fork", UTENSIL, "pickup clean"),
    _obj("Spatula", UTENSIL, "pickup clean"),
    _obj("Book", BOOKISH, "pickup light"),
    _obj("CellPhone", SMALL, "pickup light"),
    _obj("KeyChain", SMALL, "pickup light"),
    _obj("CreditCard", SMALL, "pickup light"),
    _obj("RemoteControl", SMALL, "pickup light"),
    _obj("Pen", SMALL, "pickup light"),
    _obj("Pencil", SMALL, "pickup light"),
    _obj("Watch", SMALL, "pickup light"),
    _obj("CD", SMALL, "pickup light"),
    _obj("Statue", BOOKISH, "pickup light"),
    _obj("Vase", BOOKISH, "pickup light"),
    _obj("SoapBar", BATH, "pickup clean"),
    _obj("Cloth", BATH, "pickup clean"),
    _obj("ToiletPaper", BATH, "pickup"),
    _obj("Candle", BATH, "pickup"),
    _obj("DeskLamp", "lamp", "toggle"),
]}


@dataclass(frozen=True)
class ReceptacleType:
    name: str
    accepts: frozenset[str]  # object groups
    openable: bool = False
    appliance: str | None = None  # clean | heat | cool: the task step it serves


def _rec(name: str, accepts: str, openable: bool = False, appliance: str | None = None) -> ReceptacleType:
    return ReceptacleType(name, frozenset(accepts.split()), openable, appliance)


RECEPTACLES = {r.name: r for r in [
    _rec("Fridge", f"{FOOD} {DISH}", openable=True, appliance="cool"),
    _rec("Microwave", f"{FOOD} {DISH}", openable=True, appliance="heat"),
    _rec("SinkBasin", f"{FOOD} {DISH} {UTENSIL} {BATH}", appliance="clean"),
    _rec("CounterTop", f"{FOOD} {DISH} {UTENSIL} {SMALL} {BOOKISH} {BATH}"),
    _rec("DiningTable", f"{FOOD} {DISH} {UTENSIL} {SMALL} {BOOKISH}"),
    _rec("Cabinet", f"{DISH} {UTENSIL} {SMALL} {BOOKISH} {BATH}", openable=True),
    _rec("Drawer", f"{UTENSIL} {SMALL} {BATH}", openable=True),
    _rec("Shelf", f"{DISH} {SMALL} {BOOKISH} {BATH}"),
    _rec("StoveBurner", f"{DISH}"),
    _rec("GarbageCan", f"{FOOD} {DISH} {UTENSIL} {SMALL} {BOOKISH} {BATH}"),
    _rec("SideTable", f"{SMALL} {BOOKISH} {DISH} lamp"),
    _rec("Desk", f"{SMALL} {BOOKISH} {DISH} lamp"),
    _rec("Dresser", f"{SMALL} {BOOKISH}"),
    _rec("Bed", f"{BOOKISH} {SMALL}"),
    _rec("Sofa", f"{BOOKISH} {SMALL}"),
    _rec("CoffeeTable", f"{SMALL} {BOOKISH} {DISH}"),
    _rec("Safe", f"{SMALL}", openable=True),
    _rec("Toilet", f"{BATH}"),
    _rec("Bathtub", f"{BATH}"),
    _rec("TowelHolder", "cloth"),
]}


@dataclass(frozen=True)
class RoomKind:
    name: str
    fixed: tuple[str, ...]  # receptacle types always present (one each)
    optional: tuple[str, ...]  # drawn from, with repeats (cabinets, drawers, ...)
    objects: tuple[str, ...]  # object types that may appear


ROOMS = {r.name: r for r in [
    RoomKind("kitchen", ("Fridge", "Microwave", "SinkBasin", "CounterTop", "DiningTable", "GarbageCan"),
             ("Cabinet", "Cabinet", "Drawer", "Drawer", "Shelf", "StoveBurner", "CounterTop"),
             ("Apple", "Tomato", "Potato", "Bread", "Lettuce", "Egg", "Mug", "Cup", "Plate", "Bowl", "Pan",
              "Knife", "ButterKnife", "Spoon", "Fork", "Spatula", "CellPhone", "CreditCard")),
    RoomKind("livingroom", ("Sofa", "CoffeeTable", "SideTable", "GarbageCan"),
             ("Shelf", "Shelf", "Drawer", "Cabinet", "Dresser", "SideTable", "Safe"),
             ("Book", "CellPhone", "KeyChain", "CreditCard", "RemoteControl", "Watch", "Statue", "Vase", "CD",
              "DeskLamp")),
    RoomKind("bedroom", ("Bed", "Desk", "Dresser", "GarbageCan"),
             ("Drawer", "Drawer", "Shelf", "SideTable", "Safe", "Cabinet"),
             ("Book", "CellPhone", "KeyChain", "CreditCard", "Pen", "Pencil", "Watch", "CD", "Mug", "DeskLamp")),
    RoomKind("bathroom", ("SinkBasin", "CounterTop", "Toilet", "GarbageCan"),
             ("Cabinet", "Cabinet", "Drawer", "Shelf", "Bathtub"),
             ("SoapBar", "Cloth", "ToiletPaper", "Candle", "Spoon", "Cup")),
]}


def accepts(receptacle: str, obj: str) -> bool:
    """Whether a receptacle type can hold an object type (the domain's `canContain`)."""
    o = OBJECTS[obj]
    r = RECEPTACLES[receptacle]
    return bool(r.accepts & (o.groups | {o.name.lower()}))
