"""`harness score`: re-scoring a run's transcripts without calling the model under test.

Real runs against a loopback OpenAI-compatible server (instant canned replies): the judge server
says PASS for everything, a second one FAIL. The server's request counter shows who was called.
"""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

from harness.loopback import running_server
from harness.run_folder import RunFolder, RunIndex
from tests.conftest import JUDGE_PASS, harness_cli

JUDGE_FAIL = '{"score": "FAIL", "rationale": "it ignored the anchor", "evidence": "FAIL"}'


def _served(url: str) -> int:
    with urllib.request.urlopen(url.removesuffix("/v1") + "/stats") as resp:
        return json.load(resp)["served"]


def _runs(run_dir: Path) -> dict[str, RunFolder]:
    return {p.name: RunFolder(run_dir, p.name) for p in run_dir.iterdir() if (p / "manifest.json").exists()}


def _new_run(run_dir: Path, before: set[str]) -> RunFolder:
    [new] = set(_runs(run_dir)) - before
    return RunFolder(run_dir, new)


def _metrics(folder: RunFolder) -> dict:
    return {k: m.model_dump() for k, m in folder.read_summary().metrics.items()}


def test_rescore_with_own_judge_and_cache_reproduces_metrics_without_any_call(tmp_path):
    run_dir = tmp_path / "runs"
    with running_server("--echo", "--reply", JUDGE_PASS) as url:
        proc = harness_cli("eval", "--suite", "proact", "--model", "openai/a", "--judge-model", "openai/j",
                           "--limit", "2", "--base-url", url, "--run-dir", str(run_dir), "--no-progress")
        assert proc.returncode == 0, proc.stderr
        [source] = _runs(run_dir).values()
        served = _served(url)
        proc = harness_cli("score", source.run_id, "--run-dir", str(run_dir), "--no-progress")
        assert proc.returncode == 0, proc.stderr
        assert _served(url) == served, "a re-score with the source's judge and cache calls nothing"
    rescored = _new_run(run_dir, {source.run_id})
    assert _metrics(rescored) == _metrics(source)
    manifest = rescored.read_manifest()
    assert manifest.source_run == source.run_id and manifest.scorer == "judge" and manifest.format == 2
    records = rescored.read_samples()
    assert all(c.cached and c.role == "judge" for r in records for c in r.calls)
    src = {r.key: r for r in source.read_samples()}
    assert all(r.output == src[r.key].output and r.scores == src[r.key].scores for r in records)


def test_rescore_with_another_judge_calls_only_the_judge_and_is_its_own_leaderboard_row(tmp_path):
    run_dir = tmp_path / "runs"
    with running_server("--echo", "--reply", JUDGE_PASS) as url:
        proc = harness_cli("eval", "--suite", "proact", "--model", "openai/a", "--judge-model", "openai/j",
                           "--limit", "2", "--base-url", url, "--run-dir", str(run_dir), "--no-progress")
        assert proc.returncode == 0, proc.stderr
    [source] = _runs(run_dir).values()
    triggers = sum(len(r.scores["triggers"]) for r in source.read_samples())
    with running_server("--echo", "--reply", JUDGE_FAIL) as url:
        proc = harness_cli("score", source.run_id, "--judge-model", "openai/k", "--base-url", url,
                           "--run-dir", str(run_dir), "--no-progress")
        assert proc.returncode == 0, proc.stderr
        assert _served(url) == triggers, "exactly one judge call per trigger; the model under test is never called"
    rescored = _new_run(run_dir, {source.run_id})
    assert _metrics(source)["proactivity_overall_pass_rate"]["value"] == 1.0
    assert _metrics(rescored)["proactivity_overall_pass_rate"]["value"] == 0.0
    assert rescored.read_manifest().config.models == {"assistant": "openai/a", "judge": "openai/k"}
    index = RunIndex(run_dir)
    judges = {r["run_id"]: r["judge"] for r in index.runs()}
    index.close()
    assert judges == {source.run_id: "openai/j", rescored.run_id: "openai/k"}
    board = tmp_path / "board.csv"
    proc = harness_cli("leaderboard", "export", "--suite", "proact", "--run-dir", str(run_dir), "--format", "csv",
                       "--out", str(board))
    assert proc.returncode == 0, proc.stderr
    rows = board.read_text().splitlines()
    assert len(rows) == 3 and any("openai/k" in r for r in rows[1:]) and any("openai/j" in r for r in rows[1:])


def test_rescoring_an_interrupted_run_and_resuming_the_rescore(tmp_path):
    """Only finished samples are re-scored; a killed re-score resumes and ends with each once."""
    run_dir = tmp_path / "runs"
    with running_server("--echo", "--reply", JUDGE_PASS) as url:
        proc = harness_cli("eval", "--suite", "proact", "--model", "openai/a", "--judge-model", "openai/j",
                           "--limit", "3", "--base-url", url, "--run-dir", str(run_dir), "--no-progress")
        assert proc.returncode == 0, proc.stderr
    [source] = _runs(run_dir).values()
    lines = source.samples_path.read_text().splitlines(keepends=True)
    source.samples_path.write_text("".join(lines[:2]))  # as if the run had been killed after two samples
    with running_server("--echo", "--reply", JUDGE_FAIL) as url:
        args = ("score", source.run_id, "--judge-model", "openai/k", "--base-url", url, "--run-dir", str(run_dir),
                "--no-progress")
        assert harness_cli(*args).returncode == 0
        rescored = _new_run(run_dir, {source.run_id})
        first = rescored.read_samples()
        assert len(first) == 2
        # Drop one re-scored sample and mark the re-score interrupted: the same command resumes it.
        rescored.samples_path.write_text(rescored.samples_path.read_text().splitlines(keepends=True)[0])
        manifest = rescored.read_manifest()
        manifest.status = "interrupted"
        rescored.write_manifest(manifest)
        index = RunIndex(run_dir)
        index.record(manifest, None, 1, 0)
        index.close()
        proc = harness_cli(*args)
        assert proc.returncode == 0, proc.stderr
    assert set(_runs(run_dir)) == {source.run_id, rescored.run_id}, "resumed, not a third run"
    again = rescored.read_samples()
    assert sorted(r.key for r in again) == sorted(r.key for r in first)
    assert len(rescored.samples_path.read_text().splitlines()) == 2


def test_score_bad_input_is_one_line(tmp_path):
    run_dir = tmp_path / "runs"
    with running_server("--echo", "--reply", JUDGE_PASS) as url:
        proc = harness_cli("eval", "--suite", "cdwm-household", "--model", "openai/a", "--limit", "1",
                           "--suite-option", "max_steps=1", "--base-url", url, "--run-dir", str(run_dir), "--no-progress")
        assert proc.returncode == 0, proc.stderr
    [source] = _runs(run_dir).values()
    cases = [
        (("score", "no-such-run"), "no-such-run"),
        (("score", source.run_id, "--scorer", "nope"), "--scorer nope"),
        (("score", source.run_id, "--judge-model", "openai/k"), "calls no judge"),
    ]
    for args, must in cases:
        proc = harness_cli(*args, "--run-dir", str(run_dir), "--no-progress")
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
        lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1 and must in lines[0], proc.stderr
