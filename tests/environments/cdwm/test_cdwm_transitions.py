"""CDWM runs through the real runner (loopback HTTP model), the transitions export as a Hugging
Face dataset (round trip with load_from_disk), and the `--agent` / `--world-model` flags."""

from __future__ import annotations

import asyncio
import json

import datasets
import pytest

from environments.cdwm.deltas import Delta
from harness.loopback import running_server
from harness.records import RunConfig
from harness.run_folder import RunFolder
from harness.runner import execute, plan_run
from tests.environments.cdwm.fixtures import ShopSuite
from tests.conftest import harness_cli

# On a product page `click [10]` adds to the cart: every step changes the ledger.
TASKS = [{"task_id": f"cart-{i}", "intent": "Add the blue mug to the cart", "kind": "cart", "product": 1,
          "start": "product:1", "required_irreversible": []} for i in range(2)]
REPLY = ('Thought: add it\nAction: click [10]\n{"attributes": [{"entity": "cart:1", "attribute": "item_count", "after": 1}], '
         '"reversible": true, "confidence": 0.9}')


def run_shop(tmp_path, url, agent):
    suite = ShopSuite(agent=agent, tasks=TASKS, max_steps=2, horizon=1)
    models = {r: "openai/scripted" for r in suite.roles}
    config = RunConfig(suite=suite.name, models=models, base_url=url, suite_options={"agent": agent})
    plan = plan_run(config, tmp_path / "runs", suite=suite)
    summary = asyncio.run(execute(plan, show_progress=False))
    return plan.folder, summary


def test_runs_record_steps_and_export_as_a_dataset(tmp_path):
    with running_server("--echo", "--reply", REPLY) as url:
        folder, summary = run_shop(tmp_path, url, "cdwm")
    assert summary.counts["samples"] == 2 and summary.counts["sample_errors"] == 0
    assert summary.metrics["success_rate"].value == 1.0 and summary.metrics["irreversible_failure_rate"].value == 0.0
    # Predicted item_count 1; the second add makes it 2: F1 1 then 0 on attributes, per episode.
    assert summary.metrics["delta_f1"].value == pytest.approx((2 / 3 + 0) / 2)
    assert summary.metrics["tokens_per_success"].value > 0
    records = RunFolder(tmp_path / "runs", folder.run_id).read_samples()
    assert {"assistant", "world_model"} <= set(records[0].usage)

    out = tmp_path / "export"
    res = harness_cli("cdwm", "export-transitions", "--run", folder.run_id, "--run-dir", str(tmp_path / "runs"), "--out", str(out))
    assert res.returncode == 0, res.stderr
    assert "4 transitions" in res.stdout
    ds = datasets.load_from_disk(str(out / "dataset"))
    assert len(ds) == 4 and set(ds["action"]) == {"click [10]"}
    first = ds.filter(lambda r: r["sample_id"] == "cart-0" and r["step"] == 1)[0]
    delta = Delta.model_validate_json(first["delta"])
    assert delta.attributes[0].before == 1 and delta.attributes[0].after == 2  # the ledger's truth, not the prediction
    assert "attr | cart:1 | item_count | 2" in first["facts"]
    assert json.loads(first["predicted_delta"])["confidence"] == 0.9 and first["prediction_source"] == "world_model"
    assert first["observation"].startswith("URL: http://shop.test/product:1")
    lines = (out / "transitions.jsonl").read_text().splitlines()
    assert len(lines) == 4 and json.loads(lines[0])["action"] == "click [10]"
    # A run folder path works too; a bad run id is one clear error.
    assert harness_cli("cdwm", "export-transitions", "--run", str(folder.path), "--out", str(tmp_path / "e2")).returncode == 0
    bad = harness_cli("cdwm", "export-transitions", "--run", "nope", "--run-dir", str(tmp_path / "runs"), "--out", str(out))
    assert bad.returncode == 2 and "--run nope: no run with that id" in bad.stderr


def test_react_run_has_no_world_model_role(tmp_path):
    with running_server("--echo", "--reply", REPLY) as url:
        folder, summary = run_shop(tmp_path, url, "react")
    assert summary.metrics["success_rate"].value == 1.0 and summary.metrics["delta_f1"].value is None
    manifest = folder.read_manifest()
    assert set(manifest.config.models) == {"assistant"} and manifest.config.suite_options == {"agent": "react"}


def test_agent_and_world_model_flags_reject_suites_without_them():
    res = harness_cli("eval", "--suite", "proact", "--agent", "cdwm", "--limit", "1")
    assert res.returncode == 2 and "--suite-option agent: suite 'proact' has no such option" in res.stderr
    res = harness_cli("eval", "--suite", "proact", "--world-model", "openai/x", "--limit", "1")
    assert res.returncode == 2 and "--world-model: suite 'proact' with this agent asks no world model" in res.stderr
