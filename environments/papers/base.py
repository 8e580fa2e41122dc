"""The `papers` family's shared base: a method paper as a scored task.

A task is a suite whose samples are (setting, seed) cells. Its `solver` option names the paper's
method or one of the baselines the paper claims to beat; every solver sees the same cells, so the
claim check compares them paired by seed. `solve` runs the solver on one cell and records what it
chose; the scorer recomputes the paper's metric from that record and the cell alone (a re-score
needs no solver). No model is called: `solver_roles` is empty.

Each task states its claim as data (`harness.claims.Claim`: the paper's sentence, our setting, the
criterion -- conditions and seed plan, pre-registered in `criteria_log.toml` -- and every
departure from the paper); `harness describe` prints it, and `harness papers check` runs each arm
as an ordinary run and decides the verdict from the records (`harness/claims/`).
"""

from __future__ import annotations

import asyncio
from abc import abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar

from pydantic import BaseModel, Field

from harness.claims import Claim, Condition, Departure, SeedPlan
from harness.claims.model import cell_id
from harness.records import Metric, MetricSpec, SampleRecord
from harness.runner import package_versions
from harness.stats import mean_metric
from harness.suite import FunctionScorer, Sample, SampleContext, Score, Scorer, Suite, SuiteOptions, Transcript

__all__ = ["Cell", "CellResult", "Claim", "Condition", "Departure", "PaperOptions", "PaperTask", "SeedPlan", "describe_claim"]

VERSIONED_PACKAGES = ("numpy", "scipy", "scikit-learn", "torch")


class PaperOptions(SuiteOptions):
    """Every task's options; a task narrows `solver` to `Literal[method, baselines...]` with its
    method as the default."""

    solver: str = Field(description="the paper's method or one of its baselines (each task lists them)")
    seeds: int = Field(5, ge=1, le=500, description="seeds per setting (samples = settings x seeds)")
    first_seed: int = Field(
        0, ge=0, le=100_000, description="the first seed (a claim check's later look runs only its new seeds)"
    )


@dataclass(frozen=True)
class Cell:
    """One sample: a setting of the paper's and a seed."""

    setting: str
    seed: int


class CellResult(BaseModel):
    """What a solver records for one cell: its name, the cell, and its own typed `answer`."""

    solver: str
    setting: str
    seed: int
    answer: dict[str, Any]
    wall_s: float
    versions: dict[str, str] = Field(default_factory=lambda: package_versions(VERSIONED_PACKAGES))


OptionsT = TypeVar("OptionsT", bound=PaperOptions)


class PaperTask(Suite[Cell, CellResult, dict[str, float | None]], Generic[OptionsT]):
    """Subclasses (`PaperTask[TheirOptions]`) set `task`, `solvers` (method first), `settings`,
    `metric_names`, `claim`, an `Options` with a `solver` Literal, and implement `solve_cell` and
    `score_cell` (both pure functions of the cell)."""

    task: ClassVar[str]
    solvers: ClassVar[tuple[str, ...]]
    settings: ClassVar[tuple[str, ...]]
    metric_names: ClassVar[tuple[str, ...]]
    claim: ClassVar[Claim]
    label_options: ClassVar[tuple[str, ...]] = ("solver",)  # method and baselines named side by side
    Options: ClassVar[type[SuiteOptions]] = PaperOptions
    options: OptionsT  # the task's own `Options` (built by `Suite.__init__` from `Options`)
    # The family's shorthand for its metric declarations: the metrics where smaller is better
    # (errors, regret, excess risk); every other one of `metric_names` is higher-is-better.
    lower_is_better: ClassVar[frozenset[str]] = frozenset()
    transcript_type = CellResult  # every cell's recorded result, validated once by the runner

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "metric_names" in cls.__dict__ and "metric_specs" not in cls.__dict__:
            cls.metric_specs = {
                n: MetricSpec(direction="lower" if n in cls.lower_is_better else "higher") for n in cls.metric_names
            }

    @property
    def solver_roles(self) -> tuple[str, ...]:
        return ()

    @property
    def solver(self) -> str:
        return self.options.solver

    @property
    def seeds(self) -> int:
        return self.options.seeds

    def load_samples(self, corpus: str | None) -> list[Sample[Cell]]:
        first = self.options.first_seed
        return [
            Sample(id=cell_id(setting, seed), data=Cell(setting=setting, seed=seed))
            for setting in self.settings
            for seed in range(first, first + self.seeds)
        ]

    async def solve(self, sample: Sample[Cell], ctx: SampleContext) -> Transcript:
        # In a thread: the work is CPU-bound, and the runner's per-sample timeout must still fire.
        result = await asyncio.to_thread(self.solve_cell, sample.data.setting, sample.data.seed, self.solver)
        return Transcript(output=result)

    def scorers(self) -> dict[str, Scorer[CellResult]]:
        return {"metric": FunctionScorer("metric", self._score, description=self.metric_description())}

    async def _score(self, sample: Sample[Cell], transcript: CellResult, ctx: SampleContext) -> Score:
        values = await asyncio.to_thread(self.score_cell, transcript)  # validated once by the runner
        return Score(values=values)

    @abstractmethod
    def solve_cell(self, setting: str, seed: int, solver: str) -> CellResult:
        """Run `solver` on the cell; everything it chose goes in `answer`."""

    @abstractmethod
    def score_cell(self, result: CellResult) -> dict[str, float | None]:
        """The paper's metric(s) of a solver's answer, recomputed from the cell (None: not defined
        for this solver)."""

    def metric_description(self) -> str:
        return "the paper's metrics: " + ", ".join(self.metric_names)

    def metrics(self, records: list[SampleRecord], seed: int = 0) -> dict[str, Metric]:
        """Each metric per setting (`metric@setting`): the mean over seeds, Student-t CI over seeds
        (the interval the claim check uses: `harness/stats.py` says why not a bootstrap)."""
        out: dict[str, Metric] = {}
        for setting in self.settings:
            cell = [r for r in records if r.sample_id.startswith(setting + "/")]
            for name in self.metric_names:
                values = [float(v) for v in (r.scores.get(name) for r in cell) if v is not None]
                out[f"{name}@{setting}"] = mean_metric(values)
        return out

    def counts(self, records: list[SampleRecord]) -> dict[str, int]:
        return {"seeds": len({r.sample_id.split("/")[-1] for r in records})}


def describe_claim(task: str, claim: Claim, solvers: tuple[str, ...]) -> str:
    """The suite description `harness describe` prints: the paper's sentence, ours, the criterion
    with its hash, the arms, and every departure from the paper."""
    parts = [
        f"paper {task}. CLAIM (the paper's): {claim.sentence}",
        f"SETTING (ours): {claim.setting}",
        f"CRITERION (ours, pre-registered, hash {claim.criterion_hash()}): {claim.criterion_text()}",
        f"ARMS: {solvers[0]} (method), " + ", ".join(solvers[1:]) + " (baselines, ablations, controls)",
    ]
    if claim.note:
        parts.append(f"NOTE: {claim.note}")
    parts += [
        f"DEPARTURE {i}: the paper {d.paper}; we {d.ours} ({d.why}); effect on the verdict: {d.effect}"
        for i, d in enumerate(claim.departures, 1)
    ]
    return " | ".join(parts)
