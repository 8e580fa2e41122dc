"""Inspect eval logs: `harness export inspect` read back by inspect_ai's own reader, and
`harness score --from-inspect` scoring a log's samples with this harness's judge.

Real runs of `proact` against loopback servers (instant canned replies): the source run's judge says
PASS to everything, the re-scoring judge FAIL, so a score that was copied from the log instead of
judged again would show. The server's request counter shows who was called.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from importlib.util import find_spec
from pathlib import Path

import pytest

from harness.loopback import running_server
from harness.run_folder import RunFolder
from tests.conftest import JUDGE_PASS, REPO, harness_cli

JUDGE_FAIL = '{"score": "FAIL", "rationale": "it ignored the anchor", "evidence": "FAIL"}'
needs_inspect = pytest.mark.skipif(find_spec("inspect_ai") is None,
                                   reason="inspect_ai is not installed: pip install -e '.[inspect]' (`make install` does)")


def _served(url: str) -> int:
    with urllib.request.urlopen(url.removesuffix("/v1") + "/stats") as resp:
        return json.load(resp)["served"]


def _run_ids(run_dir: Path) -> set[str]:
    return {p.name for p in run_dir.iterdir() if (p / "manifest.json").exists()} if run_dir.exists() else set()


def _cli_new_run(run_dir: Path, *args: str) -> RunFolder:
    before = _run_ids(run_dir)
    proc = harness_cli(*args, "--run-dir", str(run_dir), "--no-progress")
    assert proc.returncode == 0, proc.stderr
    new = sorted(_run_ids(run_dir) - before)
    assert new, proc.stderr
    # `score --from-inspect` adds the imported transcripts and the score run; the score run names its source
    scored = [RunFolder(run_dir, r) for r in new if RunFolder(run_dir, r).read_manifest().source_run]
    return scored[0] if scored else RunFolder(run_dir, new[0])


def _scores(folder: RunFolder) -> dict:
    return {r.key: r.scores for r in folder.read_samples()}


def _one_line_error(proc: subprocess.CompletedProcess, *must: str) -> str:
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, proc.stderr
    for text in must:
        assert text in lines[0], lines[0]
    return lines[0]


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    """A proact run (2 dialogues x 2 epochs, judge PASS) and its export as .eval and .json."""
    root = tmp_path_factory.mktemp("inspect")
    run_dir = root / "runs"
    with running_server("--echo", "--reply", JUDGE_PASS) as url:
        folder = _cli_new_run(run_dir, "eval", "--suite", "proact", "--model", "openai/a", "--judge-model", "openai/j",
                              "--limit", "2", "--epochs", "2", "--base-url", url)
    logs = {}
    if find_spec("inspect_ai") is not None:
        for suffix in (".eval", ".json"):
            out = root / "logs" / f"run{suffix}"
            proc = harness_cli("export", "inspect", folder.run_id, "--out", str(out), "--run-dir", str(run_dir))
            assert proc.returncode == 0, proc.stderr
            assert "4 samples" in proc.stdout
            logs[suffix] = out
    return root, run_dir, folder, logs


@needs_inspect
@pytest.mark.parametrize("suffix", [".eval", ".json"])
def test_export_is_read_back_by_inspect_with_the_runs_samples_scores_and_usage(source, suffix):
    from inspect_ai.log import read_eval_log

    _, _, folder, logs = source
    log = read_eval_log(str(logs[suffix]))
    manifest, summary = folder.read_manifest(), folder.read_summary()
    records = {r.key: r for r in folder.read_samples()}
    assert log.status == "success"
    assert (log.eval.task, log.eval.model, log.eval.created) == ("proact", "openai/a", manifest.started)
    assert log.eval.model_roles["judge"].model == "openai/j"
    assert log.eval.config.epochs == 2 and log.eval.task_version == manifest.suite_version
    assert log.eval.metadata["harness"]["config_hash"] == manifest.config_hash

    assert len(log.samples) == len(records) == 4
    for s in log.samples:
        rec = records[(s.id, s.epoch - 1)]  # Inspect counts epochs from 1
        [score] = s.scores.values()
        assert score.metadata["harness_scores"] == rec.scores
        labels = [t["label"] for t in rec.scores["triggers"]]
        assert score.value["pass"] == labels.count("PASS") == len(labels) > 0
        assert score.value["weighted_score"] == 1.0
        assert score.answer.count("PASS") == len(labels) and "it acted on the anchor" in score.explanation
        # Every trigger turn: the user's message, then the reply of the model under test.
        turns = rec.output["turn_records"]
        assert [m.role for m in s.messages] == ["user", "assistant"] * len(turns)
        assert [m.text for m in s.messages if m.role == "assistant"] == [t["assistant_response"] for t in turns]
        assert all(m.source == "generate" and m.metadata["turn"] == t["turn"]
                   for m, t in zip((m for m in s.messages if m.role == "assistant"), turns))
        assert s.role_usage["judge"].input_tokens == rec.usage["judge"].prompt_tokens > 0
        assert s.metadata["harness"]["seed"] == rec.seed

    for role, model in (("assistant", "openai/a"), ("judge", "openai/j")):
        tokens = sum(r.usage[role].prompt_tokens for r in records.values())
        assert log.stats.role_usage[role].input_tokens == log.stats.model_usage[model].input_tokens == tokens
    metrics = log.results.scores[0].metrics
    headline = summary.metrics[summary.headline_metric]
    assert metrics[summary.headline_metric].value == headline.value
    assert metrics[summary.headline_metric].metadata["ci_low"] == headline.ci_low


@needs_inspect
def test_score_from_inspect_matches_the_harness_rescore_and_calls_only_the_judge(source):
    root, run_dir, folder, logs = source
    with running_server("--echo", "--reply", JUDGE_FAIL) as url:
        own = _cli_new_run(run_dir, "score", folder.run_id, "--judge-model", "openai/k", "--base-url", url)
    triggers = sum(len(s["triggers"]) for s in _scores(own).values())
    fresh = root / "fresh"  # no call cache: every judge call is made, and counted
    with running_server("--echo", "--reply", JUDGE_FAIL) as url:
        args = ("score", "--from-inspect", str(logs[".eval"]), "--judge-model", "openai/k", "--base-url", url)
        imported = _cli_new_run(fresh, *args)
        assert _served(url) == triggers, "one judge call per trigger; the model under test is never called"
        again = harness_cli(*args, "--run-dir", str(fresh), "--no-progress")
        assert again.returncode == 0 and "already imported" in again.stderr, again.stderr
        assert _served(url) == triggers, "the second score of the same log is answered from the cache"
    assert len([r for r in _run_ids(fresh) if "-inspect-" in r]) == 1, "the log is imported once"
    assert _scores(imported) == _scores(own)
    assert all(t["label"] == "FAIL" for s in _scores(imported).values() for t in s["triggers"])
    assert {k: m.value for k, m in imported.read_summary().metrics.items()} == \
        {k: m.value for k, m in own.read_summary().metrics.items()}
    manifest = imported.read_manifest()
    assert manifest.config.models == {"assistant": "openai/a", "judge": "openai/k"}
    assert "-inspect-" in manifest.source_run


@needs_inspect
def test_a_log_from_elsewhere_is_read_by_position_and_needs_a_named_judge(source):
    """A log written by another tool: no harness metadata, the whole dialogue turn by turn (the
    curated replies between the triggers), its user messages as attachments, a model name of a
    provider the harness lacks."""
    from inspect_ai.log import EvalLog, read_eval_log, write_eval_log
    from inspect_ai.model import ChatMessageAssistant, ChatMessageUser

    from harness.suite import get_suite

    root, run_dir, folder, logs = source
    rows = {s.id: s.data for s in get_suite("proact").load_samples(None)}
    log: EvalLog = read_eval_log(str(logs[".json"]))
    log.eval.metadata = None
    log.eval.model = "anthropic/claude-x"
    for s in log.samples:
        replies = {m.metadata["turn"]: m.text for m in s.messages if m.role == "assistant"}
        s.metadata, s.scores = {}, None
        s.messages = []
        for t in sorted(rows[s.id].turn_records, key=lambda t: t.turn)[:max(replies)]:
            s.messages += [ChatMessageUser(content=t.user_message),
                           ChatMessageAssistant(content=replies.get(t.turn, t.assistant_response))]
        # As Inspect itself logs long texts: in the sample's attachments, the message naming one.
        s.attachments = {f"user{i}": m.text for i, m in enumerate(s.messages) if m.role == "user"}
        for i, m in enumerate(s.messages):
            if m.role == "user":
                m.content = f"attachment://user{i}"
    foreign = root / "foreign.json"
    write_eval_log(log, str(foreign))

    fresh = root / "foreign-runs"
    with running_server("--echo", "--reply", JUDGE_FAIL) as url:
        proc = harness_cli("score", "--from-inspect", str(foreign), "--base-url", url, "--run-dir", str(fresh),
                           "--no-progress")
        _one_line_error(proc, "judge", "--role judge=")
        assert _served(url) == 0
        scored = _cli_new_run(fresh, "score", "--from-inspect", str(foreign), "--judge-model", "openai/k",
                              "--base-url", url)
    with running_server("--echo", "--reply", JUDGE_FAIL) as url:
        own = _cli_new_run(run_dir, "score", folder.run_id, "--judge-model", "openai/k", "--base-url", url)
    assert _scores(scored) == _scores(own)
    assert scored.read_manifest().config.models["assistant"] == "litellm/anthropic/claude-x"
    # The imported transcripts are those the harness's own solver wrote.
    [imported] = [RunFolder(fresh, r) for r in _run_ids(fresh) if "-inspect-" in r]
    assert {r.key: r.output for r in imported.read_samples()} == {r.key: r.output for r in folder.read_samples()}


@needs_inspect
def test_bad_logs_are_one_error_naming_the_file_and_the_fix(source, tmp_path):
    from inspect_ai.log import read_eval_log, write_eval_log

    _, run_dir, folder, logs = source
    newer = tmp_path / "newer.json"
    newer.write_text(json.dumps(json.loads(logs[".json"].read_text()) | {"version": 99}))
    garbage = tmp_path / "notes.json"
    garbage.write_text("these are not the logs you are looking for")
    other = read_eval_log(str(logs[".json"]))
    for s in other.samples:
        s.id = f"elsewhere-{s.id}"
    strangers = tmp_path / "strangers.json"
    write_eval_log(other, str(strangers))
    shifted = read_eval_log(str(logs[".json"]))
    for s in shifted.samples:
        s.messages[0].content = "a user message no corpus row has"
    moved = tmp_path / "moved.json"
    write_eval_log(shifted, str(moved))

    cases = [
        (("--from-inspect", str(tmp_path / "missing.eval")), ("missing.eval", "no such file")),
        (("--from-inspect", str(newer)), ("newer.json", "version 99", "upgrade inspect_ai")),
        (("--from-inspect", str(garbage)), ("notes.json", "not an Inspect eval log")),
        (("--from-inspect", str(logs[".eval"]), "--suite", "cdwm-household"), ("cannot read Inspect samples", "proact")),
        (("--from-inspect", str(strangers)), ("strangers.json", "not in the proact corpus", "--corpus")),
        (("--from-inspect", str(moved)), ("moved.json", "another corpus", "--corpus")),
        (("--from-inspect", str(logs[".eval"]), folder.run_id), ("not both",)),
        (("--suite", "proact", folder.run_id), ("--from-inspect",)),
    ]
    for args, must in cases:
        proc = harness_cli("score", *args, "--judge-model", "openai/k", "--run-dir", str(tmp_path / "runs"),
                           "--no-progress")
        _one_line_error(proc, *must)
    assert not _run_ids(tmp_path / "runs"), "bad input writes no run"

    for args, must in [((folder.run_id, "--out", str(tmp_path / "x.txt")), ("x.txt", ".eval")),
                       (("no-such-run", "--out", str(tmp_path / "x.eval")), ("no-such-run", "--run-dir"))]:
        _one_line_error(harness_cli("export", "inspect", *args, "--run-dir", str(run_dir)), *must)


def test_without_inspect_ai_both_commands_name_the_extra(source, tmp_path):
    """Runs whether or not inspect_ai is installed: the child process is made unable to import it."""
    _, run_dir, folder, _ = source
    hide = ("import sys; sys.modules['inspect_ai'] = None; from harness.cli import main; "
            "sys.argv = ['harness', *sys.argv[1:]]; main()")
    log = tmp_path / "some.eval"
    log.write_bytes(b"PK")
    for args in (("export", "inspect", folder.run_id, "--out", str(tmp_path / "x.eval"), "--run-dir", str(run_dir)),
                 ("score", "--from-inspect", str(log), "--run-dir", str(tmp_path / "runs"))):
        proc = subprocess.run([sys.executable, "-c", hide, *args], capture_output=True, text=True, cwd=REPO,
                              env=os.environ, timeout=300)
        _one_line_error(proc, "`inspect` extra", "pip install 'inspect_ai==")
    assert not (tmp_path / "x.eval").exists()
