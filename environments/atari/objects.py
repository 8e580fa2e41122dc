"""Object-centric state read from the Atari 2600's 128 bytes of RAM, and the typed delta between
two such states (the CDWM schema: entities, attributes, relations, reversibility).

Each game with an extractor names its objects and where they live in RAM (addresses as the
AtariARI annotations publish them, checked here against the emulator; see the tests). Positions
are in cells of `CELL` pixels and velocities are signs (-1, 0, 1), so a delta lists what changed
in a way a world model can state, not every pixel of motion. The `game` entity (score, lives) is
read from the emulator itself for every one of the 26 games; games without an extractor get only
that (coarser deltas, said so in `coarse`).

The shared pieces (`Frame`, motion, RAM encodings) are in `frame.py`; the later games' extractors
in `objects_more.py`. `EXTRACTORS` below is the one registry `read` and `coarse` dispatch from.

Irreversible: a life lost (Breakout), a point conceded (Pong, Boxing), the game ending (any game); the
cost is the number of lives / points lost (1 for the game's end).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from environments.atari.frame import CELL, Frame, Objects, Raw, bcd, moving, positions, reversal, sign, x_only
from environments.atari.objects_more import (alien, amidar, assault, battle_zone, chopper_command, crazy_climber,
                                             demon_attack, gopher, hero, kung_fu_master, private_eye, up_n_down)
from harness.environment import AttributeChange, Delta, Relation


def breakout(ram: np.ndarray, prev: Frame | None) -> Frame:
    """Paddle x (RAM 72), ball x/y (99/101; y 0 = no ball in play)."""
    praw = prev.raw if prev else {}
    objects: Objects = {"paddle": {"x": int(ram[72]) // CELL}}
    raw: Raw = {}
    relations: set[tuple[str, str, str]] = set()
    heading: dict[str, tuple[int, int]] = {}
    bx, by = int(ram[99]), int(ram[101])
    if by:
        objects["ball"] = moving("ball", bx, by, praw)
        raw["ball"] = (bx, by)
        turned, heading["ball"] = reversal("ball", objects["ball"], prev, 1)
        if turned and objects["ball"]["dy"] < 0 and by >= 150:  # sent back up low on the screen: the paddle
            relations.add(("ball", "bounced off", "paddle"))
    return Frame(objects, raw, relations, heading)


def pong(ram: np.ndarray, prev: Frame | None) -> Frame:
    """Player (right paddle) y (RAM 51), enemy y (50), ball x/y (49/54; y 0 = no ball in play)."""
    praw = prev.raw if prev else {}
    objects: Objects = {"player": {"y": int(ram[51]) // CELL}, "enemy": {"y": int(ram[50]) // CELL}}
    raw: Raw = {}
    relations: set[tuple[str, str, str]] = set()
    heading: dict[str, tuple[int, int]] = {}
    bx, by = int(ram[49]), int(ram[54])
    if by:
        objects["ball"] = moving("ball", bx, by, praw)
        raw["ball"] = (bx, by)
        turned, heading["ball"] = reversal("ball", objects["ball"], prev, 0)
        if turned:  # a horizontal reversal is a paddle hit: the player's on the right half, the enemy's on the left
            relations.add(("ball", "bounced off", "player" if bx >= 80 else "enemy"))
    return Frame(objects, raw, relations, heading)


FREEWAY_LANES = 10  # RAM 108..117: car x per lane; lanes 0-4 drive right, 5-9 left


def freeway(ram: np.ndarray, prev: Frame | None) -> Frame:
    """Chicken y (RAM 14, rises from ~6 at the bottom kerb to ~177, then resets as a point is
    scored), car x per lane (RAM 108..117). A crossing is the chicken's y wrapping from the top
    back to the bottom. A car's push-back is not told apart from the player walking DOWN (both move
    the chicken down a pixel a frame, and no RAM byte flags the hit), so it is left as motion."""
    praw = prev.raw if prev else {}
    cy = int(ram[14])
    objects: Objects = {"chicken": moving("chicken", 0, cy, praw)}
    raw: Raw = {"chicken": (0, cy)}
    for lane in range(FREEWAY_LANES):
        name, cx = f"car{lane}", int(ram[108 + lane])
        objects[name] = moving(name, cx, 0, praw)
        raw[name] = (cx, 0)
    relations: set[tuple[str, str, str]] = set()
    if "chicken" in praw and praw["chicken"][1] > 150 and cy < 20:  # wrapped top -> bottom: crossed
        objects["chicken"]["dy"] = 1
        relations.add(("chicken", "crossed", "road"))
    return Frame(objects, raw, relations)


def boxing(ram: np.ndarray, prev: Frame | None) -> Frame:
    """Player x/y (RAM 32/34), enemy x/y (33/35), each boxer's landed punches (BCD, RAM 18/19).
    A landed punch is a contact: `punched` from the boxer whose count rose."""
    praw = prev.raw if prev else {}
    objects: Objects = {}
    raw: Raw = {}
    for name, (xa, ya, pa) in {"player": (32, 34, 18), "enemy": (33, 35, 19)}.items():
        x, y = int(ram[xa]), int(ram[ya])
        objects[name] = {**moving(name, x, y, praw), "punches": bcd(int(ram[pa]))}
        raw[name] = (x, y)
    relations: set[tuple[str, str, str]] = set()
    if prev is not None:
        for hitter, target in (("player", "enemy"), ("enemy", "player")):
            if objects[hitter]["punches"] > prev.objects.get(hitter, {}).get("punches", 0):
                relations.add((hitter, "punched", target))
    return Frame(objects, raw, relations)


def ms_pacman(ram: np.ndarray, prev: Frame | None) -> Frame:
    """Ms. Pac-Man x/y (RAM 10/16; LEFT lowers x, UP lowers y), the four ghosts' x/y (6..9 /
    12..15), and the dots eaten this level (RAM 119, one a dot): eating is `ate dot`."""
    praw = prev.raw if prev else {}
    objects: Objects = {}
    raw: Raw = {}
    for name, (xa, ya) in {"pacman": (10, 16), **{f"ghost{i}": (6 + i, 12 + i) for i in range(4)}}.items():
        x, y = int(ram[xa]), int(ram[ya])
        objects[name] = moving(name, x, y, praw)
        raw[name] = (x, y)
    objects["pacman"]["dots"] = int(ram[119])
    relations: set[tuple[str, str, str]] = set()
    if prev is not None and objects["pacman"]["dots"] > prev.objects.get("pacman", {}).get("dots", 0):
        relations.add(("pacman", "ate", "dot"))
    return Frame(objects, raw, relations)


SEAQUEST_SURFACE_Y = 13  # the submarine's y on the surface (RAM 97), where oxygen refills


def seaquest(ram: np.ndarray, prev: Frame | None) -> Frame:
    """The submarine's x/y (RAM 70/97; RIGHT raises x, DOWN raises y from 13 at the surface to
    108 at the bottom), its oxygen (RAM 102, 64 full, falling under water; in eighths, so a delta
    shows the level, not every tick), divers collected (RAM 62), and the x of the four lanes'
    enemies (RAM 30..33). Coming up to the surface is `surfaced`."""
    praw = prev.raw if prev else {}
    x, y = int(ram[70]), int(ram[97])
    objects: Objects = {"sub": {**moving("sub", x, y, praw), "oxygen": int(ram[102]) // 8, "divers": int(ram[62])}}
    raw: Raw = {"sub": (x, y)}
    for lane in range(4):
        name, ex = f"enemy{lane}", int(ram[30 + lane])
        objects[name] = moving(name, ex, 0, praw)
        raw[name] = (ex, 0)
    relations: set[tuple[str, str, str]] = set()
    if "sub" in praw and praw["sub"][1] > SEAQUEST_SURFACE_Y and y == SEAQUEST_SURFACE_Y:
        relations.add(("sub", "surfaced", "sea"))
    return Frame(objects, raw, relations)


FROSTBITE_WHITE = 12  # an unvisited floe row's colour byte (RAM 43..46); landing on it turns it blue


def frostbite(ram: np.ndarray, prev: Frame | None) -> Frame:
    """The player's x/y (RAM 102/100; RIGHT raises x, DOWN jumps a floe row down, raising y from 27
    on the shore to 131 on the bottom row), the body temperature (BCD, RAM 101, falling to freeze),
    the igloo's blocks (RAM 77, 255 before the first), and the four floe rows, top to bottom: x
    (RAM 34..31; the rows drift left, right, left, right, a pixel every other step) and whether
    visited (colour RAM 46..43 leaves white as the player lands; all four turn back white once
    every row is visited). Landing on a white row is `landed on` that floe, and adds a block."""
    praw = prev.raw if prev else {}
    x, y = int(ram[102]), int(ram[100])
    objects: Objects = {"player": {**moving("player", x, y, praw), "temperature": bcd(int(ram[101]))},
                        "igloo": {"blocks": (int(ram[77]) + 1) % 256}}
    raw: Raw = {"player": (x, y)}
    relations: set[tuple[str, str, str]] = set()
    for row in range(4):
        name, fx, colour = f"floe{row}", int(ram[34 - row]), int(ram[46 - row])
        # A row steps a pixel every other emulator step: its drift is the last non-zero step.
        drift = sign(fx - praw[name][0]) if name in praw else 0
        objects[name] = {"x": fx // CELL, "dx": drift or (prev.objects[name]["dx"] if prev else 0),
                         "visited": int(colour != FROSTBITE_WHITE)}
        raw[name] = (fx, 0)
        if prev is not None and objects[name]["visited"] and not prev.objects.get(name, {}).get("visited", 1):
            relations.add(("player", "landed on", name))
    return Frame(objects, raw, relations)


ASTERIX_LANES = 8  # the player walks on lanes 0 (top) .. 7 (RAM 39); each lane's item kind is RAM 18 - lane
ASTERIX_NO_ITEM = (0, 12)  # a lane's item kind before the first wave (0) and once the player took it (12)


def asterix(ram: np.ndarray, prev: Frame | None) -> Frame:
    """The player's x (RAM 41, RIGHT raises it) and lane as y (RAM 39, 0 at the top, UP lowers
    it), and an `item<lane>` entity while that lane holds an item (kind byte RAM 18 - lane). Taking
    the item in one's own lane empties its byte (12) as the score rises: `collected item<lane>`, and
    the item is deleted."""
    praw = prev.raw if prev else {}
    x, lane = int(ram[41]), int(ram[39])
    objects: Objects = {"player": moving("player", x, lane * CELL, praw)}  # the lane is y, in whole lanes
    raw: Raw = {"player": (x, lane * CELL)}
    for k in range(ASTERIX_LANES):
        if int(ram[18 - k]) not in ASTERIX_NO_ITEM:
            objects[f"item{k}"] = {"y": k}
    relations: set[tuple[str, str, str]] = set()
    if prev is not None:  # the lane it was in or is in now: a take and a lane change can share a frame
        for k in {lane, praw["player"][1] // CELL}:
            item = f"item{k}"
            if item in prev.objects and item not in objects and int(ram[18 - k]) == ASTERIX_NO_ITEM[1]:
                relations.add(("player", "collected", item))
    return Frame(objects, raw, relations)


def kangaroo(ram: np.ndarray, prev: Frame | None) -> Frame:
    """The kangaroo's x (RAM 17, RIGHT raises it) and y (RAM 16 in its own coarse rows: 18 standing
    on the ground floor, lower while jumping up, 19 ducking), as they are (a jump is 1-2 rows)."""
    frame = positions(ram, prev, {"player": (17, 16)})
    frame.objects["player"]["y"] = int(ram[16])  # already coarse: a cell of 8 would hide the jump
    return frame


def road_runner(ram: np.ndarray, prev: Frame | None) -> Frame:
    """The road runner's x/y (RAM 80/3; RIGHT raises x, DOWN raises y) and the coyote's (RAM 81/5),
    which chases it: its y follows the runner's a few steps behind and its x closes in."""
    return positions(ram, prev, {"player": (80, 3), "coyote": (81, 5)})


