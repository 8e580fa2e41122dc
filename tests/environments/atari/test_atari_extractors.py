"""Freeway and Boxing extractors against the real emulator: each RAM address is checked by what a
known action does to it (no sticky actions, so the script alone decides the episode)."""

from __future__ import annotations

from environments.atari.env import AtariEnvironment
from environments.atari.objects import _bcd, coarse


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
