"""Post-training the delta world model on the composite reward (issue 40 item 4), at tiny sizes: the
reward's parts on constructed replies, one GRPO step raises the reward on a world whose answer is
known, a killed run resumes to the weights of an uninterrupted one, and bad input is one error
naming the file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from environments.cdwm import wm_format
from environments.cdwm.wm_posttrain import group_advantages, parse_reply, reply_parts, reply_reward
from harness.environment import DIMENSIONS, Delta
from harness.errors import HarnessError
from tests.environments.cdwm.wm_fixtures import synthetic_rows, tiny_base, write_dataset

torch = pytest.importorskip("torch")

# The known-answer world: every transition is a `look`, which changes nothing and is reversible; the
# learned mask leaves it only `irreversible` open, so a reply chooses the reversible flag, a cost and
# a confidence, and the best reply is the empty, reversible delta with cost 0 and confidence 1.
GATES = {"toy/look": {d: (0.9 if d == "irreversible" else 0.1) for d in DIMENSIONS}}


def _reply(delta: Delta, confidence: float) -> str:
    body, _ = wm_format.target_parts(delta)
    return f"{body}{confidence}}}"


def test_reward_parts_on_constructed_replies():
    truth = Delta(
        attributes=[{"entity": "cup", "attribute": "burnt", "before": False, "after": True}],
        created=["ash:1"],
        reversible=False,
        irreversible_cost=5.0,
    )
    schema = wm_format.prediction_schema(None)
    perfect = parse_reply(_reply(truth, 1.0), True, schema)
    parts = reply_parts(perfect, truth)
    assert parts == {"delta_accuracy": 1.0, "calibration": 1.0, "action_following": 1.0, "reversibility": 1.0}
    assert reply_reward(parts) == pytest.approx(1.0)
    # one of two facts (F1 2/3: correct), confidence 0.5, reversible where the truth is not
    half = reply_parts(parse_reply(_reply(Delta(created=["ash:1"]), 0.5), True, schema), truth)
    assert half["delta_accuracy"] == pytest.approx(2 / 3)
    assert half["calibration"] == pytest.approx(0.75) and half["reversibility"] == 0.0
    # reward.py's weights, renormalised over the per-transition parts: 0.3, 0.15, 0.15 of 0.6
    assert reply_reward(half) == pytest.approx((0.3 * 2 / 3 + 0.15 * 0.75 + 0.15) / 0.6)
    assert reply_reward(half, reversibility_weight=0.6) == pytest.approx((0.3 * 2 / 3 + 0.15 * 0.75 + 0.15) / 1.2)
    # wrong and sure: F1 0, calibration 1 - 0.9^2; irreversible with cost 4 of 5: reversibility 0.8
    wrong = reply_parts(
        parse_reply(_reply(Delta(deleted=["cup:1"], reversible=False, irreversible_cost=4), 0.9), True, schema), truth
    )
    assert wrong["delta_accuracy"] == 0.0 and wrong["calibration"] == pytest.approx(1 - 0.81)
    assert wrong["reversibility"] == pytest.approx(0.8)
    # invalid: cut at max_new_tokens, or a fact in a dimension the mask closed -> 0 on every part
    assert parse_reply(_reply(truth, 1.0), False, schema) is None
    masked = wm_format.prediction_schema({"attributes", "irreversible"})
    assert parse_reply(_reply(truth, 1.0), True, masked) is None
    assert set(reply_parts(None, truth).values()) == {0.0}
    assert group_advantages([1.0, 0.0, 0.5, 0.5]) == pytest.approx([1.4142, -1.4142, 0.0, 0.0], abs=1e-3)
    assert group_advantages([0.3, 0.3]) == [0.0, 0.0]


def _config(data: Path, adapter: Path, base: Path, **kw):
    from environments.cdwm.wm_posttrain import PosttrainConfig

    settings = dict(
        data=str(data),
        adapter=str(adapter),
        base_model=str(base),
        steps=2,
        rows=1,
        group_size=2,
        lr=5e-2,
        max_new_tokens=100,  # the reply's JSON frame alone is ~80 tokens
        eval_rows=0,
        checkpoint_every=1,
    )
    settings.update(kw)
    return PosttrainConfig(**settings)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """(data, starting adapter, base): a `harness cdwm train`-format adapter (LoRA rank 4 on the
    tiny random Llama, exported by wm_train) with the known-answer world's gates."""
    from environments.cdwm.causal_mask import CausalGates, LearnedMask
    from environments.cdwm.wm_train import TrainConfig, base_fingerprint, export, load_base, wrap_lora

    root = tmp_path_factory.mktemp("pt")
    looks = [r for r in synthetic_rows(80, 0, "train") if r["action_class"] == "look"][:6]
    data = write_dataset(root / "data", rows={"train": looks})
    base = tiny_base(root / "base")
    cfg = TrainConfig(data=str(data), base_model=str(base), rank=4, alpha=8, top_layers=0, max_tokens=256)
    model, _ = load_base(cfg)
    torch.manual_seed(0)
    peft_model = wrap_lora(model, cfg)
    meta = {
        "base": base_fingerprint(model),
        "base_name": str(base),
        "format": wm_format.PROMPT_FORMAT,
        "settings": cfg.learning_settings(),
        "classes": sorted(GATES),
    }
    adapter = export(root / "sft", peft_model, CausalGates(sorted(GATES), 64), meta, 3)
    LearnedMask(GATES).save(adapter)
    return data, adapter, base


