"""The vehicles ADV-0 puts on highway-env's roads: the aggressive and intersection background types,
the IDM/MOBIL planner ego, and the attacker that takes over a background vehicle and plays its
scenario's manoeuvre (see `scenario.py` for the factors). `highway.py` builds episodes from them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from highway_env import utils
from highway_env.vehicle.behavior import IDMVehicle
from highway_env.vehicle.kinematics import Vehicle

from environments.adv0.sim import escape, geometry
from environments.adv0.sim.scenario import MAX_LAT_ACCEL, MAX_LONG_ACCEL, IdmParams, ScenarioParams


@dataclass(frozen=True)
class Relation:
    """Where the attacker stands relative to the ego this frame (in the ego's lane frame, gaps net of
    half of each length)."""

    ahead: float  # m the attacker is ahead of the ego (negative: behind it)
    behind: float  # m the attacker is behind the ego (negative: ahead of it)
    lanes: int  # lanes on the ego's road segment
    delta: int | None  # the attacker's lane index minus the ego's; None on another road segment
    distance: float  # m between them

    def gap(self, pos: str) -> float:
        """`ahead` or `behind`, by a layout's name for it (`LAYOUT`)."""
        return self.ahead if pos == "ahead" else self.behind


# ---------------------------------------------------------------- background vehicle types
class AggressiveIDM(IDMVehicle):  # type: ignore[misc]  # highway-env ships no types: IDMVehicle is Any
    """Held-out background type: short headway, hard braking, eager lane changes, faster targets.
    (highway-env's own AggressiveVehicle is a LinearVehicle that logs regression data every step.)"""

    TIME_WANTED = 0.8
    DISTANCE_WANTED = 2.0 + IDMVehicle.LENGTH
    COMFORT_ACC_MAX = 4.5
    COMFORT_ACC_MIN = -6.0
    LANE_CHANGE_MIN_ACC_GAIN = 0.05
    LANE_CHANGE_MAX_BRAKING_IMPOSED = 4.0
    LANE_CHANGE_DELAY = 0.5

    target_speed: float  # highway-env's (declared: the base is untyped)

    def randomize_behavior(self) -> None:
        super().randomize_behavior()
        self.target_speed = float(self.target_speed + self.road.np_random.uniform(3.0, 7.0))


class IntersectionIDM(IDMVehicle):  # type: ignore[misc]  # highway-env ships no types: IDMVehicle is Any
    """IntersectionEnv overwrites class attributes of its background type; this subclass keeps
    that change away from IDMVehicle (and so from every other family in the process)."""


class PlannerEgo(IDMVehicle):  # type: ignore[misc]  # highway-env ships no types: IDMVehicle is Any
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


