"""An environment's processes die with their Ray worker (marker `ray`, about 30 s): a `cdwm-web`
run on a one-worker-node cluster holds a real Chromium when the node's raylet is SIGKILLed; the
browser and Playwright's driver must be gone soon after, not left re-parented to init. (Seen
here: the browser goes even without `processes.guard_descendants`, since it exits when its pipe to
the driver closes; the watchdog covers descendants that do not watch their parent, see
test_process_guard.py.)"""

import os
import signal
import subprocess
import sys
import time
import uuid

import psutil
import pytest

from harness.loopback import running_server
from tests.conftest import REPO
from tests.harness.ray_cluster import LocalCluster

pytestmark = pytest.mark.ray

MARK = "HARNESS_TEST_CLUSTER_MARK"
BROWSER_NAMES = ("chrom", "headless", "node")  # Chromium's processes and Playwright's Node driver


def _environment_processes(mark: str) -> list[psutil.Process]:
    """This test's browser processes: they inherit the mark from the worker node's environment."""
    found = []
    for proc in psutil.process_iter(["name"]):
        try:
            if not any(n in (proc.info["name"] or "").lower() for n in BROWSER_NAMES):
                continue
            if proc.status() != psutil.STATUS_ZOMBIE and proc.environ().get(MARK) == mark:
                found.append(proc)
        except psutil.Error:
            continue
    return found


def _wait(predicate, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while not (value := predicate()):
        assert time.monotonic() < deadline, what
        time.sleep(0.1)
    return value


def test_a_killed_nodes_browser_does_not_outlive_its_worker(tmp_path):
    mark = uuid.uuid4().hex
    cluster = LocalCluster()
    cluster.env = cluster.env | {MARK: mark}
    driver = None
    try:
        with running_server("--echo", "--reply", '{"action": "noop"}', "--delay-s", "0.5") as url:
            cluster.start(workers=("w1",))
            args = [sys.executable, "-m", "harness.cli", "eval", "--suite", "cdwm-web", "--model", "openai/a",
                    "--judge-model", "openai/j", "--base-url", url, "--limit", "4", "--max-connections", "1", "--run-dir", str(tmp_path / "runs"),
                    "--no-progress", "--executor", "ray", "--ray-address", cluster.address]
            driver = subprocess.Popen(args, cwd=REPO, env=cluster.env, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL)
            def browsers() -> list[psutil.Process]:
                # a driver that exited (bad input, say) starts no browser: say so now, not after 180 s
                assert driver.poll() is None, f"the driver exited with {driver.returncode} before a browser started"
                return [p for p in _environment_processes(mark) if "node" not in p.info["name"].lower()]

            _wait(browsers, 180, "no browser started on the worker node")
            os.kill(cluster.raylet_pid("w1"), signal.SIGKILL)
            # the worker exits once its raylet is gone; its watchdog then kills what it started
            _wait(lambda: not _environment_processes(mark), 30,
                  f"browser processes outlived their worker: {[p.info for p in _environment_processes(mark)]}")
    finally:
        if driver is not None:
            driver.kill()
            driver.wait()
        left = cluster.stop()
        for proc in _environment_processes(mark):  # never leave a browser behind, even on failure
            proc.kill()
    assert left == [], f"cluster processes left: {left}"
