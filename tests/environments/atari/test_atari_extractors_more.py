"""The extractors of `objects_more.py` against the real emulator: each RAM address is checked by
what a held action does to it (sticky actions off, so the script alone decides the episode)."""

from __future__ import annotations

import random

from environments.atari.env import AtariEnvironment
from environments.atari.frame import coarse_fine_x
from environments.atari.objects import coarse
from tests.environments.atari.test_atari_extractors import changes, play, relations


def series(results, entity: str, attribute: str) -> list[object]:
    """The attribute after each agent step (None where that step left it unchanged)."""
    return [changes(r.delta).get((entity, attribute)) for r in results]


def held(game: str, wait: int, action: str, steps: int, address: int) -> list[int]:
    """RAM `address` after each of `steps` emulator steps holding `action`, after `wait` idle ones."""
    env = AtariEnvironment(action_repeat=1, sticky=0.0, filmstrip=False)
    env.reset({"game": game, "seed": 0})
    for _ in range(wait):
        env.step("noop")
    out = []
    for _ in range(steps):
        env.step(action)
        out.append(int(env.ram[address]))
    return out


def test_alien_player_follows_the_stick_and_eats_eggs():
    """Input acts from agent step ~8; RIGHT raises RAM 52, LEFT lowers it, DOWN lowers RAM 45 (so
    the flipped y rises), UP raises it; each egg walked over adds one to RAM 91 as 10 points score."""
    assert not coarse("alien")
    results, _ = play("alien", ["noop"] * 12 + ["right"] * 4 + ["down"] * 4 + ["up"] * 2 + ["left"] * 3)
    assert all(not changes(r.delta) for r in results[:8])
    assert series(results[12:15], "player", "x") == [8, 9, 10] and changes(results[12].delta)[("player", "dx")] == 1
    assert series(results[16:18], "player", "y") == [8, 9] and changes(results[16].delta)[("player", "dy")] == 1
    assert changes(results[20].delta)[("player", "dy")] == -1 and changes(results[21].delta)[("player", "y")] == 7
    assert series(results[22:25], "player", "x") == [9, 8, 7] and changes(results[22].delta)[("player", "dx")] == -1
    eaten = [i for i, r in enumerate(results) if ("player", "ate", "egg") in relations(r.delta)]
    assert eaten == [12, 13, 15, 16, 17]
    assert [changes(results[i].delta)[("player", "eggs")] for i in eaten] == [1, 2, 3, 4, 5]
    assert all(r.info["reward"] == (10 if i in eaten else 0) for i, r in enumerate(results))


def test_alien_every_egg_eaten_is_rewarded_in_random_play():
    """1,500 random emulator steps: every `ate egg` is a rewarded step, and eggs are nearly all the
    reward (one 10-point step there is not an egg: the counter, RAM 91, stays put)."""
    env = AtariEnvironment(action_repeat=1, sticky=0.0, filmstrip=False)
    env.reset({"game": "alien", "seed": 0})
    rng = random.Random(0)
    egg_steps = rewarded = unrewarded_eggs = 0
    for i in range(1500):
        r = env.step(rng.choice(env.actions))
        egg = ("player", "ate", "egg") in relations(r.delta)
        egg_steps += egg
        rewarded += r.info["reward"] > 0
        unrewarded_eggs += egg and not r.info["reward"]
        if r.done:
            env.reset({"game": "alien", "seed": i})
    assert unrewarded_eggs == 0 and egg_steps >= 30
    assert egg_steps >= 0.9 * rewarded


