"""The closed-loop escape gate (`escape.escape_at_firing`, `--ablation avoidable-closed`): the predicate
on hand-computed states, the toy world firing only triggers it passes (holding the others, recording
the never-fired ones as withheld), highway-env's attacker doing the same, and the option's draws,
log-probabilities and state round trip."""

from __future__ import annotations

import json

import numpy as np
import pytest

from environments.adv0.checks.toy_checks import toy_reference
from environments.adv0.policies import baselines, draw
from environments.adv0.sim import escape, toy, toy_sim
from environments.adv0.sim.scenario import IdmParams, ScenarioParams, all_scenarios
from environments.adv0.train import options
from environments.adv0.train.attacker import Adv0Attacker
from environments.adv0.train.loop import make_attacker
from environments.adv0.train.loop_state import LoopConfig

T = escape.script_times()


def one(v_ego: float, v_att: float, gap_m: float, d_plan: np.ndarray, a_plan: np.ndarray) -> bool:
    """The predicate for one attacker `gap_m` bumper-to-bumper ahead (negative: behind)."""
    rel = gap_m + toy_sim.VEH_L if gap_m >= 0 else gap_m - toy_sim.VEH_L
    return bool(escape.escape_at_firing(np.array([v_ego]), np.array([v_att]), np.array([rel]), d_plan, a_plan)[0])


def test_a_brake_check_in_the_ego_lane_needs_room_for_a_second_of_reaction():
    # Both at 27 m/s in one lane; the attacker brakes at 7 m/s^2 for 2 s. The ego reacts 1 s later and
    # brakes at 6: the gap closes 3.5 m in the first second, 7.5 m in the next, then 8^2 / (2 x 6) = 5.3 m
    # while the ego sheds the last 8 m/s: 16.3 m in all.
    d = np.zeros_like(T)
    brake = np.where(T < 2.0, -7.0, 0.0)
    assert not one(27.0, 27.0, 15.0, d, brake)
    assert one(27.0, 27.0, 17.0, d, brake)


def test_a_cut_in_must_enter_at_the_fault_rules_safe_gap():
    # From the next lane straight into the ego's path 1 s after firing, both at 25 m/s: the fault rule's
    # safe gap is 1 s x 25 m/s = 25 m (no braking term at equal speeds).
    jump = np.where(T < 1.0, -4.0, 0.0)
    still = np.zeros_like(T)
    assert not one(25.0, 25.0, 24.0, jump, still)
    assert one(25.0, 25.0, 26.0, jump, still)
    side = escape.escape_at_firing(np.array([25.0]), np.array([25.0]), np.array([2.0]), jump, still)
    assert not side[0]  # side by side at entry (centres 2 m apart): a side swipe, never escapable
    assert one(25.0, 25.0, -20.0, jump, still)  # entering behind the ego: the entrant's to avoid
    # The ego holds its speed until the entry (it owes nothing to a car in the next lane): 5 m/s faster,
    # entry at 2 s, so 10 m closed by then; the safe gap is 25 + (25^2 - 20^2) / (2 x 4) = 53.1 m.
    late = np.where(T < 2.0, -4.0, 0.0)
    assert one(25.0, 20.0, 64.0, late, still)  # 54 m at entry
    assert not one(25.0, 20.0, 62.0, late, still)  # 52 m at entry


def test_the_toy_world_with_the_gate_fires_only_escapable_triggers_and_counts_the_rest():
    z = all_scenarios()
    seeds = [0, 3]
    free = toy.evaluate(seeds, z, record_escape=True)
    gated = toy.evaluate(seeds, z, gate=True)
    unescapable = free.fired & ~free.escape_at_fire
    assert (free.crashed & unescapable).any()  # ungated, such triggers fire and crash
    assert not (gated.fired & ~gated.escape_at_fire).any()  # gated, none fires
    assert not (gated.crashed & gated.attacker_fault).any() and not (gated.crashed & gated.defender_fault).any()
    assert gated.withheld.sum() > 0 and not (gated.withheld & gated.fired).any()
    # A held trigger may fire later: some draws the ungated world fired unescapably fire under the gate.
    assert (unescapable & gated.fired).any()
    # Every draw the ungated world never fired stays unfired (the gate only delays or withholds).
    assert not (~free.fired & gated.fired & ~gated.escape_at_fire).any()


def test_a_gated_toy_episode_holds_a_side_swipe_and_is_a_pure_function_of_seed_and_draw():
    # Seed 3: a slow (intensity 0.25) lane change 15 m ahead of a faster ego; the ego passes it and is
    # side-swiped ungated. Gated, the step's state shows the ego would be beside it at entry: held.
    z = ScenarioParams(slot=3, manoeuvre="cut_in", trigger_s=1.0, intensity=0.25, hold_s=0.5, gap_m=15.0)
    free = toy.start_episode("toy", 3, z, planner=IdmParams())
    while not free.done:
        free.step(None)
    r_free = free.result()
    assert r_free.crashed and r_free.collision is not None and r_free.collision.fault == "attacker"
    assert not r_free.trigger_withheld
    results = []
    for _ in range(2):
        ep = toy.start_episode("toy", 3, z.model_copy(update={"escape_gate": True}), planner=IdmParams())
        while not ep.done:
            ep.step(None)
        results.append(ep.result())
    assert results[0] == results[1]
    r = results[0]
    assert not r.crashed and r.trigger_withheld and not r.attack_fired and r.attack.escape_gate  # type: ignore[union-attr]
    # The vectorised summaries read the same flag from the draw.
    summary = toy.summary_results([3, 3], [z, z.model_copy(update={"escape_gate": True})])
    assert summary[0].crashed and not summary[0].trigger_withheld
    assert summary[1].trigger_withheld and not summary[1].crashed


