"""`harness eval` end to end on the embedded model, as a user runs it."""

import io
import json
from pathlib import Path

import pandas as pd
import pytest

from corpora.proact_types import CorpusRow
from environments.proact.protocol import history_messages
from environments.proact.suite import sorted_triggers
from harness.loopback import running_server
from harness.providers.embedded import CONTEXT_WINDOW, ensure_converted
from harness.run_folder import RunFolder
from tests.conftest import JUDGE_PASS, harness_cli

pytestmark = pytest.mark.slow


def _runs(run_dir):
    return sorted((RunFolder(run_dir, p.name) for p in run_dir.iterdir() if p.is_dir()), key=lambda f: f.run_id)


def _cheapest_overflowing_row(real_corpus: Path) -> dict:
    """The real row with the least prompt text the model must read among rows with a trigger past
    the 8k window: the test needs both kinds of trigger, and CPU time goes to prefill."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(ensure_converted()))

    def lengths(raw: dict) -> list[int]:
        row = CorpusRow.model_validate(raw)
        return [len(tokenizer(tokenizer.apply_chat_template(history_messages(row.turn_records, tp.turn), tokenize=False))
                    ["input_ids"]) for tp in sorted_triggers(row)]

    rows = [json.loads(line) for line in real_corpus.read_text().splitlines()]
    sized = [(sum(n for n in ns if n <= CONTEXT_WINDOW), i) for i, ns in enumerate(map(lengths, rows))
             if max(ns) > CONTEXT_WINDOW and min(ns) <= CONTEXT_WINDOW]
    return rows[min(sized)[1]]


def test_real_corpus_run_records_overflow_as_errors_and_exports_a_row(real_corpus, tmp_path):
    """Some real rows' late turns exceed SmolLM2's 8k context: those triggers must be errors,
    counted and shown, never silently dropped. The judge is a loopback server here so the test
    checks the protocol, not the 135M judge's JSON skills. One real row, the cheapest with both
    kinds of trigger (the full rows took 4 minutes of CPU prefill)."""
    run_dir = tmp_path / "runs"
    corpus = tmp_path / "one-real-row.jsonl"
    corpus.write_text(json.dumps(_cheapest_overflowing_row(real_corpus)) + "\n")
    with running_server("--echo", "--reply", JUDGE_PASS) as url:
        proc = harness_cli("eval", "--suite", "proact", "--corpus", str(corpus), "--limit", "1",
                           "--max-tokens", "16", "--judge-model", "openai/judge", "--base-url", url,
                           "--run-dir", str(run_dir), "--no-progress")
    assert proc.returncode == 0, proc.stderr
    [folder] = _runs(run_dir)
    manifest = folder.read_manifest()
    assert manifest.status == "complete"
    assert manifest.config.models == {"assistant": "local/smollm2-135m", "judge": "openai/judge"}
    assert manifest.corpus["samples"] == 1 and manifest.corpus["sha256"]
    records = folder.read_samples()
    assert len(records) == 1
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
    assert row["model"] == "local/smollm2-135m" and row["judge"] == "openai/judge" and row["n"] == 1
    assert row["suite_version"] == manifest.suite_version
    for metric in ("proactivity_overall_weighted_score", "proactivity_emergent_pass_rate"):
        assert row[f"{metric}_ci_low"] <= row[metric] <= row[f"{metric}_ci_high"]

    listing = harness_cli("runs", "--run-dir", str(run_dir))
    assert folder.run_id in listing.stdout and "complete" in listing.stdout
