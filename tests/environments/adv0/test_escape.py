"""Avoidable triggers (`environments/adv0/sim/escape.py`) and the attacker option that draws only them
(`train/options.py`'s `AvoidableAdv0`, `--ablation avoidable`): the escape test on a hand-computed brake check,
the option's draws (changed, all escapable, all kinematically feasible in the toy world), its exact
restricted distribution, and its state round trip (the loop's and suite adv0's)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from environments.adv0.checks.toy_checks import toy_reference
from environments.adv0.policies import baselines, draw
from environments.adv0.sim import escape, toy, toy_sim
from environments.adv0.sim.scenario import ScenarioParams, all_scenarios
from environments.adv0.train import options
from environments.adv0.train.loop import make_attacker
from environments.adv0.train.loop_state import LoopConfig


def brake_check(gap_m: float) -> np.ndarray:
    return np.array([ScenarioParams(slot=0, manoeuvre="brake_check", trigger_s=1.0, intensity=1.0, hold_s=2.0,
                                    gap_m=gap_m).index()])  # type: ignore[arg-type]


def test_a_hard_brake_check_is_escapable_only_with_room_to_react():
    # Same speed, same lane. The attacker brakes at 7 m/s^2 for 2 s; the ego reacts after 1 s and brakes
    # at 6: the gap closes by 3.5 m in the first second, 7.5 m in the next, then by 8^2 / (2 x 6) = 5.3 m
    # while the ego sheds the last 8 m/s -- 16.3 m in all.
    ahead = np.array([[1.0, 0.0, 20.0, 0.0]])
    assert not escape.escape_exists(27.0, ahead, brake_check(15.0))[0]
    assert escape.escape_exists(27.0, ahead, brake_check(20.0))[0]
    # The same brake check from the next lane never enters the ego's path; a tailgate is never the ego's to escape.
    beside = np.array([[1.0, -1.0, 20.0, 0.0]])
    assert escape.escape_exists(27.0, beside, brake_check(5.0))[0]
    tail = np.array([ScenarioParams(slot=0, manoeuvre="tailgate", trigger_s=1.0, intensity=1.0, hold_s=2.0,
                                    gap_m=5.0).index()])  # type: ignore[arg-type]
    assert escape.escape_exists(27.0, ahead, tail)[0]


def test_an_infeasible_swerve_is_never_avoidable_and_the_trigger_time_does_not_matter():
    z = all_scenarios()
    ctx = toy_sim.context(3)
    ok = escape.escape_exists(ctx[0] * 30, baselines._slots(ctx[None])[0], z)
    swerve_short = (z[:, 1] == 4) & (z[:, 4] == 0)  # swerve_return with a 0.5 s hold: > MAX_LAT_ACCEL
    assert not ok[swerve_short].any()
    by_trigger = ok.reshape(5, 5, 4, 4, 3, 5)
    assert (by_trigger == by_trigger[:, :, :1]).all()
    assert 0.5 < ok.mean() < 1.0  # the gate removes some draws, not most


def test_the_avoidable_option_changes_what_is_drawn_and_every_draw_stays_feasible():
    reference = toy_reference()
    plain = options.make("adv0", reference, seed=0)
    gated = options.make("adv0-avoidable", reference, seed=0)
    assert isinstance(gated, options.AvoidableAdv0) and gated.name == "adv0-avoidable"
    seed = 3
    ctx = toy_sim.context(seed)
    mask = gated.avoidable(ctx)
    index = {tuple(row): i for i, row in enumerate(gated.space.tolist())}

    def rows(draws: list[ScenarioParams | None]) -> np.ndarray:
        return np.array([index[d.index()] for d in draws if d is not None])

    before = rows(plain.draw(ctx, np.random.default_rng(1), 300))
    after = rows(gated.draw(ctx, np.random.default_rng(1), 300))
    assert not mask[before].all()  # ADV-0 as it was draws unescapable triggers...
    assert mask[after].all()  # ...the gated option never does
    # Feasible in the simulator too: every gated draw plays within the kinematic limits.
    draws = gated.draw(ctx, np.random.default_rng(2), 40)
    results = toy.summary_results([seed] * len(draws), draws, manoeuvres=toy_sim.ALL_MANOEUVRES)
    assert all(r.attack_feasible for r in results)
    group = gated.propose(ctx, np.random.default_rng(3))
    assert len(group) == gated.config.k + gated.config.reference_draws
    assert len({d.index() for d in group[:gated.config.k]}) == gated.config.k  # distinct
    assert mask[rows(group)].all()


def test_the_restricted_distribution_is_q_renormalised_over_the_escapable_draws():
    gated = options.AvoidableAdv0(toy_reference())
    ctx = toy_sim.context(4)
    log_q = gated.policy.joint_log_probs(ctx)
    p = gated.restricted(log_q, ctx)
    mask = gated.avoidable(ctx)
    assert p.sum() == pytest.approx(1.0) and (p[~mask] == 0).all()
    q = np.exp(log_q)
    assert np.allclose(p[mask], q[mask] / q[mask].sum())


def test_the_loop_builds_it_from_the_ablation_and_a_saved_state_draws_the_same(tmp_path):
    cfg = LoopConfig(family="toy", attacker="adv0", ablation="avoidable", k=3, seed=0)
    attacker = make_attacker(cfg)
    assert attacker.learns and isinstance(attacker.option, options.AvoidableAdv0)
    state = attacker.state()
    assert state["kind"] == "adv0-avoidable"
    again = options.AvoidableAdv0.from_state(state)
    ctx = toy_sim.context(5)
    first = attacker.option.draw(ctx, np.random.default_rng(7), 5)
    assert again.draw(ctx, np.random.default_rng(7), 5) == first
    # Suite adv0 reads a round folder's attacker.json: the variant keeps drawing only escapable triggers.
    (tmp_path / "attacker.json").write_text(json.dumps(state), encoding="utf-8")
    suite_option = draw._option("adv0", "toy", str(tmp_path))
    assert isinstance(suite_option, baselines.AvoidableSampler) and not isinstance(suite_option, options.Adv0Option)
