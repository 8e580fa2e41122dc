"""Native tool calls end to end: the ReAct agent drives the real web world (headless Chromium)
with `--action-format tools`, through the `openai/` provider, against the project's own
OpenAI-compatible server serving the embedded model (SmolLM2-135M) with constrained tool calls."""

from __future__ import annotations

import re

import pytest

from environments.web.actions import ACTION_PATTERN
from harness.loopback import running_server
from harness.run_folder import RunFolder
from tests.conftest import harness_cli

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_react_drives_the_web_world_through_native_tool_calls(tmp_path):
    runs = tmp_path / "runs"
    with running_server("--model", "local/smollm2-135m") as url:
        res = harness_cli("eval", "--suite", "cdwm-web", "--agent", "react", "--action-format", "tools",
                          "--model", "openai/smollm2-135m", "--judge-model", "openai/smollm2-135m", "--base-url", url,
                          "--suite-option", "max_steps=2", "--limit", "1", "--run-dir", str(runs), "--no-progress")
    assert res.returncode == 0, res.stderr
    run_id = next(p.name for p in runs.iterdir() if p.name.startswith("cdwm-web-"))
    folder = RunFolder(runs, run_id)
    assert folder.read_manifest().config.suite_options["action_format"] == "tools"
    (rec,) = folder.read_samples()
    assert rec.status == "ok", rec.errors
    policy_calls = [c for c in rec.calls if c.role == "assistant"]
    assert policy_calls and all(c.constrained_by == "provider" for c in policy_calls)
    assert all(c.tool_calls == 1 for c in policy_calls if c.finish_reason == "tool_calls")
    steps = rec.output["steps"]
    assert steps, "the agent took no step"
    # Every action the model chose is in the web world's action syntax (the tool's schema), and no
    # reply failed to name one: the constraint, not luck, made the calls usable.
    assert all(re.fullmatch(ACTION_PATTERN, s["action"]) for s in steps), [s["action"] for s in steps]
    assert all(s["invalid_outputs"] == 0 for s in steps)


@pytest.mark.vllm
def test_react_drives_the_web_world_through_vllm_tool_calls(tmp_path):
    """The same, with the model on vLLM's CPU build in process (`make test-vllm`, `.venv-vllm`)."""
    pytest.importorskip("vllm")
    runs = tmp_path / "runs"
    res = harness_cli("eval", "--suite", "cdwm-web", "--agent", "react", "--action-format", "tools",
                      "--model", "vllm/smollm2-135m", "--judge-model", "vllm/smollm2-135m",
                      "--suite-option", "max_steps=2", "--limit", "1", "--run-dir", str(runs), "--no-progress")
    assert res.returncode == 0, res.stderr
    run_id = next(p.name for p in runs.iterdir() if p.name.startswith("cdwm-web-"))
    (rec,) = RunFolder(runs, run_id).read_samples()
    assert rec.status == "ok", rec.errors
    policy_calls = [c for c in rec.calls if c.role == "assistant"]
    assert policy_calls and all(c.constrained_by == "provider" for c in policy_calls)
    assert any(c.tool_calls == 1 for c in policy_calls)
    steps = rec.output["steps"]
    assert steps and all(re.fullmatch(ACTION_PATTERN, s["action"]) for s in steps), [s["action"] for s in steps]
    assert all(s["invalid_outputs"] == 0 for s in steps)
