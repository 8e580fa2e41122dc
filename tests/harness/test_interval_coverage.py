"""The claim intervals cover: Student-t on per-seed values (harness.stats.mean_interval), simulated
from known distributions at the seed counts checks use. Nominal 0.95; asserted >= 0.93 on a normal,
a skewed (gamma, shape 4: skewness 1.0) and two heavy-tailed (Student-t 3 df, Laplace) laws at
n = 3, 5, 10, 20. The known limit -- strongly skewed laws (exponential, skewness 2) under-cover at
small n, as every interval for a mean must -- is measured too, so docs/claims.md's numbers stay
true. 20,000 draws each: the Monte Carlo standard error is 0.0015.

Newcombe's paired interval (harness.stats.newcombe_paired_difference, ProGraf's paired 0/1
comparisons) is checked against published values and its coverage computed exactly -- every 2x2
table of n paired units weighted by its multinomial probability, no Monte Carlo error -- at
n = 20, 40, 80 on known cell probabilities (marginals and correlation), on the few one-way
discordant units where the t interval failed, over a whole grid of cell probabilities, and at its
known limit (one-way discordance with many units positive under both and many under neither)."""

from __future__ import annotations

import itertools
import math
from functools import lru_cache

import numpy as np
import pytest
from scipy import stats
from scipy.special import gammaln

from harness.stats import mean_interval, newcombe_paired_difference

DRAWS = 20_000
LAWS = {
    "normal": (lambda rng, size: rng.normal(0.0, 1.0, size), 0.0),
    "gamma4": (lambda rng, size: rng.gamma(4.0, 1.0, size), 4.0),
    "student_t3": (lambda rng, size: rng.standard_t(3, size), 0.0),
    "laplace": (lambda rng, size: rng.laplace(0.0, 1.0, size), 0.0),
}


def coverage(law: str, n: int, seed: int = 7) -> float:
    draw, mean = LAWS.get(law, (lambda rng, size: rng.exponential(1.0, size), 1.0))
    x = draw(np.random.default_rng(seed), (DRAWS, n))
    # mean_interval one draw at a time is slow at 20k x 16 cases; check it against this vector form below.
    m, s = x.mean(axis=1), x.std(axis=1, ddof=1)
    half = stats.t.ppf(0.975, n - 1) * s / np.sqrt(n)
    return float(np.mean((m - half <= mean) & (mean <= m + half)))


def test_the_vector_form_is_mean_interval():
    rng = np.random.default_rng(1)
    for n in (2, 3, 5, 20):
        x = rng.gamma(2.0, 1.0, n)
        m, lo, hi = mean_interval(x)
        half = stats.t.ppf(0.975, n - 1) * x.std(ddof=1) / np.sqrt(n)
        assert m == pytest.approx(x.mean()) and lo == pytest.approx(m - half) and hi == pytest.approx(m + half)


@pytest.mark.parametrize("law", sorted(LAWS))
@pytest.mark.parametrize("n", [3, 5, 10, 20])
def test_student_t_covers_at_least_093(law, n):
    assert coverage(law, n) >= 0.93


def test_the_known_limit_strong_skew_undercovers_at_small_n():
    # Exponential differences: ~0.88 at n = 5, ~0.92 at n = 20 (docs/claims.md). A percentile
    # bootstrap is far worse (~0.77 at n = 5), so this is the method's limit, not a regression.
    assert 0.85 < coverage("exponential", 5) < 0.91
    assert coverage("exponential", 20) > 0.9


def test_the_percentile_bootstrap_it_replaces_undercovers_at_three_seeds():
    # What the issue measured: at n = 3 the percentile bootstrap of the mean is the min-max range
    # of three numbers -- ~0.71 for a normal law. Kept as a test so the reason stays measured.
    rng = np.random.default_rng(3)
    x = rng.normal(0.0, 1.0, (2000, 3))
    idx = rng.integers(0, 3, (400, 3))
    means = x[:, idx].mean(axis=2)
    lo, hi = np.quantile(means, 0.025, axis=1), np.quantile(means, 0.975, axis=1)
    assert np.mean((lo <= 0) & (0 <= hi)) < 0.8
    assert coverage("normal", 3) > 0.94


def test_one_value_gives_no_interval_and_equal_values_a_point():
    assert mean_interval([0.3])[1:] == (-np.inf, np.inf)
    assert mean_interval([0.2, 0.2, 0.2]) == (pytest.approx(0.2), pytest.approx(0.2), pytest.approx(0.2))
    with pytest.raises(ValueError):
        mean_interval([])


# ---- Newcombe's paired interval (method 10, 1998) ---------------------------------------------

