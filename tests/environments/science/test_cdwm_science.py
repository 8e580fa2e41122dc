"""Suite `cdwm-science`: ScienceWorld's real simulator (the `scienceworld` package's JVM) behind the
CDWM protocol -- gold paths to a full score, exact ground-truth deltas, the irreversibility of a
wrong focus, ambiguity questions, the samples and their bad-input errors, the JVM's cleanup, and
the suite end to end (in process with a scripted model, and through `harness eval`)."""

from __future__ import annotations

import asyncio
import json

import psutil
import pytest

from environments.cdwm.deltas import Delta, delta_f1
from environments.cdwm.episode import Evaluation, Step
from environments.cdwm.mask import ALL
from environments.cdwm.metrics import delta_matches, episode_scores, unrequired_irreversible
from environments.science.deltas import diff
from environments.science.env import EnvironmentClosed, ScienceEnvironment
from environments.science.mask import SCIENCE_MASK
from environments.science.suite import CdwmScienceSuite, ScienceOptions, resolve_tasks
from harness.errors import HarnessError
from harness.loopback import running_server
from harness.run_folder import RunFolder
from harness.suite import get_suite
from tests.environments.cdwm.fixtures import scripted_context, wm
from tests.conftest import harness_cli

BOIL = {"task_name": "boil", "variation": 0}  # "boil water"; the agent starts in the hallway


@pytest.fixture(scope="module")
def env():
    """One JVM for the tests that only play episodes: every reset loads a fresh world."""
    with ScienceEnvironment(max_steps=200, env_step_limit=1000) as shared:
        yield shared


def _facts(result) -> set[tuple]:
    return result.delta.facts()


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


@pytest.mark.timeout(300)
def test_gold_path_reaches_full_score(env):
    env.reset({"task_name": "chemistry-mix", "variation": 0, "gold_path": True})
    steps = []
    for action in env.gold_path:
        steps.append(env.step(action))
        if steps[-1].done:
            break
    assert steps[-1].done and steps[-1].info["score"] == 100
    mix = next(s for a, s in zip(env.gold_path, steps) if env.action_class(a) == "mix")
    # Mixing makes salt water of the salt (and water): the salt is gone for good.
    assert {("create", "salt water"), ("delete", "sodium chloride")} <= _facts(mix) and not mix.delta.reversible
    focus = steps[-1]
    assert ("rel+", "agent", "focus on", "salt water") in _facts(focus) and not focus.delta.reversible
    evaluation = env.evaluate()
    assert evaluation["success"] == 1.0 and evaluation["score"] == 100 and evaluation["completed"]
    assert evaluation["gold_replay_score"] == 100 and evaluation["unrequired_irreversible"] == []
    # The task requires both irreversible steps: its own predicates select them.
    for step in (mix, focus):
        assert any(delta_matches(p, step.delta) for p in evaluation["required_irreversible"])
    records = [Step(index=i, observation="", action=a, delta=s.delta) for i, (a, s) in enumerate(zip(env.gold_path, steps))]
    scores = episode_scores(records, Evaluation.model_validate(evaluation), tokens=0)
    assert scores.success == 1.0 and scores.unrequired_irreversible == []
    assert env.step("look around").info["error"].startswith("the episode is over")


