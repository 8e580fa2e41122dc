"""Runs written before the records were versioned (format 1, by the code of 2026-12-01 before the
suite contract; `tests/fixtures/runs_format1`) still load, summarise, export, view and re-score."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from harness.loopback import running_server
from harness.records import RECORDS_FORMAT, SampleRecord
from harness.run_folder import RunFolder
from harness.suite import get_suite
from tests.conftest import JUDGE_PASS, REPO, harness_cli

FIXTURE = REPO / "tests" / "fixtures" / "runs_format1"
PROACT_OK = "proact-20261201T215355-859507"
PROACT_ERRORS = "proact-20261201T215404-022af9"
HOUSEHOLD = "cdwm-household-20261201T215359-e8aa3d"


@pytest.fixture()
def old_runs(tmp_path) -> Path:
    run_dir = tmp_path / "runs"
    shutil.copytree(FIXTURE, run_dir)
    return run_dir


def test_format_1_records_load_and_migrate(old_runs):
    for run_id in (PROACT_OK, PROACT_ERRORS, HOUSEHOLD):
        folder = RunFolder(old_runs, run_id)
        manifest, summary, records = folder.read_manifest(), folder.read_summary(), folder.read_samples()
        assert manifest.format == 1 and summary.format == 1 and records
        assert all(r.format == 1 for r in records)
    errors = RunFolder(old_runs, PROACT_ERRORS).read_samples()[0].errors
    assert len(errors) == 3 and {e.kind for e in errors} == {"legacy"}
    assert "InternalServerError (HTTP 500)" in errors[0].message
    # A record written now says it is the current format.
    rec = SampleRecord(sample_id="x", epoch=0, seed=0, status="ok", started="", duration_s=0.0)
    assert SampleRecord.load(rec.model_dump_json()).format == RECORDS_FORMAT == 2


@pytest.mark.parametrize("run_id", [PROACT_OK, PROACT_ERRORS, HOUSEHOLD])
def test_todays_metrics_code_reproduces_their_stored_summaries(old_runs, run_id):
    folder = RunFolder(old_runs, run_id)
    manifest, summary = folder.read_manifest(), folder.read_summary()
    suite = get_suite(manifest.suite, manifest.config.suite_options)
    metrics = suite.metrics(folder.read_samples(), seed=manifest.config.seed)
    assert {k: m.model_dump() for k, m in metrics.items()} == {k: m.model_dump() for k, m in summary.metrics.items()}


def test_format_1_runs_list_export_and_view(old_runs, tmp_path):
    proc = harness_cli("runs", "--run-dir", str(old_runs))
    assert proc.returncode == 0 and PROACT_OK in proc.stdout and HOUSEHOLD in proc.stdout
    board = tmp_path / "board.md"
    proc = harness_cli("leaderboard", "export", "--suite", "proact", "--run-dir", str(old_runs), "--format", "md",
                       "--out", str(board))
    assert proc.returncode == 0, proc.stderr
    assert "openai/m" in board.read_text()
    from tests.leaderboards.test_viewer import get, serving

    with serving(old_runs) as url:
        status, html, _ = get(f"{url}/runs/{PROACT_ERRORS}/samples/0")
        assert status == 200 and "legacy" not in html and "InternalServerError (HTTP 500)" in html
        status, html, _ = get(f"{url}/runs/{PROACT_OK}/samples/0")
        assert status == 200 and '<span class="label PASS">PASS</span>' in html


def test_a_format_1_run_can_be_rescored(old_runs):
    """Its transcripts (the regenerated replies) are scored by today's judge scorer."""
    with running_server("--echo", "--reply", JUDGE_PASS) as url:
        proc = harness_cli("score", PROACT_OK, "--judge-model", "openai/k", "--base-url", url,
                           "--run-dir", str(old_runs), "--no-progress")
    assert proc.returncode == 0, proc.stderr
    [new] = [p.name for p in old_runs.iterdir() if p.name.startswith("proact-score-")]
    records = RunFolder(old_runs, new).read_samples()
    assert len(records) == 2 and all(r.format == 2 and r.scorer == "judge" for r in records)
    assert all(lab["label"] == "PASS" for r in records for lab in r.scores["triggers"])
