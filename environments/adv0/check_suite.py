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

May import: pydantic, `harness`, `environments.adv0.cells`, `environments.adv0.claims` (the check
modules are imported inside `solve`, so listing the suite loads no simulator or trainer).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

from environments.adv0.cells import ARMS, MAX_SEED, Cell
from harness.claims.model import cell_id
from harness.errors import HarnessError
from harness.records import Metric, MetricSpec, SampleRecord
from harness.stats import mean_metric
from harness.suite import FunctionScorer, Sample, SampleContext, Score, Scorer, Suite, SuiteOptions, Transcript

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

    def flags(self) -> dict[str, Any]:
        """The check's flags as `checks.run_check` takes them (`contexts` is its `--seeds`)."""
        out = {k: getattr(self, k) for k in FLAGS if k != "contexts"}
        return out | {"seeds": self.contexts}

    @property
    def world(self) -> str:
        return "toy" if self.check in ("C1", "C2") else self.family or "highway"


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
    scores["defender_failure_rate"] = sum(r.defender_failure for r in every) / len(every) if every else None
    return scores


class Adv0CheckSuite(Suite):
    name = "adv0-check"
    version = "1.0.0"
    headline_metric = "defender_failure_rate"
    description = (
        "ADV-0's claim checks as runs: a run is one arm of one check (options check, arm), a sample one "
        "cell WORLD/seedNNN (that arm trained and played at that seed, recorded whole); `harness adv0 "
        "check CN` runs them and `harness adv0 verdict RUN...` judges their records."
    )
    Options: ClassVar[type[SuiteOptions]] = CheckOptions
    label_options: ClassVar[tuple[str, ...]] = ("check", "arm")
    metric_specs: ClassVar[Mapping[str, MetricSpec]] = {
        "defender_failure_rate": MetricSpec(
            unit="fraction",
            description="defender-at-fault failures over every "
            "episode of the cells (an attacker wants it high, a defender low)",
        )
    }

    @property
    def opts(self) -> CheckOptions:
        assert isinstance(self.options, CheckOptions)
        return self.options

    @property
    def solver_roles(self) -> tuple[str, ...]:
        return ()

    def load_samples(self, corpus: str | None) -> list[Sample]:
        if corpus is not None:
            raise HarnessError(f"suite {self.name}: the cells are built in code; it takes no corpus ({corpus!r} given)")
        o = self.opts
        return [Sample(id=cell_id(o.world, s), data={"seed": s}) for s in range(o.first_seed, o.first_seed + o.seeds)]

    async def solve(self, sample: Sample, ctx: SampleContext) -> Transcript:
        from environments.adv0 import checks

        o = self.opts
        # In a thread: a cell is CPU-bound for minutes, and the runner's per-sample timeout must still fire.
        found = await asyncio.to_thread(checks.cell, o.check, o.arm, int(sample.data["seed"]), **o.flags())
        return Transcript(output=found)

    def scorers(self) -> dict[str, Scorer]:
        return {
            "cell": FunctionScorer(
                "cell",
                self._score,
                description=(
                    "per episode role: defender-failure rate, crash rate, episodes; per per-context number: its mean; "
                    "from the recorded cell"
                ),
            )
        }

    async def _score(self, sample: Sample, transcript: dict[str, Any], ctx: SampleContext) -> Score:
        return Score(values=cell_scores(Cell.model_validate(transcript)))

    def metrics(self, records: list[SampleRecord], seed: int = 0) -> dict[str, Metric]:
        """Each score's mean over the cells (seeds), with its Student-t interval."""
        names = sorted({k for r in records for k in r.scores})
        out = {}
        for name in names:
            values = [float(v) for r in records if isinstance(v := r.scores.get(name), (int, float))]
            out[name] = mean_metric(values)
        out.setdefault("defender_failure_rate", mean_metric([]))
        return out

    def counts(self, records: list[SampleRecord]) -> dict[str, int]:
        return {"cells": len(records)}
