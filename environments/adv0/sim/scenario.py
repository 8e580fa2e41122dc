"""What every ADV-0 part shares: the attacker's scenario space, an episode's typed result, the
defender's return and the driver's meta-actions.

The attacker acts once per episode: it draws scenario parameters z (which nearby vehicle it takes
over, the manoeuvre, when and how hard) and the taken-over vehicle plays that script. Every factor
is a small discrete set, so a policy over z has exact log-probabilities and, in the toy world, the
defender's return J(z) can be enumerated over the whole space (`SPACE_SIZE` points).

Worlds (`toy.py`, `highway.py`) run `Episode`s: a pure function of (family, seed, z, defender
actions). Everything downstream (the attacker's utility, the metrics, the claim checks) reads only
`EpisodeResult`, so the toy world and highway-env are interchangeable behind it.

May import: the standard library, numpy, pydantic and `harness`.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from typing import Literal, Protocol

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

# ---------------------------------------------------------------- the attacker's scenario space
Manoeuvre = Literal[
    "cut_in", "cut_in_brake", "brake_check", "tailgate", "swerve_return",  # training manoeuvres
    "merge_squeeze", "yield_violation",  # held out: training never draws them
]
TRAIN_MANOEUVRES: tuple[Manoeuvre, ...] = ("cut_in", "cut_in_brake", "brake_check", "tailgate", "swerve_return")
HELD_OUT_MANOEUVRES: tuple[Manoeuvre, ...] = ("merge_squeeze", "yield_violation")

# One tuple of allowed values per factor, in this order. `slot` ranks the background vehicles by
# distance to the ego at t0 (0 = nearest); `gap_m` is the longitudinal gap to the ego at which the
# manoeuvre fires once `trigger_s` has passed (the factor that decides whether it can succeed).
FACTORS: dict[str, tuple[float | int | str, ...]] = {
    "slot": (0, 1, 2, 3, 4),
    "manoeuvre": TRAIN_MANOEUVRES,
    "trigger_s": (1.0, 2.0, 3.0, 4.0),
    "intensity": (0.25, 0.5, 0.75, 1.0),  # fraction of the feasible acceleration / lateral rate
    "hold_s": (0.5, 1.0, 2.0),
    "gap_m": (5.0, 10.0, 15.0, 20.0, 30.0),
}
FACTOR_NAMES = tuple(FACTORS)
FACTOR_SIZES = tuple(len(v) for v in FACTORS.values())
SPACE_SIZE = int(np.prod(FACTOR_SIZES))

# Hard feasibility limits (SAGE's kinematic rejection thresholds): a script that would need more is
# clipped by the world and flagged infeasible in its result.
MAX_LONG_ACCEL = 7.0  # m/s^2, braking or accelerating
MAX_LAT_ACCEL = 6.0  # m/s^2
NEAR_MISS_TTC_S = 1.5  # min TTC below this (without a collision) is a near miss
TTC_HORIZON_S = 10.0  # TTC is capped here (no closing vehicle = the horizon)


class ScenarioParams(BaseModel):
    """One attacker draw z. Values must be on their factor's grid (`ScenarioParams.check`)."""

    model_config = ConfigDict(frozen=True)
    slot: int
    manoeuvre: Manoeuvre
    trigger_s: float
    intensity: float
    hold_s: float
    gap_m: float
    # Not a factor: how the world plays the trigger. True = the closed-loop escape gate (`escape.py`):
    # the world fires only at a step whose state leaves the ego an escape, else the attacker holds.
    escape_gate: bool = False

    def index(self, manoeuvres: tuple[Manoeuvre, ...] = TRAIN_MANOEUVRES) -> tuple[int, ...]:
        """The factor indices of z (the manoeuvre indexed in `manoeuvres`)."""
        out = []
        for name in FACTOR_NAMES:
            values = manoeuvres if name == "manoeuvre" else FACTORS[name]
            out.append(values.index(getattr(self, name)))
        return tuple(out)

    @classmethod
    def from_index(cls, idx: tuple[int, ...], manoeuvres: tuple[Manoeuvre, ...] = TRAIN_MANOEUVRES) -> "ScenarioParams":
        values = {
            name: (manoeuvres if name == "manoeuvre" else FACTORS[name])[i] for name, i in zip(FACTOR_NAMES, idx)
        }
        return cls.model_validate(values)

    @classmethod
    def check(cls, values: dict[str, object], manoeuvres: tuple[Manoeuvre, ...] = TRAIN_MANOEUVRES + HELD_OUT_MANOEUVRES) -> "ScenarioParams":
        """Validate user input: one ValueError naming the factor, the value and the allowed grid."""
        for name in FACTOR_NAMES:
            allowed = manoeuvres if name == "manoeuvre" else FACTORS[name]
            if name not in values:
                raise ValueError(f"scenario parameter {name!r} is missing; allowed: {', '.join(map(str, allowed))}")
            if values[name] not in allowed:
                raise ValueError(
                    f"scenario parameter {name}={values[name]!r} is outside its box; allowed: {', '.join(map(str, allowed))}"
                )
        return cls.model_validate(values)


