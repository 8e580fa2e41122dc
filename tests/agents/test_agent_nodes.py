"""The agents' graph nodes one by one, on hand-made states (no graph run, no environment thread):
ReAct's policy/act, CDWM's predict/lookahead/select/act, the ProactBench loop's directive,
planner, user and routing; and the agent registry and protocol they sit on."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest
from langgraph.graph import END

from agents.cdwm import Candidate, CdwmAgent, CdwmGraph
from agents.episode import PolicyReply, policy_messages
from environments.proact.dialogue_loop import DialogueLoop, PlannerFormatError, Roles, Schedule
from agents.react import ReactAgent, ReactGraph
from agents.world_model import Prediction
from harness.agents_registry import AgentConfig, StepRecord, available_agents, load_agent
from harness.environment import (
    NONE,
    PREDICTION_SCHEMA,
    ActionMask,
    Delta,
    DeltaPrediction,
    EnvironmentClosed,
    Observation,
    StepResult,
    ThreadedEnv,
)
from harness.errors import HarnessError
from harness.providers.base import ModelError, ModelOutput

CLASSES = ("click", "scroll", "stop")
MASK = ActionMask({"click": {"created", "relations_added", "irreversible"}, "scroll": NONE, "stop": NONE}, name="test")
BUY = {"created": ["order:1"], "reversible": False, "irreversible_cost": 30, "confidence": 0.9}


def run(coro):
    return asyncio.run(coro)


class FakeEnv:
    """An async environment that records actions; `click [9]` creates an order."""

    def __init__(self, done_on: str = "stop"):
        self.actions: list[str] = []
        self.done_on = done_on

    async def action_class(self, action: str) -> str:
        return action.split(" ", 1)[0]

    async def step(self, action: str) -> StepResult:
        self.actions.append(action)
        delta = Delta(created=["order:1"], reversible=False) if action == "click [9]" else Delta()
        return StepResult(Observation(f"after {action}", CLASSES), delta, done=action.startswith(self.done_on))


def scripted(replies: dict[str, list[str]], log: list | None = None):
    """A generate(role, messages, config) answering each role from its list, in order."""
    queues = {role: list(texts) for role, texts in replies.items()}

    async def generate(role, messages, config):
        if log is not None:
            log.append((role, messages))
        text = queues[role].pop(0)
        if text == "!error":
            raise ModelError("endpoint said 400")
        return ModelOutput(text=text)

    return generate


def state(**kw: Any) -> dict[str, Any]:
    obs = Observation("URL: http://shop/\nheading 'green teapot'\n[9] button 'Buy now'", CLASSES)
    return {"intent": "What does the green teapot cost?", "obs": obs, "steps": [], "done": False, "errors": []} | kw


def candidate(action: str, rank: int, pred: Prediction, cls: str | None = None) -> Candidate:
    return Candidate(action=action, rank=rank, action_class=cls or action.split()[0], prediction=pred.delta,
                     source=pred.source, confidence=pred.confidence, invalid_outputs=pred.invalid_outputs)


# ---------------------------------------------------------------- ReAct
def test_react_policy_node_asks_once_and_act_node_records_the_step():
    log: list = []
    graph = ReactGraph(scripted({"assistant": ["Thought: look\nAction: scroll [down]"]}, log), FakeEnv(), AgentConfig())
    update = run(graph.policy(state()))
    assert update["reply"].actions == ["scroll [down]"] and update["reply"].thought == "look"
    assert [role for role, _ in log] == ["assistant"]

    after = run(graph.act(state(reply=update["reply"])))
    assert after["done"] is False and after["obs"].text == "after scroll [down]"
    (step,) = after["steps"]
    assert isinstance(step, StepRecord) and step.action == "scroll [down]" and step.action_class == "scroll"
    assert graph.after_act(state() | after) == "policy"
    assert graph.after_act(state(done=True)) == END


def test_react_act_node_falls_back_ends_on_errors_and_at_the_step_limit():
    env = FakeEnv()
    graph = ReactGraph(scripted({}), env, AgentConfig(max_steps=1))
    fallback = run(graph.act(state(reply=PolicyReply([], "", 2))))
    assert env.actions == ["stop [N/A]"] and fallback["ended_by"] == "no_action" and fallback["steps"][0].fallback
    error = run(graph.act(state(reply=PolicyReply([], "", 0, error="assistant: boom"))))
    assert error == {"done": True, "ended_by": "error", "errors": ["assistant: boom"]}
    limit = run(graph.act(state(reply=PolicyReply(["scroll [down]"], "", 0))))
    assert limit["ended_by"] == "step_limit" and limit["done"]


# ---------------------------------------------------------------- CDWM
def test_cdwm_predict_node_settles_masked_classes_without_a_model_call():
    log: list = []
    wm = json.dumps(BUY | {"relations_added": [{"subject": "order:1", "relation": "contains", "object": "teapot"}],
                           "attributes": [{"entity": "cart:1", "attribute": "n", "after": 1}]})
    graph = CdwmGraph(scripted({"world_model": [wm]}, log), FakeEnv(), AgentConfig(mask=MASK))
    update = run(graph.predict(state(reply=PolicyReply(["click [9]", "scroll [down]"], "", 0))))
    click, scroll = update["candidates"]
    assert click.source == "world_model" and click.prediction is not None and click.prediction.created == ["order:1"]
    assert click.prediction.attributes == []  # the mask strips what a click cannot change here
    assert scroll.source == "mask" and scroll.confidence == 1.0
    assert [role for role, _ in log] == ["world_model"]
    assert run(graph.predict(state(reply=PolicyReply([], "", 1)))) == {"candidates": []}


def test_cdwm_select_node_prunes_scores_chooses_and_abstains():
    graph = CdwmGraph(scripted({}), FakeEnv(), AgentConfig(mask=MASK))
    buy = Prediction(Delta.model_validate(BUY), "world_model")
    stop = Prediction(Delta(confidence=1.0), "mask")
    cands = [candidate("click [9]", 0, buy), candidate("stop [$30]", 1, stop)]
    update = run(graph.select(state(reply=PolicyReply(["click [9]", "stop [$30]"], "t", 0), candidates=cands)))
    by = {c.action: c for c in update["candidates"]}
    assert by["click [9]"].pruned and by["click [9]"].risk == 1.0 and by["stop [$30]"].chosen
    assert not by["click [9]"].chosen and cands[1].chosen is False  # select works on copies
    assert update["reply"].actions == ["stop [$30]"] and update["abstain"] is None

    unsure = [candidate("stop [$30]", 0, Prediction(Delta(confidence=0.2), "world_model"))]
    update = run(graph.select(state(reply=PolicyReply(["stop [$30]"], "t", 0), candidates=unsure)))
    assert update["reply"].actions == ["stop [ABSTAIN]"] and "0.20 < 0.5" in update["abstain"]

    invalid = [candidate("click [9]", 0, Prediction(None, "invalid", 2))]
    update = run(graph.select(state(reply=PolicyReply(["click [9]"], "t", 0), candidates=invalid)))
    assert update["candidates"][0].risk == 0.5 and update["abstain"]  # unknown risk, confidence 0


def test_cdwm_lookahead_node_imagines_only_changing_candidates():
    log: list = []
    graph = CdwmGraph(scripted({"assistant": ["Action: scroll [down]"]}, log), FakeEnv(), AgentConfig(mask=MASK))
    buy = Prediction(Delta.model_validate(BUY), "world_model")
    cands = [candidate("click [9]", 0, buy), candidate("scroll [down]", 1, Prediction(Delta(confidence=1.0), "mask"))]
    update = run(graph.lookahead(state(candidates=cands)))
    ahead = update["candidates"][0].lookahead
    assert ahead is not None and ahead.action == "scroll [down]" and ahead.source == "mask"
    assert update["candidates"][1].lookahead is None
    assert "[Imagined after `click [9]`: create order:1]" in log[0][1][-1]["content"]
    flat = CdwmGraph(scripted({}), FakeEnv(), AgentConfig(horizon=1))
    assert run(flat.lookahead(state(candidates=cands))) == {}


def test_cdwm_act_node_abstains_by_stopping_or_ends_where_there_is_no_stop():
    env = FakeEnv()
    graph = CdwmGraph(scripted({}), env, AgentConfig())
    update = run(graph.act(state(reply=PolicyReply(["stop [ABSTAIN]"], "", 0), candidates=[], abstain="unsure")))
    assert env.actions == ["stop [ABSTAIN]"] and update["ended_by"] == "abstain" and update["steps"][0].abstained
    no_stop = state(obs=Observation("page", ("click",)), reply=PolicyReply(["stop [ABSTAIN]"], "", 0),
                    candidates=[], abstain="unsure")
    update = run(graph.act(no_stop))
    assert update == {"done": True, "ended_by": "abstain", "errors": [], "abstain_reason": "unsure"}


# ---------------------------------------------------------------- the ProactBench loop
BLUEPRINT = {
    "hidden_goal": "plan a trip", "explicit_request": "Plan a weekend trip to Lisbon",
    "implicit_anchors": [{"id": "A1", "detail": "travelling with a wheelchair"},
                         {"id": "A2", "detail": "vegetarian daughter"}],
    "ideal_trajectory": "...", "done_signal": "the plan is final",
}
SCHEDULE = Schedule(triggers={2: "EMERGENT", 5: "CRITICAL", 9: "RECOVERY"}, done_turn=7, last_turn=9,
                    anchor_due={"A1": 1, "A2": 3})
ORDER = {"intent": "open the conversation", "content_payload": ["Say hello"], "behavioral_directive": "brief"}
RUBRIC = {"pass_criteria": "p", "partial_criteria": "q", "fail_criteria": "f"}


def roles(plans: list, messages: list[str]) -> Roles:
    async def plan(view, attempt):
        item = plans.pop(0)
        if isinstance(item, Exception):
            raise item
        return item

    async def speak(view, attempt):
        return messages.pop(0)

    async def answer(history):
        return "Here is a plan."

    async def judge(rubric, history, reply):
        return {"status": "PASS", "score": 1.0}

    return Roles(plan=plan, plan_fallback=lambda v: {"tactical_order": ORDER, "evaluation_rubric": RUBRIC},
                 speak=speak, speak_fallback=lambda v: "Plan a weekend trip to Lisbon; I use a wheelchair.",
                 answer=answer, judge=judge)


def loop_state(**kw: Any) -> dict[str, Any]:
    return {"turn": 0, "records": [], "current": {}, "revealed": [], "misses": {}, "triggers": [],
            "done_turn": None, "failed": None} | kw


def test_dialogue_directive_is_fixed_by_code():
    loop = DialogueLoop(BLUEPRINT, SCHEDULE, roles([], []))
    d, notes = loop.directive_for(loop_state(), 1)
    assert d.anchor_id == "A1" and d.trigger is None and not d.say_done and not notes
    d, _ = loop.directive_for(loop_state(revealed=["A1"]), 2)
    assert d.trigger == "EMERGENT" and d.anchor_id is None  # A2 is due on turn 3
    d, notes = loop.directive_for(loop_state(revealed=["A1", "A2"]), 9)
    assert d.trigger is None and "RECOVERY on turn 9 withheld" in notes[0]  # the user never said done
    d, _ = loop.directive_for(loop_state(revealed=["A1"], misses={"A2": 2}), 3)
    assert d.forced and d.anchor_id == "A2"


def test_dialogue_planner_node_retries_then_patches_the_order():
    leaky = {"tactical_order": ORDER | {"content_payload": ["Say your daughter is vegetarian"]}, "evaluation_rubric": RUBRIC}
    loop = DialogueLoop(BLUEPRINT, SCHEDULE, roles([ModelError("timeout"), leaky, {"tactical_order": ORDER,
                                                                                   "evaluation_rubric": RUBRIC}], []))
    update = run(loop.planner(loop_state()))
    record = update["current"]["planner"]
    assert update["turn"] == 1 and record["planner_attempts"] == 3 and not record["planner_fallback"]
    assert "timeout" in record["planner_problems"][0] and "reveals anchor(s) ['A2']" in record["planner_problems"][1]
    assert record["order_patches"] == ["explicit request added", "anchor A1 added"]

    loop = DialogueLoop(BLUEPRINT, SCHEDULE, roles([PlannerFormatError("bad json")] * 3, []), planner_attempts=3)
    record = run(loop.planner(loop_state()))["current"]["planner"]
    assert record["planner_fallback"] and len(record["planner_problems"]) == 3


def test_dialogue_user_node_rejects_disclosures_and_records_reveals():
    loop = DialogueLoop(BLUEPRINT, SCHEDULE, roles([{"tactical_order": ORDER, "evaluation_rubric": RUBRIC}],
                                                   ["My vegetarian daughter comes too.",
                                                    "Plan a weekend in Lisbon, I travel with a wheelchair."]))
    s = loop_state()
    s |= run(loop.planner(s))
    update = run(loop.user(s))
    assert update["revealed"] == ["A1"] and update["current"]["user_agent"]["attempts"] == 2
    assert "disclosed something" in update["current"]["user_agent"]["problems"][0]
    s |= update
    s |= run(loop.assistant(s))
    assert s["records"][0]["assistant_response"] == "Here is a plan." and loop.after_assistant(s) == "planner"
    assert loop.after_assistant(s | {"failed": "turn 1: assistant: boom"}) == END


# ---------------------------------------------------------------- registry and protocol
def test_agents_register_through_the_entry_point_group():
    assert {"react", "cdwm"} <= set(available_agents())
    assert isinstance(load_agent("react"), ReactAgent) and load_agent("react").roles == ("assistant",)
    assert isinstance(load_agent("cdwm"), CdwmAgent) and load_agent("cdwm").roles == ("assistant", "world_model")
    with pytest.raises(HarnessError, match=r"--agent planner: unknown agent; choose one of .*cdwm.*react"):
        load_agent("planner")


def test_prediction_schema_is_generated_from_the_pydantic_model():
    assert PREDICTION_SCHEMA == DeltaPrediction.model_json_schema()
    assert set(PREDICTION_SCHEMA["required"]) == {"reversible", "confidence"}
    with pytest.raises(ValueError):
        DeltaPrediction.model_validate({"reversible": "true", "confidence": 0.5})  # strict, as JSON is written
    pred = DeltaPrediction.model_validate(BUY)
    assert pred.to_delta().facts() == {("create", "order:1")} and not pred.to_delta().reversible


def test_the_policy_reads_the_action_help_the_environment_gives():
    cfg = AgentConfig(action_help="  poke (thing)")
    obs = Observation("room", ("poke", "stop"), info={"action_help": "  poke (thing)   prod it"})
    assert "poke (thing)   prod it" in policy_messages("t", obs, [], cfg)[0]["content"]  # the observation's wins
    assert "  poke (thing)\n" in policy_messages("t", Observation("room", ("poke",)), [], cfg)[0]["content"]
    bare = policy_messages("t", Observation("room", ("poke", "stop")), [], AgentConfig())[0]["content"]
    assert "Actions you can use:\n  poke\n  stop\n" in bare


def test_each_family_owns_its_mask_and_the_old_names_still_work():
    from environments.cdwm import mask as cdwm_mask
    from environments.household.mask import HOUSEHOLD_MASK
    from environments.web.actions import ACTION_CLASSES, ACTION_HELP, WEB_MASK

    assert cdwm_mask.ActionMask is ActionMask
    assert WEB_MASK.determined("scroll") and not WEB_MASK.determined("click")
    assert HOUSEHOLD_MASK.allowed("slice") == {"attributes", "irreversible"} and HOUSEHOLD_MASK.determined("look")
    assert ACTION_HELP.splitlines()[0] == "  click [id]" and len(ACTION_HELP.splitlines()) == len(ACTION_CLASSES) + 1


def test_threaded_env_refuses_calls_after_close():
    class Env:
        def reset(self, task):
            return Observation("x")

        def close(self):
            pass

    async def go():
        env = await ThreadedEnv.create(Env)
        assert (await env.reset({})).text == "x"
        await env.close()
        await env.close()  # twice is fine
        with pytest.raises(EnvironmentClosed):
            await env.reset({})

    run(go())


def test_agents_import_only_the_core():
    root = Path(__file__).resolve().parents[2] / "agents"
    for path in root.glob("*.py"):
        imports = re.findall(r"^\s*(?:from|import)\s+([\w.]+)", path.read_text(), re.M)
        assert not [m for m in imports if m.split(".")[0] in ("environments", "preft", "leaderboards")], path.name


# ---------------------------------------------------------------- the structured-reply helper
def test_ask_structured_reasks_with_a_varied_seed_and_records_each_attempt():
    from harness.providers.base import GenerateConfig
    from harness.structured import ask_structured

    log: list = []
    generate = scripted({"world_model": ["no idea", '{"reversible": true}', 'ok: ' + json.dumps(BUY)]}, log)
    reply = run(ask_structured(generate, "world_model", [{"role": "user", "content": "predict"}], DeltaPrediction,
                               GenerateConfig(seed=7), attempts=3))
    assert reply.ok and reply.value.created == ["order:1"] and reply.invalid == 2 and reply.failure is None
    assert [(a.kind, a.seed) for a in reply.attempts] == [("no_json", 7), ("invalid", 8), ("ok", 9)]
    assert reply.attempts[1].problem == "confidence: Field required" and reply.text.startswith("ok: ")
    assert len(log[2][1]) == 5 and "Invalid reply (no JSON object found)" in log[1][1][-1]["content"]

    reply = run(ask_structured(scripted({"world_model": ["!error"]}), "world_model", [], DeltaPrediction,
                               GenerateConfig(), attempts=3))
    assert reply.value is None and reply.failure == "model_error" and reply.error == "endpoint said 400"
    assert reply.attempts[0].seed is None  # no seed named: the run's per-sample seed applies
    reply = run(ask_structured(scripted({"r": ["{}", "{}"]}), "r", [], DeltaPrediction, GenerateConfig(), attempts=2))
    assert reply.failure == "invalid" and reply.invalid == 2 and reply.error is None
