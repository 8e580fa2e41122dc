"""`adv0-check`: ADV-0's claim checks as a suite, one cell per sample (the runs of `harness adv0
check`). A run is one arm of one check (options `check`, `arm`); its samples are the cells
`WORLD/seedNNN` (`harness.claims.model.cell_id`; WORLD is toy or the highway family), `seeds` of
them from `first_seed`. Solving a cell trains and plays that arm at that seed (`checks.cell`: its
own training and evaluation seeds) and records it whole (`cells.Cell`: the episodes, per-context
numbers, counts), so the check's verdict is recomputed from the records without playing an
episode (`check_runs.py`). The other options are the check's size flags (`harness adv0 check
--help`); left at None they are the check's default size -- the size its registered criterion is
judged at -- and a run stores only what it sets.

Scores per cell, from the recorded cell alone: for each role of its episodes (eval, held_out,
normal, with, without) the defender-failure and crash rates and the episode count, and for each
per-context number its mean. No model role is called by the runner: C9's LLM driver loads its
model itself (`--model`).

Which way is better depends on the side the arm plays: an attacker arm (C1-C5, C8) is better the
more defender failures it exposes, a defender arm (C6, C7's trained defenders, C9's driver) the
fewer it suffers. So the pooled rate is two metrics with their own directions -- an attacker arm's
cells score `failures_exposed_rate` (higher is better), a defender arm's `defender_failure_rate`
(lower is better) -- and a run's headline is its arm's: a leaderboard over runs of both kinds ranks
each by its own metric, never one kind backwards. The per-role rates follow the roles' sides (eval:
the attacker arms'; held_out, normal, with, without: the defender arms').

May import: pydantic, `harness`, `environments.adv0.checks.cells`, `environments.adv0.checks.claims` (the check
modules are imported inside `solve`, so listing the suite loads no simulator or trainer).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar, Literal

from pydantic import Field, model_validator

from environments.adv0.checks.cells import ARMS, MAX_SEED, Cell, CheckFlags
from harness.cell_suite import CellSuite
from harness.claims.model import cell_id
from harness.records import Metric, MetricSpec, SampleRecord
from harness.stats import mean_metric
from harness.suite import Sample, SuiteOptions

CheckName = Literal["C1", "C2", "C3", "C4", "C5", "C6", "C7", "C8", "C9"]
FLAGS = ("episodes", "contexts", "family", "rounds", "model", "dqn_steps", "dqn_checkpoint")


class CheckOptions(SuiteOptions):
    check: CheckName = Field("C1", description="the claim check, C1..C9")
    arm: str = Field("adv0", description="the arm this run plays (cells.ARMS names each check's)")
    seeds: int = Field(1, ge=1, le=MAX_SEED + 1, description="cells (seeds) in this run")
    first_seed: int = Field(0, ge=0, le=MAX_SEED, description="the first seed")
    episodes: int | None = Field(None, ge=1, description="the check's --episodes (None: its default size)")
    contexts: int | None = Field(None, ge=1, description="the check's --seeds where it counts contexts (C1-C5, C8, C9)")
    family: str | None = Field(None, description="highway or toy (None: the check's world)")
    rounds: int | None = Field(None, ge=1, description="min-max rounds (C3-C9; None: the default)")
    model: str | None = Field(None, description="C9: the LLM driver's model spec")
    dqn_steps: int | None = Field(None, ge=1, description="C7: DQN fine-tuning steps per round")
    dqn_checkpoint: str | None = Field(None, description="C7: the DQN to start from (None: the cached pretraining)")

    @model_validator(mode="after")
    def _known_arm(self) -> CheckOptions:
        if self.arm not in ARMS[self.check]:
            raise ValueError(
                f"arm {self.arm!r} is not an arm of check {self.check}; use one of {', '.join(ARMS[self.check])}"
            )
        if self.first_seed + self.seeds > MAX_SEED + 1:
            raise ValueError(
                f"seeds {self.first_seed}..{self.first_seed + self.seeds - 1}: the last seed is {MAX_SEED}"
            )
        return self

    def flags(self) -> CheckFlags:
        """The check's flags as `checks.run_check` takes them (`contexts` is its `--seeds`), in `FLAGS`' order."""
        return {"episodes": self.episodes, "family": self.family, "rounds": self.rounds, "model": self.model,
                "dqn_steps": self.dqn_steps, "dqn_checkpoint": self.dqn_checkpoint, "seeds": self.contexts}

    @property
    def world(self) -> str:
        return "toy" if self.check in ("C1", "C2") else self.family or "highway"


# The arms that play the defender (the rest attack): the two trained defenders of C6 and C7, C9's driver.
DEFENDER_ARMS = frozenset({"adv0-trained", "normally-trained", "with-and-without-reflections"})
ATTACKER_HEADLINE = "failures_exposed_rate"
DEFENDER_HEADLINE = "defender_failure_rate"
# Episode roles by the side whose quality their rates measure (checks_exposure, checks_loops).
ATTACKER_ROLES = ("eval",)
DEFENDER_ROLES = ("held_out", "normal", "with", "without")


def headline_for(arm: str) -> str:
    """The arm's own objective: the failures it exposes (an attacker) or suffers (a defender)."""
    return DEFENDER_HEADLINE if arm in DEFENDER_ARMS else ATTACKER_HEADLINE


