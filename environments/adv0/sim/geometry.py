"""Ground truth the simulator does not give: time-to-collision, near misses and who was at fault.

Pure numpy over `VehicleState`s, no highway-env, so the rules can be tested on hand-built
collisions and audited from the geometry a `Collision` logs.

Frame convention (every function here): all states of one call are in ONE lane frame -- `s` along
the lane, `d` across it (positive to the right, highway-env's lane-id direction), `vx`/`vy` the
velocity along/across that lane, `heading` relative to the lane direction. On the straight highway
this is highway-env's world frame shifted; `highway.py` projects curved roads into the ego's lane.

Time-to-collision: each vehicle is a box with extents along s and d (length/width turned by its
heading). Under constant relative velocity the boxes collide when they overlap on both axes at
once; TTC is the first such time (0 while touching), capped at `TTC_HORIZON_S`. For a vehicle in
the ego's path (laterally overlapping, no lateral motion) this is exactly gap / closing speed; the
box form also sees a vehicle drifting laterally into the ego's path.

Fault (responsibility-sensitive, symmetric: the rules never ask which vehicle is the attacker):
1. In the same path for the whole history (`HISTORY_S`): a rear-end; the follower is at fault
   whatever the leader does (braking within the physical limits is allowed; the follower must keep
   a distance it can stop in). So a brake check of an established follower is the follower's fault.
2. Otherwise one of them entered the other's path (lateral overlap began) inside the history.
   Who moved: each vehicle's lateral displacement towards the other over `LATERAL_WINDOW_S` before
   the entry; the one that moved at least `DOMINANCE` times more (and at least `MOVED_M`) is the
   intruder; both moving comparably is shared fault.
   a. Side by side at entry (longitudinal overlap): a side swipe; the intruder is at fault. Hence an
      ego that swerves into a neighbour -- attacker or not -- is at fault, and so is an attacker
      that swerves into the ego. A "side contact = the attacker's fault" rule would be wrong.
   b. The intruder entered ahead with a gap shorter than the follower's safe gap
      (`SAFE_HEADWAY_S` of the follower's speed plus what it needs to brake to the leader's speed
      at `SAFE_DECEL`): an unsafe cut-in; the intruder is at fault, also when it then brakes (a
      cut-in-and-brake-check is the cutter's fault: the follower never had a safe gap).
   c. The intruder entered ahead with a safe gap: from then on a rear-end; the follower is at fault.
   d. The intruder entered behind and closed the gap: the intruder (the follower) is at fault.
3. Paths that cross (the lanes' headings more than `CROSSING_DEG` apart: a car swerving sharply on
   a straight road is not on a crossing path) where neither left its lane (moved
   less than `LEFT_LANE_M`), or lanes of different priority where neither moved: right of way. The
   lane with the lower priority yields; at equal priority the vehicle behind yields. "Moving
   laterally" is measured against each vehicle's own lane (`own_lateral_speed`), so following a
   curve is not a lateral move.

Rule versions (`FaultRule`; `FAULT_RULE` is the one the worlds use and the highway checks' protocol
names). "v1" is the rule the checks were first registered with. "v2" (session 28 amendment, docs/adv0.md) reads one more case: where neither
vehicle *steered* towards the other (rule 2's speeds) and the lanes are of equal priority, it
measures the lateral *displacement* in the shared frame over the same window, so a vehicle shoved
sideways by highway-env's collision impulse -- a wreck of an earlier crash, its heading unchanged --
is the one that entered, and rules 2a-2d apply to it. "v1" called that "unclear lateral entry", a
shared fault.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np

from environments.adv0.sim.scenario import NEAR_MISS_TTC_S, TTC_HORIZON_S, Fault, VehicleState

Party = Literal["ego", "other", "both"]
FaultRule = Literal["v1", "v2"]
FAULT_RULES: tuple[FaultRule, ...] = ("v1", "v2")

HISTORY_S = 3.0  # the audit window before contact; in path for all of it = an established follower
LATERAL_WINDOW_S = 1.0  # lateral displacement towards the other is compared over this long before entry
MOVED_M = 0.3  # lateral displacement below this is lane keeping, not a move
DOMINANCE = 2.0  # the intruder moved at least this many times more than the other
SAFE_HEADWAY_S = 1.0  # a follower's safe time gap
SAFE_DECEL = 4.0  # m/s^2: braking a follower may be expected to use to match a slower leader
SEPARATED_M = 0.5  # bumper gap above which two vehicles were not side by side at entry
CROSSING_DEG = 30.0  # headings further apart than this: crossing paths, not parallel lanes
LEFT_LANE_M = 1.5  # where paths cross, only a lateral move this large (leaving the lane) overrides right of way
FAULT_RULE: FaultRule = "v2"  # the registered checks' rule (in their protocol: the session-28 amendment)


# ---------------------------------------------------------------- time-to-collision
def box_extents(length: np.ndarray | float, width: np.ndarray | float,
                heading: np.ndarray | float) -> tuple[np.ndarray, np.ndarray]:
    """Full extents (along s, across d) of boxes turned by `heading` relative to the lane."""
    c, s = np.abs(np.cos(heading)), np.abs(np.sin(heading))
    return np.asarray(length * c + width * s), np.asarray(length * s + width * c)


def time_to_collision(rel_s: np.ndarray, rel_d: np.ndarray, rel_vs: np.ndarray, rel_vd: np.ndarray,
                      half_s: np.ndarray, half_d: np.ndarray, horizon: float = TTC_HORIZON_S) -> np.ndarray:
    """First time two boxes overlap on both axes at constant relative velocity, capped at `horizon`.

    rel_*: the other vehicle minus the ego (centres and velocities); half_*: the sum of the two
    half extents on each axis. Vectorised over the other vehicles; 0 where they already overlap."""
    enter = np.zeros(np.shape(rel_s))
    leave = np.full(np.shape(rel_s), np.inf)
    with np.errstate(divide="ignore", invalid="ignore"):
        for p, v, h in ((rel_s, rel_vs, half_s), (rel_d, rel_vd, half_d)):
            p, v, h = np.asarray(p, float), np.asarray(v, float), np.asarray(h, float)
            t1, t2 = (-h - p) / v, (h - p) / v  # +-inf (or nan at p = +-h) where v = 0: fixed below
            still = v == 0
            inside = np.abs(p) < h
            lo = np.where(still, np.where(inside, -np.inf, np.inf), np.minimum(t1, t2))
            hi = np.where(still, np.where(inside, np.inf, -np.inf), np.maximum(t1, t2))
            enter, leave = np.maximum(enter, lo), np.minimum(leave, hi)
    ttc = np.where(enter < leave, enter, horizon)
    return np.minimum(np.maximum(ttc, 0.0), horizon)


def _arrays(states: Sequence[VehicleState]) -> dict[str, np.ndarray]:
    keys = ("s", "d", "vx", "vy", "heading", "length", "width")
    return {k: np.array([getattr(v, k) for v in states], dtype=float) for k in keys}


def ttc_to_others(ego: VehicleState, others: Sequence[VehicleState], horizon: float = TTC_HORIZON_S) -> np.ndarray:
    """TTC from the ego to each other vehicle (all states in one lane frame)."""
    if not others:
        return np.zeros(0)
    o = _arrays(others)
    es, ed = box_extents(ego.length, ego.width, ego.heading)
    os_, od = box_extents(o["length"], o["width"], o["heading"])
    return time_to_collision(o["s"] - ego.s, o["d"] - ego.d, o["vx"] - ego.vx, o["vy"] - ego.vy,
                             (es + os_) / 2, (ed + od) / 2, horizon)


def min_ttc(ego: VehicleState, others: Sequence[VehicleState], horizon: float = TTC_HORIZON_S) -> float:
    """The smallest TTC from the ego to any other vehicle (the horizon when none is closing)."""
    ttc = ttc_to_others(ego, others, horizon)
    return float(ttc.min()) if ttc.size else horizon


def is_near_miss(min_ttc_s: float, crashed: bool) -> bool:
    """A near miss: the TTC dropped below `NEAR_MISS_TTC_S` but nothing was hit."""
    return (not crashed) and min_ttc_s < NEAR_MISS_TTC_S


# ---------------------------------------------------------------- fault attribution
def attribute_fault(ego: Sequence[VehicleState], other: Sequence[VehicleState], dt: float, *,
                    own_lateral_speed: tuple[Sequence[float], Sequence[float]] | None = None,
                    priority: tuple[Sequence[float], Sequence[float]] | None = None,
                    path_heading: tuple[Sequence[float], Sequence[float]] | None = None,
                    rule: FaultRule | None = None) -> tuple[Party, str]:
    """Who caused the contact at the last state of `ego` and `other` (equal-length histories in one
    lane frame, `dt` seconds apart): ("ego" | "other" | "both", the rule with its numbers).

    own_lateral_speed: each vehicle's lateral speed relative to the lane it was following at each
    step (default: `vy`, right on a straight road); a vehicle that follows a curving or crossing
    lane does not "move laterally" however it crosses the ego's frame. priority: each lane's right
    of way at each step (default: equal), used when paths cross or merge and nobody left its lane.
    path_heading: the heading of each vehicle's lane at each step, in any one frame (default: the
    vehicles' own headings); paths cross when these differ by more than `CROSSING_DEG`. rule: the
    version (default `FAULT_RULE`; see the module docstring)."""
    rule = FAULT_RULE if rule is None else rule
    if rule not in FAULT_RULES:
        raise ValueError(f"fault attribution: rule={rule!r} is not one of {FAULT_RULES}")
    n_steps = len(ego)
    if n_steps != len(other) or not n_steps:
        raise ValueError(f"fault attribution needs two histories of equal, non-zero length; got {len(ego)} and {len(other)}")
    if dt <= 0:
        raise ValueError(f"fault attribution: dt={dt} must be positive (seconds between states)")
    e, o = _arrays(ego), _arrays(other)
    e_ext_s, e_ext_d = box_extents(e["length"], e["width"], e["heading"])
    o_ext_s, o_ext_d = box_extents(o["length"], o["width"], o["heading"])
    lateral_overlap = np.abs(e["d"] - o["d"]) < (e_ext_d + o_ext_d) / 2
    k_in = n_steps - 1  # the contact state counts as overlapping: scan back for where the overlap began
    while k_in > 0 and lateral_overlap[k_in - 1]:
        k_in -= 1
    path_e, path_o = (np.asarray(h, float) for h in path_heading) if path_heading else (e["heading"], o["heading"])
    angle = float(np.degrees(np.abs(_wrap(path_e[k_in] - path_o[k_in]))))
    crossing = angle > CROSSING_DEG
    if k_in == 0 and not crossing:
        return _rear_end(e, o, n_steps - 1, f"in the same path for >= {(n_steps - 1) * dt:.1f} s")

    k0 = max(0, k_in - max(1, int(round(LATERAL_WINDOW_S / dt))))
    side = float(np.sign(o["d"][k0] - e["d"][k0]) or 1.0)  # +1: the other was to the ego's right
    lat_e, lat_o = (np.asarray(x, float) for x in own_lateral_speed) if own_lateral_speed else (e["vy"], o["vy"])
    moved_e = max(0.0, float(np.sum(lat_e[k0 + 1:k_in + 1]) * dt * side))
    moved_o = max(0.0, float(-np.sum(lat_o[k0 + 1:k_in + 1]) * dt * side))
    moves = (f"ego moved {moved_e:.2f} m, other {moved_o:.2f} m laterally towards each other in the "
             f"{(k_in - k0) * dt:.1f} s before their paths met")
    p_e, p_o = (float(p[k0]) for p in priority) if priority else (0.0, 0.0)
    if crossing and max(moved_e, moved_o) < LEFT_LANE_M:
        return _right_of_way(e, o, k_in, p_e, p_o, f"paths crossed at {angle:.0f} deg; {moves}")
    if moved_e < MOVED_M and moved_o < MOVED_M:
        if p_e != p_o:
            return _right_of_way(e, o, k_in, p_e, p_o, f"paths merged at {angle:.0f} deg; {moves}")
        vel_e, vel_o = float(lat_e[k_in] * side), float(-lat_o[k_in] * side)
        shifted = _shifted(e, o, k0, k_in, side) if rule == "v2" else None
        if shifted is not None:
            intruder: Party = shifted[0]
            moves += f"; {shifted[1]}"
        elif max(vel_e, vel_o) <= 0 or abs(vel_e - vel_o) < 0.1:
            return "both", f"unclear lateral entry: {moves}; neither moved laterally"
        else:
            intruder = "ego" if vel_e > vel_o else "other"
    elif moved_e >= DOMINANCE * moved_o:
        intruder = "ego"
    elif moved_o >= DOMINANCE * moved_e:
        intruder = "other"
    else:
        return "both", f"both moved laterally: {moves}"

    gap_in = abs(o["s"][k_in] - e["s"][k_in]) - (e_ext_s[k_in] + o_ext_s[k_in]) / 2
    if gap_in <= SEPARATED_M:
        return intruder, f"lateral intrusion: {intruder} moved into the other side by side; {moves}"
    intruder_ahead = (o["s"][k_in] > e["s"][k_in]) == (intruder == "other")
    if not intruder_ahead:
        return intruder, f"cut in behind: {intruder} entered {gap_in:.1f} m behind and closed the gap; {moves}"
    follower = "ego" if intruder == "other" else "other"
    v_f = float((e if follower == "ego" else o)["vx"][k_in])
    v_l = float((o if follower == "ego" else e)["vx"][k_in])
    safe = v_f * SAFE_HEADWAY_S + max(0.0, v_f**2 - v_l**2) / (2 * SAFE_DECEL)
    if gap_in < safe:
        return intruder, (f"unsafe cut-in: {intruder} entered {gap_in:.1f} m ahead of the follower "
                          f"(safe gap {safe:.1f} m at {v_f:.1f} vs {v_l:.1f} m/s); {moves}")
    return _rear_end(e, o, n_steps - 1,
                     f"after a safe cut-in ({intruder} entered {gap_in:.1f} m ahead, safe gap {safe:.1f} m)")


def _shifted(e: dict[str, np.ndarray], o: dict[str, np.ndarray], k0: int, k_in: int,
             side: float) -> tuple[Party, str] | None:
    """Rule v2: the vehicle displaced sideways towards the other in the shared frame over [k0, k_in]
    while neither steered (highway-env's collision impulse moves a wreck without turning it), when
    one displacement is at least `MOVED_M` and `DOMINANCE` times the other's; else None."""
    shift_e = max(0.0, float(e["d"][k_in] - e["d"][k0]) * side)
    shift_o = max(0.0, float(o["d"][k0] - o["d"][k_in]) * side)
    why = f"displaced without steering: ego {shift_e:.2f} m, other {shift_o:.2f} m towards each other"
    if shift_e >= MOVED_M and shift_e >= DOMINANCE * shift_o:
        return "ego", why
    if shift_o >= MOVED_M and shift_o >= DOMINANCE * shift_e:
        return "other", why
    return None


def _wrap(a: np.ndarray | float) -> np.ndarray:
    return (np.asarray(a) + np.pi) % (2 * np.pi) - np.pi


def _right_of_way(e: dict[str, np.ndarray], o: dict[str, np.ndarray], k: int, p_e: float, p_o: float,
                  why: str) -> tuple[Party, str]:
    """Paths that cross or merge: the lane with the lower priority yields; at equal priority the
    vehicle behind yields (the other is further ahead along its heading than it is along the
    other's: highway-env's own regulation rule)."""
    if p_e != p_o:
        loser: Party = "ego" if p_e < p_o else "other"
        return loser, f"right of way: {loser} (priority {min(p_e, p_o):g}) did not yield to priority {max(p_e, p_o):g}; {why}"
    rel = np.array([o["s"][k] - e["s"][k], o["d"][k] - e["d"][k]])
    ahead_of_e = float(rel @ [np.cos(e["heading"][k]), np.sin(e["heading"][k])])
    ahead_of_o = float(-rel @ [np.cos(o["heading"][k]), np.sin(o["heading"][k])])
    if abs(ahead_of_e - ahead_of_o) < 0.5:
        return "both", f"right of way: equal priority, arrived together; {why}"
    behind: Party = "ego" if ahead_of_e > ahead_of_o else "other"
    return behind, f"right of way: equal priority, {behind} was behind and did not yield; {why}"


def _rear_end(e: dict[str, np.ndarray], o: dict[str, np.ndarray], k: int, why: str) -> tuple[Party, str]:
    """The follower (the one behind at contact) is at fault."""
    follower: Party = "ego" if e["s"][k] < o["s"][k] else "other"
    closing = float(e["vx"][k] - o["vx"][k]) * (1 if follower == "ego" else -1)
    return follower, f"rear-end: {follower} behind, closing at {closing:.1f} m/s; {why}"


def fault_label(party: Party, other_id: str) -> Fault:
    """Map a party to the `Fault` an `EpisodeResult` records (the other's id names its role)."""
    if party == "ego":
        return "defender"
    if party == "both":
        return "shared"
    return "attacker" if other_id == "attacker" else "background"
