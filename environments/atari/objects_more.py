"""Extractors for the twelve later Atari 100k games (Alien, Amidar, Assault, Battle Zone, Chopper
Command, Crazy Climber, Demon Attack, Gopher, H.E.R.O., Kung-Fu Master, Private Eye, Up'n Down),
kept apart from `objects.py` so neither module grows long; they are registered in
`objects.EXTRACTORS` with the rest.

Every address here was found on the emulator by holding one action from a cloned state against
`noop` and its opposite, and is checked in `tests/environments/atari/test_atari_extractors_more.py`
(docs/cdwm_visual.md says how). Where a byte falls as the stick goes DOWN, y is flipped so that,
as in every other game, DOWN raises y (Battle Zone, first person, has a heading instead).
"""

from __future__ import annotations

import numpy as np

from environments.atari.frame import Frame, coarse_fine_x, moving, x_only

ALIEN_Y_FLIP = 128  # RAM 45 (43..91 in play) falls as the player walks DOWN: y = 128 - it
HERO_Y_FLIP = 160  # RAM 31 (4..139 in play) rises as the hero flies UP and falls as he drops: y = 160 - it


def alien(ram: np.ndarray, prev: Frame | None) -> Frame:
    """The player's x (RAM 52, RIGHT raises it) and y (flipped RAM 45), and the eggs eaten (RAM
    91, one an egg, each worth 10 points): eating one is `ate egg`."""
    x, y = int(ram[52]), ALIEN_Y_FLIP - int(ram[45])
    player = {**moving("player", x, y, prev.raw if prev else {}), "eggs": int(ram[91])}
    frame = Frame({"player": player}, {"player": (x, y)})
    if prev is not None and player["eggs"] > prev.objects.get("player", {}).get("eggs", player["eggs"]):
        frame.relations.add(("player", "ate", "egg"))
    return frame


def amidar(ram: np.ndarray, prev: Frame | None) -> Frame:
    """The player's x/y on the grid (RAM 69/62; LEFT lowers x, DOWN raises y, two pixels a step,
    only along the grid's lines: a direction with no line there keeps it where it was going)."""
    x, y = int(ram[69]), int(ram[62])
    return Frame({"player": moving("player", x, y, prev.raw if prev else {})}, {"player": (x, y)})


def assault(ram: np.ndarray, prev: Frame | None) -> Frame:
    """The cannon's x (RAM 16, kept coarse/fine: RIGHT raises the decoded x 8 a step, 28..144)."""
    return x_only("player", coarse_fine_x(int(ram[16])), prev)


def demon_attack(ram: np.ndarray, prev: Frame | None) -> Frame:
    """The cannon's x (RAM 22, kept coarse/fine: RIGHT raises the decoded x 4 a step, ~14..124)."""
    return x_only("player", coarse_fine_x(int(ram[22])), prev)


def gopher(ram: np.ndarray, prev: Frame | None) -> Frame:
    """The farmer's x (RAM 31; RIGHT raises it 4 a step, 44..148)."""
    return x_only("farmer", int(ram[31]), prev)


def hero(ram: np.ndarray, prev: Frame | None) -> Frame:
    """The hero's x (RAM 27; RIGHT raises it 4 a step) and y (flipped RAM 31: UP, the helicopter
    pack, lowers y; walking off a ledge he falls and y rises)."""
    x, y = int(ram[27]), HERO_Y_FLIP - int(ram[31])
    return Frame({"player": moving("player", x, y, prev.raw if prev else {})}, {"player": (x, y)})


def private_eye(ram: np.ndarray, prev: Frame | None) -> Frame:
    """The car's x (RAM 63; RIGHT raises it 4 a step, LEFT lowers it 4; with no input it keeps
    rolling the way it faces, a pixel a step)."""
    return x_only("car", int(ram[63]), prev)


CHOPPER_Y_FLIP = 128  # RAM 72 (4..128 in play) rises as the chopper climbs (UP): y = 128 - it
CHOPPER_SPEED_STEP = 16  # RAM 42's speed (signed, -64..64) in these steps: 0..4


