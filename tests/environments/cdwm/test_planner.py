"""The CDWM planner on a world model of its own (issue 40 item 5), no model loaded: a perfect world
model (the environment's ledger) never plays an irreversible mistake the noisy expert proposes,
while the same expert without a world model does, on the same MiniGrid seeds; and a trained
adapter is asked in its training prompt, under its learned mask's schema, and its predictions prune."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from agents.cdwm import CdwmGraph, trained_world_model
from agents.episode import PolicyReply, run_episode
from agents.trained_world_model import SYSTEM, TrainedWorldModel, prediction_schema
from environments.cdwm import wm_format
from environments.cdwm.planner_check import CheckConfig, LocalEnv, run_check
from harness.agents_registry import AgentConfig
from harness.environment import DIMENSIONS
from harness.errors import HarnessError
from harness.providers.base import ModelOutput


def test_a_perfect_world_model_never_plays_an_irreversible_mistake_the_expert_proposes() -> None:
    cfg = CheckConfig(world="minigrid", task_types=("lavagap",), episodes=4, seed=3, irreversible=0.3)
    none, oracle = run_check(cfg, ["none", "oracle"])
    # Without a world model the expert's lava steps are played: every such episode ends in lava.
    assert none.proposed_irreversible > 0 and none.taken_irreversible > 0 and none.irreversible_failures > 0
    # With the ledger as world model the same expert proposed such steps too, and none was played.
    assert oracle.proposed_irreversible > 0
    assert oracle.taken_irreversible == 0 and oracle.irreversible_failures == 0
    # The level's end is irreversible but the task's own: pruning does not stop it from finishing.
    assert oracle.successes > none.successes


def _adapter(tmp_path: Path, world: str = "minigrid", fmt: str = wm_format.PROMPT_FORMAT) -> Path:
    folder = tmp_path / "adapter"
    folder.mkdir(exist_ok=True)
    (folder / "cdwm_train.json").write_text(
        json.dumps({"format": fmt, "classes": [f"{world}/forward", f"{world}/left"], "settings": {"obs_chars": 700}})
    )
    gates = {
        f"{world}/forward": {d: 0.9 for d in DIMENSIONS},
        f"{world}/left": {d: (0.9 if d == "attributes" else 0.1) for d in DIMENSIONS},
    }
    (folder / "cdwm_mask.json").write_text(json.dumps({"threshold": 0.5, "gates": gates}))
    return folder


def test_a_trained_adapter_is_asked_as_trained_and_refuses_another_world(tmp_path: Path) -> None:
    folder = _adapter(tmp_path)
    tm = TrainedWorldModel.load(folder, "minigrid")
    assert tm.allowed("left") == frozenset({"attributes"}) and tm.allowed("drop") is None
    with pytest.raises(HarnessError, match="cdwm_train.json.*household"):
        TrainedWorldModel.load(folder, "household")
    other = tmp_path / "other"
    other.mkdir()
    with pytest.raises(HarnessError, match="prompt format"):
        TrainedWorldModel.load(_adapter(other, fmt="other/1"), "minigrid")


def test_the_planner_prunes_on_a_trained_models_prediction_in_its_training_prompt(tmp_path: Path) -> None:
    tm = TrainedWorldModel.load(_adapter(tmp_path), "minigrid")
    asked: list[tuple[list[dict[str, str]], Any]] = []

    async def generate(role: str, messages: list[dict[str, str]], config: Any) -> ModelOutput:
        assert role == "world_model"
        asked.append((messages, config))
        irreversible = messages[1]["content"].endswith("Action class: forward")
        return ModelOutput(
            text=json.dumps(
                {
                    "created": [],
                    "deleted": [],
                    "relations_added": [],
                    "relations_removed": [],
                    "attributes": [{"entity": "level", "attribute": "failed", "before": False, "after": True}]
                    if irreversible
                    else [{"entity": "agent", "attribute": "dir", "before": "east", "after": "north"}],
                    "reversible": not irreversible,
                    "irreversible_cost": 1 if irreversible else 0,
                    "confidence": 0.9,
                }
            )
        )

    class Fixed:
        async def propose(self, intent: str, obs: Any, steps: list, k: int) -> PolicyReply:
            return PolicyReply(["forward", "left"], "", 0)

        async def follow_up(self, intent: str, imagined: Any, steps: list, action: str) -> str | None:
            return None

    from environments.procgen.env import GridEnvironment

    env = GridEnvironment()
    obs = env.reset({"level": "lavagap", "seed": 1})
    cfg = AgentConfig(max_steps=1, candidates=2, action_format="constrained")
    graph = CdwmGraph(
        generate, LocalEnv(env), cfg, world_model=trained_world_model(tm, generate, cfg), proposer=Fixed()
    ).graph()
    state = asyncio.run(run_episode(graph, "reach the goal", obs, cfg, nodes_per_step=5))
    env.close()
    step = state["steps"][0]
    assert step.action == "left"  # forward was predicted to end the level in failure: pruned
    assert [c.get("pruned") is not None for c in step.candidates] == [True, False]
    row = {
        "world": "minigrid",
        "intent": "reach the goal",
        "observation": obs.text,
        "action": "left",
        "action_class": "left",
    }
    left = next(m for m, _ in asked if m[1]["content"].endswith("Action class: left"))
    assert left == wm_format.messages(row) and left[0]["content"] == SYSTEM  # the training prompt, exactly
    schemas = {m[1]["content"].rsplit(": ", 1)[1]: c.json_schema for m, c in asked}
    assert schemas["left"] == prediction_schema(frozenset({"attributes"}))  # the learned mask in the grammar
    assert schemas["forward"] == prediction_schema(frozenset(DIMENSIONS))


def test_a_suite_takes_a_trained_world_model_only_for_the_cdwm_agent_and_its_world(tmp_path: Path) -> None:
    from environments.procgen.suite import CdwmProcgenSuite, ProcgenOptions

    suite = CdwmProcgenSuite(ProcgenOptions(agent="cdwm", trained_world_model=str(_adapter(tmp_path))))
    assert suite.trained is not None and suite.trained.world == "minigrid"
    with pytest.raises(HarnessError, match="only the cdwm agent"):
        CdwmProcgenSuite(ProcgenOptions(agent="react", trained_world_model=str(_adapter(tmp_path))))
    other = tmp_path / "household"
    other.mkdir()
    with pytest.raises(HarnessError, match="none of 'minigrid'"):
        CdwmProcgenSuite(ProcgenOptions(agent="cdwm", trained_world_model=str(_adapter(other, world="household"))))
