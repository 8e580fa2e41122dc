"""Avoidable triggers: does a scenario z leave the defender a physically possible escape? The
fault gate judges a crash after the fact (`geometry.attribute_fault`); this judges the trigger
before it is played, from the initial state alone (open loop, like `baselines.surrogate`), so an
attacker option can draw only attacks a careful driver could survive (`baselines.AvoidableSampler`).

The test (`escape_exists`): the attacker plays z's script exactly as the toy world does
(`toy_sim.attack_script` / `lateral_profile`), fired `gap_m` bumper-to-bumper ahead of the ego at
the relative speed the toy's positioning rule leaves it (its context speed difference pulled
towards 0 by at most DV_DOWN / DV_UP). A careful ego keeps its speed for `REACTION_S` after firing,
then brakes at the vehicle limit `EGO_BRAKE` (highway-env's ACC_MAX, the toy's ACC_LIMIT) to a
stop. The trigger is avoidable when the bumper gap stays > 0 at every instant the attacker overlaps
the ego's lane (|d| < a car's width). Braking is the only escape credited (the adjacent lane's
traffic is not in the context), so the test is on the safe side: a lane change might escape more.
A tailgate is always avoidable (the ego need only hold its speed: a rear-end is the tailgater's),
and a script outside the kinematic limits never is (it is infeasible, not an escape question).

The closed-loop gate (`escape_at_firing`, the option `adv0-avoidable-closed`, `--ablation
avoidable-closed`): the same question asked again at every step at which the world would fire the
trigger, on that step's actual state (positions, speeds, lateral offsets in the ego's lane frame)
and the script the world is about to play (`toy_sim.ToySim._fire`, `vehicles.AttackerVehicle`);
where it fails the attacker holds its position and asks again at the next step; one that never
passes is a withheld trigger (`EpisodeResult.trigger_withheld`).

May import: numpy, `environments.adv0.sim.scenario`, `environments.adv0.sim.geometry`, `environments.adv0.sim.toy_sim`.
"""

from __future__ import annotations

import numpy as np

from environments.adv0.sim.geometry import SAFE_DECEL, SAFE_HEADWAY_S
from environments.adv0.sim.scenario import FACTOR_NAMES, FACTORS, TRAIN_MANOEUVRES, Manoeuvre
from environments.adv0.sim.toy_sim import (
    ACC_LIMIT, ALL_MANOEUVRES, CUT_IN_REACTION_S, DV_DOWN, DV_UP, LANE_W, VEH_L, VEH_W, attack_script, lateral_profile,
)

REACTION_S = CUT_IN_REACTION_S  # a careful driver's reaction time after the attacker fires
EGO_BRAKE = ACC_LIMIT  # m/s^2: the hardest braking the ego's vehicle has
HORIZON_S = 12.0  # long enough for any script (<= 2 x 2 s hold plus a lane change) and a stop from 35 m/s
STEP_S = 0.05


def escape_exists(ego_speed: float, slots: np.ndarray, z_idx: np.ndarray,
                  manoeuvres: tuple[Manoeuvre, ...] = TRAIN_MANOEUVRES) -> np.ndarray:
    """(n,) bool: z leaves a careful ego a braking escape. `slots`: (S, 4) rows of the context,
    nearest first: present, lane offset (lanes, + = right), longitudinal offset (m), speed difference
    (m/s) -- `baselines._slots` of a context; `z_idx`: (n, F) factor indices (manoeuvre indexed in
    `manoeuvres`)."""
    z_all = np.atleast_2d(np.asarray(z_idx, dtype=np.int64))
    # the trigger time only delays the script: the test runs once per distinct rest of z
    z, back = np.unique(np.delete(z_all, FACTOR_NAMES.index("trigger_s"), axis=1), axis=0, return_inverse=True)
    z = np.insert(z, FACTOR_NAMES.index("trigger_s"), 0, axis=1)
    present = int(np.sum(slots[:, 0] > 0))
    slot = np.minimum(z[:, 0], max(present, 1) - 1)  # fewer vehicles: the world takes the farthest
    lane, dv_context = slots[slot, 1], slots[slot, 3]
    man = np.array([ALL_MANOEUVRES.index(m) for m in manoeuvres])[z[:, 1]]
    grid = {n: np.asarray(FACTORS[n], dtype=float) for n in ("intensity", "hold_s", "gap_m")}
    inten, hold, gap = grid["intensity"][z[:, 3]], grid["hold_s"][z[:, 4]], grid["gap_m"][z[:, 5]]
    d0 = lane * LANE_W
    kind, amp, dur, feasible, acc0, t_a, acc1, t_b = attack_script(man, inten, hold, d0)
    crash = _braking_escape_fails(float(ego_speed), np.clip(0.0, dv_context - DV_DOWN, dv_context + DV_UP), gap,
                                  kind, d0, amp, dur, acc0, t_a, acc1, t_b)
    tailgate = man == ALL_MANOEUVRES.index("tailgate")
    return np.asarray((feasible & (tailgate | ~crash))[back.reshape(-1)])


