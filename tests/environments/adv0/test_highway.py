"""The highway-env world on real highway-env: determinism, bad input, actions, fault-gated results,
the held-out families and the filmstrip. Short episodes (crashes end them) keep the module fast."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from highway_env.vehicle.behavior import IDMVehicle

from environments.adv0.sim.highway import FAMILIES, run_episode, start_episode
from environments.adv0.sim.scenario import IdmParams, ScenarioParams, defender_return
from environments.adv0.sim.vehicles import AggressiveIDM

# Found by hand: on seed 0 this attacker cuts in 5 m ahead of the ego within ~3 s (a side swipe).
CUT_IN = ScenarioParams(slot=0, manoeuvre="cut_in", trigger_s=1.0, intensity=1.0, hold_s=1.0, gap_m=5.0)


def test_unknown_family_manoeuvre_or_factor_is_one_clear_error() -> None:
    with pytest.raises(ValueError, match="unknown scenario family 'motorway'; allowed: highway, highway-dense"):
        start_episode("motorway", 0, None)
    with pytest.raises(ValueError, match="manoeuvre='drift' is outside its box; allowed: cut_in"):
        start_episode("highway", 0, {**CUT_IN.model_dump(), "manoeuvre": "drift"})
    with pytest.raises(ValueError, match="gap_m=7.0 is outside its box"):
        start_episode("highway", 0, {**CUT_IN.model_dump(), "gap_m": 7.0})
    with pytest.raises(ValueError, match="seed=-1"):
        start_episode("highway", -1, None)
    with pytest.raises(ValueError, match="planner"):
        start_episode("highway", 0, None, planner={"time_wanted": 1.0})  # type: ignore[arg-type]


def test_an_episode_is_a_pure_function_of_family_seed_z_and_actions() -> None:
    actions = ["FASTER", "IDLE", "LANE_LEFT", "SLOWER"] * 5
    first = run_episode("highway", 0, CUT_IN, actions=actions)
    run_episode("highway", 1, None, planner=IdmParams())  # another episode in between reuses the env
    again = run_episode("highway", 0, CUT_IN, actions=actions)
    assert first.model_dump() == again.model_dump()
    other_seed = run_episode("highway", 1, CUT_IN, actions=actions)
    assert other_seed.model_dump() != first.model_dump()


def test_unknown_and_unavailable_actions_count_as_invalid_and_play_idle() -> None:
    weird = start_episode("highway", 2, None)
    plain = start_episode("highway", 2, None)
    try:
        lane = weird.view().ego_lane
        blocked = "LANE_LEFT" if lane == 0 else "LANE_RIGHT" if lane == weird.view().lanes - 1 else None
        moves = ["FLY", None, " idle "] + ([blocked] if blocked else [])
        for m in moves:
            weird.step(m)
            plain.step("IDLE")
        assert weird.invalid_actions == len(moves) - 1  # " idle " is IDLE
        assert weird.actions == ["IDLE"] * len(moves)
        assert weird.ego.position.tolist() == plain.ego.position.tolist()
    finally:
        weird.close()
        plain.close()


def test_view_hides_the_attacker_and_offers_only_legal_actions() -> None:
    ep = start_episode("highway", 0, CUT_IN)
    try:
        view = ep.view()
        assert np.asarray(view.features).shape == (5, 5)  # highway-env's Kinematics observation
        assert 0 < len(view.neighbours) <= 6 and all(n.id.startswith("bg:") for n in view.neighbours)
        assert "IDLE" in view.available
        assert ("LANE_LEFT" in view.available) == (view.ego_lane > 0)
        assert "Available actions:" in view.text()
        dists = [np.hypot(n.s, n.d) for n in view.neighbours]
        assert dists == sorted(dists)  # nearest first
    finally:
        ep.close()


def test_attacker_at_fault_crash_is_recorded_but_not_a_defender_failure() -> None:
    r = run_episode("highway", 0, CUT_IN, actions=["IDLE"] * 20)
    assert r.attack_fired and r.crashed and r.collision is not None
    assert r.collision.other == "attacker" and r.collision.fault == "attacker"
    assert r.collision.rule.startswith(("lateral intrusion: other", "unsafe cut-in: other"))
    ids = {s.id for s in r.collision.geometry}
    assert ids == {"ego", "attacker"} and len(r.collision.geometry) % 2 == 0
    assert not r.defender_failure
    assert r.reward == pytest.approx(defender_return(False, r.mean_speed, r.distance_m, r.duration_s))
    assert r.min_ttc == 0.0 and not r.near_miss and len(r.ttc) == r.steps
    assert len(r.attacker_kinematics) == r.steps


def test_rear_ending_a_slower_car_is_the_defender_failure() -> None:
    r = run_episode("highway", 0, None, actions=["FASTER"] * 20)
    assert r.crashed and r.collision is not None and r.collision.fault == "defender"
    assert r.collision.rule.startswith("rear-end: ego behind")
    assert r.defender_failure and r.reward < 0


def test_planner_drives_itself_and_keeps_the_ttc_log() -> None:
    r = run_episode("highway", 1, None, planner=IdmParams(time_wanted=1.5))
    assert r.defender == "idm" and r.actions == [] and r.invalid_actions == 0
    assert not r.crashed and r.steps == 20 and r.duration_s == pytest.approx(20.0)
    assert r.min_ttc <= min(r.ttc) and r.near_miss == (r.min_ttc < 1.5)
    assert 15.0 < r.mean_speed < 31.0 and r.distance_m == pytest.approx(r.mean_speed * 20.0, rel=0.05)


def _three_steps(family: str, z: ScenarioParams) -> tuple[dict, int]:
    ep = start_episode(family, 3, z, planner=IdmParams())
    try:
        for _ in range(3):
            if not ep.done:
                ep.step(None)
        aggressive = sum(isinstance(v, AggressiveIDM) for v in ep.env.road.vehicles)
        return ep.result().model_dump(), aggressive
    finally:
        ep.close()


@pytest.mark.parametrize("family", ["highway-dense", "aggressive", "merge", "roundabout", "intersection"])
def test_held_out_families_run_attacked_and_repeat_exactly(family: str) -> None:
    z = ScenarioParams(slot=1, manoeuvre="yield_violation", trigger_s=1.0, intensity=0.75, hold_s=1.0, gap_m=10.0)
    r, aggressive = _three_steps(family, z)
    assert r["family"] == family and 1 <= r["steps"] <= 3 and len(r["ttc"]) == r["steps"]
    assert (aggressive >= 10) == (family == "aggressive")
    assert _three_steps(family, z)[0] == r  # intersection spawns cars as it goes: from its seeded generator
    # IntersectionEnv rewrites its background class's attributes: ours, never IDMVehicle's
    assert (IDMVehicle.DISTANCE_WANTED, IDMVehicle.COMFORT_ACC_MAX) == (10.0, 3.0)


def test_families_table_matches_the_design() -> None:
    assert FAMILIES["highway"].config["lanes_count"] == 3 and FAMILIES["highway"].config["vehicles_count"] == 12
    dense = FAMILIES["highway-dense"].config
    assert dense["lanes_count"] == 4 and dense["vehicles_density"] == 2.0


def test_filmstrip_of_a_failure(tmp_path: Path) -> None:
    ep = start_episode("highway", 0, CUT_IN, frames=True)
    try:
        while not ep.done:
            ep.step("IDLE")
        paths = ep.filmstrip(tmp_path / "fail", root=tmp_path)
    finally:
        ep.close()
    assert paths[-2:] == ["fail/highway-0-strip.png", "fail/highway-0.gif"] and len(paths) >= 3
    for p in paths:
        data = (tmp_path / p).read_bytes()
        assert data[:4] in (b"\x89PNG", b"GIF8") and len(data) > 1000  # drawn, not blank


def test_an_attacker_on_a_segment_with_fewer_lanes_keeps_to_its_lane():
    """Regression: in the roundabout a script aimed at a lane index the attacker's next segment does
    not have; highway-env's own lane lookup then raised IndexError mid-episode."""
    from environments.adv0.sim.highway import start_episode
    from environments.adv0.sim.scenario import ScenarioParams

    z = ScenarioParams(slot=1, manoeuvre="brake_check", trigger_s=3.0, intensity=0.5, hold_s=0.5, gap_m=15.0)
    for action in ("LANE_LEFT", "LANE_RIGHT"):
        ep = start_episode("roundabout", 9500000, z)
        try:
            while not ep.done:
                ep.step(action)
            assert ep.result().steps > 0
        finally:
            ep.close()
