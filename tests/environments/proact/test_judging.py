"""Judge panels: majority vote, ties to the lower label, every judge's verdict kept."""

from corpora.proact_types import Verdict
from environments.proact.judging import judge_roles, majority


def v(score, status="EVALUATED"):
    return Verdict(status=status, score=score, rationale=f"r-{score}", evidence=f"e-{score}",
                   evidence_verbatim=True, model=f"m-{score}")


def test_single_judge_is_passed_through():
    assert majority([v("PARTIAL")]) == v("PARTIAL")


def test_majority_wins_and_ties_go_to_the_lower_label():
    assert majority([v("PASS"), v("PASS"), v("FAIL")]).score == "PASS"
    assert majority([v("PASS"), v("PARTIAL")]).score == "PARTIAL"
    assert majority([v("PASS"), v("FAIL"), v("PARTIAL")]).score == "FAIL"
    combined = majority([v("PASS"), v("FAIL"), v("FAIL")])
    assert combined.votes == {"PASS": 1, "FAIL": 2}
    assert [j.score for j in combined.judges or []] == ["PASS", "FAIL", "FAIL"]
    assert combined.rationale == "r-FAIL"
    # As recorded: the fields the verdict was given, the panel's judges nested in it.
    assert combined.model_dump(mode="json")["judges"][0] == {
        "status": "EVALUATED", "score": "PASS", "rationale": "r-PASS", "evidence": "e-PASS",
        "evidence_verbatim": True, "model": "m-PASS"}


def test_unusable_verdicts_do_not_vote():
    skipped = Verdict(status="SKIPPED", score=None, rationale="did not parse", model="x")
    error = Verdict(status="ERROR", error="judge_2: gave up", model="y")
    assert majority([skipped, v("PARTIAL")]).score == "PARTIAL"
    assert majority([skipped, error]).label == "SKIPPED"
    assert majority([error, error.model_copy()]).label == "ERROR"


def test_judge_roles_are_ordered():
    assert judge_roles({"assistant": 1, "judge_3": 1, "judge": 1, "judge_2": 1, "judge_10": 1}) == \
        ["judge", "judge_2", "judge_3", "judge_10"]
