"""Two judges on the same transcripts: their agreement per trigger type (issue 38, item 4's
re-judging half), computed from the panel's stored verdicts, and on a real re-score."""

from __future__ import annotations

import pytest

from environments.proact.metrics import panel_agreement
from harness.loopback import running_server
from harness.records import SampleRecord
from harness.run_folder import RunFolder
from tests.conftest import JUDGE_PASS, harness_cli

JUDGE_FAIL = '{"score": "FAIL", "rationale": "it ignored the anchor", "evidence": "FAIL"}'


def _record(sample_id: str, pairs: list[tuple[str, str, str]]) -> SampleRecord:
    """A dialogue whose triggers (type, first judge's label, second judge's label) a panel graded."""
    verdicts = [{"turn": i, "type": kind, "evaluation_result": {
        "status": "EVALUATED", "score": a, "judges": [{"status": "EVALUATED", "score": a},
                                                      {"status": "EVALUATED", "score": b}]}}
        for i, (kind, a, b) in enumerate(pairs)]
    return SampleRecord(sample_id=sample_id, epoch=0, seed=0, status="ok", scores={"verdicts": verdicts},
                        started="2026-12-06T00:00:00Z", duration_s=0.0)


def test_kappa_per_type_matches_a_hand_computed_table():
    # EMERGENT: 4 triggers, the judges agree on 3 (PASS, PASS, FAIL) and differ on one (PASS vs FAIL).
    # confusion rows = first judge: PASS -> [2 PASS, 0, 1 FAIL]; FAIL -> [0, 0, 1]
    # observed 3/4; expected (3*2 + 1*2)/16 = 0.5; kappa = (0.75 - 0.5) / 0.5 = 0.5
    records = [_record("d1", [("EMERGENT", "PASS", "PASS"), ("EMERGENT", "PASS", "FAIL"),
                              ("RECOVERY", "PARTIAL", "FAIL")]),
               _record("d2", [("EMERGENT", "PASS", "PASS"), ("EMERGENT", "FAIL", "FAIL"),
                              ("RECOVERY", "FAIL", "PARTIAL")])]
    out = panel_agreement(records)
    assert out["judge_agreement_kappa_emergent"].value == pytest.approx(0.5)
    assert out["judge_agreement_kappa_emergent"].n == 2  # dialogues are the resampled units
    assert out["judge_agreement_kappa_recovery"].value == pytest.approx(-1.0)  # they always disagree
    assert out["judge_agreement_kappa_critical"].value is None  # no critical trigger graded by both
    lo, hi = out["judge_agreement_kappa_overall"].ci_low, out["judge_agreement_kappa_overall"].ci_high
    assert lo is not None and hi is not None and lo <= out["judge_agreement_kappa_overall"].value <= hi


def test_no_panel_no_agreement_metrics():
    one_judge = SampleRecord(sample_id="d", epoch=0, seed=0, status="ok", started="x", duration_s=0.0, scores={
        "verdicts": [{"turn": 1, "type": "EMERGENT", "evaluation_result": {"status": "EVALUATED", "score": "PASS"}}]})
    assert panel_agreement([one_judge]) == {}


def test_a_rescore_with_a_second_judge_reports_the_two_judges_agreement(tmp_path):
    run_dir = tmp_path / "runs"
    with running_server("--echo", "--reply", JUDGE_PASS) as passing, running_server("--echo", "--reply", JUDGE_FAIL) as failing:
        proc = harness_cli("eval", "--suite", "proact", "--model", "openai/a", "--judge-model", "openai/j",
                           "--judge-model", "openai/k", "--role-config", f"judge_2.base_url={failing}",
                           "--base-url", passing, "--limit", "2", "--run-dir", str(run_dir), "--no-progress")
        assert proc.returncode == 0, proc.stderr
    [path] = [p for p in run_dir.iterdir() if (p / "manifest.json").exists()]
    summary = RunFolder(run_dir, path.name).read_summary()
    # one judge always PASS, the other always FAIL: observed agreement 0, chance agreement 0 -> kappa 0
    assert summary.metrics["judge_agreement_kappa_overall"].value == pytest.approx(0.0)
    assert "judge_agreement_kappa_overall" in proc.stdout
