"""The structured-reply path with constraints: what each role asks of its provider (a schema, a
tool), how the reply is read back (text or tool call), how a bad constraint is reported, and that
request hashes of unconstrained calls did not move. Scripted models: these test our logic."""

from __future__ import annotations

import asyncio
import hashlib
import json
import re

import jsonschema
import pytest

from agents.episode import action_schema, ask_policy, policy_schema
from agents.world_model import DECODE_SCHEMA, predict
from environments.proact.audit import AUDIT_CONFIG
from environments.proact.live_prompts import parse_planner, planner_decode_schema
from environments.proact.protocol import JUDGE_CONFIG, parse_judge
from environments.web.actions import ACTION_PATTERN, parse_action
from harness.agents_registry import AgentConfig
from harness.calls import CallPolicy, ManagedModel
from harness.environment import PREDICTION_SCHEMA, Observation
from harness.providers.base import (
    ConstraintError,
    GenerateConfig,
    ModelOutput,
    ToolCall,
    ToolSpec,
    check_constraint,
    request_hash,
    tool_call_schema,
)
from harness.structured import ask_structured, bounded, reply_text, with_form
from harness.suite import SampleContext
from pydantic import BaseModel


def run(coro):
    return asyncio.run(coro)


class Scripted:
    """A generate(role, messages, config) that answers from a list and keeps the configs it got."""

    def __init__(self, *replies: ModelOutput | str):
        self.replies = [r if isinstance(r, ModelOutput) else ModelOutput(text=r) for r in replies]
        self.configs: list[GenerateConfig] = []

    async def __call__(self, role: str, messages: list[dict[str, str]], config: GenerateConfig) -> ModelOutput:
        self.configs.append(config)
        return self.replies[min(len(self.configs) - 1, len(self.replies) - 1)]


class Verdict(BaseModel):
    label: str
    n: int


