"""Suite `cdwm-procgen` (MiniGrid in place of Procgen): real MiniGrid levels, exact deltas of a
scripted solution, the lava trap irreversible, determinism per seed, clear errors."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from environments.cdwm.episode import Evaluation, Step
from environments.cdwm.metrics import episode_scores
from environments.procgen.env import GridEnvironment
from environments.procgen.suite import GRID_MASK, CdwmProcgenSuite, ProcgenOptions
from harness.errors import HarnessError

DOORKEY_0 = ["right", "pickup", "forward", "forward", "right", "toggle", "forward", "forward", "right", "forward",
             "forward"]


def facts_of(env: GridEnvironment, actions: list[str]) -> list[set]:
    return [env.step(a).delta.facts() for a in actions]


def test_a_level_is_a_function_of_its_seed():
    env = GridEnvironment()
    first = env.reset({"level": "doorkey", "seed": 0}).text
    assert env.reset({"level": "doorkey", "seed": 0}).text == first
    assert any(env.reset({"level": "doorkey", "seed": s}).text != first for s in (1, 2, 3))  # new seed, new level
    env.close()


def test_doorkey_solution_deltas_are_exact_and_the_level_end_is_required():
    env = GridEnvironment()
    env.reset({"level": "doorkey", "seed": 0})
    results = [env.step(a) for a in DOORKEY_0]
    facts = [r.delta.facts() for r in results]
    assert facts[0] == {("attr", "agent", "dir", "north")}
    assert facts[1] == {("delete", "key:yellow"), ("rel+", "agent", "carries", "key:yellow")}
    assert facts[5] == {("attr", "door:yellow", "locked", "false"), ("attr", "door:yellow", "open", "true")}
    assert facts[10] == {("attr", "agent", "y", "3"), ("attr", "level", "complete", "true")}
    assert all(r.delta.reversible for r in results[:10]) and not results[10].delta.reversible and results[10].done
    evaluation = env.evaluate()
    assert evaluation["success"] == 1.0 and evaluation["backend"] == "minigrid"
    steps = [Step(index=i, observation="", action=a, delta=r.delta) for i, (a, r) in enumerate(zip(DOORKEY_0, results))]
    assert episode_scores(steps, Evaluation.model_validate(evaluation), 0).unrequired_irreversible == []  # completing is what the task asks
    env.close()


def test_walking_into_lava_is_an_unrequired_irreversible_failure():
    env = GridEnvironment()
    env.reset({"level": "lavagap", "seed": 0})  # agent (1,1) facing east, lava at (2,1)
    result = env.step("forward")
    assert result.done and not result.delta.reversible
    assert ("attr", "level", "failed", "true") in result.delta.facts()
    steps = [Step(index=0, observation="", action="forward", delta=result.delta)]
    assert episode_scores(steps, Evaluation.model_validate(env.evaluate()), 0).unrequired_irreversible == ["forward"]
    env.close()


def test_invalid_actions_bad_levels_and_the_mask():
    env = GridEnvironment()
    env.reset({"level": "doorkey", "seed": 0})
    bad = env.step("jump")
    assert not bad.valid and "use one of left, right" in bad.info["error"] and env.steps == 0
    with pytest.raises(HarnessError, match="unknown level family 'coinrun'.*doorkey"):
        env.reset({"level": "coinrun"})
    with pytest.raises(ValidationError, match="unknown level family 'coinrun'"):
        CdwmProcgenSuite(ProcgenOptions(levels="doorkey,coinrun"))
    assert GRID_MASK.determined("stop") and GRID_MASK.allowed("left") == {"attributes"}
    suite = CdwmProcgenSuite()
    assert [s.id for s in suite.load_samples(None)] == ["doorkey-0", "doorkey-1", "lavagap-0", "lavagap-1"]
    assert "numpy<2" in suite.corpus_identity(None)["substitute_reason"]
    env.close()
