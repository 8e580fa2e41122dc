"""Both CDWM-protocol agents with the real embedded model (SmolLM2-135M on CPU) on the test shop,
through the real runner: the episode completes whatever the small model writes (its poor actions
and JSON are counted, not raised), and the records hold what the metrics need."""

from __future__ import annotations

import asyncio

import pytest

from harness.records import RunConfig
from harness.runner import execute, plan_run
from tests.environments.cdwm.fixtures import ShopSuite
from tests.environments.cdwm.shop import TASKS


@pytest.mark.slow
@pytest.mark.parametrize("agent", ["react", "cdwm"])
def test_embedded_model_runs_an_episode(tmp_path, monkeypatch, agent):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # faster on this 2-core machine when it is shared
    suite = ShopSuite(agent=agent, tasks=TASKS[:1], max_steps=2, candidates=2, horizon=2,
                      policy_max_tokens=48, wm_max_tokens=96, parse_attempts=2, wm_attempts=1)
    config = RunConfig(suite=suite.name, models={r: "local/smollm2-135m" for r in suite.roles},
                       suite_options={"agent": agent}, sample_timeout_s=900)
    plan = plan_run(config, tmp_path / "runs", suite=suite)
    summary = asyncio.run(execute(plan, show_progress=False))
    (rec,) = plan.folder.read_samples()
    assert rec.status == "ok", rec.errors
    steps = rec.output["steps"]
    assert 1 <= len(steps) <= 2 and rec.output["ended_by"] in ("done", "step_limit", "no_action", "abstain")
    assert rec.scores["tokens"] > 0 and rec.usage["assistant"].calls >= 1
    assert summary.metrics["success_rate"].n == 1 and 0.0 <= summary.metrics["reward"].value <= 1.0
    if agent == "cdwm":
        asked = [c for s in steps for c in s["candidates"]]
        assert asked and all(c["source"] in ("world_model", "mask", "invalid") for c in asked)
        # Every world-model ask is accounted for: a valid prediction or a counted invalid reply.
        assert rec.scores["wm_replies"] == sum(c["invalid_outputs"] + (c["source"] == "world_model")
                                               for s in steps for c in s["candidates"] + [c["lookahead"] for c in s["candidates"] if c.get("lookahead")]
                                               if c["source"] != "mask")
