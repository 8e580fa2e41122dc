"""The highway-env world: `start_episode(family, seed, attack, planner=None, frames=False)`.

One episode = one highway-env environment (headless, no gym wrappers), reset with `seed`. The
attacker takes over the background vehicle ranked `attack.slot` by distance to the ego at t0 and
plays its manoeuvre (`AttackerVehicle`); the defender either names a meta-action every policy step
or is an IDM/MOBIL ego (`planner=IdmParams`).
Every simulation frame (not only every policy step) is recorded: TTC to every vehicle, the last
`HISTORY_S` seconds of positions for fault attribution (`geometry.py`), the attacker's kinematics
and, with `frames=True`, the rendered images for a failure's filmstrip (`render.py`).

An episode is a pure function of (family, seed, z, actions): all randomness is highway-env's
`np_random`, seeded by `reset(seed=...)`; nothing here draws random numbers.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

# Headless rendering: SDL's "offscreen" driver. Not "dummy": highway-env 1.12.1 disables its viewer
# under "dummy" and returns black frames.
if os.environ.get("SDL_VIDEODRIVER", "dummy") == "dummy":
    os.environ["SDL_VIDEODRIVER"] = "offscreen"
os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")

from highway_env import utils  # noqa: E402
from highway_env.envs.common.abstract import AbstractEnv  # noqa: E402
from highway_env.envs.highway_env import HighwayEnvFast  # noqa: E402
from highway_env.envs.intersection_env import IntersectionEnv  # noqa: E402
from highway_env.envs.merge_env import MergeEnv  # noqa: E402
from highway_env.envs.roundabout_env import RoundaboutEnv  # noqa: E402
from highway_env.vehicle.behavior import IDMVehicle  # noqa: E402
from highway_env.vehicle.kinematics import Vehicle  # noqa: E402

from environments.adv0 import geometry  # noqa: E402
from environments.adv0.scenario import (  # noqa: E402
    MAX_LAT_ACCEL,
    MAX_LONG_ACCEL,
    META_ACTIONS,
    TTC_HORIZON_S,
    Collision,
    DriverView,
    EpisodeResult,
    Family,
    IdmParams,
    ScenarioParams,
    VehicleState,
    defender_return,
)


# ---------------------------------------------------------------- background vehicle types
class AggressiveIDM(IDMVehicle):
    """Held-out background type: short headway, hard braking, eager lane changes, faster targets.
    (highway-env's own AggressiveVehicle is a LinearVehicle that logs regression data every step.)"""

    TIME_WANTED = 0.8
    DISTANCE_WANTED = 2.0 + IDMVehicle.LENGTH
    COMFORT_ACC_MAX = 4.5
    COMFORT_ACC_MIN = -6.0
    LANE_CHANGE_MIN_ACC_GAIN = 0.05
    LANE_CHANGE_MAX_BRAKING_IMPOSED = 4.0
    LANE_CHANGE_DELAY = 0.5

    def randomize_behavior(self) -> None:
        super().randomize_behavior()
        self.target_speed = float(self.target_speed + self.road.np_random.uniform(3.0, 7.0))


class IntersectionIDM(IDMVehicle):
    """IntersectionEnv overwrites class attributes of its background type; this subclass keeps
    that change away from IDMVehicle (and so from every other family in the process)."""


class PlannerEgo(IDMVehicle):
    """The IDM/MOBIL defender; its parameters are instance attributes (IdmParams)."""

    def configure(self, p: IdmParams) -> None:
        self.TIME_WANTED = p.time_wanted
        self.DISTANCE_WANTED = p.distance_wanted + self.LENGTH  # highway-env's jam distance includes the length
        self.COMFORT_ACC_MAX = p.comfort_acc_max
        self.COMFORT_ACC_MIN = p.comfort_acc_min
        self.POLITENESS = p.politeness
        self.LANE_CHANGE_MIN_ACC_GAIN = p.lane_change_min_gain
        self.target_speed = p.target_speed
        self.color = (50, 200, 0)  # drawn as the ego


# ---------------------------------------------------------------- the attacker
# Where each manoeuvre wants to be relative to the ego when it fires: the ego's lane ("same") or a
# neighbouring one ("adjacent"), and `gap_m` (bumper to bumper) "ahead" of or "behind" the ego.
LAYOUT: dict[str, tuple[str, str]] = {
    "cut_in": ("adjacent", "ahead"), "cut_in_brake": ("adjacent", "ahead"), "brake_check": ("same", "ahead"),
    "tailgate": ("same", "behind"), "swerve_return": ("adjacent", "ahead"), "merge_squeeze": ("adjacent", "behind"),
    "yield_violation": ("adjacent", "ahead"),
}
APPROACH_ACC = 3.0  # m/s^2: getting into position is ordinary driving
K_GAP, K_SPEED = 0.3, 0.8  # the approach's PD on the gap error and the relative speed
TAU_HEADING = 0.2  # s: the attacker's heading loop during scripted lateral moves (tuned at 5 Hz:
TAU_LATERAL = 0.6  # s: its lateral-offset feedback          peak within 4% of the plan, 3 cm overshoot)
LATERAL_PLAN = 0.9  # the planned peak is 90% of intensity * MAX_LAT_ACCEL: the rest is tracking headroom
FEASIBLE_SLACK = 1.05  # a command beyond 105% of a hard limit makes the draw infeasible


class AttackerVehicle(IDMVehicle):
    """A background vehicle taken over by the attacker: IDM/MOBIL until `trigger_s`, then it gets
    into position (`LAYOUT`) and fires when the gap to the ego is `gap_m`, plays its manoeuvre's
    script with accelerations scaled by `intensity` (within MAX_LONG_ACCEL / MAX_LAT_ACCEL; a
    command beyond them is clipped and flags the draw infeasible), then drives as IDM again."""

    @classmethod
    def take_over(cls, victim: IDMVehicle, ego: Any, z: ScenarioParams, dt: float) -> AttackerVehicle:
        att = cls.create_from(victim)
        for name in ("TIME_WANTED", "DISTANCE_WANTED", "COMFORT_ACC_MAX", "COMFORT_ACC_MIN", "POLITENESS", "DELTA",
                     "LANE_CHANGE_MIN_ACC_GAIN", "LANE_CHANGE_MAX_BRAKING_IMPOSED", "LANE_CHANGE_DELAY"):
            setattr(att, name, getattr(victim, name))  # the same driver as before the trigger
        att.ego, att.z, att.dt = ego, z, dt
        att.clock, att.phase, att.fired, att.feasible = 0.0, "follow", False, True
        att.t_fire, att.lane_from, att.shift, att.free = 0.0, None, 0.0, False
        att.check_collisions = True  # highway-fast only checks the ego: the attacker can hit others too
        att.color = (230, 60, 200)
        return att

    def step(self, dt: float) -> None:
        self.clock += dt
        super().step(dt)

    def act(self, action: Any = None) -> None:
        if self.crashed:
            return
        if self.phase == "follow" and self.clock >= self.z.trigger_s - 1e-9:
            self.phase = "approach"
        if self.phase == "approach":
            rel = self._relation()
            if self._ready(rel):
                self._fire(rel)
            else:
                self._approach(rel)
                return
        if self.phase == "script" and self._script():
            return
        self._valid_target()
        super().act()  # follow, release: IDM/MOBIL

    def _valid_target(self) -> None:
        """A script may have aimed at a lane index that the road segment the attacker is now on does
        not have (roundabout and merge segments differ in lane count): keep to the current lane
        then, instead of handing highway-env an index it cannot look up."""
        _from, _to, idx = self.target_lane_index
        lanes = self.road.network.graph.get(_from, {}).get(_to, [])
        if idx >= len(lanes):
            self.target_lane_index = self.lane_index

    # -- where the attacker stands relative to the ego
    def _relation(self) -> dict[str, Any]:
        ego, lane = self.ego, self.ego.lane
        s_e = lane.local_coordinates(ego.position)[0]
        s_a = lane.local_coordinates(self.position)[0]
        half = (self.LENGTH + ego.LENGTH) / 2
        same_road = self.lane_index[:2] == ego.lane_index[:2]
        lanes = len(self.road.network.graph[ego.lane_index[0]][ego.lane_index[1]])
        return {"ahead": s_a - s_e - half, "behind": s_e - s_a - half, "lanes": lanes,
                "delta": self.lane_index[2] - ego.lane_index[2] if same_road else None,
                "distance": float(np.linalg.norm(self.position - ego.position)) - half}

    def _free_mode(self, rel: dict[str, Any]) -> bool:
        """No lane layout is reachable (another road, a one-lane road, a priority conflict): fire on
        distance and play only the longitudinal part."""
        need_lane, _ = LAYOUT[self.z.manoeuvre]
        return rel["delta"] is None or (need_lane == "adjacent" and rel["lanes"] < 2)

    def _ready(self, rel: dict[str, Any]) -> bool:
        tol = max(1.5, 0.1 * self.z.gap_m)
        if self._free_mode(rel):
            return rel["distance"] <= self.z.gap_m + tol
        need_lane, need_pos = LAYOUT[self.z.manoeuvre]
        lane_ok = rel["delta"] == 0 if need_lane == "same" else abs(rel["delta"]) == 1
        settled = abs(self.lane.local_coordinates(self.position)[1]) < 0.5
        if need_lane == "same" and need_pos == "ahead":  # the follower sets this gap: fire once it is close enough
            return lane_ok and settled and 0.0 <= rel["ahead"] <= self.z.gap_m + tol
        return lane_ok and settled and abs(rel[need_pos] - self.z.gap_m) <= tol

    def _approach(self, rel: dict[str, Any]) -> None:
        """Get into the manoeuvre's layout with ordinary accelerations (not part of the attack)."""
        self.follow_road()
        if self._free_mode(rel):
            limit = self.lane.speed_limit or self.target_speed
            accel = (limit - self.speed) / self.TAU_ACC  # ignores yielding: the priority rules do not bind it
        else:
            accel = self._approach_accel(rel)
            self._approach_lane(rel)
        front, _ = self.road.neighbour_vehicles(self, self.lane_index)
        need_lane, need_pos = LAYOUT[self.z.manoeuvre]
        if front is not None and not (front is self.ego and need_pos == "behind" and need_lane == "same"):
            accel = min(accel, self._follow_limit(front))
        accel = float(np.clip(accel, -APPROACH_ACC, APPROACH_ACC))
        if self.speed > 0.95 * self.MAX_SPEED:
            accel = min(accel, 0.0)
        steer = float(np.clip(self.steering_control(self.target_lane_index), -self.MAX_STEERING_ANGLE, self.MAX_STEERING_ANGLE))
        Vehicle.act(self, {"steering": steer, "acceleration": accel})  # store the command (as IDMVehicle does)

    def _approach_accel(self, rel: dict[str, Any]) -> float:
        """A PD on the gap to the firing position; a brake-checker already ahead in the ego's lane
        just drives on (the follower closes that gap); never crawling far below the ego's speed."""
        need_lane, need_pos = LAYOUT[self.z.manoeuvre]
        dv = self.speed - self.ego.speed
        if need_lane == "same" and need_pos == "ahead":
            if rel["delta"] == 0:
                return float(self.acceleration(self, None))  # IDM's free-road term; the follow limit applies after
            target = max(self.z.gap_m, self._safe_gap("ahead"))
            accel = -K_GAP * (rel["ahead"] - target) - K_SPEED * dv
        elif need_pos == "ahead":
            accel = -K_GAP * (rel["ahead"] - self.z.gap_m) - K_SPEED * dv
        else:
            accel = K_GAP * (rel["behind"] - self.z.gap_m) - K_SPEED * dv
        if self.speed < 0.6 * self.ego.speed:
            accel = max(accel, 0.5)  # a waiting attacker does not stop on the highway
        return accel

    def _approach_lane(self, rel: dict[str, Any]) -> None:
        need_lane, need_pos = LAYOUT[self.z.manoeuvre]
        delta, lanes = rel["delta"], rel["lanes"]
        ego_id = self.ego.lane_index[2]
        _from, _to, my_id = self.lane_index
        if self.lane_index != self.target_lane_index:
            return  # a lane change is under way
        wrong_side = rel[need_pos] < -1.0  # the attacker has to pass the ego (or let it pass) first
        if delta == 0 and (need_lane == "adjacent" or wrong_side):
            goal = ego_id + 1 if ego_id + 1 < lanes else ego_id - 1
        elif abs(delta) >= 2:
            goal = my_id - int(np.sign(delta))
        elif need_lane == "same" and rel[need_pos] >= max(self.z.gap_m - max(1.5, 0.1 * self.z.gap_m), self._safe_gap(need_pos)):
            goal = ego_id  # enter the ego's lane only beyond the firing gap and a safe gap: no unscripted cut-in
        else:
            return
        if 0 <= goal < lanes and self._lane_free((_from, _to, goal)):
            self.target_lane_index = (_from, _to, goal)

    def _lane_free(self, lane_index: Any) -> bool:
        """MOBIL's safety test against the background traffic of the target lane (the ego is the
        attack's business): nobody there would have to brake harder than APPROACH_ACC."""
        front, rear = self.road.neighbour_vehicles(self, lane_index)
        if front is not None and front is not self.ego and self.acceleration(self, front) < -APPROACH_ACC:
            return False
        return rear is None or rear is self.ego or self.acceleration(rear, self) >= -APPROACH_ACC

    def _safe_gap(self, need_pos: str) -> float:
        """The gap at which the attacker may enter the ego's lane while getting into position: the
        follower's safe headway (the closing-speed term of the fault rule is left to the fault rule:
        a crash soon after a fast-closing entry is charged to the attacker as an unsafe cut-in)."""
        v_f = self.ego.speed if need_pos == "ahead" else self.speed
        return v_f * geometry.SAFE_HEADWAY_S + 1.0

    def _follow_limit(self, front: Any) -> float:
        """IDM's interaction term with the vehicle ahead (the free-road term left out)."""
        return float(self.acceleration(self, front) - self.acceleration(self, None) + self.COMFORT_ACC_MAX)

    # -- the manoeuvre
    def _fire(self, rel: dict[str, Any]) -> None:
        self.phase, self.fired, self.t_fire = "script", True, self.clock
        self.enable_lane_change = False
        self.free = self._free_mode(rel)
        self.lane_from = self.lane_index
        self.shift = 0.0
        if not self.free and abs(rel["delta"]) == 1:
            target = self.road.network.get_lane((self.lane_index[0], self.lane_index[1], self.ego.lane_index[2]))
            s_a = self.lane.local_coordinates(self.position)[0]
            self.shift = float(self.lane.local_coordinates(target.position(s_a, 0.0))[1])  # towards the ego's lane centre
        self._stage = "main"
        self._stage_t = self.clock

    def _lateral_duration(self, shift: float) -> float:
        """How long a cosine lateral move of `shift` takes. A lane change: its peak acceleration is
        LATERAL_PLAN * intensity * MAX_LAT_ACCEL (always feasible). A swerve: each leg (out, back)
        takes hold_s whatever the acceleration; one beyond MAX_LAT_ACCEL is stretched to the limit
        and flags the draw infeasible."""
        if self.z.manoeuvre == "swerve_return":
            needed = abs(shift) * np.pi**2 / (2 * self.z.hold_s**2)
            if needed <= MAX_LAT_ACCEL:
                return float(self.z.hold_s)
            self.feasible = False
            a = LATERAL_PLAN * MAX_LAT_ACCEL
        else:
            a = max(1e-3, LATERAL_PLAN * self.z.intensity * MAX_LAT_ACCEL)
        return float(np.pi * np.sqrt(abs(shift) / (2 * a)))

    def _script(self) -> bool:
        """One frame of the manoeuvre; False once it is over."""
        m, z = self.z.manoeuvre, self.z
        tau = self.clock - self._stage_t
        a_max = z.intensity * MAX_LONG_ACCEL
        lateral = self.shift != 0.0 and not self.free
        stages: dict[str, list[tuple[str, float, float, float]]] = {
            # (stage, lateral goal as a fraction of the shift, acceleration, duration or 0 = until the move ends)
            "cut_in": [("move", 1.0, 0.0, 0.0), ("hold", 1.0, 0.0, z.hold_s)],
            "cut_in_brake": [("move", 1.0, 0.0, 0.0), ("brake", 1.0, -a_max, z.hold_s)],
            "brake_check": [("brake", 0.0, -a_max, z.hold_s)],
            "tailgate": [("close", 0.0, a_max, z.hold_s)],
            "swerve_return": [("move", 0.3 + 0.4 * z.intensity, 0.0, 0.0), ("back", 0.0, 0.0, 0.0)],
            "merge_squeeze": [("pass", 0.0, a_max, z.hold_s), ("move", 1.0, 0.0, 0.0)],
            "yield_violation": ([("move", 1.0, -0.5 * a_max, 0.0), ("hold", 1.0, 0.0, z.hold_s)] if lateral
                                else [("push", 0.0, 0.5 * a_max, z.hold_s)]),
        }
        plan = [st for st in stages[m] if lateral or st[0] not in ("move", "back")]
        if not plan:  # a lateral-only manoeuvre with nowhere to move: it is over at once
            self._finish()
            return False
        names = [st[0] for st in plan]
        if self._stage == "main":
            self._stage, self._stage_t, tau = names[0], self.clock, 0.0
            self._d_start = self._offset()
        stage = plan[names.index(self._stage)]
        name, goal, accel, duration = stage
        d_goal = goal * self.shift
        if name == "close":  # tailgate at about 1 m, accelerating at most a_max (braking as hard as it must)
            gap = self._relation()["behind"]
            accel = min(a_max, 3 * K_GAP * (gap - 1.0) - K_SPEED * (self.speed - self.ego.speed))
        if name == "pass" and self._relation()["ahead"] >= 0.5:
            duration = 0.0  # past the ego's front: squeeze in now
        d_ref, vd_ref, ad_ref, move_done = self._profile(tau, d_goal)
        finished = move_done if name in ("move", "back") else tau >= duration - 1e-9
        if finished:
            nxt = names.index(name) + 1
            if nxt >= len(plan):
                self._finish()
                return False
            self._stage, self._stage_t = names[nxt], self.clock
            self._d_start = self._offset()
            return self._script()
        if lateral:
            self._command(accel, self._steer_lateral(d_ref, vd_ref, ad_ref))
        else:  # nothing lateral to play: keep following the road (curves and turns included)
            self.follow_road()
            self._command(accel, self.steering_control(self.target_lane_index))
        return True

    def _offset(self) -> float:
        lane = self.road.network.get_lane(self.lane_from)
        return float(lane.local_coordinates(self.position)[1])

    def _profile(self, tau: float, d_goal: float) -> tuple[float, float, float, bool]:
        """The lateral reference (offset, speed, acceleration, done) at `tau` into the stage: a
        cosine from where the stage began."""
        start = getattr(self, "_d_start", 0.0)
        span = d_goal - start
        if abs(span) < 0.05:
            return d_goal, 0.0, 0.0, True
        T = self._lateral_duration(span)
        if tau >= T:
            return d_goal, 0.0, 0.0, True
        x = np.pi * tau / T
        w = np.pi / T
        return start + span * (1 - np.cos(x)) / 2, span * w / 2 * np.sin(x), span * w * w / 2 * np.cos(x), False

    def _steer_lateral(self, d_ref: float, vd_ref: float, ad_ref: float) -> float:
        """The steering that tracks the lateral reference (offset feedback -> heading -> heading
        rate, plus the profile's own lateral acceleration fed forward), within MAX_LAT_ACCEL."""
        lane = self.road.network.get_lane(self.lane_from)
        s, d = lane.local_coordinates(self.position)
        v = max(self.speed, 1.0)
        vd_cmd = vd_ref + (d_ref - d) / TAU_LATERAL
        heading_ref = lane.heading_at(s) + np.arcsin(np.clip(vd_cmd / v, -1, 1))
        a_lat = v * float(utils.wrap_to_pi(heading_ref - self.heading)) / TAU_HEADING + ad_ref
        a_lat = float(np.clip(a_lat, -MAX_LAT_ACCEL, MAX_LAT_ACCEL))  # feedback beyond the limit: clipped
        sin_beta = np.clip(a_lat / v * (self.LENGTH / 2) / v, -1, 1)
        return float(np.arctan(2 * np.tan(np.arcsin(sin_beta))))

    def _command(self, accel: float, steering: float) -> None:
        """Apply the script's acceleration (clipped to MAX_LONG_ACCEL: asking for more makes the draw
        infeasible) with `steering`."""
        if abs(accel) > FEASIBLE_SLACK * MAX_LONG_ACCEL:
            self.feasible = False  # the script asks for more than the brakes (or engine) can give
        accel = float(np.clip(accel, -MAX_LONG_ACCEL, MAX_LONG_ACCEL))
        accel = max(accel, -self.speed / self.dt)  # brakes to a stop, never reverses
        if self.speed > 0.95 * self.MAX_SPEED:
            accel = min(accel, 0.0)
        steering = float(np.clip(steering, -self.MAX_STEERING_ANGLE, self.MAX_STEERING_ANGLE))
        Vehicle.act(self, {"steering": steering, "acceleration": accel})

    def _finish(self) -> None:
        """Back to ordinary IDM/MOBIL driving in the lane the manoeuvre ended in."""
        self.phase = "release"
        self.enable_lane_change = True
        d = self._offset()
        moved_over = abs(self.shift) > 0 and abs(d - self.shift) < abs(d)
        _from, _to, _ = self.lane_index
        self.target_lane_index = (_from, _to, self.ego.lane_index[2] if moved_over else self.lane_from[2])


# ---------------------------------------------------------------- families
@dataclass(frozen=True)
class FamilySpec:
    env_class: type[AbstractEnv]
    config: dict[str, Any]
    max_duration_s: float  # our own cap (merge has none)
    speed_range: tuple[float, float]  # the ego's target speeds: the defender's progress scale


# Every family: a 5 Hz simulation, a decision a second, and highway-env's default Kinematics
# observation (5 vehicles x presence, x, y, vx, vy, relative to the ego), so one DQN reads them all.
_COMMON = {"simulation_frequency": 5, "policy_frequency": 1, "observation": {"type": "Kinematics"}}
_HIGHWAY = {**_COMMON, "lanes_count": 3, "vehicles_count": 12, "duration": 20}
_IDM = "highway_env.vehicle.behavior.IDMVehicle"
FAMILIES: dict[str, FamilySpec] = {
    "highway": FamilySpec(HighwayEnvFast, {**_HIGHWAY, "other_vehicles_type": _IDM}, 20.0, (20.0, 30.0)),
    "highway-dense": FamilySpec(HighwayEnvFast, {**_HIGHWAY, "lanes_count": 4, "vehicles_count": 20,
                                                 "vehicles_density": 2.0, "other_vehicles_type": _IDM}, 20.0, (20.0, 30.0)),
    "aggressive": FamilySpec(HighwayEnvFast, {**_HIGHWAY, "other_vehicles_type": f"{__name__}.AggressiveIDM"}, 20.0, (20.0, 30.0)),
    "merge": FamilySpec(MergeEnv, {**_COMMON, "other_vehicles_type": _IDM}, 20.0, (20.0, 30.0)),
    "roundabout": FamilySpec(RoundaboutEnv, {**_COMMON, "other_vehicles_type": _IDM}, 11.0, (0.0, 16.0)),
    "intersection": FamilySpec(IntersectionEnv, {**_COMMON, "other_vehicles_type": f"{__name__}.IntersectionIDM"}, 13.0, (0.0, 9.0)),
}
WORLD_FAMILIES = tuple(FAMILIES)
RING_NODES = frozenset({"se", "ex", "ee", "nx", "ne", "wx", "we", "sx"})  # RoundaboutEnv's circle
VIEW_NEIGHBOURS = 6
VIEW_RANGE_M = 100.0


def _check_family(family: str) -> FamilySpec:
    if family not in FAMILIES:
        raise ValueError(f"unknown scenario family {family!r}; allowed: {', '.join(WORLD_FAMILIES)} "
                         f"(the toy world is environments/adv0/toy.py)")
    return FAMILIES[family]


def _check_attack(attack: ScenarioParams | dict[str, Any] | None) -> ScenarioParams | None:
    if attack is None:
        return None
    values = attack.model_dump() if isinstance(attack, ScenarioParams) else dict(attack)
    return ScenarioParams.check(values)


class _RecordedMixin:
    """highway-env calls `_automatic_rendering` after every simulation frame but the last of a
    policy step: the hook that lets the episode see every frame (it records the last one itself)."""

    on_frame: Any = None

    def _automatic_rendering(self) -> None:
        if self.on_frame is not None:
            self.on_frame()


_RECORDED: dict[type, type] = {}


def _recorded_class(env_class: type[AbstractEnv]) -> type[AbstractEnv]:
    if env_class not in _RECORDED:
        _RECORDED[env_class] = type(f"Recorded{env_class.__name__}", (_RecordedMixin, env_class), {})
    return _RECORDED[env_class]


# Finished episodes hand their environment back for reuse: building one costs a full reset (about a
# tenth of a highway episode). reset(seed=...) rebuilds road, vehicles and the random generator, so a
# reused environment plays exactly what a fresh one would (tested).
_POOL: dict[tuple[str, bool], list[AbstractEnv]] = {}
_POOL_LOCK = threading.Lock()
POOL_SIZE = 4


def _acquire_env(family: str, frames: bool) -> AbstractEnv:
    with _POOL_LOCK:
        free = _POOL.get((family, frames))
        if free:
            return free.pop()
    spec = FAMILIES[family]
    return _recorded_class(spec.env_class)(config=dict(spec.config), render_mode="rgb_array" if frames else None)


def _release_env(family: str, frames: bool, env: AbstractEnv) -> None:
    env.on_frame = None
    with _POOL_LOCK:
        free = _POOL.setdefault((family, frames), [])
        if len(free) < POOL_SIZE:
            free.append(env)
            return
    env.close()


def make_env(family: str, frames: bool = False) -> AbstractEnv:
    """A fresh highway-env environment of `family` (bare: no recording hook), for benchmarks."""
    spec = _check_family(family)
    return spec.env_class(config=dict(spec.config), render_mode="rgb_array" if frames else None)


def install_planner(env: AbstractEnv, params: IdmParams) -> PlannerEgo:
    """Swap the ego for an IDM/MOBIL vehicle with `params`, in place, after a reset."""
    old = env.vehicle
    ego = PlannerEgo.create_from(old)
    ego.configure(params)
    _replace_vehicle(env, old, ego)
    env.controlled_vehicles = [ego]
    return ego


def _replace_vehicle(env: AbstractEnv, old: Any, new: Any) -> None:
    vehicles = env.road.vehicles
    vehicles[vehicles.index(old)] = new


# ---------------------------------------------------------------- the episode
@dataclass
class _Frame:
    t: float
    vehicles: list[tuple[int, float, float, float, float, Any]]  # (id(obj), x, y, heading, speed, lane_index)
    ego_lane: tuple[str, str, int]


@dataclass
class _Log:
    ttc_frames: list[float] = field(default_factory=list)
    ttc_steps: list[float] = field(default_factory=list)
    speeds: list[float] = field(default_factory=list)
    distance: float = 0.0
    kin_step: list[tuple[float, float]] = field(default_factory=list)
    kinematics: list[tuple[float, float]] = field(default_factory=list)


class HighwayEpisode:
    """One running episode (the `scenario.Episode` protocol)."""

    def __init__(self, family: str, seed: int, attack: ScenarioParams | None, planner: IdmParams | None,
                 frames: bool, defender: str | None) -> None:
        self.family, self.seed, self.attack, self.planner = family, seed, attack, planner
        self.spec = FAMILIES[family]
        self.defender = defender or ("idm" if planner is not None else "driver")
        self.env = _acquire_env(family, frames)
        self.env.on_frame = self._on_frame
        self.obs, _ = self.env.reset(seed=seed)
        self.dt = 1.0 / self.env.config["simulation_frequency"]
        self.frames_on = frames
        self.done = False
        self._closed = False
        self.duration = 0.0
        self.collision: Collision | None = None
        self.actions: list[str] = []
        self.invalid_actions = 0
        self.log = _Log()
        self.names: dict[int, str] = {}
        self.view_names: dict[int, str] = {}
        self.ego = install_planner(self.env, planner) if planner is not None else self.env.vehicle
        self.names[id(self.ego)] = "ego"
        for v in self.env.road.vehicles:
            if v is not self.ego:
                self._bg_name(v)  # bg:k in road order at t0, before the attacker takes one over
        self.attacker = self._install_attacker(attack) if attack is not None else None
        self.history: deque[_Frame] = deque(maxlen=int(round(geometry.HISTORY_S / self.dt)) + 1)
        self.images: deque[np.ndarray] = deque(maxlen=int(round(geometry.HISTORY_S / self.dt)) + 1)
        self._att_pos: list[np.ndarray] = []
        self.n_frames = 0
        self._record(first=True)

    # -- setup
    def _install_attacker(self, z: ScenarioParams) -> AttackerVehicle | None:
        ego = self.ego
        others = [v for v in self.env.road.vehicles if v is not ego]
        if not others:
            return None
        ranked = sorted(range(len(others)), key=lambda i: (float(np.linalg.norm(others[i].position - ego.position)), i))
        victim = others[ranked[min(z.slot, len(ranked) - 1)]]  # fewer vehicles than slots: the farthest
        att = AttackerVehicle.take_over(victim, ego, z, self.dt)
        self.view_names[id(att)] = self._bg_name(victim)
        self._replace(victim, att)
        self.names[id(att)] = "attacker"
        return att

    def _replace(self, old: Any, new: Any) -> None:
        _replace_vehicle(self.env, old, new)

    def _bg_name(self, v: Any) -> str:
        key = id(v)
        if key not in self.names:
            self.names[key] = f"bg:{len([n for n in self.names.values() if n.startswith('bg:')])}"
        return self.names[key]

    # -- per frame
    def _on_frame(self) -> None:
        self._record(first=False)

    def _record(self, first: bool) -> None:
        env, ego = self.env, self.ego
        vehicles = [v for v in env.road.vehicles if v is not ego]
        for v in vehicles:
            if id(v) not in self.names:
                self._bg_name(v)
        if not first:
            self.n_frames += 1
        self.history.append(_Frame(self.n_frames * self.dt,
                                    [(id(v), float(v.position[0]), float(v.position[1]), float(v.heading), float(v.speed),
                                      v.lane_index) for v in [ego, *vehicles]], tuple(ego.lane_index)))
        solid = vehicles + [o for o in env.road.objects if o.solid and o.collidable]
        self.log.ttc_frames.append(self._min_ttc(solid))
        if not first:
            self.log.speeds.append(float(ego.speed))
            self.log.distance += float(ego.speed * np.cos(ego.heading - ego.lane.heading_at(ego.lane.local_coordinates(ego.position)[0]))) * self.dt
            self._attacker_kinematics()
        if self.frames_on:
            self.images.append(env.render())
        if ego.crashed and self.collision is None:
            self.collision = self._collision()

    def _min_ttc(self, others: list[Any]) -> float:
        if not others:
            return TTC_HORIZON_S
        ego = self.ego
        s_e, _ = ego.lane.local_coordinates(ego.position)
        phi = ego.lane.heading_at(s_e)
        c, s = np.cos(phi), np.sin(phi)
        a = np.array([(o.position[0], o.position[1], o.heading, o.speed, o.LENGTH, o.WIDTH) for o in others])
        heading, length, width = a[:, 2], a[:, 4], a[:, 5]
        px, py = a[:, 0] - ego.position[0], a[:, 1] - ego.position[1]
        vx = a[:, 3] * np.cos(heading) - ego.speed * np.cos(ego.heading)
        vy = a[:, 3] * np.sin(heading) - ego.speed * np.sin(ego.heading)
        rel_s, rel_d = c * px + s * py, c * py - s * px
        rel_vs, rel_vd = c * vx + s * vy, c * vy - s * vx
        es, ed = geometry.box_extents(ego.LENGTH, ego.WIDTH, ego.heading - phi)
        os_, od = geometry.box_extents(length, width, heading - phi)
        ttc = geometry.time_to_collision(rel_s, rel_d, rel_vs, rel_vd, (es + os_) / 2, (ed + od) / 2)
        return float(ttc.min())

    def _attacker_kinematics(self) -> None:
        """The attacker's acceleration along and across its path, from its last three positions
        (the heading jumps of highway-env's 5 Hz bicycle model are not accelerations)."""
        att = self.attacker
        if att is None:
            return
        pos = att.position.copy()
        if len(self._att_pos) == 2:
            p0, p1 = self._att_pos
            v1, v2 = (p1 - p0) / self.dt, (pos - p1) / self.dt
            acc = (v2 - v1) / self.dt
            speed = float(np.linalg.norm(v2))
            t = v2 / speed if speed > 1e-6 else np.array([np.cos(att.heading), np.sin(att.heading)])
            self.log.kin_step.append((float(acc @ t), float(acc @ [-t[1], t[0]])))
        self._att_pos = [*self._att_pos[-1:], pos]

    # -- collisions
    def _collision(self) -> Collision:
        ego = self.ego
        candidates = [v for v in self.env.road.vehicles if v is not ego and v.crashed] or \
                     [o for o in self.env.road.objects if o.solid and o.collidable]
        if not candidates:
            candidates = [v for v in self.env.road.vehicles if v is not ego]
        other = min(candidates, key=lambda v: float(np.linalg.norm(v.position - ego.position)))
        t = self.history[-1].t
        if other not in self.env.road.vehicles:  # a static obstacle (merge's ramp end)
            states = [self._state("ego", *self._row(self.history[-1], id(ego)), self.history[0].ego_lane, ego)]
            return Collision(t=t, other="obstacle", fault="defender", rule="static obstacle: the ego drove into it",
                             geometry=states)
        name = self.names.get(id(other)) or self._bg_name(other)
        frames = [f for f in self.history if self._row(f, id(other)) is not None]
        lane = frames[0].ego_lane
        rows = {key: [self._row(f, key) for f in frames] for key in (id(ego), id(other))}
        ego_states = [self._state("ego", *r[:4], lane, ego) for r in rows[id(ego)]]
        other_states = [self._state(name, *r[:4], lane, other) for r in rows[id(other)]]
        own = tuple([self._own_lateral_speed(r) for r in rows[key]] for key in (id(ego), id(other)))
        prio = tuple([self._priority(r[4]) for r in rows[key]] for key in (id(ego), id(other)))
        party, rule = geometry.attribute_fault(ego_states, other_states, self.dt, own_lateral_speed=own, priority=prio)
        geo = [s for pair in zip(ego_states, other_states) for s in pair]
        return Collision(t=t, other=name, fault=geometry.fault_label(party, name), rule=rule, geometry=geo)

    @staticmethod
    def _row(frame: _Frame, key: int) -> tuple[float, float, float, float, Any] | None:
        for k, *row in frame.vehicles:
            if k == key:
                return tuple(row)  # type: ignore[return-value]
        return None

    def _own_lateral_speed(self, row: tuple[float, float, float, float, Any]) -> float:
        """Lateral speed relative to the lane the vehicle is on (0 while it follows any curve)."""
        x, y, heading, speed, lane_index = row
        lane = self.env.road.network.get_lane(lane_index)
        s, _ = lane.local_coordinates(np.array([x, y]))
        return float(speed * np.sin(utils.wrap_to_pi(heading - lane.heading_at(s))))

    def _priority(self, lane_index: Any) -> float:
        """Right of way of a lane: the map's priority (intersection), the roundabout's ring over its
        entries, a merge's main road over its access ramp."""
        lane = self.env.road.network.get_lane(lane_index)
        if self.family == "roundabout":
            return 1.0 if lane_index[0] in RING_NODES and lane_index[1] in RING_NODES else 0.0
        if self.family == "merge":
            return -1.0 if lane.forbidden else 0.0
        return float(lane.priority)

    def _state(self, name: str, x: float, y: float, heading: float, speed: float,
               lane_index: tuple[str, str, int], vehicle: Any) -> VehicleState:
        """A vehicle in the lane frame of `lane_index` (see geometry.py for the convention)."""
        lane = self.env.road.network.get_lane(lane_index)
        s, d = lane.local_coordinates(np.array([x, y]))
        rel = float(utils.wrap_to_pi(heading - lane.heading_at(s)))
        return VehicleState(id=name, x=x, y=y, s=float(s), d=float(d), vx=speed * np.cos(rel), vy=speed * np.sin(rel),
                            heading=rel, lane="-".join(map(str, lane_index)),
                            length=float(vehicle.LENGTH), width=float(vehicle.WIDTH))

    # -- the protocol
    def step(self, action: str | None) -> None:
        if self.done:
            raise RuntimeError(f"episode {self.family}/{self.seed} is over; start a new one")
        if self.planner is not None:
            index = self.env.action_type.actions_indexes["IDLE"]  # the planner ego ignores the action
        else:
            name = action.strip().upper() if isinstance(action, str) else ""
            available = self.available()
            if name not in available:
                self.invalid_actions += 1
                name = "IDLE"
            self.actions.append(name)
            index = self.env.action_type.actions_indexes[name]
        self.log.kin_step = []
        steps_before = len(self.log.ttc_frames)
        self.obs, _, terminated, truncated, _ = self.env.step(index)
        self._record(first=False)
        self.log.ttc_steps.append(min(self.log.ttc_frames[steps_before:]))
        if self.attacker is not None and self.log.kin_step:
            a_long = max((k[0] for k in self.log.kin_step), key=abs)
            a_lat = max((k[1] for k in self.log.kin_step), key=abs)
            self.log.kinematics.append((a_long, a_lat))
        self.duration = float(self.env.time)
        self.done = bool(terminated or truncated or self.duration >= self.spec.max_duration_s)

    def available(self) -> list[str]:
        """The meta-actions legal now, by name (IDLE is always legal)."""
        if self.planner is not None:
            return []
        at = self.env.action_type
        legal = {at.actions[i] for i in at.get_available_actions()}
        return [a for a in META_ACTIONS if a in legal]  # META_ACTIONS order in every family

    def view(self) -> DriverView:
        env, ego = self.env, self.ego
        lane = ego.lane
        s_e, d_e = lane.local_coordinates(ego.position)
        phi = lane.heading_at(s_e)
        c, s = np.cos(phi), np.sin(phi)
        near = sorted((float(np.linalg.norm(v.position - ego.position)), i, v) for i, v in enumerate(env.road.vehicles)
                      if v is not ego and np.linalg.norm(v.position - ego.position) < VIEW_RANGE_M)
        neighbours = []
        for _, _, v in near[:VIEW_NEIGHBOURS]:
            rel = v.position - ego.position
            h = float(utils.wrap_to_pi(v.heading - phi))
            name = self.view_names.get(id(v)) or self.names.get(id(v)) or self._bg_name(v)
            neighbours.append(VehicleState(
                id=name, x=float(v.position[0]), y=float(v.position[1]), s=float(rel @ [c, s]), d=float(rel @ [-s, c]),
                vx=float(v.speed * np.cos(h)), vy=float(v.speed * np.sin(h)), heading=h,
                lane="-".join(map(str, v.lane_index)), length=float(v.LENGTH), width=float(v.WIDTH)))
        _from, _to, lane_id = ego.lane_index
        return DriverView(t=float(env.time), ego_speed=float(ego.speed), ego_lane=int(lane_id),
                          lanes=len(env.road.network.graph[_from][_to]), neighbours=neighbours,
                          available=self.available(), features=np.asarray(self.obs, dtype=float).tolist())

    def result(self) -> EpisodeResult:
        log, collision = self.log, self.collision
        crashed = bool(self.ego.crashed)
        at_fault = collision is not None and collision.fault in ("defender", "shared")
        mean_speed = float(np.mean(log.speeds)) if log.speeds else float(self.ego.speed)
        duration = self.duration
        min_ttc = 0.0 if crashed else float(min(log.ttc_frames)) if log.ttc_frames else TTC_HORIZON_S
        att = self.attacker
        return EpisodeResult(
            family=self.family, seed=self.seed, attack=self.attack, defender=self.defender,
            steps=len(log.ttc_steps), duration_s=duration, crashed=crashed, collision=collision,
            ttc=[round(t, 3) for t in log.ttc_steps], min_ttc=min_ttc,
            near_miss=geometry.is_near_miss(min_ttc, crashed), mean_speed=mean_speed, distance_m=float(log.distance),
            reward=defender_return(at_fault, mean_speed, log.distance, duration, speed_range=self.spec.speed_range),
            attack_feasible=att.feasible if att is not None else True,
            attack_fired=att.fired if att is not None else False,
            attacker_kinematics=log.kinematics, actions=list(self.actions), invalid_actions=self.invalid_actions)

    def filmstrip(self, directory: str | Path, root: str | Path | None = None) -> list[str]:
        """Save the last frames (needs frames=True) as a filmstrip; paths relative to `root`."""
        from environments.adv0.render import save_filmstrip

        return save_filmstrip(list(self.images), directory, root=root, stem=f"{self.family}-{self.seed}")

    def close(self) -> None:
        """Hand the environment back for reuse (idempotent)."""
        if not self._closed:
            self._closed = True
            self.done = True
            _release_env(self.family, self.frames_on, self.env)


def start_episode(family: Family | str, seed: int, attack: ScenarioParams | dict[str, Any] | None,
                  planner: IdmParams | None = None, frames: bool = False, defender: str | None = None) -> HighwayEpisode:
    """Start one episode of `family` (see FAMILIES) with seed `seed`; `attack` None = normal traffic."""
    _check_family(family)
    if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool) or seed < 0:
        raise ValueError(f"seed={seed!r} must be a non-negative integer")
    z = _check_attack(attack)
    if planner is not None and not isinstance(planner, IdmParams):
        raise ValueError(f"planner={planner!r} must be IdmParams (or None for a driver that names meta-actions)")
    return HighwayEpisode(str(family), int(seed), z, planner, frames, defender)


def run_episode(family: str, seed: int, attack: ScenarioParams | None, planner: IdmParams | None = None,
                actions: list[str] | None = None) -> EpisodeResult:
    """Play one episode to the end: the planner drives, or `actions` (IDLE once they run out)."""
    ep = start_episode(family, seed, attack, planner=planner)
    try:
        i = 0
        while not ep.done:
            ep.step(None if planner is not None else (actions[i] if actions and i < len(actions) else "IDLE"))
            i += 1
        return ep.result()
    finally:
        ep.close()
