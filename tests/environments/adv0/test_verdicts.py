"""ADV-0's checks on the core: the C1 case the issue names (an interval wholly above its threshold
printed with the verdict "inconclusive"), the property that every part's verdict is exactly what
its printed interval says under its printed rule, the intervals added to `harness.stats` for them
(Welch, Fieller, the bootstrap for non-means), the paper's sentence and departures of every check,
and the saved core `ClaimVerdict` that `harness claims table` shows."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from scipy import stats as scipy_stats
from typer.testing import CliRunner

from environments.adv0.checks import checks, paper, toy_checks, verdicts
from environments.adv0.commands import adv0_app
from harness.claims import decide
from harness.claims.table import to_markdown
from harness.claims.verdict import load_verdicts, save_verdict
from harness.errors import HarnessError
from harness.stats import (
    BOOTSTRAP_MIN_UNITS, bootstrap_difference, mean_interval, paired_ratio_interval, welch_interval,
)

# C1 as `harness adv0 check C1` printed it before (session 18): 8 contexts, 60 rounds.
C1_KL_Q = [0.1641, 0.2146, 0.2032, 1.996, 11.39, 0.7107, 0.8077, 0.6681]
C1_KL_P0 = [0.3373, 0.305, 0.2914, 2.049, 11.56, 0.7005, 0.9221, 0.8935]


def c1_part(value: float, lo: float, hi: float) -> verdicts.Part:
    return verdicts.judged("mean KL(q||q*) / mean KL(p0||q*) over contexts", value, lo, hi, op="<=",
                           threshold=toy_checks.C1_RATIO_MAX, method="C1's", n="8 contexts", size=8, metric="kl_ratio",
                           arm="adv0", unit="contexts")


# ---------------------------------------------------------------- the C1 case
def old_c1_rule(lo: float, hi: float) -> str:
    """toy_checks' rule before: reproduced below 0.5, refuted only at >= 1 (a band in between)."""
    return "reproduced" if hi < 0.5 else "not reproduced" if lo >= 1.0 else "inconclusive"


def test_c1_printed_case_interval_wholly_above_its_threshold_is_now_not_reproduced():
    # Printed before: "+0.946 [+0.759, +0.976] (8 contexts) -> inconclusive", rule "CI upper end < 0.5:
    # reproduced; CI lower end >= 1: not reproduced" -- the interval lies wholly above the claim's 0.5.
    assert old_c1_rule(0.759, 0.976) == "inconclusive"
    part = c1_part(0.946, 0.759, 0.976)
    assert part.verdict == "not reproduced" and part.outcome == decide(0.759, 0.976, "<=", 0.5) == "fails"
    f = verdicts.Finding.judge("C1", "c", "k", [part])
    text = verdicts.render(f)
    assert "+0.946 [+0.759, +0.976] (8 contexts) -> not reproduced" in text
    assert "reproduced when its upper end <= 0.5, not reproduced when its lower end > 0.5" in text
    assert f.verdict == "not reproduced" and "verdict: NOT REPRODUCED" in text


def test_c1_per_context_numbers_give_fieller_no_interval_and_a_size_that_would_decide():
    # With the interval the core uses for means over few units (a t test, here inverted: Fieller), the
    # same 8 contexts give no bounded interval -- the mean KL(p0||q*) is not clearly away from 0 at n = 8,
    # one context carrying 11.56 of 17.06 -- so the verdict is inconclusive, as its (absent) interval says.
    part = verdicts.ratio_at_most("ratio", C1_KL_Q, C1_KL_P0, 0.5, metric="kl_ratio", arm="adv0", unit="contexts")
    assert part.value == pytest.approx(np.mean(C1_KL_Q) / np.mean(C1_KL_P0))
    assert part.ci_low is None and part.ci_high is None and part.verdict == "inconclusive"
    assert part.needed_n == 18  # the core's seeds_to_decide of KL_q - 0.5 KL_p0
    # Well-behaved denominators: a bounded interval wholly above 0.5 is "not reproduced", below it "reproduced".
    rng = np.random.default_rng(0)
    y = rng.uniform(1.0, 2.0, 12)
    above = verdicts.ratio_at_most("r", 0.9 * y + rng.normal(0, 0.02, 12), y, 0.5, metric="r", arm="a", unit="u")
    assert above.ci_low > 0.5 and above.verdict == "not reproduced" and above.needed_n is None
    below = verdicts.ratio_at_most("r", 0.3 * y + rng.normal(0, 0.02, 12), y, 0.5, metric="r", arm="a", unit="u")
    assert below.ci_high <= 0.5 and below.verdict == "reproduced"


