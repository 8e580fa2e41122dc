"""The attacker options' policy side: the fixed baselines (none, random, scripted, a CAT-like fixed
objective) and the samplers of the ADV-0 attacker's avoidable-trigger variants (`escape.py`): open
loop, drawing only attacks a careful defender could escape judged from the initial state; closed
loop, drawing from q as ADV-0 does and letting the world fire each trigger only at a step whose
state leaves that escape. The learning options (ADV-0, its ablations and variants, SAGE-like) and
the loop's interface (`AttackerOption`, `make`) are `train/options.py`; a suite builds a fixed
option with `make_fixed` and a trained one with `sampler_from_state`.

Every option here has `draw(context, rng, n)` (n scenario draws for one initial state; None = no
attack) and `propose(context, rng)` (the training group for one context); the fixed ones'
`update` is a no-op.

The open-loop collision surrogate (`surrogate`) reads only the context (the initial state), never
a rollout: constant-velocity ego, the attacker's script at face value, no reaction, no fault rule.
It scores the overlap it predicts: CAT picks, among M draws of the motion prior p0, the one that
scores highest; SAGE-like runs the ADV-0 machinery (policy, p0, DPO with hard pairs over a 0.2 gap)
on the surrogate instead of on the defender's return.

May import: numpy, `environments.adv0.sim`, `environments.adv0.policies.attacker`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from environments.adv0.policies.attacker import Adv0Sampler, AttackerConfig, ReferencePrior, as_indices, factor_sizes
from environments.adv0.sim.escape import escape_exists
from environments.adv0.sim.scenario import (
    CONTEXT_DIM, CONTEXT_SLOTS, FACTOR_NAMES, FACTORS, MAX_LAT_ACCEL, MAX_LONG_ACCEL, TRAIN_MANOEUVRES, EpisodeResult,
    ScenarioParams, all_scenarios,
)

CAT_CANDIDATES = 32  # prior draws CAT ranks per scenario
LANE_W, VEH_W = 4.0, 2.0  # the surrogate's own road model
V_LAT_FULL = float(np.sqrt(MAX_LAT_ACCEL * LANE_W / 2))
SURROGATE_HORIZON_S = 2.0  # seconds after the script the open-loop prediction still counts
_ENTERS = ("cut_in", "cut_in_brake", "tailgate", "merge_squeeze", "yield_violation")


def _params(z: np.ndarray) -> list[ScenarioParams | None]:
    return [ScenarioParams.from_index(tuple(int(x) for x in row)) for row in z]


# ---------------------------------------------------------------- fixed options
class NoAttack:
    """Normal traffic: every draw is None."""

    name = "none"

    def draw(self, context: np.ndarray, rng: np.random.Generator, n: int) -> list[ScenarioParams | None]:
        return [None] * n

    def propose(self, context: np.ndarray, rng: np.random.Generator) -> list[ScenarioParams | None]:
        return [None]

    def update(self, results: Sequence[EpisodeResult],
               contexts: Mapping[int, np.ndarray] | None = None) -> None:
        return None


class RandomAttack(NoAttack):
    """Uniform over the training box."""

    name = "random"

    def __init__(self, k: int = 16):
        self.k = k

    def draw(self, context: np.ndarray, rng: np.random.Generator, n: int) -> list[ScenarioParams | None]:
        return _params(np.stack([rng.integers(0, s, size=n) for s in factor_sizes()], axis=1))

    def propose(self, context: np.ndarray, rng: np.random.Generator) -> list[ScenarioParams | None]:
        return self.draw(context, rng, self.k)


class ScriptedAttack(NoAttack):
    """Cut-in + brake from the nearest vehicle in an adjacent lane ahead (else the nearest in an
    adjacent lane, else slot 0): the closest gap, full intensity, the longest hold, trigger 1 s."""

    name = "scripted"

    def scenario(self, context: np.ndarray) -> ScenarioParams:
        slots = _slots(np.atleast_2d(context))[0]
        present, lane, ds = slots[:, 0] > 0, slots[:, 1], slots[:, 2]
        adjacent = present & (lane != 0)
        ahead = np.flatnonzero(adjacent & (ds > 0))
        slot = int(ahead[0]) if len(ahead) else int(np.flatnonzero(adjacent)[0]) if adjacent.any() else 0
        return ScenarioParams(slot=slot, manoeuvre="cut_in_brake", trigger_s=1.0, intensity=1.0, hold_s=2.0,
                              gap_m=min(FACTORS["gap_m"]))

    def draw(self, context: np.ndarray, rng: np.random.Generator, n: int) -> list[ScenarioParams | None]:
        return [self.scenario(context)] * n


class CatAttack(NoAttack):
    """CAT-like: the fixed objective, no learning, no defender rollouts -- each draw ranks
    `candidates` draws of the motion prior p0 by the open-loop `surrogate` and keeps the best."""

    name = "cat"

    def __init__(self, reference: ReferencePrior, candidates: int = CAT_CANDIDATES, k: int = 16):
        self.reference, self.candidates, self.k = reference, candidates, k

    def draw(self, context: np.ndarray, rng: np.random.Generator, n: int) -> list[ScenarioParams | None]:
        out = []
        for _ in range(n):
            z = self.reference.sample(rng, self.candidates)
            out.append(z[int(np.argmax(surrogate(context, z)))])
        return _params(np.array(out))

    def propose(self, context: np.ndarray, rng: np.random.Generator) -> list[ScenarioParams | None]:
        return self.draw(context, rng, self.k)


# ---------------------------------------------------------------- the trained ADV-0 attacker's samplers
class AvoidableSampler(Adv0Sampler):
    """ADV-0 with the trigger gated before it is played: q and the reference draws are restricted to
    the draws that leave a careful defender a braking escape (`escape.escape_exists`), renormalised
    over the whole space, so every draw is exact (its log-probability is log q(z) - log q(avoidable)).
    DPO is unchanged (`train/options.py`'s `AvoidableAdv0`): a pair's winner and loser share one
    context, so the normaliser cancels in their log-ratio. Where a context has no avoidable draw
    (none seen so far) it falls back to q."""

    name = "adv0-avoidable"

    def __init__(self, reference: ReferencePrior, config: AttackerConfig | None = None, context_dim: int = CONTEXT_DIM):
        super().__init__(reference, config, context_dim)
        self.space = all_scenarios(reference.manoeuvres)
        self._masks: dict[bytes, np.ndarray] = {}

    def avoidable(self, context: np.ndarray) -> np.ndarray:
        """(SPACE_SIZE,) bool over `all_scenarios` for this context (cached: 0.2 s a context)."""
        c = np.asarray(context, dtype=float)
        key = c.tobytes()
        if key not in self._masks:
            self._masks = dict(list(self._masks.items())[-255:])  # a bounded cache
            self._masks[key] = escape_exists(c[0] * 30.0, _slots(c[None])[0], self.space, self.reference.manoeuvres)
        return self._masks[key]

    def restricted(self, log_p: np.ndarray, context: np.ndarray) -> np.ndarray:
        """A distribution over the space, restricted to the avoidable draws and renormalised."""
        mask = self.avoidable(context)
        p = np.exp(log_p - log_p.max()) * (mask if mask.any() else 1.0)
        return np.asarray(p / p.sum())

    def draw(self, context: np.ndarray, rng: np.random.Generator, n: int) -> list[ScenarioParams]:
        p = self.restricted(self.policy.joint_log_probs(context), context)
        return list(self._params(self.space[rng.choice(len(self.space), size=n, p=p)]))

    def propose(self, context: np.ndarray, rng: np.random.Generator) -> list[ScenarioParams]:
        """K distinct avoidable draws from q plus `reference_draws` avoidable draws from p0."""
        p = self.restricted(self.policy.joint_log_probs(context), context)
        k = min(self.config.k, int(np.count_nonzero(p)))
        idx = list(rng.choice(len(self.space), size=k, replace=False, p=p))
        if self.config.reference_draws:
            p0 = self.restricted(self.reference.joint_log_probs(), context)
            idx += list(rng.choice(len(self.space), size=self.config.reference_draws, p=p0))
        return list(self._params(self.space[np.array(idx, dtype=np.int64)]))


class ClosedLoopAvoidableSampler(Adv0Sampler):
    """ADV-0 whose draws the world plays behind the closed-loop escape gate: every z it draws or
    proposes carries `escape_gate=True`, so the world fires it only at a step whose actual state
    leaves the ego an escape (`escape.escape_at_firing`); otherwise the attacker holds, and a trigger
    that never passes is recorded as withheld (no crash, so its utility is the ego's progress alone,
    and DPO learns to draw fewer of them). Its log-probabilities are ADV-0's own, exactly: the
    gate acts on how the environment executes a draw, not on which draw is made -- the draw is still
    z ~ q(z | context) over the same grid, and the gate is part of the dynamics that map z to an
    outcome, like the positioning rule that leaves some draws unfired."""

    name = "adv0-avoidable-closed"

    def _params(self, z: np.ndarray) -> list[ScenarioParams]:
        return [p.model_copy(update={"escape_gate": True}) for p in super()._params(z)]


SAMPLERS: dict[str, type[Adv0Sampler]] = {"adv0-avoidable": AvoidableSampler,
                                          "adv0-avoidable-closed": ClosedLoopAvoidableSampler}


def sampler_from_state(state: Mapping[str, object]) -> Adv0Sampler:
    """The sampler of a trained ADV-0 attacker's state (`attacker.json`): its `kind` picks the
    avoidable-trigger variants; any other ADV-0 kind (its ablations too) draws from q as ADV-0 does."""
    return SAMPLERS.get(str(state.get("kind")), Adv0Sampler).from_state(state)


FIXED = ("none", "random", "scripted", "cat")


def make_fixed(name: str, reference: ReferencePrior, k: int = 16) -> NoAttack:
    """The fixed option called `name` (one of FIXED): they never learn, so a suite may build them."""
    options: dict[str, NoAttack] = {"none": NoAttack(), "random": RandomAttack(k), "scripted": ScriptedAttack(),
                                    "cat": CatAttack(reference, k=k)}
    if name not in options:
        raise ValueError(f"unknown fixed attacker {name!r}; choose one of {', '.join(FIXED)}")
    return options[name]


# ---------------------------------------------------------------- the open-loop surrogate
def _slots(contexts: np.ndarray) -> np.ndarray:
    """(B, CONTEXT_SLOTS, 4): present, lane offset, longitudinal offset (m), speed difference (m/s)."""
    s = contexts[:, 1:1 + 4 * CONTEXT_SLOTS].reshape(len(contexts), CONTEXT_SLOTS, 4).copy()
    s[:, :, 2] *= 50.0
    s[:, :, 3] *= 10.0
    return s


def surrogate(context: np.ndarray, z_idx: np.ndarray | Sequence[ScenarioParams]) -> np.ndarray:
    """Open-loop collision score in [0, 1) of each draw from the initial state alone: does the script
    end in the ego's path, can the vehicle get to its firing position, and how far would a
    constant-speed ego overrun the firing gap within the script plus `SURROGATE_HORIZON_S`
    (logistic in metres of predicted overlap)."""
    z = as_indices(np.asarray(z_idx) if isinstance(z_idx, np.ndarray) else list(z_idx), TRAIN_MANOEUVRES, "surrogate draws")
    slots = _slots(np.atleast_2d(context))[0][z[:, 0]]
    present, lane, ds, dv = slots.T
    grid = {n: np.asarray(FACTORS[n], dtype=float) for n in FACTOR_NAMES if n != "manoeuvre"}
    man = np.array(TRAIN_MANOEUVRES)[z[:, 1]]
    inten, hold, gap = grid["intensity"][z[:, 3]], grid["hold_s"][z[:, 4]], grid["gap_m"][z[:, 5]]
    lane_change = np.isin(man, _ENTERS) & (lane != 0)
    enters = np.isin(man, _ENTERS) | ((man == "brake_check") & (lane == 0)) | (
        (man == "swerve_return") & (lane != 0) & (inten * LANE_W > LANE_W - VEH_W))
    tail = man == "tailgate"
    reachable = ~((lane == 0) & (ds < 0) & ~tail) & ~((lane == 0) & (ds > 0) & tail)
    t_lat = np.where(lane_change, np.pi * LANE_W / (2 * inten * V_LAT_FULL), 0.0)
    t_lat = np.where(man == "swerve_return", hold, t_lat)
    brake = np.where(np.isin(man, ("cut_in_brake", "brake_check")), inten * MAX_LONG_ACCEL, 0.0)
    brake = np.where(tail, inten * 2.0, brake)  # a tailgater closes from behind instead
    horizon = t_lat + hold + SURROGATE_HORIZON_S
    closing0 = np.where(tail, np.maximum(dv, 0.0), np.maximum(-dv, 0.0))
    closed = closing0 * horizon + brake * hold * (horizon - t_lat - hold / 2)
    score = 1 / (1 + np.exp(-(closed - gap) / 2.0))
    return np.where((present > 0) & enters & reachable, score, 0.0)