def test_one_step_raises_the_reward(world):
    """The same step run twice draws its group with the same random numbers (the generator is a
    function of seed and step): the second draw, after the first's update, scores higher -- the
    update moved probability towards the group's better replies (cut-off numbers, wrong confidence
    or reversibility). Deterministic (seeded, CPU)."""
    from environments.cdwm.causal_mask import LearnedMask
    from environments.cdwm.wm_posttrain import Grammar, build_rows, load_policy, read_trained, rl_step
    from environments.cdwm.wm_train import load_splits, split_deltas

    data, adapter, base = world
    cfg = _config(data, adapter, base, group_size=6)
    peft_model, tokenizer, _ = load_policy(cfg, adapter, read_trained(adapter))
    grammar = Grammar(peft_model, tokenizer)
    train = load_splits(data)["train"]
    rows, skipped = build_rows(train, split_deltas(train, data, "train"), tokenizer, LearnedMask(GATES), 700, 448)
    assert skipped == 0 and rows[0].schema["properties"]["created"] == {"type": "array", "maxItems": 0}
    params = [p for p in peft_model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=0.0)
    first = rl_step(peft_model, tokenizer, grammar, optimizer, params, rows[:1], 0, cfg, tokenizer.eos_token_id)
    assert first["flat_groups"] == 0  # the group disagreed, so there was an update
    again = rl_step(peft_model, tokenizer, grammar, optimizer, params, rows[:1], 0, cfg, tokenizer.eos_token_id)
    assert again["reward"] > first["reward"] + 0.05, (first, again)


def test_resume_after_a_kill_gives_the_same_weights(world, tmp_path):
    from safetensors.torch import load_file

    from environments.cdwm.wm_posttrain import LOG_FILE, posttrain
    from environments.cdwm.wm_train import checkpoints

    data, adapter, base = world
    whole = posttrain(_config(data, adapter, base), tmp_path / "whole")
    killed = posttrain(_config(data, adapter, base), tmp_path / "killed", stop_after=1)
    assert killed.step == 1 and [p.name for p in checkpoints(tmp_path / "killed")] == ["step-000001"]
    resumed = posttrain(_config(data, adapter, base), tmp_path / "killed")
    assert resumed.resumed_from == 1 and resumed.step == whole.step == 2
    a = load_file(str(whole.adapter / "adapter_model.safetensors"))
    b = load_file(str(resumed.adapter / "adapter_model.safetensors"))
    start = load_file(str(adapter / "adapter_model.safetensors"))
    assert a.keys() == b.keys() == start.keys()
    assert all(torch.allclose(a[k], b[k], atol=1e-6) for k in a)
    assert any(not torch.allclose(a[k], start[k]) for k in a)  # it did train
    logged = [json.loads(x) for x in (tmp_path / "killed" / LOG_FILE).read_text().splitlines()]
    assert [e["step"] for e in logged] == [1, 2] and all("calibration" in e and "kl" in e for e in logged)
    exported = json.loads((resumed.adapter / "cdwm_train.json").read_text())
    assert exported["format"] == wm_format.PROMPT_FORMAT and exported["posttrain"]["step"] == 2
    assert json.loads((resumed.adapter / "cdwm_mask.json").read_text())["gates"] == GATES
    from preft.adapters import load_adapter

    assert load_adapter(resumed.adapter).rank == 4  # the local engine's loader serves what was exported


def test_bad_input_names_the_file(world, tmp_path):
    from environments.cdwm.wm_posttrain import posttrain

    data, adapter, base = world
    other = tiny_base(tmp_path / "other", seed=1)
    with pytest.raises(HarnessError, match=r"cdwm_train\.json: trained on .* not on .*other"):
        posttrain(_config(data, adapter, other), tmp_path / "o1")
    rows = synthetic_rows(6, 0, "train")
    for r in rows:
        r["world"] = "elsewhere"
    foreign = write_dataset(tmp_path / "foreign", rows={"train": rows})
    with pytest.raises(HarnessError, match=r"cdwm_train\.json: trained for action classes toy/look"):
        posttrain(_config(foreign, adapter, base), tmp_path / "o2")