# ---------------------------------------------------------------- the verdict is what the printed interval says
LINE = re.compile(r": (?P<value>n/a|[+-]\d+\.\d{3})(?: \[(?P<lo>[+-]\d+\.\d{3}), (?P<hi>[+-]\d+\.\d{3})\]| \(no interval\))"
                  r" \(.*?\) -> (?P<verdict>reproduced|not reproduced|inconclusive)")
RULE = re.compile(r"reproduced when its (?P<hend>lower|upper) end (?P<hcmp>>=|>|<=|<) (?P<hval>\S+), "
                  r"not reproduced when its (?P<fend>lower|upper) end (?P<fcmp>>|<) (?P<fval>[^,]+), else inconclusive")
CMP = {">=": lambda a, b: a >= b, ">": lambda a, b: a > b, "<=": lambda a, b: a <= b, "<": lambda a, b: a < b}


def read_printed(text: str) -> list[tuple[float | None, float | None, str, re.Match]]:
    """(lo, hi, verdict, rule) of every judged part as `render` printed it."""
    lines = text.splitlines()
    out = []
    for i, line in enumerate(lines):
        m = LINE.search(line)
        if m and line.startswith("  ") and lines[i + 1].strip().startswith("rule:"):
            rule = RULE.search(lines[i + 1])
            assert rule, lines[i + 1]
            lo = float(m["lo"]) if m["lo"] else None
            hi = float(m["hi"]) if m["hi"] else None
            out.append((lo, hi, m["verdict"], rule))
    return out


def what_the_interval_says(lo: float | None, hi: float | None, rule: re.Match) -> str:
    if lo is None or hi is None:
        return "inconclusive"
    end = {"lower": lo, "upper": hi}
    if CMP[rule["hcmp"]](end[rule["hend"]], float(rule["hval"])):
        return "reproduced"
    if CMP[rule["fcmp"]](end[rule["fend"]], float(rule["fval"])):
        return "not reproduced"
    return "inconclusive"


def test_property_every_parts_verdict_is_what_its_printed_interval_says():
    rng = np.random.default_rng(20)
    grid = lambda: float(rng.integers(-6, 7)) / 10  # noqa: E731  -- few values: ends on the threshold are common
    parts = []
    for _ in range(3000):
        lo, hi = sorted((grid(), grid()))
        op = str(rng.choice([">=", "<=", ">", "<"]))
        refute = None if rng.random() < 0.4 else grid()
        parts.append(verdicts.judged("q", (lo + hi) / 2, lo, hi, op=op, threshold=grid(),  # type: ignore[arg-type]
                                     refute_at=refute, method="m", n="n", size=1, metric="q", arm="a"))
    parts.append(verdicts.judged("q", 0.1, None, None, op=">=", threshold=0.0, method="m", n="n", size=1, metric="q",
                                 arm="a"))
    text = verdicts.render(verdicts.Finding.judge("CX", "c", "k", parts))
    printed = read_printed(text)
    assert len(printed) == len(parts)
    for (lo, hi, verdict, rule), part in zip(printed, parts):
        assert verdict == part.verdict == what_the_interval_says(lo, hi, rule), (lo, hi, rule.group(0))
    seen = {p.verdict for p in parts}
    assert seen == {"reproduced", "not reproduced", "inconclusive"}


def test_property_each_rule_builder_agrees_with_its_interval():
    rng = np.random.default_rng(21)
    for _ in range(300):
        n1, n2 = (int(x) for x in rng.integers(1, 80, 2))
        k1, k2 = int(rng.integers(0, n1 + 1)), int(rng.integers(0, n2 + 1))
        p = verdicts.rate_higher("d", k1, n1, k2, n2, 0.05, metric="d", arm="a", versus="b")
        expect = "reproduced" if p.ci_low > 0 else "not reproduced" if p.ci_high < 0.05 else "inconclusive"
        assert p.verdict == expect
        limit = float(rng.choice([0.05, 0.1, 0.3]))
        p = verdicts.rate_at_most("r", k1, n1, limit, metric="r", arm="a")
        assert p.verdict == ("reproduced" if p.ci_high <= limit else "not reproduced" if p.ci_low > limit
                             else "inconclusive")
        x, y = rng.gamma(2.0, 1.0, 8), rng.gamma(4.0, 1.0, 8)
        p = verdicts.ratio_at_most("ratio", x, y, limit * 5, metric="r", arm="a", unit="u")
        if p.ci_low is None:
            assert p.verdict == "inconclusive"
        else:
            assert p.verdict == ("reproduced" if p.ci_high <= limit * 5 else "not reproduced" if p.ci_low > limit * 5
                                 else "inconclusive")
        rise = rng.normal(float(rng.normal(0, 0.3)), 0.3, 6)
        p = verdicts.mean_above("rise", rise, 0.0, metric="rise", arm="a", unit="u")
        assert p.verdict == ("reproduced" if p.ci_low > 0 else "not reproduced" if p.ci_high < 0 else "inconclusive")


