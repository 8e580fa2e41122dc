"""A labelled synthetic task for the claims framework's tests (about our logic, not a paper): the
method scores 0.5 + a seed-dependent wobble, the baseline 0.4 + another. Registered as the suite
`papers.toy` by `toy_suite` (monkeypatching the suite registry in-process)."""

from __future__ import annotations

from importlib.metadata import EntryPoint
from typing import ClassVar, Literal

import numpy as np
import pytest
from pydantic import Field

from environments.papers.base import CellResult, Claim, Condition, PaperOptions, PaperTask, describe_claim
from harness.claims.registry import ClaimFamily


class ToyOptions(PaperOptions):
    solver: Literal["method", "baseline"] = Field("method", description="which solver")


class ToyTask(PaperTask):
    task = "toy"
    name = "papers.toy"
    version = "0.0.1"
    headline_metric = "score@easy"
    Options = ToyOptions
    solvers = ("method", "baseline")
    settings = ("easy",)
    metric_names = ("score",)
    claim: ClassVar[Claim] = Claim(
        id=name, arms=solvers, settings=settings, sentence="the method beats the baseline", setting="arithmetic",
        conditions=[Condition(metric="score", setting="easy", solver="method", versus="baseline", op=">=",
                              threshold=0.05)])
    description = describe_claim(task, claim, solvers)

    def solve_cell(self, setting: str, seed: int, solver: str) -> CellResult:
        wobble = np.random.default_rng([seed, solver == "method"]).normal(scale=0.02)
        value = (0.5 if solver == "method" else 0.4) + wobble
        return CellResult(solver=solver, setting=setting, seed=seed, answer={"value": value}, wall_s=0.0)

    def score_cell(self, result: CellResult) -> dict[str, float | None]:
        return {"score": result.answer["value"]}


@pytest.fixture
def toy_suite(monkeypatch, tmp_path):
    """`papers.toy` as an installed suite and `papers.toy` as a claim of a `toy` family."""
    import harness.claims.registry as registry
    import harness.suite as suite

    real = suite.available_suites()
    ep = EntryPoint(name="papers.toy", value=f"{__name__}:ToyTask", group="harness.suites")
    monkeypatch.setattr(suite, "available_suites", lambda: real | {"papers.toy": ep})
    family = ClaimFamily(name="papers", log=tmp_path / "log.toml", claims=(ToyTask.claim,), suite_of=lambda c: c.id)
    monkeypatch.setattr(registry, "families", lambda: {"papers": family})
    return ToyTask
