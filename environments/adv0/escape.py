"""Avoidable triggers: does a scenario z leave the defender a physically possible escape? The
fault gate judges a crash after the fact (`geometry.attribute_fault`); this judges the trigger
before it is played, from the initial state alone (open loop, like `baselines.surrogate`), so an
attacker option can draw only attacks a careful driver could survive (`baselines.AvoidableAdv0`).

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

May import: numpy, `environments.adv0.scenario`, `environments.adv0.toy_sim`.
"""

from __future__ import annotations

import numpy as np

from environments.adv0.scenario import FACTOR_NAMES, FACTORS, TRAIN_MANOEUVRES, Manoeuvre
from environments.adv0.toy_sim import (
    ACC_LIMIT, ALL_MANOEUVRES, CUT_IN_REACTION_S, DV_DOWN, DV_UP, LANE_W, VEH_W, attack_script, lateral_profile,
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
    return (feasible & (tailgate | ~crash))[back.reshape(-1)]


def _braking_escape_fails(v_ego: float, dv0: np.ndarray, gap: np.ndarray, kind: np.ndarray, d0: np.ndarray,
                          amp: np.ndarray, dur: np.ndarray, acc0: np.ndarray, t_a: np.ndarray, acc1: np.ndarray,
                          t_b: np.ndarray) -> np.ndarray:
    """(n,) bool: the careful ego's braking still meets the attacker in its lane. Times run down the
    rows. Both speeds only fall once the script starts (no script but the tailgate's, which never
    gets here, accelerates), so a speed clipped at 0 stays there and a cumulative sum is exact."""
    t = np.arange(0.0, HORIZON_S, STEP_S)[:, None]
    d, _ = lateral_profile(kind, d0, amp, dur, t)
    a_att = np.where(t < t_a, acc0, np.where(t < t_b, acc1, 0.0))
    a_ego = np.where(t < REACTION_S, 0.0, -EGO_BRAKE)
    v_a = np.maximum(np.maximum(v_ego + dv0, 0.0) + np.cumsum(a_att, axis=0) * STEP_S, 0.0)
    v_e = np.maximum(v_ego + np.cumsum(a_ego, axis=0) * STEP_S, 0.0)
    closing = np.vstack([np.zeros((1, len(gap))), 0.5 * (v_a[1:] + v_a[:-1] - v_e[1:] - v_e[:-1]) * STEP_S])
    s_gap = gap + np.cumsum(closing, axis=0)
    return ((np.abs(d) < VEH_W) & (s_gap <= 0.0)).any(axis=0)