BANK_HEIST_WRAP = 64  # a jump of x larger than this is the car driving through the side tunnel


def bank_heist(ram: np.ndarray, prev: Frame | None) -> Frame:
    """The getaway car's x/y (RAM 28/8; RIGHT raises x two pixels a step, DOWN raises y on a
    vertical street; LEFT out of the maze's left edge wraps x to its right side, 12 -> 140)."""
    frame = positions(ram, prev, {"car": (28, 8)})
    if prev and "car" in prev.raw and abs(frame.raw["car"][0] - prev.raw["car"][0]) > BANK_HEIST_WRAP:
        frame.objects["car"]["dx"] *= -1  # through the tunnel: still heading the same way
    return frame


def qbert(ram: np.ndarray, prev: Frame | None) -> Frame:
    """Q*bert's x/y (RAM 43/67) on the pyramid, from the top cube (77, 25): the stick jumps a
    cube diagonally -- RIGHT down-right (x and y rise), DOWN down-left, UP up-right, LEFT up-left;
    off the pyramid's edge is a life lost."""
    return positions(ram, prev, {"player": (43, 67)})


def krull(ram: np.ndarray, prev: Frame | None) -> Frame:
    """The prince's x/y (RAM 90/98; RIGHT raises x four pixels a step, DOWN raises y two) in the
    opening battle, the scene the tests check (RAM 51 follows y ten pixels lower, not used)."""
    return positions(ram, prev, {"player": (90, 98)})


