"""Suite `cdwm-household`: generated ALFWorld-style tasks in ALFWorld's real text engine (the
bundled ALFRED domain, TextWorld's PDDL environment, fast-downward), their ground-truth deltas,
the official-data path, and the suite end to end through `harness eval`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from environments.cdwm.episode import Evaluation, Step
from environments.cdwm.metrics import episode_scores
from environments.household import generator
from environments.household.env import ENGINES, HouseholdEnvironment
from environments.household.generator import Scene, generate_task, generate_tasks, problem_text
from environments.household.task import GeneratedTask, OfficialTask, read_task
from harness.errors import HarnessError
from harness.suite import get_suite
from harness.loopback import running_server
from harness.run_folder import RunFolder
from tests.conftest import harness_cli


def _kitchen_task() -> dict:  # the protocol's dict, as `reset` takes it
    """A hand-built kitchen: an apple on the counter beside a knife, a closed fridge, a sink."""
    scene = Scene("kitchen")
    counter, fridge = scene.add_receptacle("CounterTop"), scene.add_receptacle("Fridge")
    scene.add_receptacle("SinkBasin")
    scene.add_object("Apple", counter)
    scene.add_object("Knife", counter)
    scene.add_object("Mug", fridge)
    goal = generator.goal("pick_clean_then_place_in_recep", "Apple", "Fridge", intact=True)
    return GeneratedTask(task_id="hand-kitchen", intent="put a clean apple in fridge", required_irreversible=[],
                         pddl_problem=problem_text("hand_kitchen", scene, goal), irreversible_trap="slice",
                         task_type="pick_clean_then_place_in_recep", room="kitchen", gold_plan=[], target="Apple",
                         goal_receptacle="Fridge", seed=0, generator_version="hand").model_dump()


def _play(env: HouseholdEnvironment, commands: list[str]):
    results = []
    for command in commands:
        result = env.step(command)
        assert result.valid, (command, result.info, env.admissible)
        results.append(result)
    return results


def test_generation_is_deterministic_and_covers_the_six_types():
    tasks = generate_tasks()
    assert len(tasks) >= 60
    assert tasks == generate_tasks()  # same seed, same tasks (problem text, plans, intents)
    assert {t.task_type for t in tasks} == set(generator.TASK_TYPES)
    assert len({t.task_id for t in tasks}) == len(tasks)
    assert sum(t.irreversible_trap == "slice" for t in tasks) >= 10
    other = generate_tasks(seed=1)
    assert [t.pddl_problem for t in other] != [t.pddl_problem for t in tasks]
    assert read_task(tasks[0].model_dump()) == tasks[0]  # the environment reads back what it is reset with
    # A task depends on (seed, type, index) only: fewer per type leaves the others unchanged.
    assert generate_tasks(per_type=2)[2] == generate_task(0, "look_at_obj_in_light", 0) == tasks[12]


@pytest.mark.timeout(600)
def test_gold_plan_wins_generated_tasks_of_every_type():
    # Three tasks of each of the six types (a task depends on its (seed, type, index) only); every one
    # of the 72 default tasks is played by `harness bench household`, which prints "gold plans won N"
    # (75 s here, too long for CI).
    env = HouseholdEnvironment()
    lost = []
    try:
        for task in generate_tasks(per_type=3):
            env.reset(task.model_dump())
            for command in task.gold_plan:
                result = env.step(env.render(command))
                assert result.valid, (task.task_id, env.render(command), env.admissible)
            if not (result.done and env.evaluate()["success"] == 1.0):
                lost.append(task.task_id)
    finally:
        env.close()
    assert lost == []


def test_deltas_of_a_known_sequence_are_exact():
    env = HouseholdEnvironment()
    try:
        obs = env.reset(_kitchen_task())
        assert "Your task is to: put a clean apple in fridge." in obs.text
        assert "go to countertop 1" in obs.admissible and "help" not in obs.admissible
        steps = _play(env, ["go to countertop 1", "take apple 1 from countertop 1", "go to sinkbasin 1",
                            "clean apple 1 with sinkbasin 1", "go to fridge 1", "open fridge 1", "look",
                            "move apple 1 to fridge 1"])
        facts = [s.delta.facts() for s in steps]
        assert facts[0] == {("rel-", "agent", "at", "middle of room"), ("rel+", "agent", "at", "countertop 1")}
        assert facts[1] == {("rel+", "agent", "holds", "apple 1"), ("rel-", "apple 1", "in", "countertop 1")}
        assert facts[2] == {("rel-", "agent", "at", "countertop 1"), ("rel+", "agent", "at", "sinkbasin 1")}
        assert facts[3] == {("attr", "apple 1", "clean", "true")}
        assert facts[4] == {("rel-", "agent", "at", "sinkbasin 1"), ("rel+", "agent", "at", "fridge 1")}
        assert facts[5] == {("attr", "fridge 1", "open", "true")}
        assert facts[6] == set()  # looking changes nothing
        assert facts[7] == {("rel+", "apple 1", "in", "fridge 1"), ("rel-", "agent", "holds", "apple 1")}
        assert all(s.delta.reversible for s in steps)  # cleaning loses no option a task could need
        assert [s.done for s in steps] == [False] * 7 + [True] and env.evaluate()["success"] == 1.0
    finally:
        env.close()


def test_slicing_the_target_is_irreversible_and_loses_the_task():
    env = HouseholdEnvironment()
    try:
        env.reset(_kitchen_task())
        assert env.expert_plan()[-1] == "move apple 1 to fridge 1"  # ALFWorld's planner expert finds a way
        steps = _play(env, ["go to countertop 1", "take knife 1 from countertop 1", "slice apple 1 with knife 1"])
        assert env.expert_plan() == []  # ... and none once the apple is sliced
        sliced = steps[-1].delta
        assert sliced.facts() == {("attr", "apple 1", "sliced", "true")}
        assert not sliced.reversible and sliced.irreversible_cost > 0
        # The rest of the task as planned: put the knife back, clean the apple, put it in the fridge.
        _play(env, ["move knife 1 to countertop 1", "take apple 1 from countertop 1", "go to sinkbasin 1",
                    "clean apple 1 with sinkbasin 1", "go to fridge 1", "open fridge 1", "move apple 1 to fridge 1"])
        evaluation = env.evaluate()
        assert evaluation["success"] == 0.0 and not env.won
        # The metrics count the slice as an irreversible change the task did not require.
        record = [Step(index=0, observation="", action="slice apple 1 with knife 1", delta=sliced)]
        scores = episode_scores(record, Evaluation.model_validate(evaluation), tokens=0)
        assert scores.unrequired_irreversible == ["slice apple 1 with knife 1"]
    finally:
        env.close()


def test_inadmissible_commands_stop_and_the_step_limit():
    env = HouseholdEnvironment(max_steps=3)
    try:
        env.reset(_kitchen_task())
        bad = env.step("take apple 1 from countertop 1")  # not there yet
        assert not bad.valid and bad.delta.is_empty() and bad.observation.text == "Nothing happens."
        assert "not an admissible command" in bad.info["error"]
        assert env.action_class("go to fridge 1") == "go to" and env.action_class("stop [give up]") == "stop"
        env.step("go to fridge 1")
        last = env.step("look")
        assert last.done and env.evaluate()["steps"] == 3  # the limit ends the episode
        env.reset(_kitchen_task())
        stop = env.step("stop [give up]")
        assert stop.done and stop.valid and env.evaluate() | {} == env.evaluate()
        assert env.evaluate()["stopped"] == "stop [give up]" and env.evaluate()["success"] == 0.0
    finally:
        env.close()


def test_engines_are_pooled_not_leaked():
    first = HouseholdEnvironment()
    first.reset(_kitchen_task())
    first.close()
    first.close()  # safe twice
    created = ENGINES.created
    for _ in range(3):
        env = HouseholdEnvironment()
        env.reset(_kitchen_task())
        env.close()
    assert ENGINES.created == created  # each episode borrowed the idle engine
    with pytest.raises(RuntimeError, match="closed"):
        first.reset(_kitchen_task())


def test_environments_load_games_on_several_threads_at_once():
    """`parallel_envs` > 1: each episode resets its environment on its own thread. TextWorld's
    shared PDDL parser broke under concurrent loads ("pop from empty list") before loads took turns."""
    from concurrent.futures import ThreadPoolExecutor

    tasks = generate_tasks(per_type=1)[:4]
    envs = [HouseholdEnvironment() for _ in tasks]
    try:
        with ThreadPoolExecutor(len(tasks)) as pool:
            observations = list(pool.map(lambda pair: pair[0].reset(pair[1].model_dump()), zip(envs, tasks)))
    finally:
        for env in envs:
            env.close()
    assert all(obs.admissible for obs in observations)


def _official_layout(root, tasks, split="valid_unseen"):
    """ALFWorld's data layout (json_2.1.1/<split>/<task>/<trial>/{traj_data.json, game.tw-pddl}),
    filled with generated games written the way `alfworld-generate` writes them."""
    from environments.household.env import game_data

    for i, task in enumerate(tasks):
        for variant in ("", "-Sliced"):  # ALFWorld skips the Sliced trials
            trial = root / "json_2.1.1" / split / f"{task.task_type}-{i}{variant}" / "trial_T0"
            trial.mkdir(parents=True)
            (trial / "traj_data.json").write_text(json.dumps({"task_type": task.task_type}))
            (trial / "game.tw-pddl").write_text(json.dumps(game_data(task) | {"solvable": True}))
    unsolvable = root / "json_2.1.1" / split / "pick_and_place_simple-x" / "trial_T0"
    unsolvable.mkdir(parents=True)
    (unsolvable / "traj_data.json").write_text(json.dumps({"task_type": "pick_and_place_simple"}))
    (unsolvable / "game.tw-pddl").write_text(json.dumps(game_data(tasks[0]) | {"solvable": False}))


def test_official_layout_runs_unchanged(tmp_path, monkeypatch):
    tasks = [generate_task(0, "pick_cool_then_place_in_recep", 1), generate_task(0, "pick_two_obj_and_place", 3)]
    _official_layout(tmp_path, tasks)
    suite = get_suite("cdwm-household")
    samples = suite.load_samples(str(tmp_path))
    assert [s.data.task_type for s in samples] == ["pick_cool_then_place_in_recep", "pick_two_obj_and_place"]
    assert all(isinstance(s.data, OfficialTask) for s in samples)
    assert all("Sliced" not in s.id and s.id.startswith("valid_unseen/") for s in samples)
    assert [suite.intent_of(s) for s in samples] == [t.intent for t in tasks]
    identity = suite.corpus_identity(str(tmp_path))
    assert identity["source"] == "alfworld:valid_unseen" and identity["tasks"] == 2
    env = HouseholdEnvironment()
    try:
        for sample, task in zip(samples, tasks):
            env.reset(sample.data.model_dump())  # from the game file
            for command in task.gold_plan:
                env.step(env.render(command))
            assert env.evaluate()["success"] == 1.0
    finally:
        env.close()
    # ALFWORLD_DATA selects the official games the same way; a folder without them is one clear error.
    monkeypatch.setenv("ALFWORLD_DATA", str(tmp_path))
    assert [s.id for s in get_suite("cdwm-household").load_samples(None)] == [s.id for s in samples]
    monkeypatch.setenv("ALFWORLD_DATA", str(tmp_path / "nowhere"))
    with pytest.raises(HarnessError, match="ALFWORLD_DATA=.*nowhere: no json_2.1.1"):
        get_suite("cdwm-household").load_samples(None)
    monkeypatch.delenv("ALFWORLD_DATA")
    assert len(get_suite("cdwm-household").load_samples(None)) == 72  # unset: the generated tasks
    with pytest.raises(HarnessError, match="valid_seen: missing"):
        get_suite("cdwm-household", dict(split="valid_seen")).load_samples(str(tmp_path))
    with pytest.raises(HarnessError, match="no json_2.1.1"):
        suite.load_samples(str(tmp_path / "json_2.1.1"))


def test_generated_tasks_hash_as_a_recorded_run_says():
    """Typed tasks dump to the dicts they were: the corpus identity (part of the config hash that
    resume and the cache key on) of a run recorded before is unchanged."""
    manifest = Path(__file__).parents[2] / "fixtures" / "runs_format1" / "cdwm-household-20261201T215359-e8aa3d" / "manifest.json"
    recorded = json.loads(manifest.read_text())["corpus"]
    identity = get_suite("cdwm-household").corpus_identity(None)
    assert identity == {k: v for k, v in recorded.items() if k != "samples"} and identity["tasks"] == 72


def test_suite_options_are_checked():
    assert len(get_suite("cdwm-household", dict(task_types="heat,two", per_type=3)).load_samples(None)) == 6
    with pytest.raises(HarnessError, match="task_types=boil"):
        get_suite("cdwm-household", dict(task_types="boil"))
    with pytest.raises(HarnessError, match="per_type=0"):
        get_suite("cdwm-household", dict(per_type=0))


def test_cdwm_agent_through_harness_eval(tmp_path):
    """The real CLI, a loopback model whose every reply names one admissible first move and a
    world-model prediction of it: one step with an exactly predicted delta, then the fallback."""
    task = generate_task(0, "pick_and_place_simple", 0)
    first = "go to shelf 1"
    wm = {"relations_added": [{"subject": "agent", "relation": "at", "object": "shelf 1"}],
          "relations_removed": [{"subject": "agent", "relation": "at", "object": "middle of room"}],
          "reversible": True, "confidence": 0.9}
    reply = f"Thought: look there\nAction: {first}\n{json.dumps(wm)}"
    runs = tmp_path / "runs"
    with running_server("--echo", "--reply", reply) as url:
        res = harness_cli("eval", "--suite", "cdwm-household", "--agent", "cdwm", "--model", "openai/policy",
                          "--base-url", url, "--limit", "1", "--suite-option", "max_steps=4",
                          "--suite-option", "candidates=1", "--suite-option", "horizon=1",
                          "--run-dir", str(runs), "--no-progress")
    assert res.returncode == 0, res.stderr
    run_id = next(p.name for p in runs.iterdir() if p.name.startswith("cdwm-household-"))
    (rec,) = RunFolder(runs, run_id).read_samples()
    assert rec.status == "ok", rec.errors
    assert rec.sample_id == task.task_id and rec.output["intent"] == task.intent
    steps = rec.output["steps"]
    assert steps[0]["action"] == first and steps[0]["prediction_source"] == "world_model"
    assert rec.scores["success"] == 0.0 and rec.scores["predictions"][0]["f1"] == 1.0
    assert rec.output["mask"] == "household"