@pytest.mark.timeout(300)
def test_deltas_of_a_known_sequence_are_exact(env):
    obs = env.reset(BOIL)
    assert obs.text.startswith("Your task is to boil water.") and "This room is called the hallway." in obs.text
    assert "In your inventory, you see:" in obs.text and "go to kitchen" in obs.admissible
    assert "reset task" not in obs.admissible and obs.info["action_help"].count("focus on") == 1

    def play(action: str):
        result = env.step(action)
        assert result.valid, (action, result.info)
        return result

    # Free actions take no time: no tick (the move counter stays), and a real diff of the whole
    # world finds nothing -- which is what the mask claims for them.
    before = env._snapshot()[0]
    for action in ("look around", "inventory", "task"):
        result = play(action)
        assert result.delta.is_empty() and result.info["moves"] == 0 and SCIENCE_MASK.determined(action)
    assert diff(before, env._snapshot()[0]).is_empty()

    # The first tick also fills the fountain outside: the world's own course, reported as it happens.
    assert _facts(play("go to kitchen")) == {("rel-", "agent", "in", "hallway"), ("rel+", "agent", "in", "kitchen"),
                                            ("create", "water"), ("rel+", "water", "in", "fountain")}
    assert _facts(play("pick up thermometer")) == {("rel-", "thermometer", "in", "kitchen"),
                                                  ("rel+", "thermometer", "in", "inventory")}
    assert _facts(play("open cupboard")) == {("attr", "cupboard", "is open", "true")}
    assert _facts(play("pick up metal pot")) == {("rel-", "metal pot", "in", "cupboard"),
                                                ("rel+", "metal pot", "in", "inventory")}
    assert _facts(play("close door to hallway")) == {("attr", "door to hallway", "is open", "false")}
    assert _facts(play("open door to hallway")) == {("attr", "door to hallway", "is open", "true")}
    assert _facts(play("move metal pot to sink")) == {("rel-", "metal pot", "in", "inventory"),
                                                     ("rel+", "metal pot", "in", "sink")}
    # The tap fills the pot under it, and the overflow runs into the sewer.
    assert _facts(play("activate sink")) == {("attr", "sink", "is activated", "true"), ("create", "water"),
                                            ("rel+", "water", "in", "metal pot"), ("rel+", "water", "in", "sewer")}
    assert _facts(play("deactivate sink")) == {("attr", "sink", "is activated", "false")}
    assert _facts(play("teleport to hallway")) == {("rel-", "agent", "in", "kitchen"), ("rel+", "agent", "in", "hallway")}
    assert _facts(play("teleport to kitchen")) == {("rel-", "agent", "in", "hallway"), ("rel+", "agent", "in", "kitchen")}
    play("move metal pot to stove")
    lit = play("activate stove")
    assert ("attr", "stove", "is activated", "true") in _facts(lit)
    heated = {f[1]: float(f[3]) for f in _facts(lit) if f[2] == "temperature"}
    assert heated["metal pot"] > 20 and heated["water"] > 10
    # Looking takes a tick, and the water heats meanwhile: why the mask keeps every dimension for it.
    looked = play("look at stove")
    assert {f[1] for f in _facts(looked) if f[2] == "temperature"} == {"metal pot", "water"}
    assert looked.info["moves"] == lit.info["moves"] + 1 and SCIENCE_MASK.allowed("look at") == ALL
    # Nothing above was irreversible: moving, opening, switching and heating can all be undone.
    assert env._history and all(h["delta"].reversible and h["delta"].irreversible_cost == 0 for h in env._history)


@pytest.mark.timeout(300)
def test_focusing_on_the_wrong_object_is_an_unrequired_irreversible_failure(env):
    env.reset(BOIL)
    env.step("look at picture")  # the first tick fills the fountain; this keeps it out of the focus's delta
    wrong = env.step("focus on picture")
    assert wrong.valid and wrong.done and wrong.info["score"] == -100
    assert _facts(wrong) == {("rel+", "agent", "focus on", "picture"), ("attr", "task", "status", "failed")}
    assert not wrong.delta.reversible and wrong.delta.irreversible_cost == 2
    evaluation = env.evaluate()
    assert evaluation["success"] == 0.0 and evaluation["score"] == -100 and evaluation["ended_by"] == "failed"
    assert evaluation["unrequired_irreversible"] == ["focus on picture"] and evaluation["steps"] == 2
    # The metrics' own predicate check agrees: no requirement of the task selects this focus.
    assert unrequired_irreversible(wrong.delta, evaluation["required_irreversible"])
    record = [Step(index=0, observation="", action="focus on picture", delta=wrong.delta)]
    scores = episode_scores(record, Evaluation.model_validate(evaluation), tokens=0)
    assert scores.unrequired_irreversible == ["focus on picture"]