def test_amidar_player_follows_the_grid():
    """Input acts from agent step 16: DOWN raises RAM 62, UP lowers it; LEFT away from a crossing
    keeps the player going up its line (no horizontal line there) until the next crossing, then
    lowers RAM 69; RIGHT raises it; finishing a segment scores."""
    assert not coarse("amidar")
    results, _ = play("amidar", ["noop"] * 16 + ["down"] * 3 + ["up"] * 4 + ["left"] * 3 + ["right"] * 2)
    assert all(not changes(r.delta) for r in results[1:16])  # (the first step places the player)
    assert series(results[16:19], "player", "y") == [11, 12, 13] and changes(results[16].delta)[("player", "dy")] == 1
    assert series(results[19:23], "player", "y") == [12, 11, 10, 9] and changes(results[19].delta)[("player", "dy")] == -1
    turn = changes(results[23].delta)
    assert turn[("player", "y")] == 8 and ("player", "x") not in turn  # still on its vertical line
    assert series(results[24:26], "player", "x") == [15, 14] and changes(results[24].delta)[("player", "dx")] == -1
    assert changes(results[26].delta)[("player", "dx")] == 1 and results[25].info["reward"] > 0


def test_assault_and_demon_attack_cannons_decode_the_coarse_fine_byte():
    """Holding RIGHT, the raw byte (Assault RAM 16, Demon Attack RAM 22) jumps about, while
    15 * low nibble - signed high nibble rises a fixed amount each emulator step until the edge."""
    assert [coarse_fine_x(b) for b in (0x06, 0x86, 0xF7, 0x68, 0xE8)] == [90, 98, 106, 114, 122]
    raw = held("assault", 30, "right", 6, 16)
    assert raw != sorted(raw)  # the byte itself is not a position
    assert [coarse_fine_x(b) for b in raw] == [98, 106, 114, 122, 130, 138]
    raw = held("demon_attack", 40, "right", 8, 22)
    xs = [coarse_fine_x(b) for b in raw]
    assert raw != sorted(raw) and xs == list(range(xs[0], xs[0] + 32, 4))


def test_assault_cannon_follows_the_stick_to_the_edges():
    assert not coarse("assault")
    results, _ = play("assault", ["noop"] * 8 + ["right"] * 3 + ["left"] * 5)
    assert all(not changes(r.delta) for r in results[1:8])
    assert series(results[8:11], "player", "x") == [15, 18, None]  # the right edge (decoded 144)
    assert changes(results[8].delta)[("player", "dx")] == 1
    assert series(results[11:16], "player", "x") == [14, 10, 6, 3, None]  # the left edge (28)
    assert changes(results[11].delta)[("player", "dx")] == -1


def test_demon_attack_cannon_follows_the_stick():
    assert not coarse("demon_attack")
    results, _ = play("demon_attack", ["noop"] * 10 + ["right"] * 3 + ["left"] * 2)
    assert all(not changes(r.delta) for r in results[1:10])
    assert series(results[10:15], "player", "x") == [11, 13, 15, 13, 11]
    assert changes(results[10].delta)[("player", "dx")] == 1 and changes(results[13].delta)[("player", "dx")] == -1


def test_gopher_farmer_follows_the_stick():
    """RIGHT raises RAM 31 four pixels an emulator step, LEFT lowers it."""
    assert not coarse("gopher")
    results, _ = play("gopher", ["noop"] * 30 + ["right"] * 3 + ["left"] * 3)
    assert all(not changes(r.delta).get(("farmer", "x")) for r in results[:30])
    assert series(results[30:36], "farmer", "x") == [12, 14, 16, 14, 12, 10]
    assert changes(results[30].delta)[("farmer", "dx")] == 1 and changes(results[33].delta)[("farmer", "dx")] == -1


def test_private_eye_car_follows_the_stick_and_rolls_on():
    """Idle, the car rolls right a pixel an emulator step (RAM 63 rises); RIGHT raises it four,
    LEFT lowers it four, and idle again it rolls on to the left."""
    assert not coarse("private_eye")
    env = AtariEnvironment(sticky=0.0)
    env.reset({"game": "private_eye", "seed": 0})
    start = env.frame.raw["car"][0]
    for _ in range(10):
        env.step("noop")
    assert env.frame.raw["car"][0] - start >= 30 and env.frame.objects["car"]["dx"] == 1
    results = [env.step(a) for a in ["right"] * 3 + ["left"] * 3 + ["noop"] * 2]
    assert series(results[:6], "car", "x") == [10, 12, 14, None, 12, 10]
    assert changes(results[3].delta)[("car", "dx")] == -1
    assert env.frame.objects["car"]["dx"] == -1 and env.frame.raw["car"][0] < 80


