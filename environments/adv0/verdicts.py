"""How ADV-0's claim checks reach a verdict (reproduced, not reproduced, inconclusive -- then with
the sample size that would decide it), and how a finding is printed. The same rules for every
comparison of every check (`checks.py`):
- A claim "A is higher than B" is reproduced when the 95% CI of A - B lies above 0; it is not
  reproduced when the CI's upper end is below the smallest effect the claim would need to matter
  (`min_effect`, stated per check): the data then rule out an effect of that size; otherwise it is
  inconclusive, and the sample size per arm that would detect the larger of the observed effect
  and `min_effect` at alpha 0.05 / power 0.8 is printed (the two-proportion formula for rates; for
  other statistics the current n scaled by the squared ratio of the needed to the observed
  standard error).
- A bound "rate <= limit" is reproduced when the Wilson CI lies at or below the limit, not
  reproduced when it lies above it, else inconclusive with the one-sample size that would settle it.
- A check with several parts is reproduced when every part is, not reproduced when any part is
  not, else inconclusive (the needed size is the largest of its parts').

Rate differences use Newcombe's hybrid score interval (method 10: Wilson intervals per arm), good
at the small counts quick checks have; other differences a percentile bootstrap over episodes.

May import: the standard library, numpy, pydantic and `harness`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from statistics import NormalDist
from typing import Literal

import numpy as np
from pydantic import BaseModel, Field

from harness.records import Metric
from harness.stats import ratio_metric

Verdict = Literal["reproduced", "not reproduced", "inconclusive"]
ALPHA, POWER = 0.05, 0.8
Z_ALPHA = NormalDist().inv_cdf(1 - ALPHA / 2)  # 1.96
Z_POWER = NormalDist().inv_cdf(POWER)  # 0.84


# ---------------------------------------------------------------- statistics
def wilson(k: int, n: int, z: float = Z_ALPHA) -> tuple[float, float]:
    """Wilson score interval of k successes in n trials ((0, 1) when n = 0)."""
    if n == 0:
        return 0.0, 1.0
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def newcombe_diff(k1: int, n1: int, k2: int, n2: int) -> tuple[float, float, float]:
    """p1 - p2 and its 95% CI (Newcombe 1998, method 10)."""
    p1, p2 = k1 / max(n1, 1), k2 / max(n2, 1)
    l1, u1 = wilson(k1, n1)
    l2, u2 = wilson(k2, n2)
    d = p1 - p2
    lo = d - math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2)
    hi = d + math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2)
    return d, lo, hi


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


def one_proportion_n(p: float, limit: float, alpha: float = ALPHA, power: float = POWER) -> int | None:
    """Episodes to show a true rate `p` lies on its side of `limit` (two-sided test against
    p0 = limit); None when p == limit."""
    p = min(max(p, 1e-6), 1 - 1e-6)
    if abs(p - limit) < 1e-12:
        return None
    za, zb = NormalDist().inv_cdf(1 - alpha / 2), NormalDist().inv_cdf(power)
    num = za * math.sqrt(limit * (1 - limit)) + zb * math.sqrt(p * (1 - p))
    return math.ceil((num / (p - limit)) ** 2)


class Part(BaseModel):
    """One judged comparison of a check."""

    what: str  # e.g. "defender-failure rate: adv0 - random"
    value: float | None
    ci_low: float | None
    ci_high: float | None
    n: str  # the sample behind it, e.g. "40 vs 40 episodes"
    verdict: Verdict
    needed_n: int | None = None  # when inconclusive: `unit`s that would decide it
    unit: str = "episodes per arm"
    rule: str = ""


def rate_higher(what: str, k1: int, n1: int, k2: int, n2: int, min_effect: float) -> Part:
    """Claim: rate 1 (k1 of n1) is higher than rate 2 (k2 of n2)."""
    d, lo, hi = newcombe_diff(k1, n1, k2, n2)
    rule = f"CI of the difference > 0: reproduced; CI upper end < {min_effect:g}: not reproduced"
    if n1 == 0 or n2 == 0:
        return Part(what=what, value=None, ci_low=None, ci_high=None, n=f"{n1} vs {n2}", verdict="inconclusive",
                    needed_n=two_proportion_n(min_effect, 0.0), rule=rule)
    verdict: Verdict = "reproduced" if lo > 0 else "not reproduced" if hi < min_effect else "inconclusive"
    needed = None
    if verdict == "inconclusive":
        p2 = k2 / n2
        needed = two_proportion_n(min(p2 + max(d, min_effect), 1.0), p2)
    return Part(what=what, value=d, ci_low=lo, ci_high=hi, n=f"{k1}/{n1} vs {k2}/{n2}", verdict=verdict,
                needed_n=needed, rule=rule)


def rate_at_most(what: str, k: int, n: int, limit: float, unit: str = "episodes") -> Part:
    """Claim: the rate k/n is at most `limit` (n counts `unit`s)."""
    rule = f"Wilson CI <= {limit:g}: reproduced; CI lower end > {limit:g}: not reproduced"
    lo, hi = wilson(k, n)
    p = k / n if n else None
    verdict: Verdict = ("reproduced" if n and hi <= limit else "not reproduced" if n and lo > limit
                        else "inconclusive")
    needed = None
    if verdict == "inconclusive":
        zero_events = math.ceil(Z_ALPHA**2 * (1 - limit) / limit)  # Wilson's upper end z^2/(n+z^2) <= limit at k = 0
        needed = zero_events if not p else one_proportion_n(p, limit)
    return Part(what=what, value=p, ci_low=lo, ci_high=hi, n=f"{k}/{n}", verdict=verdict, needed_n=needed, unit=unit,
                rule=rule)


def bootstrap_diff(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray,
                   stat: Callable[[np.ndarray], float], resamples: int = 2000, seed: int = 0) -> tuple[float, float, float, float]:
    """stat(a) - stat(b), its 95% percentile-bootstrap CI (episodes of each arm resampled
    independently) and the bootstrap standard error."""
    a, b = np.asarray(a), np.asarray(b)
    rng = np.random.default_rng(seed)
    d = stat(a) - stat(b)
    if len(a) == 0 or len(b) == 0:
        return d, float("nan"), float("nan"), float("nan")
    reps = np.array([stat(a[rng.integers(0, len(a), len(a))]) - stat(b[rng.integers(0, len(b), len(b))])
                     for _ in range(resamples)])
    lo, hi = np.quantile(reps, [ALPHA / 2, 1 - ALPHA / 2])
    return float(d), float(lo), float(hi), float(reps.std())


def stat_higher(what: str, a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray,
                stat: Callable[[np.ndarray], float], min_effect: float, seed: int = 0) -> Part:
    """Claim: stat over the episodes `a` is higher than over `b` (bootstrap CI of the difference)."""
    d, lo, hi, se = bootstrap_diff(a, b, stat, seed=seed)
    rule = f"bootstrap CI of the difference > 0: reproduced; CI upper end < {min_effect:g}: not reproduced"
    n = min(len(a), len(b))
    if not np.isfinite(lo):
        return Part(what=what, value=None, ci_low=None, ci_high=None, n=f"{len(a)} vs {len(b)}",
                    verdict="inconclusive", rule=rule)
    verdict: Verdict = "reproduced" if lo > 0 else "not reproduced" if hi < min_effect else "inconclusive"
    needed = None
    if verdict == "inconclusive":
        effect = max(d, min_effect)
        needed = math.ceil(n * ((Z_ALPHA + Z_POWER) * se / effect) ** 2) if se > 0 else None
    return Part(what=what, value=d, ci_low=lo, ci_high=hi, n=f"{len(a)} vs {len(b)} episodes", verdict=verdict,
                needed_n=needed, rule=rule)


def combine(parts: Sequence[Part]) -> tuple[Verdict, int | None, str]:
    """All parts reproduced -> reproduced; any not -> not reproduced; else inconclusive, needing
    the largest size any inconclusive part needs."""
    if any(p.verdict == "not reproduced" for p in parts):
        return "not reproduced", None, ""
    if parts and all(p.verdict == "reproduced" for p in parts):
        return "reproduced", None, ""
    needs = [p for p in parts if p.verdict == "inconclusive" and p.needed_n is not None]
    if not needs:
        return "inconclusive", None, ""
    top = max(needs, key=lambda p: p.needed_n or 0)
    return "inconclusive", top.needed_n, top.unit


class Finding(BaseModel):
    """What a check prints (and `--json` writes)."""

    check: str
    claim: str
    criterion: str
    parts: list[Part]
    numbers: dict[str, str] = Field(default_factory=dict)  # context figures, each "value [lo, hi] (n)"
    verdict: Verdict
    needed_n: int | None = None
    needed_unit: str = "episodes per arm"
    notes: list[str] = Field(default_factory=list)
    wall_s: float = 0.0
    cpu_s: float = 0.0

    @classmethod
    def judge(cls, check: str, claim: str, criterion: str, parts: list[Part], **kw: object) -> "Finding":
        verdict, needed, unit = combine(parts)
        return cls(check=check, claim=claim, criterion=criterion, parts=parts, verdict=verdict, needed_n=needed,
                   needed_unit=unit or "episodes per arm", **kw)  # type: ignore[arg-type]


def mean_metric(values: Sequence[float]) -> Metric:
    """A mean with its bootstrap CI over the units."""
    v = np.asarray(values, dtype=float)
    return ratio_metric(np.stack([v, np.ones(len(v))], axis=1), lambda t: t[0], lambda t: t[1])


def fmt_metric(m: Metric | None) -> str:
    if m is None or m.value is None:
        return "n/a"
    if m.ci_low is None or m.ci_high is None:
        return f"{m.value:.3f} (n={m.n})"
    return f"{m.value:.3f} [{m.ci_low:.3f}, {m.ci_high:.3f}] (n={m.n})"


def fmt_rate(k: int, n: int) -> str:
    lo, hi = wilson(k, n)
    return f"{k / n if n else float('nan'):.3f} [{lo:.3f}, {hi:.3f}] ({k}/{n})"


def render(f: Finding) -> str:
    """The finding as the command prints it."""
    lines = [f"{f.check} -- claim: {f.claim}", f"criterion: {f.criterion}", "numbers (95% CIs):"]
    lines += [f"  {k}: {v}" for k, v in f.numbers.items()]
    lines.append("judged:")
    for p in f.parts:
        val = "n/a" if p.value is None else f"{p.value:+.3f} [{p.ci_low:+.3f}, {p.ci_high:+.3f}]"
        need = f"; deciding it needs ~{p.needed_n} {p.unit}" if p.needed_n else ""
        lines.append(f"  {p.what}: {val} ({p.n}) -> {p.verdict}{need}")
        lines.append(f"    rule: {p.rule}")
    lines += [f"note: {n}" for n in f.notes]
    verdict = f.verdict.upper()
    if f.verdict == "inconclusive":
        verdict += (f" -- deciding it needs ~{f.needed_n} {f.needed_unit}" if f.needed_n
                    else " -- no sample size decides it (see the notes)")
    lines.append(f"verdict: {verdict}")
    lines.append(f"wall {f.wall_s:.1f} s, CPU {f.cpu_s:.1f} s")
    return "\n".join(lines)


def relative_not_below(what: str, a: Sequence[float], b: Sequence[float], limit: float) -> Part:
    """Claim: mean(a) / mean(b) - 1 >= limit (e.g. -0.05: a loses at most 5% of b)."""
    a_, b_ = np.asarray(a, float), np.asarray(b, float)
    rel = lambda x: float(x.mean())  # noqa: E731
    base = rel(b_)
    d, lo, hi, se = bootstrap_diff(a_ / abs(base) if base else a_, b_ / abs(base) if base else b_, rel)
    rule = f"bootstrap CI of the relative change >= {limit:+g}: reproduced; CI upper end < {limit:+g}: not reproduced"
    verdict: Verdict = "reproduced" if lo >= limit else "not reproduced" if hi < limit else "inconclusive"
    needed = None
    if verdict == "inconclusive" and se > 0:
        gap = max(abs(d - limit), 0.01)
        needed = math.ceil(min(len(a_), len(b_)) * ((Z_ALPHA + Z_POWER) * se / gap) ** 2)
    return Part(what=what, value=d, ci_low=lo, ci_high=hi, n=f"{len(a_)} vs {len(b_)} episodes", verdict=verdict,
                needed_n=needed, rule=rule)


def scaled_n(n: int, m: Metric, gap: float) -> int | None:
    """Units needed to bring a CI's half-width below `gap` with power 0.8 (se scaled by sqrt(n))."""
    if m.ci_low is None or m.ci_high is None or gap <= 0:
        return None
    se = (m.ci_high - m.ci_low) / (2 * Z_ALPHA)
    return math.ceil(n * ((Z_ALPHA + Z_POWER) * se / gap) ** 2) if se > 0 else None
