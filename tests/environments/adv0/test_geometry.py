"""TTC, near misses and fault attribution on hand-built geometry (numbers checked by hand)."""

from __future__ import annotations

import numpy as np
import pytest

from environments.adv0.sim.geometry import (
    attribute_fault,
    fault_label,
    is_near_miss,
    min_ttc,
    time_to_collision,
    ttc_to_others,
)
from environments.adv0.sim.scenario import TTC_HORIZON_S, VehicleState

DT = 0.2


def car(name: str, s: float, d: float = 0.0, vs: float = 25.0, vd: float = 0.0, heading: float = 0.0) -> VehicleState:
    return VehicleState(id=name, x=s, y=d, s=s, d=d, vx=vs, vy=vd, heading=heading, lane="0-1-0")


def track(name: str, s0: float, d0: float, vs: list[float] | float, vd: list[float] | float, n: int) -> list[VehicleState]:
    """n states dt apart, integrating per-step velocities (a constant is repeated)."""
    vs_ = np.broadcast_to(np.asarray(vs, float), (n,))
    vd_ = np.broadcast_to(np.asarray(vd, float), (n,))
    s = s0 + np.concatenate([[0.0], np.cumsum(vs_[1:] * DT)])
    d = d0 + np.concatenate([[0.0], np.cumsum(vd_[1:] * DT)])
    return [car(name, float(s[i]), float(d[i]), float(vs_[i]), float(vd_[i]), float(np.arctan2(vd_[i], vs_[i])))
            for i in range(n)]


def until_contact(ego: list[VehicleState], other: list[VehicleState]) -> tuple[list[VehicleState], list[VehicleState]]:
    """Both histories cut at the first state where the (heading-0) boxes overlap."""
    for k, (e, o) in enumerate(zip(ego, other)):
        if abs(e.s - o.s) < 5.0 and abs(e.d - o.d) < 2.0:
            return ego[: k + 1], other[: k + 1]
    raise AssertionError("the hand-built tracks never touch")


# ---------------------------------------------------------------- TTC
def test_ttc_of_a_slower_leader_is_gap_over_closing_speed() -> None:
    ego = car("ego", 0.0, vs=30.0)
    # centres 25 m apart, 5 m cars: bumper gap 20 m, closing at 10 m/s -> 2.0 s
    assert min_ttc(ego, [car("lead", 25.0, vs=20.0)]) == pytest.approx(2.0)
    # the same leader behind a 200 m gap: 19.5 s, capped at the horizon
    assert min_ttc(ego, [car("far", 205.0, vs=20.0)]) == TTC_HORIZON_S


def test_ttc_ignores_vehicles_outside_the_path_and_receding_ones() -> None:
    ego = car("ego", 0.0, vs=30.0)
    others = [car("next-lane", 10.0, d=4.0, vs=10.0), car("faster", 20.0, vs=35.0), car("behind-slow", -20.0, vs=20.0)]
    assert list(ttc_to_others(ego, others)) == [TTC_HORIZON_S] * 3


def test_ttc_sees_a_vehicle_drifting_into_the_path() -> None:
    ego = car("ego", 0.0)
    # side by side, 4 m apart, drifting in at 1 m/s: widths 2 m -> 2 m of room -> 2.0 s
    assert min_ttc(ego, [car("drifter", 0.0, d=4.0, vd=-1.0)]) == pytest.approx(2.0)
    # already overlapping: 0
    assert min_ttc(ego, [car("touching", 4.0)]) == 0.0


def test_ttc_turns_boxes_by_heading() -> None:
    # a crossing car (heading 90 deg) 10 m ahead, standing in the ego's path: its extent along s is
    # its width (2 m), so the bumper gap is 10 - 2.5 - 1 = 6.5 m at 10 m/s -> 0.65 s
    ego = car("ego", 0.0, vs=10.0)
    crosser = car("crosser", 10.0, vs=0.0, heading=np.pi / 2)
    assert min_ttc(ego, [crosser]) == pytest.approx(0.65)


