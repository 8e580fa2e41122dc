"""The claim intervals cover: Student-t on per-seed values (harness.stats.mean_interval), simulated
from known distributions at the seed counts checks use. Nominal 0.95; asserted >= 0.93 on a normal,
a skewed (gamma, shape 4: skewness 1.0) and two heavy-tailed (Student-t 3 df, Laplace) laws at
n = 3, 5, 10, 20. The known limit -- strongly skewed laws (exponential, skewness 2) under-cover at
small n, as every interval for a mean must -- is measured too, so docs/claims.md's numbers stay
true. 20,000 draws each: the Monte Carlo standard error is 0.0015."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from harness.stats import mean_interval

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
