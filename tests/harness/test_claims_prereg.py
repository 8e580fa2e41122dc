"""Pre-registration you can check: every family's current criterion hash has an entry in its
criterion log; changing a threshold (in a copy) without a logged amendment is caught; a log that
does not parse is one error naming it; the decision rule and the seed plan."""

from __future__ import annotations

import os
import subprocess

import numpy as np
import pytest

from harness.claims import Claim, Condition, SeedPlan, combine, decide, evaluate, seeds_to_decide
from harness.claims.prereg import first_committed, load_log, unregistered
from harness.claims.registry import families
from harness.errors import HarnessError

TOY = Claim(id="toy.claim", sentence="a beats b", setting="toy", arms=("a", "b"), settings=("s",),
            conditions=[Condition(metric="m", setting="s", arm="a", versus="b", op=">=", threshold=0.1)])


def test_every_family_is_found_and_every_criterion_is_registered():
    found = families()
    assert "papers" in found and len(found["papers"].claims) >= 14
    problems = [p for f in found.values() for p in unregistered(f.claims, load_log(f.log))]
    assert problems == []


def test_a_changed_threshold_without_an_amendment_is_caught(tmp_path):
    family = families()["papers"]
    log = load_log(family.log)
    claim = family.claims[0]
    assert unregistered([claim], log) == []
    first = claim.conditions[0]
    moved = claim.model_copy(update={"conditions": [first.model_copy(update={"threshold": first.threshold + 0.01}),
                                                    *claim.conditions[1:]]})
    problems = unregistered([moved], log)
    assert len(problems) == 1 and claim.id in problems[0] and "no entry in the criterion log" in problems[0]
    more_seeds = claim.model_copy(update={"plan": SeedPlan(looks=(claim.plan.looks[-1] + 5,))})
    assert unregistered([more_seeds], log)  # the seed plan is part of the criterion
    reworded = claim.model_copy(update={"sentence": claim.sentence + " (reworded)", "departures": []})
    assert unregistered([reworded], log) == []  # prose is not the criterion


def test_a_log_that_does_not_parse_names_itself(tmp_path):
    bad = tmp_path / "criteria_log.toml"
    bad.write_text('[[change]]\nclaim = "toy.claim"\nhash = "short"\n')
    with pytest.raises(HarnessError, match="criteria_log.toml: does not parse"):
        load_log(bad)
    with pytest.raises(HarnessError, match="not found"):
        load_log(tmp_path / "missing.toml")


def test_first_committed_reads_the_date_from_git(tmp_path):
    log = tmp_path / "criteria_log.toml"
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    log.write_text(f'[[change]]\nclaim = "toy.claim"\nhash = "{TOY.criterion_hash()}"\ndate = "2026-12-06"\n'
                   'change = "x"\nwhy = "y"\nresults_seen = "none"\n')
    assert first_committed(log, TOY.criterion_hash()) is None  # not committed yet
    subprocess.run(["git", "add", "."], cwd=tmp_path, check=True)
    subprocess.run(["git", "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q", "-m", "log"], cwd=tmp_path, check=True)
    first_committed.cache_clear()
    date = first_committed(log, TOY.criterion_hash())
    assert date is not None and len(date) == 10 and date[4] == "-"
    assert unregistered([TOY], load_log(log)) == []


def test_one_decision_rule_agrees_with_its_interval():
    rng = np.random.default_rng(0)
    for _ in range(2000):
        lo, width, threshold = rng.normal(), abs(rng.normal()), rng.normal()
        hi = lo + width
        for op in (">=", "<="):
            outcome = decide(lo, hi, op, threshold)
            above, below = lo >= threshold, hi <= threshold
            claimed, other = (above, hi < threshold) if op == ">=" else (below, lo > threshold)
            assert outcome == ("holds" if claimed else "fails" if other else "undecided")
    assert decide(0.01, 0.04, ">=", 0.0, refute_at=0.05) == "holds"
    assert decide(-0.01, 0.04, ">=", 0.0, refute_at=0.05) == "fails"  # rules out the smallest effect that matters
    assert decide(-0.01, 0.06, ">=", 0.0, refute_at=0.05) == "undecided"
    assert combine(["holds", "holds"]) == "reproduced" and combine(["holds", "fails"]) == "not reproduced"
    assert combine(["holds", "undecided"]) == "inconclusive" and combine([]) == "inconclusive"


