"""The `papers` family's shared base: a method paper as a scored task.

A task is a suite whose samples are (setting, seed) cells. Its `solver` option names the paper's
method or one of the baselines the paper claims to beat; every solver sees the same cells, so the
claim check compares them paired by seed. `solve` runs the solver on one cell and records what it
chose; the scorer recomputes the paper's metric from that record and the cell alone (a re-score
needs no solver). No model is called: `solver_roles` is empty.

Each task states its claim (the paper's), its setting (ours) and its criterion (ours, written in
code before any run: `Claim.criterion`); `harness describe` prints them, and `claims.py` decides
reproduced / not reproduced / inconclusive from them.
"""

from __future__ import annotations

import asyncio
from abc import abstractmethod
from importlib.metadata import PackageNotFoundError, version
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import BaseModel, Field

from harness.records import Metric, SampleRecord
from harness.stats import ratio_metric
from harness.suite import (FunctionScorer, ReportInput, ReportSection, Sample, SampleContext, Score, Scorer, Suite,
                           SuiteOptions, Transcript)

VERSIONED_PACKAGES = ("numpy", "scipy", "scikit-learn", "torch")


class PaperOptions(SuiteOptions):
    """Every task's options; a task adds `solver: Literal[method, baselines...]`."""

    seeds: int = Field(5, ge=1, le=500, description="seeds per setting (samples = settings x seeds, seeds 0..N-1)")


class Condition(BaseModel):
    """One part of a criterion: `stat` of `metric` for `solver` in `setting` (minus `versus`'s,
    paired by seed, when `versus` is set) compared with `threshold`. With `versus_setting`, the
    same quantity in that setting is subtracted, paired by seed: "the gain is larger at R8 than
    at R4" is `setting="R8", versus_setting="R4"`."""

    metric: str
    setting: str
    solver: str
    op: Literal[">=", "<="]
    threshold: float
    versus: str | None = None
    versus_setting: str | None = None
    stat: Literal["mean", "min", "max"] = "mean"  # min/max: the worst seed decides, no CI

    def text(self) -> str:
        left = f"{self.stat} {self.metric}({self.solver})"
        if self.versus:
            left = f"{self.metric}({self.solver}) - {self.metric}({self.versus})"
        if self.versus_setting:
            quantity = f"[{left}]" if self.versus else f"{self.metric}({self.solver})"
            per_seed = "" if self.stat == "mean" else f"{self.stat} over seeds of "
            return (f"{per_seed}{quantity} @ {self.setting} - {quantity} @ {self.versus_setting} "
                    f"{self.op} {self.threshold:g}")
        return f"{left} {self.op} {self.threshold:g} @ {self.setting}"


class Claim(BaseModel):
    paper: str = Field(description="the paper's claim, in its words as summarised")
    setting: str = Field(description="ours: the small setting that stands in for the paper's")
    criterion: list[Condition] = Field(description="ours: all must hold for 'reproduced'")
    note: str = ""


def package_versions() -> dict[str, str]:
    found = {}
    for name in VERSIONED_PACKAGES:
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            continue
    return found


class CellResult(BaseModel):
    """What a solver records for one cell: its name, the cell, and its own typed `answer`."""

    solver: str
    setting: str
    seed: int
    answer: dict[str, Any]
    wall_s: float
    versions: dict[str, str] = Field(default_factory=package_versions)


class PaperTask(Suite):
    """Subclasses set `task`, `solvers` (method first), `settings`, `metric_names`, `claim`, an
    `Options` with a `solver` Literal, and implement `solve_cell` and `score_cell` (both pure
    functions of the cell)."""

    task: ClassVar[str]
    solvers: ClassVar[tuple[str, ...]]
    settings: ClassVar[tuple[str, ...]]
    metric_names: ClassVar[tuple[str, ...]]
    claim: ClassVar[Claim]
    label_options: ClassVar[tuple[str, ...]] = ("solver",)  # method and baselines named side by side
    Options: ClassVar[type[SuiteOptions]] = PaperOptions

    @property
    def solver_roles(self) -> tuple[str, ...]:
        return ()

    @property
    def solver(self) -> str:
        return str(self.options.solver)

    @property
    def seeds(self) -> int:
        return int(self.options.seeds)

    def load_samples(self, corpus: str | None) -> list[Sample]:
        return [Sample(id=f"{setting}/seed{seed:03d}", data={"setting": setting, "seed": seed})
                for setting in self.settings for seed in range(self.seeds)]

    async def solve(self, sample: Sample, ctx: SampleContext) -> Transcript:
        # In a thread: the work is CPU-bound, and the runner's per-sample timeout must still fire.
        result = await asyncio.to_thread(self.solve_cell, sample.data["setting"], sample.data["seed"], self.solver)
        return Transcript(output=result)

    def scorers(self) -> dict[str, Scorer]:
        return {"metric": FunctionScorer("metric", self._score, description=self.metric_description())}

    async def _score(self, sample: Sample, transcript: dict[str, Any], ctx: SampleContext) -> Score:
        result = CellResult.model_validate(transcript)
        values = await asyncio.to_thread(self.score_cell, result)
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
        """Each metric per setting (`metric@setting`): the mean over seeds, bootstrap CI over seeds."""
        out: dict[str, Metric] = {}
        for setting in self.settings:
            cell = [r for r in records if r.sample_id.startswith(setting + "/")]
            for name in self.metric_names:
                values = [r.scores.get(name) for r in cell]
                present = np.array([[v, 1.0] for v in values if v is not None], dtype=float).reshape(-1, 2)
                out[f"{name}@{setting}"] = ratio_metric(present, lambda c: c[0], lambda c: c[1], seed=seed)
        return out

    def counts(self, records: list[SampleRecord]) -> dict[str, int]:
        return {"seeds": len({r.sample_id.split("/")[-1] for r in records})}

    # One section for the whole family in the HTML report: the claims table of the saved checks.
    report_family: ClassVar[str] = "papers"

    @classmethod
    def report_section(cls, found: ReportInput) -> ReportSection | None:
        from environments.papers.report import claims_section  # report.py imports this module

        return claims_section(found)


def describe_claim(task: str, claim: Claim, solvers: tuple[str, ...]) -> str:
    """The suite description `harness describe` prints: claim, ours, criterion, solvers."""
    parts = [f"paper {task}. CLAIM (the paper's): {claim.paper}", f"SETTING (ours): {claim.setting}",
             "CRITERION (ours, fixed before any run): " + "; ".join(c.text() for c in claim.criterion),
             f"SOLVERS: {solvers[0]} (method), " + ", ".join(solvers[1:]) + " (baselines)"]
    if claim.note:
        parts.append(f"NOTE: {claim.note}")
    return " | ".join(parts)
