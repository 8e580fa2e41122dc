"""The generative world-model baseline (issue 40 item 6): the collector writes the next observation;
reading it back and diffing with the observation before reproduces the ledger's delta; an older
collection still loads but is refused for --target generative; SFT trains on the next observation
as the reply; and the planner prunes a candidate whose predicted observation puts the agent on
lava (a scripted model: the test is about our logic, not a model's)."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest

from environments.cdwm.collect import NEXT, NEXT_STATUS, STATUS, CollectConfig, Shard, collect, parse_heldout, play_shard
from environments.cdwm.generative_model import (
    GENERATIVE_FORMAT,
    GENERATIVE_SYSTEM,
    MAX_TOKENS,
    GenerativeModel,
    row_messages,
    target,
)
from environments.procgen.facts import observation_delta, read_observation
from harness.environment import Delta
from harness.errors import HarnessError
from harness.providers.base import ModelOutput

MINIGRID = ("minigrid",)


def minigrid_rows(n: int = 60, split: str = "train", irreversible_rate: float = 0.2) -> list[Any]:
    cfg = CollectConfig(worlds=MINIGRID, transitions=n, seed=0, irreversible_rate=irreversible_rate,
                        heldout=parse_heldout(None, MINIGRID))
    return list(play_shard(cfg, Shard("minigrid", split, 0, n)))


def test_reading_the_true_next_observation_reproduces_the_ledgers_delta():
    rows = minigrid_rows() + minigrid_rows(30, "heldout_rule")
    assert {r["reversible"] for r in rows} == {True, False}  # level ends are among them
    for r in rows:
        truth = Delta.model_validate_json(r["delta"])
        read = observation_delta(r["observation"], r[NEXT])
        assert read is not None and read.facts() == truth.facts(), (r["action"], r["observation"], r[NEXT])
        assert (read.reversible, read.irreversible_cost) == (truth.reversible, truth.irreversible_cost)
    # the next observation is the observation the episode's next row starts from
    for a, b in zip(rows, rows[1:]):
        if a["episode"] == b["episode"]:
            assert a[NEXT] == b["observation"]
    assert read_observation("You arrive at countertop 1.") is None
    assert observation_delta(rows[0]["observation"], "no agent here") is None


def test_a_new_collection_has_the_column_an_older_one_loads_without_it_and_is_refused_for_generative(tmp_path: Path):
    from environments.cdwm.wm_train import load_splits
    from tests.environments.cdwm.wm_fixtures import write_dataset

    new = tmp_path / "new"
    collect(new, CollectConfig(worlds=MINIGRID, transitions=20, seed=0, shard_size=10,
                               heldout=parse_heldout(None, MINIGRID)))
    train = load_splits(new, "generative")["train"]
    assert {NEXT, STATUS, NEXT_STATUS} <= set(train.column_names) and set(train[STATUS]) == {""}  # MiniGrid keeps none
    old = write_dataset(tmp_path / "old")  # the columns a collection made before the next observation has
    assert NEXT not in load_splits(old, "delta")["train"].column_names
    with pytest.raises(HarnessError, match=r"old/dataset/train: no next_observation column.*collect the data again"):
        load_splits(old, "generative")


def _adapter(tmp_path: Path, world: str = "minigrid", fmt: str = GENERATIVE_FORMAT) -> Path:
    folder = tmp_path / f"gen-{world}-{fmt.replace('/', '_')}"
    folder.mkdir(exist_ok=True)
    (folder / "cdwm_train.json").write_text(json.dumps({"format": fmt, "classes": [f"{world}/forward"],
                                                        "settings": {"obs_chars": 700}}))
    return folder


def test_a_generative_adapter_is_refused_in_another_format_or_a_world_without_a_reader(tmp_path: Path):
    assert GenerativeModel.load(_adapter(tmp_path), "minigrid").world == "minigrid"
    with pytest.raises(HarnessError, match="not a generative model"):
        GenerativeModel.load(_adapter(tmp_path, fmt="harness-cdwm-wm/1"), "minigrid")
    with pytest.raises(HarnessError, match="no minigrid transition"):
        GenerativeModel.load(_adapter(tmp_path, "household"), "minigrid")
    assert GenerativeModel.load(_adapter(tmp_path, "household"), "household").world == "household"
    with pytest.raises(HarnessError, match="'web' has no observation reader"):
        GenerativeModel.load(_adapter(tmp_path, "web"), "web")


def _on_lava(obs: str) -> str:
    """The observation with the agent moved onto the level's first lava cell."""
    x, y = re.search(r"lava at \((\d+),(\d+)\)", obs).groups()  # type: ignore[union-attr]
    return re.sub(r"x=\d+, y=\d+", f"x={x}, y={y}", obs, count=1)


