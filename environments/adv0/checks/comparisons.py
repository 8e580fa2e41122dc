"""ADV-0's judged comparisons: a `Part` is one comparison of a claim check -- an estimate, its
interval and the rule it is judged by (an op, a threshold and, where the claim has a smallest effect
that would matter, `refute_at`). Its verdict is not stored: it is the core's `harness.claims.decide`
on the interval it prints, so the two cannot disagree; no interval is inconclusive. One builder per
kind of claim, each on `harness.stats`' intervals: a rate difference by Newcombe's hybrid score
interval (`rate_higher`), a bound on a rate by Wilson's (`rate_at_most`), a mean over units by
Student t (`mean_above`), a ratio of paired means by Fieller's (`ratio_at_most`), a statistic that
is not a mean by a percentile bootstrap over episodes at >= 30 per arm (`stat_higher`), and a
relative change of two independent arms' means by Welch's t (`relative_not_below`). An undecided
part carries the sample size that would decide it at alpha 0.05 / power 0.8 (ADV-0's planning
figures: `power.two_proportion_n` for rates, `one_proportion_n` for a bound, the core's
`seeds_to_decide` for means, `scaled_n` otherwise). A check's findings and verdicts: `verdicts.py`.

May import: the standard library, numpy, pydantic, `harness`, `environments.adv0.checks.power`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from statistics import NormalDist
from typing import Any

import numpy as np
from pydantic import BaseModel, computed_field

from environments.adv0.checks.power import two_proportion_n
from harness.claims import Condition, Op, Outcome, Verdict, decide, seeds_to_decide
from harness.records import Metric
from harness.stats import (
    BOOTSTRAP_MIN_UNITS,
    bootstrap_difference,
    mean_interval,
    newcombe_difference,
    paired_ratio_interval,
    welch_interval,
    wilson_interval,
    z_value,
)

ALPHA, POWER = 0.05, 0.8
LEVEL = 1 - ALPHA  # every interval a check prints is at this level
Z_ALPHA = z_value(LEVEL)  # 1.96
Z_POWER = NormalDist().inv_cdf(POWER)  # 0.84
VERDICT_OF: dict[Outcome, Verdict] = {"holds": "reproduced", "fails": "not reproduced", "undecided": "inconclusive"}


# ---------------------------------------------------------------- planning figures (ADV-0's own)
def one_proportion_n(p: float, limit: float, alpha: float = ALPHA, power: float = POWER) -> int | None:
    """Episodes to show a true rate `p` lies on its side of `limit` (two-sided test against
    p0 = limit); None when p == limit."""
    p = min(max(p, 1e-6), 1 - 1e-6)
    if abs(p - limit) < 1e-12:
        return None
    za, zb = NormalDist().inv_cdf(1 - alpha / 2), NormalDist().inv_cdf(power)
    num = za * math.sqrt(limit * (1 - limit)) + zb * math.sqrt(p * (1 - p))
    return math.ceil((num / (p - limit)) ** 2)


def scaled_n(n: int, m: Metric, gap: float) -> int | None:
    """Units needed to bring a CI's half-width below `gap` with power 0.8 (se scaled by sqrt(n))."""
    if m.ci_low is None or m.ci_high is None or gap <= 0:
        return None
    se = (m.ci_high - m.ci_low) / (2 * Z_ALPHA)
    return math.ceil(n * ((Z_ALPHA + Z_POWER) * se / gap) ** 2) if se > 0 else None