def jamesbond(ram: np.ndarray, prev: Frame | None) -> Frame:
    """The car's x on the screen (RAM 27; RIGHT raises it two pixels a step, LEFT lowers it one);
    its height while jumping is not read (x only)."""
    return x_only("car", int(ram[27]), prev)


EXTRACTORS: dict[str, Callable[[np.ndarray, Frame | None], Frame]] = {
    "breakout": breakout, "pong": pong, "freeway": freeway, "boxing": boxing, "ms_pacman": ms_pacman, "seaquest": seaquest,
    "frostbite": frostbite, "asterix": asterix, "kangaroo": kangaroo, "road_runner": road_runner,
    "bank_heist": bank_heist, "qbert": qbert, "krull": krull, "jamesbond": jamesbond,
    # objects_more.py (split out to keep modules small); a new game goes in either and is named here.
    "alien": alien, "amidar": amidar, "assault": assault, "demon_attack": demon_attack, "gopher": gopher,
    "hero": hero, "private_eye": private_eye, "chopper_command": chopper_command, "kung_fu_master": kung_fu_master,
    "crazy_climber": crazy_climber, "up_n_down": up_n_down, "battle_zone": battle_zone}
# Points the opponent scores (read from RAM), an irreversible loss in games without lives.
CONCEDED: dict[str, Callable[[np.ndarray], int]] = {
    "pong": lambda ram: int(ram[13]),
    "boxing": lambda ram: bcd(int(ram[19])),  # the enemy's landed punches
}


