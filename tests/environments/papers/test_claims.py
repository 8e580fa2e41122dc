"""The claim check's decisions (holds / fails / undecided, the verdict, the seeds it would take),
`harness papers check` through typer, and a task with no model role through the real runner."""

from __future__ import annotations

from typing import ClassVar, Literal

import numpy as np
from pydantic import Field
from typer.testing import CliRunner

from environments.papers import tasks
from environments.papers.base import CellResult, Claim, Condition, PaperOptions, PaperTask, describe_claim
from environments.papers.claims import check, decide, evaluate, seeds_needed
from environments.papers.commands import papers_app
from harness.records import RunConfig
from harness.runner import plan_run, run_eval


class ToyOptions(PaperOptions):
    solver: Literal["method", "baseline"] = Field("method", description="which solver")


class ToyTask(PaperTask):
    """The method scores 0.5 + a small seed-dependent wobble, the baseline 0.4 + another."""

    task = "toy"
    name = "papers.toy"
    version = "0.0.1"
    headline_metric = "score@easy"
    Options = ToyOptions
    solvers = ("method", "baseline")
    settings = ("easy",)
    metric_names = ("score",)
    margin: ClassVar[float] = 0.05
    claim: ClassVar[Claim] = Claim(paper="the method beats the baseline", setting="arithmetic",
                                   criterion=[Condition(metric="score", setting="easy", solver="method",
                                                        versus="baseline", op=">=", threshold=0.05)])
    description = describe_claim(task, claim, solvers)

    def solve_cell(self, setting: str, seed: int, solver: str) -> CellResult:
        wobble = np.random.default_rng([seed, solver == "method"]).normal(scale=0.02)
        value = (0.5 if solver == "method" else 0.4) + wobble
        return CellResult(solver=solver, setting=setting, seed=seed, answer={"value": value}, wall_s=0.0)

    def score_cell(self, result: CellResult) -> dict[str, float | None]:
        return {"score": result.answer["value"]}


def table(method: list[float], baseline: list[float]) -> dict[tuple[str, str, int], dict[str, float | None]]:
    out = {("method", "easy", i): {"score": v} for i, v in enumerate(method)}
    return out | {("baseline", "easy", i): {"score": v} for i, v in enumerate(baseline)}


PAIRED = Condition(metric="score", setting="easy", solver="method", versus="baseline", op=">=", threshold=0.05)


def test_decide_by_where_the_interval_lies():
    assert decide(0.2, 0.1, 0.3, ">=", 0.05) == "holds"
    assert decide(0.0, -0.1, 0.04, ">=", 0.05) == "fails"
    assert decide(0.05, 0.0, 0.1, ">=", 0.05) == "undecided"
    assert decide(1e-9, 1e-9, 1e-9, "<=", 1e-4) == "holds"
    assert decide(1.0, 0.5, 2.0, "<=", 1e-4) == "fails"


def test_paired_condition_uses_the_per_seed_differences():
    # Large spread between seeds but a constant paired difference of 0.1: decided, with a zero-width CI.
    base = [0.1, 0.5, 0.9, 0.3, 0.7]
    result = evaluate(PAIRED, table([b + 0.1 for b in base], base), seeds=5)
    assert result.outcome == "holds" and abs(result.estimate - 0.1) < 1e-12
    assert abs(result.ci_low - 0.1) < 1e-12 and abs(result.ci_high - 0.1) < 1e-12
    result = evaluate(PAIRED, table(base, [b + 0.01 for b in base]), seeds=5)
    assert result.outcome == "fails"


