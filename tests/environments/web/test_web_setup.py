"""The web suite on a machine without its browser: one error line naming the command that installs
it, before any model is called (no `browser` mark: these tests need no Chromium, they pretend it
is gone by pointing the environment's path at a file that does not exist)."""

from __future__ import annotations

import json
import sys
import urllib.request
from pathlib import Path

import pytest

from environments.web import browser_env
from environments.web.browser_env import INSTALL_CHROMIUM, WebEnvironment, browser_missing
from harness.loopback import running_server


def test_eval_without_the_browser_stops_before_any_call(monkeypatch, tmp_path):
    from typer.testing import CliRunner

    from harness.cli import app

    gone = tmp_path / "no-chromium"
    monkeypatch.setattr(browser_env, "CHROMIUM", gone)
    runs = tmp_path / "runs"
    with running_server("--echo") as url:
        result = CliRunner().invoke(app, ["eval", "--suite", "cdwm-web", "--agent", "react", "--model", "openai/policy",
                                          "--judge-model", "openai/judge", "--base-url", url, "--limit", "1",
                                          "--run-dir", str(runs), "--no-progress"])
        with urllib.request.urlopen(url.removesuffix("/v1") + "/stats") as resp:
            stats = json.load(resp)
    said = " ".join(result.output.split())  # rich wraps long lines
    assert result.exit_code == 2, result.output
    assert f"cdwm-web: the web environment drives Debian's Chromium at {gone}" in said
    assert INSTALL_CHROMIUM in said and "Traceback" not in said
    assert stats["requests"] == 0  # no model was asked anything
    assert not runs.exists() or not any(runs.iterdir())  # and no run was started


def test_browser_missing_names_the_fix(tmp_path):
    not_executable = tmp_path / "chromium"
    not_executable.write_text("#!/bin/sh\n")
    for path in (tmp_path / "absent", not_executable, tmp_path):
        problem = browser_missing(path)
        assert problem is not None and str(path) in problem and INSTALL_CHROMIUM in problem
    assert browser_missing(Path(sys.executable)) is None  # an executable file, Playwright here


def test_environment_start_says_the_same(tmp_path):
    """`harness bench web` and direct users start the environment without the suite's check."""
    env = WebEnvironment(world=False, chromium=tmp_path / "absent")
    with env, pytest.raises(RuntimeError) as raised:
        env.start()
    assert INSTALL_CHROMIUM in str(raised.value) and str(tmp_path / "absent") in str(raised.value)
