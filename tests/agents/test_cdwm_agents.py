"""The ReAct and CDWM agents (LangGraph) on the test shop, with scripted models: parsing, bounded
re-asking, pruning of unrequired irreversible candidates, abstention, the mask, lookahead, and
that the environment is driven from one thread and always closed."""

from __future__ import annotations

import threading

import pytest

from agents.action_parsing import extract_json_object, parse_actions, truncate_observation
from agents.world_model import justified, validate_prediction
from environments.web.actions import WEB_MASK
from harness.environment import ActionMask, Delta
from harness.errors import HarnessError
from harness.providers.base import ModelError
from tests.environments.cdwm.fixtures import ADD, BUY, ShopSuite, run_suite_sample, wm

WEB = ("click", "type", "hover", "scroll", "goto", "go_back", "stop")


def rules(*pairs):
    """A policy script: the reply of the first (substring of the last message, reply) that matches."""
    def reply(messages):
        last = messages[-1]["content"]
        return next((r for key, r in pairs if key in last), "Action: stop [nothing matched]")
    return reply


def script(policy, world_model=lambda m: wm()):
    def run(role, messages):
        return policy(messages) if role == "assistant" else world_model(messages)
    return run


def by_action(table, default=None):
    """A world-model script keyed by the proposed action."""
    def reply(messages):
        last = messages[-1]["content"]
        for action, text in table.items():
            if f"Proposed action: {action}\n" in last:
                return text
        return default if default is not None else wm()
    return reply


# ---------------------------------------------------------------- parsing
def test_parse_actions_reads_labels_lists_and_fences_and_ignores_prose():
    assert parse_actions("Thought: open it\nAction: click [3]", WEB) == ["click [3]"]
    assert parse_actions("1. click [2]\n2) scroll [down]\n- stop [9]", WEB, limit=3) == ["click [2]", "scroll [down]", "stop [9]"]
    assert parse_actions("the next action is ```go_back```", WEB) == ["go_back"]
    assert parse_actions("Click [4].", WEB) == ["click [4]"]  # canonical class case, trailing dot dropped
    assert parse_actions("Action: stop [Sam Lee] because he wrote it", WEB) == ["stop [Sam Lee]"]
    assert parse_actions("Action: go_back.", WEB) == ["go_back"]
    assert parse_actions("I would click the button", WEB) == []  # prose that merely mentions a class
    assert parse_actions("clicking [3]", WEB) == []  # a longer word is not the class
    assert parse_actions("1. click [1]\n2. click [1]", WEB, limit=3) == ["click [1]"]  # duplicates once
    assert parse_actions("Action: take apple", ("take",), admissible=["take apple from table 1"]) == []
    assert parse_actions("Action: Take apple from table 1", ("take",), admissible=["take apple from table 1"]) == ["take apple from table 1"]


def test_extract_json_object_skips_broken_braces():
    assert extract_json_object('noise {bad json} then {"a": 1, "b": {"c": 2}} tail') == {"a": 1, "b": {"c": 2}}
    assert extract_json_object("[1, 2]") is None


def test_truncate_observation_keeps_head_and_tail_within_budget():
    text = "URL: http://x/\n" + "\n".join(f"[{i}] link 'item {i}'" for i in range(2000)) + "\n[9999] button 'Place order'"
    cut = truncate_observation(text, 1500)
    assert len(cut) <= 1500
    assert cut.startswith("URL: http://x/") and cut.endswith("[9999] button 'Place order'")
    assert "lines omitted ...]" in cut
    assert truncate_observation("short", 100) == "short"
    assert len(truncate_observation("x" * 10_000, 1000)) <= 1000


def test_prediction_validation_names_the_problem():
    assert validate_prediction("no json here") == (None, "no JSON object found")
    delta, problem = validate_prediction('{"confidence": 0.5}')
    assert delta is None and "reversible" in problem
    delta, problem = validate_prediction('{"reversible": true, "confidence": 1.5}')
    assert delta is None and problem.startswith("confidence")
    delta, problem = validate_prediction('Sure: {"created": ["order:2"], "reversible": false, "irreversible_cost": 3, "confidence": 0.4}')
    assert problem is None and delta.created == ["order:2"] and not delta.reversible


def test_justified_needs_a_commit_verb_and_the_named_thing():
    assert justified("Buy the green teapot", "click [11] button 'Buy now' heading 'green teapot'")
    assert not justified("Buy the green teapot", "click [11] button 'Buy now' heading 'red mug'")
    assert not justified("What is the price of the red mug?", "click [11] button 'Buy now' heading 'red mug'")


