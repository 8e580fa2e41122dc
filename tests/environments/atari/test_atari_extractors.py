"""The object extractors against the real emulator: each RAM address is checked by what a
known action does to it (no sticky actions, so the script alone decides the episode)."""

from __future__ import annotations

from environments.atari.env import AtariEnvironment
from environments.atari.frame import bcd as _bcd
from environments.atari.objects import coarse


def play(game: str, actions: list[str]):
    env = AtariEnvironment(sticky=0.0)
    env.reset({"game": game, "seed": 0})
    return [env.step(a) for a in actions], env


def changes(delta) -> dict[tuple[str, str], object]:
    return {(a.entity, a.attribute): a.after for a in delta.attributes}


def test_bcd_scores():
    assert [_bcd(b) for b in (0x00, 0x09, 0x10, 0x16, 0x99)] == [0, 9, 10, 16, 99]


def test_freeway_up_moves_the_chicken_up_and_a_crossing_scores():
    assert not coarse("freeway")
    results, _ = play("freeway", ["up"] * 40)
    first = changes(results[0].delta)
    assert first[("chicken", "dy")] == 1 and first[("chicken", "y")] > 0
    # The cars drive on their own: the five lower lanes to the right, the five upper ones to the left.
    moved = {(e, k): v for r in results[:3] for (e, k), v in changes(r.delta).items() if k == "dx"}
    assert all(moved.get((f"car{lane}", "dx"), 1) == 1 for lane in range(5))
    assert all(moved.get((f"car{lane}", "dx"), -1) == -1 for lane in range(5, 10))
    assert any(moved.get((f"car{lane}", "dx")) for lane in range(10))
    crossings = [i for i, r in enumerate(results)
                 if any(rel.relation == "crossed" for rel in r.delta.relations_added)]
    assert crossings, "40 steps of UP (640 frames) cross the road at least once"
    at = results[crossings[0]].delta
    assert changes(at)[("game", "score")] == 1 and at.reversible  # a point scored, nothing lost
    assert "- chicken:" in results[0].observation.text and "- car9:" in results[0].observation.text


def test_boxing_moves_follow_the_stick_and_a_landed_punch_is_a_conceded_point():
    results, _ = play("boxing", ["right", "right", "down", "down"])
    assert changes(results[0].delta)[("player", "dx")] == 1
    assert changes(results[2].delta)[("player", "dy")] == 1
    # Standing still, the computer boxer lands punches: a contact relation and an irreversible point.
    results, env = play("boxing", ["noop"] * 60)
    punched = [r.delta for r in results if any(rel.relation == "punched" for rel in r.delta.relations_added)]
    assert punched, "the computer lands a punch within 60 idle steps (960 frames)"
    first = punched[0]
    assert [(r.subject, r.object) for r in first.relations_added] == [("enemy", "player")]
    assert not first.reversible and first.irreversible_cost >= 1
    assert changes(first)[("game", "conceded")] == changes(first)[("enemy", "punches")] >= 1
    assert env.evaluate()["score"] < 0


def test_ms_pacman_follows_the_stick_eats_dots_and_the_ghosts_move():
    """No input moves anything during the opening tune (16 agent steps); then Ms. Pac-Man sets off
    left on her own, RIGHT turns her round, every step along the corridor eats a dot."""
    results, _ = play("ms_pacman", ["noop"] * 17 + ["right"] * 4)
    assert all(not r.delta.attributes for r in results[:16])
    assert changes(results[16].delta)[("pacman", "dx")] == -1
    assert changes(results[17].delta)[("pacman", "dx")] == 1
    xs = [changes(r.delta)[("pacman", "x")] for r in results[17:]]
    assert xs == sorted(xs) and xs[-1] > xs[0]
    eaten = [r.delta for r in results if any(rel.relation == "ate" for rel in r.delta.relations_added)]
    dots = [changes(d)[("pacman", "dots")] for d in eaten]
    assert len(eaten) == 5 and dots == list(range(1, 6))
    assert all(d.reversible for d in eaten)  # a dot eaten is progress, not a loss
    ghosts = {e for r in results[16:] for (e, k) in changes(r.delta) if e.startswith("ghost") and k in ("x", "y")}
    assert len(ghosts) >= 3


