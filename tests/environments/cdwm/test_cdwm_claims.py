"""CDWM's pre-registered claims: every criterion is in the log, the seed plan is the power
calculation's, and the verdict follows the registered intervals on synthetic episode tables."""

from __future__ import annotations

import random

import pytest

from environments.cdwm.claims import (BASELINES, CLAIMS, METHOD, PLAN, PROPOSER_TOKENS, TOKENS, claim_family,
                                      paired_proportions_n, verdict_from_table)
from harness.claims.decide import CellTable
from harness.claims.prereg import load_log, unregistered
from harness.errors import HarnessError

N = PLAN.looks[0]


def test_every_criterion_is_registered_and_names_each_baseline():
    family = claim_family()
    assert unregistered(family.claims, load_log(family.log)) == []
    for claim in family.claims:
        assert {c.versus for c in claim.conditions} == set(BASELINES)
        assert all(c.arm == METHOD for c in claim.conditions)


def test_the_seed_plan_is_connors_sample_size():
    # Connor (1987) at gap 0.06, discordance 0.25, 80% power, 97.5% per look: 657.5 pairs
    assert PLAN.looks == (329, 658)
    assert paired_proportions_n(0.06, 0.25, 0.975, 0.8) == 658
    assert paired_proportions_n(0.12, 0.25, 0.975, 0.8) < 200  # a larger gap needs fewer episodes
    with pytest.raises(HarnessError, match="discordance"):
        paired_proportions_n(0.6, 0.25, 0.95, 0.8)


def table(method_success: float, seed: int = 0, tokens: tuple[float, float] = (100.0, 100.0)) -> CellTable:
    """Every arm on every setting for one look; baselines succeed on 40% of episodes, the method
    at `method_success`, from the same uniform draw per episode (so the arms are correlated)."""
    rng = random.Random(seed)
    out: dict[tuple[str, str, int], dict[str, float | None]] = {}
    for setting in CLAIMS[0].settings:
        for e in range(N):
            u = rng.random()
            for arm in CLAIMS[0].arms:
                p = method_success if arm == METHOD else 0.4
                won = u < p
                cost = tokens[0] if arm == METHOD else tokens[1]
                out[(arm, setting, e)] = {"success": float(won), "irreversible_failure": float(not won),
                                          TOKENS: cost * (1 + 0.1 * rng.random()) if won else None,
                                          PROPOSER_TOKENS: 40.0}
    return out


def test_success_reproduced_when_the_method_beats_every_baseline_and_not_when_worse():
    success = CLAIMS[0]
    better = verdict_from_table(success, table(0.6))
    assert better.verdict == "reproduced" and better.seeds == N
    assert all(c.ci_low is not None and c.ci_low > 0 for c in better.conditions)
    assert verdict_from_table(success, table(0.25)).verdict == "not reproduced"
    assert verdict_from_table(success, table(0.4)).verdict == "inconclusive"  # identical arms: tied everywhere
    irreversible = verdict_from_table(CLAIMS[1], table(0.6))
    assert irreversible.verdict == "reproduced" and all(c.estimate is not None and c.estimate < 0
                                                        for c in irreversible.conditions)


def test_tokens_are_paired_on_both_solved_episodes_with_a_fieller_ratio():
    tokens = verdict_from_table(CLAIMS[2], table(0.6, tokens=(60.0, 100.0)))
    assert tokens.verdict == "reproduced"
    # both solved: where the baselines won (u < 0.4), since the method wins wherever they do
    assert 0.3 * N < tokens.conditions[0].n < 0.5 * N
    assert "ratio 0.6" in tokens.note and "vs value" in tokens.note
    assert verdict_from_table(CLAIMS[2], table(0.6, tokens=(140.0, 100.0))).verdict == "not reproduced"


def test_tokens_are_not_judged_on_records_without_the_proposers_charge():
    # Records written before session 28 have no proposer_tokens (their tokens are the world model's
    # alone): the tokens claim is refused, naming the arm and setting; the other claims still read them.
    cells = {k: dict(v) for k, v in table(0.6, tokens=(60.0, 100.0)).items()}
    for key, cell in cells.items():
        if key[0] == "prompted":
            del cell[PROPOSER_TOKENS]
    with pytest.raises(HarnessError, match="arm prompted at validation .* recorded no proposer_tokens"):
        verdict_from_table(CLAIMS[2], cells)
    assert verdict_from_table(CLAIMS[0], cells).verdict == "reproduced"


def test_missing_arms_and_short_looks_are_named():
    cells = dict(table(0.6))
    short = {k: v for k, v in cells.items() if k[2] < N - 1}
    with pytest.raises(HarnessError, match="fewer episodes than the first look"):
        verdict_from_table(CLAIMS[0], short)
    no_value = {k: v for k, v in cells.items() if k[0] != "value"}
    with pytest.raises(HarnessError, match="arm 'value'"):
        verdict_from_table(CLAIMS[0], no_value)
