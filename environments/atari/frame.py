"""What every game's extractor builds on: the `Frame` (objects, raw positions, events), motion
as cells and signs, and the RAM encodings games share (BCD scores, horizontal positions kept as
the TIA's coarse/fine pair).

Positions are in cells of `CELL` pixels and velocities are signs (-1, 0, 1), so a delta lists
what changed in a way a world model can state, not every pixel of motion.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

CELL = 8  # pixels per position cell
Objects = dict[str, dict[str, int]]  # entity -> attribute -> value
Raw = dict[str, tuple[int, int]]  # entity -> raw (x, y) position, for velocities


@dataclass
class Frame:
    """One game's object state at one moment, plus the raw positions the next velocity needs."""

    objects: Objects
    raw: Raw
    relations: set[tuple[str, str, str]] = field(default_factory=set)
    heading: dict[str, tuple[int, int]] = field(default_factory=dict)  # last non-zero (dx, dy) per object


def sign(v: int) -> int:
    return (v > 0) - (v < 0)


def moving(name: str, x: int, y: int, prev: Raw) -> dict[str, int]:
    """An object's cell position and, when it was seen before, its direction of motion."""
    px, py = prev.get(name, (x, y))
    return {"x": x // CELL, "y": y // CELL, "dx": sign(x - px), "dy": sign(y - py)}


def reversal(name: str, obj: dict[str, int], prev: Frame | None, axis: int) -> tuple[bool, tuple[int, int]]:
    """Whether `name` reversed direction on `axis` (0: x, 1: y) since it last moved on it (the ball
    may pause a frame, so the last non-zero direction counts), and its heading now."""
    old = prev.heading.get(name, (0, 0)) if prev else (0, 0)
    now = (obj["dx"] or old[0], obj["dy"] or old[1])
    moved = (obj["dx"], obj["dy"])[axis]
    return bool(moved and old[axis] == -moved), now


def positions(ram: np.ndarray, prev: Frame | None, where: dict[str, tuple[int, int]]) -> Frame:
    """Objects that are just a position: name -> (x address, y address), each with its motion."""
    praw = prev.raw if prev else {}
    objects: Objects = {}
    raw: Raw = {}
    for name, (xa, ya) in where.items():
        x, y = int(ram[xa]), int(ram[ya])
        objects[name] = moving(name, x, y, praw)
        raw[name] = (x, y)
    return Frame(objects, raw)


def x_only(name: str, x: int, prev: Frame | None) -> Frame:
    """An object that only moves sideways (a cannon on the ground, a car on a road): x and dx."""
    obj = moving(name, x, 0, prev.raw if prev else {})
    del obj["y"], obj["dy"]
    return Frame({name: obj}, {name: (x, 0)})


def bcd(byte: int) -> int:
    """A binary-coded-decimal RAM byte (0x16 -> 16), as Activision games keep their scores."""
    return (byte >> 4) * 10 + (byte & 0x0F)


def coarse_fine_x(byte: int) -> int:
    """A horizontal position kept as the TIA wants it: the low nibble counts 15-pixel coarse steps,
    the high nibble is the fine motion (signed, -8..7, a positive value moving left), so
    x = 15 * coarse - fine. The raw byte jumps about as the object walks; this rises steadily."""
    fine = byte >> 4
    return 15 * (byte & 0x0F) - (fine - 16 if fine >= 8 else fine)
