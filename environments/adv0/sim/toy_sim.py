"""The toy world's simulator (`toy.py` is the world: enumeration over z and the `Episode` protocol):
the state layout, the initial road of a seed, the attacker's context, and `ToySim`, a batch of
episodes stepped together in numpy.

The road: two straight lanes, 4 m wide; the ego drives the right lane (lane 1, d = 0; d grows to the
right as in `geometry.py`, so the left lane is at d = -4). Five background vehicles, placed by the
seed (`initial_states`), are longitudinal IDM followers that never change lane; the ego starts at
27 m/s on a free stretch of its lane, faster than the traffic it passes. The ego is an IDM follower
with the defender's `IdmParams` (longitudinal only: MOBIL's politeness and lane-change gain do
nothing here) that perceives its leader `EGO_DELAY_S` (0.4 s) late, a driver's reaction time --
without it an instantaneous IDM out-brakes every script and the space holds no defender failure.
Only the ego's collisions are simulated: other vehicles pass through each other (a background car
that follows a cut-in attacker brakes for it by IDM, it just cannot crash into it).

The attacker takes over the background vehicle of rank `slot` (by distance to the ego at t0) and
plays z's script (see `attack_script`): before firing it steers its speed towards its firing position
(`gap_m` bumper-to-bumper ahead of the ego; behind it for `tailgate`), still an IDM follower in its
lane, at most 3 m/s^2, up to 6 m/s faster but never more than 2 m/s slower than its own desired
speed (it lets a faster ego come to it; no crawling decoys); it fires at the first step after
`trigger_s` at which its gap reaches `gap_m`; an attacker that never gets there never fires (the
draw was a dud, not an error). Lateral moves are cosine
profiles whose peak lateral speed is `intensity` times the one that reaches MAX_LAT_ACCEL on a full
lane change; braking is `intensity` times MAX_LONG_ACCEL. A `swerve_return` goes out and back
within 2 * hold_s: short holds demand more than MAX_LAT_ACCEL, so the world shrinks the swerve to
the limit and flags the draw infeasible (the only kinematically infeasible scripts here).

Fault, from geometry alone (the ego never moves laterally, so whoever entered the ego's path moved
into it): a contact less than `CUT_IN_REACTION_S` after the other vehicle's lateral overlap with
the ego began is the entrant's fault -- it cut into a gap too small to react to (a side-by-side
intrusion is the 0 s case); any other contact is a rear-end and the vehicle behind is at fault.
Simpler than `geometry.attribute_fault` (which asks for a safe headway at entry): here a cut-in
that leaves the ego one second to react is the ego's problem.

TTC is the ego's to the vehicles laterally overlapping it ahead (gap / closing speed), capped at
TTC_HORIZON_S. The defender's return J is `scenario.defender_return` (vectorised in
`defender_returns`). A batch is a pure function of (seeds, z, defender) and the ego accelerations
passed to `step`; there is no other randomness.

May import: numpy, `environments.adv0.sim.scenario` (the context layout too).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from environments.adv0.sim.scenario import context_vector
from environments.adv0.sim.scenario import (
    FACTOR_NAMES, FACTORS, HELD_OUT_MANOEUVRES, MAX_LAT_ACCEL, MAX_LONG_ACCEL, TRAIN_MANOEUVRES, TTC_HORIZON_S, Fault,
    IdmParams, Manoeuvre,
)

DT = 0.2  # s, simulation step
DURATION_S = 12.0
STEPS = int(round(DURATION_S / DT))
LANE_W, VEH_L, VEH_W = 4.0, 5.0, 2.0
LEFT_D = -LANE_W  # the other lane's centre
N_BG = 5
EGO_SPEED0 = 27.0
ACC_LIMIT = 6.0  # m/s^2, every IDM vehicle's physical bound (highway-env's ACC_MAX); scripts may use MAX_LONG_ACCEL
BG_IDM = (1.5, 5.0, 3.0, 5.0)  # background IDM: time headway (s), jam distance (m), max acc, comfortable braking
V_LAT_FULL = float(np.sqrt(MAX_LAT_ACCEL * LANE_W / 2))  # peak lateral speed of a full-lane move at MAX_LAT_ACCEL
K_POS = 0.5  # firing-position controller: 1/s per metre of gap error
DV_UP, DV_DOWN = 6.0, 2.0  # m/s: an attacker speeds up at most this much over its own desired speed to reach
# its position, but slows at most DV_DOWN below it (it lets a faster ego come to it; no crawling decoys)
POSITION_ACC = 3.0  # m/s^2: the attacker moves to its firing position like traffic does, comfortably
EGO_DELAY_S = 0.4  # the IDM ego's perception delay
EGO_DELAY_STEPS = int(round(EGO_DELAY_S / DT))
FIRE_TOL_M = 1.0
CUT_IN_REACTION_S = 1.0  # a contact this soon after the other entered the ego's path is the entrant's fault
ALL_MANOEUVRES: tuple[Manoeuvre, ...] = TRAIN_MANOEUVRES + HELD_OUT_MANOEUVRES
FAULT_CODES: tuple[Fault | None, ...] = (None, "defender", "attacker", "background")
RULES = ("", "lateral intrusion", "unsafe cut-in", "rear-end: ego behind", "rear-end: other behind")


# ---------------------------------------------------------------- initial states
@dataclass(frozen=True)
class ToyInit:
    """Initial states of a batch of episodes, ego in column 0: (B, 1 + N_BG) each."""

    s: np.ndarray
    d: np.ndarray
    v: np.ndarray
    v0: np.ndarray  # background desired speeds (the ego's column is ignored: IdmParams.target_speed)

    def take(self, rows: np.ndarray) -> "ToyInit":
        return ToyInit(self.s[rows], self.d[rows], self.v[rows], self.v0[rows])


def initial_states(seeds: Sequence[int]) -> ToyInit:
    """The seeds' initial road: each background vehicle in the left lane with probability 0.6,
    positions >= 30 m apart within a lane, none closer than 60 m ahead of the ego in its own lane
    (the ego starts on a free lane, faster than the traffic it passes), speeds 20-27 m/s (each its
    own desired speed); the ego at 27 m/s."""
    rows = []
    for seed in seeds:
        if int(seed) != seed or seed < 0:
            raise ValueError(f"toy seed {seed!r} must be a non-negative integer")
        rng = np.random.default_rng(int(seed))
        placed: list[tuple[float, float]] = [(0.0, 0.0)]  # (s, d) with the ego first
        while len(placed) < 1 + N_BG:
            d = LEFT_D if rng.random() < 0.6 else 0.0
            s = float(rng.uniform(-60.0, 110.0))
            if d == 0.0 and 0 < s < 60.0:
                continue
            if all(abs(s - s2) >= 30.0 for s2, d2 in placed if d2 == d):
                placed.append((s, d))
        speeds = rng.uniform(20.0, 27.0, N_BG)
        rows.append((placed, speeds))
    s_all = np.array([[p[0] for p in placed] for placed, _ in rows])
    d_all = np.array([[p[1] for p in placed] for placed, _ in rows])
    v0 = np.array([np.concatenate([[EGO_SPEED0], speeds]) for _, speeds in rows])
    return ToyInit(s_all, d_all, v0.copy(), v0)


def slot_order(init: ToyInit) -> np.ndarray:
    """(B, N_BG) vehicle columns ranked by distance to the ego at t0 (slot k = column order[:, k])."""
    dist = np.hypot(init.s[:, 1:] - init.s[:, :1], init.d[:, 1:] - init.d[:, :1])
    return 1 + np.argsort(dist, axis=1, kind="stable")


def context(seed: int) -> np.ndarray:
    """The attacker's context for a seed (`scenario.context_vector` of the initial state)."""
    init = initial_states([seed])
    cols = slot_order(init)[0]
    slots = [(float(np.sign(init.d[0, c] - init.d[0, 0])), float(init.s[0, c] - init.s[0, 0]),
              float(init.v[0, c] - init.v[0, 0])) for c in cols]
    return context_vector(float(init.v[0, 0]), slots)


