"""`harness prograf check`: the claim's verdict rule (the core's decide/combine on Newcombe's
paired score intervals over tasks, strict "> 0"), its registration, the McNemar test, one saved
verdict per generator and a tiny run with the mock (the check as runs, and `harness prograf
verdict` from their records: test_prograf_claim_runs.py)."""

from __future__ import annotations

import asyncio
import json

import pytest
from typer.testing import CliRunner

from environments.prograf.claim import CLAIM, CRITERIA_LOG, check_claim, claim_verdict, judge, mcnemar_p
from environments.prograf.commands import prograf_app
from environments.prograf.generate.build import CORPUS
from environments.prograf.loop_suite import cached_tasks
from environments.prograf.mock import StepMock
from environments.prograf.profile import build_profile
from harness.claims import load_verdicts, save_verdict
from harness.claims.prereg import load_log, unregistered
from harness.claims.table import to_markdown
from harness.stats import newcombe_paired_difference


def test_mcnemar_exact_values():
    assert mcnemar_p(0, 0) == 1.0
    assert mcnemar_p(5, 0) == pytest.approx(0.0625)  # 2 x 1/32
    assert mcnemar_p(7, 0) == pytest.approx(2 / 128)
    assert mcnemar_p(3, 3) == 1.0
    assert mcnemar_p(13, 7) == mcnemar_p(7, 13) == pytest.approx(0.2632, abs=1e-4)


def results(loop: int, others: dict[str, int], n: int = 40) -> dict[str, dict[str, bool]]:
    """Task i passed by a method iff i < its count (so a method's passes nest inside the loop's)."""
    ids = [f"t{i:02d}" for i in range(n)]
    return {name: {t: i < k for i, t in enumerate(ids)} for name, k in ({"loop": loop} | others).items()}


STRONG = {"no-profile": 25, "fixed-step": 10, "reflexion": 15, "best-of": 5, "single-shot": 0}


def test_verdict_reproduced_when_every_interval_lies_above_zero():
    j = judge(results(35, STRONG))
    assert j.verdict == "reproduced" and j.why == "every condition holds"
    assert [c.outcome for c in j.conditions] == ["holds"] * 4
    assert len(j.conditions) == len(CLAIM.conditions) == 4


def test_verdict_interval_is_newcombes_paired_interval_of_the_2x2_counts():
    r = results(35, STRONG)
    r["best-of"]["t39"] = True  # one task best-of recovers and the loop does not
    j = judge(r)
    # loop 35 of 40, best-of 5 + 1: both 5, loop only 30, best-of only 1, neither 4
    d, lo, hi = newcombe_paired_difference(5, 30, 1, 4, 0.95)
    best_of = next(c for c in j.conditions if "best-of" in c.condition)
    assert (best_of.estimate, best_of.ci_low, best_of.ci_high, best_of.n) == pytest.approx((d, lo, hi, 40))
    assert d == pytest.approx(29 / 40)
    comparison = next(c for c in j.comparisons if c.against == "best-of")
    assert (comparison.difference.ci_low, comparison.loop_only, comparison.other_only) == (pytest.approx(lo), 30, 1)
    assert CLAIM.protocol == {"interval": "newcombe-paired"}
    assert all(c.op == ">" and c.threshold == 0 and c.refute_at == 0 for c in CLAIM.conditions)


def test_verdict_inconclusive_where_the_old_rule_said_not_reproduced():
    # 1 task apart: the interval straddles 0. The bool verdict printed NOT reproduced here.
    j = judge(results(35, STRONG | {"best-of": 34}))
    assert j.verdict == "inconclusive" and "best-of" in j.why and "reaches 0" in j.why and "fixed-step" not in j.why
    # no-profile recovers as many tasks as the loop, but other ones (3 each way): the old rule read
    # the point estimate (0, not above 0) as NOT reproduced; the interval straddles 0
    r = results(35, STRONG)
    r["no-profile"] = {t: (v if i not in (0, 1, 2) else False) or i in (36, 37, 38) for i, (t, v) in
                       enumerate(r["loop"].items())}
    j = judge(r)
    np_cond = next(c for c in j.conditions if "no-profile" in c.condition)
    assert np_cond.estimate == 0 and np_cond.ci_low < 0 < np_cond.ci_high and np_cond.outcome == "undecided"
    assert j.verdict == "inconclusive"


def test_verdict_not_reproduced_when_an_interval_lies_below_zero():
    j = judge(results(25, STRONG | {"best-of": 40, "no-profile": 10}))  # best-of recovers 15 tasks more
    assert j.verdict == "not reproduced" and "best-of" in j.why and "lies below 0" in j.why


def test_verdict_every_task_tied_beats_nothing_and_refutes_nothing():
    # no discordant task: Newcombe's interval is symmetric around 0 (the t interval collapsed to
    # [0, 0] here), so it neither beats nor refutes
    j = judge(results(35, STRONG | {"no-profile": 35}))
    tied = next(c for c in j.conditions if "no-profile" in c.condition)
    assert tied.estimate == 0 and tied.ci_low == pytest.approx(-tied.ci_high) and tied.ci_high > 0.05
    assert tied.outcome == "undecided" and j.verdict == "inconclusive"


