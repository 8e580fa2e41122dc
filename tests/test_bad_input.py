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