# ---------------------------------------------------------------- the request hash
def test_unconstrained_hash_is_the_one_earlier_runs_cached():
    config = GenerateConfig(temperature=0.7, max_tokens=64, seed=3, stop=["\n"])
    messages = [{"role": "user", "content": "hi"}]
    # What request_hash hashed before the constraint fields existed: the five sampling fields.
    old = {"model": "m", "messages": messages, "config": {"temperature": 0.7, "max_tokens": 64, "top_p": 1.0,
                                                          "seed": 3, "stop": ["\n"]}, "extra": {}}
    blob = json.dumps(old, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    assert request_hash("m", messages, config) == hashlib.sha256(blob.encode()).hexdigest()


def test_hash_differs_when_only_the_constraint_differs():
    messages = [{"role": "user", "content": "hi"}]
    base = GenerateConfig(max_tokens=8)
    keys = {request_hash("m", messages, base.model_copy(update=u)) for u in (
        {}, {"json_schema": {"type": "object"}}, {"json_schema": {"type": "array"}}, {"choice": ["a", "b"]},
        {"choice": ["a", "c"]}, {"regex": "a+"}, {"tools": [ToolSpec(name="f")], "tool_choice": "f"},
        {"tools": [ToolSpec(name="g")], "tool_choice": "g"})}
    assert len(keys) == 8


# ---------------------------------------------------------------- bad constraints
@pytest.mark.parametrize("update, message", [
    ({"json_schema": {"type": "objekt"}}, "invalid JSON schema"),
    ({"regex": "a(b"}, "does not compile"),
    ({"choice": []}, "at least one"),
    ({"tools": [ToolSpec(name="")], "tool_choice": "required"}, "tool name ''"),
    ({"tools": [ToolSpec(name="f")], "tool_choice": "g"}, "tool_choice 'g'"),
    ({"tool_choice": "required"}, "needs at least one tool"),
    ({"json_schema": {"type": "object"}, "regex": "a"}, "one output constraint per call"),
])
def test_a_bad_constraint_is_one_error_naming_it(update, message):
    with pytest.raises(ConstraintError, match=re.escape(message)):
        check_constraint(GenerateConfig().model_copy(update=update))


class Counting:
    name = "scripted/m"

    def __init__(self):
        self.calls = 0

    async def generate(self, messages, config):
        self.calls += 1
        return ModelOutput(text="{}")

    async def aclose(self):
        return None


def test_a_bad_constraint_names_the_role_and_never_reaches_the_model():
    model = Counting()
    ctx = SampleContext({"judge": ManagedModel(model, max_connections=1, policy=CallPolicy(max_retries=3))}, 0, {})
    with pytest.raises(ConstraintError, match=r"^judge \(scripted/m\): regex '\(' does not compile"):
        run(ctx.generate("judge", [{"role": "user", "content": "x"}], GenerateConfig(regex="(")))
    assert model.calls == 0


# ---------------------------------------------------------------- ask_structured's forms
def test_constrained_form_sends_the_schema_and_drops_stop_strings():
    gen = Scripted('{"label": "a", "n": 1}')
    reply = run(ask_structured(gen, "r", [], Verdict, GenerateConfig(stop=["\n"]), 2))
    assert reply.value == Verdict(label="a", n=1)
    assert gen.configs[0].json_schema == Verdict.model_json_schema() and gen.configs[0].stop is None


def test_tools_form_reads_the_tool_calls_arguments():
    call = ToolCall(id="1", name="reply", arguments={"label": "b", "n": 2})
    gen = Scripted(ModelOutput(text="", tool_calls=[call], finish_reason="tool_calls"))
    reply = run(ask_structured(gen, "r", [], Verdict, GenerateConfig(), 2, form="tools"))
    assert reply.value == Verdict(label="b", n=2)
    sent = gen.configs[0]
    assert sent.tool_choice == "reply" and sent.tools[0].parameters == Verdict.model_json_schema()
    assert sent.json_schema is None


def test_free_form_sends_no_constraint():
    gen = Scripted('Sure: {"label": "c", "n": 3}')
    reply = run(ask_structured(gen, "r", [], Verdict, GenerateConfig(stop=["\n\n"]), 1, form="free"))
    assert reply.value == Verdict(label="c", n=3) and not gen.configs[0].constrained
    assert gen.configs[0].stop == ["\n\n"]


def test_a_reply_cut_at_max_tokens_is_truncated_not_invalid():
    gen = Scripted(ModelOutput(text='{"label": "a", "n"', finish_reason="length"), '{"label": "a", "n": 5}')
    reply = run(ask_structured(gen, "r", [], Verdict, GenerateConfig(seed=4), 2))
    assert [a.kind for a in reply.attempts] == ["truncated", "ok"]
    assert [c.seed for c in gen.configs] == [4, 5]  # the re-ask varies the seed


def test_reply_text_prefers_the_tool_call():
    assert reply_text(ModelOutput(text="x", tool_calls=[ToolCall(name="f", arguments={"a": 1})])) == '{"a": 1}'
    assert reply_text(ModelOutput(text="x")) == "x"


def test_bounded_adds_limits_where_none_are_given():
    schema = {"type": "object", "properties": {"s": {"type": "string"}, "e": {"type": "string", "enum": ["x"]},
                                               "k": {"type": "string", "maxLength": 3},
                                               "l": {"type": "array", "items": {"type": ["string", "null"]}}}}
    out = bounded(schema, 10, 2)
    props = out["properties"]
    assert props["s"]["maxLength"] == 10 and "maxLength" not in props["e"] and props["k"]["maxLength"] == 3
    assert props["l"]["maxItems"] == 2 and props["l"]["items"]["maxLength"] == 10
    assert "maxLength" not in schema["properties"]["s"]  # a copy


def test_with_form_tool_schema_round_trip():
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    cfg = with_form(GenerateConfig(), "tools", schema, tool="act")
    check_constraint(cfg)
    call_schema = tool_call_schema(cfg.tools, cfg.tool_choice)
    jsonschema.validate({"name": "act", "arguments": {"a": 1}}, call_schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"name": "other", "arguments": {"a": 1}}, call_schema)


# ---------------------------------------------------------------- the roles' schemas
def test_judge_and_auditor_decode_schemas_admit_only_valid_verdicts():
    for config in (JUDGE_CONFIG, AUDIT_CONFIG):
        check_constraint(config)
        assert config.json_schema["additionalProperties"] is False
    good = {"score": "PASS", "rationale": "It offered the plan.", "evidence": "a plan"}
    jsonschema.validate(good, JUDGE_CONFIG.json_schema)
    assert parse_judge(json.dumps(good)) == good
    for bad in ({**good, "score": "pass"}, {**good, "extra": 1}, {**good, "rationale": "x" * 401}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, JUDGE_CONFIG.json_schema)


def test_planner_decode_schema_accepts_only_what_the_parser_accepts():
    order = {"intent": "ask", "content_payload": ["I need a flight"], "behavioral_directive": "be brief"}
    rubric = {"pass_criteria": "PASS when", "partial_criteria": "PARTIAL when", "fail_criteria": "FAIL when"}
    for trigger, obj in ((True, {"tactical_order": order, "evaluation_rubric": rubric}),
                         (False, {"tactical_order": order, "evaluation_rubric": None})):
        jsonschema.validate(obj, planner_decode_schema(trigger))
        assert parse_planner(json.dumps(obj), trigger)["tactical_order"] == order
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"tactical_order": order, "evaluation_rubric": None}, planner_decode_schema(True))


