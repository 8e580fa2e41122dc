"""A closed-loop toy game small enough to solve exactly: the exact q* check of the toy world
(`exact.py`, `toy_checks.check_c1`) extended to an attacker that reacts to the defender every step.

The brake-check duel. The attacker drives ahead of the ego in one lane for `horizon` decisions. At
each decision it observes the gap (1, 2 or 3 cells) and the ego's previous longitudinal move
(accelerate, hold, brake), and picks its own; then the ego moves (it repeats its previous move with
probability `momentum`, else one of the other two) and the gap changes by the difference (+1 for
accelerating, -1 for braking; at most 3: the ego keeps up). A gap of 0 is a rear-end crash. Fault,
as `geometry.py`'s rules put it for a brake check: the follower's (the ego's), unless the attacker
braked while the gap was already 1 -- a brake check inside the follower's reaction gap, the
attacker's fault. The defender's return J is 1 without a crash and -1 after one; the attacker's
utility is -J, fault-gated (an attacker-at-fault crash loses every pair, as in `attacker.utility`;
the exact solution scores it `exact.J_INFEASIBLE`, as the toy checks do).

The best reactive strategy is to brake when the ego is likely to accelerate into a gap of 2 (it
repeats its last move), and to hold rather than brake at a gap of 1. The attacker is the project's
`ClosedLoopPolicy` (softmax-linear, exact log-probabilities) with only the `keep:*` actions feasible
(no lanes to change), on a one-hot of the information state (decision, gap, ego's previous move)
in its feature vector (k = `GAME_K`), so the policy class holds every reactive policy, the optimum
included. What is enumerable, exactly:
- `soft_optimal` -- the KL-regularised optimal attacker, argmax_q E_q[u] - tau KL(q || p0) over
  trajectories, by the soft Bellman recursion (pi*(a|s) ~ p0(a|s) exp(Q(s, a)/tau));
- `best_response` -- the tau -> 0 limit (the unregularised best reactive strategy);
- `evaluate` -- a policy's expected utility, crash and fault rates, its trajectory KL to another
  policy, and the mass it puts on the best response over the states it visits.
Preference learning (`train`) is `closed_loop_dpo.ClosedLoopAdv0.learn`, the very update the
highway loop uses, on sampled groups (K policy trajectories + a reference one per seed, the ego's
moves shared within a group).

Why DPO's fixed point is not pi* here: the trajectory target p0(tau) exp(u(tau)/tau) assumes the
attacker's decisions decide the outcome, but the ego's moves are random; DPO credits a trajectory
for the ego's luck. The exact check reports both distances (`exact_check`).

May import: numpy, pydantic, `environments.adv0` (closed_loop, closed_loop_dpo, exact, scenario).
"""

from __future__ import annotations

import time

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from environments.adv0.checks.exact import J_INFEASIBLE
from environments.adv0.sim.closed_loop import ACTIONS, ClosedLoopPolicy, n_features
from environments.adv0.sim.scenario import AttackerTrajectory
from environments.adv0.train.closed_loop_dpo import ClosedLoopAdv0, ClosedLoopConfig, ClosedLoopRoundReport

MOVES = ("accelerate", "hold", "brake")
DELTA = (1, 0, -1)  # gap change of each move, for the car ahead (the ego's counts negatively)
GAPS = (1, 2, 3)
MAX_GAP = 3
GAME_K = 5  # n_features(5) = 28 >= 3 decisions x 3 gaps x 3 moves
KEEP = np.array([a.startswith("keep:") for a in ACTIONS])  # the only feasible actions: one lane
ACTION_OF = [ACTIONS.index(f"keep:{m}") for m in MOVES]  # move index -> ACTIONS index
J_SAFE, J_CRASH = 1.0, -1.0


