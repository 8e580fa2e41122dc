"""The toy world: a vectorised numpy road where the defender's return J(z) is enumerated over the
attacker's whole scenario space (`scenario.SPACE_SIZE` draws) for a batch of seeds in well under a
second, for exact checks (q*, the soft value) and fast tests. Family "toy". This module is the
world object that `worlds.world_for("toy")` returns: `evaluate` / `evaluate_pairs` (the enumeration),
`summary_results` (a `Rollout`), `population_scores` (CEM's batched scorer), `background_behaviour`
(the reference prior's data) and `start_episode` (one `ToyEpisode`, the `Episode` protocol). The road,
the vehicles, the attacker's scripts, fault and TTC are the simulator's: `toy_sim.py`.

Every episode is a pure function of (seed, z, defender) -- or of the driver's actions in
`start_episode`; there is no other randomness.

Gated attacks (`ScenarioParams.escape_gate`, or `gate=True` here) fire only at a step whose state
leaves the ego an escape (`escape.toy_escape`); `withheld` marks the ones that never did.

May import: numpy, pydantic, `environments.adv0.sim.scenario`, `environments.adv0.sim.toy_sim`, `environments.adv0.sim.escape`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from environments.adv0.sim.escape import toy_escape
from environments.adv0.sim.scenario import (
    FACTOR_NAMES, FACTORS, META_ACTIONS, NEAR_MISS_TTC_S, TRAIN_MANOEUVRES, TTC_HORIZON_S, Collision, DriverView,
    EpisodeResult, IdmParams, Manoeuvre, ScenarioParams, VehicleState,
)
from environments.adv0.sim.toy_sim import (
    ALL_MANOEUVRES, CUT_IN_REACTION_S, DT, DURATION_S, FAULT_CODES, LANE_W, RULES, STEPS, VEH_L, VEH_W, Attacks,
    ToyInit, ToySim, defender_returns, ego_matrix, initial_states, outcome_arrays, slot_order,
)

POLICY_DT = 1.0  # s, one driver decision (`Episode.step`) = 5 simulation steps
TARGET_SPEEDS = (20.0, 25.0, 30.0)  # the driver's FASTER/SLOWER set-points (highway-env's MDPVehicle)
KP_SPEED = 1 / 0.6  # the driver's speed controller gain (highway-env's KP_A)
DRIVER_ACTIONS = ("IDLE", "FASTER", "SLOWER")  # the toy ego keeps its lane


# ---------------------------------------------------------------- enumeration
@dataclass(frozen=True)
class ToyOutcome:
    """Outcomes of a batch, each array shaped like the request (see `evaluate`)."""

    J: np.ndarray  # the defender's return (`defender_return`, fault-gated)
    crashed: np.ndarray
    fault: np.ndarray  # index into FAULT_CODES (0: no crash)
    rule: np.ndarray  # index into RULES
    other: np.ndarray  # the vehicle column the ego hit (-1: none)
    t_crash: np.ndarray
    feasible: np.ndarray  # the script stayed within the kinematic limits
    fired: np.ndarray
    min_ttc: np.ndarray
    mean_speed: np.ndarray
    distance_m: np.ndarray
    withheld: np.ndarray  # the escape gate held a ready trigger and it never fired
    escape_at_fire: np.ndarray  # it fired, and the escape existed at the firing step (True where not asked: see `evaluate`)

    @property
    def attacker_fault(self) -> np.ndarray:
        return np.asarray(self.fault == FAULT_CODES.index("attacker"))

    @property
    def defender_fault(self) -> np.ndarray:
        return np.asarray(self.fault == FAULT_CODES.index("defender"))


def _run(init: ToyInit, z: np.ndarray | None, ego: np.ndarray, manoeuvres: tuple[Manoeuvre, ...],
         chunk: int, gate: bool | np.ndarray = False, record_escape: bool = False) -> dict[str, np.ndarray]:
    """Simulate episode rows (B,) to the end, `chunk` rows at a time (cache-sized batches run fastest)."""
    parts = []
    gates = np.broadcast_to(np.asarray(gate, dtype=bool), (len(ego),))
    for lo in range(0, len(ego), chunk):
        rows = np.arange(lo, min(len(ego), lo + chunk))
        sub = init.take(rows)
        attacks = Attacks.build(sub, None if z is None else z[rows], manoeuvres, gates[rows])
        sim = ToySim(sub, attacks, ego[rows], escape_test=toy_escape, record_escape=record_escape)
        for _ in range(STEPS):
            sim.step()
        parts.append(outcome_arrays(sim))
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


def evaluate(seeds: Sequence[int], z_idx: np.ndarray | None = None, idm: IdmParams | Sequence[IdmParams] | None = None,
             manoeuvres: tuple[Manoeuvre, ...] = TRAIN_MANOEUVRES, chunk: int = 12_000, gate: bool = False,
             record_escape: bool = False) -> ToyOutcome:
    """Run every (defender, seed, z) at once. `z_idx`: factor indices (M, F) shared by all seeds, or
    (S, M, F) per seed (manoeuvre indexed in `manoeuvres`); None = normal traffic (M = 1). Arrays
    come back shaped (S, M), or (P, S, M) when `idm` is a sequence of P defenders. `gate`: every
    attack fires only where the escape exists (`escape.toy_escape`); `record_escape`: ask that test
    at every firing, gated or not (`escape_at_fire`; ~25% more CPU)."""
    seeds = list(seeds)
    idm = IdmParams() if idm is None else idm
    idms = [idm] if isinstance(idm, IdmParams) else list(idm)
    S, P = len(seeds), len(idms)
    z = None
    M = 1
    if z_idx is not None:
        z = np.asarray(z_idx, dtype=np.int64)
        if z.ndim == 2:
            z = np.broadcast_to(z, (S, *z.shape))
        _check_z(z, manoeuvres, S)
        M = z.shape[1]
    p_i, s_i, m_i = (a.ravel() for a in np.meshgrid(np.arange(P), np.arange(S), np.arange(M), indexing="ij"))
    ego = np.concatenate([ego_matrix(x, 1) for x in idms])[p_i]
    out = _run(initial_states(seeds).take(s_i), None if z is None else z[s_i, m_i], ego, manoeuvres, chunk, gate,
               record_escape)
    shape = (S, M) if isinstance(idm, IdmParams) else (P, S, M)
    return ToyOutcome(**{k: v.reshape(shape) for k, v in out.items()})


def evaluate_pairs(seeds: Sequence[int], z_idx: np.ndarray | None, idm: IdmParams | None = None,
                   manoeuvres: tuple[Manoeuvre, ...] = TRAIN_MANOEUVRES, chunk: int = 12_000,
                   gate: bool | np.ndarray = False) -> ToyOutcome:
    """Episode i = (seeds[i], z_idx[i]) (or normal traffic when z_idx is None); arrays shaped (B,).
    `gate`: (B,) or one flag, the escape gate per episode."""
    seeds = list(seeds)
    z = None if z_idx is None else np.asarray(z_idx, dtype=np.int64).reshape(len(seeds), -1)
    if z is not None:
        _check_z(z[None], manoeuvres, 1)
    uniq, inv = np.unique(np.array(seeds, dtype=np.int64), return_inverse=True)
    ego = ego_matrix(idm or IdmParams(), len(seeds))
    return ToyOutcome(**_run(initial_states(uniq.tolist()).take(inv), z, ego, manoeuvres, chunk, gate))


def _check_z(z: np.ndarray, manoeuvres: tuple[Manoeuvre, ...], n_seeds: int) -> None:
    sizes = [len(manoeuvres) if n == "manoeuvre" else len(FACTORS[n]) for n in FACTOR_NAMES]
    if z.ndim != 3 or z.shape[0] != n_seeds or z.shape[2] != len(sizes):
        raise ValueError(f"z_idx must be (M, {len(sizes)}) or ({n_seeds}, M, {len(sizes)}) factor indices; got shape {z.shape}")
    bad = (z < 0) | (z >= np.array(sizes))
    if bad.any():
        f = int(np.argwhere(bad)[0][-1])
        raise ValueError(f"z_idx factor {FACTOR_NAMES[f]} has an index outside 0..{sizes[f] - 1}")


def summary_results(seeds: Sequence[int], attacks: Sequence[ScenarioParams | None], idm: IdmParams | None = None,
                    manoeuvres: tuple[Manoeuvre, ...] = TRAIN_MANOEUVRES) -> list[EpisodeResult]:
    """`EpisodeResult`s of paired (seed, attack) episodes from one vectorised run: everything the
    attacker's utility and the metrics read, without the per-step TTC list, geometry or kinematics
    (run `start_episode` for those). A `Rollout` for `attacker.iterate` is `functools.partial(summary_results, idm=...)`."""
    if len(seeds) != len(attacks):
        raise ValueError(f"summary_results: {len(seeds)} seeds but {len(attacks)} attacks; pass one attack (or None) per seed")
    out: list[EpisodeResult | None] = [None] * len(seeds)
    for attacked in (True, False):
        idx = [i for i, a in enumerate(attacks) if (a is not None) == attacked]
        if not idx:
            continue
        z = np.array([attacks[i].index(manoeuvres) for i in idx]) if attacked else None  # type: ignore[union-attr]
        gate = np.array([attacked and attacks[i].escape_gate for i in idx], dtype=np.bool_)  # type: ignore[union-attr]
        o = evaluate_pairs([seeds[i] for i in idx], z, idm, manoeuvres, gate=gate)
        for k, i in enumerate(idx):
            out[i] = _summary(o, k, seeds[i], attacks[i])
    return [r for r in out if r is not None]


def _summary(o: ToyOutcome, k: int, seed: int, attack: ScenarioParams | None) -> EpisodeResult:
    crashed = bool(o.crashed[k])
    collision = None
    if crashed:
        j = int(o.other[k])
        other = "attacker" if attack is not None and j == _attacker_column(seed, attack) else f"bg:{j}"
        collision = Collision(t=float(o.t_crash[k]), other=other, fault=FAULT_CODES[int(o.fault[k])] or "shared",
                              rule=_rule_text(int(o.rule[k])), geometry=[])
    steps = int(round(min(float(o.t_crash[k]), DURATION_S) / POLICY_DT)) if crashed else int(round(DURATION_S / POLICY_DT))
    min_ttc = float(o.min_ttc[k])
    return EpisodeResult(
        family="toy", seed=seed, attack=attack, defender="toy-idm", steps=steps,
        duration_s=float(min(o.t_crash[k], DURATION_S)) if crashed else DURATION_S, crashed=crashed, collision=collision,
        min_ttc=min_ttc, near_miss=bool(min_ttc < NEAR_MISS_TTC_S and not crashed), mean_speed=float(o.mean_speed[k]),
        distance_m=float(o.distance_m[k]), reward=float(o.J[k]), attack_feasible=bool(o.feasible[k]),
        attack_fired=bool(o.fired[k]), trigger_withheld=bool(o.withheld[k]))


def _attacker_column(seed: int, attack: ScenarioParams) -> int:
    return int(slot_order(initial_states([seed]))[0, attack.slot])


# ---------------------------------------------------------------- background behaviour and the reference
def background_behaviour(rng: np.random.Generator, n: int) -> np.ndarray:
    """n factor-index draws (n, F) of what background drivers do, by a stated model of naturalistic
    behaviour (the toy's own traffic never changes lane, so it has nothing to observe): nearer
    neighbours act more often (slot weights 5:4:3:2:1); manoeuvres are mostly plain lane changes
    (40%) and braking (25%), some close following (15%) and drift-and-correct (15%), rarely a lane
    change followed by braking (5%); trigger uniform; intensity ~ Beta(2, 5) (mean 0.29); hold ~
    Exp(1 s); accepted gap ~ lognormal (median 22 m, sigma 0.45). Continuous values go to the
    nearest grid point. Fit p0 with `attacker.fit_reference(background_behaviour(rng, n))`."""
    def nearest(values: np.ndarray, grid: tuple[float | int | str, ...]) -> np.ndarray:
        g = np.asarray(grid, dtype=float)
        return np.asarray(np.abs(values[:, None] - g[None, :]).argmin(axis=1))

    slot = rng.choice(5, size=n, p=np.array([5, 4, 3, 2, 1]) / 15)
    man_p = {"cut_in": 0.40, "cut_in_brake": 0.05, "brake_check": 0.25, "tailgate": 0.15, "swerve_return": 0.15}
    man = rng.choice(len(TRAIN_MANOEUVRES), size=n, p=[man_p[m] for m in TRAIN_MANOEUVRES])
    trig = rng.integers(0, len(FACTORS["trigger_s"]), size=n)
    inten = nearest(rng.beta(2.0, 5.0, size=n), FACTORS["intensity"])
    hold = nearest(rng.exponential(1.0, size=n), FACTORS["hold_s"])
    gap = nearest(np.exp(rng.normal(np.log(22.0), 0.45, size=n)), FACTORS["gap_m"])
    return np.stack([slot, man, trig, inten, hold, gap], axis=1)


# ---------------------------------------------------------------- a population of planners at once (for CEM)
def population_scores(candidates: Sequence[IdmParams], jobs: Sequence[tuple[ScenarioParams | None, int]],
                      charge_any_crash: bool = False, manoeuvres: tuple[Manoeuvre, ...] = TRAIN_MANOEUVRES) -> np.ndarray:
    """(P, 2): each candidate's mean J and mean speed over the (attack or None, seed) jobs, every
    candidate on the same episodes in one vectorised run -- `planner.tune_cem(..., batched=True)`'s
    scorer. `charge_any_crash`: J as if every crash were the defender's."""
    seeds = [s for _, s in jobs]
    attacked = [i for i, (a, _) in enumerate(jobs) if a is not None]
    normal = [i for i, (a, _) in enumerate(jobs) if a is None]
    P = len(candidates)
    J, speed = np.zeros((P, len(jobs))), np.zeros((P, len(jobs)))
    gated = [i for i in attacked if jobs[i][0].escape_gate]  # type: ignore[union-attr]
    ungated = [i for i in attacked if not jobs[i][0].escape_gate]  # type: ignore[union-attr]
    for idx, z, gate in ((ungated, _indices(jobs, ungated, manoeuvres), False),
                         (gated, _indices(jobs, gated, manoeuvres), True), (normal, None, False)):
        if not idx:
            continue
        S = len(idx)
        zz = None if z is None else np.broadcast_to(z.reshape(S, 1, -1), (S, 1, z.shape[-1]))
        o = evaluate([seeds[i] for i in idx], zz, list(candidates), manoeuvres, gate=gate)  # (P, S, 1)
        at_fault = o.crashed if charge_any_crash else o.fault == FAULT_CODES.index("defender")
        J[:, idx] = defender_returns(o.mean_speed, at_fault)[..., 0]
        speed[:, idx] = o.mean_speed[..., 0]
    return np.stack([J.mean(axis=1), speed.mean(axis=1)], axis=1)


def _indices(jobs: Sequence[tuple[ScenarioParams | None, int]], rows: list[int], manoeuvres: tuple[Manoeuvre, ...]) -> np.ndarray:
    return np.array([jobs[i][0].index(manoeuvres) for i in rows])  # type: ignore[union-attr]


# ---------------------------------------------------------------- one episode (the Episode protocol)
class ToyEpisode:
    """One toy episode behind `scenario.Episode`: the ego is an IDM planner (`planner`, step(None))
    or follows a driver's meta-actions (FASTER/SLOWER move its set-point over TARGET_SPEEDS; an
    unavailable action is counted invalid and played as IDLE)."""

    def __init__(self, seed: int, attack: ScenarioParams | None, planner: IdmParams | None):
        self.seed, self.attack, self.planner = seed, attack, planner
        init = initial_states([seed])
        z = None if attack is None else np.array([attack.index(ALL_MANOEUVRES)])
        ego = ego_matrix(planner or IdmParams(), 1)
        gate = attack is not None and attack.escape_gate
        self.sim = ToySim(init, Attacks.build(init, z, ALL_MANOEUVRES, gate), ego, escape_test=toy_escape,
                          record_escape=True)
        self.target = int(np.argmin(np.abs(np.array(TARGET_SPEEDS) - init.v[0, 0])))
        self.done = False
        self.ttc: list[float] = []
        self.actions: list[str] = []
        self.invalid = 0
        self.kinematics: list[tuple[float, float]] = []
        self.history: list[list[VehicleState]] = []

    def _states(self) -> list[VehicleState]:
        sim, out = self.sim, []
        for c in range(sim.s.shape[0]):
            vid = "ego" if c == 0 else ("attacker" if sim.attacks.has[0] and c == sim.attacks.col[0] else f"bg:{c}")
            vy = float((sim.d[c, 0] - sim.d_prev[c, 0]) / DT)
            s, d, v = float(sim.s[c, 0]), float(sim.d[c, 0]), float(sim.v[c, 0])
            lane = "1" if abs(d) < LANE_W / 2 else "0"
            out.append(VehicleState(id=vid, x=s, y=d, s=s, d=d, vx=v, vy=vy, heading=0.0, lane=lane, length=VEH_L, width=VEH_W))
        return out

    def view(self) -> DriverView:
        states = self._states()
        ego = states[0]
        others = sorted(states[1:], key=lambda x: np.hypot(x.s - ego.s, x.d - ego.d))[:6]
        rel = [o.model_copy(update={"s": o.s - ego.s}) for o in others]
        available = [a for a in META_ACTIONS if a in DRIVER_ACTIONS]
        return DriverView(t=self.sim.t, ego_speed=ego.vx, ego_lane=1, lanes=2, neighbours=rel, available=available)

    def step(self, action: str | None) -> None:
        if self.done:
            raise RuntimeError("this toy episode is over; start a new one")
        if self.planner is None:
            name = (action or "IDLE").strip().upper()
            if name not in DRIVER_ACTIONS:
                self.invalid += 1
                name = "IDLE"
            self.actions.append(name)
            self.target = int(np.clip(self.target + {"IDLE": 0, "FASTER": 1, "SLOWER": -1}[name], 0, len(TARGET_SPEEDS) - 1))
        step_min = TTC_HORIZON_S
        for _ in range(int(round(POLICY_DT / DT))):
            ego_acc = None
            if self.planner is None:
                ego_acc = np.array([KP_SPEED * (TARGET_SPEEDS[self.target] - self.sim.v[0, 0])])
            self.sim.step(ego_acc)
            self.history = (self.history + [self._states()])[-int(round(3.0 / DT)):]
            self.kinematics.append((float(self.sim.att_acc[0]), float(self.sim.att_lat_acc[0])))
            step_min = min(step_min, float(self.sim.step_ttc[0]))
            if not self.sim.alive[0]:
                self.done = True
                break
        self.ttc.append(step_min)

    def result(self) -> EpisodeResult:
        sim = self.sim
        out = {k: v[0] for k, v in outcome_arrays(sim).items()}
        collision = None
        if sim.crashed[0]:
            j = int(sim.other[0])
            ids = [s.id for s in self.history[-1]] if self.history else []
            other_id = ids[j] if j < len(ids) else f"bg:{j}"
            geometry = [st for snap in self.history for st in (snap[0], snap[j])]
            collision = Collision(t=float(sim.t_crash[0]), other=other_id, fault=FAULT_CODES[int(sim.fault[0])] or "shared",
                                  rule=_rule_text(int(sim.rule[0]), float(sim.gap_in[j, 0]), float(sim.t_crash[0] - sim.t_enter[j, 0])),
                                  geometry=geometry)
        min_ttc = float(out["min_ttc"])
        return EpisodeResult(
            family="toy", seed=self.seed, attack=self.attack,
            defender="toy-idm" if self.planner is not None else "driver", steps=len(self.ttc),
            duration_s=float(sim.steps[0] * DT), crashed=bool(sim.crashed[0]), collision=collision, ttc=self.ttc,
            min_ttc=min_ttc, near_miss=bool(min_ttc < NEAR_MISS_TTC_S and not sim.crashed[0]),
            mean_speed=float(out["mean_speed"]), distance_m=float(out["distance_m"]), reward=float(out["J"]),
            attack_feasible=bool(sim.feasible[0]), attack_fired=bool(sim.fired[0]),
            trigger_withheld=bool(out["withheld"]), attacker_kinematics=self.kinematics if self.attack is not None else [], actions=self.actions,
            invalid_actions=self.invalid)

    def close(self) -> None:
        self.done = True


def _rule_text(code: int, gap_in: float | None = None, since: float | None = None) -> str:
    """The fault rule in words (its prefix before ':' names the rule, as `geometry.py`'s do)."""
    if code == 1:
        return "lateral intrusion: the other moved into the ego side by side"
    if code == 2:
        numbers = f" {gap_in:.1f} m away, contact {since:.1f} s later" if gap_in is not None and since is not None else ""
        return f"unsafe cut-in: the other entered the ego's path{numbers} (< {CUT_IN_REACTION_S} s to react)"
    return f"{RULES[code]}, the follower is at fault"


def start_episode(family: str, seed: int, attack: ScenarioParams | None, planner: IdmParams | None = None,
                  frames: bool = False) -> ToyEpisode:
    """`Episode` factory of the toy world (family "toy"; no renderer, so no filmstrip frames)."""
    if family != "toy":
        raise ValueError(f"the toy world only runs family 'toy', not {family!r}; use highway.py for highway-env maps")
    return ToyEpisode(seed, attack, planner)
