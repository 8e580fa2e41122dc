"""The value-model baseline (issue 40 item 6): its labels, read from a collected row alone; SFT on
them lowers validation loss at the delta model's budget; and the planner declines a candidate the
value model scores bad, having asked it in its own prompt under the three-label constraint."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from agents.cdwm import CdwmGraph
from agents.episode import PolicyReply, run_episode
from environments.cdwm.collect import TransitionRow
from environments.cdwm.planner_check import LocalEnv
from environments.cdwm.value_model import LABELS, VALUE_FORMAT, VALUE_SYSTEM, ValueModel, goodness
from harness.agents_registry import AgentConfig
from harness.errors import HarnessError
from harness.providers.base import ModelOutput


def test_labels_follow_the_plan_the_outcome_and_reversibility():
    assert goodness({"source": "plan", "reversible": False, "won": False}) == "good"  # the plan's own (a level's end)
    assert goodness({"source": "off_plan", "reversible": True, "won": True}) == "good"
    assert goodness({"source": "irreversible", "reversible": False, "won": False}) == "bad"
    assert goodness({"source": "irreversible", "reversible": True, "won": False}) == "neutral"  # on the way there
    with pytest.raises(HarnessError, match="source.*harness cdwm collect"):
        goodness({"reversible": True, "won": False})


def _adapter(tmp_path: Path, world: str = "minigrid", fmt: str = VALUE_FORMAT) -> Path:
    folder = tmp_path / f"value-{world}-{fmt.replace('/', '_')}"
    folder.mkdir(exist_ok=True)
    (folder / "cdwm_train.json").write_text(json.dumps({"format": fmt, "classes": [f"{world}/forward"],
                                                        "settings": {"obs_chars": 700}}))
    return folder


def test_a_value_adapter_is_refused_for_another_world_or_a_delta_adapter(tmp_path: Path):
    assert ValueModel.load(_adapter(tmp_path), "minigrid").world == "minigrid"
    with pytest.raises(HarnessError, match="no household transition"):
        ValueModel.load(_adapter(tmp_path), "household")
    with pytest.raises(HarnessError, match="not a value model"):
        ValueModel.load(_adapter(tmp_path, "minigrid", "cdwm-delta/1"), "minigrid")


def test_the_planner_declines_a_candidate_the_value_model_scores_bad(tmp_path: Path):
    model = ValueModel.load(_adapter(tmp_path), "minigrid")
    asked: list[tuple[list[dict[str, str]], Any]] = []

    async def generate(role: str, messages: list[dict[str, str]], config: Any) -> ModelOutput:
        assert role == "world_model"
        asked.append((messages, config))
        return ModelOutput(text="bad" if messages[1]["content"].endswith("Action: forward\nAction class: forward")
                           else "good")

    class Fixed:
        async def propose(self, intent: str, obs: Any, steps: list, k: int) -> PolicyReply:
            return PolicyReply(["forward", "left"], "", 0)

        async def follow_up(self, intent: str, imagined: Any, steps: list, action: str) -> str | None:
            return None

    from environments.procgen.env import GridEnvironment

    env = GridEnvironment()
    obs = env.reset({"level": "lavagap", "seed": 1})
    cfg = AgentConfig(max_steps=1, candidates=2, action_format="constrained")
    graph = CdwmGraph(generate, LocalEnv(env), cfg, world_model=model.world_model(generate), proposer=Fixed()).graph()
    state = asyncio.run(run_episode(graph, "reach the goal", obs, cfg, nodes_per_step=5))
    env.close()
    step = state["steps"][0]
    assert step.action == "left"  # forward was scored bad: pruned, though the proposer put it first
    assert [c.get("pruned") is not None for c in step.candidates] == [True, False]
    assert all(m[0]["content"] == VALUE_SYSTEM and c.choice == list(LABELS) for m, c in asked)
    # it said nothing of what changes: the kept candidate's prediction has no facts
    kept = step.candidates[1]["prediction"]
    assert not any(kept[d] for d in ("created", "deleted", "attributes", "relations_added", "relations_removed"))


def test_value_sft_lowers_validation_loss_at_the_delta_models_budget(tmp_path: Path):
    torch = pytest.importorskip("torch")
    from environments.cdwm.wm_train import TrainConfig, train
    from tests.environments.cdwm.wm_fixtures import synthetic_rows, tiny_base, write_dataset

    def labelled(n: int, split: str) -> list[TransitionRow]:  # burn: irreversible off the plan; look: off-plan
        rows = synthetic_rows(n, 0, split)
        for r in rows:
            r["source"] = {"burn": "irreversible", "look": "off_plan"}.get(r["action_class"], "plan")
        return rows

    torch.manual_seed(0)
    data = write_dataset(tmp_path / "data", rows={"train": labelled(48, "train"), "validation": labelled(16, "validation")})
    cfg = TrainConfig(data=str(data), base_model=str(tiny_base(tmp_path / "base")), steps=6, batch_size=4, lr=2e-2,
                      rank=4, alpha=8, top_layers=0, val_rows=8, eval_every=100, checkpoint_every=6, max_tokens=256,
                      target="value")
    result = train(cfg, tmp_path / "out")
    assert result.val_loss_first is not None and result.val_loss_last is not None
    assert result.val_loss_last < result.val_loss_first
    meta = json.loads((result.adapter / "cdwm_train.json").read_text())
    assert meta["format"] == VALUE_FORMAT and meta["settings"]["target"] == "value"
    assert ValueModel.load(result.adapter, "toy").world == "toy"
    with pytest.raises(HarnessError, match="--target 'q'"):
        train(TrainConfig(data=str(data), target="q"), tmp_path / "bad")
