"""Confidence intervals: the one home for every interval the harness prints.

- Pooled ratios over many independent units (e.g. dialogues): a bootstrap that resamples units,
  not the items inside them (`ratio_metric`, `summed_metric`, `quantile_metric`).
- A mean over few units (a claim's seeds, paired differences): Student-t (`mean_interval`). A
  percentile bootstrap over 3 seeds is the min-max range of three numbers and covers ~71% for a
  nominal 95%; the t interval's coverage is measured by simulation in
  `tests/harness/test_interval_coverage.py` (numbers and its known limit -- strongly skewed
  differences at n <= 10 -- in `docs/claims.md`).
- Proportions from counts: Wilson's score interval (`wilson_interval`, `wilson_metric`), and a
  difference of two proportions by Newcombe's hybrid score interval (`newcombe_difference`; paired
  0/1 outcomes on the same units: `newcombe_paired_difference`).
"""

from __future__ import annotations

from collections.abc import Callable

import math
from statistics import NormalDist
from typing import Literal

import numpy as np
from scipy import stats as scipy_stats

from harness.records import Metric

BOOTSTRAP_RESAMPLES = 2000


def ratio_metric(
    counts: np.ndarray,
    numerator: Callable[[np.ndarray], np.ndarray],
    denominator: Callable[[np.ndarray], np.ndarray],
    *,
    seed: int = 0,
    resamples: int = BOOTSTRAP_RESAMPLES,
    level: float = 0.95,
) -> Metric:
    """`counts` is (units, columns). `numerator`/`denominator` map a summed count vector (or a
    matrix of them, one per resample) to a number. Units whose denominator share is zero still
    count as units: they are part of what was sampled."""
    counts = np.asarray(counts, dtype=float)
    n_units = counts.shape[0]
    if n_units == 0:
        return Metric(value=None, n=0)
    total = counts.sum(axis=0)
    den = float(denominator(total))
    if den == 0:
        return Metric(value=None, n=n_units)
    value = float(numerator(total)) / den
    rng = np.random.default_rng(seed)
    # Resampled sums, a block of resamples at a time so that memory stays near 160 MB whatever the
    # number of units (10k dialogues at once would take GBs); the draws are the same as in one block.
    block = max(1, min(resamples, 20_000_000 // max(1, n_units * counts.shape[1])))
    sums = np.concatenate([counts[rng.integers(0, n_units, size=(min(block, resamples - start), n_units))].sum(axis=1)
                           for start in range(0, resamples, block)])  # (resamples, columns)
    nums, dens = numerator(sums.T), denominator(sums.T)
    ok = dens > 0
    stats = nums[ok] / dens[ok]
    alpha = (1 - level) / 2
    lo, hi = np.quantile(stats, [alpha, 1 - alpha]) if stats.size else (np.nan, np.nan)
    return Metric(value=value, ci_low=float(lo), ci_high=float(hi), n=n_units)


def summed_metric(
    per_unit: np.ndarray,
    statistic: Callable[[np.ndarray], float | None],
    *,
    seed: int = 0,
    resamples: int = BOOTSTRAP_RESAMPLES,
    level: float = 0.95,
) -> Metric:
    """Any statistic of the sum over units (e.g. kappa of a pooled confusion matrix), with a
    bootstrap CI that resamples units. `per_unit` has the unit on its first axis."""
    per_unit = np.asarray(per_unit, dtype=float)
    n_units = per_unit.shape[0]
    if n_units == 0:
        return Metric(value=None, n=0)
    value = statistic(per_unit.sum(axis=0))
    if value is None:
        return Metric(value=None, n=n_units)
    rng = np.random.default_rng(seed)
    draws = []
    for _ in range(resamples):
        stat = statistic(per_unit[rng.integers(0, n_units, size=n_units)].sum(axis=0))
        if stat is not None:
            draws.append(stat)
    alpha = (1 - level) / 2
    lo, hi = np.quantile(draws, [alpha, 1 - alpha]) if draws else (np.nan, np.nan)
    return Metric(value=float(value), ci_low=float(lo), ci_high=float(hi), n=n_units)


def resampled_metric(
    units: np.ndarray,
    statistic: Callable[[np.ndarray], float | None],
    *,
    seed: int = 0,
    resamples: int = BOOTSTRAP_RESAMPLES,
    level: float = 0.95,
) -> Metric:
    """Any statistic of the units themselves (not of their sum: e.g. an agreement coefficient of
    the raters' scores, one unit = one rated item on the first axis), with a percentile bootstrap
    CI that resamples units; a resample the statistic cannot score (None) is left out, as in
    `summed_metric`. The draws are the same as `summed_metric`'s for the same seed."""
    units = np.asarray(units, dtype=float)
    n_units = units.shape[0]
    value = statistic(units) if n_units else None
    if value is None:
        return Metric(value=None, n=n_units)
    if n_units < 2:  # one unit resamples to itself: no interval to speak of
        return Metric(value=float(value), n=n_units)
    rng = np.random.default_rng(seed)
    draws = [s for s in (statistic(units[rng.integers(0, n_units, size=n_units)]) for _ in range(resamples))
             if s is not None]
    alpha = (1 - level) / 2
    lo, hi = np.quantile(draws, [alpha, 1 - alpha]) if draws else (np.nan, np.nan)
    return Metric(value=float(value), ci_low=float(lo), ci_high=float(hi), n=n_units)


def cohen_kappa(confusion: np.ndarray, weights: Literal["linear", "quadratic"] | None = None) -> float | None:
    """Cohen's kappa of a square confusion matrix (rows: reference, columns: prediction);
    None when chance agreement is total (kappa undefined) or the matrix is empty. `weights`: the
    weighted kappa of an ordinal scale (categories in order), disagreement weighted by |i - j| or
    (i - j)^2."""
    confusion = np.asarray(confusion, dtype=float)
    total = confusion.sum()
    if total == 0:
        return None
    if weights is not None:
        i, j = np.indices(confusion.shape)
        w = np.abs(i - j) if weights == "linear" else (i - j) ** 2
        chance = np.outer(confusion.sum(axis=1), confusion.sum(axis=0)) / total
        disagreement_by_chance = float((w * chance).sum())
        if disagreement_by_chance == 0:
            return None
        return 1.0 - float((w * confusion).sum()) / disagreement_by_chance
    observed = np.trace(confusion) / total
    expected = float((confusion.sum(axis=1) * confusion.sum(axis=0)).sum()) / total**2
    if expected >= 1.0:
        return None
    return float((observed - expected) / (1.0 - expected))


def nearest_rank(values: list[float], q: float) -> float:
    """The q-quantile of `values` by nearest rank (a benchmark's p95: a value that was measured)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def quantile_metric(values: np.ndarray, q: float = 0.5, *, seed: int = 0, resamples: int = BOOTSTRAP_RESAMPLES,
                    level: float = 0.95) -> Metric:
    """The q-quantile of one value per unit (e.g. each episode's min TTC), with a bootstrap CI
    that resamples units."""
    values = np.asarray(values, dtype=float)
    if values.size == 0:
        return Metric(value=None, n=0)
    rng = np.random.default_rng(seed)
    draws = np.quantile(values[rng.integers(0, values.size, size=(resamples, values.size))], q, axis=1)
    alpha = (1 - level) / 2
    lo, hi = np.quantile(draws, [alpha, 1 - alpha])
    return Metric(value=float(np.quantile(values, q)), ci_low=float(lo), ci_high=float(hi), n=int(values.size))


# A percentile bootstrap is acceptable, for a statistic that is not a mean, at this many units per
# sample or more; below it the interval is the range of a handful of resampled values and under-covers.
BOOTSTRAP_MIN_UNITS = 30


def bootstrap_difference(a: np.ndarray | list[float], b: np.ndarray | list[float], statistic: Callable[[np.ndarray], float],
                         level: float = 0.95, *, seed: int = 0,
                         resamples: int = BOOTSTRAP_RESAMPLES) -> tuple[float, float, float, float]:
    """(statistic(a) - statistic(b), low, high, se) for two independent samples of units (e.g.
    episodes): the percentile bootstrap interval, each sample resampled on its own, and the
    bootstrap standard error. Only for statistics that are not means (quantiles, the number of
    distinct values), where no t interval applies, and only at `BOOTSTRAP_MIN_UNITS` (30) units
    per sample or more: at the small unit counts quick checks have, a percentile interval's
    coverage is unknown and often far below nominal (~71% at 3 units for a mean). A difference of
    means: `welch_interval`. An empty sample gives NaNs."""
    a, b = np.asarray(a), np.asarray(b)
    if len(a) == 0 or len(b) == 0:
        return float("nan"), float("nan"), float("nan"), float("nan")
    d = float(statistic(a) - statistic(b))
    rng = np.random.default_rng(seed)
    reps = np.array([statistic(a[rng.integers(0, len(a), len(a))]) - statistic(b[rng.integers(0, len(b), len(b))])
                     for _ in range(resamples)], dtype=float)
    alpha = (1 - level) / 2
    lo, hi = np.quantile(reps, [alpha, 1 - alpha])
    return d, float(lo), float(hi), float(reps.std())


def z_value(level: float = 0.95) -> float:
    """The two-sided normal quantile of a confidence level (1.96 at 0.95)."""
    return NormalDist().inv_cdf(1 - (1 - level) / 2)


def mean_interval(values: np.ndarray | list[float], level: float = 0.95) -> tuple[float, float, float]:
    """(mean, low, high): the Student-t interval of the mean of independent values (for a paired
    comparison: of the per-unit differences). One value gives an unbounded interval: one seed says
    nothing about the spread. Identical values give a zero-width interval (no sampling noise seen)."""
    v = np.asarray(values, dtype=float)
    if v.size == 0:
        raise ValueError("mean_interval: no values")
    mean = float(v.mean())
    if v.size == 1:
        return mean, -math.inf, math.inf
    half = float(scipy_stats.t.ppf(1 - (1 - level) / 2, v.size - 1) * v.std(ddof=1) / math.sqrt(v.size))
    return mean, mean - half, mean + half


def welch_interval(a: np.ndarray | list[float], b: np.ndarray | list[float],
                   level: float = 0.95) -> tuple[float, float, float]:
    """(mean(a) - mean(b), low, high): Welch's t interval for the difference of the means of two
    independent samples (arms), with Satterthwaite's degrees of freedom -- no equal-variance
    assumption. Its coverage at small n is the t interval's (near nominal unless the data are
    strongly skewed), where a percentile bootstrap of a difference of means under-covers. An arm
    with one value gives an unbounded interval (its spread is unknown); two constant arms give a
    zero-width one (no sampling noise seen)."""
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if x.size == 0 or y.size == 0:
        raise ValueError("welch_interval: an arm has no values")
    d = float(x.mean() - y.mean())
    if x.size < 2 or y.size < 2:
        return d, -math.inf, math.inf
    va, vb = float(x.var(ddof=1)) / x.size, float(y.var(ddof=1)) / y.size
    if va + vb == 0.0:
        return d, d, d
    df = (va + vb) ** 2 / (va**2 / (x.size - 1) + vb**2 / (y.size - 1))
    half = float(scipy_stats.t.ppf(1 - (1 - level) / 2, df)) * math.sqrt(va + vb)
    return d, d - half, d + half


def paired_ratio_interval(x: np.ndarray | list[float], y: np.ndarray | list[float],
                          level: float = 0.95) -> tuple[float, float, float]:
    """(mean(x) / mean(y), low, high) for pairs (x_i, y_i) measured on the same units, by Fieller's
    method: the ratios R for which the Student-t interval of the paired differences x_i - R y_i
    contains 0 (a t test inverted, so its coverage is `mean_interval`'s; and "ratio <= r" is
    exactly "the t interval of x - r y lies at or below 0"). Unbounded (-inf, inf) when mean(y) is
    not clearly away from 0 (the set of such R is then not an interval) or with fewer than two
    pairs. A percentile bootstrap of a ratio over a handful of units has unknown coverage."""
    xs, ys = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if xs.size == 0 or xs.size != ys.size:
        raise ValueError("paired_ratio_interval: needs the same, non-zero number of x and y values")
    mx, my = float(xs.mean()), float(ys.mean())
    ratio = mx / my if my != 0.0 else math.nan
    if xs.size < 2:
        return ratio, -math.inf, math.inf
    c = float(scipy_stats.t.ppf(1 - (1 - level) / 2, xs.size - 1)) ** 2 / xs.size
    cov = np.cov(xs, ys, ddof=1)
    sxx, sxy, syy = float(cov[0, 0]), float(cov[0, 1]), float(cov[1, 1])
    # (mx - R my)^2 <= c (sxx - 2 R sxy + R^2 syy)  <=>  qa R^2 + qb R + qc <= 0
    qa, qb, qc = my * my - c * syy, -2.0 * (mx * my - c * sxy), mx * mx - c * sxx
    if qa <= 0.0:
        return ratio, -math.inf, math.inf
    root = math.sqrt(max(qb * qb - 4.0 * qa * qc, 0.0))
    return ratio, (-qb - root) / (2.0 * qa), (-qb + root) / (2.0 * qa)


def mean_metric(values: np.ndarray | list[float], level: float = 0.95) -> Metric:
    """`mean_interval` as a `Metric` (None when there are no values; no interval from one value)."""
    v = np.asarray(values, dtype=float)
    if v.size == 0:
        return Metric(value=None, n=0)
    mean, lo, hi = mean_interval(v, level)
    if not math.isfinite(lo):
        return Metric(value=mean, n=int(v.size))
    return Metric(value=mean, ci_low=lo, ci_high=hi, n=int(v.size))


def wilson_interval(hits: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Wilson's score interval of `hits` in `n` trials ((0, 1) when n = 0): unlike a bootstrap of
    the counts it does not collapse to [1, 1] when every trial was a hit."""
    if n == 0:
        return 0.0, 1.0
    z = z_value(level)
    p = hits / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def wilson_metric(hits: int, n: int, level: float = 0.95) -> Metric:
    """A proportion from counts alone with its Wilson score interval."""
    if n == 0:
        return Metric(value=None, n=0)
    lo, hi = wilson_interval(hits, n, level)
    return Metric(value=hits / n, ci_low=lo, ci_high=hi, n=n)


def newcombe_difference(k1: int, n1: int, k2: int, n2: int, level: float = 0.95) -> tuple[float, float, float]:
    """p1 - p2 with its interval by Newcombe's hybrid score method (1998, method 10: Wilson
    intervals per arm), good at the small counts quick checks have."""
    p1, p2 = k1 / max(n1, 1), k2 / max(n2, 1)
    l1, u1 = wilson_interval(k1, n1, level)
    l2, u2 = wilson_interval(k2, n2, level)
    d = p1 - p2
    return d, d - math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2), d + math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2)