def _braking_escape_fails(v_ego: float, dv0: np.ndarray, gap: np.ndarray, kind: np.ndarray, d0: np.ndarray,
                          amp: np.ndarray, dur: np.ndarray, acc0: np.ndarray, t_a: np.ndarray, acc1: np.ndarray,
                          t_b: np.ndarray) -> np.ndarray:
    """(n,) bool: the careful ego's braking still meets the attacker in its lane (times run down the rows)."""
    t = script_times()
    d, _ = lateral_profile(kind, d0, amp, dur, t)
    a_att = np.where(t < t_a, acc0, np.where(t < t_b, acc1, 0.0))
    rel, _, _ = _careful_follow(np.full(len(gap), v_ego), np.maximum(v_ego + dv0, 0.0), gap + VEH_L, a_att,
                                np.full(len(gap), REACTION_S))
    return np.asarray(((np.abs(d) < VEH_W) & (rel - VEH_L <= 0.0)).any(axis=0))


# ---------------------------------------------------------------- the closed-loop gate
# What the gate asks, each figure the fault rule's own (`geometry.py`), so that a trigger it lets
# fire cannot end in a crash the fault rule charges to the attacker unless the world departs from
# these assumptions:
# - the ego owes a reaction only to a vehicle in its path and ahead of it: it holds its speed until
#   the attacker is there (at firing for one already there, else at the entry the script leads to), reacts
#   `REACTION_S` = 1 s later (the fault rule's `SAFE_HEADWAY_S`: a follower is owed one second of
#   headway to react in; the toy's `CUT_IN_REACTION_S` too) and then brakes at `EGO_BRAKE` = 6 m/s^2
#   (the vehicles' physical limit, highway-env's ACC_MAX): the escape has to be physically possible;
# - an attacker that enters the ego's path must enter at least the follower's safe gap ahead:
#   `SAFE_HEADWAY_S` of the ego's speed at entry plus what it needs to brake to the entrant's speed
#   at `SAFE_DECEL` = 4 m/s^2 -- the cut-in the fault rule charges to the cutter is never one the
#   gate lets happen; entering side by side (a side swipe) is never escapable, also not for an ego
#   that slows at up to `SAFE_DECEL` before the entry (for traffic ahead: nothing obliges it to hold
#   its speed for a car in the next lane);
# - any contact between the careful ego and the scripted attacker fails it: the ego running into the
#   attacker is the escape failing; the attacker running into an ego that holds its speed (a
#   tailgate, an entry behind) is a crash the fault rule charges to the attacker by construction,
#   which the gate withholds as well. The careful ego never brakes for an attacker behind it;
# - after its script the attacker holds its speed (the worlds hand it back to IDM, which does not
#   brake into a free lane).
ENTRY_HEADWAY_S = SAFE_HEADWAY_S
ENTRY_DECEL = SAFE_DECEL


def script_times() -> np.ndarray:
    """(T, 1): the times after firing at which a script is laid out (`STEP_S` apart, `HORIZON_S` long)."""
    return np.arange(0.0, HORIZON_S, STEP_S)[:, None]


