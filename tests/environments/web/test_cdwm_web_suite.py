"""Suite `cdwm-web` end to end through the real `harness eval`: the real web world, a real
headless Chromium, the WebArena evaluator, with a loopback model (instant, deterministic)."""

from __future__ import annotations

import json

import pytest

from harness.loopback import running_server
from harness.run_folder import RunFolder
from tests.conftest import harness_cli

pytestmark = pytest.mark.browser

# The policy reads the action; the world model (same endpoint) reads the JSON. On mail_000 ("Who
# sent me the email about dinner on Saturday?") the answer is right at once.
REPLY = 'Thought: Sam wrote it\nAction: stop [Sam Lee]\n{"reversible": true, "confidence": 0.9}'


def test_cdwm_agent_on_the_web_world(tmp_path):
    runs = tmp_path / "runs"
    with running_server("--echo", "--reply", REPLY) as url:
        res = harness_cli("eval", "--suite", "cdwm-web", "--agent", "cdwm", "--model", "openai/policy",
                          "--world-model", "openai/wm", "--judge-model", "openai/judge", "--base-url", url,
                          "--limit", "1", "--run-dir", str(runs), "--no-progress")
    assert res.returncode == 0, res.stderr
    run_id = next(p.name for p in runs.iterdir() if p.name.startswith("cdwm-web-"))
    folder = RunFolder(runs, run_id)
    manifest = folder.read_manifest()
    assert manifest.config.models == {"assistant": "openai/policy", "world_model": "openai/wm", "judge": "openai/judge"}
    assert manifest.config.suite_options["agent"] == "cdwm"
    (rec,) = folder.read_samples()
    assert rec.status == "ok", rec.errors
    assert rec.sample_id == "mail_000" and rec.scores["success"] == 1.0
    (step,) = rec.output["steps"]
    assert step["action"] == "stop [Sam Lee]" and step["prediction_source"] == "mask"  # no world-model call for stop
    assert step["observation"].startswith("URL: http://127.0.0.1:") and "Dinner on Saturday?" in step["observation"]
    assert set(rec.usage) == {"assistant"}
    summary = json.loads((folder.path / "summary.json").read_text())
    assert summary["metrics"]["success_rate"]["value"] == 1.0 and summary["headline_metric"] == "success_rate"

    res = harness_cli("cdwm", "export-transitions", "--run", run_id, "--run-dir", str(runs), "--out", str(tmp_path / "t"))
    assert res.returncode == 0 and "1 transitions" in res.stdout


def test_bad_corpus_is_one_clear_error(tmp_path):
    bad = tmp_path / "tasks.json"
    bad.write_text(json.dumps([{"task_id": 1, "intent": "x"}]))
    res = harness_cli("eval", "--suite", "cdwm-web", "--agent", "react", "--corpus", str(bad), "--run-dir", str(tmp_path))
    assert res.returncode == 2 and "--corpus:" in res.stderr and "missing 'start_url'" in res.stderr
