"""The closed-loop attacker: a policy that, every decision interval (highway-env's policy step, one
second in every family), observes the joint state around the vehicle it took over and chooses that
vehicle's next action. It is the Markov-game attacker of issue 41; the one-shot scenario attacker of
`policies/attacker.py` (a manoeuvre's parameters drawn once at t0) stays as the baseline arm.

- Actions (`ACTIONS`): lateral {left, keep, right} x longitudinal {accelerate, hold, brake}, nine in
  all, as "lateral:longitudinal". "left"/"right" follow highway-env's lane indices (left = index - 1).
- Limits (`ClosedLoopLimits`): which lateral and longitudinal actions are allowed at all, the
  acceleration and braking they command (within the project's kinematic limits MAX_LONG_ACCEL), and
  the speed band. `feasible_mask` masks every action that would leave the road (no lane there), start
  a lane change while one is under way, or push the speed out of the band (an action that moves it
  back towards the band stays feasible, so a vehicle taken over above the band can still slow down).
- Observation (`JointState` -> `features`): in the lane frame of the attacker's lane, the ego first,
  then the K nearest other vehicles, each as (present, s, d, dv) -- relative longitudinal position,
  lateral offset and relative speed, scaled -- padded with zeros; plus the attacker's own speed, its
  offset in its lane and whether a lane exists to its left and right.
- Feature sets (`FEATURE_SETS`): "base" is the block above; "gaps" appends `GAP_FEATURES` that
  make "cut in at a safe gap, then brake" linear in the features (`gap_features`): the ego's lane
  relative to the attacker's (left / same / right) and, for an ego behind, its margin over the
  geometry's safe cut-in gap in seconds, binned and crossed with the lane (a band of the margin and a
  side is one weight, which a linear policy on s and d alone cannot express), the ego's closing rate
  and the product of the longitudinal and lateral offsets.
- Policy (`ClosedLoopPolicy`): softmax-linear over the features, logits = W phi + b, with infeasible
  logits removed before the normaliser, so a feasible action's log-probability is exact and an
  infeasible one has probability 0. `log_prob(trajectory)` sums over steps; `grad_log_prob` is its
  analytic gradient (onehot(a) - pi) outer phi, what preference learning (DPO) needs.
  `reference` is the untrained prior; the hand-set behaviour policies for off-policy draws, in the
  same class, are in `hand_policies.py`.

`highway.start_episode(..., closed_loop=ClosedLoopAttacker(...))` plays it: the episode asks
`decide` before every policy step and records the step (features, mask, action) in
`EpisodeResult.attacker_trajectory`, so `log_prob` of a played episode is computable afterwards.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
from highway_env.vehicle.behavior import IDMVehicle
from highway_env.vehicle.kinematics import Vehicle
from pydantic import BaseModel, ConfigDict, Field, model_validator
from typing_extensions import TypedDict  # pydantic reads a TypedDict field only from here before Python 3.12

from environments.adv0.sim.scenario import MAX_LONG_ACCEL, AttackerTrajectory

Lateral = Literal["left", "keep", "right"]
Longitudinal = Literal["accelerate", "hold", "brake"]
LATERAL: tuple[Lateral, ...] = ("left", "keep", "right")
LONGITUDINAL: tuple[Longitudinal, ...] = ("accelerate", "hold", "brake")
ACTIONS: tuple[str, ...] = tuple(f"{lat}:{lon}" for lat in LATERAL for lon in LONGITUDINAL)
DEFAULT_ACTION = ACTIONS.index("keep:hold")

K_NEAREST = 4  # other vehicles observed besides the ego (padded when fewer are in range)
OBS_RANGE_M = 100.0  # vehicles farther than this from the attacker are not observed
# Feature scales: a lane is 4 m in highway-env; 50 m and 10 m/s put typical highway gaps and speed
# differences near unit size, so a linear policy's weights are comparable across features.
S_SCALE, D_SCALE, V_SCALE, SPEED_SCALE = 50.0, 4.0, 10.0, 30.0
OWN_FEATURES = 4  # own speed, own offset in lane, lane to the left, lane to the right
PER_VEHICLE = 4  # present, s, d, dv
SPEED_TOL = 1e-6
FeatureSet = Literal["base", "gaps"]
FEATURE_SETS: tuple[FeatureSet, ...] = ("base", "gaps")
# The "gaps" block. The safe cut-in gap is `geometry.py`'s (SAFE_HEADWAY_S of the follower's speed
# plus braking to the leader's speed at SAFE_DECEL); the margin over it is in seconds of the ego's
# speed. Bins: below the safe gap (a cut-in there is the attacker's fault), 0-1 s and 1-2 s over it
# (a cut-in there, then a brake, is the follower's fault); farther is no bin.
MARGIN_BINS_S = ((-np.inf, 0.0), (0.0, 1.0), (1.0, 2.0))
EGO_LANES = ("left", "same", "right")
SAME_LANE_M = 2.0  # |lateral offset| below half a lane: the ego is in the attacker's lane
VEHICLE_LENGTH_M = 5.0  # highway-env's; centre distance minus it is the bumper gap
SAFE_HEADWAY_S, SAFE_DECEL = 1.0, 4.0  # as geometry.py (not imported: it would make a cycle)
GAP_FEATURES = len(EGO_LANES) + len(MARGIN_BINS_S) * len(EGO_LANES) + 2  # lanes, margin x lane, closing, s*d
REFERENCE_TRAJECTORY = "closed_loop_reference"  # AttackerTrajectory.policy of a reference draw
HAND_TRAJECTORY = "closed_loop_hand"  # ... of a hand-policy draw (`hand_policies.py`)
OFF_POLICY_TRAJECTORIES = (REFERENCE_TRAJECTORY, HAND_TRAJECTORY)  # not the learner's: left out of its KL


def n_features(k: int = K_NEAREST, feature_set: FeatureSet = "base") -> int:
    _check_feature_set(feature_set)
    return OWN_FEATURES + PER_VEHICLE * (1 + k) + (GAP_FEATURES if feature_set == "gaps" else 0)


def _check_feature_set(feature_set: str) -> None:
    if feature_set not in FEATURE_SETS:
        raise ValueError(f"closed-loop features: feature_set={feature_set!r} is not one of {list(FEATURE_SETS)}")


# ---------------------------------------------------------------- limits and feasibility
class ClosedLoopLimits(BaseModel):
    """What the closed-loop attacker may do. Every error names the offending key."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    lateral: tuple[Lateral, ...] = Field(LATERAL, description="lateral actions allowed at all")
    longitudinal: tuple[Longitudinal, ...] = Field(LONGITUDINAL, description="longitudinal actions allowed at all")
    max_accel: float = Field(3.0, description="m/s^2 commanded by 'accelerate'")
    max_brake: float = Field(6.0, description="m/s^2 commanded by 'brake' (a positive number)")
    speed_min: float = Field(0.0, description="m/s: the lowest speed an action may bring it to")
    speed_max: float = Field(35.0, description="m/s: the highest speed an action may bring it to")

    @model_validator(mode="after")
    def _consistent(self) -> "ClosedLoopLimits":
        if not self.lateral:
            raise ValueError("closed-loop limits: 'lateral' is empty, so every action is infeasible")
        if not self.longitudinal:
            raise ValueError("closed-loop limits: 'longitudinal' is empty, so every action is infeasible")
        for key in ("max_accel", "max_brake"):
            value = getattr(self, key)
            if not 0.0 < value <= MAX_LONG_ACCEL:
                raise ValueError(
                    f"closed-loop limits: '{key}'={value} must be in (0, {MAX_LONG_ACCEL}] m/s^2 "
                    "(the kinematic feasibility limit)"
                )
        if not 0.0 <= self.speed_min < self.speed_max <= Vehicle.MAX_SPEED:
            raise ValueError(
                f"closed-loop limits: 'speed_min'={self.speed_min} and 'speed_max'={self.speed_max} "
                f"must satisfy 0 <= speed_min < speed_max <= {Vehicle.MAX_SPEED}; otherwise no speed "
                "is feasible"
            )
        return self

    def accel_of(self, longitudinal: str) -> float:
        return {"accelerate": self.max_accel, "hold": 0.0, "brake": -self.max_brake}[longitudinal]