def _turned(obs: str) -> str:
    return re.sub(r"dir=\w+", "dir=north" if "dir=north" not in obs else "dir=west", obs, count=1)


def test_the_planner_prunes_a_candidate_whose_predicted_observation_is_on_lava(tmp_path: Path, monkeypatch):
    from environments.cdwm import planner_check
    from environments.cdwm.planner_check import CheckConfig, run_check

    asked: list[tuple[str, str, Any]] = []

    async def generate(role: str, messages: list[dict[str, str]], config: Any) -> ModelOutput:
        assert role == "world_model" and messages[0]["content"] == GENERATIVE_SYSTEM
        user = messages[1]["content"]
        obs = user.split("Observation:\n", 1)[1].rsplit("\nAction: ", 1)[0]
        action = user.rsplit("Action: ", 1)[1].split("\n")[0]
        asked.append((action, obs, config))
        return ModelOutput(text=_on_lava(obs) if action == "forward" else _turned(obs))

    async def closing() -> None:
        pass

    monkeypatch.setattr(planner_check, "model_generate", lambda spec: (generate, closing))
    adapter = _adapter(tmp_path)
    cfg = CheckConfig(task_types=("lavagap",), episodes=2, irreversible=1.0, candidates=2, max_steps=6, horizon=1)
    none, gen = run_check(cfg, ["none", f"generative:{adapter}"])
    # Every forward is predicted onto lava, so it is always declined: no level ends, no irreversible failure,
    # while ReAct on the same lure walks into lava.
    assert none.irreversible_failures > 0 and gen.irreversible_failures == 0
    assert gen.wm_calls == len(asked) > 0 and all(c.max_tokens == MAX_TOKENS for _, _, c in asked)
    assert {a for a, _, _ in asked} >= {"forward"}


def test_the_lookahead_asks_from_the_observation_the_model_predicted(tmp_path: Path):
    from agents.world_model import imagined_observation
    from environments.procgen.env import GridEnvironment

    env = GridEnvironment()
    obs = env.reset({"level": "lavagap", "seed": 1})
    env.close()
    texts: list[str] = []

    async def generate(role: str, messages: list[dict[str, str]], config: Any) -> ModelOutput:
        texts.append(messages[1]["content"])
        return ModelOutput(text=_turned(obs.text) if len(texts) == 1 else "nonsense")

    predict = GenerativeModel.load(_adapter(tmp_path), "minigrid").world_model(generate)
    first = asyncio.run(predict("reach the goal", obs, obs.text, "left", "left"))
    assert first.delta is not None and first.delta.reversible and first.confidence == 1.0
    assert [f[:3] for f in first.delta.facts()] == [("attr", "agent", "dir")]
    imagined = imagined_observation(obs.text, "left", first.delta)
    second = asyncio.run(predict("reach the goal", obs, imagined, "forward", "forward"))
    assert _turned(obs.text) in texts[1] and "[Imagined" not in texts[1]
    assert second.delta is None and second.source == "invalid"  # an unreadable reply is an invalid prediction