# ---------------------------------------------------------------- the simulator
@dataclass
class Attacks:
    """Per-episode attack parameters (B,); `has` False = normal traffic."""

    has: np.ndarray
    col: np.ndarray  # the attacker's vehicle column
    man: np.ndarray  # index into ALL_MANOEUVRES
    trig: np.ndarray
    inten: np.ndarray
    hold: np.ndarray
    gap: np.ndarray
    gate: np.ndarray  # fire only where the escape exists at that step (`escape.escape_at_firing`)

    @classmethod
    def build(cls, init: ToyInit, z_idx: np.ndarray | None, manoeuvres: tuple[Manoeuvre, ...],
              gate: bool | np.ndarray = False) -> "Attacks":
        b = init.s.shape[0]
        gates = np.broadcast_to(np.asarray(gate, dtype=bool), (b,)).copy()
        if z_idx is None:
            one, zero = np.ones(b), np.zeros(b, dtype=np.int64)
            return cls(np.zeros(b, bool), zero + 1, zero, one * 99.0, one, one, one, gates)
        z = np.asarray(z_idx, dtype=np.int64)
        col = np.take_along_axis(slot_order(init), z[:, 0:1], axis=1)[:, 0]
        man = np.array([ALL_MANOEUVRES.index(m) for m in manoeuvres])[z[:, 1]]
        # The numeric factors' grids, by factor index (0 is the slot, 1 the manoeuvre: indexed above).
        grid = {i: np.asarray(FACTORS[FACTOR_NAMES[i]], dtype=float) for i in range(2, len(FACTOR_NAMES))}
        return cls(np.ones(b, bool), col, man, grid[2][z[:, 2]], grid[3][z[:, 3]], grid[4][z[:, 4]], grid[5][z[:, 5]],
                   gates)