def test_time_to_collision_is_vectorised_and_capped() -> None:
    ttc = time_to_collision(np.array([25.0, 25.0]), np.zeros(2), np.array([-10.0, 10.0]), np.zeros(2),
                            np.full(2, 5.0), np.full(2, 2.0), horizon=1.5)
    assert list(ttc) == [1.5, 1.5]  # 2.0 s capped at 1.5; receding never collides


def test_near_miss_needs_a_low_ttc_and_no_crash() -> None:
    assert is_near_miss(1.0, crashed=False)
    assert not is_near_miss(1.0, crashed=True)
    assert not is_near_miss(2.0, crashed=False)


# ---------------------------------------------------------------- fault
def test_rear_end_into_a_slower_leader_is_the_follower_fault() -> None:
    n = 16  # 3.0 s: the ego at 30 m/s closes 30 m on a leader at 20 m/s and touches it at the end
    ego, lead = track("ego", 0.0, 0.0, 30.0, 0.0, n), track("bg:1", 35.0, 0.0, 20.0, 0.0, n)
    party, rule = attribute_fault(ego, lead, DT)
    assert party == "ego" and rule.startswith("rear-end: ego behind")
    assert fault_label(party, "bg:1") == "defender"


def test_brake_check_of_an_established_follower_is_the_follower_fault() -> None:
    n = 30  # both at 25 m/s, 10 m apart for 3 s, then the leader brakes at 7 m/s^2
    lead_v = [25.0 if i < 16 else max(0.0, 25.0 - 7.0 * (i - 15) * DT) for i in range(n)]
    ego, lead = until_contact(track("ego", 0.0, 0.0, 25.0, 0.0, n), track("attacker", 15.0, 0.0, lead_v, 0.0, n))
    assert len(ego) > 16
    party, rule = attribute_fault(ego, lead, DT)
    assert party == "ego" and "same path" in rule


def test_cut_in_very_close_then_brake_is_the_cutter_fault() -> None:
    # the attacker, 7 m ahead in the next lane (d = 4), slides over in 1.0 s, then brakes hard;
    # the ego never had a safe gap (25 m at 25 m/s): the cut-in is the attacker's fault
    n = 20
    vd = [0.0, 0.0] + [-4.0] * 5 + [0.0] * 13
    vs = [25.0] * 7 + [25.0 - 7.0 * k * DT for k in range(1, 14)]
    ego, att = until_contact(track("ego", 0.0, 0.0, 25.0, 0.0, n), track("attacker", 12.0, 4.0, vs, vd, n))
    party, rule = attribute_fault(ego, att, DT)
    assert party == "other" and rule.startswith("unsafe cut-in")
    assert fault_label(party, "attacker") == "attacker"


def test_cut_in_with_a_safe_gap_then_brake_is_the_follower_fault() -> None:
    # the attacker enters 30 m ahead at the ego's speed (safe gap 25 m), then brakes at 7 m/s^2
    n = 30
    vd = [0.0] + [-4.0] * 5 + [0.0] * (n - 6)
    vs = [25.0] * 6 + [max(0.0, 25.0 - 7.0 * k * DT) for k in range(1, n - 5)]
    ego, att = until_contact(track("ego", 0.0, 0.0, 25.0, 0.0, n), track("attacker", 35.0, 4.0, vs, vd, n))
    party, rule = attribute_fault(ego, att, DT)
    assert party == "ego" and "after a safe cut-in" in rule


def test_attacker_side_swipe_is_the_attacker_fault() -> None:
    # side by side; the attacker moves in at 2 m/s, the ego keeps its lane: contact at 2 m apart
    n = 10
    ego, att = until_contact(track("ego", 0.0, 0.0, 25.0, 0.0, n), track("attacker", 1.0, 4.0, 25.0, [0.0] + [-2.0] * 9, n))
    party, rule = attribute_fault(ego, att, DT)
    assert party == "other" and rule.startswith("lateral intrusion")


