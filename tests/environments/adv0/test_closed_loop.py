"""The closed-loop attacker (`environments/adv0/sim/closed_loop.py`): exact masked log-probabilities and
their gradient, the features of a hand-built state, the feasibility mask, bad limits, and real
highway-env episodes (directly and through suite `adv0`'s `attacker=closed_loop`)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from environments.adv0.metrics import episode_scores
from environments.adv0.sim import highway
from environments.adv0.sim.closed_loop import (
    ACTIONS,
    ClosedLoopAttacker,
    ClosedLoopLimits,
    ClosedLoopPolicy,
    JointState,
    Rel,
    GAP_FEATURES,
    check_some_feasible,
    feasible_mask,
    features,
    gap_features,
    n_features,
    safe_margin_s,
)
from environments.adv0.sim.scenario import AttackerTrajectory, IdmParams
from harness.loopback import running_server
from tests.conftest import harness_cli


def _random_policy(seed: int, k: int = 2) -> ClosedLoopPolicy:
    rng = np.random.default_rng(seed)
    return ClosedLoopPolicy(rng.normal(size=(len(ACTIONS), n_features(k))), rng.normal(size=len(ACTIONS)), k)


def _random_trajectory(seed: int, k: int = 2, steps: int = 5) -> AttackerTrajectory:
    rng = np.random.default_rng(seed)
    traj = AttackerTrajectory(policy="closed_loop")
    for t in range(steps):
        mask = rng.random(len(ACTIONS)) < 0.6
        mask[rng.integers(len(ACTIONS))] = True  # at least one feasible action
        traj.t.append(float(t))
        traj.features.append(rng.normal(size=n_features(k)).tolist())
        traj.feasible.append(mask.tolist())
        traj.actions.append(ACTIONS[int(rng.choice(np.flatnonzero(mask)))])
    return traj


def test_masked_probabilities_sum_to_one_and_infeasible_actions_have_probability_zero():
    policy = _random_policy(0)
    phi = np.random.default_rng(1).normal(size=n_features(2))
    mask = np.array([True, False, True, False, False, True, True, False, True])
    logp = policy.log_probs(phi, mask)
    p = np.exp(logp)
    assert np.all(p[~mask] == 0.0) and np.all(np.isneginf(logp[~mask]))
    assert p[mask].sum() == pytest.approx(1.0, abs=1e-12)
    # the exact softmax over the feasible logits, computed independently
    z = (policy.weights @ phi + policy.bias)[mask]
    assert np.allclose(p[mask], np.exp(z) / np.exp(z).sum(), atol=1e-12)
    # sampling never picks a masked action
    rng = np.random.default_rng(2)
    assert all(mask[policy.sample(phi, mask, rng)] for _ in range(200))


def test_trajectory_log_prob_is_the_sum_of_steps_and_its_gradient_matches_finite_differences():
    policy, traj = _random_policy(3), _random_trajectory(4)
    steps = [
        policy.log_probs(np.array(f), np.array(m))[ACTIONS.index(a)]
        for f, m, a in zip(traj.features, traj.feasible, traj.actions)
    ]
    assert policy.log_prob(traj) == pytest.approx(sum(steps), abs=1e-12) and policy.log_prob(traj) < 0
    theta, grad = policy.theta, policy.grad_log_prob(traj)
    eps = 1e-6
    numeric = np.array(
        [
            (policy.with_theta(theta + eps * e).log_prob(traj) - policy.with_theta(theta - eps * e).log_prob(traj))
            / (2 * eps)
            for e in np.eye(theta.size)
        ]
    )
    assert np.allclose(grad, numeric, atol=1e-6)
    assert np.abs(grad).max() > 0.1  # not a trivially zero gradient
    # weights of masked actions get no gradient from a step where they were masked everywhere
    never = ~np.any(np.array(traj.feasible), axis=0)
    g_w = grad[: policy.weights.size].reshape(policy.weights.shape)
    assert np.all(g_w[never] == 0.0)


def test_a_masked_action_in_a_trajectory_has_log_prob_minus_infinity():
    policy, traj = _random_policy(5), _random_trajectory(6, steps=1)
    masked = [ACTIONS[i] for i, ok in enumerate(traj.feasible[0]) if not ok]
    assert masked, "the fixture step should mask something"
    traj.actions[0] = masked[0]
    assert policy.log_prob(traj) == -np.inf


def test_features_of_a_hand_built_state():
    state = JointState(
        speed=24.0,
        offset=-0.4,
        lane_id=0,
        lanes=3,
        changing=False,
        ego=Rel(s=-20.0, d=4.0, dv=3.0),
        others=[Rel(s=10.0, d=0.0, dv=-5.0), Rel(s=50.0, d=8.0, dv=0.0), Rel(s=-90.0, d=0.0, dv=1.0)],
    )
    phi = features(state, k=2)
    expected = [
        24 / 30,
        -0.1,
        0.0,
        1.0,  # own: speed, offset, no lane left of lane 0, a lane right
        1.0,
        -0.4,
        1.0,
        0.3,  # the ego
        1.0,
        0.2,
        0.0,
        -0.5,  # nearest other
        1.0,
        1.0,
        2.0,
        0.0,
    ]  # second nearest (the third is beyond k=2)
    assert phi.tolist() == pytest.approx(expected, abs=1e-12)
    padded = features(JointState(speed=0.0, offset=0.0, lane_id=1, lanes=2, changing=False, ego=None), k=2)
    assert padded.tolist() == [0.0, 0.0, 1.0, 0.0] + [0.0] * 12  # no ego, no others: padding


def _with_ego(s: float, d: float, dv: float) -> JointState:
    return JointState(speed=20.0, offset=0.0, lane_id=1, lanes=3, changing=False, ego=Rel(s=s, d=d, dv=dv))


def test_gap_features_of_hand_built_states():
    # Layout: lane one-hot (left, same, right), then margin bin (unsafe, 0-1 s, 1-2 s) x lane, closing, s*d.
    assert GAP_FEATURES == 14 and n_features(2, "gaps") == n_features(2) + 14
    # The ego 50 m behind in the lane to the right at 25 m/s, the attacker at 20: the safe gap is
    # 25 * 1 s + (25^2 - 20^2) / (2 * 4) = 53.125 m, the bumper gap 45 m: 0.325 s short of it (unsafe).
    unsafe = _with_ego(-50.0, 4.0, 5.0)
    assert safe_margin_s(unsafe) == pytest.approx((45.0 - 53.125) / 25.0)
    expected = np.zeros(14)
    expected[2] = 1.0  # right
    expected[3 + 0 * 3 + 2] = 1.0  # unsafe x right
    expected[12], expected[13] = 5.0 / 45.0, -1.0  # closing 5 m/s over 45 m; s * d = (-50/50) * (4/4)
    assert gap_features(unsafe).tolist() == pytest.approx(expected.tolist(), abs=1e-12)
    # 40 m behind in the lane to the left at the same speed: safe gap 20 m, bumper gap 35 m, 0.75 s over it.
    left = gap_features(_with_ego(-40.0, -4.0, 0.0))
    assert np.flatnonzero(left).tolist() == [0, 3 + 1 * 3 + 0, 13] and left[13] == pytest.approx(0.8)
    # 80 m behind in the same lane: 2.75 s over the safe gap, past the last bin; the lane and s*d only.
    far = gap_features(_with_ego(-80.0, 0.3, 0.0))
    assert np.flatnonzero(far).tolist() == [1, 13] and far[13] == pytest.approx(-1.6 * 0.075)
    # An ego ahead has no margin and no closing rate; no ego is all zeros.
    assert np.flatnonzero(gap_features(_with_ego(30.0, 0.0, -3.0))).tolist() == [1]
    assert safe_margin_s(_with_ego(30.0, 0.0, -3.0)) is None
    no_ego = JointState(speed=20.0, offset=0.0, lane_id=1, lanes=3, changing=False, ego=None)
    assert not gap_features(no_ego).any()
    # The "gaps" feature vector is the base one with the block appended.
    phi = features(unsafe, k=2, feature_set="gaps")
    assert phi[: n_features(2)].tolist() == features(unsafe, k=2).tolist() and phi[n_features(2) :].tolist() == (
        pytest.approx(expected.tolist(), abs=1e-12)
    )
    with pytest.raises(ValueError, match="feature_set='wide'"):
        n_features(2, "wide")  # type: ignore[arg-type]


def test_a_tempered_policy_is_pi_to_the_one_over_t_and_the_feature_set_persists():
    rng = np.random.default_rng(4)
    policy = ClosedLoopPolicy(rng.normal(size=(len(ACTIONS), n_features(1, "gaps"))), rng.normal(size=9), 1, "gaps")
    phi, mask = rng.normal(size=n_features(1, "gaps")), np.arange(len(ACTIONS)) % 3 != 0
    hot = np.exp(policy.tempered(2.0).log_probs(phi, mask))
    p = np.exp(policy.log_probs(phi, mask))
    assert hot[~mask].tolist() == [0.0] * int((~mask).sum())
    assert hot[mask] == pytest.approx(np.sqrt(p[mask]) / np.sqrt(p[mask]).sum())
    back = ClosedLoopPolicy.from_state(json.loads(json.dumps(policy.to_state())))
    assert back.feature_set == "gaps" and np.array_equal(back.theta, policy.theta)
    with pytest.raises(ValueError, match="temperature=0"):
        policy.tempered(0)


def test_the_mask_keeps_the_road_the_lane_change_and_the_speed_band():
    limits = ClosedLoopLimits(max_accel=3.0, max_brake=6.0, speed_min=10.0, speed_max=30.0)

    def feasible(**kw) -> set[str]:
        base = {"speed": 20.0, "offset": 0.0, "lane_id": 1, "lanes": 3, "changing": False, "ego": None}
        mask = feasible_mask(JointState(**(base | kw)), limits, interval_s=1.0)
        return {a for a, ok in zip(ACTIONS, mask) if ok}

    assert feasible() == set(ACTIONS)
    assert not any(a.startswith("left") for a in feasible(lane_id=0))  # off the road on the left
    assert not any(a.startswith("right") for a in feasible(lane_id=2))
    assert {a.split(":")[0] for a in feasible(changing=True)} == {"keep"}  # one lane change at a time
    assert not any(a.endswith("accelerate") for a in feasible(speed=28.0))  # 31 m/s > 30
    assert not any(a.endswith("brake") for a in feasible(speed=15.0))  # 9 m/s < 10
    # above the band only braking is feasible (it moves back towards the band); holding is not
    assert {a.split(":")[1] for a in feasible(speed=33.0)} == {"brake"}


@pytest.mark.parametrize(
    "kwargs, key",
    [
        ({"lateral": ()}, "'lateral'"),
        ({"longitudinal": ()}, "'longitudinal'"),
        ({"speed_min": 30.0, "speed_max": 20.0}, "'speed_min'"),
        ({"max_brake": 9.0}, "'max_brake'"),
        ({"max_accel": 0.0}, "'max_accel'"),
        ({"lateral_typo": ("keep",)}, "lateral_typo"),
    ],
)
def test_bad_limits_are_one_error_naming_the_key(kwargs, key):
    with pytest.raises(ValidationError) as err:
        ClosedLoopLimits(**kwargs)
    assert key in str(err.value)


def test_limits_that_leave_nothing_feasible_here_name_the_keys():
    limits = ClosedLoopLimits(lateral=("left",), longitudinal=("accelerate", "hold"))
    state = JointState(speed=20.0, offset=0.0, lane_id=0, lanes=3, changing=False, ego=None)
    mask = feasible_mask(state, limits, 1.0)
    assert not mask.any()
    with pytest.raises(ValueError, match="'lateral'=\\['left'\\]"):
        check_some_feasible(mask, limits)


def test_policy_state_round_trip_and_bad_state(tmp_path):
    policy = _random_policy(7)
    path = tmp_path / "policy.json"
    path.write_text(json.dumps(policy.to_state()))
    back = ClosedLoopPolicy.load(path)
    assert np.array_equal(back.theta, policy.theta) and back.k == 2
    path.write_text(json.dumps({"kind": "closed_loop", "k": 2, "weights": []}))
    with pytest.raises(ValueError, match="'bias'"):
        ClosedLoopPolicy.load(path)


# ---------------------------------------------------------------- real highway-env episodes
def _play(seed: int, policy: ClosedLoopPolicy, limits: ClosedLoopLimits | None = None):
    attacker = ClosedLoopAttacker(policy, limits, slot=0, seed=[seed, 1])
    ep = highway.start_episode("highway", seed, None, planner=IdmParams(), closed_loop=attacker)
    try:
        while not ep.done:
            ep.step(None)
        attacker.vehicle_crashed = bool(ep.attacker.crashed)
        return ep.result(), attacker
    finally:
        ep.close()


def test_a_real_episode_records_every_decision_and_its_exact_log_prob():
    result, attacker = _play(1, ClosedLoopPolicy.reference())
    traj = result.attacker_trajectory
    assert traj is not None and traj.policy == "closed_loop"
    n = len(traj.actions)
    assert n >= 1 and len(traj.features) == len(traj.feasible) == len(traj.t) == n
    # one decision per policy step (1 s) until the episode or the attacker's own crash ends it
    assert traj.t == pytest.approx([float(i) for i in range(n)])
    assert n == result.steps or (n < result.steps and attacker.vehicle_crashed)
    assert all(m[ACTIONS.index(a)] for a, m in zip(traj.actions, traj.feasible))  # only feasible actions played
    assert all(len(f) == n_features() for f in traj.features)
    assert np.isfinite(attacker.policy.log_prob(traj)) and attacker.policy.log_prob(traj) < 0
    scores = episode_scores(result)
    assert scores.attacked and scores.manoeuvre == "closed_loop"
    # the episode is a pure function of its inputs: the same seed replays the same decisions
    again, _ = _play(1, ClosedLoopPolicy.reference())
    assert again.attacker_trajectory.actions == traj.actions and again.reward == result.reward


def test_the_policy_drives_the_vehicle():
    # a policy that brakes whenever it may: the taken-over vehicle's own speed feature falls to the band's floor
    k = 4
    bias = np.array([10.0 if a == "keep:brake" else 0.0 for a in ACTIONS])
    braker = ClosedLoopPolicy(np.zeros((len(ACTIONS), n_features(k))), bias, k)
    limits = ClosedLoopLimits(max_brake=4.0, speed_min=8.0)
    result, _ = _play(1, braker, limits)
    speeds = [f[0] * 30.0 for f in result.attacker_trajectory.features]
    assert speeds[0] > 15.0 and min(speeds) < 13.0
    assert min(speeds) >= 8.0 - 1e-6  # never below the band
    assert result.attacker_trajectory.actions[0] == "keep:brake"


def test_limits_that_make_every_action_infeasible_stop_the_episode_with_the_key():
    limits = ClosedLoopLimits(lateral=("keep",), longitudinal=("accelerate",), speed_max=10.0)  # already faster
    with pytest.raises(ValueError, match="'longitudinal'"):
        _play(2, ClosedLoopPolicy.reference(), limits)


def test_suite_option_attacker_closed_loop_runs_an_episode(tmp_path):
    with running_server("--echo", "--reply", '{"action": "IDLE"}') as url:
        proc = harness_cli(
            "eval",
            "--suite",
            "adv0",
            "--model",
            "openai/driver",
            "--base-url",
            url,
            "--suite-option",
            "families=highway",
            "--suite-option",
            "seeds=1",
            "--suite-option",
            "attacker=closed_loop",
            "--suite-option",
            "filmstrips=false",
            "--run-dir",
            str(tmp_path),
            "--no-progress",
        )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (run,) = [p for p in Path(tmp_path).iterdir() if p.is_dir()]
    (record,) = [json.loads(line) for line in (run / "samples.jsonl").read_text().splitlines()]
    episode = record["output"]["episode"]
    assert record["status"] == "ok" and episode["attack"] is None
    assert len(episode["attacker_trajectory"]["actions"]) >= 1
    assert set(episode["attacker_trajectory"]["actions"]) <= set(ACTIONS)
    assert record["scores"]["attacked"] is True and record["scores"]["manoeuvre"] == "closed_loop"
