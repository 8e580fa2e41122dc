"""The toy world (`environments/adv0/sim/toy.py`): the whole scenario space enumerated at once, equal to
one-episode runs of the same (seed, z); a pure function of its seed; the fault rule on hand-built
collisions (rear-end by the ego, rear-end of the ego, a side-by-side intrusion, a cut-in that left
room and then braked); the kinematic feasibility flag; the driver's Episode; bad input."""

from __future__ import annotations


import numpy as np
import pytest

from environments.adv0.policies.attacker import fit_reference
from environments.adv0.sim import toy, toy_sim
from environments.adv0.sim.scenario import (
    FACTORS, SPACE_SIZE, TRAIN_MANOEUVRES, IdmParams, ScenarioParams, all_scenarios, defender_return,
)
from environments.adv0.train.planner import tune_cem

Z = all_scenarios()
CODE = {name: i for i, name in enumerate(toy_sim.FAULT_CODES)}


@pytest.fixture(scope="module")
def table() -> toy.ToyOutcome:
    return toy.evaluate([3, 4], Z)


DEFAULT = IdmParams()


def one(seed: int, z: ScenarioParams | None, planner: IdmParams | None = DEFAULT):
    episode = toy.start_episode("toy", seed, z, planner=planner)
    while not episode.done:
        episode.step(None)
    return episode.result()


def test_the_whole_space_is_enumerated_with_the_landscape_the_checks_need(table):
    # Its speed (~0.14 s for 6000 episodes) is `harness bench driving`'s to report, not a test's.
    assert table.J.shape == (2, SPACE_SIZE)
    # The landscape the checks need: defender-at-fault crashes exist but are rare, the fault gate
    # has attacker-at-fault crashes to remove, and some swerves break the kinematic limits.
    assert 0 < table.defender_fault.mean() < 0.02
    assert table.attacker_fault.any() and (~table.feasible).any()
    assert np.all((table.J >= -1) & (table.J <= 1))


def test_enumeration_equals_single_episodes_and_is_a_pure_function_of_the_seed(table):
    picks = [int(np.flatnonzero(table.defender_fault[0])[0]), int(np.flatnonzero(table.attacker_fault[0])[0]),
             int(np.flatnonzero(~table.crashed[0] & table.fired[0])[0]), 17]
    for k in picks:
        z = ScenarioParams.from_index(tuple(Z[k]))
        r = one(3, z)
        assert r.reward == pytest.approx(table.J[0, k], abs=1e-12)
        assert r.crashed == table.crashed[0, k] and r.attack_fired == table.fired[0, k]
        assert (r.collision.fault if r.collision else None) == toy_sim.FAULT_CODES[table.fault[0, k]]
        assert r.min_ttc == pytest.approx(table.min_ttc[0, k], abs=1e-12)
        assert one(3, z).model_dump() == r.model_dump()  # same seed, same z: the same episode
    again = toy.evaluate([3, 4], Z[:500])
    assert np.array_equal(again.J, table.J[:, :500]) and np.array_equal(again.fault, table.fault[:, :500])
    assert not np.array_equal(toy.evaluate([5], Z[:500]).J, again.J[:1])  # another seed, another road
    assert np.allclose(toy_sim.context(3), toy_sim.context(3)) and not np.allclose(toy_sim.context(3), toy_sim.context(4))


def test_the_vectorised_return_is_defender_return():
    rng = np.random.default_rng(0)
    speeds, fault = rng.uniform(10, 35, 50), rng.random(50) < 0.3
    expect = [defender_return(bool(f), float(s), 0.0, 12.0) for s, f in zip(speeds, fault)]
    assert np.allclose(toy_sim.defender_returns(speeds, fault.astype(float)), expect)


def sim_of(s: list[float], d: list[float], v: list[float], attack: np.ndarray | None = None,
           ego: IdmParams = DEFAULT) -> toy_sim.ToySim:
    """A hand-built road: ego in column 0 plus five background vehicles."""
    arr = lambda x: np.array([x], dtype=float)  # noqa: E731
    init = toy_sim.ToyInit(arr(s), arr(d), arr(v), arr(v))
    return toy_sim.ToySim(init, toy_sim.Attacks.build(init, attack, TRAIN_MANOEUVRES), toy_sim.ego_matrix(ego, 1))


FAR = [400.0, 500.0, 600.0, -400.0]  # four vehicles out of the way (the left lane)