def test_ego_swerving_into_a_neighbour_is_the_ego_fault_even_against_the_attacker() -> None:
    n = 10
    ego, att = until_contact(track("ego", 0.0, 0.0, 25.0, [0.0] + [2.0] * 9, n), track("attacker", -1.0, 4.0, 25.0, 0.0, n))
    party, rule = attribute_fault(ego, att, DT)
    assert party == "ego" and "ego moved into the other" in rule
    assert fault_label(party, "attacker") == "defender"


def test_both_moving_into_each_other_is_shared() -> None:
    n = 10
    ego, other = until_contact(track("ego", 0.0, 0.0, 25.0, [0.0] + [1.0] * 9, n),
                               track("bg:2", 0.0, 4.0, 25.0, [0.0] + [-1.0] * 9, n))
    party, rule = attribute_fault(ego, other, DT)
    assert party == "both" and fault_label(party, "bg:2") == "shared"


def test_a_tailgater_that_rear_ends_the_ego_is_at_fault() -> None:
    n = 20
    ego, att = until_contact(track("ego", 30.0, 0.0, 20.0, 0.0, n), track("attacker", 0.0, 0.0, 29.0, 0.0, n))
    party, rule = attribute_fault(ego, att, DT)
    assert party == "other" and rule.startswith("rear-end: other behind")


def test_crossing_paths_go_by_right_of_way() -> None:
    # the ego drives north across the lane of a car coming from the left; nobody leaves its lane
    n = 5  # they touch at the last state: 2 m apart on both axes, the boxes 3.5 m (half sums)
    ego = [car("ego", 0.0, 6.0 - 2.0 * i, vs=0.0, vd=-10.0, heading=-np.pi / 2) for i in range(n)]
    cross = track("bg:4", -10.0, 0.0, 10.0, 0.0, n)
    lat = ([0.0] * n, [0.0] * n)
    low_ego = attribute_fault(ego, cross, DT, own_lateral_speed=lat, priority=([0.0] * n, [1.0] * n))
    assert low_ego[0] == "ego" and low_ego[1].startswith("right of way: ego (priority 0)")
    low_other = attribute_fault(ego, cross, DT, own_lateral_speed=lat, priority=([3.0] * n, [1.0] * n))
    assert low_other[0] == "other"


def test_a_sharp_swerve_on_parallel_lanes_is_an_intrusion_not_a_crossing() -> None:
    # The case found on highway: an attacker cuts in at 34 deg and touches after moving under
    # LEFT_LANE_M. Its body heading crosses the ego's, but its lane runs parallel: it left its lane
    # into the ego, so it is at fault -- not the ego "by right of way" for being behind.
    dt, heading = 0.05, -np.radians(34.0)
    vd = 25.0 * np.tan(heading)  # -16.9 m/s: 0.84 m a step
    ego = [car("ego", 25.0 * dt * i, 0.0) for i in range(2)]
    att = [car("attacker", 1.0 + 25.0 * dt * i, 3.72 + vd * dt * i, vd=vd, heading=heading) for i in range(2)]
    lat = ([0.0, 0.0], [vd, vd])
    by_body = attribute_fault(ego, att, dt, own_lateral_speed=lat)
    # what the body headings alone said: a crossing, so right of way, and the attacker not (solely) at fault
    assert by_body[0] != "other" and by_body[1].startswith("right of way"), by_body
    party, rule = attribute_fault(ego, att, dt, own_lateral_speed=lat, path_heading=([0.0, 0.0], [0.0, 0.0]))
    assert party == "other" and rule.startswith("lateral intrusion"), rule
    # The same bodies on lanes that really cross (40 deg apart) still go by right of way.
    party, rule = attribute_fault(ego, att, dt, own_lateral_speed=lat,
                                  path_heading=([0.0, 0.0], [np.radians(40.0)] * 2))
    assert rule.startswith("right of way"), rule


