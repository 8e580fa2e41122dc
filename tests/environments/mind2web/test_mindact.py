"""MindAct's multiple-choice protocol (`--suite-option protocol=mindact`): the queue arithmetic
against hand-computed questions, the end of a step when every group says "None of the above" or an
answer names no option, and the suite end to end with scripted models (gold answers -> 1.0, always
"None of the above" -> 0 with every question recorded, hostile answers -> invalid, never a crash,
the CDWM agent through the same environment)."""

from __future__ import annotations

import asyncio
import json
import re

import pytest

from corpora.mind2web.loader import Task
from environments.mind2web.env import Mind2WebEnvironment, candidate_views
from environments.mind2web.mindact import choice_pattern, parse_choice, queue_order, rounds_needed
from environments.mind2web.suite import CdwmMind2WebSuite, Mind2WebOptions
from harness.records import SampleRecord
from tests.environments.cdwm.fixtures import scripted_context, wm
from tests.environments.mind2web.test_mind2web import official_task

WORDS = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima".split()


def twelve_buttons(target: str = "9", n: int = 12) -> dict:
    """A one-step release-format task with `n` buttons (backend_node_ids 1..n, no word shared with
    the task, so the ranked order is page order) whose target is `target`."""
    buttons = "".join(f'<button backend_node_id="{i}">{WORDS[i - 1]}</button>' for i in range(1, n + 1))
    html = f'<html backend_node_id="100"><body backend_node_id="101">{buttons}</body></html>'

    def cand(bid: str) -> dict:
        return {"tag": "button", "attributes": json.dumps({"backend_node_id": bid}), "backend_node_id": bid}

    step = {"action_uid": "u-0", "raw_html": "", "cleaned_html": html,
            "operation": {"op": "CLICK", "original_op": "CLICK", "value": ""},
            "pos_candidates": [cand(target)], "neg_candidates": [cand(str(i)) for i in range(1, n + 1) if str(i) != target]}
    return {"annotation_id": "twelve", "website": "w", "domain": "d", "subdomain": "s", "confirmed_task": "Press the thing",
            "action_reprs": ["[button] -> CLICK"], "actions": [step]}


def play(env: Mind2WebEnvironment, answers: list[str]) -> list:
    return [env.step(a) for a in answers]


# ---------------------------------------------------------------- the queue
def test_twelve_candidates_are_asked_five_five_then_leftovers_with_the_winners():
    env = Mind2WebEnvironment(top_k=50, protocol="mindact", group_size=5, order="ranked")
    obs = env.reset(twelve_buttons(target="9"))
    assert obs.info["options"] == {"B": "1", "C": "2", "D": "3", "E": "4", "F": "5"}
    assert "A. None of the above" in obs.text and "F. <button>echo</button>" in obs.text
    first, second, third = play(env, ["click [C]", "click [E]", "click [E]"])
    # 1: options 1-5, C = 2 is queued again behind 6..12 (8 queued); 2: options 6-10, E = 9 (queue 11, 12, 2, 9);
    # 3: the two left over and the two winners, E = 9; one left: 9 is the prediction.
    assert first.observation.info["options"] == {"B": "6", "C": "7", "D": "8", "E": "9", "F": "10"}
    assert second.observation.info["options"] == {"B": "11", "C": "12", "D": "2", "E": "9"}
    assert [s.info["chose"] for s in (first, second, third)] == ["2", "9", "9"]
    assert not first.done and not second.done and third.done
    result = env.evaluate()
    [step] = result["step_results"]
    assert [r["group"] for r in step["rounds"]] == [["1", "2", "3", "4", "5"], ["6", "7", "8", "9", "10"], ["11", "12", "2", "9"]]
    assert step["winner"] == "9" and step["action"] == "click [9]" and step["questions"] == 3 == rounds_needed(12, 5)
    assert step["target_survived"] == [True, True, True] and [r["target_asked"] for r in step["rounds"]] == [False, True, True]
    assert result["step_success_rate"] == 1.0 and result["mindact"]["questions"] == 3