def run(sim: toy_sim.ToySim, ego_acc: float | None = None) -> toy_sim.ToySim:
    for _ in range(toy_sim.STEPS):
        sim.step(None if ego_acc is None else np.array([ego_acc]))
        if not sim.alive[0]:
            break
    return sim


def test_hand_built_rear_end_by_the_ego_is_the_defenders_fault():
    # A driver holding full throttle into a stopped car in its lane.
    sim = run(sim_of([0.0, 40.0, *FAR], [0.0, 0.0, -4, -4, -4, -4], [25.0, 0.0, 20, 20, 20, 20]), ego_acc=3.0)
    assert sim.crashed[0] and sim.fault[0] == CODE["defender"] and toy_sim.RULES[sim.rule[0]] == "rear-end: ego behind"
    assert sim.other[0] == 1 and sim.min_ttc[0] == 0.0


def test_hand_built_rear_end_of_the_ego_is_the_followers_fault():
    # A fast car 8 m behind a stopped ego cannot stop in time: background's fault, not the ego's.
    sim = run(sim_of([0.0, -13.0, *FAR], [0.0, 0.0, -4, -4, -4, -4], [0.0, 30.0, 20, 20, 20, 20]), ego_acc=0.0)
    assert sim.crashed[0] and sim.fault[0] == CODE["background"] and toy_sim.RULES[sim.rule[0]] == "rear-end: other behind"
    out = toy_sim.outcome_arrays(sim)
    assert out["J"][0] == defender_return(False, float(out["mean_speed"][0]), 0.0, 1.0)  # no crash penalty for the ego


def test_hand_built_side_by_side_cut_in_is_the_attackers_fault():
    # A slow car in the left lane fires a full-intensity cut-in as the faster ego draws level.
    z = np.array([[0, 0, 0, 3, 0, 0]])  # slot 0 (nearest), cut_in, trigger 1 s, intensity 1, hold 0.5, gap 5 m
    sim = run(sim_of([0.0, 25.0, *FAR], [0.0, -4.0, -4, -4, -4, -4], [27.0, 15.0, 20, 20, 20, 20], z))
    assert sim.fired[0] and sim.crashed[0] and sim.fault[0] == CODE["attacker"]
    assert toy_sim.RULES[sim.rule[0]] in ("lateral intrusion", "unsafe cut-in")
    assert sim.t_crash[0] - sim.t_enter[1, 0] <= toy_sim.CUT_IN_REACTION_S + 1e-9


def test_a_cut_in_that_left_room_then_braked_is_the_defenders_fault(table):
    # Found by enumeration (seed 3): the attacker entered the ego's lane, and the contact came more
    # than a reaction time later, from behind: the under-cautious ego's rear-end.
    k = int(np.flatnonzero(table.defender_fault[0])[0])
    z = ScenarioParams.from_index(tuple(Z[k]))
    episode = toy.start_episode("toy", 3, z, planner=IdmParams())
    while not episode.done:
        episode.step(None)
    r = episode.result()
    assert z.manoeuvre in ("cut_in", "cut_in_brake") and r.defender_failure
    c = r.collision
    assert c.other == "attacker" and c.rule.startswith("rear-end: ego behind")
    assert c.geometry[-2].id == "ego" and c.geometry[-1].id == "attacker"  # the audit trail ends at contact
    ego, att = c.geometry[-2], c.geometry[-1]
    assert att.s - ego.s < toy_sim.VEH_L and abs(att.d - ego.d) < toy_sim.VEH_W
    entered = next(i for i in range(0, len(c.geometry), 2) if abs(c.geometry[i + 1].d - c.geometry[i].d) < toy_sim.VEH_W)
    assert (len(c.geometry) - 2 - entered) / 2 * toy_sim.DT > toy_sim.CUT_IN_REACTION_S  # it had time to react
    assert r.attacker_kinematics and max(abs(a) for a, _ in r.attacker_kinematics) <= 7.0 + 1e-9


def test_short_swerves_break_the_lateral_limit_and_are_flagged():
    idx = lambda hold: ScenarioParams(slot=0, manoeuvre="swerve_return", trigger_s=1.0, intensity=1.0,  # noqa: E731
                                      hold_s=hold, gap_m=20.0).index()
    out = toy.evaluate(range(40), np.array([idx(0.5), idx(2.0)]))
    fired = out.fired[:, 0] & out.fired[:, 1]
    assert fired.any()
    assert not out.feasible[fired, 0].any() and out.feasible[fired, 1].all()
    assert out.feasible[~out.fired].all()  # a script that never ran broke nothing