class GameSpec(BaseModel):
    model_config = ConfigDict(frozen=True)
    horizon: int = Field(3, ge=1, le=3, description="attacker decisions (3 fit the one-hot features)")
    start_gap: int = Field(2, ge=1, le=MAX_GAP)
    momentum: float = Field(0.8, ge=0, le=1, description="probability that the ego repeats its previous move")
    tau: float = Field(0.5, gt=0, description="the regularisation temperature (DPO's beta)")


def state_index(t: int, gap: int, prev: int) -> int:
    return t * len(GAPS) * len(MOVES) + (gap - 1) * len(MOVES) + prev


def game_features(t: int, gap: int, prev: int) -> np.ndarray:
    phi = np.zeros(n_features(GAME_K))
    phi[state_index(t, gap, prev)] = 1.0
    return phi


def ego_move_probs(prev: int, momentum: float) -> np.ndarray:
    p = np.full(len(MOVES), (1 - momentum) / (len(MOVES) - 1))
    p[prev] = momentum
    return p


def step(gap: int, attacker: int, ego: int) -> tuple[int, str | None]:
    """(the next gap, who is at fault when it is a crash: "attacker", "defender", or None)."""
    nxt = min(gap + DELTA[attacker] - DELTA[ego], MAX_GAP)
    if nxt > 0:
        return nxt, None
    return nxt, "attacker" if MOVES[attacker] == "brake" and gap <= 1 else "defender"


def reference_policy() -> ClosedLoopPolicy:
    return ClosedLoopPolicy.reference(k=GAME_K)


# ---------------------------------------------------------------- exact
Table = np.ndarray  # (horizon, gaps, moves) x attacker moves: probabilities over the feasible actions


def table_of(policy: ClosedLoopPolicy, spec: GameSpec) -> Table:
    out = np.zeros((spec.horizon, len(GAPS), len(MOVES), len(MOVES)))
    for t in range(spec.horizon):
        for g in GAPS:
            for m in range(len(MOVES)):
                out[t, g - 1, m] = np.exp(policy.log_probs(game_features(t, g, m), KEEP))[ACTION_OF]
    return out


def _terminal(fault: str | None) -> float:
    """u of a finished episode for the exact solution: -J, an attacker-at-fault crash -J_INFEASIBLE."""
    return {None: -J_SAFE, "defender": -J_CRASH, "attacker": -J_INFEASIBLE}[fault]


def _q_values(spec: GameSpec, v_next: np.ndarray | None, t: int) -> np.ndarray:
    """Q(s, a) at decision t given the next decision's values (None at the last decision)."""
    q = np.zeros((len(GAPS), len(MOVES), len(MOVES)))
    for g in GAPS:
        for m in range(len(MOVES)):
            pe = ego_move_probs(m, spec.momentum)
            for a in range(len(MOVES)):
                for e in range(len(MOVES)):
                    nxt, fault = step(g, a, e)
                    later = _terminal(fault) if fault or v_next is None else v_next[nxt - 1, e]
                    q[g - 1, m, a] += pe[e] * later
    return q


def soft_optimal(spec: GameSpec, reference: Table) -> tuple[Table, np.ndarray]:
    """The regularised optimum pi* and its soft value V_0 (gaps x previous moves), by the soft
    Bellman recursion from the last decision back."""
    pi = np.zeros_like(reference)
    v: np.ndarray | None = None
    for t in reversed(range(spec.horizon)):
        q = _q_values(spec, v, t)
        logits = np.log(reference[t]) + q / spec.tau
        top = logits.max(axis=-1, keepdims=True)
        z = np.exp(logits - top)
        pi[t] = z / z.sum(axis=-1, keepdims=True)
        v = spec.tau * (np.log(z.sum(axis=-1)) + top[..., 0])
    assert v is not None
    return pi, v