def all_scenarios(manoeuvres: tuple[Manoeuvre, ...] = TRAIN_MANOEUVRES) -> np.ndarray:
    """Every z as a row of factor indices, shape (SPACE_SIZE, len(FACTORS)), in C order."""
    sizes = [len(manoeuvres) if n == "manoeuvre" else len(FACTORS[n]) for n in FACTOR_NAMES]
    return np.array(list(itertools.product(*(range(s) for s in sizes))), dtype=np.int64)


# ---------------------------------------------------------------- the attacker's context
CONTEXT_SLOTS = 5
CONTEXT_DIM = 1 + 4 * CONTEXT_SLOTS


def context_vector(ego_speed: float, slots: Sequence[tuple[float, float, float]]) -> np.ndarray:
    """The attacker's view of the initial state, shape (CONTEXT_DIM,): ego speed / 30, then per slot
    (nearest first, CONTEXT_SLOTS of them): present, lane offset (lanes, + = right), longitudinal
    offset / 50 m, speed difference / 10 m/s. Missing slots are zeros. Every world builds it here."""
    out = np.zeros(CONTEXT_DIM)
    out[0] = ego_speed / 30.0
    for k, (lane, ds, dv) in enumerate(list(slots)[:CONTEXT_SLOTS]):
        out[1 + 4 * k: 5 + 4 * k] = (1.0, lane, ds / 50.0, dv / 10.0)
    return out


# ---------------------------------------------------------------- scenario families (worlds)
Family = Literal[
    "highway",  # training: highway-fast class, 3 lanes, 12 vehicles
    "highway-dense",  # held out: 4 lanes, density 2.0
    "merge", "roundabout", "intersection",  # held out: other maps
    "aggressive",  # held out: highway with aggressive background vehicles
    "toy",  # the vectorised numpy world
]
TRAIN_FAMILIES: tuple[Family, ...] = ("highway",)
HELD_OUT_FAMILIES: tuple[Family, ...] = ("highway-dense", "merge", "roundabout", "intersection", "aggressive")
# Families declared in files (`families.py`) that are held out, filled as they are registered: the
# metrics' held-out breakdown must see them without importing highway-env.
DATA_HELD_OUT: set[str] = set()

# The driver's meta-actions (highway-env's DiscreteMetaAction names, in its index order).
META_ACTIONS = ("LANE_LEFT", "IDLE", "LANE_RIGHT", "FASTER", "SLOWER")


# ---------------------------------------------------------------- what an episode yields
Fault = Literal["defender", "attacker", "background", "shared"]
# The other vehicle of a defender failure's contact: the attacker, background traffic (a static
# obstacle included), or "unknown" (a record that does not name it).
ContactParty = Literal["attacker", "background", "unknown"]
CONTACT_PARTIES: tuple[ContactParty, ...] = ("attacker", "background", "unknown")


class VehicleState(BaseModel):
    """One vehicle at one step in the lane frame of the ego's lane: `s` along the lane, `d` across,
    and `vx`/`vy`/`heading` relative to that lane's direction (on a curved road -- roundabout,
    intersection -- that is what TTC and fault need; on the straight highway it is the world
    frame). `x`/`y` are world coordinates, kept for the audit. In `DriverView.neighbours`, `s` and
    `d` are relative to the ego (positive `s` = ahead)."""

    id: str  # "ego", "attacker", "bg:3"
    x: float
    y: float
    s: float
    d: float
    vx: float
    vy: float
    heading: float
    lane: str  # highway-env lane index, e.g. "0-1-2"
    length: float = 5.0
    width: float = 2.0