def newcombe_paired_difference(both: int, first_only: int, second_only: int, neither: int,
                               level: float = 0.95) -> tuple[float, float, float]:
    """(p1 - p2, low, high) for two proportions measured on the same units (paired 0/1 outcomes),
    from the 2x2 counts: `both` units positive under both, `first_only`, `second_only`, `neither`
    (Newcombe's a, b, c, d; p1 = (a + b) / n, p2 = (a + c) / n, so p1 - p2 = (b - c) / n).

    Newcombe (1998), "Improved confidence intervals for the difference between binomial proportions
    based on paired data", Statistics in Medicine 17:2635-2650, method 10 (the square-and-add score
    interval): the Wilson score intervals [l1, u1] of p1 and [l2, u2] of p2 are combined as
        low  = D - sqrt((p1 - l1)^2 - 2 phi (p1 - l1)(u2 - p2) + (u2 - p2)^2)
        high = D + sqrt((u1 - p1)^2 - 2 phi (u1 - p1)(p2 - l2) + (p2 - l2)^2)
    where phi estimates the correlation of the pair: phi = C / sqrt((a+b)(c+d)(a+c)(b+d)) with
    C = ad - bc - n/2 when ad - bc > n/2, 0 when 0 <= ad - bc <= n/2, and ad - bc when it is
    negative (Newcombe's correction of a positive correlation; as in his Table II), and phi = 0
    when the denominator is 0 (a margin is empty).

    Unlike a t interval on the -1/0/+1 per-unit differences it never collapses to a point: with no
    discordant units it is a symmetric interval around 0 whose width shrinks with n, and it stays
    within [-1, 1]. Coverage measured in `tests/harness/test_interval_coverage.py` (docs/claims.md)."""
    counts = (both, first_only, second_only, neither)
    if min(counts) < 0:
        raise ValueError(f"newcombe_paired_difference: negative count in {counts}")
    n = sum(counts)
    if n == 0:
        raise ValueError("newcombe_paired_difference: no units")
    a, b, c, d = counts
    p1, p2 = (a + b) / n, (a + c) / n
    l1, u1 = wilson_interval(a + b, n, level)
    l2, u2 = wilson_interval(a + c, n, level)
    margins = (a + b) * (c + d) * (a + c) * (b + d)
    excess = a * d - b * c
    corrected = excess - n / 2 if excess > n / 2 else 0.0 if excess >= 0 else float(excess)
    phi = corrected / math.sqrt(margins) if margins > 0 else 0.0
    down_1, up_2 = p1 - l1, u2 - p2  # how far p1 may be lower, p2 higher
    up_1, down_2 = u1 - p1, p2 - l2
    diff = (b - c) / n
    low = diff - math.sqrt(max(0.0, down_1 * down_1 - 2 * phi * down_1 * up_2 + up_2 * up_2))
    high = diff + math.sqrt(max(0.0, up_1 * up_1 - 2 * phi * up_1 * down_2 + down_2 * down_2))
    return diff, max(-1.0, low), min(1.0, high)