def test_generative_sft_writes_the_next_observation_as_the_reply(tmp_path: Path):
    pytest.importorskip("torch")
    import datasets

    from environments.cdwm.collect import COLUMNS, features
    from environments.cdwm.wm_train import TrainConfig, encode, end_of_turn_id, train
    from tests.environments.cdwm.wm_fixtures import tiny_base

    rows = {"train": minigrid_rows(8), "validation": minigrid_rows(4, "validation")}
    names = (*COLUMNS, NEXT)
    datasets.DatasetDict({s: datasets.Dataset.from_list([{c: r[c] for c in names} for r in rs], features=features(True))
                          for s, rs in rows.items()}).save_to_disk(str(tmp_path / "data" / "dataset"))
    base = tiny_base(tmp_path / "base")
    cfg = TrainConfig(data=str(tmp_path / "data"), base_model=str(base), steps=2, batch_size=2, rank=4, alpha=8,
                      top_layers=0, val_rows=2, eval_every=100, checkpoint_every=2, max_tokens=600,
                      target="generative")
    result = train(cfg, tmp_path / "out")
    assert result.step == 2 and result.examples == 8 and result.skipped == 0
    meta = json.loads((result.adapter / "cdwm_train.json").read_text())
    assert meta["format"] == GENERATIVE_FORMAT and meta["settings"]["target"] == "generative"
    assert GenerativeModel.load(result.adapter, "minigrid").world == "minigrid"
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(base))
    end = end_of_turn_id(tokenizer)
    example = encode(tokenizer, rows["train"][0], Delta(), 0, cfg, end)
    assert example is not None and sum(example.touched) == 0  # no mask target
    reply = [t for t in example.labels if t != -100]
    assert tokenizer.decode(reply[:-1], clean_up_tokenization_spaces=False) == rows["train"][0][NEXT] and reply[-1] == end


def _household_row(**extra: Any) -> dict[str, Any]:
    return {"world": "household", "intent": "put a clean apple on the table", "episode": "household-train-0000/0",
            "observation": "You arrive at countertop 1.", "action": "take apple 1 from countertop 1",
            "action_class": "take", NEXT: "You pick up the apple 1 from the countertop 1.", **extra}


def test_a_household_observation_is_its_status_then_its_reply_and_a_row_without_one_is_refused():
    row = _household_row(status="Status: at countertop 1; carrying nothing",
                         next_status="Status: at countertop 1; carrying apple 1")
    assert target(row) == "Status: at countertop 1; carrying apple 1\nYou pick up the apple 1 from the countertop 1."
    user = row_messages(row)[1]["content"]
    assert "Observation:\nStatus: at countertop 1; carrying nothing\nYou arrive at countertop 1." in user
    with pytest.raises(HarnessError, match=r"household row \(household-train-0000/0\) has no status column.*collect the data"):
        row_messages(_household_row())
    assert target({**_household_row(), "world": "minigrid"}) == row[NEXT]  # a world that keeps no status: its text


def _sliced_prediction(obs: str, action: str) -> str:
    """A scripted household model: a slice is predicted right (the object joins the sliced list, which
    holds at most it here); anything else as no change."""
    status, _, _reply = obs.partition("\n")
    m = re.fullmatch(r"slice (.+?) with (.+)", action)
    if m is None:
        return obs
    status += "" if "; sliced " in status else f"; sliced {m.group(1)}"
    return f"{status}\nYou sliced the {m.group(1)} with the {m.group(2)}."


def test_a_household_prediction_is_read_from_the_worlds_status_and_its_own_in_the_lookahead(tmp_path: Path):
    from agents.world_model import imagined_observation
    from harness.environment import Observation

    obs = Observation(text="You pick up the knife 1 from the countertop 1.",
                      info={"status": "Status: at countertop 1; carrying knife 1"})
    asked: list[str] = []

    async def generate(role: str, messages: list[dict[str, str]], config: Any) -> ModelOutput:
        user = messages[1]["content"]
        asked.append(user.split("Observation:\n", 1)[1].rsplit("\nAction: ", 1)[0])
        return ModelOutput(text=_sliced_prediction(asked[-1], user.rsplit("Action: ", 1)[1].split("\n")[0]))

    predict = GenerativeModel.load(_adapter(tmp_path, "household"), "household").world_model(generate)
    sliced = asyncio.run(predict("put a bread on the table", obs, obs.text, "slice bread 1 with knife 1", "slice"))
    assert asked[0] == "Status: at countertop 1; carrying knife 1\nYou pick up the knife 1 from the countertop 1."
    assert sliced.delta is not None and not sliced.delta.reversible  # what the planner prunes
    assert sliced.delta.facts() == {("attr", "bread 1", "sliced", "true")}
    # the lookahead asks from the observation the model predicted, and its own slice again changes nothing
    imagined = imagined_observation(obs.text, "slice bread 1 with knife 1", sliced.delta)
    again = asyncio.run(predict("put a bread on the table", obs, imagined, "slice bread 1 with knife 1", "slice"))
    assert asked[1].startswith("Status: at countertop 1; carrying knife 1; sliced bread 1\nYou sliced")
    assert again.delta is not None and again.delta.is_empty()