class AttackerVehicle(IDMVehicle):  # type: ignore[misc]  # highway-env ships no types: IDMVehicle is Any
    """A background vehicle taken over by the attacker: IDM/MOBIL until `trigger_s`, then it gets
    into position (`LAYOUT`) and fires when the gap to the ego is `gap_m`, plays its manoeuvre's
    script with accelerations scaled by `intensity` (within MAX_LONG_ACCEL / MAX_LAT_ACCEL; a
    command beyond them is clipped and flags the draw infeasible), then drives as IDM again."""

    # Its state, set by `take_over` (highway-env builds a vehicle by `create_from`, not __init__).
    ego: Any  # the ego vehicle (highway-env's, untyped)
    z: ScenarioParams
    dt: float
    clock: float
    phase: str  # follow, approach, script, release
    fired: bool
    feasible: bool
    t_fire: float
    lane_from: tuple[str, str, int] | None
    shift: float
    free: bool
    withheld: bool
    escape_at_fire: bool | None
    # highway-env's own attributes that this class reads and writes (declared: the base is untyped).
    target_speed: float
    target_lane_index: tuple[str, str, int]

    @classmethod
    def take_over(cls, victim: IDMVehicle, ego: Any, z: ScenarioParams, dt: float) -> AttackerVehicle:
        att: AttackerVehicle = cls.create_from(victim)  # highway-env is untyped: Any
        for name in ("TIME_WANTED", "DISTANCE_WANTED", "COMFORT_ACC_MAX", "COMFORT_ACC_MIN", "POLITENESS", "DELTA",
                     "LANE_CHANGE_MIN_ACC_GAIN", "LANE_CHANGE_MAX_BRAKING_IMPOSED", "LANE_CHANGE_DELAY"):
            setattr(att, name, getattr(victim, name))  # the same driver as before the trigger
        att.ego, att.z, att.dt = ego, z, dt
        att.clock, att.phase, att.fired, att.feasible = 0.0, "follow", False, True
        att.t_fire, att.lane_from, att.shift, att.free = 0.0, None, 0.0, False
        att.withheld = False  # the escape gate held a ready trigger (z.escape_gate)
        att.escape_at_fire = None  # the escape existed at the firing step (asked gated or not)
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
            if self._ready(rel) and self._may_fire(rel):
                self._fire(rel)
            else:  # not in position yet, or held by the escape gate: keep approaching
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
    def _relation(self) -> Relation:
        ego, lane = self.ego, self.ego.lane
        s_e = lane.local_coordinates(ego.position)[0]
        s_a = lane.local_coordinates(self.position)[0]
        half = (self.LENGTH + ego.LENGTH) / 2
        same_road = self.lane_index[:2] == ego.lane_index[:2]
        lanes = len(self.road.network.graph[ego.lane_index[0]][ego.lane_index[1]])
        return Relation(ahead=s_a - s_e - half, behind=s_e - s_a - half, lanes=lanes,
                        delta=self.lane_index[2] - ego.lane_index[2] if same_road else None,
                        distance=float(np.linalg.norm(self.position - ego.position)) - half)

    def _free_mode(self, rel: Relation) -> bool:
        """No lane layout is reachable (another road, a one-lane road, a priority conflict): fire on
        distance and play only the longitudinal part."""
        need_lane, _ = LAYOUT[self.z.manoeuvre]
        return rel.delta is None or (need_lane == "adjacent" and rel.lanes < 2)

    def _ready(self, rel: Relation) -> bool:
        tol = max(1.5, 0.1 * self.z.gap_m)
        if self._free_mode(rel):
            return bool(rel.distance <= self.z.gap_m + tol)
        need_lane, need_pos = LAYOUT[self.z.manoeuvre]
        lane_ok = rel.delta == 0 if need_lane == "same" else rel.delta is not None and abs(rel.delta) == 1
        settled = abs(self.lane.local_coordinates(self.position)[1]) < 0.5
        if need_lane == "same" and need_pos == "ahead":  # the follower sets this gap: fire once it is close enough
            return bool(lane_ok and settled and 0.0 <= rel.ahead <= self.z.gap_m + tol)
        return bool(lane_ok and settled and abs(rel.gap(need_pos) - self.z.gap_m) <= tol)

    def _approach(self, rel: Relation) -> None:
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

    def _approach_accel(self, rel: Relation) -> float:
        """A PD on the gap to the firing position; a brake-checker already ahead in the ego's lane
        just drives on (the follower closes that gap); never crawling far below the ego's speed."""
        need_lane, need_pos = LAYOUT[self.z.manoeuvre]
        dv = self.speed - self.ego.speed
        if need_lane == "same" and need_pos == "ahead":
            if rel.delta == 0:
                return float(self.acceleration(self, None))  # IDM's free-road term; the follow limit applies after
            target = max(self.z.gap_m, self._safe_gap("ahead"))
            accel = -K_GAP * (rel.ahead - target) - K_SPEED * dv
        elif need_pos == "ahead":
            accel = -K_GAP * (rel.ahead - self.z.gap_m) - K_SPEED * dv
        else:
            accel = K_GAP * (rel.behind - self.z.gap_m) - K_SPEED * dv
        if self.speed < 0.6 * self.ego.speed:
            accel = max(accel, 0.5)  # a waiting attacker does not stop on the highway
        return float(accel)

    def _approach_lane(self, rel: Relation) -> None:
        need_lane, need_pos = LAYOUT[self.z.manoeuvre]
        delta, lanes = rel.delta, rel.lanes
        if delta is None:  # another road segment: free mode, which never aims at a lane
            return
        ego_id = self.ego.lane_index[2]
        _from, _to, my_id = self.lane_index
        if self.lane_index != self.target_lane_index:
            return  # a lane change is under way
        wrong_side = rel.gap(need_pos) < -1.0  # the attacker has to pass the ego (or let it pass) first
        if delta == 0 and (need_lane == "adjacent" or wrong_side):
            goal = ego_id + 1 if ego_id + 1 < lanes else ego_id - 1
        elif abs(delta) >= 2:
            goal = my_id - int(np.sign(delta))
        elif need_lane == "same" and rel.gap(need_pos) >= max(self.z.gap_m - max(1.5, 0.1 * self.z.gap_m), self._safe_gap(need_pos)):
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
        return float(v_f * geometry.SAFE_HEADWAY_S + 1.0)

    def _follow_limit(self, front: Any) -> float:
        """IDM's interaction term with the vehicle ahead (the free-road term left out)."""
        return float(self.acceleration(self, front) - self.acceleration(self, None) + self.COMFORT_ACC_MAX)

    # -- the closed-loop escape gate
    def _may_fire(self, rel: Relation) -> bool:
        """Whether the ready attacker fires this frame. Ungated: always. Gated (`z.escape_gate`): only
        when this frame's state leaves the ego an escape (`escape.escape_at_firing`, on the script
        `_plan` lays out, in the ego's lane frame); else the attacker holds: it keeps approaching and
        asks again next frame, for as long as the episode runs."""
        lane = self.ego.lane
        s_e, d_e = lane.local_coordinates(self.ego.position)
        s_a, d_a = lane.local_coordinates(self.position)
        d_plan, a_plan = self._plan(rel, d_a - d_e)
        ok = bool(escape.escape_at_firing(np.array([self.ego.speed]), np.array([self.speed]), np.array([s_a - s_e]),
                                          d_plan[:, None], a_plan[:, None])[0])
        if ok or not self.z.escape_gate:
            self.escape_at_fire = ok  # recorded for the ungated too: what the gate would have said
            return True
        self.withheld = True
        return False

    def _plan(self, rel: Relation, d_now: float) -> tuple[np.ndarray, np.ndarray]:
        """The script `_script` would play if it fired now, on `escape.script_times()`: the lateral
        offset from the ego (from `d_now`, the stages' cosine moves) and the acceleration. Two stages
        end on feedback and are laid out at their bound: a tailgater's "close" at its intensity (it is
        behind the ego, never the ego's to escape) and a merge-squeezer's "pass" for its whole hold."""
        t = escape.script_times()[:, 0]
        shift = 0.0 if self._free_mode(rel) else self._shift_to_ego()
        d_plan, a_plan = np.full(len(t), d_now), np.zeros(len(t))
        start, t0, d_from = 0.0, 0.0, d_now
        for name, goal, accel, duration in self._stages(shift != 0.0):
            span = goal * shift - start
            T = self._move_time(span)[0] if name in ("move", "back") else duration
            now = (t >= t0) & (t < t0 + T)
            x = np.clip((t - t0) / max(T, 1e-9), 0.0, 1.0)
            d_plan = np.where(t >= t0, d_from + span * (1 - np.cos(np.pi * x)) / 2, d_plan)
            a_plan = np.where(now, accel, a_plan)
            start, t0, d_from = goal * shift, t0 + T, d_from + span
        return d_plan, a_plan

    def _shift_to_ego(self) -> float:
        """The lateral move from here to the ego's lane centre (0 in the ego's lane)."""
        if self.lane_index[2] == self.ego.lane_index[2]:
            return 0.0
        target = self.road.network.get_lane((self.lane_index[0], self.lane_index[1], self.ego.lane_index[2]))
        s_a = self.lane.local_coordinates(self.position)[0]
        return float(self.lane.local_coordinates(target.position(s_a, 0.0))[1])

    # -- the manoeuvre
    def _fire(self, rel: Relation) -> None:
        self.phase, self.fired, self.t_fire = "script", True, self.clock
        self.enable_lane_change = False
        self.free = self._free_mode(rel)
        self.lane_from = self.lane_index
        self.shift = 0.0
        if not self.free and rel.delta is not None and abs(rel.delta) == 1:
            self.shift = self._shift_to_ego()  # towards the ego's lane centre
        self._stage = "main"
        self._stage_t = self.clock

    def _lateral_duration(self, shift: float) -> float:
        """How long a cosine lateral move of `shift` takes. A lane change: its peak acceleration is
        LATERAL_PLAN * intensity * MAX_LAT_ACCEL (always feasible). A swerve: each leg (out, back)
        takes hold_s whatever the acceleration; one beyond MAX_LAT_ACCEL is stretched to the limit
        and flags the draw infeasible."""
        duration, feasible = self._move_time(shift)
        self.feasible &= feasible
        return duration

    def _move_time(self, shift: float) -> tuple[float, bool]:
        """(`_lateral_duration`, whether it kept within MAX_LAT_ACCEL), without flagging anything."""
        if abs(shift) < 0.05:
            return 0.0, True
        if self.z.manoeuvre == "swerve_return":
            needed = abs(shift) * np.pi**2 / (2 * self.z.hold_s**2)
            if needed <= MAX_LAT_ACCEL:
                return float(self.z.hold_s), True
            return float(np.pi * np.sqrt(abs(shift) / (2 * LATERAL_PLAN * MAX_LAT_ACCEL))), False
        a = max(1e-3, LATERAL_PLAN * self.z.intensity * MAX_LAT_ACCEL)
        return float(np.pi * np.sqrt(abs(shift) / (2 * a))), True

    def _stages(self, lateral: bool) -> list[tuple[str, float, float, float]]:
        """The manoeuvre's stages: (stage, lateral goal as a fraction of the shift, acceleration,
        duration or 0 = until the move ends); without a lateral move, its lateral stages drop out."""
        z = self.z
        a_max = z.intensity * MAX_LONG_ACCEL
        stages: dict[str, list[tuple[str, float, float, float]]] = {
            "cut_in": [("move", 1.0, 0.0, 0.0), ("hold", 1.0, 0.0, z.hold_s)],
            "cut_in_brake": [("move", 1.0, 0.0, 0.0), ("brake", 1.0, -a_max, z.hold_s)],
            "brake_check": [("brake", 0.0, -a_max, z.hold_s)],
            "tailgate": [("close", 0.0, a_max, z.hold_s)],
            "swerve_return": [("move", 0.3 + 0.4 * z.intensity, 0.0, 0.0), ("back", 0.0, 0.0, 0.0)],
            "merge_squeeze": [("pass", 0.0, a_max, z.hold_s), ("move", 1.0, 0.0, 0.0)],
            "yield_violation": ([("move", 1.0, -0.5 * a_max, 0.0), ("hold", 1.0, 0.0, z.hold_s)] if lateral
                                else [("push", 0.0, 0.5 * a_max, z.hold_s)]),
        }
        return [st for st in stages[z.manoeuvre] if lateral or st[0] not in ("move", "back")]

    def _script(self) -> bool:
        """One frame of the manoeuvre; False once it is over."""
        tau = self.clock - self._stage_t
        a_max = self.z.intensity * MAX_LONG_ACCEL
        lateral = self.shift != 0.0 and not self.free
        plan = self._stages(lateral)
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
            gap = self._relation().behind
            accel = min(a_max, 3 * K_GAP * (gap - 1.0) - K_SPEED * (self.speed - self.ego.speed))
        if name == "pass" and self._relation().ahead >= 0.5:
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
        if moved_over:
            lane = self.ego.lane_index[2]
        else:
            assert self.lane_from is not None  # set when it fired, and a release follows a firing
            lane = self.lane_from[2]
        self.target_lane_index = (_from, _to, lane)