def read(game: str, ram: np.ndarray, score: float, lives: int, prev: Frame | None) -> Frame:
    """The game's object frame: its extractor's objects (if any) plus `game` (score, lives)."""
    extractor = EXTRACTORS.get(game)
    frame = extractor(ram, prev) if extractor else Frame({}, {})
    frame.objects["game"] = {"score": int(score), "lives": int(lives)}
    if game in CONCEDED:
        frame.objects["game"]["conceded"] = CONCEDED[game](ram)
    return frame


def coarse(game: str) -> bool:
    """True when the game has no object extractor (deltas are score and lives only)."""
    return game not in EXTRACTORS


def lost(before: Frame, after: Frame) -> int:
    """Lives and points lost from one frame to the next."""
    b, a = before.objects["game"], after.objects["game"]
    return max(0, b["lives"] - a["lives"]) + max(0, a.get("conceded", 0) - b.get("conceded", 0))


def delta_between(before: Frame, after: Frame, game_over: bool = False, cost: float | None = None) -> Delta:
    """The typed delta from one frame to another. Objects that appear are created, those that go
    are deleted; relations are `after`'s events (added, never carried); the irreversible cost is
    the lives and points lost plus 1 for the game's end, unless given (summed over a hold)."""
    b, a = before.objects, after.objects
    created = sorted(set(a) - set(b))
    deleted = sorted(set(b) - set(a))
    attributes = [AttributeChange(entity=e, attribute=k, before=b.get(e, {}).get(k), after=v)
                  for e in sorted(a) for k, v in sorted(a[e].items()) if b.get(e, {}).get(k) != v]
    relations = [Relation(subject=s, relation=r, object=o) for s, r, o in sorted(after.relations)]
    if cost is None:
        cost = float(lost(before, after) + (1 if game_over else 0))
    if game_over:
        attributes.append(AttributeChange(entity="game", attribute="over", before=False, after=True))
    return Delta(created=created, deleted=deleted, attributes=attributes, relations_added=relations,
                 reversible=cost == 0, irreversible_cost=cost)


def describe(frame: Frame) -> str:
    """The object list as the agent reads it."""
    lines = []
    for name in sorted(frame.objects):
        attrs = ", ".join(f"{k}={v}" for k, v in sorted(frame.objects[name].items()))
        lines.append(f"- {name}: {attrs}")
    return "\n".join(lines)