def _m(name: Manoeuvre) -> int:
    return ALL_MANOEUVRES.index(name)


LANE_CHANGERS = np.array([_m(m) for m in ("cut_in", "cut_in_brake", "tailgate", "merge_squeeze", "yield_violation")])


class ToySim:
    """A batch of toy episodes stepped together. State arrays are (vehicle, episode) -- the batch
    innermost, so numpy's loops run long -- with the ego in row 0. `step(ego_acc)` overrides the
    ego's IDM acceleration (a driver); `None` lets the IDM ego drive. The IDM ego perceives its
    leader `EGO_DELAY_S` late (a driver's reaction time): under-cautious headways then crash."""

    def __init__(self, init: ToyInit, attacks: Attacks, ego: np.ndarray, escape_test: Callable[..., np.ndarray] | None = None,
                 record_escape: bool = False):
        """`ego`: (B, 5) time_wanted, distance_wanted, comfort_acc_max, -comfort_acc_min, target_speed.
        `escape_test`: `escape.toy_escape` (passed in: escape.py builds on this module), asked at the
        firing step of gated attacks (`Attacks.gate`, which need it) and, with `record_escape`, of
        every attack (its answer kept in `escape_at_fire`; it costs the toy ~25% more CPU)."""
        b, n = init.s.shape
        self.init, self.attacks, self.t, self.escape_test = init, attacks, 0.0, escape_test
        self.record_escape = record_escape
        self.s, self.d, self.v = init.s.T.copy(), init.d.T.copy(), init.v.T.copy()
        self.d_prev = self.d
        self.v0 = init.v0.T.copy()
        self.v0[0] = ego[:, 4]
        self.idm = np.broadcast_to(np.array(BG_IDM)[:, None, None], (4, n, b)).copy()
        self.idm[:, 0, :] = ego[:, :4].T
        self.inv_2sqrt_ab = 1 / (2 * np.sqrt(self.idm[2] * self.idm[3]))
        self.cols = np.arange(b)
        zeros = np.zeros(b)
        self.fired, self.feasible = np.zeros(b, bool), np.ones(b, bool)
        self.held, self.escape_at_fire = np.zeros(b, bool), np.ones(b, bool)  # the escape gate's record
        self.t_fire, self.d_fire, self.prev_err = zeros.copy(), zeros.copy(), np.full(b, np.nan)
        self.lat_kind = np.zeros(b, np.int64)  # 0 none, 1 lane change to the ego's lane, 2 out-and-back swerve
        self.lat_amp, self.lat_T = zeros.copy(), np.ones(b)
        self.acc0, self.t_a, self.acc1, self.t_b = zeros.copy(), zeros.copy(), zeros.copy(), zeros.copy()
        self.att_acc, self.att_lat_acc = zeros.copy(), zeros.copy()
        self.alive, self.crashed = np.ones(b, bool), np.zeros(b, bool)
        self.other, self.fault, self.rule = np.full(b, -1), np.zeros(b, np.int64), np.zeros(b, np.int64)
        self.t_crash, self.gap_in = np.full(b, np.inf), np.full((n, b), np.nan)
        self.min_ttc, self.step_ttc = np.full(b, TTC_HORIZON_S), np.full(b, TTC_HORIZON_S)
        self.speed_sum, self.steps = zeros.copy(), np.zeros(b, np.int64)
        lat = np.abs(self.d - self.d[0]) < VEH_W
        lat[0] = False
        self.lat_prev = lat
        self.t_enter = np.where(lat, -np.inf, np.nan)  # when the vehicle's lateral overlap with the ego began
        self.seen: list[tuple[np.ndarray, np.ndarray]] = []  # the ego's leader observations, oldest first

    # ---- one step
    def step(self, ego_acc: np.ndarray | None = None) -> None:
        a_, c = self.attacks, self.cols
        r = self.s[a_.col, c] - self.s[0]
        tail = a_.man == _m("tailgate")
        gap_now = np.where(tail, -r, r) - VEH_L
        pre = a_.has & ~self.fired
        v0 = self.v0.copy()
        own = self.v0[a_.col, c]
        v_des = self.v[0] + K_POS * (gap_now - a_.gap) * np.where(tail, 1.0, -1.0)
        v0[a_.col[pre], c[pre]] = np.clip(v_des, own - DV_DOWN, own + DV_UP)[pre]
        self._fire(pre & (self.t >= a_.trig - 1e-9) & (gap_now > -VEH_L), gap_now - a_.gap)
        acc = self._idm(v0)
        acc[a_.col[pre], c[pre]] = np.clip(acc[a_.col[pre], c[pre]], -POSITION_ACC, POSITION_ACC)
        if ego_acc is not None:
            acc[0] = np.clip(ego_acc, -ACC_LIMIT, ACC_LIMIT)
        d_next = self.d.copy()
        tau = self.t - self.t_fire
        live = a_.has & self.fired & (tau < np.maximum(self.t_b, self.lat_T * (self.lat_kind > 0)) + 1e-9)
        self.att_lat_acc = np.zeros_like(self.att_lat_acc)
        if live.any():
            script_acc = np.where(tau < self.t_a, self.acc0, np.where(tau < self.t_b, self.acc1, acc[a_.col, c]))
            d_att, lat_acc = lateral_profile(self.lat_kind, self.d_fire, self.lat_amp, self.lat_T, tau + DT)
            acc[a_.col[live], c[live]] = script_acc[live]
            d_next[a_.col[live], c[live]] = d_att[live]
            self.att_lat_acc = np.where(live, lat_acc, 0.0)
        self.att_acc = acc[a_.col, c]
        v_next = np.maximum(self.v + acc * DT, 0.0)
        self.s = self.s + 0.5 * (self.v + v_next) * DT
        self.d_prev = self.d
        self.v, self.d = v_next, d_next
        self.t = round(self.t + DT, 9)
        self._check_ego()

    def _idm(self, v0: np.ndarray) -> np.ndarray:
        # each vehicle's leader: the nearest laterally overlapping vehicle ahead (a loop over the six
        # candidates keeps every array (vehicle, batch)-shaped: faster than a pairwise cube here)
        lead_gap = np.full_like(self.s, np.inf)
        lead_v = np.zeros_like(self.v)
        for j in range(self.s.shape[0]):
            ahead = self.s[j] - self.s
            closer = (ahead > 0) & (ahead < lead_gap) & (np.abs(self.d[j] - self.d) < VEH_W)
            lead_gap = np.where(closer, ahead, lead_gap)
            lead_v = np.where(closer, self.v[j], lead_v)
        lead_gap -= VEH_L
        now = (lead_gap[0].copy(), lead_v[0].copy())
        self.seen = (self.seen or [now] * EGO_DELAY_STEPS) + [now]
        lead_gap[0], lead_v[0] = self.seen.pop(0)
        T, s0, a = self.idm[0], self.idm[1], self.idm[2]
        ratio = self.v / np.maximum(v0, 0.1)
        ratio *= ratio
        has_lead = lead_gap < np.inf
        s_star = s0 + np.maximum(0.0, self.v * (T + (self.v - lead_v) * self.inv_2sqrt_ab))
        q = s_star / np.maximum(np.where(has_lead, lead_gap, 1.0), 0.1)
        inter = np.where(has_lead, q * q, 0.0)
        return np.asarray(np.clip(a * (1.0 - ratio * ratio - inter), -ACC_LIMIT, a))

    def _fire(self, ready: np.ndarray, err: np.ndarray) -> None:
        crossed = np.isfinite(self.prev_err) & (np.sign(err) != np.sign(self.prev_err))
        self.prev_err = np.where(ready, err, np.nan)
        fire = ready & ((np.abs(err) <= FIRE_TOL_M) | crossed)
        if not fire.any():
            return
        a_ = self.attacks
        i = self.cols[fire]
        d0 = self.d[a_.col[i], i]
        kind, amp, dur, ok, acc0, t_a, acc1, t_b = attack_script(a_.man[i], a_.inten[i], a_.hold[i], d0)
        # The escape question on this step's state, asked for gated triggers (and recorded for all with
        # `record_escape`); a gated trigger that fails it holds (it keeps positioning) and is asked
        # again next step.
        escape = np.ones(len(i), bool)
        ask = a_.gate[i] | self.record_escape
        if ask.any():
            if self.escape_test is None:
                raise ValueError("a gated toy attack needs ToySim(..., escape_test=escape.toy_escape)")
            j = i[ask]
            escape[ask] = self.escape_test(self.v[0, j], self.v[a_.col[j], j], self.s[a_.col[j], j] - self.s[0, j],
                                           self.d[0, j], d0[ask], kind[ask], amp[ask], dur[ask], acc0[ask], t_a[ask],
                                           acc1[ask], t_b[ask])
        hold = a_.gate[i] & ~escape
        self.held[i[hold]] = True
        self.escape_at_fire[i] = escape
        keep = ~hold
        if not keep.any():
            return
        i, d0, kind, amp, dur, ok = i[keep], d0[keep], kind[keep], amp[keep], dur[keep], ok[keep]
        acc0, t_a, acc1, t_b = acc0[keep], t_a[keep], acc1[keep], t_b[keep]
        self.fired[i], self.t_fire[i], self.d_fire[i] = True, self.t, d0
        self.lat_kind[i], self.lat_amp[i], self.lat_T[i], self.feasible[i] = kind, amp, dur, ok
        self.acc0[i], self.t_a[i], self.acc1[i], self.t_b[i] = acc0, t_a, acc1, t_b

    def _check_ego(self) -> None:
        rel_s = self.s - self.s[0]
        lat = np.abs(self.d - self.d[0]) < VEH_W
        lat[0] = False
        entered = lat & ~self.lat_prev
        self.t_enter = np.where(entered, self.t, np.where(lat, self.t_enter, np.nan))
        self.gap_in = np.where(entered, np.abs(rel_s) - VEH_L, self.gap_in)
        closing = self.v[0] - self.v
        ahead = lat & (rel_s > 0) & (closing > 0)
        ttc = np.where(ahead, np.maximum(rel_s - VEH_L, 0.0) / np.where(ahead, closing, 1.0), TTC_HORIZON_S)
        contact = lat & (np.abs(rel_s) < VEH_L)
        hit = contact.any(axis=0) & self.alive
        self.step_ttc = np.where(hit, 0.0, np.minimum(ttc.min(axis=0), TTC_HORIZON_S))
        self.min_ttc = np.where(self.alive, np.minimum(self.min_ttc, self.step_ttc), self.min_ttc)
        self.speed_sum += np.where(self.alive, self.v[0], 0.0)
        self.steps += self.alive
        if hit.any():
            j = np.argmax(contact, axis=0)
            c = self.cols
            since = self.t - self.t_enter[j, c]  # an overlap since t0 (-inf) gives +inf: never a cut-in
            cut = np.isfinite(since) & (since <= CUT_IN_REACTION_S + 1e-9)
            side = cut & (self.gap_in[j, c] <= 0)
            rule = np.where(side, 1, np.where(cut, 2, np.where(rel_s[j, c] > 0, 3, 4)))
            other_party = np.where((j == self.attacks.col) & self.attacks.has, 2, 3)
            self.crashed |= hit
            self.other = np.where(hit, j, self.other)
            self.fault = np.where(hit, np.where(rule == 3, 1, other_party), self.fault)
            self.rule = np.where(hit, rule, self.rule)
            self.t_crash = np.where(hit, self.t, self.t_crash)
            self.alive &= ~hit
        self.lat_prev = lat
        if self.t >= DURATION_S - 1e-9:
            self.alive[:] = False