@dataclass(frozen=True)
class Rel:
    """Another vehicle relative to the attacker, in the attacker's lane frame (m, m, m/s)."""

    s: float
    d: float
    dv: float


@dataclass(frozen=True)
class JointState:
    """What the attacker observes at a decision: itself, the ego, and the others nearest first."""

    speed: float  # the attacker's speed along its lane (m/s)
    offset: float  # its lateral offset from its lane's centre (m)
    lane_id: int  # highway-env's lane index on its road segment (0 = leftmost)
    lanes: int  # lanes on that segment
    changing: bool  # a lane change is under way
    ego: Rel | None
    others: list[Rel] = field(default_factory=list)


def features(state: JointState, k: int = K_NEAREST, feature_set: FeatureSet = "base") -> np.ndarray:
    """The policy's input: own block, then the ego's block, then the k nearest others (padded), then
    (feature set "gaps") `gap_features`."""
    phi = np.zeros(n_features(k, feature_set))
    phi[:OWN_FEATURES] = (
        state.speed / SPEED_SCALE,
        state.offset / D_SCALE,
        float(state.lane_id > 0),
        float(state.lane_id < state.lanes - 1),
    )
    blocks = [state.ego, *state.others[:k]]
    blocks += [None] * (1 + k - len(blocks))
    for i, rel in enumerate(blocks):
        if rel is not None:  # an absent ego (it left the map) is padding like an absent neighbour
            at = OWN_FEATURES + PER_VEHICLE * i
            phi[at : at + PER_VEHICLE] = (1.0, rel.s / S_SCALE, rel.d / D_SCALE, rel.dv / V_SCALE)
    if feature_set == "gaps":
        phi[n_features(k) :] = gap_features(state)
    return phi