def test_seaquest_sub_follows_the_stick_and_surfacing_without_divers_costs_a_life():
    """Oxygen fills on the surface first (8 agent steps, nothing moves the sub); then RIGHT raises
    x and DOWN y; back on the surface with no diver aboard, the game takes a life."""
    results, _ = play("seaquest", ["noop"] * 8 + ["right"] * 3 + ["down"] * 5 + ["up"] * 5 + ["noop"] * 6)
    assert [changes(r.delta).get(("sub", "oxygen")) for r in results[:8]] == list(range(1, 9))
    assert changes(results[8].delta)[("sub", "dx")] == 1
    assert [changes(r.delta)[("sub", "y")] for r in results[11:16]] == [3, 5, 7, 9, 11]
    assert changes(results[16].delta)[("sub", "dy")] == -1
    surfaced = [i for i, r in enumerate(results) if any(rel.relation == "surfaced" for rel in r.delta.relations_added)]
    assert surfaced == [20]
    lost = [(i, r.delta) for i, r in enumerate(results) if not r.delta.reversible]
    assert len(lost) == 1 and lost[0][0] > 20 and lost[0][1].irreversible_cost == 1.0
    assert changes(lost[0][1])[("game", "lives")] == 3


def relations(delta) -> list[tuple[str, str, str]]:
    return [(r.subject, r.relation, r.object) for r in delta.relations_added]


def first_loss(game: str, steps: int):
    """The first irreversible delta of `steps` idle agent steps (the world moves on its own)."""
    results, _ = play(game, ["noop"] * steps)
    return next((i, r.delta) for i, r in enumerate(results) if not r.delta.reversible)


def test_frostbite_player_follows_the_stick_lands_on_floes_and_freezes():
    """Nothing moves the player for 4 agent steps; then RIGHT raises RAM 102, DOWN jumps a floe row
    down (RAM 100 rises) and each first landing on a row scores 10, turns the row and adds an igloo
    block; the rows drift left, right, left, right; idle on the shore, the temperature (BCD RAM 101)
    falls from 45 to 0 and the player freezes: a life lost."""
    assert not coarse("frostbite")
    results, env = play("frostbite", ["noop"] * 4 + ["right"] * 2 + ["down"] * 4)
    assert all(not changes(r.delta) for r in results[:4])
    assert changes(results[4].delta)[("player", "dx")] == 1
    assert changes(results[5].delta)[("player", "x")] > changes(results[4].delta)[("player", "x")]
    assert changes(results[6].delta)[("player", "dy")] == 1
    landed = [(i, r.delta) for i, r in enumerate(results) if relations(r.delta)]
    assert [(i, relations(d)) for i, d in landed] == [(7, [("player", "landed on", "floe0")]),
                                                     (9, [("player", "landed on", "floe1")])]
    for n, (_, delta) in enumerate(landed, start=1):
        got = changes(delta)
        assert got[("game", "score")] == 10 * n and got[("igloo", "blocks")] == n and got[(f"floe{n - 1}", "visited")] == 1
        assert delta.reversible
    assert [env.frame.objects[f"floe{row}"]["dx"] for row in range(4)] == [-1, 1, -1, 1]
    assert env.frame.objects["player"]["temperature"] < 45
    at, lost = first_loss("frostbite", 220)
    assert at > 150 and lost.irreversible_cost == 1.0 and changes(lost)[("game", "lives")] == 3
    assert changes(lost)[("player", "temperature")] == 45  # frozen at 0; the next life starts warm