@pytest.mark.timeout(300)
def test_a_right_focus_is_required_also_when_the_gold_path_picks_another(env):
    # Any non-living thing is a right answer here; the gold path picks one at random.
    obs = env.reset({"task_name": "find-non-living-thing", "variation": 0})
    target = next(a for a in obs.admissible if a in ("focus on thermometer", "focus on picture", "focus on painting"))
    focus = env.step(target)
    assert focus.valid and not focus.done and focus.info["score"] > 0
    assert not focus.delta.reversible and ("rel+", "agent", "focus on", target.removeprefix("focus on ")) in _facts(focus)
    evaluation = env.evaluate()
    assert evaluation["unrequired_irreversible"] == [] and 0 < evaluation["success"] < 1
    assert any(delta_matches(p, focus.delta) for p in evaluation["required_irreversible"])


@pytest.mark.timeout(300)
def test_an_ambiguous_action_asks_and_a_number_answers(env):
    env.reset(BOIL)
    env.step("go to kitchen")
    env.step("open cupboard")  # a tin cup and a ceramic cup in it, a glass cup on the table
    asked = env.step("pick up cup")
    assert not asked.valid and asked.delta.is_empty() and asked.observation.text.startswith("Ambiguous request")
    choices = asked.observation.admissible
    assert choices == ["0", "1", "2"]
    moves = asked.info["moves"]
    refused = env.step("look around")  # the simulator would read it as the answer and lose a tick
    assert not refused.valid and refused.info["moves"] == moves and "answer the question" in refused.info["error"]
    picked = asked.observation.text.split("0:", 1)[1].split("(in ", 1)[0].strip().removeprefix("pick up ")
    assert env.action_class("0") == "pick up"
    answer = env.step("0")
    assert answer.valid and ("rel+", picked, "in", "inventory") in _facts(answer) and answer.info["moves"] == moves + 1
    assert "go to hallway" in answer.observation.admissible


def test_action_classes_and_refusals(env):
    assert [env.action_class(a) for a in ("examine substance in metal pot", "wait1", "wait", "teleport to kitchen",
                                          "focus on water", "look around", "pick up cup", "stop [done]")] == \
        ["look at", "wait1", "wait", "teleport to", "focus on", "look around", "pick up", "stop"]
    env.reset(BOIL)
    reset = env.step("reset task")
    assert not reset.valid and reset.info["moves"] == 0 and "not allowed" in reset.info["error"]
    unknown = env.step("fly to the moon")
    assert not unknown.valid and unknown.delta.is_empty() and unknown.info["moves"] == 0
    stop = env.step("stop [give up]")
    assert stop.valid and stop.done and stop.delta.is_empty() and env.evaluate()["ended_by"] == "stop"


