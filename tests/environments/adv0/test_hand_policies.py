"""The hand-set behaviour policies (`environments/adv0/sim/hand_policies.py`): each one's logits written
out from its docstring and compared with its exact masked log-probabilities, and what it prefers in
hand-built states against the reference."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from environments.adv0.sim.closed_loop import ACTIONS, ClosedLoopPolicy, JointState, Rel, gap_features, safe_margin_s
from environments.adv0.sim.hand_policies import cut_in, hand_policy, steer_brake
from environments.adv0.sim.scenario import AttackerTrajectory
from environments.adv0.train.closed_loop_dpo import ClosedLoopConfig

EVERYTHING = np.ones(len(ACTIONS), dtype=bool)
NO_RIGHT = np.array([not a.startswith("right") for a in ACTIONS])
LAT = {lat: np.array([a.startswith(lat + ":") for a in ACTIONS]) for lat in ("left", "keep", "right")}
LON = {lon: np.array([a.endswith(":" + lon) for a in ACTIONS]) for lon in ("accelerate", "hold", "brake")}


def _with_ego(s: float, d: float, dv: float) -> JointState:
    return JointState(speed=20.0, offset=0.0, lane_id=1, lanes=3, changing=False, ego=Rel(s=s, d=d, dv=dv))


def _direct(logits: np.ndarray, mask: np.ndarray) -> np.ndarray:
    z = logits[mask]
    out = np.full(len(ACTIONS), -np.inf)
    out[mask] = z - np.log(np.exp(z).sum())
    return out


def _assert_exact(policy: ClosedLoopPolicy, state: JointState, logits: np.ndarray) -> None:
    phi = policy.features(state)
    for mask in (EVERYTHING, NO_RIGHT):
        got = policy.log_probs(phi, mask)
        assert np.array_equal(np.isneginf(got), ~mask)
        assert got[mask] == pytest.approx(_direct(logits, mask)[mask], abs=1e-12)


def _probs(policy: ClosedLoopPolicy, state: JointState) -> np.ndarray:
    return np.exp(policy.log_probs(policy.features(state), EVERYTHING))


# ---------------------------------------------------------------- steer-brake (session 27)
def _steer_brake_logits(s: float, d: float) -> np.ndarray:
    """`steer_brake`'s default logits written out from its docstring (s, d: the ego's offsets in the
    base block's scales)."""
    out = []
    for name in ACTIONS:
        lat, lon = name.split(":")
        steer = 3.0 * d * ((lat == "right") - (lat == "left"))
        longitudinal = 2.0 * s * (lon == "accelerate") - 4.0 * s * (lon == "brake")
        out.append(2.0 * (lat == "keep") + 1.0 * (lon == "hold") + steer + longitudinal)
    return np.array(out)


@pytest.mark.parametrize("feature_set", ["base", "gaps"])
def test_steer_brake_steers_to_the_ego_brakes_when_it_is_behind_and_its_log_probs_are_exact(feature_set):
    hand = steer_brake(2, feature_set)
    ref = ClosedLoopPolicy.reference(2, feature_set=feature_set)
    # The ego 50 m behind in the lane to the right (s = -1, d = 1), then 25 m ahead in the lane to the left.
    for state, (s, d) in ((_with_ego(-50.0, 4.0, 5.0), (-1.0, 1.0)), (_with_ego(25.0, -4.0, 0.0), (0.5, -1.0))):
        _assert_exact(hand, state, _steer_brake_logits(s, d))
    # Behind and to the right: it brakes and moves right far more often than the reference does.
    p_hand, p_ref = _probs(hand, _with_ego(-50.0, 4.0, 5.0)), _probs(ref, _with_ego(-50.0, 4.0, 5.0))
    assert p_hand[LON["brake"]].sum() > 0.9 and p_ref[LON["brake"]].sum() < 0.25
    assert p_hand[LAT["right"]].sum() > 0.5 > p_ref[LAT["right"]].sum()
    # Ahead and to the left: it speeds up and moves left; with no ego in range it is the reference.
    p_ahead = _probs(hand, _with_ego(25.0, -4.0, 0.0))
    assert p_ahead[LON["accelerate"]].sum() > p_ahead[LON["brake"]].sum()
    assert p_ahead[LAT["left"]].sum() > p_ahead[LAT["right"]].sum()
    alone = JointState(speed=20.0, offset=0.0, lane_id=1, lanes=3, changing=False, ego=None)
    assert _probs(hand, alone) == pytest.approx(_probs(ref, alone))
    # A trajectory's log-probability is the sum of its steps', as for any policy.
    phi = hand.features(_with_ego(-50.0, 4.0, 5.0))
    traj = AttackerTrajectory(
        policy="closed_loop_hand",
        t=[0.0, 1.0],
        features=[phi.tolist(), phi.tolist()],
        feasible=[EVERYTHING.tolist(), NO_RIGHT.tolist()],
        actions=["right:brake", "keep:brake"],
    )
    first = hand.log_probs(phi, EVERYTHING)[ACTIONS.index("right:brake")]
    second = hand.log_probs(phi, NO_RIGHT)[ACTIONS.index("keep:brake")]
    assert hand.log_prob(traj) == pytest.approx(first + second)
    assert second > hand.log_probs(phi, EVERYTHING)[ACTIONS.index("keep:brake")]  # the mask renormalises


