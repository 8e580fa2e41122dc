"""Paired comparison of two runs over the samples both ran.

The unit is the suite's independent unit as the records name it: the sample id, epochs pooled
(for ProactBench, the dialogue). For every shared unit the suite's own `metrics` scores that
unit alone in each run, so a unit's value means exactly what the suite means by the metric.
The paired bootstrap then resamples units -- the same draw for both runs -- and takes the mean
per-unit difference A - B. Each unit weighs the same here, which is what a paired test over
samples asks; the leaderboard's pooled figure (e.g. over triggers) can differ slightly when units
carry different numbers of items.

The p-value is two-sided, from the bootstrap distribution re-centred on zero (the null of no
difference): p = (1 + #{|d* - mean| >= |mean|}) / (B + 1). Seeded, so a comparison is repeatable.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

import numpy as np

from harness.errors import HarnessError
from harness.records import SampleRecord
from harness.stats import BOOTSTRAP_RESAMPLES
from leaderboards.runs import RunInfo, find_run

if TYPE_CHECKING:
    from harness.suite import Suite


@dataclass
class MetricComparison:
    metric: str
    n: int  # shared units where both runs have a value for this metric
    mean_a: float | None
    mean_b: float | None
    diff: float | None  # mean over units of (A - B)
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    a_better: int  # units whose value is higher in A
    b_better: int

    @property
    def flipped(self) -> int:
        return self.a_better + self.b_better


@dataclass
class Comparison:
    run_a: RunInfo
    run_b: RunInfo
    shared: int
    only_a: int
    only_b: int
    metrics: list[MetricComparison]
    resamples: int
    seed: int
    notes: list[str] = field(default_factory=list)


def _units(records: list[SampleRecord]) -> dict[str, list[SampleRecord]]:
    out: dict[str, list[SampleRecord]] = {}
    for rec in records:
        out.setdefault(rec.sample_id, []).append(rec)
    return out


def unit_values(suite: Suite, units: dict[str, list[SampleRecord]], ids: list[str]) -> dict[str, list[float | None]]:
    """metric -> value per unit (in `ids` order), each unit scored alone by the suite."""
    out: dict[str, list[float | None]] = {}
    for i, uid in enumerate(ids):
        for name, m in suite.metrics(units[uid], seed=0).items():
            out.setdefault(name, [None] * len(ids))[i] = m.value
    return out


def paired_bootstrap(a: np.ndarray, b: np.ndarray, *, resamples: int, seed: int,
                     level: float = 0.95) -> tuple[float, float, float, float]:
    """(mean difference, CI low, CI high, p-value) of the paired units a[i], b[i]."""
    d = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    mean = float(d.mean())
    # With no spread every draw equals the mean: the CI collapses, p is 1 for a zero difference
    # and 1/(B+1) -- the smallest a bootstrap of B draws can claim -- otherwise, never 0.
    rng = np.random.default_rng(seed)
    draws = d[rng.integers(0, d.size, size=(resamples, d.size))].mean(axis=1)
    alpha = (1 - level) / 2
    lo, hi = np.quantile(draws, [alpha, 1 - alpha])
    extreme = int(np.sum(np.abs(draws - mean) >= abs(mean)))
    return mean, float(lo), float(hi), (1 + extreme) / (resamples + 1)


def _check_comparable(a: RunInfo, b: RunInfo) -> list[str]:
    if a.run_id == b.run_id:
        raise HarnessError(f"compare {a.run_id} with itself: pass two different run ids")
    if a.suite != b.suite:
        raise HarnessError(f"runs {a.run_id} ({a.suite}) and {b.run_id} ({b.suite}) are of different suites: "
                           "compare two runs of one suite")
    notes = []
    # Not errors: comparing judges or suite versions can be the point, but never silently.
    for what, va, vb in (("suite version", a.suite_version, b.suite_version), ("judge", a.judge, b.judge)):
        if va != vb:
            notes.append(f"{what} differs: A {va}, B {vb}")
    return notes


def compare_runs(run_dirs: list[Path], run_a: str, run_b: str, *, metrics: list[str] | None = None,
                 resamples: int = BOOTSTRAP_RESAMPLES, seed: int = 0) -> Comparison:
    from harness.suite import get_suite

    a, b = find_run(run_dirs, run_a), find_run(run_dirs, run_b)
    notes = _check_comparable(a, b)
    suite = get_suite(a.suite)
    units_a, units_b = _units(a.read_samples()), _units(b.read_samples())
    shared = [uid for uid in units_a if uid in units_b]
    if not shared:
        raise HarnessError(f"runs {a.run_id} and {b.run_id} share no samples: compare runs over the same corpus "
                           "(e.g. the same --corpus and --limit)")
    values_a, values_b = unit_values(suite, units_a, shared), unit_values(suite, units_b, shared)
    names = [n for n in values_a if n in values_b]
    if metrics:
        unknown = [m for m in metrics if m not in names]
        if unknown:
            raise HarnessError(f"--metric {unknown[0]!r}: suite {a.suite!r} has no such metric; "
                               f"use one of {', '.join(names)}")
        names = list(metrics)
    head = a.headline_metric if a.headline_metric in names else None
    names = ([head] if head else []) + [n for n in names if n != head]
    out = []
    for name in names:
        pairs = [(x, y) for x, y in zip(values_a[name], values_b[name]) if x is not None and y is not None]
        if not pairs:
            out.append(MetricComparison(name, 0, None, None, None, None, None, None, 0, 0))
            continue
        xa, xb = np.array([p[0] for p in pairs]), np.array([p[1] for p in pairs])
        diff, lo, hi, p = paired_bootstrap(xa, xb, resamples=resamples, seed=seed)
        out.append(MetricComparison(name, len(pairs), float(xa.mean()), float(xb.mean()), diff, lo, hi, p,
                                    a_better=int(np.sum(xa > xb)), b_better=int(np.sum(xb > xa))))
    return Comparison(a, b, shared=len(shared), only_a=len(units_a) - len(shared),
                      only_b=len(units_b) - len(shared), metrics=out, resamples=resamples, seed=seed, notes=notes)


class MetricComparisonJson(TypedDict):
    metric: str
    n: int
    a: float | None
    b: float | None
    diff: float | None
    diff_ci_low: float | None
    diff_ci_high: float | None
    p_value: float | None
    a_better: int
    b_better: int
    flipped: int


class ComparisonJson(TypedDict):
    """`harness leaderboard compare --json`: a comparison as printed (key order included)."""

    run_a: str
    run_b: str
    suite: str
    shared_samples: int
    only_a: int
    only_b: int
    resamples: int
    seed: int
    notes: list[str]
    metrics: list[MetricComparisonJson]


def comparison_dict(c: Comparison) -> ComparisonJson:
    return {
        "run_a": c.run_a.run_id, "run_b": c.run_b.run_id, "suite": c.run_a.suite,
        "shared_samples": c.shared, "only_a": c.only_a, "only_b": c.only_b,
        "resamples": c.resamples, "seed": c.seed, "notes": c.notes,
        "metrics": [{"metric": m.metric, "n": m.n, "a": m.mean_a, "b": m.mean_b, "diff": m.diff,
                     "diff_ci_low": m.ci_low, "diff_ci_high": m.ci_high, "p_value": m.p_value,
                     "a_better": m.a_better, "b_better": m.b_better, "flipped": m.flipped} for m in c.metrics],
    }