def safe_margin_s(state: JointState) -> float | None:
    """The ego's bumper gap behind the attacker minus the safe cut-in gap it would need (geometry.py's
    rule with the ego as the follower), in seconds of the ego's speed; None when no ego is observed
    or it is not behind."""
    ego = state.ego
    if ego is None or ego.s >= 0:
        return None
    v_f, v_l = max(state.speed + ego.dv, 0.0), max(state.speed, 0.0)
    safe = v_f * SAFE_HEADWAY_S + max(0.0, v_f**2 - v_l**2) / (2 * SAFE_DECEL)
    return (-ego.s - VEHICLE_LENGTH_M - safe) / max(v_f, 1.0)


def gap_features(state: JointState) -> np.ndarray:
    """The "gaps" block: the ego's lane one-hot (left, same, right of the attacker's), the margin bin
    x that lane (9; all 0 when the ego is not behind or is 2 s or more past the safe gap), the ego's
    closing rate over the gap (1/TTC, 1/s, clipped to [0, 2]; 0 unless it is behind and faster),
    and s * d in the base block's scales."""
    out = np.zeros(GAP_FEATURES)
    ego = state.ego
    if ego is None:
        return out
    lane = 1 if abs(ego.d) < SAME_LANE_M else (0 if ego.d < 0 else 2)
    out[lane] = 1.0
    margin = safe_margin_s(state)
    if margin is not None:
        for b, (lo, hi) in enumerate(MARGIN_BINS_S):
            if lo <= margin < hi:
                out[len(EGO_LANES) + b * len(EGO_LANES) + lane] = 1.0
        gap = max(-ego.s - VEHICLE_LENGTH_M, 1.0)
        out[-2] = min(max(ego.dv, 0.0) / gap, 2.0)
    out[-1] = (ego.s / S_SCALE) * (ego.d / D_SCALE)
    return out


