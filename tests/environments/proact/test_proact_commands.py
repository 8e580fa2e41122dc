"""`harness corpus validate`, `harness proact metrics`, `harness judge agreement`, and kappa."""

import json
import math

import numpy as np
import pytest

from harness.loopback import running_server
from harness.stats import cohen_kappa
from tests.conftest import JUDGE_PASS, harness_cli


def test_kappa_by_hand():
    assert cohen_kappa(np.diag([3, 4, 5])) == 1.0
    # po = 0.7; row sums (5, 5), col sums (6, 4): pe = (30 + 20) / 100 = 0.5 -> kappa 0.4
    assert math.isclose(cohen_kappa(np.array([[4, 1], [2, 3]])), 0.4)
    assert cohen_kappa(np.zeros((3, 3))) is None
    assert cohen_kappa(np.array([[5, 0], [0, 0]])) is None  # chance agreement is total


def test_validate_passes_the_release_rows(real_corpus):
    proc = harness_cli("corpus", "validate", str(real_corpus))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "OK: 30 rows in 1 file(s), 0 errors" in proc.stdout


def test_validate_reports_each_broken_row(real_corpus, tmp_path):
    rows = [json.loads(ln) for ln in real_corpus.read_text().splitlines()]
    rows[2]["trigger_points"][1]["turn"] = rows[2]["trigger_points"][0]["turn"] + 1  # back to back
    del rows[4]["turn_records"][1]["assistant_response"]
    rows[6]["trigger_stats"]["EMERGENT"]["PASS"] += 5
    bad = tmp_path / "corrupt.jsonl"
    bad.write_text("".join(json.dumps(r) + "\n" for r in rows))
    proc = harness_cli("corpus", "validate", str(bad))
    assert proc.returncode == 1
    text = proc.stdout.replace("\n", " ")
    assert f"{bad}:3" in text and "back-to-back triggers" in text
    assert f"{bad}:5" in text and "turn_records[1].assistant_response` is missing" in text
    assert f"{bad}:7" in text and "trigger_stats.EMERGENT" in text
    # Moving a trigger also breaks the planner's flags on the two turns involved: 3 + 2 errors.
    assert "planner.is_trigger_point" in text
    assert "FAILED: 30 rows in 1 file(s), 5 errors" in text


def test_metrics_reproduce_every_dialogues_trigger_stats(real_corpus):
    proc = harness_cli("proact", "metrics", str(real_corpus), "--json")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert "stats_mismatch" not in result["deviations"]
    # A corpus copy is not a results file: it lacks the results-only fields and the judge's usage.
    assert result["deviations"] == {"field_missing": 90, "field_extra": 30, "usage_missing": 30}
    # Independently: the pooled weighted score from the rows' own trigger_stats.
    rows = [json.loads(ln) for ln in real_corpus.read_text().splitlines()]
    tot = {lab: sum(r["trigger_stats"][t][lab] for r in rows for t in r["trigger_stats"]) for lab in ("PASS", "PARTIAL", "FAIL")}
    expected = (tot["PASS"] + 0.5 * tot["PARTIAL"]) / sum(tot.values())
    assert math.isclose(result["official"]["metrics"]["eval/proactivity_overall_weighted_score"], expected)
    assert math.isclose(result["metrics"]["proactivity_overall_weighted_score"]["value"], expected)
    assert result["official"]["metrics"]["eval/proactivity_total_dialogues"] == 30.0


def test_metrics_flag_a_tampered_row_as_a_warning(real_corpus, tmp_path):
    rows = [json.loads(ln) for ln in real_corpus.read_text().splitlines()]
    rows[0]["trigger_stats"]["RECOVERY"]["FAIL"] += 1
    path = tmp_path / "results.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    proc = harness_cli("proact", "metrics", str(path))
    assert proc.returncode == 0, proc.stderr  # a deviation is a warning: the file is re-aggregated
    err = " ".join(proc.stderr.split())
    assert "stats_mismatch x1 [1 row(s), first at line 1]" in err and "RECOVERY stored" in err
    assert "30 rows read, none dropped" in err
    assert harness_cli("proact", "metrics", str(path), "--strict").returncode == 1


