"""Suite `adv0` end to end through the real `harness eval`: real highway-env episodes, the LLM driver
answering through a loopback OpenAI-compatible server (a fixed reply: the test is about our
plumbing, not a model), the scorer's ground truth, a filmstrip per crash, re-scoring, the viewer
and bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.loopback import running_server
from tests.conftest import harness_cli

KEEP_LANE = '{"action": "IDLE"}'


def _records(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "samples.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def adv0_run(tmp_path_factory) -> Path:
    run_dir = tmp_path_factory.mktemp("adv0-runs")
    with running_server("--echo", "--reply", KEEP_LANE) as url:
        proc = harness_cli("eval", "--suite", "adv0", "--model", "openai/driver", "--base-url", url,
                           "--suite-option", "families=highway,merge", "--suite-option", "seeds=2",
                           "--suite-option", "attacker=scripted", "--run-dir", str(run_dir), "--no-progress")
    assert proc.returncode == 0, proc.stderr[-3000:]
    (run,) = [p for p in run_dir.iterdir() if p.is_dir()]
    return run


def test_every_episode_is_recorded_with_its_ground_truth(adv0_run):
    records = _records(adv0_run)
    assert sorted(r["sample_id"] for r in records) == sorted(
        ["highway/seed1000000", "merge/seed1000000", "highway/seed1000001", "merge/seed1000001"])
    for r in records:
        assert r["status"] == "ok", r["errors"]
        ep, scores = r["output"]["episode"], r["scores"]
        assert ep["attack"]["manoeuvre"] == "cut_in_brake"  # the scripted attacker
        assert set(ep["actions"]) == {"IDLE"} and ep["invalid_actions"] == 0
        assert len(ep["ttc"]) == ep["steps"] and ep["min_ttc"] == pytest.approx(min(ep["ttc"] + [10.0]), abs=1e-6) \
            or ep["crashed"]
        # A crash has a fault from geometry, with the rule and the raw geometry kept for the audit;
        # an attacker-at-fault crash is never a defender failure.
        assert scores["crashed"] == ep["crashed"] == (ep["collision"] is not None)
        if ep["crashed"]:
            assert ep["collision"]["rule"] and ep["collision"]["geometry"]
            assert scores["defender_failure"] == (ep["collision"]["fault"] in ("defender", "shared"))
            assert scores["attacker_fault"] == (ep["collision"]["fault"] == "attacker")
            assert not (scores["defender_failure"] and scores["attacker_fault"])
        # A filmstrip exactly for the crashes (a base64 PNG the viewer shows).
        pictures = r["output"]["pictures"]
        assert len(pictures) == int(ep["crashed"])
        assert all(p["png"].startswith("iVBORw0KGgo") for p in pictures)


def test_summary_has_every_metric_with_a_ci_and_a_family_breakdown(adv0_run):
    summary = json.loads((adv0_run / "summary.json").read_text())
    metrics = summary["metrics"]
    for name in ("crash_rate", "defender_failure_rate", "attacker_fault_share", "near_miss_rate", "median_min_ttc",
                 "return", "mean_speed", "distance_m", "action_invalid_rate", "failure_clusters", "failure_entropy"):
        assert name in metrics, name
    assert metrics["crash_rate"]["n"] == 4 and metrics["action_invalid_rate"]["value"] == 0.0
    assert set(summary["breakdowns"]) == {"highway", "merge"}


def test_rescoring_reproduces_the_metrics_without_a_model(adv0_run):
    proc = harness_cli("score", adv0_run.name, "--run-dir", str(adv0_run.parent), "--no-progress")
    assert proc.returncode == 0, proc.stderr[-2000:]
    runs = [p for p in adv0_run.parent.iterdir() if p.is_dir() and p != adv0_run]
    (rescored,) = runs
    assert json.loads((rescored / "summary.json").read_text())["metrics"] == \
        json.loads((adv0_run / "summary.json").read_text())["metrics"]


@pytest.mark.parametrize("option, needle", [
    ("families=highway,moon", "unknown scenario family moon"),
    ("attacker=alien", "attacker"),
    ("seeds=0", "seeds"),
])
def test_bad_options_are_one_line(option, needle, tmp_path):
    proc = harness_cli("eval", "--suite", "adv0", "--model", "openai/x", "--base-url", "http://127.0.0.1:9",
                       "--suite-option", option, "--run-dir", str(tmp_path), "--no-progress")
    assert proc.returncode != 0 and needle in proc.stderr and "Traceback" not in proc.stderr


def test_a_trained_attacker_needs_its_state(tmp_path):
    proc = harness_cli("eval", "--suite", "adv0", "--model", "openai/x", "--base-url", "http://127.0.0.1:9",
                       "--suite-option", "attacker=adv0", "--limit", "1", "--run-dir", str(tmp_path), "--no-progress")
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert "attacker_state" in proc.stderr + proc.stdout