# ---------------------------------------------------------------- a judged comparison
def _finite(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


class Part(BaseModel):
    """One judged comparison of a check. Its verdict is a property: the core's `decide` on the
    interval [ci_low, ci_high] it prints, against `threshold` by `op` (a strict claim, "A higher
    than B" (`>`), needs the interval strictly beyond it: an end exactly on the threshold does not
    show the difference), failing only beyond `refute_at` when the claim has a smallest effect that
    would matter (default: the threshold). No interval: inconclusive."""

    what: str  # e.g. "defender-failure rate: adv0 - random"
    metric: str  # the quantity, as the claim's condition names it
    arm: str
    versus: str | None = None
    value: float | None
    ci_low: float | None
    ci_high: float | None
    n: str  # the sample behind it, e.g. "4/30 vs 2/30"
    size: int  # units per arm behind it (the smaller arm's)
    op: Op
    threshold: float
    refute_at: float | None = None
    method: str  # how the interval was computed
    needed_n: int | None = None  # when inconclusive: `unit`s that would decide it
    unit: str = "episodes per arm"
    note: str = ""  # a gate or caveat, printed with the rule
    # each arm's defender failures by the other vehicle of the contact, printed beside the verdict
    # (`scenario.party_text`): a reading aid, never judged and in no condition
    by_party: str = ""

    @property
    def upward(self) -> bool:
        return self.op in (">=", ">")

    def condition(self, setting: str) -> Condition:
        """The core condition this part is judged by."""
        return Condition(
            metric=self.metric,
            setting=setting,
            arm=self.arm,
            versus=self.versus,
            op=self.op,
            threshold=self.threshold,
            refute_at=self.refute_at,
        )

    @computed_field  # type: ignore[prop-decorator]
    @property
    def outcome(self) -> Outcome:
        if self.ci_low is None or self.ci_high is None:
            return "undecided"
        return decide(self.ci_low, self.ci_high, self.op, self.threshold, self.refute_at)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def verdict(self) -> Verdict:
        return VERDICT_OF[self.outcome]

    def claim_text(self) -> str:
        """The claimed side, e.g. "> 0" or "<= 0.5"."""
        return f"{self.op} {self.threshold:g}"

    @computed_field  # type: ignore[prop-decorator]
    @property
    def rule(self) -> str:
        t, r = f"{self.threshold:g}", f"{self.refute_at if self.refute_at is not None else self.threshold:g}"
        if self.upward:
            holds = f"its lower end {self.op} {t}"
            fails = f"its upper end < {r}"
        else:
            holds = f"its upper end {self.op} {t}"
            fails = f"its lower end > {r}"
        text = f"{self.method}: reproduced when {holds}, not reproduced when {fails}, else inconclusive"
        return text + (f"; {self.note}" if self.note else "")

    def condition_text(self) -> str:
        beyond = (
            f" (refuted below {self.refute_at:g})"
            if self.refute_at is not None and self.upward
            else f" (refuted above {self.refute_at:g})"
            if self.refute_at is not None
            else ""
        )
        return f"{self.what} {self.claim_text()}{beyond}"


def judged(
    what: str,
    value: float | None,
    lo: float | None,
    hi: float | None,
    *,
    op: Op,
    threshold: float,
    method: str,
    n: str,
    size: int,
    metric: str,
    arm: str,
    versus: str | None = None,
    refute_at: float | None = None,
    unit: str = "episodes per arm",
    note: str = "",
) -> Part:
    """A part from an estimate and its interval (non-finite ends: no interval)."""
    lo, hi = _finite(lo), _finite(hi)
    if lo is None or hi is None:
        lo = hi = None
    return Part(
        what=what,
        metric=metric,
        arm=arm,
        versus=versus,
        value=_finite(value),
        ci_low=lo,
        ci_high=hi,
        n=n,
        size=size,
        op=op,
        threshold=threshold,
        refute_at=refute_at,
        method=method,
        unit=unit,
        note=note,
    )


def _needing(part: Part, needed: Callable[[], int | None]) -> Part:
    return part.model_copy(update={"needed_n": needed()}) if part.outcome == "undecided" else part


def rate_higher(
    what: str, k1: int, n1: int, k2: int, n2: int, min_effect: float, *, metric: str, arm: str, versus: str
) -> Part:
    """Claim: rate 1 (k1 of n1) is higher than rate 2 (k2 of n2). Newcombe CI of the difference >
    0: reproduced; its upper end < `min_effect`: not reproduced (an effect that large is ruled out)."""
    if n1 == 0 or n2 == 0:
        d = lo = hi = None
    else:
        d, lo, hi = newcombe_difference(k1, n1, k2, n2, LEVEL)
    part = judged(
        what,
        d,
        lo,
        hi,
        op=">",
        threshold=0.0,
        refute_at=min_effect,
        method="Newcombe CI",
        n=f"{k1}/{n1} vs {k2}/{n2}",
        size=min(n1, n2),
        metric=metric,
        arm=arm,
        versus=versus,
    )

    def needed() -> int | None:
        if d is None:
            return two_proportion_n(min_effect, 0.0)
        p2 = k2 / n2
        return two_proportion_n(min(p2 + max(d, min_effect), 1.0), p2)

    return _needing(part, needed)


def rate_at_most(what: str, k: int, n: int, limit: float, *, metric: str, arm: str, unit: str = "episodes") -> Part:
    """Claim: the rate k/n is at most `limit` (n counts `unit`s). Wilson CI <= limit: reproduced;
    its lower end > limit: not reproduced. n = 0: the interval is [0, 1], inconclusive."""
    lo, hi = wilson_interval(k, n, LEVEL)
    p = k / n if n else None
    part = judged(
        what,
        p,
        lo,
        hi,
        op="<=",
        threshold=limit,
        method="Wilson CI",
        n=f"{k}/{n}",
        size=n,
        metric=metric,
        arm=arm,
        unit=unit,
    )

    def needed() -> int | None:
        if not p:  # Wilson's upper end at k = 0 is z^2 / (n + z^2): <= limit from this n
            return math.ceil(Z_ALPHA**2 * (1 - limit) / limit)
        return one_proportion_n(p, limit)

    return _needing(part, needed)


def mean_above(
    what: str,
    values: Sequence[float] | np.ndarray,
    threshold: float,
    *,
    metric: str,
    arm: str,
    unit: str,
    strict: bool = True,
) -> Part:
    """Claim: the mean of per-unit values (paired differences, one per unit) is above `threshold`
    (Student-t interval); refuted when the interval lies below it."""
    v = np.asarray(values, dtype=float)
    mean, lo, hi = mean_interval(v, LEVEL) if v.size else (None, None, None)
    part = judged(
        what,
        mean,
        lo,
        hi,
        op=">" if strict else ">=",
        threshold=threshold,
        method="Student-t CI",
        n=f"{v.size} {unit}",
        size=int(v.size),
        metric=metric,
        arm=arm,
        unit=unit,
    )
    return _needing(part, lambda: seeds_to_decide(v, threshold, LEVEL) if v.size else None)


def ratio_at_most(
    what: str,
    x: Sequence[float] | np.ndarray,
    y: Sequence[float] | np.ndarray,
    limit: float,
    *,
    metric: str,
    arm: str,
    unit: str,
) -> Part:
    """Claim: mean(x) / mean(y) <= limit over paired units (Fieller's interval). "Ratio <= limit"
    is "the t interval of x - limit * y lies at or below 0", so the units that would decide it are
    the core's `seeds_to_decide` of x - limit * y."""
    xs, ys = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    ratio, lo, hi = paired_ratio_interval(xs, ys, LEVEL)
    part = judged(
        what,
        ratio,
        lo,
        hi,
        op="<=",
        threshold=limit,
        method="Fieller CI (paired Student t)",
        n=f"{xs.size} {unit}",
        size=int(xs.size),
        metric=metric,
        arm=arm,
        unit=unit,
        note="no interval when mean(denominator) is not clearly away from 0 at this n",
    )
    return _needing(part, lambda: seeds_to_decide(xs - limit * ys, 0.0, LEVEL))


def stat_higher(
    what: str,
    a: Sequence[Any] | np.ndarray,
    b: Sequence[Any] | np.ndarray,
    stat: Callable[[np.ndarray], float],
    min_effect: float,
    *,
    metric: str,
    arm: str,
    versus: str,
    seed: int = 0,
) -> Part:
    """Claim: a statistic that is not a mean (e.g. distinct clusters) is higher over the episodes
    `a` than over `b`: percentile bootstrap over episodes (`harness.stats.bootstrap_difference`),
    judged only at >= BOOTSTRAP_MIN_UNITS (30) episodes per arm -- below, no interval."""
    a_, b_ = np.asarray(a), np.asarray(b)
    n = min(len(a_), len(b_))
    size_note = f"judged only at >= {BOOTSTRAP_MIN_UNITS} episodes per arm (a percentile bootstrap below that has unknown coverage)"
    small = n < BOOTSTRAP_MIN_UNITS
    if small:
        d, lo, hi, se = (float(stat(a_) - stat(b_)) if n else None), None, None, 0.0
    else:
        d, lo, hi, se = bootstrap_difference(a_, b_, stat, LEVEL, seed=seed)
    part = judged(
        what,
        d,
        lo,
        hi,
        op=">",
        threshold=0.0,
        refute_at=min_effect,
        method="percentile bootstrap CI over episodes",
        n=f"{len(a_)} vs {len(b_)} episodes",
        size=n,
        metric=metric,
        arm=arm,
        versus=versus,
        note=size_note,
    )
    if small or d is None:  # (d is the bootstrap's estimate when not small)
        return part.model_copy(update={"needed_n": BOOTSTRAP_MIN_UNITS})
    effect = max(d, min_effect)

    def needed() -> int | None:
        return math.ceil(n * ((Z_ALPHA + Z_POWER) * se / effect) ** 2) if se > 0 else None

    return _needing(part, needed)


def relative_not_below(
    what: str, a: Sequence[float], b: Sequence[float], limit: float, *, metric: str, arm: str, versus: str
) -> Part:
    """Claim: mean(a) / mean(b) - 1 >= limit (e.g. -0.05: a loses at most 5% of b), a and b two
    independent arms. The interval is Welch's for mean(a) - mean(b), divided by |mean(b)| (the
    base taken as fixed, as before: its own spread is not in the interval). mean(b) = 0: no
    relative change, no interval."""
    a_, b_ = np.asarray(a, float), np.asarray(b, float)
    base = float(b_.mean()) if b_.size else 0.0
    scale = abs(base)
    defined = base != 0.0 and a_.size > 0
    rel: float | None = None
    lo: float | None = None
    hi: float | None = None
    if defined:
        d, d_lo, d_hi = welch_interval(a_, b_, LEVEL)
        rel, lo, hi = d / scale, d_lo / scale, d_hi / scale
    part = judged(
        what,
        rel,
        lo,
        hi,
        op=">=",
        threshold=limit,
        method="Welch t CI (scaled by |mean(b)|)" if defined else "Welch t CI",
        n=f"{len(a_)} vs {len(b_)} episodes",
        size=min(len(a_), len(b_)),
        metric=metric,
        arm=arm,
        versus=versus,
        note="" if defined else "the base mean is 0: no relative change",
    )
    if rel is None:  # no relative change to judge, and no sample size that would give one
        return part
    gap = max(abs(rel - limit), 0.01)

    def needed() -> int | None:
        if a_.size < 2 or b_.size < 2:
            return None
        se = math.sqrt(a_.var(ddof=1) / a_.size + b_.var(ddof=1) / b_.size) / scale
        return math.ceil(min(a_.size, b_.size) * ((Z_ALPHA + Z_POWER) * se / gap) ** 2) if se > 0 else None

    return _needing(part, needed)