def test_samples_are_deterministic_and_bad_input_is_one_clear_error():
    assert len(resolve_tasks("")) == 30 and resolve_tasks("1-1,melt,boil") == [("1-1", "boil"), ("1-2", "melt")]
    suite = get_suite("cdwm-science", dict(tasks="boil,1-2", variations_per_task=2))
    samples = suite.load_samples(None)
    # ScienceWorld's dev split of both tasks is variations 14-20: the first two of it.
    assert [s.id for s in samples] == ["boil/var14", "boil/var15", "melt/var14", "melt/var15"]
    assert all(s.data.split == "dev" and s.data.simplification == "easy" for s in samples)
    assert samples[0].data.intent.startswith("Your task is to boil") and suite.intent_of(samples[0]) == samples[0].data.intent
    assert [(s.id, s.data) for s in get_suite("cdwm-science", dict(tasks="boil,1-2")).load_samples(None)] == [(s.id, s.data) for s in samples]
    identity = suite.corpus_identity(None)
    assert identity["scienceworld_version"] == "1.2.3" and identity["split"] == "dev" and identity["tasks"] == ["boil", "melt"]
    assert [s.id for s in get_suite("cdwm-science", dict(tasks="boil", variations="3,0")).load_samples(None)] == ["boil/var0", "boil/var3"]

    with pytest.raises(HarnessError, match=r"unknown task 'boill'.*1-1 \(boil\)"):
        get_suite("cdwm-science", dict(tasks="boil,boill"))
    with pytest.raises(HarnessError, match=r"variations=30: task boil has variations 0-29 \(dev split: 14-20\)"):
        get_suite("cdwm-science", dict(tasks="boil", variations="30")).load_samples(None)
    with pytest.raises(HarnessError, match="split=validation: unknown split; choose one of train, dev, test"):
        get_suite("cdwm-science", dict(split="validation"))
    with pytest.raises(HarnessError, match="simplification=hard: unknown hard"):
        get_suite("cdwm-science", dict(simplification="hard"))
    with pytest.raises(HarnessError, match="variations=a: 'a' is not a variation number"):
        get_suite("cdwm-science", dict(variations="a"))
    with pytest.raises(HarnessError, match="--corpus tasks.json: cdwm-science takes its tasks from"):
        suite.load_samples("tasks.json")
    # Through the registry, as the CLI builds it: CdwmSuite's options pass through as well.
    built = get_suite("cdwm-science", {"agent": "cdwm", "max_steps": "3", "tasks": "boil", "variations_per_task": "1"})
    assert built.agent == "cdwm" and built.config.max_steps == 3 and built.variations_per_task == 1
    with pytest.raises(HarnessError, match="has no such option"):
        get_suite("cdwm-science", {"variation_per_task": "1"})


@pytest.mark.timeout(300)
def test_the_jvm_is_gone_after_close_also_after_errors():
    env = ScienceEnvironment()
    env.reset(BOIL)
    pid = env.java_pid
    assert "java" in psutil.Process(pid).name()
    env.close()
    env.close()  # safe twice
    assert _gone(pid)
    with pytest.raises(EnvironmentClosed):
        env.reset(BOIL)

    # An exception in the middle of an episode: the context manager closes the JVM.
    with pytest.raises(RuntimeError, match="boom"):
        with ScienceEnvironment() as env:
            env.reset(BOIL)
            pid = env.java_pid
            env.step("go to kitchen")
            raise RuntimeError("boom")
    assert _gone(pid)

    # The JVM dies under a step: the step fails, close() still cleans up and never raises.
    env = ScienceEnvironment()
    try:
        env.reset(BOIL)
        pid = env.java_pid
        psutil.Process(pid).kill()
        with pytest.raises(Exception):  # noqa: B017 - whatever py4j raises for a dead JVM
            env.step("go to kitchen")
    finally:
        env.close()
    assert _gone(pid)


class _TracedSuite(CdwmScienceSuite):
    """The real suite, remembering the environments it made."""

    def __init__(self, **options):
        super().__init__(ScienceOptions(**options))
        self.envs: list[ScienceEnvironment] = []

    def make_env(self, sample, judge):
        self.envs.append(super().make_env(sample, judge))
        return self.envs[-1]