def _specs() -> dict[str, MetricSpec]:
    specs = {
        ATTACKER_HEADLINE: MetricSpec(
            direction="higher",
            unit="fraction",
            description="defender-at-fault failures over every episode of an attacker arm's cells: the failures "
            "the attacker exposed (higher is better for it; defender arms do not score it)",
        ),
        DEFENDER_HEADLINE: MetricSpec(
            direction="lower",
            unit="fraction",
            description="defender-at-fault failures over every episode of a defender arm's cells (lower is "
            "better for it; attacker arms score failures_exposed_rate instead)",
        ),
    }
    sides: tuple[tuple[tuple[str, ...], Literal["higher", "lower"], str], ...] = (
        (ATTACKER_ROLES, "higher", "attacker"),
        (DEFENDER_ROLES, "lower", "defender"),
    )
    for roles, direction, side in sides:
        for role in roles:
            # A crash counts for the defender arms whoever caused it; for an attacker, one it causes
            # itself is not a failure it exposed (C3), so the eval crash rate has no better side.
            for rate in ("defender_failure_rate", "crash_rate") if side == "defender" else ("defender_failure_rate",):
                specs[f"{role}_{rate}"] = MetricSpec(
                    direction=direction,
                    unit="fraction",
                    description=f"{rate.replace('_', ' ')} of the {role} episodes (a role of the {side} arms)",
                )
    return specs


def cell_scores(cell: Cell) -> dict[str, float | None]:
    scores: dict[str, float | None] = {}
    for role, results in cell.episodes.items():
        n = len(results)
        scores[f"{role}_episodes"] = float(n)
        scores[f"{role}_defender_failure_rate"] = sum(r.defender_failure for r in results) / n if n else None
        scores[f"{role}_crash_rate"] = sum(r.crashed for r in results) / n if n else None
    for name, values in cell.values.items():
        scores[f"{name}_mean"] = sum(values) / len(values) if values else None
    every = [r for results in cell.episodes.values() for r in results]
    scores[headline_for(cell.arm)] = sum(r.defender_failure for r in every) / len(every) if every else None
    return scores


class Adv0CheckSuite(CellSuite[Cell]):
    name = "adv0-check"
    version = "1.1.0"  # 1.1: the pooled rate split by the arm's side (failures_exposed_rate / defender_failure_rate)
    headline_metric = ATTACKER_HEADLINE  # the default arm's (adv0, an attacker); each run's is its arm's
    description = (
        "ADV-0's claim checks as runs: a run is one arm of one check (options check, arm), a sample one "
        "cell WORLD/seedNNN (that arm trained and played at that seed, recorded whole); `harness adv0 "
        "check CN` runs them and `harness adv0 verdict RUN...` judges their records."
    )
    Options: ClassVar[type[SuiteOptions]] = CheckOptions
    transcript_type = Cell
    scorer_description = (
        "per episode role: defender-failure rate, crash rate, episodes; per per-context number: its mean; "
        "from the recorded cell"
    )
    label_options: ClassVar[tuple[str, ...]] = ("check", "arm")
    metric_specs: ClassVar[Mapping[str, MetricSpec]] = _specs()

    def __init__(self, options: SuiteOptions | None = None) -> None:
        super().__init__(options)
        # The headline is the arm's own objective (the runner reads it from the instance); the
        # class's `headline_metric` is a ClassVar in the core, hence the instance dict.
        self.__dict__["headline_metric"] = headline_for(self.opts.arm)

    @property
    def opts(self) -> CheckOptions:
        assert isinstance(self.options, CheckOptions)
        return self.options

    def cells(self) -> list[Sample]:
        o = self.opts
        return [Sample(id=cell_id(o.world, s), data={"seed": s}) for s in range(o.first_seed, o.first_seed + o.seeds)]

    def solve_cell(self, sample: Sample) -> Cell:
        from environments.adv0.checks import checks

        o = self.opts
        return checks.cell(o.check, o.arm, int(sample.data["seed"]), **o.flags())

    def score_cell(self, cell: Cell) -> dict[str, float | None]:
        return cell_scores(cell)

    def metrics(self, records: list[SampleRecord], seed: int = 0) -> dict[str, Metric]:
        """Each score's mean over the cells (seeds), with its Student-t interval."""
        names = sorted({k for r in records for k in r.scores})
        out = {}
        for name in names:
            values = [float(v) for r in records if isinstance(v := r.scores.get(name), (int, float))]
            out[name] = mean_metric(values)
        out.setdefault(self.headline_metric, mean_metric([]))
        return out

    def counts(self, records: list[SampleRecord]) -> dict[str, int]:
        return {"cells": len(records)}
