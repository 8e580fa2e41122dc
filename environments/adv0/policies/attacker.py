"""The ADV-0 attacker's policy side: a small policy over scenario parameters z given the initial
state, its frozen reference prior, and the sampler a suite or the loop draws from. Trained by
group-wise preference learning (DPO) in `train/attacker.py`; nothing here updates a policy.

- Policy: a numpy MLP (one tanh layer) over the context vector (`sim/scenario.py`'s
  `context_vector`) with one softmax head per factor, so q(z | c) = prod_f q_f(z_f | c) and every
  log-probability is exact (float64, no sampling). Initialised AT the reference (output weights 0,
  biases log p0), so round 0 is the prior.
- Reference p0: one categorical per factor fitted (counts + Laplace smoothing) to observed factor
  samples of background behaviour, so hard, close cut-ins are rare under it (`reference_prior`).
- `AttackerConfig`: the attacker's knobs, its training ones included (they are part of its saved
  state); `Adv0Sampler`: `propose` / `draw` / `state` / `from_state`.

May import: numpy, pydantic, `environments.adv0.sim`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal, Self

import numpy as np
from pydantic import BaseModel, Field

from environments.adv0.sim import toy
from environments.adv0.sim.scenario import (
    CONTEXT_DIM, FACTOR_NAMES, FACTORS, TRAIN_MANOEUVRES, Manoeuvre, ScenarioParams, all_scenarios,
)
from environments.adv0.sim.worlds import world_for


def factor_sizes(manoeuvres: tuple[Manoeuvre, ...] = TRAIN_MANOEUVRES) -> tuple[int, ...]:
    return tuple(len(manoeuvres) if n == "manoeuvre" else len(FACTORS[n]) for n in FACTOR_NAMES)


def as_indices(samples: Sequence[ScenarioParams] | np.ndarray, manoeuvres: tuple[Manoeuvre, ...] = TRAIN_MANOEUVRES,
               what: str = "samples") -> np.ndarray:
    """Factor-index rows (n, F) of draws given as `ScenarioParams` or as an index array (checked)."""
    sizes = np.array(factor_sizes(manoeuvres))
    if isinstance(samples, np.ndarray):
        z = samples.astype(np.int64)
    else:
        try:
            z = np.array([p.index(manoeuvres) for p in samples], dtype=np.int64).reshape(-1, len(sizes))
        except ValueError as e:
            raise ValueError(f"{what}: a draw uses a manoeuvre outside {manoeuvres} ({e})") from None
    if z.ndim != 2 or z.shape[1] != len(sizes):
        raise ValueError(f"{what} must be factor-index rows of shape (n, {len(sizes)}); got {z.shape}")
    bad = (z < 0) | (z >= sizes)
    if bad.any():
        f = int(np.argwhere(bad)[0][1])
        raise ValueError(f"{what}: factor {FACTOR_NAMES[f]} has an index outside 0..{sizes[f] - 1}")
    return z


# ---------------------------------------------------------------- the reference prior
class ReferencePrior:
    """p0(z) = prod_f p0_f(z_f), context-free. `log_p[f]` is a normalised log-probability vector."""

    def __init__(self, log_p: Sequence[np.ndarray], manoeuvres: tuple[Manoeuvre, ...] = TRAIN_MANOEUVRES):
        self.log_p = tuple(np.asarray(x, dtype=float) for x in log_p)
        self.manoeuvres = manoeuvres
        if tuple(len(x) for x in self.log_p) != factor_sizes(manoeuvres):
            raise ValueError(f"reference prior: factor sizes {[len(x) for x in self.log_p]} != {factor_sizes(manoeuvres)}")

    def log_prob(self, z_idx: np.ndarray) -> np.ndarray:
        z = np.asarray(z_idx)
        return sum((lp[z[..., f]] for f, lp in enumerate(self.log_p)), start=np.zeros(z.shape[:-1]))

    def joint_log_probs(self) -> np.ndarray:
        """log p0 over the whole space, in `all_scenarios` order (SPACE_SIZE,)."""
        return joint_from_factors(list(self.log_p))

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return np.stack([rng.choice(len(lp), size=n, p=np.exp(lp)) for lp in self.log_p], axis=1)

    def to_dict(self) -> dict[str, list[float] | list[str]]:
        out: dict[str, list[float] | list[str]] = {n: lp.tolist() for n, lp in zip(FACTOR_NAMES, self.log_p)}
        out["manoeuvres"] = [str(m) for m in self.manoeuvres]
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Sequence[float] | Sequence[str]]) -> "ReferencePrior":
        mans = tuple(str(m) for m in data["manoeuvres"])
        return cls([np.array(data[n], dtype=float) for n in FACTOR_NAMES], mans)  # type: ignore[arg-type]


def fit_reference(samples: Sequence[ScenarioParams] | np.ndarray, alpha: float = 1.0,
                  manoeuvres: tuple[Manoeuvre, ...] = TRAIN_MANOEUVRES) -> ReferencePrior:
    """Fit p0 to observed factor samples of background behaviour: per-factor counts plus `alpha`
    (Laplace smoothing keeps every z possible, so KL(q || p0) stays finite)."""
    if alpha <= 0:
        raise ValueError(f"fit_reference: alpha={alpha} must be > 0 (it keeps unseen values possible)")
    z = as_indices(samples, manoeuvres, "reference samples")
    if len(z) == 0:
        raise ValueError("fit_reference: no samples; pass observed background behaviour as factor draws")
    log_p = []
    for f, size in enumerate(factor_sizes(manoeuvres)):
        counts = np.bincount(z[:, f], minlength=size) + alpha
        log_p.append(np.log(counts / counts.sum()))
    return ReferencePrior(log_p, manoeuvres)


def uniform_reference(manoeuvres: tuple[Manoeuvre, ...] = TRAIN_MANOEUVRES) -> ReferencePrior:
    return ReferencePrior([np.full(n, -np.log(n)) for n in factor_sizes(manoeuvres)], manoeuvres)


def joint_from_factors(per_factor: list[np.ndarray]) -> np.ndarray:
    """Sum per-factor log-probs over the product space (C order = `all_scenarios` order)."""
    total = np.zeros(())
    for lp in per_factor:
        total = total[..., None] + lp
    return total.ravel()


def _log_softmax(x: np.ndarray) -> np.ndarray:
    m = x.max(axis=-1, keepdims=True)
    return np.asarray(x - m - np.log(np.exp(x - m).sum(axis=-1, keepdims=True)))


# ---------------------------------------------------------------- the policy
class AttackerPolicy:
    """q(z | c): tanh MLP over the context, one softmax head per factor. Starts equal to p0."""

    def __init__(self, reference: ReferencePrior, context_dim: int = CONTEXT_DIM, hidden: int = 32, seed: int = 0):
        rng = np.random.default_rng(seed)
        self.manoeuvres = reference.manoeuvres
        self.sizes = factor_sizes(self.manoeuvres)
        self.p: dict[str, np.ndarray] = {"W1": rng.normal(0, 1 / np.sqrt(context_dim), (hidden, context_dim)),
                                         "b1": np.zeros(hidden)}
        for f, lp in enumerate(reference.log_p):
            self.p[f"W2_{f}"] = np.zeros((len(lp), hidden))
            self.p[f"b2_{f}"] = lp.copy()

    def _forward(self, contexts: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
        c = np.atleast_2d(np.asarray(contexts, dtype=float))
        if c.shape[1] != self.p["W1"].shape[1]:
            raise ValueError(f"attacker context has {c.shape[1]} features; this policy takes {self.p['W1'].shape[1]}")
        h = np.tanh(c @ self.p["W1"].T + self.p["b1"])
        return h, [h @ self.p[f"W2_{f}"].T + self.p[f"b2_{f}"] for f in range(len(self.sizes))]

    def factor_log_probs(self, contexts: np.ndarray) -> list[np.ndarray]:
        """Per factor, (B, n_f) exact log-probabilities."""
        return [_log_softmax(x) for x in self._forward(contexts)[1]]

    def log_prob(self, contexts: np.ndarray, z_idx: np.ndarray) -> np.ndarray:
        lps = self.factor_log_probs(contexts)
        z = np.atleast_2d(z_idx)
        rows = np.arange(len(z)) if len(lps[0]) == len(z) else np.zeros(len(z), dtype=np.int64)
        return sum((lp[rows, z[:, f]] for f, lp in enumerate(lps)), start=np.zeros(len(z)))

    def joint_log_probs(self, context: np.ndarray) -> np.ndarray:
        """log q over the whole space for one context, in `all_scenarios` order."""
        return joint_from_factors([lp[0] for lp in self.factor_log_probs(context)])

    def sample(self, context: np.ndarray, rng: np.random.Generator, n: int, distinct: bool = False) -> np.ndarray:
        """n draws (n, F); `distinct`: no repeats (rejection, then the most likely unseen if q is peaked)."""
        probs = [np.exp(lp[0]) for lp in self.factor_log_probs(context)]
        if not distinct:
            return np.stack([rng.choice(len(p), size=n, p=p / p.sum()) for p in probs], axis=1)
        seen: dict[tuple[int, ...], None] = {}
        for _ in range(20):
            batch = np.stack([rng.choice(len(p), size=2 * n, p=p / p.sum()) for p in probs], axis=1)
            for row in map(tuple, batch.tolist()):
                seen.setdefault(row)
                if len(seen) == n:
                    return np.array(list(seen))
        order = np.argsort(-self.joint_log_probs(context), kind="stable")
        space = all_scenarios(self.manoeuvres)
        for i in order:
            seen.setdefault(tuple(space[i].tolist()))
            if len(seen) == n:
                break
        return np.array(list(seen))

    def kl_to(self, reference: ReferencePrior, contexts: np.ndarray) -> np.ndarray:
        """Exact KL(q(.|c) || p0) per context: a sum over factors (both are factorised)."""
        lps = self.factor_log_probs(contexts)
        return sum((np.sum(np.exp(lp) * (lp - ref), axis=1) for lp, ref in zip(lps, reference.log_p)),
                   start=np.zeros(len(lps[0])))

    def copy(self) -> "AttackerPolicy":
        out = object.__new__(AttackerPolicy)
        out.manoeuvres, out.sizes = self.manoeuvres, self.sizes
        out.p = {k: v.copy() for k, v in self.p.items()}
        return out

    def state(self) -> dict[str, list[list[float]]]:
        return {k: v.tolist() for k, v in self.p.items()}

    def load_state(self, state: Mapping[str, Sequence[Sequence[float]]]) -> None:
        for k in self.p:
            arr = np.array(state[k], dtype=float)
            if arr.shape != self.p[k].shape:
                raise ValueError(f"attacker state: {k} has shape {arr.shape}, the policy needs {self.p[k].shape}")
            self.p[k] = arr


# ---------------------------------------------------------------- the sampler
class AttackerConfig(BaseModel):
    """The attacker's knobs: the sampler's (`k`, `reference_draws`, `hidden`, `seed`) and its trainer's,
    kept together because a saved state carries them all (the ablations are flags here:
    `use_reference`, `fault_gate`, `freeze_after`)."""

    tau: float = Field(0.1, gt=0, description="temperature of q* ~ p0 exp(-J/tau); DPO's beta")
    k: int = Field(16, ge=1, description="distinct policy draws per context and round")
    reference_draws: int = Field(1, ge=0, description="draws from p0 added to each group")
    labels: Literal["soft", "hard"] = "soft"
    margin: float = Field(0.0, ge=0, description="feasible pairs need a utility gap of at least this (hard: above)")
    kl_max: float = Field(6.0, gt=0, description="KL(q || p0) budget in nats: the KL stop")
    dpo_steps: int = Field(5, ge=1, description="optimiser steps per round")
    lr: float = Field(3.0, gt=0, description="step size (sgd: on the mean DPO loss, whose gradient is ~beta small)")
    optimiser: Literal["adam", "sgd"] = "sgd"
    hidden: int = Field(32, ge=1)
    shaping: float = Field(0.3, ge=0, description="near-miss bonus weight in round 0")
    shaping_decay: float = Field(0.8, ge=0, le=1, description="the bonus weight's factor per round")
    replay_rounds: int = Field(1, ge=1, description="pairs of this many recent rounds are trained on")
    use_reference: bool = True  # False: reference-free DPO and no KL stop (ablation)
    fault_gate: bool = True  # False: attacker-at-fault crashes count as successes (ablation)
    freeze_after: int | None = Field(None, ge=1, description="stop learning after this many rounds (ablation: 1)")
    seed: int = 0


class Adv0Sampler:
    """The trained ADV-0 attacker as a sampler: `propose` a training group per context, `draw` at
    evaluation time, `state`/`from_state` as JSON. Its trainer (`train/attacker.py`'s `Adv0Attacker`)
    adds `update`; a suite draws from this class alone."""

    name = "adv0"

    def __init__(self, reference: ReferencePrior, config: AttackerConfig | None = None, context_dim: int = CONTEXT_DIM):
        self.config = config or AttackerConfig()
        self.reference = reference
        self.policy = AttackerPolicy(reference, context_dim, self.config.hidden, self.config.seed)
        self.round = 0

    @property
    def frozen(self) -> bool:
        return self.config.freeze_after is not None and self.round >= self.config.freeze_after

    def _params(self, z: np.ndarray) -> list[ScenarioParams]:
        return [ScenarioParams.from_index(tuple(int(x) for x in row), self.reference.manoeuvres) for row in z]

    def propose(self, context: np.ndarray, rng: np.random.Generator) -> list[ScenarioParams]:
        """K distinct draws from q plus `reference_draws` from p0: one group, one shared seed."""
        z = self.policy.sample(context, rng, self.config.k, distinct=True)
        if self.config.reference_draws:
            z = np.concatenate([z, self.reference.sample(rng, self.config.reference_draws)])
        return self._params(z)

    def draw(self, context: np.ndarray, rng: np.random.Generator, n: int) -> list[ScenarioParams]:
        return self._params(self.policy.sample(context, rng, n))

    def state(self) -> dict[str, object]:
        """Everything a resumed run needs except the trainer's replay buffer (rebuilt by the next round)."""
        return {"round": self.round, "config": self.config.model_dump(), "reference": self.reference.to_dict(),
                "policy": self.policy.state()}

    def load_state(self, state: Mapping[str, object]) -> None:
        """Restore the policy and round of `state()` (a trainer's optimiser moments restart)."""
        self.policy.load_state(state["policy"])  # type: ignore[arg-type]
        self.round = int(state["round"])  # type: ignore[call-overload]

    @classmethod
    def from_state(cls, state: Mapping[str, object]) -> Self:
        ref = ReferencePrior.from_dict(state["reference"])  # type: ignore[arg-type]
        config = AttackerConfig.model_validate(state["config"])
        policy_state = state["policy"]
        out = cls(ref, config, len(policy_state["W1"][0]))  # type: ignore[index]
        out.load_state(state)
        return out


def reference_prior(family: str) -> ReferencePrior:
    """p0, fitted to background behaviour (the toy world's stated naturalistic model serves every
    world: highway-env's own traffic has no scenario factors to count)."""
    world = world_for(family)
    sampler = getattr(world, "background_behaviour", toy.background_behaviour)
    return fit_reference(sampler(np.random.default_rng(0), 20_000))
