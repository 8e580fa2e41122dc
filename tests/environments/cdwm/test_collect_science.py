"""`harness cdwm collect` on ScienceWorld: the collected deltas are the environment's own diff of
the simulator's object tree (replayed in a fresh episode: the same deltas), and held-out task
types stay out of training."""

from __future__ import annotations

import random

from environments.cdwm.collect import CollectConfig, parse_heldout, play_episode, split_types
from environments.cdwm.deltas import Delta
from environments.science.explore import WORLD


def test_science_heldout_task_types_stay_out_of_training():
    held = parse_heldout(None, ("science",))["science"]
    assert held and all(t.startswith("chemistry-mix") for t in held)
    train = {t for t, _ in split_types(WORLD, "train", held)}
    assert not train & set(held) and len(train) == len(WORLD.task_types) - len(held)
    assert {t for t, _ in split_types(WORLD, "heldout_task_type", held)} == set(held)


def test_science_deltas_equal_the_simulator_replayed():
    # One short episode (no completion, so no gold replay in evaluate) of a task whose gold path is
    # cheap to generate; the replay loads the task without generating it (the JVM start and the
    # loads are most of this test's time).
    config = CollectConfig(
        worlds=("science",), transitions=4, off_plan_rate=0.5, heldout=parse_heldout(None, ("science",))
    )
    spec = {"task_name": "find-living-thing", "variation": 0}
    try:
        rows = play_episode(config, WORLD, spec, random.Random(0), {}, 4)
        assert len(rows) == 4 and any(r["facts"] for r in rows)  # real changes were compared
        env = WORLD._live()
        assert env.reset({**spec, "gold_path": False}).text == rows[0]["observation"]
        for r in rows:
            result = env.step(r["action"])
            # As facts: the order of a delta's lists follows the simulator's object tree, which a
            # load without the gold path lists in another order.
            recorded = Delta.model_validate_json(r["delta"])
            assert sorted(result.delta.facts()) == sorted(recorded.facts()), (r["step"], r["action"])
            assert (result.delta.reversible, result.delta.irreversible_cost) == (
                r["reversible"],
                r["irreversible_cost"],
            )
    finally:
        WORLD.shutdown()
