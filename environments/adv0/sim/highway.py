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

from environments.adv0.sim import geometry  # noqa: E402
from environments.adv0.sim.closed_loop import ClosedLoopAttacker, ClosedLoopVehicle  # noqa: E402
from environments.adv0.sim.scenario import (  # noqa: E402
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
from environments.adv0.sim.vehicles import AttackerVehicle, PlannerEgo  # noqa: E402


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
    "aggressive": FamilySpec(HighwayEnvFast, {**_HIGHWAY, "other_vehicles_type": "environments.adv0.sim.vehicles.AggressiveIDM"}, 20.0, (20.0, 30.0)),
    "merge": FamilySpec(MergeEnv, {**_COMMON, "other_vehicles_type": _IDM}, 20.0, (20.0, 30.0)),
    "roundabout": FamilySpec(RoundaboutEnv, {**_COMMON, "other_vehicles_type": _IDM}, 11.0, (0.0, 16.0)),
    "intersection": FamilySpec(IntersectionEnv, {**_COMMON, "other_vehicles_type": "environments.adv0.sim.vehicles.IntersectionIDM"}, 13.0, (0.0, 9.0)),
}
WORLD_FAMILIES = tuple(FAMILIES)
RING_NODES = frozenset({"se", "ex", "ee", "nx", "ne", "wx", "we", "sx"})  # RoundaboutEnv's circle
VIEW_NEIGHBOURS = 6
VIEW_RANGE_M = 100.0


def _check_family(family: str) -> FamilySpec:
    if family not in FAMILIES:
        raise ValueError(f"unknown scenario family {family!r}; allowed: {', '.join(WORLD_FAMILIES)} "
                         f"(the toy world is environments/adv0/sim/toy.py)")
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
    ego: PlannerEgo = PlannerEgo.create_from(old)  # highway-env is untyped: Any
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


