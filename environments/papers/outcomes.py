"""What a claim check reports (`claims.check`), as saved and read back: each condition's estimate, CI and
outcome, the solvers' summaries, the paired differences, the verdict. Its own module, below `base.py` and
`claims.py`, so that the claims table (`report.py`) reads saved checks without importing the tasks.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

Outcome = Literal["holds", "fails", "undecided"]
Verdict = Literal["reproduced", "not reproduced", "inconclusive"]


class ConditionResult(BaseModel):
    condition: str
    estimate: float | None
    ci_low: float | None
    ci_high: float | None
    n: int
    outcome: Outcome
    seeds_needed: int | None = None  # undecided only; None there: the estimate sits on the threshold


class Summary(BaseModel):
    """One solver's metric in one setting: mean over seeds with its bootstrap CI."""

    solver: str
    setting: str
    metric: str
    mean: float | None
    ci_low: float | None
    ci_high: float | None
    n: int


class CheckReport(BaseModel):
    task: str
    claim: str
    setting: str
    seeds: int
    verdict: Verdict
    conditions: list[ConditionResult]
    summaries: list[Summary]
    paired: list[ConditionResult]  # the headline metric, method minus each baseline (context, not criterion)
    seeds_to_decide: int | None
    wall_s: float