def test_the_driver_episode_counts_unavailable_actions_and_ends():
    episode = toy.start_episode("toy", 3, None)
    view = episode.view()
    assert view.available == ["IDLE", "FASTER", "SLOWER"] and view.lanes == 2 and len(view.neighbours) == 5
    assert "Available actions: IDLE, FASTER, SLOWER" in view.text()
    for action in ["SLOWER", "LANE_LEFT", "nonsense", "SLOWER"] + ["IDLE"] * 20:
        if episode.done:
            break
        episode.step(action)
    r = episode.result()
    assert r.invalid_actions == 2 and r.actions[:4] == ["SLOWER", "IDLE", "IDLE", "SLOWER"]
    assert r.steps == len(r.ttc) == int(toy_sim.DURATION_S / toy.POLICY_DT) and not r.crashed
    assert r.mean_speed < 25.0  # two SLOWERs: the set-point fell to 20 m/s
    with pytest.raises(RuntimeError, match="over"):
        episode.step("IDLE")


def test_held_out_manoeuvres_run_in_single_episodes():
    z = ScenarioParams(slot=0, manoeuvre="merge_squeeze", trigger_s=1.0, intensity=0.5, hold_s=1.0, gap_m=10.0)
    assert one(4, z).attack.manoeuvre == "merge_squeeze"
    out = toy.evaluate([4], np.array([z.index(toy_sim.ALL_MANOEUVRES)]), manoeuvres=toy_sim.ALL_MANOEUVRES)
    assert out.J[0, 0] == pytest.approx(one(4, z).reward, abs=1e-12)


def test_bad_input_is_one_clear_error():
    with pytest.raises(ValueError, match="family 'toy'"):
        toy.start_episode("merge", 0, None)
    with pytest.raises(ValueError, match="gap_m"):
        toy.evaluate([0], np.array([[0, 0, 0, 0, 0, 9]]))
    with pytest.raises(ValueError, match="seed"):
        toy.evaluate([-1])
    with pytest.raises(ValueError, match="one attack"):
        toy.summary_results([0, 1], [None])


def test_background_behaviour_makes_hard_close_cut_ins_rare():
    p0 = fit_reference(toy.background_behaviour(np.random.default_rng(0), 20_000))
    p = [np.exp(lp) for lp in p0.log_p]
    assert p[5][list(FACTORS["gap_m"]).index(5.0)] < 0.02 and p[3][list(FACTORS["intensity"]).index(1.0)] < 0.01
    assert p[1][1] < 0.1  # cut_in_brake is the rarest manoeuvre


def test_summary_results_match_single_episodes():
    z = ScenarioParams.from_index(tuple(Z[1234]))
    s = toy.summary_results([3, 3], [z, None])
    assert s[0].reward == pytest.approx(one(3, z).reward, abs=1e-12) and s[1].attack is None
    assert s[1].reward == pytest.approx(one(3, None).reward, abs=1e-12)


def test_the_toy_worlds_population_scores_match_its_episodes_and_drive_the_one_cem():
    z = [ScenarioParams.from_index(tuple(int(x) for x in Z[k])) for k in (1234, 4321)]
    jobs = [(z[0], 3), (z[1], 4), (None, 3)]
    cands = [IdmParams(), IdmParams(time_wanted=2.5, target_speed=25.0)]
    got = toy.population_scores(cands, jobs)
    for p, (j, speed) in zip(cands, got):
        rs = toy.summary_results([s for _, s in jobs], [a for a, _ in jobs], p)
        assert j == pytest.approx(np.mean([r.reward for r in rs]), abs=1e-12)
        assert speed == pytest.approx(np.mean([r.mean_speed for r in rs]), abs=1e-12)
    # The planner's CEM, batched over the toy world: the box holds, the incumbent never gets worse.
    scen = [(ScenarioParams.from_index(tuple(int(x) for x in row)), 3 + i % 2)
            for i, row in enumerate(Z[np.isin(Z[:, 1], [0, 1])][::97])]
    best, history = tune_cem(toy.population_scores, scen, IdmParams(), 2, 6, 1 / 3, seed=0, batched=True)
    lo, hi = IdmParams.bounds()
    assert np.all(best.vector() >= lo) and np.all(best.vector() <= hi)
    inc = [h.incumbent_j for h in history]
    assert inc == sorted(inc) and len(history) == 2 and inc[0] >= history[0].start_j