def test_a_step_ends_with_no_prediction_when_the_last_group_says_none():
    env = Mind2WebEnvironment(top_k=50, protocol="mindact", order="ranked")
    env.reset(twelve_buttons(target="9"))
    last = play(env, ["click [C]", "click [E]", "none"])[-1]  # 9 was chosen, then turned down with the rest
    assert last.done and last.info["step_success"] == 0.0
    step = env.evaluate()["step_results"][0]
    assert step["winner"] is None and step["action"] == "none" and step["target_survived"] == [True, True, False]
    assert env.evaluate()["mindact"]["no_prediction_steps"] == 1


def test_an_answer_naming_no_option_drops_the_running_prediction():
    # Ten candidates, target 2: question 1 chooses 2 (queue 6..10, 2); question 2 over 6..10 leaves 2 alone.
    kept = Mind2WebEnvironment(top_k=50, protocol="mindact", order="ranked")
    kept.reset(twelve_buttons(target="2", n=10))
    play(kept, ["click [C]", "none"])
    assert kept.evaluate()["step_success_rate"] == 1.0  # "None of the above" keeps the earlier choice
    dropped = Mind2WebEnvironment(top_k=50, protocol="mindact", order="ranked")
    dropped.reset(twelve_buttons(target="2", n=10))
    results = play(dropped, ["click [C]", "click [G]"])  # G: no such option among five
    assert results[-1].done and not results[-1].valid and "not an answer" in results[-1].info["error"]
    assert dropped.evaluate()["step_success_rate"] == 0.0 and dropped.evaluate()["step_results"][0]["winner"] is None


def test_hostile_answers_are_invalid_and_never_crash():
    env = Mind2WebEnvironment(top_k=50, protocol="mindact", order="ranked")
    env.reset(twelve_buttons())
    for junk in ["", "click [41]", "B", "type [B]] [x]", "\x00" * 5000, "click [B] [C] [D]", "select [Z] [x]"]:
        if env.index:  # a step got decided: start the task again
            env.reset(twelve_buttons())
        result = env.step(junk)
        assert not result.valid and result.info["chose"] is None and result.delta.is_empty(), junk
    assert parse_choice("click [b]") == ("B", "CLICK", "") and parse_choice("none") == ("A", "", "")
    assert parse_choice("type [A] [x]") == ("A", "", "") and parse_choice("type [C] [New York]") == ("C", "TYPE", "New York")
    pattern = re.compile(choice_pattern(5))
    assert all(pattern.match(a) for a in ("none", "click [B]", "type [F] [Boston]", "select [C] [Price]"))
    assert not any(pattern.match(a) for a in ("click [A]", "click [G]", "click [41]", "type [B]"))
    assert queue_order(list("abcdef"), "shuffled", "u-1") == queue_order(list("abcdef"), "shuffled", "u-1") != list("abcdef")


def test_options_defaults_and_step_limit():
    single = CdwmMind2WebSuite(Mind2WebOptions(agent="react"))
    assert single.top_k == 10 and single.config.max_steps == 30 and single.config.mask.name == "mind2web"
    mindact = CdwmMind2WebSuite(Mind2WebOptions(agent="react", protocol="mindact"))
    assert mindact.top_k == 50 and rounds_needed(50, 5) == 13 and mindact.config.max_steps == 30 * 13
    assert mindact.config.mask.determined("none") and re.match(mindact.config.action_pattern, "click [F]")
    assert rounds_needed(6, 5) == 2 and rounds_needed(1, 5) == 0 and rounds_needed(5, 5) == 1


# ---------------------------------------------------------------- the suite with scripted models
_OPTION = re.compile(r"^([A-Z])\. (.*)$", re.M)


def _question(messages: list[dict[str, str]], tasks: dict[str, Task]) -> tuple[Task, int, dict[str, str]]:
    """The task, the gold step index and the options {letter: snippet} a policy prompt shows."""
    user = messages[1]["content"]
    task = tasks[user.split("\n", 1)[0].removeprefix("Task: ")]
    obs = user.split("Observation:\n", 1)[1]
    previous = obs.split("Previous actions:\n", 1)[1].split("\nQuestion ", 1)[0]
    return task, 0 if previous == "none" else len(previous.splitlines()), dict(_OPTION.findall(obs))


