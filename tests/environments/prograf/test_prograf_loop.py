"""The ProGraf loop with the step-aware synthetic mock: the controls, written before they were run.

Criterion (fixed in code before any control outcome was looked at):
- positive control: with `weak-circuits` (faults concentrated on wires and grounds), on its hardest
  subset (pass@5 = 0 in its own profile, seeds 0..4), the loop guided by the profile recovers more
  than its no-profile ablation, at equal budget, with the paired bootstrap CI of the difference
  above 0 (fresh seeds).
- negative control: with `uniform` (one fault rate everywhere), on the tasks its profile failed in
  at least 3 of 5 samples, the paired CI of the same difference contains 0.
Plus: budget accounting, determinism, baselines run, the trace shows commits and rollbacks.

The two controls run with `checker=oracle` (the hidden points as the loop's checks), as they were
written: they test the loop's mechanism given correct checks. The same controls with the default
`checker=prompt` are measured by `harness prograf check` (a command: too long for CI; numbers and
commands in docs/prograf.md). The controls are marked slow (a profile of all 304 tasks x 5 per mock).
"""

from __future__ import annotations

import asyncio

import pytest

from environments.prograf.generate.build import CORPUS
from environments.prograf.loop_suite import LoopOptions, ProGrafLoopSuite, StepMock, paired_difference
from environments.prograf.profile import build_profile
from environments.prograf.task import load_tasks
from harness.calls import CallPolicy, ManagedModel
from harness.records import RunConfig
from harness.runner import run_one
from harness.suite import parse_options

BUDGET = 8


@pytest.fixture(scope="module")
def corpus():
    return load_tasks(CORPUS)


@pytest.fixture(scope="module")
def profiles(corpus, tmp_path_factory):
    folder = tmp_path_factory.mktemp("profiles")
    paths = {}
    for name in ("weak-circuits", "uniform"):
        profile = asyncio.run(build_profile(StepMock(name, corpus), corpus, generator=f"synthetic/prograf-{name}", k=5))
        paths[name] = folder / f"{name}.json"
        profile.save(paths[name])
        paths[name + "/profile"] = profile
    return paths


def run(corpus, mock: str, task_ids: list[str], **options) -> dict[str, bool]:
    suite = ProGrafLoopSuite(parse_options("prograf-loop", LoopOptions, {"subset": "all", "budget": BUDGET, "pictures": False} | options))
    samples = [s for s in suite.load_samples(None) if s.id in set(task_ids)]
    model = ManagedModel(StepMock(mock, corpus), max_connections=8, policy=CallPolicy())
    config = RunConfig(suite="prograf-loop", models={"assistant": model.name})

    async def go():
        return await asyncio.gather(*(run_one(suite, s, 0, {"assistant": model}, config) for s in samples))

    records = asyncio.run(go())
    assert all(r.status == "ok" for r in records), [r.error for r in records if r.status != "ok"]
    assert all(r.scores["calls"] <= BUDGET for r in records)  # budget accounting
    return {r.sample_id: bool(r.scores["passed"]) for r in records}


@pytest.mark.slow
def test_positive_control_profile_guidance_beats_no_profile(corpus, profiles):
    hardest = profiles["weak-circuits/profile"].hardest
    assert len(hardest) >= 30
    path = str(profiles["weak-circuits"])
    guided = run(corpus, "weak-circuits", hardest, profile=path, checker="oracle")
    blind = run(corpus, "weak-circuits", hardest, profile=path, ablation="no-profile", checker="oracle")
    diff = paired_difference(guided, blind)
    print("positive control", sum(guided.values()), sum(blind.values()), len(hardest), diff)
    assert diff.ci_low > 0


@pytest.mark.slow
def test_negative_control_uniform_faults_no_difference(corpus, profiles):
    profile = profiles["uniform/profile"]
    hard = [t.task_id for t in profile.tasks if t.passes <= 2]
    assert len(hard) >= 20
    path = str(profiles["uniform"])
    guided = run(corpus, "uniform", hard, profile=path, checker="oracle")
    blind = run(corpus, "uniform", hard, profile=path, ablation="no-profile", checker="oracle")
    diff = paired_difference(guided, blind)
    print("negative control", sum(guided.values()), sum(blind.values()), len(hard), diff)
    assert diff.ci_low <= 0 <= diff.ci_high


@pytest.mark.parametrize("options", [{"method": "single-shot"}, {"method": "best-of"}, {"method": "fixed-step"},
                                     {"method": "reflexion"}, {"ablation": "no-verify"}, {"ablation": "no-rollback"},
                                     {"ablation": "no-replan"}, {"ablation": "other-profile"}, {"checker": "oracle"}])
def test_every_method_and_ablation_runs_within_budget_deterministically(corpus, profiles, options):
    ids = profiles["weak-circuits/profile"].hardest[:3]
    extra = {"profile": str(profiles["weak-circuits"]), "other_profile": str(profiles["uniform"])}
    first = run(corpus, "weak-circuits", ids, **extra, **options)
    assert len(first) == 3 and first == run(corpus, "weak-circuits", ids, **extra, **options)
