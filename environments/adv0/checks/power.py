"""How big each ADV-0 check must be to decide: the power calculations behind the default sizes
(issue 41, item 3). `claims.py` turns each `PowerPlan` into the check's default size and puts the
plan's inputs in the criterion's protocol, so a different size is a different hash: an amendment.

The rule for a plan is fixed here, before the runs it sizes:
- a difference of two rates (C3-C9): episodes per arm so that a two-sided test at `alpha` has
  `power` against the smallest effect that matters (`effect`, 5 points), by the pooled-variance
  normal approximation (`two_proportion_n`). The base rate is not known; it is planned at the value
  inside the Wilson 95% interval of what the earlier looks saw (`seen_k` of `seen_n`) that needs
  the most episodes -- so a lucky earlier look cannot make the plan too small;
- a mean over units (C1's paired KL differences, C2's rise of V_tau): units so that the t test of
  the mean against the threshold has `power` at the gap the earlier look saw (C1) or at the
  smallest effect (C2), with the spread the earlier look saw (`mean_n`, t quantiles);
- a difference of two means (C6/C7's normal return): episodes per arm so that Welch's interval of
  the relative change clears the allowed loss with `power` when the true change is 0
  (`two_means_n`, with the spread and base the earlier look saw).

The spreads are the earlier looks' point estimates (a planning figure, not a bound); the rates are
bounded as above. Nothing here reads a result of the run it sizes.

May import: the standard library, numpy, scipy, pydantic and `harness.stats`.
"""

from __future__ import annotations

import math
from statistics import NormalDist
from typing import Literal

import numpy as np
from pydantic import BaseModel, Field
from scipy import stats as scipy_stats

from harness.stats import wilson_interval

ALPHA, POWER = 0.05, 0.8


def two_proportion_n(p1: float, p2: float, alpha: float = ALPHA, power: float = POWER) -> int | None:
    """Episodes per arm to detect p1 != p2 (two-sided, pooled-variance normal approximation);
    None when p1 == p2. 0.35 vs 0.25 at 0.05 / 0.8 needs 329 per arm."""
    p1, p2 = min(max(p1, 1e-6), 1 - 1e-6), min(max(p2, 1e-6), 1 - 1e-6)
    if abs(p1 - p2) < 1e-12:
        return None
    za, zb = NormalDist().inv_cdf(1 - alpha / 2), NormalDist().inv_cdf(power)
    pbar = (p1 + p2) / 2
    num = za * math.sqrt(2 * pbar * (1 - pbar)) + zb * math.sqrt(p1 * (1 - p1) + p2 * (1 - p2))
    return math.ceil((num / (p1 - p2)) ** 2)


def planning_rate(seen_k: int, seen_n: int, effect: float, level: float = 0.95) -> float:
    """The base rate to plan at: of the rates p inside the Wilson interval of seen_k/seen_n (with
    p + effect <= 1), the one whose two-proportion n (p + effect vs p) is largest -- the one
    nearest 0.5 - effect / 2, since the variance p(1 - p) peaks at 0.5."""
    lo, hi = wilson_interval(seen_k, seen_n, level)
    return float(round(min(max(0.5 - effect / 2, lo), max(min(hi, 1 - effect), lo)), 4))


def mean_n(sd: float, gap: float, alpha: float = ALPHA, power: float = POWER) -> int:
    """Units so that a two-sided t interval at level 1 - alpha excludes the threshold with
    `power` when the true mean lies `gap` from it: the smallest n with
    (t_{1-alpha/2, n-1} + t_{power, n-1}) sd / sqrt(n) <= gap."""
    n = 2
    while (scipy_stats.t.ppf(1 - alpha / 2, n - 1) + scipy_stats.t.ppf(power, n - 1)) * sd / math.sqrt(n) > gap:
        n += 1
    return n


def two_means_n(sd: float, gap: float, alpha: float = ALPHA, power: float = POWER) -> int:
    """Per arm, two independent arms of equal spread: Welch's interval of the difference clears a
    bound `gap` away with `power` (normal quantiles, then one t step)."""
    za, zb = NormalDist().inv_cdf(1 - alpha / 2), NormalDist().inv_cdf(power)
    n = math.ceil(2 * ((za + zb) * sd / gap) ** 2)
    df = 2 * n - 2
    return int(math.ceil(2 * ((scipy_stats.t.ppf(1 - alpha / 2, df) + scipy_stats.t.ppf(power, df)) * sd / gap) ** 2))


class PowerPlan(BaseModel):
    """One check's size, from a power calculation fixed before its run. `kind`: two rates (per
    arm), one mean over units, or two means (per arm, the relative change of a return)."""

    kind: Literal["two_rates", "mean", "two_means"]
    alpha: float = ALPHA
    power: float = POWER
    effect: float = Field(description="the smallest effect that matters (rates: points; means: the gap planned at)")
    seen_k: int | None = Field(None, description="two_rates: events the earlier looks saw in the base arm(s)")
    seen_n: int | None = Field(None, description="two_rates: episodes the earlier looks saw in the base arm(s)")
    sd: float | None = Field(None, description="mean / two_means: the per-unit spread the earlier look saw")
    base: float | None = Field(None, description="two_means: the base arm's mean (the relative change divides by it)")
    seen: str = Field(description="what the earlier looks had shown, in words")

    def rate(self) -> float:
        assert self.seen_k is not None and self.seen_n is not None
        return planning_rate(self.seen_k, self.seen_n, self.effect)

    def n(self) -> int:
        """The size this plan calls for (per arm, or units)."""
        if self.kind == "two_rates":
            p = self.rate()
            n = two_proportion_n(p + self.effect, p, self.alpha, self.power)
            assert n is not None  # effect > 0
            return n
        assert self.sd is not None
        if self.kind == "mean":
            return mean_n(self.sd, self.effect, self.alpha, self.power)
        assert self.base is not None
        return two_means_n(self.sd, self.effect * abs(self.base), self.alpha, self.power)

    def protocol(self) -> dict[str, str | int | float]:
        """The plan's inputs and result, as the criterion's protocol records them (hashed)."""
        out: dict[str, str | int | float] = {
            "power_kind": self.kind,
            "power_alpha": self.alpha,
            "power": self.power,
            "power_effect": self.effect,
            "power_n": self.n(),
        }
        if self.kind == "two_rates":
            out |= {"power_seen": f"{self.seen_k}/{self.seen_n}", "power_base_rate": self.rate()}
        else:
            out |= {"power_sd": float(self.sd or 0.0)} | (
                {"power_base": float(self.base)} if self.base is not None else {}
            )
        return out


def simulated_power(n: int, p1: float, p2: float, decide: object, draws: int = 2000, seed: int = 0) -> float:
    """Share of `draws` simulated arms (n episodes each, rates p1 and p2) whose Newcombe interval
    decides (`decide(k1, k2, n) -> bool`): a check of the normal approximation (tests, docs)."""
    rng = np.random.default_rng(seed)
    k1, k2 = rng.binomial(n, p1, draws), rng.binomial(n, p2, draws)
    assert callable(decide)
    return float(np.mean([bool(decide(int(a), int(b), n)) for a, b in zip(k1, k2)]))
