"""From per-seed numbers to a verdict: one interval method, one decision rule, one "seeds it
would take" estimate, for every family.

A condition holds when its interval lies wholly on the claimed side of the threshold, fails when it
lies wholly on the other side (beyond `refute_at` when the condition names one), and is undecided
otherwise. A claim is reproduced when every condition holds, not reproduced when any fails, and
inconclusive otherwise. Because the verdict is computed from the interval that is printed beside
it, the two cannot disagree.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence

import numpy as np
from pydantic import BaseModel
from scipy import stats as scipy_stats

from harness.claims.model import Claim, Condition, Op, Outcome, Verdict
from harness.stats import mean_interval

# (arm, setting, seed) -> the cell's scores (None: the metric is not defined for that arm)
CellTable = Mapping[tuple[str, str, int], Mapping[str, float | None]]
# A family's gate: why a look cannot decide whatever its intervals say (None: it may decide), from
# the claim (its `protocol` holds the gate's settings), the cells and the look's seeds. A gated look
# is inconclusive -- a gate never makes a claim fail. PreFT's: the baseline arm must have learned.
Gate = Callable[[Claim, CellTable, Sequence[int]], str | None]
MAX_SEEDS = 100_000


class ConditionResult(BaseModel):
    condition: str
    estimate: float | None
    ci_low: float | None
    ci_high: float | None
    n: int
    level: float
    outcome: Outcome
    seeds_needed: int | None = None  # undecided only; None there: no finite number decides it


def decide(lo: float, hi: float, op: Op, threshold: float, refute_at: float | None = None) -> Outcome:
    """The one rule: where the interval [lo, hi] lies against the threshold. A strict op needs the
    interval strictly beyond the threshold to hold; either way it fails only when the interval lies
    wholly, strictly, on the other side of the refute point (an interval touching it is undecided)."""
    other = threshold if refute_at is None else refute_at
    if op in (">=", ">"):
        above = lo > threshold if op == ">" else lo >= threshold
        return "holds" if above else "fails" if hi < other else "undecided"
    below = hi < threshold if op == "<" else hi <= threshold
    return "holds" if below else "fails" if lo > other else "undecided"


def combine(outcomes: Iterable[Outcome]) -> Verdict:
    found = list(outcomes)
    if "fails" in found:
        return "not reproduced"
    return "reproduced" if found and all(o == "holds" for o in found) else "inconclusive"


def seeds_to_decide(values: np.ndarray, threshold: float, level: float) -> int | None:
    """The smallest n at which a t interval of this spread would clear the threshold if the mean
    stayed where it is (a planning figure, not a promise); None when the mean sits on the
    threshold or the spread is unknown (fewer than two values)."""
    gap = abs(float(values.mean()) - threshold)
    if values.size < 2 or gap == 0.0:
        return None
    sd = float(values.std(ddof=1))
    if sd == 0.0:
        return values.size + 1
    q = 1 - (1 - level) / 2
    n = max(values.size + 1, 2)
    while n <= MAX_SEEDS:
        if scipy_stats.t.ppf(q, n - 1) * sd / math.sqrt(n) < gap:
            return n
        n = n + 1 if n < 100 else int(n * 1.05)
    return None


def per_seed(table: CellTable, metric: str, setting: str, arm: str, seeds: Sequence[int]) -> np.ndarray:
    values = [table[(arm, setting, s)].get(metric) for s in seeds]
    return np.array([np.nan if v is None else v for v in values], dtype=float)


def condition_values(cond: Condition, table: CellTable, seeds: Sequence[int]) -> np.ndarray:
    """Per seed: the condition's quantity (NaN where a metric is missing)."""

    def one_setting(setting: str) -> np.ndarray:
        v = per_seed(table, cond.metric, setting, cond.arm, seeds)
        return v - per_seed(table, cond.metric, setting, cond.versus, seeds) if cond.versus else v

    values = one_setting(cond.setting)
    if cond.versus_setting:  # paired by seed across settings: each seed is one draw of both
        values = values - one_setting(cond.versus_setting)
    return values


def evaluate(cond: Condition, table: CellTable, seeds: Sequence[int], level: float) -> ConditionResult:
    values = condition_values(cond, table, seeds)
    values = values[~np.isnan(values)]
    if values.size == 0:
        return ConditionResult(condition=cond.text(), estimate=None, ci_low=None, ci_high=None, n=0, level=level,
                               outcome="undecided")
    if cond.stat == "mean":
        estimate, lo, hi = mean_interval(values, level)
    else:  # the worst seed: exact over the seeds run, no sampling interval
        estimate = float(values.min() if cond.stat == "min" else values.max())
        lo = hi = estimate
    outcome = decide(lo, hi, cond.op, cond.threshold, cond.refute_at)
    needed = seeds_to_decide(values, cond.threshold, level) if outcome == "undecided" and cond.stat == "mean" else None
    return ConditionResult(condition=cond.text(), estimate=estimate, ci_low=lo if math.isfinite(lo) else None,
                           ci_high=hi if math.isfinite(hi) else None, n=int(values.size), level=level,
                           outcome=outcome, seeds_needed=needed)