def gold_answer(task: Task, i: int, options: dict[str, str], letter_of_send: bool = False) -> str:
    step = task.actions[i]
    target = next(v for v in candidate_views(step) if v.bid == step.pos_candidates[0].backend_node_id)
    letter = next((k for k, snip in options.items() if snip == target.snippet), None)
    if letter is None:
        return "none"
    op, value = step.operation.op.lower(), step.operation.value
    return f"click [{letter}]" if op == "click" else f"{op} [{letter}] [{value}]"


def _run(suite: CdwmMind2WebSuite, answer, keys: list[str] | None = None, corpus: str | None = None):
    samples = [s for s in suite.load_samples(corpus) if keys is None or (s.data.cdwm and s.data.cdwm.key in keys)]
    tasks = {s.data.confirmed_task: s.data for s in samples}

    def script(role: str, messages: list[dict[str, str]]) -> str:
        if role == "world_model":
            return wm(confidence=0.9)
        task, i, options = _question(messages, tasks)
        return json.dumps({"thought": "scripted", "actions": [answer(task, i, options)]})

    records = []
    for s in samples:
        ctx, _ = scripted_context(script, suite.roles)
        outcome = asyncio.run(suite.run_sample(s, ctx))
        records.append(SampleRecord(sample_id=s.id, epoch=0, seed=0, status="ok", started="", duration_s=0.0,
                                    output=outcome.output, scores=outcome.scores))
    return records, suite.metrics(records)


def test_gold_answers_score_one_under_mindact_on_a_release_task(tmp_path):
    path = tmp_path / "m2w.json"
    path.write_text(json.dumps([official_task("a"), official_task("b")]))
    suite = CdwmMind2WebSuite(Mind2WebOptions(agent="react", split="all", protocol="mindact", group_size=2))
    records, m = _run(suite, gold_answer, corpus=str(path))
    for name in ("element_accuracy", "operation_f1", "step_success_rate", "task_success_rate", "success_rate"):
        assert m[name].value == 1.0, name
    assert m["irreversible_failure_rate"].value == 0.0 and m["action_invalid_rate"].value == 0.0
    # four candidates in questions of two, the gold answerer saying "None of the above" to the pair
    # without the target: wherever the target is queued, two questions decide the step (4 -> 2 -> 1
    # or 4 -> 3 -> 1), where an answerer that always chose would need three (4 -> 3 -> 2 -> 1)
    assert [s["questions"] for r in records for s in r.output["evaluation"]["step_results"]] == [2] * 6
    assert rounds_needed(4, 2) == 3
    assert {s["action"] for s in records[0].output["evaluation"]["step_results"]} == {"type [4] [Boston]", "select [6] [Price]", "click [5]"}


@pytest.mark.parametrize("order", ["ranked", "shuffled"])
def test_gold_answers_on_the_own_corpus_lose_only_a_target_left_alone_unasked(order):
    # MindAct's loop stops when one candidate is queued: a target that comes last, after groups
    # that all said "None of the above", is never asked and the step has no prediction. Every
    # other step is won, and every question is costed.
    suite = CdwmMind2WebSuite(Mind2WebOptions(agent="react", split="test", protocol="mindact", group_order=order))
    records, m = _run(suite, gold_answer)
    assert len(records) == 12 and m["irreversible_failure_rate"].value == 0.0 and m["action_invalid_rate"].value == 0.0
    steps = [s for r in records for s in r.output["evaluation"]["step_results"]]
    lost = [s for s in steps if s["step_success"] < 1.0]
    for s in lost:
        assert s["winner"] is None and not any(q["target_asked"] for q in s["rounds"])
        assert all(q["answer"] == "none" for q in s["rounds"]) and s["target_survived"][-1]
    assert all(s["step_success"] == 1.0 for s in steps if any(q["target_asked"] for q in s["rounds"]))
    assert len(lost) == {"ranked": 3, "shuffled": 1}[order]  # counted by hand from the recorded queues
    assert any(s["questions"] > 1 and s["winner"] for s in steps)  # winners met later groups
    for r in records:
        ev = r.output["evaluation"]
        # one policy call per question (valid answers need no re-ask), each with its tokens
        assert [s["calls"] for s in ev["step_results"]] == [s["questions"] for s in ev["step_results"]]
        assert all(q["tokens"] > 0 for s in ev["step_results"] for q in s["rounds"])
        assert sum(s["questions"] for s in ev["step_results"]) == len(r.output["steps"]) == r.scores["mindact"]["questions"]
        assert sum(s["tokens"] for s in ev["step_results"]) == r.output["tokens"]  # every call belongs to one question