def test_bad_histories_are_one_clear_error() -> None:
    with pytest.raises(ValueError, match="equal, non-zero length"):
        attribute_fault([car("ego", 0.0)], [], DT)
    with pytest.raises(ValueError, match="dt=0"):
        attribute_fault([car("ego", 0.0)], [car("x", 5.0)], 0.0)


# ---------------------------------------------------------------- rule v2: a wreck shoved into the path
# Highway seed 900004, slot 0, the "cut-in" hand policy vs the default IDM ego (session 28), frames
# 4.0-6.6 s: the attacker's lane change hit bg:1 in the next lane at 4.4 s; highway-env's collision
# impulse then pushed bg:1 sideways into the ego's lane (d 4.00 -> 1.93) while its heading stayed 0
# and it braked as a wreck (19.8 -> 1.7 m/s); the braking ego hit it at 6.6 s.
WRECK_EGO_S = [250.87, 255.68, 260.46, 265.22, 269.95, 274.66, 279.35, 283.79, 288.00, 291.96, 295.69, 299.17,
               302.42, 305.42]
WRECK_EGO_V = [24.04, 23.92, 23.80, 23.67, 23.55, 23.42, 22.22, 21.02, 19.82, 18.62, 17.42, 16.22, 15.02, 13.82]
WRECK_S = [284.49, 288.44, 292.34, 296.21, 299.30, 301.77, 303.75, 305.33, 306.60, 307.61, 308.42, 309.06, 309.58,
           310.00]
WRECK_D = [4.00, 4.00, 3.79, 3.43, 3.10, 2.83, 2.61, 2.44, 2.30, 2.19, 2.11, 2.03, 1.98, 1.93]
WRECK_V = [19.77, 19.77, 19.77, 15.81, 12.65, 10.12, 8.10, 6.48, 5.18, 4.15, 3.32, 2.65, 2.12, 1.70]


def wreck_case() -> tuple[list[VehicleState], list[VehicleState]]:
    ego = [car("ego", s, -0.01 if k == len(WRECK_EGO_S) - 1 else 0.0, v) for k, (s, v) in enumerate(zip(WRECK_EGO_S, WRECK_EGO_V))]
    wreck = [car("bg:1", s, d, v) for s, d, v in zip(WRECK_S, WRECK_D, WRECK_V)]  # vd = 0, heading 0: not steered
    return ego, wreck


def test_v1_reads_a_wreck_shoved_into_the_ego_lane_as_unclear_shared_fault() -> None:
    party, rule = attribute_fault(*wreck_case(), DT, rule="v1")
    assert party == "both" and rule.startswith("unclear lateral entry")


def test_v2_reads_the_shoved_wreck_as_entering_ahead_of_the_ego_at_an_unsafe_gap() -> None:
    party, rule = attribute_fault(*wreck_case(), DT, rule="v2")
    assert party == "other", rule
    assert rule.startswith("unsafe cut-in: other entered 2.2 m ahead") and "other 0.46 m" in rule
    assert fault_label(party, "bg:1") == "background"


def test_v2_leaves_a_steered_entry_and_a_still_pair_as_v1_does() -> None:
    ego, other = until_contact(track("ego", 0.0, 0.0, 25.0, 0.0, 25), track("x", 20.0, 4.0, 20.0, -1.0, 25))
    assert attribute_fault(ego, other, DT, rule="v2") == attribute_fault(ego, other, DT, rule="v1")
    # both shoved the same small way: no dominant displacement, still unclear under v2
    ego = [car("ego", 100.0 + 4.0 * k, 0.05 * k, 20.0) for k in range(8)]
    other = [car("x", 108.0 + 4.0 * k, 2.3 - 0.05 * k, 20.0) for k in range(8)]
    party, rule = attribute_fault(ego, other, DT, rule="v2")
    assert party == "both" and rule.startswith("unclear lateral entry")


def test_an_unknown_fault_rule_is_one_clear_error() -> None:
    with pytest.raises(ValueError, match="rule='v9' is not one of"):
        attribute_fault(*wreck_case(), DT, rule="v9")  # type: ignore[arg-type]
