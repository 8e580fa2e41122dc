"""One logical run across a real Ray cluster on this machine (marker `ray`, about a minute): a
head and two worker nodes as separate processes on 127.0.0.1; the driver is SIGKILLed mid-run
and resumed, then one worker node's raylet is SIGKILLed mid-run; every sample ends recorded
exactly once, and no process of the cluster is left."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from harness.loopback import running_server
from harness.records import now_iso
from harness.run_folder import RunFolder
from tests.conftest import JUDGE_PASS, REPO
from tests.harness.ray_cluster import LocalCluster

pytestmark = pytest.mark.ray


def _lines(run_dir) -> int:
    found = list(run_dir.glob("*/samples.jsonl"))
    return len(found[0].read_bytes().splitlines()) if found else 0


def _wait_for_lines(run_dir, n: int, proc: subprocess.Popen, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while _lines(run_dir) < n:
        assert proc.poll() is None, f"driver ended early: {proc.communicate()[1][-2000:]}"
        assert time.monotonic() < deadline, f"fewer than {n} samples after {timeout_s}s"
        time.sleep(0.05)


def _finished_on(folder: RunFolder) -> set[str]:
    path = folder.path / "attempts.jsonl"
    if not path.exists():
        return set()
    events = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return {e["worker"] for e in events if e["event"] == "finished"}


def _wait_for_node(folder: RunFolder, node: str, proc: subprocess.Popen, timeout_s: float = 120) -> None:
    """Until a chunk has finished on `node`: on a loaded machine a worker node's first Python worker
    can take long to start, and killing a node that has run nothing would test nothing."""
    deadline = time.monotonic() + timeout_s
    while node not in _finished_on(folder):
        assert proc.poll() is None, f"the run ended before node {node} finished a chunk: {_finished_on(folder)}"
        assert time.monotonic() < deadline, f"no chunk finished on node {node} after {timeout_s}s"
        time.sleep(0.05)


def test_run_spread_over_worker_nodes_survives_a_killed_driver_and_a_killed_node(tmp_path):
    run_dir = tmp_path / "runs"
    cluster = LocalCluster()
    try:
        with running_server("--echo", "--reply", JUDGE_PASS, "--delay-s", "0.1") as url:
            cluster.start()
            args = [sys.executable, "-m", "harness.cli", "eval", "--suite", "proact", "--model", "openai/a",
                    "--judge-model", "openai/j", "--epochs", "3", "--limit", "8", "--max-connections", "2",
                    "--base-url", url, "--run-dir", str(run_dir), "--no-progress",
                    "--executor", "ray", "--ray-address", cluster.address]
            driver = subprocess.Popen(args, cwd=REPO, env=cluster.env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                      text=True)
            _wait_for_lines(run_dir, 3, driver)
            driver.send_signal(signal.SIGKILL)
            driver.wait()
            before = _lines(run_dir)
            assert 3 <= before < 24
            [folder_path] = [p for p in run_dir.iterdir() if p.is_dir()]
            folder = RunFolder(run_dir, folder_path.name)

            driver = subprocess.Popen([*args, "--resume", folder.run_id], cwd=REPO, env=cluster.env,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            _wait_for_lines(run_dir, before + 2, driver)
            killed = cluster.node_id("w1")
            _wait_for_node(folder, killed, driver)
            os.kill(cluster.raylet_pid("w1"), signal.SIGKILL)
            killed_at = now_iso()
            _, stderr = driver.communicate(timeout=240)
            assert driver.returncode == 0, stderr[-3000:]
            assert f"{before} samples done" in stderr

        keys = [(r["sample_id"], r["epoch"]) for r in map(json.loads, folder.samples_path.read_text().splitlines())]
        assert len(keys) == 24 == len(set(keys))
        assert json.loads(folder.manifest_path.read_text())["status"] == "complete"
        journal = [json.loads(line) for line in (folder.path / "attempts.jsonl").read_text().splitlines()]
        assert journal[0]["event"] == "dispatch"
        finished = [j for j in journal if j["event"] == "finished"]
        workers = {j["worker"] for j in finished}
        assert len(workers) == 2 and killed in workers, f"the run should have used both worker nodes: {workers}"
        # After the kill (second resolution, so strictly later) only the surviving node answers.
        after = [j["worker"] for j in finished if j["at"] > killed_at]
        assert after and killed not in after
    finally:
        left = cluster.stop()
    assert left == [], f"cluster processes left: {left}"
