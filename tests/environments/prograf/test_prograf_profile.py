"""Capability profiles (counts, CIs, hardest subset, cross-fitting, the file round trip, bad files) and
the loop graph's own logic with scripted callables (plan shape, budget, rollback, replan)."""

from __future__ import annotations

import asyncio

import pytest

from environments.prograf.generate.build import CORPUS
from environments.prograf.loop_agent import CheckItem, LoopConfig, ProGrafLoop, make_plan
from environments.prograf.mock import PROFILES, SyntheticGenerator
from environments.prograf.profile import build_profile, load_profile
from environments.prograf.task import load_tasks
from harness.errors import HarnessError


@pytest.fixture(scope="module")
def weak():
    tasks = load_tasks(CORPUS)
    picked = [t for cat in ("geometry", "circuit") for t in [x for x in tasks if x.category == cat][:20]]
    gen = SyntheticGenerator(PROFILES["weak-circuits"], tasks)
    return asyncio.run(build_profile(gen, picked, generator="synthetic/prograf-weak-circuits", k=5))


def test_profile_finds_the_injected_weakness(weak, tmp_path):
    rates = weak.component_rates()
    assert rates["wire"] > 0.15 and rates["wire"] > 5 * rates.get("point", 0.0)
    circ, geo = weak.category_reliability["circuit"], weak.category_reliability["geometry"]
    assert circ.ci_high < geo.ci_low and circ.n == 20  # CIs over tasks
    assert weak.patterns[0].component in ("wire", "ground") and weak.patterns[0].recurrent_tasks > 0
    assert set(weak.hardest) == {t.task_id for t in weak.tasks if t.passes == 0} and weak.synthetic
    assert all(t.startswith("circuit") for t in weak.hardest)
    crossed = weak.component_rates(exclude=weak.hardest[0])  # built without that task's fold
    assert crossed != rates and set(crossed) <= set(rates)
    path = tmp_path / "p.json"
    weak.save(path)
    assert load_profile(path) == weak


def test_a_bad_profile_file_is_one_clear_error(tmp_path):
    with pytest.raises(HarnessError, match="no such file"):
        load_profile(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text('{"generator": "x"}')
    with pytest.raises(HarnessError) as info:
        load_profile(bad)
    assert str(info.value) == (f"profile {bad}: field `synthetic` is missing; rebuild it: harness prograf profile "
                               f"--generator SPEC --out {bad}")
    bad.write_text('{"generator": "x", "synthetic": true, "k": "five"}')
    with pytest.raises(HarnessError, match=r"bad.json: field `k` is invalid: .* \(got 'five'\); rebuild it"):
        load_profile(bad)
    bad.write_text("not json")
    with pytest.raises(HarnessError, match=r"bad.json: field `\(top level\)` is invalid: invalid JSON.*; rebuild it"):
        load_profile(bad)


CHECKS = [CheckItem("a1", "point", "A drawn"), CheckItem("w1", "wire", "R1-R2 wired"),
          CheckItem("a2", "point", "B drawn"), CheckItem("g1", "ground", "grounded"), CheckItem("l1", "label", "R1 10k")]


def test_plans_have_one_shape_and_the_profile_picks_what_is_isolated():
    blind = make_plan(CHECKS, {}, 3)
    guided = make_plan(CHECKS, {"wire": 0.4, "ground": 0.3, "point": 0.01}, 3)
    assert [[c.component for c in s] for s in blind] == [["point", "point"], ["wire"], ["ground", "label"]]
    assert [[c.component for c in s] for s in guided] == [["wire"], ["ground"], ["point", "point", "label"]]


def scripted(fail_first: set[str]):
    """A draw that returns 'bad' on its first call for a step with these components, else 'good'."""
    seen: list = []

    async def draw(req):
        seen.append(req)
        comps = {c.component for c in req.focus}
        return "bad" if comps & fail_first and len(seen) == 1 else "good"

    async def check(code, ids):
        return {i: code == "good" or not i.startswith("w") for i in ids}

    return draw, check, seen


def test_the_loop_rolls_back_replans_and_keeps_to_its_budget():
    draw, check, seen = scripted({"wire"})
    state = asyncio.run(ProGrafLoop(CHECKS, draw, check, {"wire": 0.4}, LoopConfig(budget=8, steps=2)).run())
    nodes = [t["node"] for t in state["trace"]]
    assert nodes[:3] == ["plan", "rollback", "commit"] and nodes[-1] == "finalize"
    assert state["code"] == "good" and state["calls"] == len(seen) == 3 and not state["plan"]
    assert seen[1].feedback == ("R1-R2 wired",) and seen[2].keep and {c.id for c in state["accepted"]} == {c.id for c in CHECKS}
    draw, check, seen = scripted({"wire", "point", "label", "ground"})
    always_bad = ProGrafLoop(CHECKS, lambda req: _const("bad"), check, {}, LoopConfig(budget=4, steps=1))
    state = asyncio.run(always_bad.run())
    assert state["calls"] == 4 and state["code"] == "bad"  # nothing committed: the best draw
    assert "replan" in [t["node"] for t in state["trace"]]


async def _const(value):
    return value
