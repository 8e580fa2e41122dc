"""Judge panels: majority vote, ties to the lower label, every judge's verdict kept."""

from environments.proact.judging import judge_roles, label_of, majority


def v(score, status="EVALUATED"):
    return {"status": status, "score": score, "rationale": f"r-{score}", "evidence": f"e-{score}",
            "evidence_verbatim": True, "model": f"m-{score}"}


def test_single_judge_is_passed_through():
    assert majority([v("PARTIAL")]) == v("PARTIAL")


def test_majority_wins_and_ties_go_to_the_lower_label():
    assert majority([v("PASS"), v("PASS"), v("FAIL")])["score"] == "PASS"
    assert majority([v("PASS"), v("PARTIAL")])["score"] == "PARTIAL"
    assert majority([v("PASS"), v("FAIL"), v("PARTIAL")])["score"] == "FAIL"
    combined = majority([v("PASS"), v("FAIL"), v("FAIL")])
    assert combined["votes"] == {"PASS": 1, "FAIL": 2}
    assert [j["score"] for j in combined["judges"]] == ["PASS", "FAIL", "FAIL"]
    assert combined["rationale"] == "r-FAIL"


def test_unusable_verdicts_do_not_vote():
    skipped = {"status": "SKIPPED", "score": None, "rationale": "did not parse", "model": "x"}
    error = {"status": "ERROR", "error": "judge_2: gave up", "model": "y"}
    assert majority([skipped, v("PARTIAL")])["score"] == "PARTIAL"
    assert label_of(majority([skipped, error])) == "SKIPPED"
    assert label_of(majority([error, dict(error)])) == "ERROR"


def test_judge_roles_are_ordered():
    assert judge_roles({"assistant": 1, "judge_3": 1, "judge": 1, "judge_2": 1, "judge_10": 1}) == \
        ["judge", "judge_2", "judge_3", "judge_10"]
