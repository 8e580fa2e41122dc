"""The ProactBench metric formulas against hand-computed values."""

import math

from environments.proact.metrics import official_metrics, proact_counts, proact_metrics
from harness.records import SampleRecord


def record(dialogue: str, labels: list[tuple[str, str]], epoch: int = 0) -> SampleRecord:
    return SampleRecord(
        sample_id=dialogue, epoch=epoch, seed=0, status="ok", started="2026-01-01T00:00:00+00:00", duration_s=0,
        scores={"triggers": [{"turn": i + 1, "type": t, "label": lab} for i, (t, lab) in enumerate(labels)]},
    )


RECORDS = [
    record("d1", [("EMERGENT", "PASS"), ("CRITICAL", "PARTIAL"), ("RECOVERY", "FAIL")]),
    record("d2", [("EMERGENT", "FAIL"), ("CRITICAL", "PASS"), ("CRITICAL", "SKIPPED"), ("RECOVERY", "PARTIAL")]),
    record("d3", [("EMERGENT", "PARTIAL"), ("CRITICAL", "PASS"), ("RECOVERY", "ERROR")]),
]


def test_per_type_and_overall_values_match_hand_computation():
    m = proact_metrics(RECORDS)
    # EMERGENT: PASS, FAIL, PARTIAL -> total 3
    assert math.isclose(m["proactivity_emergent_pass_rate"].value, 1 / 3)
    assert math.isclose(m["proactivity_emergent_partial_rate"].value, 1 / 3)
    assert math.isclose(m["proactivity_emergent_weighted_score"].value, 1.5 / 3)
    # CRITICAL: PARTIAL, PASS, (SKIPPED excluded), PASS -> total 3
    assert math.isclose(m["proactivity_critical_pass_rate"].value, 2 / 3)
    assert math.isclose(m["proactivity_critical_weighted_score"].value, 2.5 / 3)
    # RECOVERY: FAIL, PARTIAL, (ERROR excluded) -> total 2
    assert math.isclose(m["proactivity_recovery_pass_rate"].value, 0.0)
    assert math.isclose(m["proactivity_recovery_weighted_score"].value, 0.5 / 2)
    # Overall pools triggers (not a mean of types): 3 PASS, 3 PARTIAL, 2 FAIL of 8
    assert math.isclose(m["proactivity_overall_pass_rate"].value, 3 / 8)
    assert math.isclose(m["proactivity_overall_partial_rate"].value, 3 / 8)
    assert math.isclose(m["proactivity_overall_weighted_score"].value, 4.5 / 8)
    assert all(v.n == 3 for v in m.values())  # the dialogue is the unit


def test_intervals_bracket_the_value_and_resample_dialogues():
    m = proact_metrics(RECORDS, seed=1)
    for name, metric in m.items():
        assert 0.0 <= metric.ci_low <= metric.value <= metric.ci_high <= 1.0, name
    # Different dialogues disagree on emergent, so the interval must have width.
    assert m["proactivity_emergent_pass_rate"].ci_high - m["proactivity_emergent_pass_rate"].ci_low > 0.3
    # Same seed, same interval.
    assert proact_metrics(RECORDS, seed=1) == m


def test_counts_keep_skipped_and_errors_visible():
    c = proact_counts(RECORDS)
    assert c == {"dialogues": 3, "triggers_pass": 3, "triggers_partial": 3, "triggers_fail": 2,
                 "triggers_skipped": 1, "triggers_error": 1,
                 "verdicts_evidence_not_found": 0}


def test_epochs_of_one_dialogue_pool_into_one_unit():
    recs = [record("d1", [("EMERGENT", "PASS")], epoch=0), record("d1", [("EMERGENT", "FAIL")], epoch=1)]
    m = proact_metrics(recs)
    assert m["proactivity_emergent_pass_rate"].value == 0.5
    assert m["proactivity_emergent_pass_rate"].n == 1


def test_no_evaluated_trigger_gives_no_value_not_zero():
    m = proact_metrics([record("d1", [("EMERGENT", "SKIPPED")])])
    assert m["proactivity_emergent_pass_rate"].value is None
    assert m["proactivity_recovery_pass_rate"].value is None


def test_failed_sample_counts_its_triggers_as_errors():
    failed = SampleRecord(sample_id="d9", epoch=0, seed=0, status="error", started="x", duration_s=0,
                          scores={"triggers": [], "expected_types": ["EMERGENT", "RECOVERY"]}, errors=["boom"])
    assert proact_counts([failed])["triggers_error"] == 2


def test_official_layout_uses_eval_names_and_totals():
    off = official_metrics(RECORDS)
    assert off["aggregate_trigger_stats"]["CRITICAL"] == {"PASS": 2, "PARTIAL": 1, "FAIL": 0, "SKIPPED": 1}
    assert off["error_trigger_stats"] == {"EMERGENT": 0, "CRITICAL": 0, "RECOVERY": 1}
    assert off["metrics"]["eval/proactivity_critical_total"] == 3
    assert math.isclose(off["metrics"]["eval/proactivity_overall_weighted_score"], 4.5 / 8)
    assert off["metrics"]["eval/proactivity_total_dialogues"] == 3