def chopper_command(ram: np.ndarray, prev: Frame | None) -> Frame:
    """The chopper's height as y (flipped RAM 72: UP lowers y four pixels a step, DOWN raises it)
    and its flight: RAM 42 is its signed speed (RIGHT adds 4 a step up to 64, LEFT takes 4 off,
    down to -64), read as `dx` (the way it flies) and `speed` (0..4). The chopper keeps its place
    on the screen while the desert scrolls, so there is no screen x; the world x is not read."""
    y = CHOPPER_Y_FLIP - int(ram[72])
    velocity = int(ram[42]) - 256 if ram[42] >= 128 else int(ram[42])
    player = moving("player", 0, y, prev.raw if prev else {})
    del player["x"]
    player.update(dx=(velocity > 0) - (velocity < 0), speed=abs(velocity) // CHOPPER_SPEED_STEP)
    return Frame({"player": player}, {"player": (0, y)})


def kung_fu_master(ram: np.ndarray, prev: Frame | None) -> Frame:
    """Thomas's x on the screen (RAM 74; he walks in from 209 to 131 on his own, then RIGHT raises
    it 4 a step and LEFT lowers it). Enemies and the floor's scroll are not read."""
    return x_only("player", int(ram[74]), prev)


def crazy_climber(ram: np.ndarray, prev: Frame | None) -> Frame:
    """The climber's window column as x (RAM 25, already coarse: RIGHT moves it a column over, 1..3
    left of the building's central gap) and the floors climbed (RAM 3 tens, RAM 2 units): pulling
    up a floor (UP then DOWN, a few steps each) adds one and scores 100: `climbed floor`."""
    column, floor = int(ram[25]), 10 * int(ram[3]) + int(ram[2])
    # No dx: a column step takes a few emulator steps, so the last step's motion is mostly 0.
    frame = Frame({"player": {"x": column, "floor": floor}}, {"player": (column, floor)})
    old = prev.objects.get("player") if prev else None
    if old is not None and floor > old["floor"]:
        frame.relations.add(("player", "climbed", "floor"))
    return frame


UP_N_DOWN_STOPPED = 128  # RAM 32 at a standstill: above it the car drives forward (up the road), below it back
UP_N_DOWN_WRAP = 64  # a jump of x larger than this is the buggy leaving one side of the screen for the other
UP_N_DOWN_SPEED_STEP = 16  # RAM 32's distance from a standstill in these steps: speed -8..7


def up_n_down(ram: np.ndarray, prev: Frame | None) -> Frame:
    """The buggy's x on the screen (RAM 49; it follows the diagonal road, so which way it goes
    depends on the road) and its speed (RAM 32 - 128, in steps of 16: UP adds 16 a step up to 127,
    DOWN takes 24 off down to -128, driving backwards; a crash leaves it at 0). Off the screen's
    left edge x wraps to its right (4 -> 158); `dx` keeps its sign through the wrap."""
    frame = x_only("player", int(ram[49]), prev)
    if prev and "player" in prev.raw and abs(frame.raw["player"][0] - prev.raw["player"][0]) > UP_N_DOWN_WRAP:
        frame.objects["player"]["dx"] *= -1
    frame.objects["player"]["speed"] = (int(ram[32]) - UP_N_DOWN_STOPPED) // UP_N_DOWN_SPEED_STEP
    return frame


BATTLE_ZONE_TURN = 64  # RAM 38 counts a full turn of the tank in 64 (RIGHT +2 an emulator step, LEFT -2)


def battle_zone(ram: np.ndarray, prev: Frame | None) -> Frame:
    """The tank's heading (RAM 38, mod 64) in eighths of a turn (0..7) and which way it turns
    (`turn`: 1 right, -1 left, the short way round the wrap). The view is first-person: the tank
    has no screen position; enemies and shots are not read. Before play starts (the first ~35
    emulator steps) RAM 38 holds 144, not a heading: no `player` until it does."""
    if ram[38] > BATTLE_ZONE_TURN:
        return Frame({}, {})
    heading = int(ram[38]) % BATTLE_ZONE_TURN  # it counts 1..64 turning left past 0: 64 is 0
    old = prev.raw["player"][0] if prev and "player" in prev.raw else heading
    step = (heading - old + BATTLE_ZONE_TURN // 2) % BATTLE_ZONE_TURN - BATTLE_ZONE_TURN // 2
    player = {"heading": heading * 8 // BATTLE_ZONE_TURN, "turn": (step > 0) - (step < 0)}
    return Frame({"player": player}, {"player": (heading, 0)})