def test_asterix_player_follows_the_stick_and_collects_the_item_in_its_lane():
    """RIGHT raises RAM 41, UP lowers the lane (RAM 39), DOWN raises it; walking into the item of
    one's lane empties its kind byte (RAM 18 - lane) as 50 points are scored: `collected`, deleted."""
    assert not coarse("asterix")
    results, _ = play("asterix", ["noop"] + ["right"] * 3 + ["up"] * 3 + ["down"] * 4)
    assert set(results[0].delta.created) == {f"item{k}" for k in range(8)}
    assert changes(results[0].delta)[("player", "y")] == 3
    assert changes(results[1].delta)[("player", "dx")] == 1
    assert relations(results[2].delta) == [("player", "collected", "item3")]
    assert results[2].delta.deleted == ["item3"] and changes(results[2].delta)[("game", "score")] == 50
    assert changes(results[4].delta)[("player", "y")] == 0
    assert changes(results[7].delta)[("player", "dy")] == 1
    for r in results:  # every take is 50 points, and every point here comes from a take
        taken = [rel for rel in relations(r.delta) if rel[1] == "collected"]
        assert r.info["reward"] == 50 * len(taken) and r.delta.reversible
    at, lost = first_loss("asterix", 100)
    assert lost.irreversible_cost == 1.0 and changes(lost)[("game", "lives")] == 2


def test_kangaroo_follows_the_stick_and_jumps_up():
    """No input moves the kangaroo for 15 agent steps; then RIGHT raises RAM 17, LEFT lowers it and
    UP jumps (RAM 16 drops from 18, the ground floor); idle, the monkeys' coconuts take a life."""
    assert not coarse("kangaroo")
    results, _ = play("kangaroo", ["noop"] * 15 + ["right"] * 3 + ["left"] * 2 + ["up"])
    assert all(not changes(r.delta) for r in results[:15])
    assert changes(results[15].delta)[("player", "dx")] == 1
    xs = [changes(r.delta)[("player", "x")] for r in results[16:20]]
    assert xs[0] < xs[1] and xs[2] < xs[1] and xs[3] < xs[2]
    assert changes(results[18].delta)[("player", "dx")] == -1
    assert changes(results[20].delta)[("player", "y")] < 18
    at, lost = first_loss("kangaroo", 80)
    assert at > 15 and lost.irreversible_cost == 1.0 and changes(lost)[("game", "lives")] == 2


def test_road_runner_follows_the_stick_and_the_coyote_chases_it():
    """No input moves the runner for 15 agent steps; then LEFT lowers RAM 80 and DOWN raises RAM 3;
    standing still, the coyote (RAM 81/5) comes to the runner's row and closes in, and a catch
    costs a life."""
    assert not coarse("road_runner")
    results, env = play("road_runner", ["noop"] * 15 + ["left"] * 3 + ["down"] * 3 + ["noop"] * 6)
    assert all(not changes(r.delta) for r in results[:15])
    assert changes(results[15].delta)[("player", "dx")] == -1
    assert changes(results[18].delta)[("player", "dy")] == 1
    ys = [changes(r.delta).get(("player", "y")) for r in results[18:21]]
    assert ys[0] < ys[1] < ys[2]
    runner, coyote = env.frame.objects["player"], env.frame.objects["coyote"]
    assert coyote["y"] == runner["y"] and abs(coyote["x"] - runner["x"]) <= 1
    _, start = play("road_runner", ["noop"])
    assert start.frame.objects["coyote"]["x"] - start.frame.objects["player"]["x"] >= 3  # it starts behind
    at, lost = first_loss("road_runner", 120)
    assert at > 15 and lost.irreversible_cost == 1.0 and changes(lost)[("game", "lives")] == 2


def test_the_bench_measures_every_game_with_an_extractor():
    import inspect

    from environments.atari.bench import run_visual_bench
    from environments.atari.commands import bench_visual_cmd
    from environments.atari.objects import EXTRACTORS

    cli_default = inspect.signature(bench_visual_cmd).parameters["games"].default.default
    assert cli_default.split(",") == list(EXTRACTORS)
    assert inspect.signature(run_visual_bench).parameters["games"].default == tuple(EXTRACTORS)