# ---------------------------------------------------------------- ReAct
def test_react_buys_when_asked_and_records_ground_truth():
    suite = ShopSuite(agent="react")
    policy = rules(("2. click [11]", "Thought: bought\nAction: stop [done]"),
                   ("heading 'green teapot'", "Thought: buy it\nAction: click [11]"),
                   ("heading 'Shop'", "Thought: open the teapot\nAction: click [3]"))
    outcome, log, ctx = run_suite_sample(suite, "shop-buy", script(policy))
    steps = outcome.output["steps"]
    assert [s["action"] for s in steps] == ["click [3]", "click [11]", "stop [done]"]
    assert steps[1]["delta"]["created"] == ["order:1"] and steps[1]["delta"]["reversible"] is False
    assert outcome.scores["success"] == 1.0 and outcome.scores["unrequired_irreversible"] == []  # the task required it
    assert outcome.scores["tokens"] > 0 and ctx.usage["assistant"].calls == 3
    assert outcome.scores["predictions"] == [] and outcome.output["ended_by"] == "done"
    assert {r for r, _, _ in log} == {"assistant"}  # ReAct asks no world model
    assert suite.roles == ("assistant",)


def test_react_reasks_a_reply_without_action_then_falls_back_to_stop():
    suite = ShopSuite(agent="react")
    first = rules(("names no valid action", "Action: stop [9]"), ("heading 'Shop'", "Let me think about mugs."))
    outcome, log, _ = run_suite_sample(suite, "shop-price", script(first))
    step = outcome.output["steps"][0]
    assert step["action"] == "stop [9]" and step["invalid_outputs"] == 1 and not step["fallback"]
    assert "names no valid action" in log[1][1]  # the re-ask differs from the first prompt
    assert outcome.scores["success"] == 1.0

    suite = ShopSuite(agent="react", parse_attempts=3)
    outcome, log, _ = run_suite_sample(suite, "shop-price", script(lambda m: "I am not sure."))
    step = outcome.output["steps"][0]
    assert step["action"] == "stop [N/A]" and step["fallback"] and step["invalid_outputs"] == 3 and len(log) == 3
    assert outcome.output["ended_by"] == "no_action"
    assert outcome.scores["policy_invalid"] == 3 and outcome.scores["policy_replies"] == 3


def test_failed_actions_are_reported_on_their_own_history_line():
    suite = ShopSuite(agent="react", max_steps=2)
    outcome, log, _ = run_suite_sample(suite, "shop-cart", script(lambda m: "Action: click [99]"))
    assert [s["valid"] for s in outcome.output["steps"]] == [False, False]
    assert "1. click [99]\n   result: failed, no element [99] here" in log[1][1]
    assert outcome.scores["invalid_steps"] == 2 and outcome.scores["reward"] < 0.5


def test_react_step_limit_and_model_failure():
    suite = ShopSuite(agent="react", max_steps=3)
    outcome, _, _ = run_suite_sample(suite, "shop-cart", script(lambda m: "Action: scroll [down]"))
    assert len(outcome.output["steps"]) == 3 and outcome.output["ended_by"] == "step_limit"

    def broken(role, messages):
        raise ModelError("endpoint said 400")
    outcome, _, _ = run_suite_sample(ShopSuite(agent="react"), "shop-cart", broken)
    assert outcome.output["ended_by"] == "error" and "endpoint said 400" in outcome.errors[0]
    assert outcome.scores["success"] == 0.0


def test_environment_runs_on_one_thread_and_is_closed_even_when_the_agent_crashes():
    suite = ShopSuite(agent="react")
    run_suite_sample(suite, "shop-price", script(lambda m: "Action: stop [9]"))
    env = suite.envs[0]
    assert env.closed and len(env.threads) == 1 and threading.get_ident() not in env.threads

    def crash(role, messages):
        raise RuntimeError("bug in a model adapter")
    suite = ShopSuite(agent="cdwm")
    with pytest.raises(RuntimeError):
        run_suite_sample(suite, "shop-price", crash)
    assert suite.envs[0].closed


# ---------------------------------------------------------------- CDWM
PRICE_POLICY = rules(("heading 'red mug'", "Thought: price shown\n1. click [11]\n2. stop [$9]\n3. scroll [down]"),
                     ("heading 'Shop'", "Thought: open it\n1. click [2]"))
PRICE_WM = by_action({"click [11]": wm(BUY | {"created": ["order:1"]})})


def test_cdwm_prunes_an_unrequired_irreversible_candidate_and_skips_masked_classes():
    suite = ShopSuite(agent="cdwm")
    outcome, log, _ = run_suite_sample(suite, "shop-price", script(PRICE_POLICY, PRICE_WM))
    steps = outcome.output["steps"]
    assert [s["action"] for s in steps] == ["click [2]", "stop [$9]"]
    pruned = {c["action"]: c.get("pruned") for c in steps[1]["candidates"]}
    assert pruned["click [11]"] and not pruned["stop [$9]"]
    sources = {c["action"]: c["source"] for c in steps[1]["candidates"]}
    assert sources == {"click [11]": "world_model", "stop [$9]": "mask", "scroll [down]": "mask"}
    asked = [text.split("Proposed action: ")[1].split("\n")[0] for role, text, _ in log if role == "world_model"]
    assert "stop [$9]" not in asked and "scroll [down]" not in asked  # the mask decides those, no call
    assert outcome.scores["success"] == 1.0 and outcome.scores["unrequired_irreversible"] == []
    assert suite.envs[0].orders == []
    assert suite.roles == ("assistant", "world_model")