def test_hero_walks_falls_and_flies():
    """The hero is let down into the shaft on his own (y rises for the first 4 agent steps); then
    RIGHT raises RAM 27 (x); walking off the first ledge he drops (RAM 31 falls, so the flipped
    y rises); UP spins up the helicopter pack and he rises to the ceiling (y falls); DOWN sinks
    him again; LEFT lowers x."""
    assert not coarse("hero")
    results, _ = play("hero", ["noop"] * 10 + ["right"] * 3 + ["up"] * 8 + ["down"] * 3)
    assert series(results[:4], "player", "y") == [4, 6, 8, 10]
    assert all(not changes(r.delta) for r in results[5:10])
    assert changes(results[10].delta)[("player", "dx")] == 1
    assert changes(results[11].delta)[("player", "y")] > 10  # off the ledge
    ys = [r for r in series(results[13:21], "player", "y") if r is not None]
    assert ys == sorted(ys, reverse=True) and ys[-1] <= 3  # up to the ceiling
    assert changes(results[23].delta)[("player", "dy")] == 1
    results, _ = play("hero", ["noop"] * 10 + ["right"] * 3 + ["noop"] * 3 + ["up"] * 3 + ["left"] * 2)
    assert series(results[19:21], "player", "x") == [4, 2] and changes(results[19].delta)[("player", "dx")] == -1


def test_chopper_command_climbs_and_flies_both_ways():
    """RIGHT adds 4 a step to the signed speed in RAM 42 (so `dx` 1 and `speed` grows); LEFT brakes
    it through 0 to negative (`dx` -1); UP raises RAM 72 (the flipped y falls), DOWN lowers it."""
    assert not coarse("chopper_command")
    results, env = play("chopper_command", ["noop"] * 10 + ["right"] * 3 + ["left"] * 6 + ["up"] * 3 + ["down"] * 3)
    assert all(not changes(r.delta) for r in results[:10])
    assert changes(results[10].delta)[("player", "dx")] == 1
    assert series(results[11:13], "player", "speed") == [1, 2]
    assert series(results[13:15], "player", "speed") == [1, 0]  # braking, still flying right
    assert changes(results[15].delta)[("player", "dx")] == -1
    assert series(results[16:19], "player", "speed") == [1, 2, 3]
    assert series(results[19:21], "player", "y") == [7, 5] and changes(results[19].delta)[("player", "dy")] == -1
    assert series(results[22:25], "player", "y") == [6, 8, 10] and changes(results[22].delta)[("player", "dy")] == 1
    assert int(env.ram[42]) < 128 and env.frame.objects["player"]["dx"] == 0  # let go: it coasts to a stop


def test_kung_fu_master_walks_in_then_follows_the_stick():
    """Thomas walks in from the right on his own (RAM 74 falls from 209 to 131, agent steps
    17-22); then RIGHT raises it 4 an emulator step and LEFT lowers it."""
    assert not coarse("kung_fu_master")
    results, _ = play("kung_fu_master", ["noop"] * 30 + ["right"] * 3 + ["left"] * 2)
    assert all(not changes(r.delta) for r in results[1:17])
    assert series(results[17:23], "player", "x") == [25, 23, 21, 19, 17, 16]
    assert all(not changes(r.delta).get(("player", "x")) for r in results[23:30])
    assert series(results[30:35], "player", "x") == [18, 20, 22, 20, 18]
    assert changes(results[30].delta)[("player", "dx")] == 1 and changes(results[33].delta)[("player", "dx")] == -1


