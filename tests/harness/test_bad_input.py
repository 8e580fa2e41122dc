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
        (["--suite", "proact", "--model", "openai/x", "--judge-model", "openai/j", "--base-url", "http://127.0.0.1:9/v1"],
         "http://127.0.0.1:9/v1", "start the server"),
        (["--resume", "no-such-run"], "'no-such-run'", "harness runs"),
        (["--suite", "proact-live", "--suite-option", "planner_atempts=1"], "planner_atempts", "planner_attempts=3"),
        (["--suite", "proact-live", "--suite-option", "planner_attempts=one"], "planner_attempts=one", "valid integer"),
        (["--suite", "proact-live", "--suite-option", "planner_attempts=0"], "planner_attempts=0", "int >= 1, <= 10"),
        (["--suite", "cdwm-web", "--suite-option", "horizon=3"], "horizon=3", "int >= 1, <= 2 (default 2)"),
        (["--suite", "cdwm-web", "--agent", "nosuch"], "agent=nosuch", "choose one of"),
        (["--suite", "cdwm-web", "--action-format", "json"], "action_format=json", "one of free, constrained, tools"),
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
    proc = harness_cli("eval", "--suite", "proact", "--model", "openai/gpt-4o-mini", "--judge-model", "openai/gpt-4o",
                       "--run-dir", str(recorded_run), env={"OPENAI_API_KEY": ""})
    line = _error_line(proc)
    assert "OPENAI_API_KEY" in line or "unreachable" in line


def test_suite_options_reach_the_suite_and_the_config_hash(tmp_path):
    """Options are converted to the constructor's types, built into the suite and hashed: two runs
    that differ only in an option are different runs."""
    from harness.records import RunConfig
    from harness.runner import plan_run
    from harness.suite import get_suite, parse_suite_options

    options = parse_suite_options(["planner_attempts=1", "user_max_tokens=32"])
    suite = get_suite("proact-live", options)
    assert (suite.planner_attempts, suite.user_config.max_tokens) == (1, 32)
    typed = suite.options.model_dump(mode="json", exclude_defaults=True)
    assert typed == {"planner_attempts": 1, "user_max_tokens": 32}
    plans = [plan_run(RunConfig(suite="proact-live", models={r: "local/smollm2-135m" for r in suite.roles},
                                limit=1, suite_options=opts), tmp_path) for opts in ({}, typed)]
    assert plans[0].manifest.config_hash != plans[1].manifest.config_hash
    assert plans[1].suite.planner_attempts == 1


# ---- corpus files that cannot be read (owned by the corpus loaders; keep additions in this block)

def _unreadable_corpora(tmp_path):
    """Each: (path, what the one error line must name besides the path)."""
    binary = tmp_path / "binary.jsonl"
    binary.write_bytes(b"SQLite format 3\x00\x10\x00\x01\x01")
    latin1 = tmp_path / "latin1.jsonl"
    latin1.write_bytes('{"blueprint_id": "caf\xe9"}\n'.encode("latin-1"))
    gz = tmp_path / "dialogues.jsonl.gz"
    gz.write_bytes(b"\x1f\x8b\x08\x00" + bytes(16))
    empty_folder = tmp_path / "empty_corpus"
    empty_folder.mkdir()
    (empty_folder / "final_dialogues.jsonl").write_text("\n\n")
    no_jsonl = tmp_path / "no_jsonl"
    no_jsonl.mkdir()
    (no_jsonl / "notes.txt").write_text("nothing here")
    return [(binary, "binary file"), (latin1, "is not UTF-8"), (gz, "gunzip"),
            (empty_folder, "holds no rows"), (no_jsonl, "holds no dialogue .jsonl files")]


def test_unreadable_corpus_is_one_line_for_eval_and_validate(recorded_run, tmp_path):
    before = _snapshot(recorded_run)
    for path, must_say in _unreadable_corpora(tmp_path):
        for args in (["eval", "--suite", "proact", "--corpus", str(path), "--run-dir", str(recorded_run), "--no-progress"],
                     ["corpus", "validate", str(path)]):
            line = _error_line(harness_cli(*args))
            assert str(path) in line and must_say in line, (args, line)
            assert "pass" in line or "re-save" in line or "decompress" in line, line  # the fix
    assert _snapshot(recorded_run) == before


# ---- one bad invocation (at least) of every command: one error line, nothing recorded lost

def _every_command_cases(run_dir, tmp_path):
    a_file = tmp_path / "a_file"
    a_file.write_text("not a folder")
    not_json = tmp_path / "results.jsonl"
    not_json.write_text("{not json\n")
    return [
        (["eval", "--suite", "proact", "--run-dir", str(a_file)], "is a file, not a folder"),
        (["score", "nosuch-run", "--run-dir", str(run_dir)], "'nosuch-run' not found"),
        (["score", "x", "--run-dir", str(a_file)], "is a file, not a folder"),
        (["describe", "nosuch"], "harness list"),
        (["list", "--options", "nosuch"], "harness list"),
        (["runs", "--run-dir", str(tmp_path / "empty")], "harness eval"),
        (["leaderboard", "export", "--suite", "proact", "--run-dir", str(tmp_path / "empty"), "--format", "csv",
          "--out", str(tmp_path / "b.csv")], str(tmp_path / "empty")),
        (["view", "--run-dir", str(tmp_path / "empty")], str(tmp_path / "empty")),
        (["generate", "--model", "acme/x", "--prompt", "hi"], "'acme'"),
        (["bench", "adapters", "--adapters", "x,y"], "--adapters"),
        (["cdwm", "export-transitions", "--run", "nosuch", "--run-dir", str(run_dir), "--out", str(tmp_path / "t")],
         "nosuch"),
        (["proact", "metrics", str(tmp_path / "missing.jsonl")], "missing.jsonl"),
        (["proact", "metrics", str(not_json)], "results.jsonl"),
        (["corpus", "validate", str(tmp_path / "missing.jsonl")], "missing.jsonl"),
    ]


def test_every_command_turns_bad_input_into_one_line(recorded_run, tmp_path):
    before = _snapshot(recorded_run)
    for args, must in _every_command_cases(recorded_run, tmp_path):
        line = _error_line(harness_cli(*args))
        assert must in line, (args, line)
    assert _snapshot(recorded_run) == before