def feasible_mask(state: JointState, limits: ClosedLoopLimits, interval_s: float) -> np.ndarray:
    """True where an action is allowed by `limits`, stays on the road and keeps the speed band."""
    lateral_ok = {
        "keep": True,
        "left": not state.changing and state.lane_id - 1 >= 0,
        "right": not state.changing and state.lane_id + 1 < state.lanes,
    }
    lo, hi = limits.speed_min, limits.speed_max

    def outside(v: float) -> float:  # how far a speed is from the band (0 inside it)
        return max(lo - v, 0.0, v - hi)

    now = outside(state.speed)
    mask = np.zeros(len(ACTIONS), dtype=bool)
    for i, name in enumerate(ACTIONS):
        lat, lon = name.split(":")
        if lat not in limits.lateral or lon not in limits.longitudinal or not lateral_ok[lat]:
            continue
        after = outside(state.speed + limits.accel_of(lon) * interval_s)
        mask[i] = after <= SPEED_TOL or after < now  # inside the band, or back towards it
    return mask


def check_some_feasible(mask: np.ndarray, limits: ClosedLoopLimits) -> None:
    if not mask.any():
        raise ValueError(
            f"closed-loop limits: no action is feasible here with 'lateral'={list(limits.lateral)} and "
            f"'longitudinal'={list(limits.longitudinal)} (allow 'keep' and 'hold', or widen "
            f"'speed_min'/'speed_max'={limits.speed_min}/{limits.speed_max})"
        )


# ---------------------------------------------------------------- the policy
class PolicyState(TypedDict):
    """A policy as JSON (`to_state`); a round's `attacker.json` is one with the trainer's keys added."""

    kind: Literal["closed_loop"]
    k: int
    feature_set: FeatureSet
    weights: list[list[float]]
    bias: list[float]


