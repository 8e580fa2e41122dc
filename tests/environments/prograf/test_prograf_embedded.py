"""Suite `prograf` on the embedded model through the runner (`plan_run` + `run_eval`, what
`harness eval --suite prograf --model local/smollm2-135m --limit 4` does once the suite is
registered). The 135M model is not expected to draw anything that passes: the test is that the
real model path completes and every sample is scored, failures recorded as patterns."""

from __future__ import annotations

import pytest

from environments.prograf.suite import ProGrafOptions, ProGrafSuite
from harness.records import RunConfig
from harness.run_folder import RunFolder
from harness.runner import plan_run, run_eval
from harness.suite import parse_options

pytestmark = pytest.mark.slow


def test_the_embedded_model_runs_the_suite(tmp_path):
    suite = ProGrafSuite(parse_options("prograf", ProGrafOptions, {}))
    config = RunConfig(suite="prograf", models={"assistant": "local/smollm2-135m"}, limit=4, max_tokens=160)
    plan = plan_run(config, tmp_path, suite=suite)
    summary = run_eval(plan, show_progress=False)
    records = RunFolder(tmp_path, summary.run_id).read_samples()
    assert len(records) == 4 and all(r.status == "ok" for r in records)
    assert all(r.output["reply"] is not None and r.calls for r in records)
    assert all(len(r.scores["points"]) >= 1 and "passed" in r.scores for r in records)
    assert summary.metrics["pass_rate"].n == 4 and 0.0 <= summary.metrics["pass_rate"].value <= 1.0
    failed = [p for r in records for p in r.scores["points"] if not p["passed"]]
    assert all(p.get("pattern") for p in failed)
