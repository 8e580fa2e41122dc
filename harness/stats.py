"""Confidence intervals by bootstrap over the independent unit (e.g. the dialogue).

A suite hands over one row of counts per unit; a metric is a ratio of column sums (pooled, like
the official figures), and the interval resamples units, not the items inside them.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

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


def cohen_kappa(confusion: np.ndarray) -> float | None:
    """Cohen's kappa of a square confusion matrix (rows: reference, columns: prediction);
    None when chance agreement is total (kappa undefined) or the matrix is empty."""
    confusion = np.asarray(confusion, dtype=float)
    total = confusion.sum()
    if total == 0:
        return None
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


def wilson_metric(hits: int, n: int, z: float = 1.96) -> Metric:
    """A proportion from counts alone with its Wilson score interval: unlike a bootstrap of the
    counts it does not collapse to [1, 1] when every unit was a hit (a calibration with no false
    positive still has an uncertain precision)."""
    if n == 0:
        return Metric(value=None, n=0)
    p = hits / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return Metric(value=p, ci_low=float(max(0.0, centre - half)), ci_high=float(min(1.0, centre + half)), n=n)