def test_bank_heist_car_follows_the_stick_and_wraps_through_the_tunnel():
    """No input moves the car for 15 agent steps; RIGHT raises RAM 28, DOWN raises RAM 8 on the
    street there, UP lowers it; LEFT out of the left edge brings the car in on the right, still
    heading left."""
    assert not coarse("bank_heist")
    results, _ = play("bank_heist", ["noop"] * 15 + ["right"] * 3 + ["down"] * 3 + ["up"] * 2 + ["left"] * 6)
    assert all(not changes(r.delta) for r in results[:15])
    assert [changes(r.delta)[("car", "x")] for r in results[15:18]] == [2, 3, 4]
    assert changes(results[15].delta)[("car", "dx")] == 1
    assert [changes(r.delta)[("car", "y")] for r in results[19:21]] == [6, 7]
    assert changes(results[21].delta)[("car", "dy")] == -1
    xs = [changes(r.delta).get(("car", "x")) for r in results[23:]]
    assert xs == [4, 3, 2, 1, 16, 15]
    # One emulator step per delta: the step through the tunnel (x 12 -> 140) is still heading left.
    env = AtariEnvironment(action_repeat=1, sticky=0.0)
    env.reset({"game": "bank_heist", "seed": 0})
    for _ in range(60):
        env.step("noop")
    wrap = env.step("left").delta
    assert changes(wrap)[("car", "x")] == 140 // 8 and changes(wrap)[("car", "dx")] == -1


def test_qbert_jumps_follow_the_stick_and_jumping_off_the_pyramid_costs_a_life():
    """From the top cube (RAM 43/67 = 77/25, there from agent step 9): RIGHT jumps down-right (x and
    y rise), DOWN down-left, UP up-right, LEFT up-left back to the top; LEFT again leaves the
    pyramid and Q*bert falls: a life lost."""
    assert not coarse("qbert")
    env = AtariEnvironment(sticky=0.0)
    env.reset({"game": "qbert", "seed": 0})
    for _ in range(15):
        env.step("noop")
    player = env.frame.objects["player"]
    top = (player["x"], player["y"])
    cells, rewards = [], []
    for jump in ("right", "down", "up", "left"):
        rewards.append(sum(env.step(a).info["reward"] for a in (jump, "noop", "noop")))  # a jump lands within 3
        player = env.frame.objects["player"]
        cells.append((player["x"], player["y"]))
    (rx, ry), (dx, dy), (ux, uy), (lx, ly) = cells
    assert rx > top[0] and ry > top[1]  # down-right
    assert dx < rx and dy > ry  # down-left
    assert ux > dx and uy < dy  # up-right
    assert (lx, ly) == top  # up-left, back on the top cube
    assert rewards[0] > 0 and rewards[1] > 0  # landing on a new cube scores (it changes colour)
    falls, _ = play("qbert", ["noop"] * 15 + ["left"] + ["noop"] * 6)
    lost = [r.delta for r in falls if not r.delta.reversible]
    assert len(lost) == 1 and changes(lost[0])[("game", "lives")] == 3


def test_krull_prince_follows_the_stick():
    """In the opening battle (input moves the prince from agent step 30): RIGHT raises RAM 90, DOWN
    raises RAM 98, UP lowers it, LEFT lowers RAM 90."""
    assert not coarse("krull")
    results, _ = play("krull", ["noop"] * 30 + ["right"] * 2 + ["down"] * 2 + ["up"] * 3 + ["left"] * 2)
    xs = [changes(r.delta).get(("player", "x")) for r in results[30:32]]
    assert xs[0] is not None and xs[1] is not None and xs[0] < xs[1]
    assert changes(results[30].delta)[("player", "dx")] == 1
    assert changes(results[32].delta)[("player", "dy")] == 1
    assert changes(results[34].delta)[("player", "dy")] == -1
    ys = [changes(r.delta)[("player", "y")] for r in results[32:37]]
    assert ys[0] < ys[1] and ys[2] > ys[3] > ys[4]
    assert changes(results[37].delta)[("player", "dx")] == -1


def test_jamesbond_car_follows_the_stick():
    """Idle, the car loses a life at agent step 25 and comes back; from step 30 RIGHT raises RAM 27
    and LEFT lowers it."""
    assert not coarse("jamesbond")
    results, _ = play("jamesbond", ["noop"] * 30 + ["right"] * 2 + ["left"] * 2)
    assert [i for i, r in enumerate(results) if not r.delta.reversible] == [25]
    assert all(not changes(r.delta).get(("car", "x")) for r in results[:30])
    assert [changes(r.delta)[("car", "x")] for r in results[30:32]] == [4, 5]
    assert changes(results[30].delta)[("car", "dx")] == 1
    assert changes(results[32].delta)[("car", "dx")] == -1 and changes(results[33].delta)[("car", "x")] == 4