def test_a_strict_claim_is_not_shown_by_an_interval_ending_on_its_threshold():
    # "A higher than B": [0, 2] (an integer-valued bootstrap, a zero rise) does not show A > B.
    p = verdicts.judged("d", 1.0, 0.0, 2.0, op=">", threshold=0.0, refute_at=1.0, method="m", n="n",
                        size=1, metric="d", arm="a")
    assert p.verdict == "inconclusive" and "lower end > 0" in p.rule
    zero = verdicts.mean_above("rise", [0.0, 0.0, 0.0], 0.0, metric="rise", arm="a", unit="u")
    assert (zero.ci_low, zero.ci_high, zero.verdict) == (0.0, 0.0, "inconclusive")
    assert verdicts.Part.model_validate({**p.model_dump(), "verdict": "reproduced"}).verdict == "inconclusive"


# ---------------------------------------------------------------- the intervals added to harness.stats
def test_welch_interval_matches_scipy_and_covers_at_small_unequal_arms():
    rng = np.random.default_rng(5)
    a, b = rng.normal(1.0, 2.0, 6), rng.normal(0.0, 0.5, 11)
    d, lo, hi = welch_interval(a, b)
    ci = scipy_stats.ttest_ind(a, b, equal_var=False).confidence_interval(0.95)
    assert d == pytest.approx(a.mean() - b.mean()) and (lo, hi) == pytest.approx((ci.low, ci.high))
    assert welch_interval([1.0], [0.0, 1.0])[1:] == (-math.inf, math.inf)
    assert welch_interval([1.0, 1.0], [0.5, 0.5]) == (0.5, 0.5, 0.5)
    hits = sum(lo <= 1.0 <= hi for lo, hi in (welch_interval(rng.normal(1.0, 2.0, 4), rng.normal(0.0, 0.5, 9))[1:]
                                              for _ in range(2000)))
    assert hits / 2000 >= 0.93


def test_fieller_is_the_inverted_t_test_of_the_paired_differences():
    rng = np.random.default_rng(6)
    y = rng.uniform(1.0, 3.0, 10)
    x = 0.7 * y + rng.normal(0.0, 0.1, 10)
    r, lo, hi = paired_ratio_interval(x, y)
    assert r == pytest.approx(x.mean() / y.mean()) and lo < r < hi
    assert mean_interval(x - hi * y)[2] == pytest.approx(0.0, abs=1e-9)  # at its ends the t interval touches 0
    assert mean_interval(x - lo * y)[1] == pytest.approx(0.0, abs=1e-9)
    for limit in (lo - 0.01, r, hi + 0.01):  # "ratio <= limit" is "t interval of x - limit y <= 0"
        assert (hi <= limit) == (mean_interval(x - limit * y)[2] <= 0)
    assert paired_ratio_interval(C1_KL_Q, C1_KL_P0)[1:] == (-math.inf, math.inf)
    assert paired_ratio_interval([1.0], [2.0]) == (0.5, -math.inf, math.inf)


def test_bootstrap_difference_is_for_non_means_at_30_units():
    assert BOOTSTRAP_MIN_UNITS == 30
    a, b = np.array(list("abcde") * 6, dtype=object), np.array(list("ab") * 15, dtype=object)
    distinct = lambda v: float(len(set(v)))  # noqa: E731
    d, lo, hi, se = bootstrap_difference(a, b, distinct, seed=0)
    assert d == 3.0 and lo <= d <= hi and se >= 0
    assert bootstrap_difference(a, b, distinct, seed=0) == (d, lo, hi, se)  # seeded
    assert all(math.isnan(x) for x in bootstrap_difference([], b, distinct))


# ---------------------------------------------------------------- the paper's sentence, departures, saved verdicts
def test_every_check_names_the_papers_sentence_and_its_departures():
    for name in checks.CHECKS:
        assert paper.sentence_for(name), name
        deps = paper.departures_for(name)
        texts = [d.ours for d in deps]
        assert any("factorised categorical" in t and "drawn once per episode" in t for t in texts), name
        assert any("from a power calculation fixed before its run" in t for t in texts), name
        assert all(d.paper and d.ours and d.why and d.effect for d in deps)