def attack_script(man: np.ndarray, inten: np.ndarray, hold: np.ndarray, d0: np.ndarray) -> tuple[np.ndarray, ...]:
    """A fired attacker's script: lateral kind/amplitude/duration, kinematic feasibility, and two
    longitudinal phases (acc0 until t_a, acc1 until t_b; IDM afterwards), times from firing."""
    lane_change = np.isin(man, LANE_CHANGERS) & (np.abs(d0) > 1e-6)
    swerve = man == _m("swerve_return")
    v_lat = inten * V_LAT_FULL * np.where(man == _m("merge_squeeze"), 0.5, 1.0)
    amp_lc = -d0  # to the ego's lane centre
    t_lc = np.where(lane_change, np.pi * np.abs(amp_lc) / (2 * v_lat), 0.0)
    toward = np.where(d0 < -1e-6, 1.0, -1.0)  # from the left lane towards the ego; in its lane: away (left)
    d_sw = 2 * hold
    amp_sw = toward * inten * LANE_W
    need = 2 * np.pi**2 * np.abs(amp_sw) / d_sw**2
    ok = ~swerve | (need <= MAX_LAT_ACCEL * (1 + 1e-9))
    amp_sw = np.where(ok, amp_sw, amp_sw * MAX_LAT_ACCEL / need)  # clipped to the limit, flagged infeasible
    kind = np.where(lane_change, 1, np.where(swerve, 2, 0))
    amp = np.where(lane_change, amp_lc, np.where(swerve, amp_sw, 0.0))
    dur = np.where(lane_change, t_lc, np.where(swerve, d_sw, 1.0))
    brake = -inten * MAX_LONG_ACCEL
    zero = np.zeros_like(inten)
    acc0 = np.select([man == _m("merge_squeeze"), man == _m("yield_violation")], [-inten * 3.0, brake], zero)
    acc1 = np.select([man == _m("cut_in_brake"), man == _m("brake_check"), man == _m("tailgate")],
                     [brake, brake, inten * 2.0], zero)
    t_a = np.where(swerve, d_sw, t_lc)
    t_b = np.where(swerve, d_sw, t_lc + hold)
    return kind, amp, dur, ok, acc0, t_a, acc1, t_b


