"""The web world in the planner check: the registered worlds (minigrid, household, web) give every
claim's settings their episodes, web among them, and a web episode plays in suite `cdwm-planner`
against the real browser and server (its oracle asks the replay twin; no model loaded)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from environments.cdwm.claim_check import arm_config, check_adapters, settings_read
from environments.cdwm.claims import CLAIMS, PROTOCOL
from environments.cdwm.generative_model import GENERATIVE_FORMAT
from environments.cdwm.planner_suite import CdwmPlannerSuite, PlannerOptions, PlannerScores
from environments.web.browser_env import browser_missing
from harness.errors import HarnessError
from harness.suite import SampleContext


def test_the_registered_worlds_give_every_claims_settings_web_episodes_included() -> None:
    for claim in CLAIMS:
        config = arm_config(claim, "none", 0, 6, {"worlds": PROTOCOL["worlds"]})
        samples = CdwmPlannerSuite(PlannerOptions.model_validate(config.suite_options)).load_samples(None)
        worlds: dict[str, set[str]] = {}
        for sample in samples:
            worlds.setdefault(sample.id.split("/")[0], set()).add(sample.data.world)
        assert set(worlds) == set(settings_read(claim))
        # The web world's held-out task type is its held-out website; household has no rule perturbation.
        expected = {"validation": {"minigrid", "household", "web"}, "heldout_website": {"web"},
                    "heldout_rule": {"minigrid", "web"}, "heldout_task_type": {"minigrid", "household"}}
        assert worlds == {setting: expected[setting] for setting in worlds}, claim.id
        website = [s.data.spec for s in samples if s.id.startswith("heldout_website")]
        assert all(str(spec["task_id"]).startswith("mail_") for spec in website)  # the held-out site


def test_an_adapter_arm_that_cannot_serve_a_registered_world_is_named_before_any_run(tmp_path: Path) -> None:
    folder = tmp_path / "gen"
    folder.mkdir()
    classes = ["minigrid/forward", "web/click"]
    (folder / "cdwm_train.json").write_text(json.dumps({"format": GENERATIVE_FORMAT, "classes": classes}))
    check_adapters({"worlds": "minigrid", "generative_adapter": str(folder)}, ["none", "generative"])
    with pytest.raises(HarnessError, match="world 'web' has no observation reader"):
        check_adapters({"worlds": "minigrid,web", "generative_adapter": str(folder)}, ["none", "generative"])


@pytest.mark.skipif(browser_missing() is not None, reason=str(browser_missing()))
def test_a_web_episode_plays_in_the_suite_with_the_oracle_on_its_twin() -> None:
    options = {"worlds": "web", "settings": "heldout_rule", "seeds": 1, "max_steps": 3, "world_model": "oracle"}
    s = CdwmPlannerSuite(PlannerOptions.model_validate(options))
    (sample,) = s.load_samples(None)
    assert sample.data.world == "web" and sample.data.spec["perturbation"]
    outcome = asyncio.run(s.run_sample(sample, SampleContext({}, 0, {})))
    scores = PlannerScores.model_validate(outcome.scores)
    assert 1 <= scores.steps <= 3 and scores.wm_calls > 0 and scores.proposer_tokens
    assert scores.irreversible_failure == 0.0
