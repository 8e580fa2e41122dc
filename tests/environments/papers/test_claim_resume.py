"""A real claim check (`papers.bai_posterior_tracking`, 3 seeds: deterministic cells of ~0.5 s) killed with SIGKILL
mid-way and started again redoes no finished cell and gives the verdict of an uninterrupted check;
the verdict recomputed from the records (`harness papers verdict RUN...`) equals the one printed;
and on the Ray executor it is the same verdict as on asyncio."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import REPO, harness_cli

TASK = ["papers", "check", "bai_posterior_tracking", "--seeds", "3"]
SAME = ("verdict", "conditions", "looks", "seeds", "summaries", "criterion_hash")


def lines(run_dir: Path) -> dict[str, list[str]]:
    return {p.parent.name: p.read_text().splitlines() for p in run_dir.glob("*/samples.jsonl")}


def saved(run_dir: Path) -> dict:
    return json.loads((run_dir / "claims" / "papers.bai_posterior_tracking.json").read_text())


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory) -> Path:
    """One uninterrupted check on the asyncio executor, the reference both tests compare with."""
    fresh = tmp_path_factory.mktemp("fresh")
    done = harness_cli(*TASK, "--run-dir", str(fresh))
    assert done.returncode == 0, done.stderr[-2000:]
    return fresh


def test_a_killed_check_resumes_without_redoing_a_cell(tmp_path, uninterrupted):
    killed = tmp_path / "killed"
    proc = subprocess.Popen([sys.executable, "-m", "harness.cli", *TASK, "--run-dir", str(killed)], cwd=REPO,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=os.environ | {"OMP_NUM_THREADS": "1"})
    deadline = time.monotonic() + 120
    while sum(len(v) for v in lines(killed).values()) < 2 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    before = lines(killed)
    assert 2 <= sum(len(v) for v in before.values()) < 15, "the kill must land mid-check"
    assert not (killed / "claims").exists()
    done = harness_cli(*TASK, "--run-dir", str(killed))
    assert done.returncode == 0, done.stderr
    assert "resuming" in done.stdout
    after = lines(killed)
    for run_id, kept in before.items():
        assert after[run_id][: len(kept)] == kept  # the finished cells' records are untouched ...
        ids = [json.loads(line)["sample_id"] for line in after[run_id]]
        assert len(ids) == len(set(ids))  # ... and none was recorded twice
    assert sum(len(v) for v in after.values()) == 15  # 5 sampling rules x 1 instance x 3 seeds
    assert {k: saved(killed)[k] for k in SAME} == {k: saved(uninterrupted)[k] for k in SAME}
    run_ids = [r for ids in saved(killed)["runs"].values() for r in ids]
    again = harness_cli("papers", "verdict", *run_ids, "--run-dir", str(killed))
    assert again.returncode == 0 and f"verdict: {saved(killed)['verdict']}" in again.stdout
    others = [r for arm, ids in saved(killed)["runs"].items() if arm != "track_and_stop" for r in ids]
    short = harness_cli("papers", "verdict", *others, "--run-dir", str(killed))
    assert short.returncode == 1 and "lack arm 'track_and_stop'" in short.stderr + short.stdout


@pytest.mark.ray
def test_the_ray_executor_gives_the_same_verdict(tmp_path, uninterrupted):
    on_ray = harness_cli(*TASK, "--run-dir", str(tmp_path / "ray"), "--executor", "ray", timeout=900)
    assert on_ray.returncode == 0, on_ray.stderr[-2000:]
    assert {k: saved(tmp_path / "ray")[k] for k in SAME} == {k: saved(uninterrupted)[k] for k in SAME}
