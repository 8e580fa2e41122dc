"""Method and baselines side by side on the leaderboard: each row names its solver (the default's
too), and a lower-is-better headline (excess F1) ranks ascending."""

from __future__ import annotations

from harness.records import RunConfig
from harness.runner import plan_run, run_eval
from harness.suite import get_suite
from leaderboards.aggregate import build_leaderboard

TASK = "papers.plugin_fractional_threshold"


def test_solvers_sit_side_by_side_and_errors_rank_ascending(tmp_path):
    for options in ({"seeds": 2}, {"solver": "half", "seeds": 2}, {"solver": "validation", "seeds": 2}):
        suite = get_suite(TASK, options)
        plan = plan_run(RunConfig(suite=TASK, models={}, suite_options=options), tmp_path, suite=suite)
        assert run_eval(plan, show_progress=False).counts["sample_errors"] == 0
    board = build_leaderboard([tmp_path], TASK)
    assert board.metric.startswith("excess_f1") and get_suite(TASK).metric_spec(board.metric).lower_is_better
    labels = [r.label for r in board.rows]
    assert sorted(labels) == ["seeds=2; solver=fixed_point", "seeds=2; solver=half", "seeds=2; solver=validation"]
    values = [r.metrics[board.metric].value for r in board.rows]
    assert values == sorted(values)  # best (smallest excess) first
    ranks = [r.rank for r in board.rows]
    assert ranks == sorted(ranks) and ranks[0] == 1
