"""`adv0-check`'s pooled failure rate points the right way for each arm's side: an attacker arm
(C1-C5, C8) scores `failures_exposed_rate` (higher is better), a defender arm (C6, C7, C9)
`defender_failure_rate` (lower is better), each run's headline is its arm's, and a leaderboard
ranking by either puts the better arm of that side first (before: one metric, declared higher is
better, ranked C6/C7's defenders backwards)."""

from __future__ import annotations

import pytest

from environments.adv0.checks.cells import ARMS, Cell
from environments.adv0.checks.check_suite import DEFENDER_ARMS, cell_scores
from environments.adv0.sim.scenario import Collision, EpisodeResult
from harness.records import Metric
from harness.suite import get_suite
from leaderboards.aggregate import Row, rank_rows

DEFENDER_CHECKS = {"C6", "C7", "C9"}


def episode(failed: bool) -> EpisodeResult:
    hit = Collision(t=1.0, other="attacker", fault="defender", rule="test", geometry=[]) if failed else None
    return EpisodeResult(
        family="toy", seed=0, attack=None, defender="idm", steps=1, duration_s=1.0, crashed=failed, collision=hit
    )


def cell(check: str, arm: str, failures: int, episodes: int = 4) -> Cell:
    role = "held_out" if check in ("C6", "C7") else "with" if check == "C9" else "eval"
    return Cell(check=check, arm=arm, seed=0, episodes={role: [episode(i < failures) for i in range(episodes)]})


def test_every_arm_has_its_side_and_its_own_headline():
    assert DEFENDER_ARMS == {arm for check in DEFENDER_CHECKS for arm in ARMS[check]}
    for check, arms in ARMS.items():
        for arm in arms:
            suite = get_suite("adv0-check", {"check": check, "arm": arm})
            defender = check in DEFENDER_CHECKS
            head = "defender_failure_rate" if defender else "failures_exposed_rate"
            other = "failures_exposed_rate" if defender else "defender_failure_rate"
            assert suite.headline_metric == head, (check, arm)
            assert suite.metric_spec(head).lower_is_better is defender, (check, arm)
            scores = cell_scores(cell(check, arm, failures=1))
            assert scores[head] == 0.25 and other not in scores, (check, arm, scores)


def _row(name: str, metric: str, value: float) -> Row:
    return Row(model=name, judge="", suite_version="1.1.0", runs=[], metrics={metric: Metric(value=value, n=4)})


@pytest.mark.parametrize(
    ("check", "arms", "best"),
    [("C6", ("adv0-trained", "normally-trained"), "adv0-trained"), ("C3", ("adv0", "random"), "adv0")],
)
def test_a_leaderboard_ranks_each_side_by_its_own_direction(check, arms, best):
    # The better arm fails less when it defends and exposes more failures when it attacks: 1/4 vs 3/4.
    good, bad = (1, 3) if check in DEFENDER_CHECKS else (3, 1)
    suite = get_suite("adv0-check", {"check": check, "arm": arms[0]})
    metric = suite.headline_metric
    rows = [_row(arm, metric, cell_scores(cell(check, arm, n))[metric] or 0.0) for arm, n in zip(arms, (good, bad))]
    ranked = rank_rows(rows, metric, lower_is_better=suite.metric_spec(metric).lower_is_better)
    assert ranked[0].model == best
