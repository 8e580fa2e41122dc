"""The proposer's token charge (protocol `tokens`): the embedded model's policy prompt and a nominal
reply, counted with its own tokenizer; and a record written before the charge still loads."""

from __future__ import annotations

import json

from agents.episode import policy_messages
from environments.cdwm.planner_suite import PlannerScores, PlannerTranscript
from environments.cdwm.proposer_tokens import embedded_tokenizer, nominal_reply, proposal_charge
from harness.agents_registry import AgentConfig, StepRecord
from harness.environment import Observation


def test_the_charge_is_the_embedded_policy_prompt_and_a_nominal_reply_in_its_tokenizer() -> None:
    cfg = AgentConfig(candidates=2, action_format="constrained")
    obs = Observation(text="You are in a kitchen.", action_classes=("go to", "take"),
                      admissible=["go to fridge 1", "take apple 1 from countertop 1"])
    actions = ["take apple 1 from countertop 1", "go to fridge 1"]
    messages = policy_messages("put an apple in the fridge", obs, [], cfg, 2)
    tok = embedded_tokenizer()
    prompt = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
    prompt = prompt["input_ids"] if isinstance(prompt, dict) or hasattr(prompt, "keys") else prompt
    reply = tok.encode(json.dumps({"thought": "", "actions": actions}) + "<|im_end|>", add_special_tokens=False)
    charge = proposal_charge("put an apple in the fridge", obs, [], cfg, 2, actions)
    assert charge == len(prompt) + len(reply) and len(prompt) > 100
    assert json.loads(nominal_reply(actions))["actions"] == actions
    # A longer history is a longer prompt: later steps cost more.
    steps = [StepRecord(index=0, observation="", action="go to fridge 1", action_class="go to", valid=True, delta={})]
    assert proposal_charge("put an apple in the fridge", obs, steps, cfg, 2, actions) > charge


def test_a_record_written_before_the_charge_loads_with_proposer_tokens_unknown() -> None:
    old = {"success": True, "unrequired_irreversible": [], "steps": 5, "wm_calls": 3, "world_model_tokens": 900,
           "abstained": False, "proposals": ["plan"] * 5}
    assert PlannerTranscript.model_validate(old).proposer_tokens is None
    scores = PlannerScores.model_validate({"success": 1.0, "irreversible_failure": 0.0, "tokens_per_success": 900.0,
                                           "steps": 5.0, "wm_calls": 3.0, "world_model_tokens": 900.0})
    assert scores.proposer_tokens is None