def test_agreement_of_a_judge_that_always_says_pass(real_corpus, tmp_path):
    """A constant judge agrees only by chance: kappa is exactly 0 and every verdict lands in the
    PASS column of the confusion matrix."""
    with running_server("--echo", "--reply", JUDGE_PASS) as url:
        proc = harness_cli("judge", "agreement", "--corpus", str(real_corpus), "--judge-model", "openai/constant",
                           "--base-url", url, "--limit", "6", "--run-dir", str(tmp_path), "--no-progress")
    assert proc.returncode == 0, proc.stderr
    [summary_path] = tmp_path.glob("*/summary.json")
    summary = json.loads(summary_path.read_text())
    assert summary["metrics"]["judge_kappa_overall"]["value"] == pytest.approx(0.0)
    matrix = np.array(summary["official"]["confusion_overall"])
    assert matrix[:, 1:].sum() == 0 and matrix.sum() == summary["counts"]["judged"] > 0
    assert summary["metrics"]["judge_accuracy_overall"]["value"] == pytest.approx(matrix[0, 0] / matrix.sum())
    assert "stored (rows) x judge (columns)" in proc.stdout


def test_audit_accepts_achievable_rubrics_and_rejects_unparsed(real_corpus, tmp_path):
    yes = '{"achievable": true, "reason": "the anchor was disclosed in turn 1"}'
    with running_server("--echo", "--reply", yes) as url:
        proc = harness_cli("eval", "--suite", "proact-audit", "--corpus", str(real_corpus), "--limit", "3",
                           "--judge-model", "openai/auditor", "--base-url", url, "--run-dir", str(tmp_path / "a"),
                           "--no-progress")
    assert proc.returncode == 0, proc.stderr
    [summary] = (tmp_path / "a").glob("*/summary.json")
    assert json.loads(summary.read_text())["metrics"]["audit_pass_rate"]["value"] == 1.0
    with running_server("--echo") as url:  # answers that are not JSON never count as achievable
        proc = harness_cli("eval", "--suite", "proact-audit", "--corpus", str(real_corpus), "--limit", "2",
                           "--judge-model", "openai/auditor", "--base-url", url, "--run-dir", str(tmp_path / "b"),
                           "--no-progress")
    assert proc.returncode == 0, proc.stderr
    [samples] = (tmp_path / "b").glob("*/samples.jsonl")
    recs = [json.loads(ln) for ln in samples.read_text().splitlines()]
    assert all(not r["scores"]["accepted"] for r in recs)
    assert {a["verdict"] for r in recs for a in r["scores"]["audits"]} == {"UNPARSED"}


def test_corpus_build_generates_audits_and_writes_valid_rows(tmp_path):
    """The live loop with every role on a loopback server: the planner's and user's replies do
    not parse, so their templates are used (and counted); the judge and the auditor accept. The
    kept rows are a valid corpus."""
    reply = json.dumps({"score": "PASS", "rationale": "it acted", "evidence": "PASS",
                        "achievable": True, "reason": "the anchors were disclosed"})
    out_file = tmp_path / "built.jsonl"
    with running_server("--echo", "--reply", reply) as url:
        proc = harness_cli("corpus", "build", "--out", str(out_file), "--limit", "2",
                           *[arg for role in ("planner", "user", "assistant", "judge", "audit")
                             for arg in (f"--{role}-model", f"openai/{role}")],
                           "--base-url", url, "--run-dir", str(tmp_path / "runs"), "--no-progress")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "generated 2, passed the rules 2, passed the audit 2" in proc.stdout.replace("\n", " ")
    rows = [json.loads(ln) for ln in out_file.read_text().splitlines()]
    assert len(rows) == 2 and len({r["style_combination_index"] for r in rows}) == 2
    assert all(tp["evaluation_result"]["score"] == "PASS" for r in rows for tp in r["trigger_points"])
    check = harness_cli("corpus", "validate", str(out_file))
    assert check.returncode == 0, check.stdout