def _careful_follow(v_ego: np.ndarray, v_att: np.ndarray, rel0: np.ndarray, a_att: np.ndarray,
                    t_brake: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(T, n) each: the attacker's centre minus the careful ego's along the lane (from `rel0` at
    firing), the attacker's speed and the ego's -- the attacker accelerating by `a_att` (T, n), the
    ego holding its speed until `t_brake` (n,) and braking at EGO_BRAKE from then on.
    Speeds stop at 0 and never reverse: a clipped integrator is the unclipped sum reflected at 0
    (v_k = S_k - min(0, min_j<=k S_j)), exact also when an attacker brakes to a stop and then
    accelerates."""
    t = script_times()

    def speeds(v0: np.ndarray, a: np.ndarray) -> np.ndarray:
        free = v0 + np.cumsum(a, axis=0) * STEP_S
        return free - np.minimum(np.minimum.accumulate(free, axis=0), 0.0)

    v_a = speeds(v_att, a_att)
    v_e = speeds(v_ego, np.broadcast_to(np.where(t < t_brake, 0.0, -EGO_BRAKE), a_att.shape))
    closing = 0.5 * (v_a[1:] + v_a[:-1] - v_e[1:] - v_e[:-1]) * STEP_S
    return rel0 + np.vstack([np.zeros((1, len(rel0))), np.cumsum(closing, axis=0)]), v_a, v_e


def escape_at_firing(v_ego: np.ndarray, v_att: np.ndarray, rel_s: np.ndarray, d_plan: np.ndarray,
                     a_plan: np.ndarray) -> np.ndarray:
    """(n,) bool: at this step the trigger leaves the ego an escape the fault rule would expect of it.

    The state at the firing step, in the ego's lane frame: the ego's and the attacker's speeds (m/s),
    `rel_s` the attacker's centre minus the ego's along the lane (m, + = ahead). The script the world
    is about to play, laid out on `script_times()`: `d_plan` (T, n) the attacker's lateral offset
    from the ego (m; the ego keeps its lane), `a_plan` (T, n) its longitudinal acceleration (m/s^2).
    False when the careful ego and the scripted attacker still touch, or the attacker enters the ego's
    path closer than the safe gap (the assumptions are stated above `ENTRY_HEADWAY_S`)."""
    in_path = np.abs(d_plan) < VEH_W
    entry = in_path & ~np.vstack([in_path[:1], in_path[:-1]])  # the step the overlap begins (not at firing)
    k = np.argmax(entry, axis=0)
    entered = entry.any(axis=0)
    cols = np.arange(len(k))
    v_e0, v_a0, rel0 = (np.asarray(x, dtype=float) for x in (v_ego, v_att, rel_s))
    # the ego owes a reaction only to a vehicle in its path and ahead of it: from firing if it is
    # there already, else from its entry (until then the ego holds its speed, as the fault rule lets it)
    coasting, _, _ = _careful_follow(v_e0, v_a0, rel0, a_plan, np.full(len(k), np.inf))
    ahead = np.where(in_path[0], rel0, coasting[k, cols]) > 0.0
    t_brake = np.where(ahead, REACTION_S + np.where(in_path[0], 0.0, k * STEP_S), np.inf)
    rel, speed_att, speed_ego = _careful_follow(v_e0, v_a0, rel0, a_plan, t_brake)
    contact = (in_path & (np.abs(rel) < VEH_L)).any(axis=0)
    rel_in = rel[k, cols]
    v_e_in, v_a_in = speed_ego[k, cols], speed_att[k, cols]  # the speeds at entry
    safe_gap = v_e_in * ENTRY_HEADWAY_S + np.maximum(v_e_in**2 - v_a_in**2, 0.0) / (2 * ENTRY_DECEL)
    # side by side at entry for an ego that holds its speed or slows at up to ENTRY_DECEL meanwhile
    # (for traffic ahead, say): the attacker may then sit anywhere from rel_in to rel_in + lag
    tau = k * STEP_S
    lag = np.where(tau * ENTRY_DECEL < v_e0, 0.5 * ENTRY_DECEL * tau**2, v_e0 * tau - v_e0**2 / (2 * ENTRY_DECEL))
    side_by_side = (rel_in < VEH_L) & (rel_in + lag > -VEH_L)
    unsafe_entry = entered & (side_by_side | ((rel_in >= VEH_L) & (rel_in - VEH_L < safe_gap)))
    return np.asarray(~contact & ~unsafe_entry)


def toy_escape(v_ego: np.ndarray, v_att: np.ndarray, rel_s: np.ndarray, d_ego: np.ndarray, d0: np.ndarray,
               kind: np.ndarray, amp: np.ndarray, dur: np.ndarray, acc0: np.ndarray, t_a: np.ndarray,
               acc1: np.ndarray, t_b: np.ndarray) -> np.ndarray:
    """`escape_at_firing` for the toy world (`toy_sim.ToySim`'s `escape_test`): the script is
    `toy_sim.attack_script`'s arrays, (n,) each, fired from lateral position `d0`."""
    t = script_times()
    d, _ = lateral_profile(kind, d0, amp, dur, t)
    return escape_at_firing(v_ego, v_att, rel_s, d - d_ego, np.where(t < t_a, acc0, np.where(t < t_b, acc1, 0.0)))
