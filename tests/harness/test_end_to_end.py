"""`harness eval` end to end on the embedded model, as a user runs it."""

import io
import json

import pandas as pd
import pytest

from harness.loopback import running_server
from harness.records import RunFolder
from tests.conftest import JUDGE_PASS, harness_cli

pytestmark = pytest.mark.slow


def _runs(run_dir):
    return sorted((RunFolder(run_dir, p.name) for p in run_dir.iterdir() if p.is_dir()), key=lambda f: f.run_id)


def test_real_corpus_run_records_overflow_as_errors_and_exports_a_row(real_corpus, tmp_path):
    """The real rows' late turns exceed SmolLM2's 8k context: those triggers must be errors,
    counted and shown, never silently dropped. The judge is a loopback server here so the test
    checks the protocol, not the 135M judge's JSON skills."""
    run_dir = tmp_path / "runs"
    with running_server("--echo", "--reply", JUDGE_PASS) as url:
        proc = harness_cli("eval", "--suite", "proact", "--corpus", str(real_corpus), "--limit", "2",
                           "--max-tokens", "16", "--judge-model", "openai/judge", "--base-url", url,
                           "--run-dir", str(run_dir), "--no-progress")
    assert proc.returncode == 0, proc.stderr
    [folder] = _runs(run_dir)
    manifest = folder.read_manifest()
    assert manifest.status == "complete"
    assert manifest.config.models == {"assistant": "local/smollm2-135m", "judge": "openai/judge"}
    assert manifest.corpus["samples"] == 2 and manifest.corpus["sha256"]
    records = folder.read_samples()
    assert len(records) == 2
    results = [v["evaluation_result"] for r in records for v in r.scores["verdicts"]]
    errors = [res for res in results if res["status"] == "ERROR"]
    assert errors and all("8192" in e["error"] for e in errors)
    assert any(res["status"] == "EVALUATED" for res in results)
    summary = folder.read_summary()
    assert summary.counts["triggers_error"] == len(errors)
    assert summary.counts["triggers_pass"] == len(results) - len(errors)
    # The regenerated reply sits beside the curated one, as in the official results rows.
    tr = records[0].output["turn_records"][0]
    assert tr["original_assistant_response"] and tr["assistant_response"] != tr["original_assistant_response"]

    export = harness_cli("leaderboard", "export", "--suite", "proact", "--format", "csv", "--run-dir", str(run_dir))
    assert export.returncode == 0, export.stderr
    frame = pd.read_csv(io.StringIO(export.stdout))
    assert len(frame) == 1
    row = frame.iloc[0]
    assert row["model"] == "local/smollm2-135m" and row["judge"] == "openai/judge" and row["n"] == 2
    assert row["suite_version"] == manifest.suite_version
    for metric in ("proactivity_overall_weighted_score", "proactivity_emergent_pass_rate"):
        assert row[f"{metric}_ci_low"] <= row[metric] <= row[f"{metric}_ci_high"]

    listing = harness_cli("runs", "--run-dir", str(run_dir))
    assert folder.run_id in listing.stdout and "complete" in listing.stdout


def test_embedded_model_in_every_role_then_identical_from_cache(tmp_path):
    run_dir = tmp_path / "runs"
    args = ["eval", "--suite", "proact", "--limit", "1", "--max-tokens", "16", "--judge-max-tokens", "48", "--seed", "11",
            "--run-dir", str(run_dir), "--no-progress"]
    first = harness_cli(*args)
    assert first.returncode == 0, first.stderr
    assert "proactivity_overall_weighted_score" in first.stdout
    second = harness_cli(*args)
    assert second.returncode == 0, second.stderr
    a, b = (sorted(f.read_samples(), key=lambda r: r.key) for f in _runs(run_dir))
    texts = lambda recs: [t["assistant_response"] for r in recs for t in r.output["turn_records"]]  # noqa: E731
    verdicts = lambda recs: [v["evaluation_result"] for r in recs for v in r.scores["verdicts"]]  # noqa: E731
    assert texts(a) == texts(b) and verdicts(a) == verdicts(b)
    assert all(c.cached for r in b for c in r.calls) and not any(c.cached for r in a for c in r.calls)
    # Sampling (temperature 0.7) with the per-sample seed, and usage counted per role.
    rec = a[0]
    assert rec.usage["assistant"].calls == len(rec.output["trigger_points"])
    assert rec.usage["judge"].calls >= len(rec.output["trigger_points"])
    assert rec.usage["assistant"].completion_tokens <= 16 * rec.usage["assistant"].calls
    summary = json.loads((_runs(run_dir)[0].summary_path).read_text())
    judged = summary["counts"]
    assert judged["triggers_pass"] + judged["triggers_partial"] + judged["triggers_fail"] + judged["triggers_skipped"] \
        == len(rec.output["trigger_points"])
