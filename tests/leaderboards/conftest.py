"""Fixtures the leaderboard, report and viewer tests share."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def loopback_runs(tmp_path_factory):
    """Runs of `harness eval` against loopback judges (tests/leaderboards/runs.py), made once."""
    from tests.leaderboards.runs import make_loopback_runs

    return make_loopback_runs(tmp_path_factory.getbasetemp() / "leaderboard-runs")
