"""Fixtures the leaderboard, report and viewer tests share."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def loopback_runs(tmp_path_factory):
    """Runs of `harness eval` against loopback judges (tests/leaderboards/runs.py), made once."""
    from tests.leaderboards.runs import make_loopback_runs

    return make_loopback_runs(tmp_path_factory.getbasetemp() / "leaderboard-runs")


@pytest.fixture(scope="session")
def report_run_dir(tmp_path_factory):
    """An adv0 run with filmstrips, a prograf run with renders and saved claim checks
    (tests/leaderboards/report_runs.py), made once."""
    from tests.leaderboards.report_runs import make_report_runs

    return make_report_runs(tmp_path_factory.mktemp("report-runs"))
