"""Checks sized to decide (issue 41, item 3): the power calculations behind the default sizes, and
planner episodes in parallel giving the serial loop's results for the same seeds."""

from __future__ import annotations

import json

import pytest

from environments.adv0.checks.claims import CLAIMS, LOOKS, NORMAL_RETURN_POWER, POWER, SIZES, held_out_episodes, size
from environments.adv0.checks.power import PowerPlan, mean_n, planning_rate, simulated_power, two_proportion_n
from environments.adv0.sim.scenario import TRAIN_MANOEUVRES, IdmParams, ScenarioParams
from environments.adv0.train import parallel
from harness.stats import newcombe_difference


def test_two_rate_plan_takes_the_least_favourable_base_inside_what_was_seen():
    # 0 of 120: Wilson's interval is [0, 0.031]; the base needing most episodes is its top.
    assert planning_rate(0, 120, 0.05) == pytest.approx(0.031, abs=1e-3)
    plan = PowerPlan(kind="two_rates", effect=0.05, seen_k=0, seen_n=120, seen="x")
    assert plan.n() == two_proportion_n(0.081, 0.031) == 331
    # an interval that straddles 0.475 plans there (the variance peaks near 0.5), not at the observed rate
    assert planning_rate(14, 48, 0.05) == pytest.approx(0.4318, abs=1e-4)
    assert PowerPlan(kind="two_rates", effect=0.05, seen_k=14, seen_n=48, seen="x").n() > two_proportion_n(0.34, 0.29)


def test_the_planned_size_has_the_power_it_claims_under_the_checks_own_interval():
    # C3's plan by simulation with the Newcombe interval the check judges by: an effect of 5 points at the
    # planned base rate is shown (lower end > 0) about 80% of the time; no effect is refuted (upper end < 0.05)
    # at least as often.
    n, p = POWER["C3"].n(), POWER["C3"].rate()
    shows = simulated_power(n, p + 0.05, p, lambda a, b, m: newcombe_difference(a, m, b, m, 0.95)[1] > 0, draws=800)
    refutes = simulated_power(n, p, p, lambda a, b, m: newcombe_difference(a, m, b, m, 0.95)[2] < 0.05, draws=800)
    assert 0.72 <= shows <= 0.9 and refutes >= 0.72


def test_mean_plan_is_the_t_power_formula():
    assert mean_n(1.0, 1.0) in (9, 10)  # (t + t) / sqrt(n) <= 1 at n ~ 10
    assert mean_n(1.0, 0.5) > 3 * mean_n(1.0, 1.0)


def test_every_checks_default_size_is_its_power_plan_and_in_its_criterion():
    assert size("C3", "episodes") == POWER["C3"].n() == LOOKS["C3"] == size("C4", "episodes")
    assert size("C8", "episodes") == POWER["C8"].n() and size("C9", "episodes") == POWER["C9"].n()
    assert LOOKS["C6"] == held_out_episodes(SIZES["C6"]["held_out"], 1) >= POWER["C6"].n()  # type: ignore[arg-type]
    assert LOOKS["C7"] >= POWER["C7"].n() and size("C6", "episodes") == NORMAL_RETURN_POWER.n()
    for claim in CLAIMS:
        assert "power_n" in claim.protocol or claim.protocol.get("power_size_from") == "C3", claim.id
    # the plan is hashed: another planning rate is another criterion
    c3 = next(c for c in CLAIMS if c.id == "adv0.C3")
    moved = c3.model_copy(update={"protocol": c3.protocol | {"power_base_rate": 0.05}})
    assert moved.criterion_hash() != c3.criterion_hash()


def _jobs(n: int) -> list[tuple[ScenarioParams | None, int]]:
    return [
        (
            None
            if i % 3 == 0
            else ScenarioParams(
                slot=i % 3,
                manoeuvre=TRAIN_MANOEUVRES[i % len(TRAIN_MANOEUVRES)],
                trigger_s=2.0,
                intensity=0.75,
                hold_s=1.0,
                gap_m=10.0,
            ),
            300 + i,
        )
        for i in range(n)
    ]


def test_parallel_episodes_are_the_serial_ones_in_job_order():
    jobs = _jobs(4)
    params = IdmParams(time_wanted=0.8)
    serial = parallel.planner_episodes("roundabout", params, jobs, parallel.Workers(1))
    spread = parallel.planner_episodes("roundabout", params, jobs, parallel.Workers(2))
    parallel.shutdown()
    assert [r.seed for r in spread] == [s for _, s in jobs]
    assert [r.model_dump() for r in spread] == [r.model_dump() for r in serial]


def test_workers_must_be_positive():
    with pytest.raises(ValueError, match="--workers 0"):
        parallel.configure(0)
    assert parallel.configure(1).label() == "serial (1 process)"
    parallel.configure(None)


@pytest.mark.ray
def test_ray_workers_give_the_serial_results():
    jobs = _jobs(3)
    serial = parallel.planner_episodes("roundabout", IdmParams(), jobs, parallel.Workers(1))
    try:
        spread = parallel.planner_episodes("roundabout", IdmParams(), jobs, parallel.Workers(2, ray_address="local"))
    finally:
        parallel.shutdown()
    assert [r.model_dump() for r in spread] == [r.model_dump() for r in serial]


def test_bench_measures_the_closed_loop_attacker_and_prices_every_check():
    from environments.adv0 import bench

    m = bench.bench_matrix(1, defenders=("idm",), attackers=("none", "closed_loop"))
    assert set(m.cells) == {"idm/none", "idm/closed_loop"}
    assert all(c.cpu_s_per_episode > 0 and c.steps > 0 for c in m.cells.values())
    shown = json.loads(bench.to_json(m))  # --json leaves out the defender that was not measured
    assert list(shown) == ["family", "episodes", "cells", "idm_driver"] and shown["cells"]["idm/none"]["episodes"] == 1

    def cell(cpu_s: float) -> bench.MatrixCell:
        return bench.MatrixCell(cpu_s_per_episode=cpu_s, episodes_per_s_per_core=1 / cpu_s, steps=20,
                                cpu_s_per_step=cpu_s / 20, episodes=1, crashes=0)

    # the check costs follow the registered sizes: doubling the planner's cost doubles the spread part
    cells = {f"idm/{a}": cell(0.4) for a in ("none", "random", "scripted", "cat", "adv0")}
    families = {f: 0.4 for f in ("highway-dense", "merge", "roundabout", "intersection", "aggressive")}
    costs = bench.check_costs(cells, families, 0.05)
    assert set(costs) == {f"C{i}" for i in range(1, 10)}
    assert costs["C3"]["parallel"] == pytest.approx(0.4 * (4 * size("C3", "episodes") + 126))
    dearer = bench.check_costs({k: cell(0.8) for k in cells}, {f: 0.8 for f in families}, 0.05)
    assert dearer["C8"]["parallel"] == pytest.approx(2 * costs["C8"]["parallel"])
    here, cluster = bench.wall_estimate(costs, 2), bench.wall_estimate(costs, 64)
    assert all(cluster[k] <= here[k] for k in costs) and cluster["C9"] == here["C9"]  # the LLM driver is not spread