def lateral_profile(kind: np.ndarray, d0: np.ndarray, amp: np.ndarray, dur: np.ndarray, tau: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The scripted lateral position at `tau` after firing and its lateral acceleration."""
    x = np.clip(tau / dur, 0.0, 1.0)
    lc = d0 + amp * (1 - np.cos(np.pi * x)) / 2
    lc_acc = np.where(x < 1, amp / 2 * (np.pi / dur) ** 2 * np.cos(np.pi * x), 0.0)
    sw = d0 + amp * (1 - np.cos(2 * np.pi * x)) / 2
    sw_acc = np.where(x < 1, amp / 2 * (2 * np.pi / dur) ** 2 * np.cos(2 * np.pi * x), 0.0)
    return np.where(kind == 1, lc, np.where(kind == 2, sw, d0)), np.where(kind == 1, lc_acc, np.where(kind == 2, sw_acc, 0.0))


def defender_returns(mean_speed: np.ndarray, at_fault: np.ndarray, speed_range: tuple[float, float] = (20.0, 30.0)) -> np.ndarray:
    """`scenario.defender_return`, vectorised (a test holds them equal)."""
    lo, hi = speed_range
    progress = np.clip((mean_speed - lo) / (hi - lo), 0.0, 1.0)
    return np.asarray(progress - (1.0 + progress) * at_fault)


def ego_matrix(idm: IdmParams, b: int) -> np.ndarray:
    return np.tile([idm.time_wanted, idm.distance_wanted, idm.comfort_acc_max, -idm.comfort_acc_min,
                    idm.target_speed], (b, 1))


def outcome_arrays(sim: ToySim) -> dict[str, np.ndarray]:
    """The per-episode outcome arrays of a finished (or stopped) batch: the fields of `toy.ToyOutcome`."""
    mean_speed = sim.speed_sum / np.maximum(sim.steps, 1)
    at_fault = sim.fault == FAULT_CODES.index("defender")
    return {"J": defender_returns(mean_speed, at_fault), "crashed": sim.crashed.copy(), "fault": sim.fault.copy(),
            "rule": sim.rule.copy(), "other": sim.other.copy(), "t_crash": sim.t_crash.copy(),
            "feasible": sim.feasible.copy(), "fired": sim.fired.copy(), "min_ttc": sim.min_ttc.copy(),
            "withheld": sim.held & ~sim.fired, "escape_at_fire": sim.fired & sim.escape_at_fire,
            "mean_speed": mean_speed, "distance_m": sim.s[0] - sim.init.s[:, 0]}

