"""`harness cdwm collect` on Atari: the collected deltas are the environment's own (replayed from
the same emulator seed: the same deltas), held-out games stay out of training, and the rule
perturbation `mirrored_controls` changes what a key does."""

from __future__ import annotations

import json

from environments.atari.explore import WORLD
from environments.cdwm.collect import CollectConfig, Shard, parse_heldout, play_shard, split_types


def config() -> CollectConfig:
    return CollectConfig(worlds=("atari",), transitions=30, shard_size=30, heldout=parse_heldout(None, ("atari",)))


def test_atari_deltas_equal_the_emulator_replayed():
    rows = play_shard(config(), Shard("atari", "train", 0, 30))
    assert len(rows) == 30 and sum(1 for r in rows if r["facts"]) > 15  # real changes were compared
    assert {r["source"] for r in rows} >= {"plan", "off_plan"}
    assert not {json.loads(r["task"])["game"] for r in rows} & set(config().heldout["atari"])
    episodes: dict[str, list[dict]] = {}
    for r in rows:
        episodes.setdefault(r["episode"], []).append(r)
    for steps in episodes.values():
        ep = WORLD.open(json.loads(steps[0]["task"]))
        try:
            assert ep.observation.text == steps[0]["observation"]
            for r in steps:
                result = ep.env.step(r["action"])
                assert result.delta.model_dump_json() == r["delta"], (r["episode"], r["step"], r["action"])
        finally:
            ep.close()


def test_mirrored_controls_change_what_a_key_does():
    assert [t for t, _ in split_types(WORLD, "heldout_rule", ("boxing",))] == ["breakout", "pong", "freeway"]
    moved = {}
    for perturbation in (None, "mirrored_controls"):
        ep = WORLD.open({"game": "breakout", "seed": 0, "perturbation": perturbation})
        try:
            start = ep.env.frame.objects["paddle"]["x"]
            for _ in range(3):
                ep.env.step("left")
            moved[perturbation] = ep.env.frame.objects["paddle"]["x"] - start
        finally:
            ep.close()
    assert moved[None] < 0 < moved["mirrored_controls"]