def test_cross_setting_condition_pairs_each_seed_across_both_settings():
    # Gain (method - baseline) is 0.1 at "easy" and 0.3 at "hard" for every seed, under a large
    # spread between seeds: the difference of gains is exactly 0.2, a zero-width interval.
    base = [0.1, 0.5, 0.9, 0.3, 0.7]
    rows = {("method", "easy", i): {"score": b + 0.1} for i, b in enumerate(base)}
    rows |= {("baseline", "easy", i): {"score": b} for i, b in enumerate(base)}
    rows |= {("method", "hard", i): {"score": 2 * b + 0.3} for i, b in enumerate(base)}
    rows |= {("baseline", "hard", i): {"score": 2 * b} for i, b in enumerate(base)}
    larger = Condition(metric="score", setting="hard", versus_setting="easy", solver="method", versus="baseline",
                       op=">=", threshold=0.15)
    result = evaluate(larger, rows, seeds=5)
    assert result.outcome == "holds" and abs(result.estimate - 0.2) < 1e-12 and result.ci_high - result.ci_low < 1e-12
    assert larger.text() == "[score(method) - score(baseline)] @ hard - [score(method) - score(baseline)] @ easy >= 0.15"
    reverse = larger.model_copy(update={"setting": "easy", "versus_setting": "hard", "threshold": 0.0})
    assert evaluate(reverse, rows, seeds=5).outcome == "fails"
    plain = Condition(metric="score", setting="hard", versus_setting="easy", solver="method", op=">=", threshold=0.0)
    assert plain.text() == "score(method) @ hard - score(method) @ easy >= 0"
    assert evaluate(plain, rows, seeds=5).estimate > 0.5


def test_undecided_condition_says_how_many_seeds_would_decide_it():
    diffs = np.array([0.2, -0.05, 0.15, 0.0, 0.1])
    result = evaluate(PAIRED, table(list(diffs), [0.0] * 5), seeds=5)
    assert result.outcome == "undecided"
    expected = int(np.ceil((1.96 * diffs.std(ddof=1) / (diffs.mean() - 0.05)) ** 2))
    assert result.seeds_needed == max(6, expected) == seeds_needed(diffs, 0.05)
    assert seeds_needed(np.array([0.05, 0.05]), 0.05) is None  # on the threshold: no number of seeds decides


def test_check_runs_every_solver_on_shared_seeds_and_reports_a_verdict():
    report = check(ToyTask, seeds=6)
    assert report.verdict == "reproduced" and report.conditions[0].outcome == "holds"
    assert {(s.solver, s.n) for s in report.summaries} == {("method", 6), ("baseline", 6)}
    assert report.paired[0].estimate > 0.05
    assert check(ToyTask, seeds=6).model_dump(exclude={"wall_s"}) == report.model_dump(exclude={"wall_s"})


def test_a_missed_claim_is_reported_as_not_reproduced(monkeypatch):
    strict = [PAIRED.model_copy(update={"threshold": 0.3})]
    monkeypatch.setattr(ToyTask, "claim", ToyTask.claim.model_copy(update={"criterion": strict}))
    assert check(ToyTask, seeds=6).verdict == "not reproduced"


def test_papers_check_command(monkeypatch):
    monkeypatch.setitem(tasks.TASKS, "toy", ToyTask)
    runner = CliRunner()
    result = runner.invoke(papers_app, ["check", "toy", "--seeds", "4"])
    assert result.exit_code == 0, result.output
    assert "verdict: reproduced" in result.output and "score(method) - score(baseline)" in result.output
    result = runner.invoke(papers_app, ["check", "nope"])
    assert result.exit_code == 2 and "unknown task 'nope'" in result.output
    result = runner.invoke(papers_app, ["check"])
    assert result.exit_code == 2 and "give one TASK or --all" in result.output


def test_a_task_with_no_model_role_runs_through_the_runner(tmp_path):
    suite = ToyTask(ToyTask.Options(solver="baseline", seeds=3))
    assert suite.roles == ()
    config = RunConfig(suite=suite.name, models={}, suite_options={"solver": "baseline", "seeds": 3})
    plan = plan_run(config, tmp_path, suite=suite)
    summary = run_eval(plan, show_progress=False)
    metric = summary.metrics["score@easy"]
    assert metric.n == 3 and 0.3 < metric.value < 0.5 and summary.counts["sample_errors"] == 0
