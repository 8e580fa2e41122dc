"""The runner against real loopback HTTP servers: resume after SIGKILL, cache, retries."""

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from harness.loopback import running_server
from harness.run_folder import RunFolder, RunIndex
from tests.conftest import JUDGE_PASS, OWN_PROACT, REPO, default_sigint, harness_cli


def _stats(url: str) -> dict:
    with urllib.request.urlopen(url.removesuffix("/v1") + "/stats") as resp:
        return json.load(resp)


def _only_run(run_dir: Path) -> RunFolder:
    [path] = [p for p in run_dir.iterdir() if p.is_dir()]
    return RunFolder(run_dir, path.name)


def _summary(run_dir: Path) -> dict:
    return json.loads((_only_run(run_dir).summary_path).read_text())


def test_resume_after_sigkill_finishes_every_sample_exactly_once(tmp_path):
    run_dir = tmp_path / "runs"
    args = ["eval", "--suite", "proact", "--model", "openai/a", "--judge-model", "openai/j", "--epochs", "4", "--limit", "8",
            "--max-connections", "2", "--run-dir", str(run_dir), "--no-progress"]
    with running_server("--echo", "--reply", JUDGE_PASS, "--delay-s", "0.15") as url:
        proc = subprocess.Popen([sys.executable, "-m", "harness.cli", *args, "--base-url", url], cwd=REPO,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 120
        samples = None
        while time.monotonic() < deadline:
            found = list(run_dir.glob("*/samples.jsonl"))
            if found and len(found[0].read_text().splitlines()) >= 5:
                samples = found[0]
                break
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        assert samples is not None, "run never wrote 5 samples"
        kept = samples.read_bytes()
        n_before = kept.count(b"\n")
        assert 5 <= n_before < 32
        # What a kill in the middle of a write leaves: half a line at the end.
        with open(samples, "ab") as fh:
            fh.write(b'{"sample_id": "torn", "epoch": 0, "se')
        folder = _only_run(run_dir)
        assert json.loads(folder.manifest_path.read_text())["status"] == "running"

        done = harness_cli(*args, "--base-url", url, "--resume", folder.run_id)
        assert done.returncode == 0, done.stderr
        assert f"{n_before} samples done" in done.stderr

    data = samples.read_bytes()
    assert data.startswith(kept), "lines written before the kill must survive unchanged"
    keys = [(r["sample_id"], r["epoch"]) for r in map(json.loads, data.decode().splitlines())]
    assert len(keys) == 32 and len(set(keys)) == 32
    assert {e for _, e in keys} == {0, 1, 2, 3}
    summary = _summary(run_dir)
    assert summary["counts"]["samples"] == 32
    first8 = [json.loads(ln) for ln in OWN_PROACT.read_text().splitlines()[:8]]
    assert summary["counts"]["triggers_pass"] == 4 * sum(len(r["trigger_points"]) for r in first8)
    assert json.loads(folder.manifest_path.read_text())["status"] == "complete"


def test_rerun_of_unfinished_config_resumes_without_flag(tmp_path):
    run_dir = tmp_path / "runs"
    with running_server("--echo", "--reply", JUDGE_PASS) as url:
        args = ["eval", "--suite", "proact", "--model", "openai/a", "--judge-model", "openai/j", "--limit", "3",
                "--base-url", url, "--run-dir", str(run_dir), "--no-progress"]
        assert harness_cli(*args).returncode == 0
        folder = _only_run(run_dir)
        # Simulate a run that died after two samples.
        lines = folder.samples_path.read_text().splitlines(keepends=True)
        folder.samples_path.write_text("".join(lines[:2]))
        manifest = json.loads(folder.manifest_path.read_text())
        manifest["status"] = "interrupted"
        folder.manifest_path.write_text(json.dumps(manifest))
        index = RunIndex(run_dir)
        index.db.execute("UPDATE runs SET status='interrupted'")
        index.db.commit()
        index.close()
        again = harness_cli(*args)
        assert again.returncode == 0, again.stderr
        assert f"resuming {folder.run_id}: 2 samples done, 1 to go" in again.stderr
    assert len([p for p in run_dir.iterdir() if p.is_dir()]) == 1
    assert len(folder.samples_path.read_text().splitlines()) == 3


def test_cache_makes_a_rerun_identical_without_calling_the_model(tmp_path):
    run_dir = tmp_path / "runs"
    with running_server("--echo", "--reply", JUDGE_PASS) as url:
        args = ["eval", "--suite", "proact", "--model", "openai/a", "--judge-model", "openai/j", "--limit", "3",
                "--seed", "7", "--base-url", url, "--run-dir", str(run_dir), "--no-progress"]
        assert harness_cli(*args).returncode == 0
        served = _stats(url)["served"]
        assert served > 0
        assert harness_cli(*args).returncode == 0
        assert _stats(url)["served"] == served, "the second run must not call the model"
        runs = sorted(p for p in run_dir.iterdir() if p.is_dir())
        assert len(runs) == 2
        first, second = (sorted(RunFolder(run_dir, p.name).read_samples(), key=lambda r: r.key) for p in runs)

        def answers(records):  # token_usage differs by design: cached calls consume no tokens
            return [{k: v for k, v in r.output.items() if k != "token_usage"} for r in records]

        assert answers(first) == answers(second)
        assert all(r.usage["assistant"].prompt_tokens == 0 for r in second)
        assert all(c.cached for r in second for c in r.calls)
        summary = json.loads((runs[1] / "summary.json").read_text())
        assert all(s["calls"] == 0 and s["cache_hits"] > 0 for s in summary["calls"].values())
        # --no-cache calls the model again; a different seed misses the cache.
        assert harness_cli(*args, "--no-cache").returncode == 0
        assert _stats(url)["served"] == 2 * served


def test_retries_ride_out_429_500_and_timeouts(tmp_path):
    run_dir = tmp_path / "runs"
    # Every distinct request meets a hang, 500, 503 and 429 before it is answered: four retries
    # per call are needed and suffice. The 429 comes last: it halves the shared concurrency limit,
    # and hangs at limit 1 would run one after another (correct back-off, slow test).
    faults = ("--faults", "timeout,500,503,429", "--per-request", "--hang-s", "5")
    with running_server("--echo", "--reply", JUDGE_PASS, *faults) as url:
        proc = harness_cli("eval", "--suite", "proact", "--model", "openai/a", "--judge-model", "openai/j",
                           "--limit", "2", "--call-timeout", "1", "--max-retries", "4", "--max-connections", "4",
                           "--base-url", url, "--run-dir", str(run_dir), "--no-progress")
        assert proc.returncode == 0, proc.stderr
        faulted = _stats(url)["faulted"]
    summary = _summary(run_dir)
    assert summary["counts"]["sample_errors"] == 0
    assert summary["counts"]["triggers_pass"] == sum(len(r.scores["triggers"]) for r in _only_run(run_dir).read_samples())
    calls = summary["calls"]
    retries = sum(c["retries"] for c in calls.values())
    kinds = {k for c in calls.values() for k in c["errors_by_kind"]}
    n_calls = sum(len(r.calls) for r in _only_run(run_dir).read_samples())
    assert retries == sum(faulted.values()) == 4 * n_calls
    assert {"RetryableModelError", "TimeoutError"} <= kinds
    # Each call's attempts are on its record.
    assert {c.attempts for r in _only_run(run_dir).read_samples() for c in r.calls} == {5}


def test_exhausted_retries_are_recorded_on_the_sample_and_the_run_goes_on(tmp_path):
    run_dir = tmp_path / "runs"
    with running_server("--echo", "--faults", "500") as url:
        proc = harness_cli("eval", "--suite", "proact", "--model", "openai/a", "--judge-model", "openai/j",
                           "--limit", "2", "--max-retries", "1", "--base-url", url, "--run-dir", str(run_dir),
                           "--no-progress")
    assert proc.returncode == 0, proc.stderr
    summary = _summary(run_dir)
    assert summary["counts"]["samples"] == 2 and summary["counts"]["sample_errors"] == 2
    n_triggers = summary["counts"]["triggers_error"]
    assert n_triggers > 0 and summary["counts"]["triggers_pass"] == 0
    assert summary["metrics"]["proactivity_overall_pass_rate"]["value"] is None
    rec = _only_run(run_dir).read_samples()[0]
    assert rec.status == "error" and "gave up after 2 attempts" in rec.errors[0].message and rec.errors[0].kind == "suite"
    assert rec.scores["verdicts"][0]["evaluation_result"]["status"] == "ERROR"


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_or_sigterm_leaves_an_interrupted_run_that_resumes(tmp_path, sig):
    run_dir = tmp_path / "runs"
    # One connection and a 50 ms delay: the signal lands after the first record, long before the last.
    with running_server("--echo", "--reply", JUDGE_PASS, "--delay-s", "0.05") as url:
        args = ["eval", "--suite", "proact", "--model", "openai/a", "--judge-model", "openai/j", "--epochs", "3", "--limit", "4",
                "--max-connections", "1", "--base-url", url, "--run-dir", str(run_dir), "--no-progress"]
        proc = subprocess.Popen([sys.executable, "-m", "harness.cli", *args], cwd=REPO, preexec_fn=default_sigint,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not list(run_dir.glob("*/samples.jsonl")):
            time.sleep(0.05)
        proc.send_signal(sig)
        _, stderr = proc.communicate(timeout=60)
        assert proc.returncode == 130, stderr
        folder = _only_run(run_dir)
        assert f"--resume {folder.run_id}" in stderr
        manifest = json.loads(folder.manifest_path.read_text())
        assert manifest["status"] == "interrupted" and manifest["ended"]
        n = len(folder.read_samples())
        assert 1 <= n < 12
        assert json.loads(folder.summary_path.read_text())["counts"]["samples"] == n
        done = harness_cli(*args, "--resume", folder.run_id)
        assert done.returncode == 0, done.stderr
    keys = [r.key for r in folder.read_samples()]
    assert len(keys) == 12 == len(set(keys))


def test_judge_panel_and_epochs_are_recorded(tmp_path):
    """Two judges (reached through two providers) and two epochs: both verdicts are kept, the
    vote is recorded, the leaderboard names the panel, and the epoch spread is reported."""
    run_dir = tmp_path / "runs"
    with running_server("--echo", "--reply", JUDGE_PASS) as url:
        proc = harness_cli("eval", "--suite", "proact", "--model", "openai/a", "--judge-model", "openai/j",
                           "--judge-model", "litellm/openai/k", "--limit", "2", "--epochs", "2",
                           "--base-url", url, "--run-dir", str(run_dir), "--no-progress")
    assert proc.returncode == 0, proc.stderr
    summary = _summary(run_dir)
    assert summary["epochs"]["proactivity_overall_pass_rate"]["values"] == [1.0, 1.0]
    assert summary["epochs"]["proactivity_overall_pass_rate"]["std"] == 0.0
    records = _only_run(run_dir).read_samples()
    assert len(records) == 4
    result = records[0].scores["verdicts"][0]["evaluation_result"]
    assert [j["model"] for j in result["judges"]] == ["openai/j", "litellm/openai/k"]
    assert result["votes"] == {"PASS": 2}
    assert {"judge", "judge_2"} <= set(records[0].usage)
    manifest = json.loads(_only_run(run_dir).manifest_path.read_text())
    assert manifest["config"]["roles"]["judge_2"]["model"] == "litellm/openai/k"
    listing = harness_cli("runs", "--run-dir", str(run_dir))
    assert "openai/j+litellm/openai/k" in listing.stdout