class Collision(BaseModel):
    t: float  # seconds from the start
    # the vehicle the ego hit ("attacker", "bg:3", "obstacle"); "" only in a record written without
    # it, which `failure_party` reads as "unknown", never as either side
    other: str = ""
    fault: Fault
    rule: str  # which geometric rule decided the fault, e.g. "rear-end: ego behind, closing"
    geometry: list[VehicleState]  # ego and other over the last steps before contact (audit trail)


class AttackerTrajectory(BaseModel):
    """A closed-loop attacker's decisions (`closed_loop.py`), one entry per decision: the time, the
    policy's features, which actions were feasible, and the action it chose -- enough to recompute
    the trajectory's exact log-probability under any policy of the same shape."""

    policy: str
    t: list[float] = Field(default_factory=list)
    features: list[list[float]] = Field(default_factory=list)
    feasible: list[list[bool]] = Field(default_factory=list)
    actions: list[str] = Field(default_factory=list)


class EpisodeResult(BaseModel):
    """Everything the metrics, the attacker's utility and the checks need from one episode."""

    family: str  # a built-in `Family`, or a family file's name (`families.py`)
    seed: int
    attack: ScenarioParams | None  # None: normal traffic
    defender: str
    steps: int
    duration_s: float
    crashed: bool
    collision: Collision | None = None
    ttc: list[float] = Field(default_factory=list)  # per policy step, capped at TTC_HORIZON_S
    min_ttc: float = TTC_HORIZON_S
    near_miss: bool = False  # min_ttc < NEAR_MISS_TTC_S and no collision
    mean_speed: float = 0.0  # m/s
    distance_m: float = 0.0  # progress along the road
    reward: float = 0.0  # the defender's return J (see `defender_return`)
    attack_feasible: bool = True  # False when the script exceeded the feasibility limits (clipped)
    attack_fired: bool = False  # the manoeuvre's trigger condition was met
    trigger_withheld: bool = False  # the escape gate held a ready trigger and it never fired (`escape.py`)
    attacker_kinematics: list[tuple[float, float]] = Field(default_factory=list)  # (a_long, a_lat) per step
    actions: list[str] = Field(default_factory=list)  # the defender's meta-actions (empty for a planner)
    invalid_actions: int = 0
    frames: list[str] = Field(default_factory=list)  # relative paths of filmstrip PNGs (failures only)
    attacker_trajectory: AttackerTrajectory | None = None  # the closed-loop attacker's steps (None: one-shot or none)

    @property
    def defender_failure(self) -> bool:
        """A crash that counts against the defender: attacker-at-fault crashes never do."""
        return self.crashed and self.collision is not None and self.collision.fault in ("defender", "shared")

    @property
    def failure_party(self) -> ContactParty | None:
        """The other vehicle of a defender failure's contact (None: no defender failure). A reading aid
        beside the failure rates (session 28: failures with background traffic are not ones the
        attacker provoked), not part of any judged condition."""
        if not self.defender_failure or self.collision is None:
            return None
        other = self.collision.other
        if other == "attacker":
            return "attacker"
        return "background" if other.startswith("bg:") or other == "obstacle" else "unknown"



def failures_by_party(results: Iterable[EpisodeResult]) -> dict[str, int]:
    """Defender failures counted by the other vehicle of the contact, every party present (0 if none)."""
    counts: dict[str, int] = dict.fromkeys(CONTACT_PARTIES, 0)
    for r in results:
        if (party := r.failure_party) is not None:
            counts[party] += 1
    return counts


def party_text(counts: Mapping[str, int], failures: int | None = None) -> str:
    """"with the attacker F1 / with background F2", and " / unknown F3" when any is unknown. Given the
    total `failures`, those `counts` do not account for are unknown: a record saved before the split
    was (an empty `counts`) reads as all unknown, never as either side."""
    attacker, background, unknown = (counts.get(p, 0) for p in CONTACT_PARTIES)
    if failures is not None:
        unknown += max(failures - attacker - background - unknown, 0)
    return f"with the attacker {attacker} / with background {background}" + (f" / unknown {unknown}" if unknown else "")