# Newcombe (1998, Stat Med 17:2635-2650) Table II, method 10, 95% limits to 4 places, as reproduced
# in the tests of the R package propint ("the results reported in Newcombe1998"); the last row is
# the square-and-add interval of Fagerland, Lydersen & Laake, "Statistical Analysis of Contingency
# Tables" (2017), ch. 8, as printed by their R package contingencytables. (a, b, c, d) = (both,
# first only, second only, neither).
PUBLISHED = [
    ((36, 12, 2, 0), 0.2, 0.0569, 0.3404),
    ((18, 12, 2, 18), 0.2, 0.0562, 0.3290),
    ((53, 0, 0, 1), 0.0, -0.0729, 0.0729),
    ((0, 30, 0, 0), 1.0, 0.8395, 1.0),
    ((59, 6, 16, 80), -0.0621, -0.1186, -0.0046),
]


@pytest.mark.parametrize(("table", "estimate", "low", "high"), PUBLISHED)
def test_newcombe_paired_reproduces_the_published_values(table, estimate, low, high):
    d, lo, hi = newcombe_paired_difference(*table)
    assert (round(d, 4), round(lo, 4), round(hi, 4)) == (estimate, low, high)


def test_newcombe_paired_degenerate_tables():
    # no discordant units: a symmetric interval around 0, never the t interval's [0, 0]
    assert newcombe_paired_difference(10, 0, 0, 10) == pytest.approx((0.0, -0.0898, 0.0898), abs=1e-4)
    # an empty margin (nothing positive under either): phi's denominator is 0, phi = 0
    assert newcombe_paired_difference(0, 0, 0, 20) == pytest.approx((0.0, -0.1611, 0.1611), abs=1e-4)
    # swapping the two arms mirrors the interval
    d, lo, hi = newcombe_paired_difference(5, 7, 2, 6)
    assert newcombe_paired_difference(5, 2, 7, 6) == pytest.approx((-d, -hi, -lo))
    with pytest.raises(ValueError):
        newcombe_paired_difference(0, 0, 0, 0)
    with pytest.raises(ValueError):
        newcombe_paired_difference(1, -1, 0, 0)


