"""Bad input: one clear error line naming the input and the fix, non-zero exit, nothing lost."""

import json

import pytest

from tests.conftest import OWN_PROACT, harness_cli


def _error_line(proc) -> str:
    assert proc.returncode != 0, proc.stdout + proc.stderr
    lines = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("error: ")
    assert "Traceback" not in proc.stderr
    return lines[0]


@pytest.fixture(scope="module")
def recorded_run(tmp_path_factory):
    """A finished run in a run dir; every bad command below must leave it untouched."""
    from harness.loopback import running_server

    run_dir = tmp_path_factory.mktemp("runs")
    with running_server("--echo") as url:
        proc = harness_cli("eval", "--suite", "proact", "--model", "openai/a", "--judge-model", "openai/j",
                           "--base-url", url, "--limit", "2", "--run-dir", str(run_dir), "--no-progress")
    assert proc.returncode == 0, proc.stderr
    return run_dir


def _snapshot(run_dir):
    return {p.relative_to(run_dir): p.read_bytes() for p in run_dir.rglob("*") if p.is_file() and p.suffix != ".sqlite-shm"
            and "sqlite" not in p.suffix}


@pytest.mark.parametrize(
    "args, must_name, must_fix",
    [
        (["--suite", "nosuch"], "'nosuch'", "harness list"),
        (["--suite", "proact", "--model", "acme/gpt"], "'acme'", "use one of"),
        (["--suite", "proact", "--model", "gpt-4o"], "'gpt-4o'", "provider/name"),
        (["--suite", "proact", "--judge-model", "openai"], "--judge-model 'openai'", "provider/name"),
        (["--suite", "proact", "--model", "local/llama-9000"], "local/llama-9000", "local/smollm2-135m"),
        (["--suite", "proact", "--corpus", "missing/corpus.jsonl"], "missing/corpus.jsonl", "--corpus PATH"),
        (["--suite", "proact", "--model", "openai/x", "--base-url", "http://127.0.0.1:9/v1"], "http://127.0.0.1:9/v1", "start the server"),
        (["--resume", "no-such-run"], "'no-such-run'", "harness runs"),
        (["--suite", "proact-live", "--suite-option", "planner_atempts=1"], "planner_atempts", "planner_attempts=3"),
        (["--suite", "proact-live", "--suite-option", "planner_attempts=one"], "planner_attempts=one", "expected a int"),
        (["--suite", "proact-live", "--suite-option", "planner_attempts"], "'planner_attempts'", "KEY=VALUE"),
        (["--suite", "proact", "--model", "local/smollm2-135m@/no/such/adapter"], "/no/such/adapter", "does not exist"),
    ],
)
def test_bad_input_is_one_clear_line_and_loses_nothing(recorded_run, args, must_name, must_fix):
    before = _snapshot(recorded_run)
    line = _error_line(harness_cli("eval", *args, "--run-dir", str(recorded_run), "--no-progress"))
    assert must_name in line and must_fix in line, line
    assert _snapshot(recorded_run) == before


def test_corpus_row_missing_a_field(recorded_run, tmp_path):
    rows = [json.loads(ln) for ln in OWN_PROACT.read_text().splitlines()]
    del rows[2]["turn_records"][0]["user_message"]
    bad = tmp_path / "bad.jsonl"
    bad.write_text("".join(json.dumps(r) + "\n" for r in rows))
    before = _snapshot(recorded_run)
    line = _error_line(harness_cli("eval", "--suite", "proact", "--corpus", str(bad), "--run-dir", str(recorded_run)))
    assert f"{bad}:3" in line and "turn_records[0].user_message" in line
    assert _snapshot(recorded_run) == before


def test_export_of_unknown_suite_and_empty_run_dir(recorded_run, tmp_path):
    line = _error_line(harness_cli("leaderboard", "export", "--suite", "nosuch", "--run-dir", str(recorded_run)))
    assert "'nosuch'" in line
    line = _error_line(harness_cli("leaderboard", "export", "--suite", "proact", "--run-dir", str(tmp_path)))
    assert "no runs" in line


def test_missing_api_key_for_remote_openai(recorded_run):
    proc = harness_cli("eval", "--suite", "proact", "--model", "openai/gpt-4o-mini", "--run-dir", str(recorded_run),
                       env={"OPENAI_API_KEY": ""})
    line = _error_line(proc)
    assert "OPENAI_API_KEY" in line or "unreachable" in line


def test_suite_options_reach_the_suite_and_the_config_hash(tmp_path):
    """Options are converted to the constructor's types, built into the suite and hashed: two runs
    that differ only in an option are different runs."""
    from harness.records import RunConfig
    from harness.runner import plan_run
    from harness.suite import coerce_suite_options, get_suite, parse_suite_options

    options = parse_suite_options(["planner_attempts=1", "user_max_tokens=32"])
    suite = get_suite("proact-live", options)
    assert (suite.planner_attempts, suite.user_config.max_tokens) == (1, 32)
    typed = coerce_suite_options("proact-live", type(suite), options)
    assert typed == {"planner_attempts": 1, "user_max_tokens": 32}
    plans = [plan_run(RunConfig(suite="proact-live", models={r: "local/smollm2-135m" for r in suite.roles},
                                limit=1, suite_options=opts), tmp_path) for opts in ({}, typed)]
    assert plans[0].manifest.config_hash != plans[1].manifest.config_hash
    assert plans[1].suite.planner_attempts == 1