def best_response(spec: GameSpec) -> Table:
    """The unregularised best reactive strategy (ties split evenly)."""
    out = np.zeros((spec.horizon, len(GAPS), len(MOVES), len(MOVES)))
    v: np.ndarray | None = None
    for t in reversed(range(spec.horizon)):
        q = _q_values(spec, v, t)
        best = np.isclose(q, q.max(axis=-1, keepdims=True))
        out[t] = best / best.sum(axis=-1, keepdims=True)
        v = q.max(axis=-1)
    return out


class Evaluation(BaseModel):
    utility: float  # E[u] with the exact solution's scoring
    defender_fault_crash: float
    attacker_fault_crash: float
    kl: float  # trajectory KL(q || other): sum over decisions of the expected per-state KL
    best_response_mass: float  # E over q's visited states of q's probability of a best-response action


def evaluate(q: Table, spec: GameSpec, other: Table | None = None, best: Table | None = None) -> Evaluation:
    """Exact forward enumeration of policy table `q`."""
    d = np.zeros((len(GAPS), len(MOVES)))
    d[spec.start_gap - 1] = 1.0 / len(MOVES)  # the ego's previous move before the first decision: uniform
    u = crash_d = crash_a = kl = mass = visits = 0.0
    for t in range(spec.horizon):
        nxt_d = np.zeros_like(d)
        for g in GAPS:
            for m in range(len(MOVES)):
                w = d[g - 1, m]
                if w == 0:
                    continue
                qa = q[t, g - 1, m]
                if other is not None:
                    kl += w * float(
                        np.sum(
                            np.where(qa > 0, qa * (np.log(np.where(qa > 0, qa, 1.0)) - np.log(other[t, g - 1, m])), 0.0)
                        )
                    )
                if best is not None:
                    mass += w * float(qa @ (best[t, g - 1, m] > 0))
                    visits += w
                pe = ego_move_probs(m, spec.momentum)
                for a in range(len(MOVES)):
                    for e in range(len(MOVES)):
                        p = w * qa[a] * pe[e]
                        nxt, fault = step(g, a, e)
                        if fault is not None:
                            u += p * _terminal(fault)
                            crash_d += p * (fault == "defender")
                            crash_a += p * (fault == "attacker")
                        elif t == spec.horizon - 1:
                            u += p * _terminal(None)
                        else:
                            nxt_d[nxt - 1, e] += p
        d = nxt_d
    return Evaluation(
        utility=u,
        defender_fault_crash=crash_d,
        attacker_fault_crash=crash_a,
        kl=kl,
        best_response_mass=mass / visits if visits else 0.0,
    )


# ---------------------------------------------------------------- sampled play and preference learning
def play(
    policy: ClosedLoopPolicy, spec: GameSpec, seed: int, rng: np.random.Generator, reference: bool = False
) -> tuple[AttackerTrajectory, float]:
    """One episode on `seed` (which fixes the ego's moves: a group shares them) with the attacker
    sampling from `rng`. Returns the trajectory and its gated utility (-inf: the attacker's fault)."""
    world = np.random.default_rng([seed, 1])
    prev = int(world.integers(len(MOVES)))
    noise = world.random(spec.horizon)
    traj = AttackerTrajectory(policy="closed_loop_reference" if reference else "closed_loop")
    gap = spec.start_gap
    for t in range(spec.horizon):
        phi = game_features(t, gap, prev)
        action = policy.sample(phi, KEEP, rng)
        traj.t.append(float(t))
        traj.features.append(phi.tolist())
        traj.feasible.append(KEEP.tolist())
        traj.actions.append(ACTIONS[action])
        ego = int(np.searchsorted(np.cumsum(ego_move_probs(prev, spec.momentum)), noise[t], side="right"))
        ego = min(ego, len(MOVES) - 1)
        gap, fault = step(gap, ACTION_OF.index(action), ego)
        prev = ego
        if fault == "attacker":
            return traj, float("-inf")
        if fault == "defender":
            return traj, -J_CRASH
    return traj, -J_SAFE