@lru_cache(maxsize=None)
def paired_tables(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Every 2x2 table (a, b, c, d) of n paired units, its log multinomial coefficient, and
    Newcombe's 95% limits for each (the vector form of newcombe_paired_difference, checked below)."""
    a, b, c = np.meshgrid(*[np.arange(n + 1)] * 3, indexing="ij")
    keep = a + b + c <= n
    t = np.stack([a[keep], b[keep], c[keep], n - (a + b + c)[keep]], axis=1).astype(float)
    lo, hi = newcombe_vector(t)
    return t, gammaln(n + 1) - gammaln(t + 1).sum(axis=1), lo, hi


def newcombe_vector(t: np.ndarray, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    z = stats.norm.ppf(1 - (1 - level) / 2)
    a, b, c, d = t.T
    n = t.sum(axis=1)

    def wilson(k: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        p, shrink = k / n, 1 + z * z / n
        centre, half = (p + z * z / (2 * n)) / shrink, z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / shrink
        return np.maximum(0.0, centre - half), np.minimum(1.0, centre + half)

    p1, p2 = (a + b) / n, (a + c) / n
    (l1, u1), (l2, u2) = wilson(a + b), wilson(a + c)
    margins, excess = (a + b) * (c + d) * (a + c) * (b + d), a * d - b * c
    corrected = np.where(excess > n / 2, excess - n / 2, np.where(excess >= 0, 0.0, excess))
    phi = np.where(margins > 0, corrected / np.sqrt(np.where(margins > 0, margins, 1.0)), 0.0)
    diff = (b - c) / n
    x1, y2, y1, x2 = p1 - l1, u2 - p2, u1 - p1, p2 - l2
    return (diff - np.sqrt(np.maximum(0.0, x1 * x1 - 2 * phi * x1 * y2 + y2 * y2)),
            diff + np.sqrt(np.maximum(0.0, y1 * y1 - 2 * phi * y1 * x2 + x2 * x2)))


def test_the_vector_form_is_newcombe_paired_difference():
    for n in (1, 7, 20):
        t, _, lo, hi = paired_tables(n)
        scalar = np.array([newcombe_paired_difference(*map(int, row))[1:] for row in t])
        assert np.abs(scalar - np.c_[lo, hi]).max() < 1e-12


def cells(p1: float, p2: float, rho: float) -> tuple[float, float, float, float]:
    """Cell probabilities (both, first only, second only, neither) of two Bernoulli outcomes with
    marginals p1, p2 and correlation rho."""
    both = p1 * p2 + rho * math.sqrt(p1 * (1 - p1) * p2 * (1 - p2))
    return both, p1 - both, p2 - both, 1 - p1 - p2 + both


def exact(n: int, probs: tuple[float, float, float, float]) -> dict[str, float]:
    """Exact probabilities, over every table of n units: Newcombe's interval covers the true
    difference, lies wholly above it, wholly below it, lies above 0; and the t interval on the
    -1/0/+1 differences covers it (for comparison)."""
    t, base, lo, hi = paired_tables(n)
    p = np.asarray(probs, dtype=float)
    w = np.exp(base + t @ np.log(np.where(p > 0, p, 1.0)))
    w = np.where((t[:, p <= 0] > 0).any(axis=1), 0.0, w)
    delta, eps = p[1] - p[2], 1e-12
    b, c = t[:, 1], t[:, 2]
    mean = (b - c) / n
    half = stats.t.ppf(0.975, n - 1) * np.sqrt(np.maximum(0.0, (b + c - n * mean**2) / (n - 1)) / n)
    return {"covers": float(w[(lo <= delta + eps) & (delta - eps <= hi)].sum()),
            "above": float(w[lo > delta + eps].sum()), "below": float(w[hi < delta - eps].sum()),
            "above_zero": float(w[lo > 0].sum()),
            "t_covers": float(w[(mean - half <= delta + eps) & (delta - eps <= mean + half)].sum())}


# (p1, p2, correlation): balanced and unbalanced marginals, rare and common outcomes, independent
# to strongly correlated pairs. Coverage 0.946-0.998 at n = 20, 40, 80 (docs/claims.md).
MARGINALS = [(0.5, 0.5, 0.0), (0.5, 0.5, 0.3), (0.5, 0.5, 0.6), (0.3, 0.2, 0.0), (0.3, 0.2, 0.3), (0.3, 0.2, 0.6),
             (0.6, 0.4, 0.3), (0.2, 0.05, 0.0), (0.2, 0.05, 0.3), (0.8, 0.7, 0.5), (0.1, 0.1, 0.0), (0.1, 0.1, 0.5)]


@pytest.mark.parametrize("n", [20, 40, 80])
def test_newcombe_paired_covers_at_least_093(n):
    low = {case: exact(n, cells(*case))["covers"] for case in MARGINALS}
    assert min(low.values()) >= 0.93, low


@pytest.mark.parametrize(("n", "newcombe", "t"), [(20, 1.0, 0.641), (40, 0.997, 0.868), (80, 0.977, 0.907)])
def test_few_one_way_discordant_units_where_the_t_interval_failed(n, newcombe, t):
    # 5% of the units positive under the first only, none under the second only (ProGraf: the loop
    # recovers a task the other method does not, never the reverse). The t interval is [0, 0]
    # whenever no unit is discordant (0.95^20 = 0.36 of the time at n = 20); Newcombe's is not.
    e = exact(n, (0.0, 0.05, 0.0, 0.95))
    assert e["covers"] == pytest.approx(newcombe, abs=5e-4) and e["t_covers"] == pytest.approx(t, abs=5e-4)
    # the same with 30% of the units positive under both
    assert exact(n, (0.3, 0.05, 0.0, 0.65))["covers"] >= 0.95
    assert exact(n, (0.3, 0.1, 0.0, 0.6))["covers"] >= 0.93


GRID = [(p11, p10, p01) for p11, p10, p01 in itertools.product(np.round(np.arange(0, 1.0001, 0.05), 2), repeat=3)
        if p11 + p10 + p01 <= 1 + 1e-9 and p10 + p01 > 0]


@pytest.mark.parametrize(("n", "mean_cover", "worst"), [(20, 0.9548, 0.9080), (40, 0.9531, 0.8935), (80, 0.9518, 0.9121)])
def test_newcombe_paired_over_a_grid_and_its_known_limit(n, mean_cover, worst):
    # Every (both, first only, second only) in steps of 0.05 with some discordance: 1,750 points.
    # Coverage averages 0.95 and is >= 0.93 at 98-99% of them. The limit: one-way discordance with
    # many units positive under both AND many under neither (both 0.35-0.6, e.g. (0.45, 0.05, 0,
    # 0.5): 0.893 at n = 40; 0.91 at n = 80), where the interval misses on the side of 0 (pulled
    # toward no difference); and large differences (|p1 - p2| >= 0.6) at n = 20 and 40, missing on
    # both sides. The error a claim "the first beats the second" can make -- an interval wholly
    # above 0 when the true difference is <= 0 -- stays near its nominal 0.025 everywhere on the
    # grid (at most 0.030 at n = 20; the t interval's worst there is 0.029).
    runs = {point: exact(n, (*point, max(0.0, 1 - sum(point)))) for point in GRID}
    covers = np.array([r["covers"] for r in runs.values()])
    assert covers.mean() == pytest.approx(mean_cover, abs=5e-4) and covers.min() == pytest.approx(worst, abs=5e-4)
    assert (covers < 0.93).mean() < 0.02
    for (p11, p10, p01), r in runs.items():
        if r["covers"] < 0.93 and p10 > p01:  # (p10 < p01 mirrors these)
            if p01 == 0 and p11 >= 0.3:
                assert r["below"] > 0.06 and r["above"] < 0.01  # the miss lies toward 0
            else:
                assert p10 - p01 >= 0.6 and n <= 40
    false_beats = max(r["above_zero"] for (_, p10, p01), r in runs.items() if p10 <= p01)
    assert false_beats <= 0.031
    # the limit's worst point: the t interval on the -1/0/+1 differences covers no better there
    limit = exact(n, (0.45, 0.1, 0.0, 0.45) if n == 20 else (0.45, 0.05, 0.0, 0.5))
    assert 0.89 < limit["covers"] < 0.93 and limit["t_covers"] <= limit["covers"]