def test_conditions_pair_by_seed_and_say_how_many_seeds_would_decide():
    base = [0.1, 0.5, 0.9, 0.3, 0.7]
    table = {("a", "s", i): {"m": b + 0.2} for i, b in enumerate(base)} | {("b", "s", i): {"m": b} for i, b in enumerate(base)}
    result = evaluate(TOY.conditions[0], table, range(5), 0.95)
    assert result.outcome == "holds" and result.estimate == pytest.approx(0.2) and result.ci_high - result.ci_low < 1e-12
    noisy = {("a", "s", i): {"m": d} for i, d in enumerate([0.2, -0.05, 0.25, 0.0, 0.15])} | {("b", "s", i): {"m": 0.0} for i in range(5)}
    result = evaluate(TOY.conditions[0], noisy, range(5), 0.95)
    assert result.outcome == "undecided" and result.seeds_needed is not None and result.seeds_needed > 5
    assert seeds_to_decide(np.array([0.1, 0.1]), 0.1, 0.95) is None  # on the threshold: no number decides


def test_claims_and_plans_reject_what_cannot_be_checked():
    with pytest.raises(ValueError, match="strictly ascending"):
        SeedPlan(looks=(5, 5))
    with pytest.raises(ValueError, match="names 'c'"):
        TOY.model_copy(update={}).model_validate(TOY.model_dump() | {"conditions": [
            {"metric": "m", "setting": "s", "arm": "c", "op": ">=", "threshold": 0}]})
    assert SeedPlan(looks=(5, 10)).look_level == pytest.approx(0.975)


def test_strict_ops_need_the_interval_strictly_beyond_the_threshold():
    assert decide(0.0, 0.3, ">=", 0.0) == "holds" and decide(0.0, 0.3, ">", 0.0) == "undecided"
    assert decide(0.0, 0.0, ">", 0.0) == "undecided"  # all tied: shows no difference, refutes nothing
    assert decide(-0.3, 0.0, "<=", 0.0) == "holds" and decide(-0.3, 0.0, "<", 0.0) == "undecided"
    assert decide(-0.3, -0.1, ">", 0.0) == "fails" and decide(0.1, 0.3, "<", 0.0) == "fails"
    assert decide(-0.02, 0.04, ">", 0.0, refute_at=0.05) == "fails"


def test_the_protocol_is_part_of_the_criterion():
    gated = TOY.model_copy(update={"protocol": {"learn_min": 0.1, "steps": 60}})
    assert gated.criterion_hash() != TOY.criterion_hash()  # a protocol is registered with the conditions
    moved = gated.model_copy(update={"protocol": {"learn_min": 0.2, "steps": 60}})
    assert moved.criterion_hash() != gated.criterion_hash() and "learn_min = 0.2" in moved.criterion_text()
    reordered = TOY.model_copy(update={"protocol": {"steps": 60, "learn_min": 0.1}})
    assert reordered.criterion_hash() == gated.criterion_hash()


def test_a_verdict_per_subject_is_kept_beside_the_others(tmp_path):
    from harness.claims import ClaimVerdict, load_verdicts, save_verdict

    def verdict(subject: str | None) -> ClaimVerdict:
        return ClaimVerdict(claim=TOY.id, subject=subject, sentence="s", setting="x", criterion="c",
                            criterion_hash=TOY.criterion_hash(), verdict="inconclusive", seeds=5, conditions=[],
                            looks=[], departures=[])

    paths = [save_verdict(tmp_path, verdict(s)) for s in (None, "openai/gpt-4o", "../../etc")]
    assert len(set(paths)) == 3 and all(p.parent == tmp_path / "claims" for p in paths)
    assert sorted(v.label for v in load_verdicts([tmp_path])) == ["toy.claim", "toy.claim [../../etc]",
                                                                  "toy.claim [openai/gpt-4o]"]


def test_first_committed_follows_the_log_across_a_move(tmp_path):
    """A family split into subpackages moves its log: the criterion's date stays its first commit's."""
    def git(*args, date="2026-01-02T00:00:00"):
        env = {**os.environ, "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}
        subprocess.run(["git", "-c", "user.email=t@t", "-c", "user.name=t", *args], cwd=tmp_path, check=True, env=env)

    git("init", "-q")
    log = tmp_path / "criteria_log.toml"
    log.write_text(f'[[change]]\nclaim = "toy.claim"\nhash = "{TOY.criterion_hash()}"\n')
    git("add", ".")
    git("commit", "-q", "-m", "registered")
    (tmp_path / "checks").mkdir()
    git("mv", "criteria_log.toml", "checks/criteria_log.toml")
    git("commit", "-q", "-m", "moved", date="2026-03-04T00:00:00")
    first_committed.cache_clear()
    assert first_committed(tmp_path / "checks" / "criteria_log.toml", TOY.criterion_hash()) == "2026-01-02"