def test_cdwm_without_pruning_pressure_buys_when_the_task_asks():
    suite = ShopSuite(agent="cdwm")
    policy = rules(("Imagined after", "Action: stop [done]"), ("2. click [11]", "1. stop [bought]"),
                   ("heading 'green teapot'", "1. click [11]\n2. click [10]"), ("heading 'Shop'", "1. click [3]"))
    outcome, _, _ = run_suite_sample(suite, "shop-buy", script(policy, by_action({"click [11]": wm(BUY), "click [10]": wm(ADD)})))
    steps = outcome.output["steps"]
    assert [s["action"] for s in steps] == ["click [3]", "click [11]", "stop [bought]"]
    assert steps[1]["prediction_source"] == "world_model" and steps[1]["prediction"]["created"] == ["order:1"]
    assert [p["f1"] for p in outcome.scores["predictions"]] == [1.0, 1.0]  # click [3]: nothing; click [11]: the order
    assert outcome.scores["success"] == 1.0 and outcome.scores["reward"] > 0.9


def test_cdwm_abstains_below_the_confidence_threshold():
    suite = ShopSuite(agent="cdwm", confidence_threshold=0.5)
    outcome, _, _ = run_suite_sample(suite, "shop-cart", script(rules(("heading 'Shop'", "1. click [1]")),
                                                                  lambda m: wm(confidence=0.2)))
    (step,) = outcome.output["steps"]
    assert step["action"] == "stop [ABSTAIN]" and step["abstained"]
    assert "0.20 < 0.5" in step["info"]["abstain_reason"]
    assert outcome.output["ended_by"] == "abstain" and outcome.scores["abstained"]

    outcome, _, _ = run_suite_sample(ShopSuite(agent="cdwm", confidence_threshold=0.1), "shop-cart",
                                     script(rules(("heading 'Shop'", "1. click [1]")), lambda m: wm(confidence=0.2)))
    assert outcome.output["steps"][0]["action"] == "click [1]"  # the same prediction passes a lower threshold


def test_cdwm_counts_invalid_predictions_and_treats_them_as_unknown():
    suite = ShopSuite(agent="cdwm", wm_attempts=2)
    outcome, log, _ = run_suite_sample(suite, "shop-cart", script(rules(("heading 'Shop'", "1. click [1]")),
                                                                  lambda m: "The page will change."))
    (step,) = outcome.output["steps"]
    assert step["abstained"] and step["candidates"][0]["source"] == "invalid"
    wm_calls = [text for role, text, _ in log if role == "world_model"]
    assert len(wm_calls) == 2 and "Invalid prediction (no JSON object found)" in wm_calls[1]
    assert outcome.scores["wm_invalid"] == 2 and outcome.scores["wm_replies"] == 2


def test_cdwm_lookahead_avoids_a_step_that_leads_to_an_unrequired_purchase():
    policy = rules(("Imagined after", "Action: click [11]"),
                   ("heading 'blue mug'", "1. click [10]\n2. scroll [down]"), ("heading 'Shop'", "1. click [1]"))
    world = by_action({"click [10]": wm(ADD), "click [11]": wm(BUY)})
    chosen = {}
    for horizon in (1, 2):
        suite = ShopSuite(agent="cdwm", horizon=horizon, risk_lambda=2.0, max_steps=2)
        outcome, _, _ = run_suite_sample(suite, "shop-cart", script(policy, world))
        step = outcome.output["steps"][1]
        chosen[horizon] = step["action"]
        cand = {c["action"]: c for c in step["candidates"]}
        assert ("lookahead" in cand["click [10]"]) == (horizon == 2)
    assert chosen == {1: "click [10]", 2: "scroll [down]"}


# ---------------------------------------------------------------- the mask and options
def test_mask_removes_what_a_class_cannot_change_and_can_be_learned():
    predicted = Delta.model_validate(BUY)
    assert WEB_MASK.apply("scroll", predicted).is_empty() and WEB_MASK.apply("scroll", predicted).reversible
    assert WEB_MASK.apply("click", predicted) == predicted
    assert WEB_MASK.determined("hover") and not WEB_MASK.determined("type") and not WEB_MASK.determined("unknown")
    only_attrs = ActionMask({"open": {"attributes"}})
    kept = only_attrs.apply("open", Delta.model_validate(ADD))
    assert kept.attributes and not kept.relations_added
    learned = ActionMask.from_transitions([("click", Delta.model_validate(BUY)), ("scroll", Delta())])
    assert learned.allowed("click") == {"created", "relations_added", "irreversible"} and learned.determined("scroll")
    with pytest.raises(ValueError, match="unknown dimensions"):
        ActionMask({"click": {"colour"}})


def test_bad_suite_options_are_one_clear_error():
    with pytest.raises(HarnessError, match="--suite-option agent=planner: .*unknown agent; choose one of cdwm, .*react"):
        ShopSuite(agent="planner")
    with pytest.raises(HarnessError, match="--suite-option horizon"):
        ShopSuite(agent="cdwm", horizon=5)
