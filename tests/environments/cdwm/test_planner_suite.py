"""The planner check as suite `cdwm-planner`: samples are the claims framework's SETTING/seedNNN
episodes, every arm plays the same ones, and the scores are what the CDWM claims read (no model
loaded: arms none and oracle)."""

from __future__ import annotations

import asyncio

import pytest

from environments.cdwm.planner_suite import CdwmPlannerSuite, PlannerScores, PlannerOptions
from harness.claims.model import CELL_ID
from harness.errors import HarnessError
from harness.suite import SampleContext


def suite(arm: str, **options: object) -> CdwmPlannerSuite:
    base: dict[str, object] = {"worlds": "minigrid", "settings": "validation,heldout_rule", "seeds": 3,
                               "irreversible": 0.3, "max_steps": 20}
    return CdwmPlannerSuite(PlannerOptions.model_validate(base | options | {"world_model": arm}))


def test_samples_are_setting_seed_cells_the_same_for_every_arm_and_a_later_look_continues():
    none, oracle = suite("none").load_samples(None), suite("oracle").load_samples(None)
    assert [s.id for s in none] == [s.id for s in oracle]
    assert [s.data.spec for s in none] == [s.data.spec for s in oracle]
    assert all(CELL_ID.match(s.id) for s in none)
    assert {s.id.split("/")[0] for s in none} == {"validation", "heldout_rule"}
    assert all(s.data.spec["perturbation"] for s in none if s.id.startswith("heldout_rule"))
    later = suite("none", first_seed=3, seeds=2).load_samples(None)
    assert [s.id for s in later][:2] == ["validation/seed003", "validation/seed004"]
    with pytest.raises(HarnessError, match="heldout_website"):
        suite("none", settings="heldout_website").load_samples(None)
    with pytest.raises(HarnessError, match="trained_adapter"):
        suite("trained").check_ready()


def scores(arm: str) -> list[PlannerScores]:
    s = suite(arm, settings="validation", seeds=4, seed=3)
    out = []
    for sample in s.load_samples(None):
        outcome = asyncio.run(s.run_sample(sample, SampleContext({}, 0, {})))
        out.append(PlannerScores.model_validate(outcome.scores))
    return out


def test_the_oracle_arm_avoids_the_irreversible_failures_react_makes_on_the_same_episodes():
    none, oracle = scores("none"), scores("oracle")
    assert sum(s.irreversible_failure for s in none) > 0
    assert sum(s.irreversible_failure for s in oracle) == 0
    assert sum(s.success for s in oracle) > sum(s.success for s in none)
    assert all(s.world_model_tokens == 0 and (s.tokens_per_success is None) == (s.success == 0) for s in none)
    assert sum(s.wm_calls for s in oracle) > 0 and sum(s.wm_calls for s in none) == 0
    # The registered tokens protocol: the proposer's charge every episode, plus the world model's.
    for s in none + oracle:
        assert s.proposer_tokens is not None and s.proposer_tokens > 100 * s.steps
        assert s.tokens_per_success is None or s.tokens_per_success == s.proposer_tokens + s.world_model_tokens


def test_household_plays_in_the_suite_and_has_no_heldout_rule() -> None:
    s = suite("oracle", worlds="household", settings="validation", seeds=1, max_steps=3)
    (sample,) = s.load_samples(None)
    assert sample.data.world == "household"
    outcome = asyncio.run(s.run_sample(sample, SampleContext({}, 0, {})))
    scores = PlannerScores.model_validate(outcome.scores)
    assert scores.steps == 3 and scores.wm_calls > 0 and scores.proposer_tokens
    with pytest.raises(HarnessError, match="household has no rule perturbation"):
        suite("none", worlds="household", settings="heldout_rule").load_samples(None)
    with pytest.raises(HarnessError, match="worlds science: not a world the planner check plays"):
        suite("none", worlds="minigrid,science").load_samples(None)


def test_a_claim_check_is_runs_of_the_suite_resumable_and_its_verdict_comes_from_their_records(tmp_path, monkeypatch):
    from importlib.metadata import EntryPoint

    import harness.suite
    from environments.cdwm.claim_check import run_claim, verdict_from_runs
    from environments.cdwm.claims import CLAIMS
    from harness.claims import Condition, SeedPlan
    from harness.runner import AsyncioExecutor

    installed = harness.suite.available_suites()  # the suite's entry point needs a reinstall; stand in for it
    monkeypatch.setattr(harness.suite, "available_suites", lambda: installed | {"cdwm-planner": EntryPoint(
        name="cdwm-planner", value="environments.cdwm.planner_suite:CdwmPlannerSuite", group="harness.suites")})
    # A toy copy of the irreversible claim: the oracle against ReAct, one look of 3 episodes.
    toy = CLAIMS[1].model_copy(update={"plan": SeedPlan(looks=(3,)), "arms": ("oracle", "none"), "conditions": [
        Condition(metric="irreversible_failure", setting="validation", arm="oracle", versus="none", op="<",
                  threshold=0.0, refute_at=0.0)]})
    options = {"worlds": "minigrid", "seed": 3, "irreversible": 0.3}
    lines: list[str] = []
    verdict = run_claim(toy, tmp_path, options, AsyncioExecutor, log=lines.append)
    assert verdict.seeds == 3 and verdict.conditions[0].n == 3 and set(verdict.runs) == {"oracle", "none"}
    assert verdict.conditions[0].estimate is not None and verdict.conditions[0].estimate < 0
    again = run_claim(toy, tmp_path, options, AsyncioExecutor, log=lines.append)
    assert sum("reusing finished run" in line for line in lines) == 2
    ids = [i for arm in verdict.runs.values() for i in arm]
    assert verdict_from_runs(toy, tmp_path, ids).conditions == again.conditions == verdict.conditions
