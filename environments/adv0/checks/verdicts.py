"""How an ADV-0 claim check's finding becomes a verdict, and how it is printed and saved.

A `Finding` is what a check leaves: the claim as we test it, its judged comparisons (`Part`s, in
`comparisons.py`: each verdict the core's `harness.claims.decide` on the interval it prints), the
numbers beside them and the verdict, the core's `combine` of the parts' outcomes. `claim_verdict`
turns it into the core's `ClaimVerdict` (claim id `adv0.C1`..., the paper's sentence, the criterion
hash and the date it was registered, the departures), saved under `RUN_DIR/claims/` for the
cross-family claims table. A check run at its default size is judged by its registered criterion
(`claims.py`): `claim_of` checks that its parts are exactly the registered conditions; at any other
size it is exploratory and says so. The checks run as ordinary runs of the suite `adv0-check`
(`check_runs.py`); this module is what their records are judged into.

The comparison builders are re-exported here (`Part`, `rate_higher`, ...), so a check module
imports its whole verdict vocabulary from one place.

May import: the standard library, numpy, pydantic and `harness`, `environments.adv0.checks.paper`,
`environments.adv0.checks.claims`, `environments.adv0.checks.comparisons`, `environments.adv0.checks.power`.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from environments.adv0.checks.claims import CRITERIA_LOG, SIZES, registered_claim
from environments.adv0.checks.comparisons import (
    ALPHA,
    LEVEL,
    VERDICT_OF,
    Z_ALPHA,
    Z_POWER,
    Part,
    judged,
    mean_above,
    one_proportion_n,
    rate_at_most,
    rate_higher,
    ratio_at_most,
    relative_not_below,
    scaled_n,
    stat_higher,
)
from environments.adv0.checks.paper import departures_for, sentence_for
from environments.adv0.checks.power import two_proportion_n
from harness.claims import (
    Claim,
    ClaimVerdict,
    ConditionResult,
    Departure,
    Look,
    SeedPlan,
    Verdict,
    combine,
    decide,
)
from harness.claims.model import Scalar
from harness.claims.prereg import first_committed
from harness.errors import HarnessError
from harness.records import Metric
from harness.stats import wilson_interval

__all__ = [
    "ALPHA",
    "EXPLORATORY",
    "Finding",
    "LEVEL",
    "Part",
    "VERDICT_OF",
    "Verdict",
    "Z_ALPHA",
    "Z_POWER",
    "claim_of",
    "claim_verdict",
    "combine",
    "decide",
    "fmt_metric",
    "fmt_rate",
    "judged",
    "mean_above",
    "one_proportion_n",
    "rate_at_most",
    "rate_higher",
    "ratio_at_most",
    "relative_not_below",
    "render",
    "scaled_n",
    "stat_higher",
    "two_proportion_n",
]


# ---------------------------------------------------------------- a check's finding
class Finding(BaseModel):
    """What a check prints (and `--json` writes); `claim_verdict` makes it a core `ClaimVerdict`."""

    check: str
    claim: str  # the claim as we test it
    sentence: str = ""  # the paper's sentence it tests (`paper.py`)
    setting: str = ""  # ours: the world and sizes that stand in for the paper's
    world: str = "highway"  # the family the check ran on (toy or highway)
    criterion: str
    parts: list[Part]
    numbers: dict[str, str] = Field(default_factory=dict)  # context figures, each "value [lo, hi] (n)"
    verdict: Verdict
    needed_n: int | None = None
    needed_unit: str = "episodes per arm"
    notes: list[str] = Field(default_factory=list)
    departures: list[Departure] = Field(default_factory=list)
    wall_s: float = 0.0
    cpu_s: float = 0.0
    # What the check ran at beyond its default size: {} = the default size (the registered criterion
    # judges it); None = not known (a finding built outside `checks.run_check`): exploratory.
    overrides: dict[str, Scalar] | None = None

    @classmethod
    def judge(cls, check: str, claim: str, criterion: str, parts: list[Part], **kw: Any) -> Finding:
        """The verdict is the core's `combine` of the parts' outcomes; an inconclusive finding needs
        the largest size any of its inconclusive parts needs. The paper's sentence and the
        departures come from `paper.py` unless given."""
        verdict = combine(p.outcome for p in parts)
        needs = [p for p in parts if p.outcome == "undecided" and p.needed_n is not None]
        top = max(needs, key=lambda p: p.needed_n or 0) if verdict == "inconclusive" and needs else None
        kw.setdefault("sentence", sentence_for(check))
        kw.setdefault("departures", departures_for(check))
        return cls(
            check=check,
            claim=claim,
            criterion=criterion,
            parts=parts,
            verdict=verdict,
            needed_n=top.needed_n if top else None,
            needed_unit=top.unit if top else "episodes per arm",
            **kw,
        )


def claim_of(f: Finding) -> tuple[Claim, bool]:
    """The criterion the finding is judged by, and whether it is the registered one. At the check's
    default size (`overrides == {}`) that is the registered claim (`claims.py`), and the finding's
    parts must be exactly its conditions -- a check whose thresholds moved without an amendment is
    an error here, at its first run. At any other size: the same conditions with the size it ran
    as the plan's one look and its overrides in the protocol (an exploratory criterion, not
    registered)."""
    conditions = [p.condition(f.world) for p in f.parts]
    arms = tuple(dict.fromkeys(a for p in f.parts for a in (p.arm, p.versus) if a))
    if f.overrides == {} and f.check in SIZES:
        registered = registered_claim(f.check)
        if conditions != registered.conditions:
            ran = "; ".join(c.text() for c in conditions)
            raise HarnessError(
                f"check {f.check} judged by {ran!r}, which is not its registered criterion "
                f"({registered.criterion_text()}): register the change in environments/adv0/"
                "criteria_log.toml and environments/adv0/checks/claims.py, or restore the threshold"
            )
        look = registered.plan.looks[0]
        short = [p for p in f.parts if p.unit == registered.plan.unit and p.size != look]
        if short:  # the default-size path ran another size than the registered plan: not its criterion
            raise HarnessError(
                f"check {f.check} ran {short[0].size} {short[0].unit} at its default size, but its "
                f"registered plan looks at {look}: the check's default and claims.SIZES disagree"
            )
        return registered, True
    protocol: dict[str, Scalar] = dict(SIZES.get(f.check, {})) | (f.overrides or {})
    claim = Claim(
        id=f"adv0.{f.check}",
        sentence=f.sentence or f.claim,
        setting=f.setting or f.world,
        arms=arms,
        settings=(f.world,),
        conditions=conditions,
        plan=SeedPlan(
            looks=(max(1, f.parts[0].size if f.parts else 1),),
            level=LEVEL,
            unit=f.parts[0].unit if f.parts else "episodes per arm",
        ),
        protocol=protocol,
        departures=f.departures,
    )
    return claim, False


def registration(claim: Claim, registered: bool) -> str | None:
    """The date the registered criterion entered git (None: exploratory or not committed)."""
    return first_committed(CRITERIA_LOG, claim.criterion_hash()) if registered else None


EXPLORATORY = "exploratory: not the check's default size, so not its registered criterion"


def claim_verdict(f: Finding) -> ClaimVerdict:
    """The finding as the core saves a verdict (`RUN_DIR/claims/adv0.CN.json`): one condition per
    part, one look at the size the check ran, `seeds` = that size (episodes per arm or contexts)."""
    claim, registered = claim_of(f)
    conditions = [
        ConditionResult(
            condition=p.condition_text(),
            estimate=p.value,
            ci_low=p.ci_low,
            ci_high=p.ci_high,
            n=p.size,
            level=LEVEL,
            outcome=p.outcome,
            seeds_needed=p.needed_n if p.outcome == "undecided" else None,
        )
        for p in f.parts
    ]
    size = claim.plan.looks[0]
    return ClaimVerdict(
        claim=claim.id,
        sentence=claim.sentence,
        setting=claim.setting,
        criterion=f"{f.criterion} [{f.parts[0].unit if f.parts else ''}: {size}]",
        criterion_hash=claim.criterion_hash(),
        registered=registration(claim, registered),
        verdict=f.verdict,
        seeds=size,
        subject=f.overrides.get("model") if f.overrides else None,
        conditions=conditions,
        looks=[Look(seeds=size, level=LEVEL, verdict=f.verdict, conditions=conditions)],
        departures=f.departures,
        seeds_to_decide=f.needed_n,
        wall_s=f.wall_s,
        unit=f.needed_unit if f.needed_n else (f.parts[0].unit if f.parts else "episodes per arm"),
        note="; ".join([f"ours: {f.claim}", *([] if registered else [EXPLORATORY]), *f.notes])[:2000],
    )


# ---------------------------------------------------------------- printing
def fmt_metric(m: Metric | None) -> str:
    if m is None or m.value is None:
        return "n/a"
    if m.ci_low is None or m.ci_high is None:
        return f"{m.value:.3f} (n={m.n})"
    return f"{m.value:.3f} [{m.ci_low:.3f}, {m.ci_high:.3f}] (n={m.n})"


def fmt_rate(k: int, n: int) -> str:
    lo, hi = wilson_interval(k, n, LEVEL)
    return f"{k / n if n else float('nan'):.3f} [{lo:.3f}, {hi:.3f}] ({k}/{n})"


def fmt_part(p: Part) -> str:
    """'value [lo, hi]' exactly as judged (the interval the verdict was computed from)."""
    val = "n/a" if p.value is None else f"{p.value:+.3f}"
    ci = " (no interval)" if p.ci_low is None or p.ci_high is None else f" [{p.ci_low:+.3f}, {p.ci_high:+.3f}]"
    return val + ci


def render(f: Finding) -> str:
    """The finding as the command prints it."""
    claim, registered = claim_of(f)
    lines = [
        f"{f.check} ({claim.id}) -- the paper: {f.sentence or '(not stated)'}",
        f"claim (as we test it): {f.claim}",
    ]
    if f.setting:
        lines.append(f"setting (ours): {f.setting}")
    if registered:
        status = f"registered {registration(claim, registered) or 'in the log, not committed yet'}"
    else:
        status = f"{EXPLORATORY}: {', '.join(f'{k}={v}' for k, v in (f.overrides or {}).items()) or 'size unknown'}"
    lines += [f"criterion {claim.criterion_hash()} ({status}): {f.criterion}", "numbers (95% CIs):"]
    lines += [f"  {k}: {v}" for k, v in f.numbers.items()]
    lines.append("judged:")
    for p in f.parts:
        need = f"; deciding it needs ~{p.needed_n} {p.unit}" if p.needed_n and p.outcome == "undecided" else ""
        lines.append(f"  {p.what}: {fmt_part(p)} ({p.n}) -> {p.verdict}{need}")
        lines.append(f"    rule: {p.rule}")
        if p.by_party:
            lines.append(f"    defender failures by the other vehicle: {p.by_party}")
    lines += [f"note: {n}" for n in f.notes]
    for i, d in enumerate(f.departures, 1):
        lines.append(f"departure {i}: the paper: {d.paper} | ours: {d.ours} | why: {d.why} | effect: {d.effect}")
    verdict = f.verdict.upper()
    if f.verdict == "inconclusive":
        verdict += (
            f" -- deciding it needs ~{f.needed_n} {f.needed_unit}"
            if f.needed_n
            else " -- no sample size estimate (see the parts)"
        )
    lines.append(f"verdict: {verdict}")
    lines.append(f"wall {f.wall_s:.1f} s, CPU {f.cpu_s:.1f} s")
    return "\n".join(lines)
