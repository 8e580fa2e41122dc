"""No browser or server process outlives the web environment: after a failing episode, Ctrl-C,
or a SIGKILL of the process that hosts it. (Its own module: Playwright's sync API allows one
instance per thread, and test_web_browser.py keeps one open for its whole module.)"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from environments.web.browser_env import WebEnvironment
from environments.web.replay import resolve
from environments.web.tasks import load_tasks
from tests.conftest import REPO, default_sigint

pytestmark = pytest.mark.browser  # without Chromium: a failure naming the fix (tests/conftest.py), never a skip

TASKS = {t["task_id"]: t for t in load_tasks()}


def _alive(procs: list[psutil.Process]) -> list[int]:
    return [p.pid for p in procs if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]


def _browser_and_server(env: WebEnvironment) -> list[psutil.Process]:
    return [*env._browser_procs, psutil.Process(env.world.proc.pid)]


def test_no_browser_or_server_survives_a_failing_episode():
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    with pytest.raises(ZeroDivisionError):
        with WebEnvironment() as env:
            obs = env.reset(TASKS["mail_014"])
            env.step(resolve("type [@textbox 'To'] [dana@work.test] [0]", obs.text))
            procs = _browser_and_server(env)
            profile = env._profile
            assert len(_alive(procs)) >= 3 and profile
            raise ZeroDivisionError("the agent crashes mid-episode")
    assert _alive(procs) == []
    left = {p.pid for p in psutil.Process().children(recursive=True)} - before
    assert left == set(), [psutil.Process(p).cmdline()[:2] for p in left]
    assert not [p for p in psutil.process_iter(["cmdline"]) if profile in (p.info["cmdline"] or [])]
    with pytest.raises(RuntimeError, match="was closed"):
        env.reset(TASKS["mail_014"])


CHILD = """
import json, sys, time
from environments.web.browser_env import WebEnvironment
from environments.web.tasks import load_tasks
env = WebEnvironment()
with env:
    env.reset(load_tasks()[0])
    print(json.dumps({"pids": [p.pid for p in env._browser_procs] + [env.world.proc.pid], "profile": env._profile}), flush=True)
    time.sleep(120)
"""


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL])
def test_ctrl_c_or_kill_of_the_host_process_leaves_nothing_behind(sig):
    """Ctrl-C runs close(); after a SIGKILL, the server exits with its parent and Chromium with
    its Playwright driver (whose pipe closes)."""
    child = subprocess.Popen([sys.executable, "-c", CHILD], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, env=os.environ | {"PYTHONPATH": str(REPO)}, preexec_fn=default_sigint)
    try:
        info = json.loads(child.stdout.readline())
        procs = [psutil.Process(pid) for pid in info["pids"]]
        child.send_signal(sig)
        child.wait(timeout=30)
        deadline = time.monotonic() + 15
        while _alive(procs) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _alive(procs) == []
        assert not [p for p in psutil.process_iter(["cmdline"]) if info["profile"] in (p.info["cmdline"] or [])]
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