@pytest.mark.timeout(300)
def test_the_cdwm_agent_runs_an_episode_and_a_crash_closes_the_jvm():
    suite = _TracedSuite(agent="cdwm", max_steps=2, candidates=2, horizon=1, tasks="boil", variations="0")
    (sample,) = suite.load_samples(None)

    def script(role: str, messages: list[dict[str, str]]) -> str:
        if role == "world_model":  # predicts the move it is asked about
            return wm({"relations_added": [{"subject": "agent", "relation": "in", "object": "kitchen"}]})
        if "1. go to kitchen" in messages[-1]["content"]:
            return "Thought: look at the kitchen\n1. look around\n2. inventory"
        return "Thought: the pot is in the kitchen\n1. go to kitchen\n2. look around"

    ctx, log = scripted_context(script)
    outcome = asyncio.run(suite.run_sample(sample, ctx))
    steps = outcome.output["steps"]
    assert [s["action"] for s in steps] == ["go to kitchen", "look around"]
    assert steps[0]["prediction_source"] == "world_model" and steps[1]["prediction_source"] == "mask"
    actual = Delta.model_validate(steps[0]["delta"])
    assert ("rel+", "agent", "in", "kitchen") in actual.facts()
    (scored,) = outcome.scores["predictions"]  # the world model's one prediction, scored against the diff
    expected = delta_f1(Delta.model_validate(steps[0]["prediction"]), actual)["f1"]
    assert expected > 0 and scored["f1"] == pytest.approx(expected)
    assert outcome.output["evaluation"]["score"] == 0 and outcome.scores["unrequired_irreversible"] == []
    assert _gone(suite.envs[0].java_pid)

    def crash(role: str, messages: list[dict[str, str]]) -> str:
        raise RuntimeError("model crashed")

    ctx, _ = scripted_context(crash)
    with pytest.raises(RuntimeError, match="model crashed"):
        asyncio.run(suite.run_sample(sample, ctx))
    assert len(suite.envs) == 2 and _gone(suite.envs[1].java_pid)


@pytest.mark.timeout(300)
def test_cdwm_science_end_to_end_through_the_cli(tmp_path):
    runs = tmp_path / "runs"
    # A policy that focuses on itself: the task fails at once, an irreversible change it did not require.
    reply = "Thought: this is it\nAction: focus on agent"
    with running_server("--echo", "--reply", reply) as url:
        res = harness_cli("eval", "--suite", "cdwm-science", "--agent", "react", "--model", "openai/policy",
                          "--base-url", url, "--limit", "1", "--suite-option", "tasks=boil",
                          "--suite-option", "max_steps=3", "--run-dir", str(runs), "--no-progress")
    assert res.returncode == 0, res.stderr
    run_id = next(p.name for p in runs.iterdir() if p.name.startswith("cdwm-science-"))
    folder = RunFolder(runs, run_id)
    assert folder.read_manifest().corpus["scienceworld_version"] == "1.2.3"
    (rec,) = folder.read_samples()
    assert rec.status == "ok", rec.errors
    assert rec.sample_id == "boil/var14" and rec.output["ended_by"] == "done"
    (step,) = rec.output["steps"]
    assert step["action"] == "focus on agent" and step["action_class"] == "focus on" and not step["delta"]["reversible"]
    assert rec.output["evaluation"]["score"] == -100 and rec.scores["unrequired_irreversible"] == ["focus on agent"]
    summary = json.loads((folder.path / "summary.json").read_text())
    assert summary["metrics"]["success_rate"]["value"] == 0.0
    assert summary["metrics"]["irreversible_failure_rate"]["value"] == 1.0


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_embedded_model_runs_a_science_episode(tmp_path, monkeypatch):
    """SmolLM2-135M through the real runner: whatever it writes (it rarely names an admissible
    action), the episode ends cleanly, is evaluated by the simulator and is counted."""
    from harness.records import RunConfig
    from harness.runner import execute, plan_run

    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    suite = get_suite("cdwm-science", dict(agent="react", tasks="boil", variations_per_task=1, max_steps=2, policy_max_tokens=48))
    config = RunConfig(suite=suite.name, models={"assistant": "local/smollm2-135m"},
                       suite_options={"agent": "react", "tasks": "boil"}, sample_timeout_s=600)
    plan = plan_run(config, tmp_path / "runs", suite=suite)
    summary = asyncio.run(execute(plan, show_progress=False))
    (rec,) = plan.folder.read_samples()
    assert rec.status == "ok", rec.errors
    assert 1 <= len(rec.output["steps"]) <= 2 and rec.output["ended_by"] in ("done", "step_limit", "no_action")
    assert rec.scores["tokens"] > 0 and rec.output["evaluation"]["gold_replay_score"] == 100
    assert summary.metrics["success_rate"].n == 1 and 0.0 <= summary.metrics["success_rate"].value <= 1.0