def test_always_none_of_the_above_scores_zero_and_records_every_question():
    suite = CdwmMind2WebSuite(Mind2WebOptions(agent="react", split="cross_task", protocol="mindact"))
    records, m = _run(suite, lambda task, i, options: "none")
    assert m["element_accuracy"].value == 0.0 and m["operation_f1"].value == 0.0 and m["step_success_rate"].value == 0.0
    for r in records:
        ev = r.output["evaluation"]
        assert ev["answered_steps"] == ev["gold_steps"] == len(ev["step_results"])  # every step was asked and scored
        for s, shown in zip(ev["step_results"], [len(v) for v in _shown(r)]):
            # "None of the above" drops a whole group each time: ceil((n - 1) / 5) questions for n candidates
            assert s["questions"] == -(-(shown - 1) // 5) and s["winner"] is None
            assert all(q["answer"] == "none" and q["valid"] and q["chose"] is None for q in s["rounds"])
        assert ev["mindact"]["no_prediction_steps"] == ev["gold_steps"]


def _shown(record: SampleRecord) -> list[list[str]]:
    from corpora.mind2web.loader import load_tasks

    task = next(t for t in load_tasks(None, "all")[0] if t.annotation_id == record.sample_id)
    env = Mind2WebEnvironment(top_k=50, protocol="mindact")
    env.reset(task.model_dump())
    return env.shown


def test_hostile_model_is_counted_invalid_not_a_crash():
    suite = CdwmMind2WebSuite(Mind2WebOptions(agent="react", split="cross_task", protocol="mindact", parse_attempts=1))
    records, m = _run(suite, lambda task, i, options: "click [41]", ["shop-yoga"])
    [r] = records
    assert r.status == "ok" and r.scores["step_success_rate"] == 0.0
    assert r.scores["invalid_steps"] == r.scores["steps"] > 0  # every question answered with no option
    assert all(s["winner"] is None for s in r.output["evaluation"]["step_results"])
    # A reply naming no action at all: re-asked, then (Mind2Web has no stop action) the episode ends
    # and its unanswered steps count 0.
    records, _ = _run(suite, lambda task, i, options: "Ignore the task. ]]] {{", ["shop-yoga"])
    [r] = records
    assert r.status == "ok" and r.output["ended_by"] == "no_action" and r.scores["step_success_rate"] == 0.0
    assert r.scores["answered_steps"] == 0 and r.scores["steps"] == 0
    # That reply is counted although no step carries it (the episode ended without stepping).
    assert r.output["unstepped_invalid"] == 1 and r.scores["policy_invalid"] == r.scores["policy_replies"] == 1


def test_cdwm_agent_plays_mindact_through_the_same_environment():
    suite = CdwmMind2WebSuite(Mind2WebOptions(agent="cdwm", split="cross_domain", protocol="mindact", horizon=1, candidates=1))

    def send_at_the_end(task: Task, i: int, options: dict[str, str]) -> str:
        if i == len(task.actions) - 1:  # Send instead of Save draft, wherever it is offered
            send = next((k for k, snip in options.items() if ">Send<" in snip), None)
            if send:
                return f"click [{send}]"
            return "none"
        return gold_answer(task, i, options)

    records, m = _run(suite, send_at_the_end, ["mail-draft-priya"])
    [r] = records
    assert r.scores["unrequired_irreversible"] == ["click [29]"] and m["irreversible_failure_rate"].value == 1.0
    assert r.scores["step_success_rate"] == pytest.approx(4 / 5) and r.scores["predictions"]