def test_crazy_climber_moves_across_columns_and_climbs_floors():
    """RIGHT moves the climber a window column over (RAM 25: 1 -> 3, the last column left of the
    building's gap), LEFT back; UP then DOWN pulls him up a floor (RAM 3/2, tens/units, +1) for 100."""
    assert not coarse("crazy_climber")
    results, _ = play("crazy_climber", ["noop"] * 30 + ["up", "down"] * 2 + ["right"] * 3 + ["left"] * 3)
    assert all(not changes(r.delta) for r in results[1:30])
    climbed = [i for i, r in enumerate(results) if ("player", "climbed", "floor") in relations(r.delta)]
    assert climbed == [31, 33] and series(results[31:34], "player", "floor") == [1, None, 2]
    assert all(r.info["reward"] == (100 if i in climbed else 0) for i, r in enumerate(results))
    assert series(results[34:40], "player", "x") == [2, 3, None, 2, 1, None]


def test_crazy_climber_every_reward_is_a_floor_climbed():
    """1,500 random emulator steps: the rewarded steps and the `climbed floor` steps are the same."""
    env = AtariEnvironment(action_repeat=1, sticky=0.0, filmstrip=False)
    env.reset({"game": "crazy_climber", "seed": 0})
    rng = random.Random(0)
    climbed, rewarded = set(), set()
    for i in range(1500):
        r = env.step(rng.choice(env.actions))
        if ("player", "climbed", "floor") in relations(r.delta):
            climbed.add(i)
        if r.info["reward"] > 0:
            rewarded.add(i)
        if r.done:
            env.reset({"game": "crazy_climber", "seed": i})
    assert climbed == rewarded and len(climbed) >= 20


def test_up_n_down_buggy_speeds_up_backs_off_and_wraps():
    """From the start (RAM 32 = 144, creeping forward: speed 1), UP adds 16 a step (speed 5, 7) and
    the buggy climbs the road to the right (RAM 49 rises); DOWN takes it below 128 (backwards,
    speed -5, -8) and RAM 49 falls, wrapping from the left edge to the right still heading left."""
    assert not coarse("up_n_down")
    _, env = play("up_n_down", ["noop"] * 10)
    assert env.frame.objects["player"]["speed"] == 1
    results = [env.step("up") for _ in range(2)]
    assert series(results, "player", "speed") == [5, 7]
    assert changes(results[0].delta)[("player", "dx")] == 1 and changes(results[1].delta)[("player", "x")] == 6
    results, _ = play("up_n_down", ["noop"] * 10 + ["down"] * 4)
    assert series(results[10:12], "player", "speed") == [-5, -8]
    assert series(results[10:14], "player", "x") == [None, 2, 19, 17]  # 4 -> ... -> 158: the wrap
    assert changes(results[10].delta)[("player", "dx")] == -1
    assert not any(changes(r.delta).get(("player", "dx")) == 1 for r in results[10:14])  # not at the wrap either


def test_battle_zone_heading_turns_with_the_stick_and_wraps():
    """Once play starts (agent step 8: RAM 38 leaves 144 for a heading, and `player` is created),
    RIGHT raises RAM 38 by 2 an emulator step (an eighth of a turn an agent step), wrapping 63 -> 1,
    LEFT lowers it; `turn` says which way, the short way round."""
    assert not coarse("battle_zone")
    results, _ = play("battle_zone", ["noop"] * 12 + ["right"] * 6 + ["left"] * 8)
    assert [i for i, r in enumerate(results) if r.delta.created] == [8] and results[8].delta.created == ["player"]
    assert all(not changes(r.delta) for r in results[9:12])
    assert series(results[12:18], "player", "heading") == [3, 4, 5, 6, 7, 0]  # right round the wrap
    assert changes(results[12].delta)[("player", "turn")] == 1
    assert all(changes(r.delta).get(("player", "turn"), 1) == 1 for r in results[12:18])
    assert series(results[18:26], "player", "heading") == [7, 6, 5, 4, 3, 2, 1, 0]
    assert changes(results[18].delta)[("player", "turn")] == -1
    assert all(changes(r.delta).get(("player", "turn"), -1) == -1 for r in results[18:26])