def test_world_model_decode_schema_is_the_prediction_schema_bounded():
    example = {"created": ["order:1"], "reversible": False, "irreversible_cost": 3, "confidence": 0.5}
    jsonschema.validate(example, PREDICTION_SCHEMA)
    jsonschema.validate(example, DECODE_SCHEMA)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**example, "created": ["a", "b", "c", "d", "e"]}, DECODE_SCHEMA)


def test_world_model_follows_the_action_format():
    reply = json.dumps({"created": [], "reversible": True, "confidence": 0.8})
    for fmt in ("constrained", "tools", "free"):
        gen = Scripted(ModelOutput(text=reply) if fmt != "tools"
                       else ModelOutput(text="", tool_calls=[ToolCall(name="predict", arguments=json.loads(reply))]))
        pred = run(predict(gen, "buy", "page", "click [1]", "click", None, AgentConfig(action_format=fmt)))
        assert pred.source == "world_model" and pred.confidence == 0.8
        sent = gen.configs[0]
        assert (sent.json_schema is not None) == (fmt == "constrained")
        assert bool(sent.tools) == (fmt == "tools")


# ---------------------------------------------------------------- the policy
HOUSE = Observation("You are in the kitchen.", ("go to", "take", "stop"),
                    admissible=["go to fridge 1", "take apple 1 from table 1", "go to fridge 1"])


def test_constrained_policy_is_held_to_the_admissible_actions():
    cfg = AgentConfig(action_format="constrained")
    schema = policy_schema(HOUSE, cfg, candidates=2)
    assert schema["properties"]["actions"]["items"] == {"enum": ["go to fridge 1", "take apple 1 from table 1"]}
    assert schema["properties"]["actions"]["maxItems"] == 2
    gen = Scripted('{"thought": "cold", "actions": ["go to fridge 1"]}')
    reply = run(ask_policy(gen, "chill an apple", HOUSE, [], cfg))
    assert reply.actions == ["go to fridge 1"] and reply.thought == "cold" and reply.invalid_outputs == 0
    assert gen.configs[0].json_schema == policy_schema(HOUSE, cfg, 1)


def test_tools_policy_reads_the_act_call():
    cfg = AgentConfig(action_format="tools")
    call = ToolCall(name="act", arguments={"thought": "t", "actions": ["take apple 1 from table 1"]})
    gen = Scripted(ModelOutput(text="", tool_calls=[call]))
    reply = run(ask_policy(gen, "get the apple", HOUSE, [], cfg))
    assert reply.actions == ["take apple 1 from table 1"]
    assert gen.configs[0].tool_choice == "act"


def test_constrained_policy_reads_a_provider_that_ignored_the_form():
    gen = Scripted("Thought: fridge\nAction: go to fridge 1")
    reply = run(ask_policy(gen, "x", HOUSE, [], AgentConfig(action_format="constrained")))
    assert reply.actions == ["go to fridge 1"]


def test_a_constrained_reply_outside_the_admissible_set_is_still_refused():
    gen = Scripted('{"thought": "", "actions": ["eat the table"]}')
    reply = run(ask_policy(gen, "x", HOUSE, [], AgentConfig(action_format="constrained", parse_attempts=1)))
    assert reply.actions == [] and reply.invalid_outputs == 1


def test_web_action_pattern_admits_only_actions_the_parser_accepts():
    pattern = re.compile(ACTION_PATTERN)
    accepted = ["click [12]", "hover [3]", "type [4] [blue shirt] [0]", "type [4] [x]", "press [Control+a]",
                "scroll [up]", "goto [https://shop.local/p/3]", "go_back", "new_tab", "tab_focus [2]", "stop [N/A]",
                "stop []"]
    for action in accepted:
        assert pattern.fullmatch(action), action
        parse_action(action)  # raises if the parser disagrees
    for action in ["click 12", "click [a]", "goto [file:///etc/passwd]", "stop", "type [1] [a\nb]", "rm -rf /"]:
        assert not pattern.fullmatch(action), action


def test_action_schema_without_a_list_or_pattern_uses_the_classes():
    obs = Observation("x", ("go_back", "go", "stop"))
    schema = action_schema(obs, AgentConfig(action_format="constrained"))
    pattern = re.compile(schema["pattern"])
    assert pattern.fullmatch("go_back") and pattern.fullmatch("stop [done]") and not pattern.fullmatch("fly [x]")


def test_cdwm_suite_records_the_action_format(tmp_path):
    from harness.suite import get_suite

    suite = get_suite("cdwm-household", {"action_format": "tools"})
    assert suite.config.action_format == "tools"
    assert suite.options.model_dump(mode="json", exclude_defaults=True)["action_format"] == "tools"
    from harness.errors import HarnessError

    with pytest.raises(HarnessError, match="action_format"):
        get_suite("cdwm-household", {"action_format": "json"})
