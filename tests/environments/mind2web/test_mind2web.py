"""Mind2Web's offline protocol: the release's format read as written, the metrics against
hand-computed values, the suite end to end with scripted models (gold -> 1.0, wrong -> 0 element
accuracy, a wrong irreversible click counted), and the own corpus rebuilt byte for byte."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from corpora.mind2web.loader import OWN_CORPUS, Task, load_tasks
from environments.mind2web import dom
from environments.mind2web.build import SCRIPTS, record_task
from environments.mind2web.env import Mind2WebEnvironment, gold_action, parse_action
from environments.mind2web.metrics import Mind2WebStepMetrics, mind2web_metrics, operation_f1, step_result, task_scores
from environments.mind2web.suite import CdwmMind2WebSuite, Mind2WebOptions
from harness.errors import HarnessError
from harness.records import SampleRecord
from tests.environments.cdwm.fixtures import scripted_context, wm

HTML = ('<html backend_node_id="1"><body backend_node_id="2"><label backend_node_id="3">City '
        '<input backend_node_id="4" name="city"></label><button backend_node_id="5">Search</button>'
        '<select backend_node_id="6" aria-label="Sort"><option backend_node_id="7">Price</option></select>'
        '<button backend_node_id="8">Pay now</button></body></html>')


def official_task(aid: str = "t-1", hf_strings: bool = False) -> dict:
    def cand(bid: str, tag: str, target: bool) -> dict | str:
        c = {"tag": tag, "attributes": json.dumps({"backend_node_id": bid, "class": "x"}), "backend_node_id": bid,
             "is_original_target": target, "is_top_level_target": target}
        return json.dumps(c) if hf_strings else c

    steps = [("TYPE", "Boston", "4", "input"), ("SELECT", "Price", "6", "select"), ("CLICK", "", "5", "button")]
    return {"annotation_id": aid, "website": "exampletravel", "domain": "Travel", "subdomain": "Hotel",
            "confirmed_task": "Find hotels in Boston sorted by price",
            "action_reprs": ["[textbox]  City -> TYPE: Boston", "[combobox]  Sort -> SELECT: Price", "[button]  Search -> CLICK"],
            "actions": [{"action_uid": f"{aid}-{i}", "raw_html": "<html></html>", "cleaned_html": HTML,
                         "operation": {"op": op, "original_op": op, "value": value},
                         "pos_candidates": [cand(bid, tag, True)],
                         "neg_candidates": [cand(b, t, False) for b, t in (("4", "input"), ("5", "button"), ("6", "select"), ("8", "button")) if b != bid]}
                        for i, (op, value, bid, tag) in enumerate(steps)]}


def write_release(root: Path) -> Path:
    for folder, aid, strings in (("train", "a", False), ("test_task", "b", False), ("test_website", "c", True),
                                 ("test_domain", "d", False)):
        (root / folder).mkdir(parents=True)
        (root / folder / f"{folder}_0.json").write_text(json.dumps([official_task(aid, strings)]))
    return root


# ---------------------------------------------------------------- the format
def test_loader_reads_the_release_layout_and_keeps_its_field_names(tmp_path):
    root = write_release(tmp_path / "data")
    tasks, identity = load_tasks(root, "test")
    assert [(t.annotation_id, t.split) for t in tasks] == [("b", "cross_task"), ("c", "cross_website"), ("d", "cross_domain")]
    original = official_task("c")
    back = tasks[1]
    for key in ("annotation_id", "website", "domain", "subdomain", "confirmed_task", "action_reprs"):
        assert getattr(back, key) == original[key]
    step = back.actions[0]
    assert set(original["actions"][0]) <= set(step.model_dump())  # action_uid, raw_html, cleaned_html, operation, candidates
    assert step.operation.model_dump() == {"op": "TYPE", "original_op": "TYPE", "value": "Boston"}
    assert step.pos_candidates[0].backend_node_id == "4"  # the hub's JSON-string candidates decoded
    assert step.pos_candidates[0].attribute_map()["class"] == "x"
    assert step.cdwm is None and back.cdwm is None  # the release has none of the own corpus's fields
    assert [t.split for t in load_tasks(root, "train")[0]] == ["train"]
    assert len(load_tasks(root, "all")[0]) == 4 and identity["sha256"] == load_tasks(root, "test")[1]["sha256"]


def test_bad_sources_are_one_clear_error(tmp_path, monkeypatch):
    with pytest.raises(HarnessError, match=r"/nope/m2w\.json not found: pass --corpus PATH"):
        load_tasks("/nope/m2w.json")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{k: v for k, v in official_task().items() if k != "confirmed_task"}]))
    with pytest.raises(HarnessError, match=r"bad\.json\[0\]: field `confirmed_task` is missing; a Mind2Web task needs"):
        load_tasks(bad, "all")
    (tmp_path / "dup.json").write_text(json.dumps([official_task(), official_task()]))
    with pytest.raises(HarnessError, match="annotation_id 't-1' appears twice"):
        load_tasks(tmp_path / "dup.json", "all")
    with pytest.raises(HarnessError, match="one file, not split folders: use split=all"):
        load_tasks(bad, "cross_task")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(HarnessError, match=r"'osunlp/Mind2Web' cannot be loaded: offline mode is on; download .* --corpus PATH"):
        load_tasks("osunlp/Mind2Web")
    with pytest.raises(HarnessError, match="split 'dev'"):
        load_tasks(None, "dev")


# ---------------------------------------------------------------- the metrics
def test_operation_f1_and_step_scores_are_mind2webs():
    assert operation_f1("TYPE new york", "TYPE New York") == 1.0
    assert operation_f1("TYPE new york city", "TYPE New York") == pytest.approx(6 / 7)  # p 3/4, r 1
    assert operation_f1("CLICK", "TYPE Boston") == 0.0
    assert operation_f1("TYPE Boston ,", "TYPE Boston") == 1.0  # punctuation tokens dropped
    assert operation_f1("", "") == 1.0
    right = step_result("4", "TYPE", "boston", {"4"}, "TYPE", "Boston")
    assert right == {"element_correct": 1.0, "operation_f1": 1.0, "step_success": 1.0}
    half = step_result("4", "TYPE", "Boston MA", {"4"}, "TYPE", "Boston")  # right element, F1 0.8: no step success
    assert half["operation_f1"] == pytest.approx(0.8) and half["step_success"] == 0.0
    assert step_result("5", "CLICK", "", {"4"}, "CLICK", "")["element_correct"] == 0.0
    assert step_result(None, None, "", {"4"}, "CLICK", "")["operation_f1"] == 0.0
    scores = task_scores([right, half], 4)  # two unanswered steps count 0
    assert scores["element_accuracy"] == 0.5 and scores["step_success_rate"] == 0.25 and scores["task_success"] == 0.0
    assert scores["operation_f1"] == pytest.approx(1.8 / 4)


def test_macro_and_micro_metrics_over_tasks():
    def record(i: int, values: dict) -> Mind2WebStepMetrics:
        return Mind2WebStepMetrics.model_validate(values | {"candidate_recall": 1.0})

    a = task_scores([{"element_correct": 1.0, "operation_f1": 1.0, "step_success": 1.0}], 1)  # 1 of 1
    b = task_scores([{"element_correct": 1.0, "operation_f1": 1.0, "step_success": 1.0}]
                    + [{"element_correct": 0.0, "operation_f1": 0.5, "step_success": 0.0}] * 2, 3)  # 1 of 3
    m = mind2web_metrics([record(0, a), record(1, b)])
    assert m["step_success_rate"].value == pytest.approx((1 + 1 / 3) / 2)  # macro: per task, then over tasks
    assert m["step_success_rate_micro"].value == pytest.approx(2 / 4)
    assert m["operation_f1"].value == pytest.approx((1 + 2 / 3) / 2)
    assert m["task_success_rate"].value == 0.5 and m["step_success_rate"].n == 2
    assert m["step_success_rate"].ci_low <= m["step_success_rate"].value <= m["step_success_rate"].ci_high


# ---------------------------------------------------------------- the environment and the suite
def test_release_task_in_the_environment_marks_a_committing_click_irreversible():
    task = official_task() | {"split": "cross_task"}
    env = Mind2WebEnvironment(top_k=3)
    obs = env.reset(task)
    assert "[4] <input name=\"city\"> (label: City)" in obs.text and obs.text.count("\n[") == 3
    assert parse_action("type [4] [Boston]") == ("TYPE", "4", "Boston")
    env.step("type [4] [Boston]")
    env.step("select [6] [Price]")
    last = env.step("click [8]")  # "Pay now" instead of Search
    assert last.done and not last.delta.reversible
    result = env.evaluate()
    assert result["unrequired_irreversible"] == ["click [8]"] and result["irreversible_source"] == "keyword heuristic"
    assert result["element_accuracy"] == pytest.approx(2 / 3) and result["success"] == 0.0


def _script(tasks: dict[str, Task], choose):
    """A policy that reads the task and its own step count from the prompt and answers `choose(task, i)`."""
    def script(role: str, messages: list[dict[str, str]]) -> str:
        if role == "world_model":
            return wm(confidence=0.9)
        user = messages[1]["content"]
        intent = user.split("\n", 1)[0].removeprefix("Task: ")
        # The observation lists the task's previous gold actions (the agent's history keeps only the last few).
        shown = user.split("Observation:\n", 1)[1].split("Previous actions:\n", 1)[1].split("\nCandidate elements", 1)[0]
        i = 0 if shown == "none" else len(shown.splitlines())
        return json.dumps({"thought": "scripted", "actions": [choose(tasks[intent], i)]})
    return script


def _run(suite: CdwmMind2WebSuite, choose, ids: list[str] | None = None):
    samples = [s for s in suite.load_samples(None) if ids is None or (s.data.cdwm and s.data.cdwm.key in ids)]
    tasks = {s.data.confirmed_task: s.data for s in samples}
    records = []
    for s in samples:
        ctx, _ = scripted_context(_script(tasks, choose), suite.roles)
        outcome = asyncio.run(suite.run_sample(s, ctx))
        records.append(SampleRecord(sample_id=s.id, epoch=0, seed=0, status="ok", started="", duration_s=0.0,
                                     output=outcome.output, scores=outcome.scores))
    return records, suite.metrics(records)


def _wrong(task: Task, i: int) -> str:
    """The first shown candidate that is not the target."""
    pos = {c.backend_node_id for c in task.actions[i].pos_candidates}
    if task.annotation_id not in _SHOWN:
        env = Mind2WebEnvironment()
        env.reset(task.model_dump())
        _SHOWN[task.annotation_id] = env.shown
    return f"click [{next(b for b in _SHOWN[task.annotation_id][i] if b not in pos)}]"


_SHOWN: dict[str, list[list[str]]] = {}


def test_gold_model_scores_one_and_wrong_model_zero_on_the_own_corpus():
    suite = CdwmMind2WebSuite(Mind2WebOptions(agent="react", split="test"))
    records, gold = _run(suite, lambda task, i: gold_action(task.actions[i]))
    assert len(records) == 12
    for name in ("element_accuracy", "operation_f1", "step_success_rate", "task_success_rate", "success_rate"):
        assert gold[name].value == 1.0, name
    assert gold["irreversible_failure_rate"].value == 0.0  # the required cancellations, purchase and send are no failure
    some = ["shop-headlamp", "travel-cancel2", "mail-reply-sam"]
    again, _ = _run(suite, lambda task, i: gold_action(task.actions[i]), some)
    assert [r.scores for r in again] == [r.scores for r in records if r.output["task_id"] in {a.sample_id for a in again}]
    _, wrong = _run(suite, _wrong, ["shop-cancel4", "travel-flex", "mail-reply-sam"])  # one task per split
    assert wrong["element_accuracy"].value == 0.0 and wrong["step_success_rate"].value == 0.0
    assert set(suite.breakdowns(records)["split"]) == {"cross_task", "cross_website", "cross_domain"}


def test_cdwm_agent_sending_instead_of_saving_a_draft_is_an_irreversible_failure():
    suite = CdwmMind2WebSuite(Mind2WebOptions(agent="cdwm", split="cross_domain", horizon=1, candidates=1))

    def send_at_the_end(task: Task, i: int) -> str:
        if i == len(task.actions) - 1:
            return "click [29]"  # Send, next to Save draft
        return gold_action(task.actions[i])

    records, m = _run(suite, send_at_the_end, ["mail-draft-priya"])
    [r] = records
    assert r.scores["unrequired_irreversible"] == ["click [29]"] and m["irreversible_failure_rate"].value == 1.0
    assert r.scores["step_success_rate"] == pytest.approx(4 / 5) and r.scores["task_success"] == 0.0
    assert r.scores["predictions"]  # the world model was asked about the clicks (typing is masked)


# ---------------------------------------------------------------- the own corpus
def test_own_corpus_is_what_the_sites_produce(tmp_path):
    script = next(s for s in SCRIPTS if s.key == "mail-star-budget")
    fresh = record_task(script, tmp_path)
    committed = json.loads((OWN_CORPUS / "test_domain" / "mail.json").read_text())
    assert next(t for t in committed if t["cdwm"]["key"] == script.key) == fresh
    step = fresh["actions"][1]
    node = dom.by_id(dom.number(dom.parse(step["cleaned_html"])))[step["pos_candidates"][0]["backend_node_id"]]
    assert dom.describe(node) == "Star" and step["cdwm"]["delta"]["attributes"][0]["attribute"] == "starred"
    tasks, _ = load_tasks(None, "all")
    assert len(tasks) == len(SCRIPTS) and {t.split for t in tasks} == {"train", "cross_task", "cross_website", "cross_domain"}
    assert {t.website for t in tasks if t.split == "train"} == {"shop"}
    assert sum(s.cdwm.irreversible for t in tasks for s in t.actions if s.cdwm) == 4
    assert all(s.cdwm for t in tasks for s in t.actions)  # every own step carries its ledger record