Row = tuple[float, float, float, float, Any]  # one vehicle in a frame: x, y, heading, speed, lane_index


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
                 frames: bool, defender: str | None, closed_loop: ClosedLoopAttacker | None = None) -> None:
        self.family, self.seed, self.attack, self.planner = family, seed, attack, planner
        self.closed_loop = closed_loop
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
        self.attacker: AttackerVehicle | ClosedLoopVehicle | None = None
        if attack is not None:
            self.attacker = self._install_attacker(attack)
        elif closed_loop is not None:
            self.attacker = self._install_closed_loop(closed_loop)
        self.history: deque[_Frame] = deque(maxlen=int(round(geometry.HISTORY_S / self.dt)) + 1)
        self.images: deque[np.ndarray] = deque(maxlen=int(round(geometry.HISTORY_S / self.dt)) + 1)
        self._att_pos: list[np.ndarray] = []
        self.n_frames = 0
        self._record(first=True)

    # -- setup
    def _victim(self, slot: int) -> Any:
        """The background vehicle ranked `slot` by distance to the ego (fewer: the farthest)."""
        ego = self.ego
        others = [v for v in self.env.road.vehicles if v is not ego]
        if not others:
            return None
        ranked = sorted(range(len(others)), key=lambda i: (float(np.linalg.norm(others[i].position - ego.position)), i))
        return others[ranked[min(slot, len(ranked) - 1)]]

    def _install_attacker(self, z: ScenarioParams) -> AttackerVehicle | None:
        victim = self._victim(z.slot)
        if victim is None:
            return None
        att = AttackerVehicle.take_over(victim, self.ego, z, self.dt)
        self.view_names[id(att)] = self._bg_name(victim)
        self._replace(victim, att)
        self.names[id(att)] = "attacker"
        return att

    def _install_closed_loop(self, attacker: ClosedLoopAttacker) -> ClosedLoopVehicle | None:
        victim = self._victim(attacker.slot)
        if victim is None:
            return None
        att = ClosedLoopVehicle.take_over(victim, self.ego, attacker.limits, self.dt)
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
            [last] = self._track([self.history[-1]], id(ego))
            states = [self._state("ego", *last[:4], self.history[0].ego_lane, ego)]
            return Collision(t=t, other="obstacle", fault="defender", rule="static obstacle: the ego drove into it",
                             geometry=states)
        name = self.names.get(id(other)) or self._bg_name(other)
        frames = [f for f in self.history if self._row(f, id(other)) is not None]
        lane = frames[0].ego_lane
        ego_rows, other_rows = self._track(frames, id(ego)), self._track(frames, id(other))
        ego_states = [self._state("ego", *r[:4], lane, ego) for r in ego_rows]
        other_states = [self._state(name, *r[:4], lane, other) for r in other_rows]
        own = ([self._own_lateral_speed(r) for r in ego_rows], [self._own_lateral_speed(r) for r in other_rows])
        prio = ([self._priority(r[4]) for r in ego_rows], [self._priority(r[4]) for r in other_rows])
        paths = ([self._lane_heading(r) for r in ego_rows], [self._lane_heading(r) for r in other_rows])
        party, rule = geometry.attribute_fault(ego_states, other_states, self.dt, own_lateral_speed=own, priority=prio,
                                               path_heading=paths)
        geo = [s for pair in zip(ego_states, other_states) for s in pair]
        return Collision(t=t, other=name, fault=geometry.fault_label(party, name), rule=rule, geometry=geo)

    @staticmethod
    def _row(frame: _Frame, key: int) -> Row | None:
        for k, x, y, heading, speed, lane_index in frame.vehicles:
            if k == key:
                return (x, y, heading, speed, lane_index)
        return None

    def _track(self, frames: list[_Frame], key: int) -> list[Row]:
        """The vehicle's row in each of `frames` (it must be in all of them)."""
        rows = [self._row(f, key) for f in frames]
        if any(r is None for r in rows):
            raise RuntimeError(f"vehicle {key} is missing from {sum(r is None for r in rows)} of {len(rows)} frames")
        return [r for r in rows if r is not None]

    def _own_lateral_speed(self, row: Row) -> float:
        """Lateral speed relative to the lane the vehicle is on (0 while it follows any curve)."""
        heading, speed = row[2], row[3]
        return float(speed * np.sin(utils.wrap_to_pi(heading - self._lane_heading(row))))

    def _lane_heading(self, row: Row) -> float:
        """The world heading of the lane the vehicle is on, where it is (its path, not its body)."""
        x, y, _, _, lane_index = row
        lane = self.env.road.network.get_lane(lane_index)
        s, _ = lane.local_coordinates(np.array([x, y]))
        return float(lane.heading_at(s))

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
        if self.closed_loop is not None and isinstance(self.attacker, ClosedLoopVehicle) and not self.attacker.crashed:
            # one decision per policy step: the attacker acts on the state the defender acts on
            self.closed_loop.decide(self.attacker, self.ego, self.env.road, 1.0 / self.env.config["policy_frequency"],
                                    float(self.env.time))
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
            trigger_withheld=bool(att is not None and att.withheld and not att.fired),
            attacker_kinematics=log.kinematics, actions=list(self.actions), invalid_actions=self.invalid_actions,
            attacker_trajectory=(self.closed_loop.trajectory.model_copy(deep=True)
                                 if self.closed_loop is not None else None))

    def filmstrip(self, directory: str | Path, root: str | Path | None = None) -> list[str]:
        """Save the last frames (needs frames=True) as a filmstrip; paths relative to `root`. A closed-loop
        attacker's frames carry its decision in force at each (`render.frame_captions`)."""
        from environments.adv0.sim.render import decisions_of, save_filmstrip

        if self.closed_loop is None:
            return save_filmstrip(list(self.images), directory, root=root, stem=f"{self.family}-{self.seed}")
        # `images` and `history` are appended together, frame by frame, and keep the same length
        times = [f.t for f in self.history][-len(self.images) :] if self.images else []
        return save_filmstrip(list(self.images), directory, root=root, stem=f"{self.family}-{self.seed}",
                              times=times, decisions=decisions_of(self.closed_loop.trajectory, self.closed_loop.policy))

    def close(self) -> None:
        """Hand the environment back for reuse (idempotent)."""
        if not self._closed:
            self._closed = True
            self.done = True
            _release_env(self.family, self.frames_on, self.env)


def start_episode(family: Family | str, seed: int, attack: ScenarioParams | dict[str, Any] | None,
                  planner: IdmParams | None = None, frames: bool = False, defender: str | None = None,
                  closed_loop: ClosedLoopAttacker | None = None) -> HighwayEpisode:
    """Start one episode of `family` (see FAMILIES) with seed `seed`; `attack` None = normal traffic,
    unless `closed_loop` (a fresh `ClosedLoopAttacker`) takes a vehicle over and acts every step."""
    _check_family(family)
    if attack is not None and closed_loop is not None:
        raise ValueError("start_episode: give a one-shot `attack` or a `closed_loop` attacker, not both")
    if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool) or seed < 0:
        raise ValueError(f"seed={seed!r} must be a non-negative integer")
    z = _check_attack(attack)
    if planner is not None and not isinstance(planner, IdmParams):
        raise ValueError(f"planner={planner!r} must be IdmParams (or None for a driver that names meta-actions)")
    return HighwayEpisode(str(family), int(seed), z, planner, frames, defender, closed_loop)


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