def defender_return(crashed_at_fault: bool, mean_speed: float, distance_m: float, duration_s: float, *,
                    speed_range: tuple[float, float] = (20.0, 30.0)) -> float:
    """The defender's objective J in [-1, 1]: progress (the speed reward of highway-env, mapped from
    `speed_range` to [0, 1]) minus a unit penalty for a crash it is at fault for. The attacker's
    utility is -J, gated on fault, so this one function is both players' objective."""
    lo, hi = speed_range
    progress = float(np.clip((mean_speed - lo) / (hi - lo), 0.0, 1.0))
    return progress - (1.0 + progress) * float(crashed_at_fault)


# ---------------------------------------------------------------- the motion-planner defender
class IdmParams(BaseModel):
    """An IDM/MOBIL ego's parameters, each bounded by its Field (the box CEM searches). The
    defaults are deliberately under-cautious (short time headway), so tuning has room to help."""

    model_config = ConfigDict(frozen=True)
    time_wanted: float = Field(0.6, ge=0.3, le=3.0, description="desired time headway (s)")
    distance_wanted: float = Field(5.0, ge=2.0, le=15.0, description="jam distance (m)")
    comfort_acc_max: float = Field(3.0, ge=0.5, le=6.0, description="max acceleration (m/s^2)")
    comfort_acc_min: float = Field(-5.0, ge=-MAX_LONG_ACCEL, le=-1.0, description="max comfortable braking (m/s^2)")
    politeness: float = Field(0.0, ge=0.0, le=1.0, description="MOBIL politeness")
    lane_change_min_gain: float = Field(0.2, ge=0.0, le=2.0, description="MOBIL min acceleration gain (m/s^2)")
    target_speed: float = Field(30.0, ge=15.0, le=35.0, description="desired speed (m/s)")

    def vector(self) -> np.ndarray:
        return np.array([getattr(self, n) for n in type(self).model_fields], dtype=float)

    @classmethod
    def bounds(cls) -> tuple[np.ndarray, np.ndarray]:
        """(low, high) of every field, in field order: the box CEM samples from."""
        lo, hi = [], []
        for f in cls.model_fields.values():
            meta = {type(m).__name__: m for m in f.metadata}
            lo.append(float(meta["Ge"].ge))
            hi.append(float(meta["Le"].le))
        return np.array(lo), np.array(hi)

    @classmethod
    def from_vector(cls, v: np.ndarray) -> "IdmParams":
        lo, hi = cls.bounds()
        v = np.clip(np.asarray(v, dtype=float), lo, hi)
        return cls.model_validate(dict(zip(cls.model_fields, map(float, v))))


# ---------------------------------------------------------------- the interfaces
class DriverView(BaseModel):
    """What a driver sees at one policy step (the LLM driver reads `text`; the DQN `features`)."""

    t: float
    ego_speed: float
    ego_lane: int  # 0 = leftmost
    lanes: int
    neighbours: list[VehicleState]  # nearest first, at most 6
    available: list[str]  # meta-actions legal now (no LANE_LEFT in the leftmost lane, ...)
    features: list[list[float]] = Field(default_factory=list)  # highway-env's Kinematics observation

    def text(self) -> str:
        lines = [f"t={self.t:.1f}s, you drive at {self.ego_speed:.1f} m/s in lane {self.ego_lane} of {self.lanes} (0 = leftmost)."]
        for v in self.neighbours:
            rel = v.s
            where = "ahead" if rel >= 0 else "behind"
            lines.append(f"- {v.id}: lane {v.lane}, {abs(rel):.0f} m {where}, speed {np.hypot(v.vx, v.vy):.1f} m/s")
        lines.append("Available actions: " + ", ".join(self.available))
        return "\n".join(lines)


class Episode(Protocol):
    """One running episode. `step(None)` lets a planner ego (IDM/MOBIL) drive itself. A world
    module exposes `start_episode(family, seed, attack, planner=None, frames=False) -> Episode`
    (planner: the ego is an IDM/MOBIL vehicle with these parameters instead of taking actions)."""

    done: bool

    def view(self) -> DriverView: ...

    def step(self, action: str | None) -> None: ...

    def result(self) -> EpisodeResult: ...

    def close(self) -> None: ...