# ---------------------------------------------------------------- cut-in (session 28)
def _cut_in_logits(state: JointState) -> np.ndarray:
    """`cut_in`'s default logits written out from its docstring: m(bin, lane) is the "gaps" block's
    margin-bin x lane feature (bins: below, 0-1 s, 1-2 s; lanes: left, same, right), s the ego's s / 50."""
    g = gap_features(state)

    def m(margin_bin: int, lane: int) -> float:
        return float(g[3 + 3 * margin_bin + lane])

    s = state.ego.s / 50.0 if state.ego is not None else 0.0
    out = []
    for name in ACTIONS:
        lat, lon = name.split(":")
        z = 2.0 * (lat == "keep") + 1.0 * (lon == "hold")
        if lat == "left":
            z += 4.0 * (m(1, 0) + m(2, 0)) - 3.0 * m(0, 0)
        if lat == "right":
            z += 4.0 * (m(1, 2) + m(2, 2)) - 3.0 * m(0, 2)
        if lon == "brake":
            z += 4.0 * (m(0, 1) + m(1, 1) + m(2, 1))
        if lon == "accelerate":
            z += 3.0 * (m(0, 0) + m(0, 2)) + 2.0 * s - 4.0 * g[1]
        out.append(z)
    return np.array(out)


# At 20 m/s with the ego at the same speed the safe cut-in gap is 20 m, so a bumper gap of
# -s - 5 m is (-s - 25) / 20 s past it: s = -55 is 1.5 s past, -35 is 0.5 s, -20 is 0.25 s short,
# -80 is 2.75 s past (no bin).
IN_BAND_FAR, IN_BAND_NEAR, BELOW, PAST_BANDS = -55.0, -35.0, -20.0, -80.0


def test_cut_in_margins_of_the_hand_built_states():
    for s, margin in ((IN_BAND_FAR, 1.5), (IN_BAND_NEAR, 0.5), (BELOW, -0.25), (PAST_BANDS, 2.75)):
        assert safe_margin_s(_with_ego(s, 4.0, 0.0)) == pytest.approx(margin)


def test_cut_in_log_probs_are_exact_in_every_kind_of_state():
    hand = cut_in(2)
    assert hand.feature_set == "gaps"
    states = [
        _with_ego(s, d, dv)
        for s in (IN_BAND_FAR, IN_BAND_NEAR, BELOW, PAST_BANDS, 30.0)
        for d in (-4.0, 0.0, 4.0)
        for dv in (0.0, 4.0)
    ]
    for state in states:
        _assert_exact(hand, state, _cut_in_logits(state))


@pytest.mark.parametrize("side", ["left", "right"])
def test_cut_in_enters_the_egos_lane_only_in_the_band_and_brakes_once_the_ego_is_behind_in_its_lane(side):
    hand, ref = cut_in(2), ClosedLoopPolicy.reference(2, feature_set="gaps")
    d = 4.0 if side == "right" else -4.0
    other = "left" if side == "right" else "right"
    p_ref = _probs(ref, _with_ego(IN_BAND_FAR, d, 0.0))
    # The ego behind in the next lane, 0-2 s past the safe gap: it moves into the ego's lane.
    for s in (IN_BAND_FAR, IN_BAND_NEAR):
        p = _probs(hand, _with_ego(s, d, 0.0))
        assert p[LAT[side]].sum() > 0.8 > 0.2 > p_ref[LAT[side]].sum()
        assert p[LAT[other]].sum() < 0.05
    # Below the safe gap it stays out (less often than the reference moves in) and speeds up to open the gap.
    below = _probs(hand, _with_ego(BELOW, d, 0.0))
    assert below[LAT[side]].sum() < 0.25 * p_ref[LAT[side]].sum()
    assert below[LON["accelerate"]].sum() > 0.6 > p_ref[LON["accelerate"]].sum()
    # Past 2 s it waits: its lane choice is the reference's (the ego's pull is 0 there).
    past = _probs(hand, _with_ego(PAST_BANDS, d, 0.0))
    assert past[LAT[side]].sum() == pytest.approx(p_ref[LAT[side]].sum())
    # The ego behind in its own lane (after the cut-in, or following): it brakes, inside the band and below it.
    for s in (IN_BAND_FAR, IN_BAND_NEAR, BELOW):
        assert _probs(hand, _with_ego(s, 0.5, 0.0))[LON["brake"]].sum() > 0.9 > 0.25 > p_ref[LON["brake"]].sum()


def test_cut_in_chases_an_ego_ahead_in_the_next_lane_never_in_its_own_and_alone_is_the_reference():
    hand, ref = cut_in(2), ClosedLoopPolicy.reference(2, feature_set="gaps")
    ahead_next, ahead_same = _probs(hand, _with_ego(30.0, 4.0, 0.0)), _probs(hand, _with_ego(30.0, 0.0, 0.0))
    p_ref = _probs(ref, _with_ego(30.0, 4.0, 0.0))
    assert ahead_next[LON["accelerate"]].sum() > p_ref[LON["accelerate"]].sum()
    assert ahead_same[LON["accelerate"]].sum() < p_ref[LON["accelerate"]].sum()  # a rear-end of the ego is its own fault
    alone = JointState(speed=20.0, offset=0.0, lane_id=1, lanes=3, changing=False, ego=None)
    assert _probs(hand, alone) == pytest.approx(_probs(ref, alone))


def test_hand_policy_by_name_and_its_errors():
    assert np.array_equal(hand_policy("steer-brake", 2, "base").theta, steer_brake(2, "base").theta)
    assert np.array_equal(hand_policy("cut-in", 2, "gaps").theta, cut_in(2).theta)
    with pytest.raises(ValueError, match="'cut-in' reads the 'gaps' features.*use features 'gaps'"):
        hand_policy("cut-in", 2, "base")
    with pytest.raises(ValueError, match="'swerve' is not one of"):
        hand_policy("swerve", 2, "gaps")
    with pytest.raises(ValidationError, match="hand_policy='cut-in' reads the 'gaps' features"):
        ClosedLoopConfig(hand_policy="cut-in")
    assert ClosedLoopConfig(hand_policy="cut-in", features="gaps").hand_policy == "cut-in"