def test_a_finding_is_a_core_claim_verdict_in_the_claims_table(tmp_path):
    """A finding of unknown size (built here, not by `run_check`): exploratory, hashed by its parts."""
    parts = [verdicts.rate_higher("defender-failure rate: adv0 - random", 9, 30, 2, 30, 0.05,
                                  metric="defender-failure rate", arm="adv0", versus="random"),
             verdicts.rate_at_most("adv0 attacker-at-fault share of its crashes", 0, 9, 0.05,
                                   metric="attacker-at-fault share", arm="adv0", unit="adv0 crashes")]
    f = verdicts.Finding.judge("C3", "claim", "criterion text", parts, world="toy", setting="toy, 30 episodes")
    v = verdicts.claim_verdict(f)
    assert v.claim == "adv0.C3" and v.family == "adv0" and v.sentence == paper.EXPOSES
    assert v.verdict == f.verdict == "inconclusive" and v.seeds == 30 and len(v.looks) == 1
    assert [c.outcome for c in v.conditions] == [p.outcome for p in parts] == ["holds", "undecided"]
    assert v.conditions[0].ci_low == parts[0].ci_low and v.conditions[1].seeds_needed == parts[1].needed_n
    claim, registered = verdicts.claim_of(f)
    assert not registered and v.registered is None and verdicts.EXPLORATORY in v.note
    assert v.criterion_hash == claim.criterion_hash() and len(v.criterion_hash) == 16
    assert len(v.departures) == len(paper.departures_for("C3"))
    # The hash moves with the rule and the size, not with the numbers.
    other = verdicts.Finding.judge("C3", "claim", "criterion text", [
        verdicts.rate_higher("x", 1, 30, 2, 30, 0.05, metric="defender-failure rate", arm="adv0", versus="random"),
        parts[1]], world="toy")
    assert verdicts.claim_of(other)[0].criterion_hash() == v.criterion_hash
    looser = f.model_copy(update={"parts": [parts[0].model_copy(update={"refute_at": 0.1}), parts[1]]})
    assert verdicts.claim_of(looser)[0].criterion_hash() != v.criterion_hash
    save_verdict(tmp_path, v)
    [loaded] = load_verdicts([tmp_path])
    assert loaded == v and "| adv0.C3 |" in to_markdown([loaded])


def test_check_command_saves_the_verdict_under_run_dir(tmp_path):
    result = CliRunner().invoke(adv0_app, ["check", "C1", "--seeds", "3", "--run-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "the paper: " + paper.ITERATES in text and "departure 1: the paper:" in text
    assert "exp(-J_gated(z)/tau)" in text  # printed as text, not as console markup
    [v] = load_verdicts([tmp_path])
    assert v.claim == "adv0.C1" and v.seeds == 3 and f"saved: {tmp_path}/claims/adv0.C1.json" in text
    assert v.verdict in text.lower()
    assert "exploratory" in text and "seeds=3" in text and v.registered is None  # 3 contexts: not the registered 34


def test_a_check_at_its_default_size_is_judged_by_its_registered_criterion(tmp_path):
    from environments.adv0.checks import checks
    from environments.adv0.checks.claims import registered_claim

    f = checks.run_check("C1")
    claim, registered = verdicts.claim_of(f)
    assert registered and f.overrides == {} and claim == registered_claim("C1")
    v = verdicts.claim_verdict(f)
    assert v.criterion_hash == registered_claim("C1").criterion_hash() and verdicts.EXPLORATORY not in v.note
    default = registered_claim("C1").plan.looks[0]
    assert checks.overrides("C1", {"seeds": default, "episodes": None}, "toy") == {}  # the default given: still registered
    # A threshold moved in the check without an amendment is an error at its first run, naming the fix.
    moved = f.model_copy(update={"parts": [f.parts[0].model_copy(update={"threshold": 0.6})]})
    with pytest.raises(HarnessError, match="not its registered criterion.*criteria_log.toml"):
        verdicts.claim_of(moved)
    # ... and so is a default-size run of fewer units than the registered power plan looks at
    short = f.model_copy(update={"parts": [f.parts[0].model_copy(update={"size": 8})]})
    with pytest.raises(HarnessError, match="ran 8 contexts at its default size.*looks at 34"):
        verdicts.claim_of(short)
