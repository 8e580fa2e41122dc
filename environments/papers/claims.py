"""The claim check: every solver of a task on the same seeds, paired comparisons, a verdict.

A condition is decided by where its 95% interval lies: wholly on the criterion's side ->
holds; wholly on the other side -> fails; across the threshold -> undecided. The verdict is
`reproduced` when every condition holds, `not reproduced` when any fails, else `inconclusive`,
with the seeds it would take (normal approximation: the interval's half-width 1.96 sd / sqrt(n)
must shrink below the distance of the estimate from the threshold).
"""

from __future__ import annotations

import asyncio
import math
import time

import numpy as np

from environments.papers.base import Condition, PaperTask
from environments.papers.outcomes import CheckReport, ConditionResult, Outcome, Summary, Verdict
from harness.errors import HarnessError
from harness.suite import SampleContext

RESAMPLES = 4000


def bootstrap_mean_ci(values: np.ndarray, seed: int = 0) -> tuple[float, float]:
    """95% percentile-bootstrap CI of the mean, resampling seeds (for paired values: their differences)."""
    rng = np.random.default_rng(seed)
    means = values[rng.integers(0, values.size, size=(RESAMPLES, values.size))].mean(axis=1)
    lo, hi = np.quantile(means, [0.025, 0.975])
    return float(lo), float(hi)


def decide(estimate: float, lo: float, hi: float, op: str, threshold: float) -> Outcome:
    if op == ">=":
        return "holds" if lo >= threshold else "fails" if hi < threshold else "undecided"
    return "holds" if hi <= threshold else "fails" if lo > threshold else "undecided"


def seeds_needed(values: np.ndarray, threshold: float) -> int | None:
    gap = abs(float(values.mean()) - threshold)
    sd = float(values.std(ddof=1)) if values.size > 1 else 0.0
    if gap == 0.0:
        return None
    return max(values.size + 1, math.ceil((1.96 * sd / gap) ** 2))


def per_seed(table: dict[tuple[str, str, int], dict[str, float | None]], metric: str, setting: str,
             solver: str, seeds: int) -> np.ndarray:
    values = [table[(solver, setting, s)].get(metric) for s in range(seeds)]
    return np.array([np.nan if v is None else v for v in values], dtype=float)


def condition_values(cond: Condition, table: dict[tuple[str, str, int], dict[str, float | None]], seeds: int,
                     setting: str) -> np.ndarray:
    """Per seed: the metric (minus `versus`'s, paired by seed) in one setting; NaN where missing."""
    values = per_seed(table, cond.metric, setting, cond.solver, seeds)
    if cond.versus:
        values = values - per_seed(table, cond.metric, setting, cond.versus, seeds)
    return values


def evaluate(cond: Condition, table: dict[tuple[str, str, int], dict[str, float | None]], seeds: int) -> ConditionResult:
    values = condition_values(cond, table, seeds, cond.setting)
    if cond.versus_setting:  # paired by seed across settings: each seed is one draw of both
        values = values - condition_values(cond, table, seeds, cond.versus_setting)
    values = values[~np.isnan(values)]
    if values.size == 0:
        return ConditionResult(condition=cond.text(), estimate=None, ci_low=None, ci_high=None, n=0, outcome="undecided")
    if cond.stat == "mean":
        estimate = float(values.mean())
        lo, hi = bootstrap_mean_ci(values)
    else:  # the worst seed: exact over the seeds run, no sampling interval
        estimate = float(values.min() if cond.stat == "min" else values.max())
        lo = hi = estimate
    outcome = decide(estimate, lo, hi, cond.op, cond.threshold)
    needed = seeds_needed(values, cond.threshold) if outcome == "undecided" and cond.stat == "mean" else None
    return ConditionResult(condition=cond.text(), estimate=estimate, ci_low=lo, ci_high=hi, n=int(values.size),
                           outcome=outcome, seeds_needed=needed)


def run_all(task_cls: type[PaperTask], seeds: int) -> dict[tuple[str, str, int], dict[str, float | None]]:
    """(solver, setting, seed) -> scores, through the suite contract itself (solve, then score)."""
    table: dict[tuple[str, str, int], dict[str, float | None]] = {}
    for solver in task_cls.solvers:
        suite = task_cls(task_cls.Options(solver=solver, seeds=seeds))
        for sample in suite.load_samples(None):
            ctx = SampleContext({}, sample.data["seed"], {})
            outcome = asyncio.run(suite.run_sample(sample, ctx))
            if outcome.errors:
                raise HarnessError(f"{task_cls.task} {solver} {sample.id}: {'; '.join(outcome.errors)}")
            table[(solver, sample.data["setting"], sample.data["seed"])] = outcome.scores
    return table


def check(task_cls: type[PaperTask], seeds: int) -> CheckReport:
    t0 = time.perf_counter()
    table = run_all(task_cls, seeds)
    claim = task_cls.claim
    conditions = [evaluate(c, table, seeds) for c in claim.criterion]
    outcomes = {c.outcome for c in conditions}
    verdict: Verdict = ("not reproduced" if "fails" in outcomes else
                        "reproduced" if outcomes == {"holds"} else "inconclusive")
    head = task_cls.metric_names[0]
    summaries = []
    for setting in task_cls.settings:
        for solver in task_cls.solvers:
            for metric in task_cls.metric_names:
                v = per_seed(table, metric, setting, solver, seeds)
                v = v[~np.isnan(v)]
                lo, hi = bootstrap_mean_ci(v) if v.size else (None, None)
                summaries.append(Summary(solver=solver, setting=setting, metric=metric,
                                         mean=float(v.mean()) if v.size else None, ci_low=lo, ci_high=hi, n=int(v.size)))
    method = task_cls.solvers[0]
    paired = [evaluate(Condition(metric=head, setting=s, solver=method, versus=b, op=">=", threshold=0.0), table, seeds)
              for s in task_cls.settings for b in task_cls.solvers[1:]]
    needed = [c.seeds_needed for c in conditions if c.outcome == "undecided" and c.seeds_needed is not None]
    return CheckReport(task=task_cls.task, claim=claim.paper, setting=claim.setting, seeds=seeds, verdict=verdict,
                       conditions=conditions, summaries=summaries, paired=paired,
                       seeds_to_decide=max(needed) if verdict == "inconclusive" and needed else None,
                       wall_s=round(time.perf_counter() - t0, 2))
