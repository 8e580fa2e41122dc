"""`harness prograf check`: the claim's verdict rule, the McNemar test and a tiny run with the mock."""

from __future__ import annotations

import asyncio
import json

import pytest
from typer.testing import CliRunner

from environments.prograf.build import CORPUS
from environments.prograf.claim import check_claim, judge, mcnemar_p
from environments.prograf.commands import prograf_app
from environments.prograf.loop_suite import cached_tasks
from environments.prograf.mock import StepMock
from environments.prograf.profile import build_profile
from harness.calls import CallPolicy, ManagedModel


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


def test_verdict_rule():
    strong = {"no-profile": 25, "fixed-step": 10, "reflexion": 15, "best-of": 5, "single-shot": 0}
    _, ok, why = judge(results(35, strong))
    assert ok and why == "every condition holds"
    _, ok, why = judge(results(35, strong | {"best-of": 34}))
    assert not ok and "best-of" in why and "fixed-step" not in why  # 1 task apart: the CI reaches 0
    _, ok, why = judge(results(35, strong | {"no-profile": 35}))
    assert not ok and "no-profile" in why


@pytest.fixture(scope="module")
def circuit_profile(tmp_path_factory):
    tasks = [t for t in cached_tasks(CORPUS) if t.category == "circuit"][:30]
    profile = asyncio.run(build_profile(StepMock("weak-circuits", tasks), tasks,
                                        generator="synthetic/prograf-weak-circuits", k=3))
    path = tmp_path_factory.mktemp("claim") / "weak.json"
    profile.save(path)
    return profile, path


def test_check_claim_runs_every_method_on_the_subset_deterministically(circuit_profile):
    profile, path = circuit_profile
    assert len(profile.hardest) >= 3

    def once():
        model = ManagedModel(StepMock("weak-circuits", cached_tasks(CORPUS)), max_connections=4, policy=CallPolicy())
        return asyncio.run(check_claim(model, profile, budget=3, profile_path=path, limit=3))

    report = once()
    assert report.tasks == 3 and report.synthetic and report.checker == "prompt" and not report.errors
    assert set(report.recovery) == {"loop", "no-profile", "fixed-step", "reflexion", "best-of", "single-shot"}
    assert all(m.n == 3 for m in report.recovery.values())
    assert report.where in ("below", "inside", "above")
    assert once().model_dump() == report.model_dump()


def test_check_command(circuit_profile, tmp_path):
    _, path = circuit_profile
    out = tmp_path / "report.json"
    result = CliRunner().invoke(prograf_app, ["check", "--generator", "synthetic/prograf-weak-circuits", "--profile",
                                              str(path), "--limit", "2", "--budget", "2", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "SYNTHETIC" in result.output and "paper's 43.7%-77.8%" in result.output
    assert json.loads(out.read_text())["tasks"] == 2
    bad = CliRunner().invoke(prograf_app, ["check", "--generator", "synthetic/prograf-uniform", "--profile", str(path)])
    assert bad.exit_code != 0 and "not synthetic/prograf-uniform" in bad.output
