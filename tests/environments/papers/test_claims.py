"""The claims framework end to end on a labelled toy task: each arm an ordinary run, the verdict a
pure function of the records, looks replayed, bad input named; and `harness papers check`."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from environments.papers.commands import papers_app
from harness.claims.model import SeedPlan
from harness.claims.runs import ClaimSuite, load_runs, run_check, verdict_from_runs
from harness.cli.claims_cmds import claims_app
from harness.errors import HarnessError
from harness.executors import make_executor
from harness.run_folder import RunIndex
from tests.environments.papers.toy_task import ToyTask, toy_suite  # noqa: F401 - a fixture

pytestmark = pytest.mark.usefixtures("toy_suite")


def check(tmp_path, claim=None, **kw):
    cs = ClaimSuite(claim=claim or ToyTask.claim, suite="papers.toy")
    return run_check(cs, tmp_path, lambda: make_executor("asyncio"), log=lambda _: None, **kw)


def test_each_arm_is_a_run_and_the_verdict_is_recomputed_from_records(tmp_path):
    verdict = check(tmp_path)
    assert verdict.verdict == "reproduced" and verdict.seeds == 5
    assert set(verdict.runs) == {"method", "baseline"}
    index = RunIndex(tmp_path)
    rows = index.runs("papers.toy")
    index.close()
    assert len(rows) == 2 and {r["status"] for r in rows} == {"complete"}  # in `harness runs` and the leaderboard
    run_ids = [r for ids in verdict.runs.values() for r in ids]
    again = verdict_from_runs(ToyTask.claim, load_runs(tmp_path, run_ids))
    assert again.model_dump(exclude={"wall_s"}) == verdict.model_dump(exclude={"wall_s"})
    assert check(tmp_path).runs == verdict.runs  # a second check reuses the finished runs


def test_a_missed_claim_is_not_reproduced_and_the_interval_agrees(tmp_path):
    strict = ToyTask.claim.model_copy(update={"conditions": [ToyTask.claim.conditions[0].model_copy(update={"threshold": 0.3})]})
    verdict = check(tmp_path, strict)
    c = verdict.conditions[0]
    assert verdict.verdict == "not reproduced" and c.outcome == "fails" and c.ci_high < 0.3


def test_looks_run_only_new_seeds_and_stop_at_the_first_decision(tmp_path):
    # Threshold 0.1 sits at the true difference: the first look cannot decide, the plan goes on.
    near = ToyTask.claim.conditions[0].model_copy(update={"threshold": 0.1})
    claim = ToyTask.claim.model_copy(update={"conditions": [near], "plan": SeedPlan(looks=(3, 6))})
    verdict = check(tmp_path, claim)
    assert [lk.seeds for lk in verdict.looks] == [3, 6]
    assert verdict.looks[0].level == pytest.approx(0.975)  # Bonferroni over two looks
    assert all(len(ids) == 2 for ids in verdict.runs.values())  # seeds 0-2, then 3-5
    records = [r for run in load_runs(tmp_path, verdict.runs["method"]) for r in run.records]
    assert sorted(r.sample_id for r in records) == [f"easy/seed{s:03d}" for s in range(6)]
    decided = check(tmp_path / "b", ToyTask.claim.model_copy(update={"plan": SeedPlan(looks=(3, 6))}))
    assert [lk.seeds for lk in decided.looks] == [3] and decided.verdict == "reproduced"


def test_bad_run_sets_are_named(tmp_path):
    verdict = check(tmp_path)
    method, baseline = verdict.runs["method"], verdict.runs["baseline"]
    with pytest.raises(HarnessError, match="lack arm 'baseline'"):
        verdict_from_runs(ToyTask.claim, load_runs(tmp_path, method))
    with pytest.raises(HarnessError, match="more than one of the runs"):
        verdict_from_runs(ToyTask.claim, load_runs(tmp_path, method + method + baseline))
    other = ToyTask.claim.model_copy(update={"conditions": [ToyTask.claim.conditions[0].model_copy(update={"threshold": 0.0})]})
    with pytest.raises(HarnessError, match="started under criterion"):
        verdict_from_runs(other, load_runs(tmp_path, method + baseline))
    check(tmp_path, other)
    mixed = load_runs(tmp_path, method) + load_runs(tmp_path, check(tmp_path, other).runs["baseline"])
    with pytest.raises(HarnessError, match="different criteria"):
        verdict_from_runs(ToyTask.claim, mixed)
    with pytest.raises(HarnessError, match="not found"):
        load_runs(tmp_path, ["no-such-run"])
    three = ToyTask.claim.model_copy(update={"plan": SeedPlan(looks=(3,))})
    with pytest.raises(HarnessError, match="cover 5 seeds, but the seed plan looks only at 3"):
        verdict_from_runs(three, load_runs(tmp_path, method + baseline))


def test_papers_check_and_verdict_commands(tmp_path, monkeypatch):
    from environments.papers import tasks

    monkeypatch.setitem(tasks.TASKS, "toy", ToyTask)
    runner = CliRunner()
    result = runner.invoke(papers_app, ["check", "toy", "--run-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "verdict: reproduced" in result.output and "score(method) - score(baseline)" in result.output
    assert f"criterion {ToyTask.claim.criterion_hash()}" in result.output
    saved = json.loads((tmp_path / "claims" / "papers.toy.json").read_text())
    run_ids = [r for ids in saved["runs"].values() for r in ids]
    again = runner.invoke(papers_app, ["verdict", *run_ids, "--run-dir", str(tmp_path)])
    assert again.exit_code == 0 and "verdict: reproduced" in again.output and "recomputed from records" in again.output
    table = runner.invoke(claims_app, ["table", "--run-dir", str(tmp_path)])
    assert table.exit_code == 0 and "| papers.toy | the method beats the baseline | reproduced |" in table.output
    assert runner.invoke(papers_app, ["check", "nope"]).exit_code == 2
    assert "give one TASK or --all" in runner.invoke(papers_app, ["check"]).output
    bad = runner.invoke(claims_app, ["check", "papers.nope", "--run-dir", str(tmp_path)])
    assert bad.exit_code == 1 and "unknown claim 'papers.nope'" in bad.output