def test_a_gated_highway_attacker_holds_an_unescapable_trigger_and_fires_an_escapable_one():
    from environments.adv0.checks import gate
    from environments.adv0.sim import highway

    def play(seed: int, z: ScenarioParams, gated: bool) -> tuple[object, object]:
        ep = highway.start_episode("highway", seed, z.model_copy(update={"escape_gate": gated}), planner=IdmParams())
        try:
            while not ep.done:
                ep.step(None)
            return ep.result(), ep.attacker.escape_at_fire  # type: ignore[union-attr]
        finally:
            ep.close()

    draws = dict(gate.highway_draws(5))
    # Seed 9,000,002's uniform draw: a slow cut-in-and-brake fired 5 m ahead. Ungated it fires into an
    # unsafe cut-in (attacker at fault), the predicate having said no; gated it is held to the end.
    slow_cut = draws[9_000_002]
    assert (slow_cut.manoeuvre, slow_cut.gap_m) == ("cut_in_brake", 5.0)
    free, said = play(9_000_002, slow_cut, False)
    assert free.attack_fired and said is False  # type: ignore[attr-defined]
    assert free.crashed and free.collision.fault == "attacker"  # type: ignore[attr-defined]
    held, said = play(9_000_002, slow_cut, True)
    assert held.trigger_withheld and not held.attack_fired and not held.crashed and said is None  # type: ignore[attr-defined]
    # Seed 9,000,004's: a cut-in-and-brake fired 20 m ahead, escapable at its firing step: the gate lets it fire.
    fair, said = play(9_000_004, draws[9_000_004], True)
    assert fair.attack_fired and said is True and not fair.trigger_withheld  # type: ignore[attr-defined]


def test_the_closed_loop_option_draws_as_adv0_does_and_marks_every_draw_gated(tmp_path):
    reference = toy_reference()
    plain = options.make("adv0", reference, seed=0)
    closed = options.make("adv0-avoidable-closed", reference, seed=0)
    assert isinstance(closed, options.ClosedLoopAvoidableAdv0) and isinstance(closed, Adv0Attacker)
    ctx = toy_sim.context(5)
    # The gate acts on the world's firing, not on the draw: same q, same log-probabilities, same draws.
    assert np.array_equal(plain.policy.joint_log_probs(ctx), closed.policy.joint_log_probs(ctx))
    a = plain.draw(ctx, np.random.default_rng(7), 20)
    b = closed.draw(ctx, np.random.default_rng(7), 20)
    assert [x.index() for x in a if x] == [x.index() for x in b if x]
    assert all(x is not None and x.escape_gate for x in b + closed.propose(ctx, np.random.default_rng(8)))
    assert not any(x is not None and x.escape_gate for x in a)


def test_the_loop_builds_the_closed_loop_option_and_restores_it_from_its_state(tmp_path):
    cfg = LoopConfig(family="toy", attacker="adv0", ablation="avoidable-closed", k=3, seed=0, contexts=2)
    attacker = make_attacker(cfg)
    assert attacker.learns and isinstance(attacker.option, options.ClosedLoopAvoidableAdv0)
    seeds = [11, 12]
    ctx = {s: toy_sim.context(s) for s in seeds}
    rollout = lambda ss, zs: toy.summary_results(ss, zs, manoeuvres=toy_sim.ALL_MANOEUVRES)  # noqa: E731
    report = attacker.train(seeds, ctx, rollout, np.random.default_rng(0))
    assert report["rollouts"] == 2 * (3 + attacker.option.config.reference_draws)
    state = attacker.state()
    assert state["kind"] == "adv0-avoidable-closed"
    again = make_attacker(cfg, json.loads(json.dumps(state)))
    assert isinstance(again.option, options.ClosedLoopAvoidableAdv0)
    first = attacker.draw(ctx[11], np.random.default_rng(9))
    assert again.draw(ctx[11], np.random.default_rng(9)) == first and first is not None and first.escape_gate
    (tmp_path / "attacker.json").write_text(json.dumps(state), encoding="utf-8")
    suite_option = draw._option("adv0", "toy", str(tmp_path))
    assert isinstance(suite_option, baselines.ClosedLoopAvoidableSampler)
    assert not isinstance(suite_option, options.Adv0Option)  # a suite draws, it never trains
    assert suite_option.draw(ctx[11], np.random.default_rng(9), 1)[0] == first


@pytest.mark.parametrize("bad", ["avoidable-open", "closed"])
def test_an_unknown_ablation_is_refused(bad):
    with pytest.raises(ValueError, match="ablation"):
        LoopConfig(ablation=bad)  # type: ignore[arg-type]
