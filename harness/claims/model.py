"""A claim as data: the paper's sentence, the arms and settings it compares, the criterion (its
conditions and the seed plan), and every departure of our setting from the paper's.

The criterion -- conditions, seed plan and protocol, nothing else -- is what is pre-registered: its hash
(`Claim.criterion_hash`) is printed beside every verdict and must appear in the family's
criterion log (`prereg.py`). The sentence, the setting and the departures are prose that may be
reworded without an amendment.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Literal

from pydantic import AliasChoices, BaseModel, Field, model_validator

Verdict = Literal["reproduced", "not reproduced", "inconclusive"]
Outcome = Literal["holds", "fails", "undecided"]
# ">=" / "<=": the interval must reach the threshold; ">" / "<": it must lie strictly beyond it
# ("A beats B" is "> 0": an interval ending exactly on 0 does not show the difference).
Op = Literal[">=", "<=", ">", "<"]
Scalar = str | int | float | bool

# A claim's cells are samples named SETTING/seedNNN.
CELL_ID = re.compile(r"^(?P<setting>.+)/seed(?P<seed>\d+)$")


def cell_id(setting: str, seed: int) -> str:
    return f"{setting}/seed{seed:03d}"


class Condition(BaseModel):
    """One part of a criterion: `stat` of `metric` for `arm` in `setting` (minus `versus`'s,
    paired by seed, when `versus` is set) compared with `threshold`. With `versus_setting`, the
    same quantity in that setting is subtracted, paired by seed: "the gain is larger at R8 than
    at R4" is `setting="R8", versus_setting="R4"`. `stat` min/max: the worst seed decides, exactly
    over the seeds run (no sampling interval)."""

    metric: str
    setting: str
    arm: str = Field(validation_alias=AliasChoices("arm", "solver"))
    op: Op
    threshold: float
    versus: str | None = None
    versus_setting: str | None = None
    stat: Literal["mean", "min", "max"] = "mean"
    refute_at: float | None = Field(None, description="fails only when the interval lies wholly beyond this point "
                                    "on the other side (the smallest effect that would matter); default: the threshold")

    def text(self) -> str:
        left = f"{self.stat} {self.metric}({self.arm})"
        if self.versus:
            left = f"{self.metric}({self.arm}) - {self.metric}({self.versus})"
        if self.versus_setting:
            quantity = f"[{left}]" if self.versus else f"{self.metric}({self.arm})"
            per_seed = "" if self.stat == "mean" else f"{self.stat} over seeds of "
            return (f"{per_seed}{quantity} @ {self.setting} - {quantity} @ {self.versus_setting} "
                    f"{self.op} {self.threshold:g}{self.refute_text()}")
        return f"{left} {self.op} {self.threshold:g}{self.refute_text()} @ {self.setting}"

    def refute_text(self) -> str:
        if self.refute_at is None:
            return ""
        return f" (refuted {'below' if self.op in ('>=', '>') else 'above'} {self.refute_at:g})"


class SeedPlan(BaseModel):
    """How many seeds, fixed before the first run. `looks` are the cumulative seed counts at which
    the check may look (ascending); it stops at the first look that decides. Every look spends an
    equal share of the error rate (Bonferroni over looks: each interval is at level
    1 - (1 - level) / len(looks)), so adding seeds after an inconclusive look is paid for in
    advance and the overall error rate stays at most 1 - level. More seeds than the last look need
    a new plan: an amendment."""

    looks: tuple[int, ...] = Field((5,), min_length=1)
    level: float = Field(0.95, gt=0.5, lt=1.0)
    unit: str = Field("seeds", description="what a look counts (ADV-0: episodes per arm, contexts)")

    @model_validator(mode="after")
    def _ascending(self) -> SeedPlan:
        if any(b <= a for a, b in zip(self.looks, self.looks[1:])) or self.looks[0] < 1:
            raise ValueError(f"seed plan looks {self.looks}: must be positive and strictly ascending")
        return self

    @property
    def look_level(self) -> float:
        """The confidence level of each look's intervals."""
        return 1 - (1 - self.level) / len(self.looks)

    def text(self) -> str:
        if len(self.looks) == 1:
            return f"{self.looks[0]} {self.unit}, {self.level:.0%} intervals"
        return (f"looks at {', '.join(map(str, self.looks))} {self.unit}, stop at the first that decides; "
                f"{self.look_level:.2%} intervals at each look (Bonferroni over {len(self.looks)} looks)")


class Departure(BaseModel):
    """One way our check differs from the paper's own experiment."""

    paper: str = Field(description="what the paper does")
    ours: str = Field(description="what we do instead")
    why: str = Field(description="why we depart")
    effect: str = Field(description="what the departure can do to the verdict")


class Claim(BaseModel):
    """A paper's claim as a check: everything the verdict is computed from, except the runs."""

    id: str = Field(description="family.name, e.g. papers.procti_synth_imputation")
    sentence: str = Field(description="the paper's claim, in the abstract's words")
    setting: str = Field(description="ours: the setting that stands in for the paper's")
    arms: tuple[str, ...] = Field(description="the method first, then baselines and ablations")
    settings: tuple[str, ...]
    conditions: list[Condition] = Field(min_length=1, description="all must hold for 'reproduced'")
    plan: SeedPlan = SeedPlan()
    protocol: dict[str, Scalar] = Field(default_factory=dict, description=(
        "fixed settings the criterion is judged at and gates outside its conditions (training steps, a "
        "learn gate's minimum): pre-registered with the conditions, so changing one is an amendment"))
    departures: list[Departure] = Field(default_factory=list)
    note: str = ""

    @model_validator(mode="after")
    def _conditions_name_known_parts(self) -> Claim:
        for c in self.conditions:
            arms = [a for a in (c.arm, c.versus) if a is not None]
            settings = [s for s in (c.setting, c.versus_setting) if s is not None]
            bad = [a for a in arms if a not in self.arms] + [s for s in settings if s not in self.settings]
            if bad:
                raise ValueError(f"claim {self.id}: condition {c.text()!r} names {bad[0]!r}, "
                                 f"which is not one of its arms {self.arms} or settings {self.settings}")
        return self

    @property
    def family(self) -> str:
        return self.id.split(".", 1)[0]

    def criterion(self) -> dict[str, object]:
        """What is pre-registered: the conditions and the seed plan."""
        # Defaults left out, so that a field added later does not change an existing criterion's hash.
        criterion: dict[str, object] = {
            "conditions": [c.model_dump(mode="json", exclude_defaults=True) for c in self.conditions],
            "plan": self.plan.model_dump(mode="json", exclude_defaults=True)}
        if self.protocol:
            criterion["protocol"] = dict(sorted(self.protocol.items()))
        return criterion

    def criterion_hash(self) -> str:
        blob = json.dumps(self.criterion(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def stamp(self) -> str:
        """What each run of a check records as the criterion it was started under."""
        return f"{self.id}@{self.criterion_hash()}"

    def criterion_text(self) -> str:
        protocol = "".join(f"; {k} = {v}" for k, v in sorted(self.protocol.items()))
        return "; ".join(c.text() for c in self.conditions) + f" ({self.plan.text()}{protocol})"

    def arms_needed(self) -> tuple[str, ...]:
        """The arms the conditions read (a check runs all `arms`; a verdict needs these)."""
        used = {a for c in self.conditions for a in (c.arm, c.versus) if a}
        return tuple(a for a in self.arms if a in used)