def _masked_log_softmax(logits: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """log pi over the feasible actions; -inf where infeasible (probability exactly 0)."""
    out = np.full(logits.shape, -np.inf)
    z = logits[mask]
    m = z.max()
    out[mask] = z - (m + np.log(np.exp(z - m).sum()))
    return out


class ClosedLoopPolicy:
    """Softmax-linear over `features`: logits = W phi + b (W: actions x features)."""

    def __init__(
        self, weights: np.ndarray, bias: np.ndarray, k: int = K_NEAREST, feature_set: FeatureSet = "base"
    ) -> None:
        weights, bias = np.asarray(weights, dtype=float), np.asarray(bias, dtype=float)
        width = n_features(k, feature_set)
        if weights.shape != (len(ACTIONS), width) or bias.shape != (len(ACTIONS),):
            raise ValueError(
                f"closed-loop policy: weights {weights.shape} / bias {bias.shape} do not fit "
                f"{len(ACTIONS)} actions x {width} features (k={k}, feature_set={feature_set!r})"
            )
        self.weights, self.bias, self.k, self.feature_set = weights, bias, k, feature_set

    @classmethod
    def reference(
        cls, k: int = K_NEAREST, keep_bias: float = 2.0, hold_bias: float = 1.0, feature_set: FeatureSet = "base"
    ) -> ClosedLoopPolicy:
        """The untrained reference: state-blind, mostly keeps its lane and speed (like background
        traffic), with every feasible action possible -- the prior preference learning moves from.
        State-blind, it is the same policy whatever the feature set."""
        bias = np.array(
            [keep_bias * (lat == "keep") + hold_bias * (lon == "hold") for lat, lon in (a.split(":") for a in ACTIONS)]
        )
        return cls(np.zeros((len(ACTIONS), n_features(k, feature_set))), bias, k, feature_set)

    def features(self, state: JointState) -> np.ndarray:
        return features(state, self.k, self.feature_set)

    def tempered(self, temperature: float) -> ClosedLoopPolicy:
        """pi^(1/T), renormalised over the feasible actions: softmax-linear again, with theta / T (T > 1
        flattens it: a behaviour policy that explores more; its log-probabilities are its own, exact)."""
        if not temperature > 0:
            raise ValueError(f"closed-loop policy: temperature={temperature} must be > 0")
        return self.with_theta(self.theta / temperature)

    # -- parameters as one vector (what an optimiser and the finite-difference test see)
    @property
    def theta(self) -> np.ndarray:
        return np.concatenate([self.weights.ravel(), self.bias])

    def with_theta(self, theta: np.ndarray) -> ClosedLoopPolicy:
        n = self.weights.size
        return ClosedLoopPolicy(theta[:n].reshape(self.weights.shape), theta[n:], self.k, self.feature_set)

    # -- probabilities
    def log_probs(self, phi: np.ndarray, mask: np.ndarray) -> np.ndarray:
        if not mask.any():
            raise ValueError("closed-loop policy: every action is masked at this step")
        return _masked_log_softmax(self.weights @ phi + self.bias, mask)

    def log_prob(self, trajectory: AttackerTrajectory) -> float:
        """log pi(trajectory) = sum over its steps of log pi(a_t | s_t); -inf if any step chose a
        masked action."""
        phis, masks, actions = _arrays(trajectory)
        return float(sum(self.log_probs(p, m)[a] for p, m, a in zip(phis, masks, actions)))

    def grad_log_prob(self, trajectory: AttackerTrajectory) -> np.ndarray:
        """d log pi(trajectory) / d theta (theta = W flattened, then b): per step (onehot - pi) x phi."""
        phis, masks, actions = _arrays(trajectory)
        g_w, g_b = np.zeros_like(self.weights), np.zeros_like(self.bias)
        for p, m, a in zip(phis, masks, actions):
            pi = np.exp(self.log_probs(p, m))  # exactly 0 on masked actions
            delta = -pi
            delta[a] += 1.0
            g_w += np.outer(delta, p)
            g_b += delta
        return np.concatenate([g_w.ravel(), g_b])

    def sample(self, phi: np.ndarray, mask: np.ndarray, rng: np.random.Generator) -> int:
        p = np.exp(self.log_probs(phi, mask))
        return int(rng.choice(len(ACTIONS), p=p / p.sum()))

    # -- persistence
    def to_state(self) -> PolicyState:
        return {
            "kind": "closed_loop",
            "k": self.k,
            "feature_set": self.feature_set,
            "weights": self.weights.tolist(),
            "bias": self.bias.tolist(),
        }

    @classmethod
    def from_state(cls, state: object) -> ClosedLoopPolicy:
        """The policy of a `to_state` dict read back from JSON (extra keys, a trainer's, are ignored)."""
        if not isinstance(state, dict) or state.get("kind") != "closed_loop":
            kind = state.get("kind") if isinstance(state, dict) else type(state).__name__
            raise ValueError(f"closed-loop policy state: 'kind' is {kind!r}, not 'closed_loop'")
        missing = [key for key in ("k", "weights", "bias") if key not in state]
        if missing:
            raise ValueError(f"closed-loop policy state: missing {', '.join(repr(m) for m in missing)}")
        feature_set = state.get("feature_set", "base")  # files written before the "gaps" set are "base"
        _check_feature_set(feature_set)
        return cls(np.asarray(state["weights"]), np.asarray(state["bias"]), int(state["k"]), feature_set)

    @classmethod
    def load(cls, path: str | Path) -> ClosedLoopPolicy:
        file = Path(path)
        if not file.is_file():
            raise ValueError(f"closed-loop policy {path}: no such file")
        try:
            return cls.from_state(json.loads(file.read_text(encoding="utf-8")))
        except json.JSONDecodeError as exc:
            raise ValueError(f"closed-loop policy {path}: not JSON ({exc})") from exc


def step_kl(q: ClosedLoopPolicy, p: ClosedLoopPolicy, phis: np.ndarray, masks: np.ndarray) -> np.ndarray:
    """KL(q(.|s) || p(.|s)) at each state (rows of `phis`, with its feasible `masks`), exact: both
    policies normalise over the same feasible actions, so no masked action contributes."""
    phis, masks = np.atleast_2d(phis), np.atleast_2d(masks)
    lq = np.where(masks, _batch_log_softmax(phis @ q.weights.T + q.bias, masks), 0.0)  # 0 * -inf would be nan
    lp = np.where(masks, _batch_log_softmax(phis @ p.weights.T + p.bias, masks), 0.0)
    kl: np.ndarray = np.where(masks, np.exp(lq) * (lq - lp), 0.0).sum(axis=1)
    return kl


def _batch_log_softmax(logits: np.ndarray, masks: np.ndarray) -> np.ndarray:
    """Row-wise `_masked_log_softmax` (every row needs a feasible action)."""
    z = np.where(masks, logits, -np.inf)
    m = z.max(axis=1, keepdims=True)
    with np.errstate(divide="ignore"):
        out: np.ndarray = np.where(masks, z - (m + np.log(np.exp(z - m).sum(axis=1, keepdims=True))), -np.inf)
    return out


@dataclass(frozen=True)
class ClosedLoopDraw:
    """One episode's closed-loop attacker as data: which policy (a snapshot: a policy is never changed
    in place), its limits, the vehicle it takes over and its generator's seed. It stands where a
    one-shot attacker's `ScenarioParams` stands in the min-max loop's jobs; `attacker()` builds the
    fresh `ClosedLoopAttacker` an episode needs, so replaying a draw replays its episode."""

    policy: ClosedLoopPolicy
    limits: ClosedLoopLimits
    slot: int
    seed: tuple[int, ...]
    reference: bool = False  # drawn from the reference policy (the group's anchor), not the learner
    hand: bool = False  # drawn from a hand policy (`hand_policies.py`), not the learner

    def __post_init__(self) -> None:
        if self.reference and self.hand:
            raise ValueError("closed-loop draw: reference=True and hand=True; a draw has one behaviour policy")

    def attacker(self) -> ClosedLoopAttacker:
        att = ClosedLoopAttacker(self.policy, self.limits, self.slot, list(self.seed))
        # An off-policy draw's trajectory says so: preference learning's KL estimate leaves it out.
        if self.reference:
            att.trajectory.policy = REFERENCE_TRAJECTORY
        elif self.hand:
            att.trajectory.policy = HAND_TRAJECTORY
        return att


def _arrays(trajectory: AttackerTrajectory) -> tuple[np.ndarray, np.ndarray, list[int]]:
    return (
        np.asarray(trajectory.features, dtype=float),
        np.asarray(trajectory.feasible, dtype=bool),
        [ACTIONS.index(a) for a in trajectory.actions],
    )


# ---------------------------------------------------------------- in highway-env
class ClosedLoopVehicle(IDMVehicle):  # type: ignore[misc]  # highway-env ships no types: IDMVehicle is Any
    """The background vehicle the closed-loop attacker took over: between decisions it holds the
    commanded acceleration (clipped at the speed band, so the mask's promise holds within the
    interval) and steers towards the commanded lane with highway-env's own lane controller. Its
    command never drives it into background traffic: the acceleration is capped by IDM's interaction
    term with the vehicle ahead in its lane and in the lane it is changing into, unless that vehicle
    is the ego (without the cap the reference policy's 'hold' rear-ends slower traffic within a few
    seconds and the attack ends before it meets the ego)."""

    # Its state, set by `take_over` (highway-env builds a vehicle by `create_from`, not __init__).
    ego: Any  # the ego vehicle (highway-env's, untyped)
    limits: ClosedLoopLimits
    accel_cmd: float
    dt: float
    feasible: bool
    fired: bool
    withheld: bool

    @classmethod
    def take_over(cls, victim: Any, ego: Any, limits: ClosedLoopLimits, dt: float) -> ClosedLoopVehicle:
        att: ClosedLoopVehicle = cls.create_from(victim)
        for name in ("TIME_WANTED", "DISTANCE_WANTED", "COMFORT_ACC_MAX", "COMFORT_ACC_MIN", "DELTA"):
            setattr(att, name, getattr(victim, name))  # the cap follows the taken-over driver's headway
        att.ego, att.limits, att.accel_cmd, att.dt = ego, limits, 0.0, dt
        att.feasible, att.fired, att.withheld = True, False, False  # the episode's result reads these
        att.check_collisions = True  # highway-fast only checks the ego: the attacker can hit others too
        att.color = (230, 60, 200)
        return att

    def command(self, action: str) -> None:
        lat, lon = action.split(":")
        if lat != "keep":
            _from, _to, idx = self.lane_index
            self.target_lane_index = (_from, _to, idx + (1 if lat == "right" else -1))
        self.accel_cmd = self.limits.accel_of(lon)
        self.fired = self.fired or action != ACTIONS[DEFAULT_ACTION]

    def act(self, action: Any = None) -> None:
        if self.crashed:
            return
        self.follow_road()
        _from, _to, idx = self.target_lane_index  # a new segment may have fewer lanes: stay on this one
        if idx >= len(self.road.network.graph.get(_from, {}).get(_to, [])):
            self.target_lane_index = self.lane_index
        dt = self.dt  # one simulation frame: the command is clipped so the next frame stays in the band
        accel = self.accel_cmd
        if accel > 0 and self.speed + accel * dt > self.limits.speed_max:
            accel = max(0.0, (self.limits.speed_max - self.speed) / dt)
        for lane_index in {self.lane_index, self.target_lane_index}:
            front, _ = self.road.neighbour_vehicles(self, lane_index)
            if front is not None and front is not self.ego:
                interaction = self.acceleration(self, front) - self.acceleration(self, None) + self.COMFORT_ACC_MAX
                accel = min(accel, max(float(interaction), -MAX_LONG_ACCEL))
        if accel < 0 and self.speed + accel * dt < self.limits.speed_min:
            accel = min(0.0, (self.limits.speed_min - self.speed) / dt)
        steer = float(
            np.clip(self.steering_control(self.target_lane_index), -self.MAX_STEERING_ANGLE, self.MAX_STEERING_ANGLE)
        )
        Vehicle.act(self, {"steering": steer, "acceleration": float(accel)})


def observe(att: ClosedLoopVehicle, ego: Any, road: Any) -> JointState:
    """The joint state in the attacker's lane frame (the ego first, then the nearest others)."""
    lane = att.lane
    s_a, d_a = lane.local_coordinates(att.position)
    phi = lane.heading_at(s_a)
    c, s = np.cos(phi), np.sin(phi)
    v_a = att.speed * np.cos(att.heading - phi)

    def rel(v: Any) -> Rel:
        r = v.position - att.position
        return Rel(s=float(r @ [c, s]), d=float(r @ [-s, c]), dv=float(v.speed * np.cos(v.heading - phi) - v_a))

    near = sorted(
        (float(np.linalg.norm(v.position - att.position)), i, v)
        for i, v in enumerate(road.vehicles)
        if v is not att and v is not ego and np.linalg.norm(v.position - att.position) < OBS_RANGE_M
    )
    _from, _to, idx = att.lane_index
    ego_rel = rel(ego) if np.linalg.norm(ego.position - att.position) < OBS_RANGE_M else None
    return JointState(
        speed=float(v_a),
        offset=float(d_a),
        lane_id=int(idx),
        lanes=len(road.network.graph[_from][_to]),
        changing=att.target_lane_index != att.lane_index,
        ego=ego_rel,
        others=[rel(v) for _, _, v in near],
    )


class ClosedLoopAttacker:
    """One episode's closed-loop attacker: the policy, its limits, which vehicle it takes over (the
    `slot`-th nearest to the ego at t0) and its own random generator (seeded per episode, so an
    episode stays a pure function of its inputs)."""

    def __init__(
        self,
        policy: ClosedLoopPolicy,
        limits: ClosedLoopLimits | None = None,
        slot: int = 0,
        seed: int | np.random.SeedSequence | list[int] = 0,
    ) -> None:
        if slot < 0:
            raise ValueError(f"closed-loop attacker: slot={slot} must be >= 0")
        self.policy, self.limits, self.slot = policy, limits or ClosedLoopLimits(), slot
        self.rng = np.random.default_rng(seed)
        self.trajectory = AttackerTrajectory(policy="closed_loop")

    def decide(self, att: ClosedLoopVehicle, ego: Any, road: Any, interval_s: float, t: float) -> str:
        """Observe, mask, sample, command the vehicle and record the step."""
        state = observe(att, ego, road)
        phi = self.policy.features(state)
        mask = feasible_mask(state, self.limits, interval_s)
        check_some_feasible(mask, self.limits)
        action = ACTIONS[self.policy.sample(phi, mask, self.rng)]
        att.command(action)
        self.trajectory.t.append(round(float(t), 3))
        self.trajectory.features.append([float(x) for x in phi])  # exact: log_prob is recomputed from these
        self.trajectory.feasible.append(mask.tolist())
        self.trajectory.actions.append(action)
        return action