def train(
    spec: GameSpec, rounds: int, contexts: int = 16, config: ClosedLoopConfig | None = None, seed: int = 0
) -> tuple[ClosedLoopAdv0, list[Evaluation], list[ClosedLoopRoundReport]]:
    """Iterated preference learning on the game: each round a group per fresh seed, then
    `ClosedLoopAdv0.learn`. Returns the attacker, the exact evaluation before each round and after
    the last (trajectory KL to the reference in `kl`), and each round's report."""
    attacker = ClosedLoopAdv0(
        config or ClosedLoopConfig(tau=spec.tau, k=8, shaping=0.0, kl_max=1.0, lr=2.0, dpo_steps=10),
        policy=reference_policy(),
        reference=reference_policy(),
    )
    ref_table = table_of(attacker.reference, spec)
    best = best_response(spec)
    evals = [evaluate(table_of(attacker.policy, spec), spec, ref_table, best)]
    reports = []
    for r in range(rounds):
        rng = np.random.default_rng([seed, r, 0xD0])
        groups, on_policy = [], []
        for c in range(contexts):
            world_seed = seed * 1_000_000 + r * 1_000 + c
            behaviour = attacker.behaviour()
            draws = [play(behaviour, spec, world_seed, rng) for _ in range(attacker.config.k)]
            draws += [
                play(attacker.reference, spec, world_seed, rng, True) for _ in range(attacker.config.reference_draws)
            ]
            groups.append(([tr for tr, _ in draws], np.array([u for _, u in draws])))
            on_policy += [True] * attacker.config.k + [False] * attacker.config.reference_draws
        reports.append(attacker.learn(groups, np.array(on_policy)))
        evals.append(evaluate(table_of(attacker.policy, spec), spec, ref_table, best))
    return attacker, evals, reports


class GameCheck(BaseModel):
    """The closed-loop exact check's numbers (no registered criterion: a measurement, not a verdict)."""

    rounds: int
    contexts: int
    kl_max: float
    kl_reference_to_optimum: float  # trajectory KL(p0 || pi*)
    kl_learned_to_optimum: float  # trajectory KL(q || pi*) after the rounds
    kl_learned_to_reference: float  # exact trajectory KL(q || p0): the bound's target
    utility_reference: float
    utility_learned: float
    utility_optimum: float
    best_response_mass_reference: float
    best_response_mass_learned: float
    defender_fault_crash_learned: float
    attacker_fault_crash_learned: float
    wall_s: float


def exact_check(
    spec: GameSpec | None = None,
    rounds: int = 10,
    contexts: int = 16,
    seed: int = 0,
    config: ClosedLoopConfig | None = None,
) -> GameCheck:
    """Learn for `rounds` and compare with the exact regularised optimum."""
    spec = spec or GameSpec()
    t0 = time.perf_counter()
    attacker, evals, _ = train(spec, rounds, contexts, config, seed)
    ref = table_of(attacker.reference, spec)
    opt, _ = soft_optimal(spec, ref)
    learned = table_of(attacker.policy, spec)
    best = best_response(spec)
    e_ref, e_learned, e_opt = (evaluate(x, spec, opt, best) for x in (ref, learned, opt))
    return GameCheck(
        rounds=rounds,
        contexts=contexts,
        kl_max=attacker.config.kl_max,
        kl_reference_to_optimum=e_ref.kl,
        kl_learned_to_optimum=e_learned.kl,
        kl_learned_to_reference=evals[-1].kl,
        utility_reference=e_ref.utility,
        utility_learned=e_learned.utility,
        utility_optimum=e_opt.utility,
        best_response_mass_reference=e_ref.best_response_mass,
        best_response_mass_learned=e_learned.best_response_mass,
        defender_fault_crash_learned=e_learned.defender_fault_crash,
        attacker_fault_crash_learned=e_learned.attacker_fault_crash,
        wall_s=round(time.perf_counter() - t0, 3),
    )