def test_verdict_few_one_way_discordant_tasks():
    # the t interval's weak spot: 2 of 40 tasks loop-only, none the other way. t gave [-0.02, 0.12];
    # Newcombe's interval also straddles 0 (undecided), with McNemar p = 0.5 beside it
    j = judge(results(35, STRONG | {"no-profile": 33}))
    c = next(c for c in j.conditions if "no-profile" in c.condition)
    cmp = next(c for c in j.comparisons if c.against == "no-profile")
    assert c.ci_low < 0 < c.ci_high and c.outcome == "undecided" and cmp.mcnemar_p == pytest.approx(0.5)
    # 8 of 40 loop-only, none the other way: holds (McNemar p = 0.0078)
    j = judge(results(35, STRONG | {"no-profile": 27}))
    assert next(c for c in j.conditions if "no-profile" in c.condition).outcome == "holds"


def test_verdict_one_task_decides_nothing():
    j = judge(results(1, {k: 0 for k in STRONG}, n=1))
    assert all(c.ci_low < 0 < c.ci_high and c.outcome == "undecided" for c in j.conditions)
    assert j.verdict == "inconclusive"


def test_judge_needs_every_compared_method():
    from harness.errors import HarnessError

    with pytest.raises(HarnessError, match="no results of reflexion"):
        judge({k: v for k, v in results(35, STRONG).items() if k != "reflexion"})


def test_criterion_is_registered_in_the_log():
    log = load_log(CRITERIA_LOG)
    assert unregistered([CLAIM], log) == []
    assert CLAIM.criterion_hash() in CRITERIA_LOG.read_text()
    moved = CLAIM.model_copy(update={"conditions": CLAIM.conditions[:3]})  # no-profile dropped: a new criterion
    assert unregistered([moved], log)
    assert CLAIM.departures and CLAIM.sentence.startswith("Recovers 43.7-77.8% of tasks")


@pytest.fixture(scope="module")
def circuit_profile(tmp_path_factory):
    tasks = [t for t in cached_tasks(CORPUS) if t.category == "circuit"][:30]
    profile = asyncio.run(build_profile(StepMock("weak-circuits", tasks), tasks,
                                        generator="synthetic/prograf-weak-circuits", k=3))
    path = tmp_path_factory.mktemp("claim") / "weak.json"
    profile.save(path)
    return profile, path


def test_check_claim_runs_every_method_on_the_subset_deterministically(circuit_profile, tmp_path):
    profile, path = circuit_profile
    assert len(profile.hardest) >= 3

    def once(run_dir):
        return check_claim("synthetic/prograf-weak-circuits", profile, run_dir=run_dir, budget=3, profile_path=path,
                           limit=3, concurrency=4, log=lambda _: None)

    report = once(tmp_path / "a")
    assert report.tasks == 3 and report.synthetic and report.checker == "prompt" and not report.errors
    assert report.verdict in ("reproduced", "not reproduced", "inconclusive") and len(report.conditions) == 4
    assert report.criterion_hash == CLAIM.criterion_hash()
    assert set(report.recovery) == {"loop", "no-profile", "fixed-step", "reflexion", "best-of", "single-shot"}
    assert all(m.n == 3 for m in report.recovery.values())
    assert report.where in ("below", "inside", "above")
    assert set(report.runs) == set(report.recovery) and report.k == 3 and report.max_passes == 0
    again = once(tmp_path / "b")  # the same check in another run dir: new runs, the same numbers
    assert set(again.runs.values()).isdisjoint(report.runs.values())
    assert again.model_dump(exclude={"runs", "cells_s"}) == report.model_dump(exclude={"runs", "cells_s"})
    saved = claim_verdict(report, wall_s=1.0)
    assert saved.claim == "prograf.recovery" and saved.verdict == report.verdict and saved.seeds == 1
    assert saved.subject == "synthetic/prograf-weak-circuits"
    assert saved.setting.startswith("SYNTHETIC") and len(saved.looks) == 1 and saved.departures == CLAIM.departures
    assert saved.runs == {m: [run] for m, run in report.runs.items()} and "(passed <= 0 of k=3)" in saved.setting
    # one verdict per generator: a second generator's does not replace the first's
    other = claim_verdict(report.model_copy(update={"generator": "synthetic/prograf-uniform"}))
    for v in (saved, other):
        save_verdict(tmp_path, v)
    assert sorted(v.subject or "" for v in load_verdicts([tmp_path])) == ["synthetic/prograf-uniform",
                                                                         "synthetic/prograf-weak-circuits"]


def test_check_command(circuit_profile, tmp_path):
    _, path = circuit_profile
    out = tmp_path / "report.json"
    runs = tmp_path / "runs"
    result = CliRunner().invoke(prograf_app, ["check", "--generator", "synthetic/prograf-weak-circuits", "--profile",
                                              str(path), "--limit", "2", "--budget", "2", "--out", str(out),
                                              "--run-dir", str(runs)])
    assert result.exit_code == 0, result.output
    assert "SYNTHETIC" in result.output and "paper's 43.7%-77.8%" in result.output
    assert f"criterion {CLAIM.criterion_hash()}" in result.output
    report = json.loads(out.read_text())
    assert report["tasks"] == 2
    [saved] = load_verdicts([runs])  # what `harness claims table` reads
    assert saved.claim == "prograf.recovery" and saved.verdict == report["verdict"]
    assert saved.subject == "synthetic/prograf-weak-circuits"
    assert (runs / "claims" / "prograf.recovery--synthetic_prograf-weak-circuits.json").is_file()
    assert "prograf.recovery" in to_markdown([saved])
    bad = CliRunner().invoke(prograf_app, ["check", "--generator", "synthetic/prograf-uniform", "--profile", str(path)])
    assert bad.exit_code != 0 and "not synthetic/prograf-uniform" in bad.output
