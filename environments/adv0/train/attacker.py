"""The ADV-0 attacker's trainer: group-wise preference learning (DPO) of `policies/attacker.py`'s
policy against its frozen reference prior.

- Utility u(z) = -J (the defender's own return, fault-gated) plus a near-miss bonus on min TTC
  whose weight is annealed away round by round; a draw whose script broke the kinematic limits, or
  whose crash was the attacker's fault, is infeasible: it loses every pair.
- Pairs (`build_pairs`), within each group of K distinct policy draws + reference draws rolled out
  on ONE shared seed: infeasible vs feasible (target 1 for the feasible one), and feasible pairs
  over `margin`. Targets are `soft` (Bradley-Terry, sigma(u_w - u_l), ties included) or `hard`
  (1, SAGE's rule). With soft targets and beta = tau, DPO's fixed point is exactly
  q*(z) ~ p0(z) exp(u(z)/tau) = p0(z) exp(-J(z)/tau) on feasible z (the reconstruction) for a
  policy class that holds q*; for the factorised class, with on-policy pairs and small steps, it
  is the mean-field projection of q* (linearise sigma: Cov_q(tau h - u, grad h) = 0, h = log q/p0).
  Hard targets have no finite fixed point and stop only at the KL budget.
- DPO against the frozen p0 (`dpo_train`, full batch, plain SGD by default, its state kept across
  rounds) with a KL stop: a step that would take the mean exact KL(q || p0) over the round's
  contexts past `kl_max` is undone and the round ends.

The pairs and DPO itself are `dpo.py`; the exact reconstruction of q* on an enumerable world
(the toy checks) is `checks/exact.py`.

May import: numpy, pydantic, `environments.adv0.sim`, `environments.adv0.policies`, `environments.adv0.train.dpo`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np
from pydantic import BaseModel

from environments.adv0.policies.attacker import Adv0Sampler, AttackerConfig, ReferencePrior, as_indices
from environments.adv0.sim.scenario import CONTEXT_DIM, TTC_HORIZON_S, EpisodeResult, ScenarioParams, defender_return
from environments.adv0.train.dpo import Adam, DpoReport, Pairs, Sgd, build_pairs, concat_pairs, dpo_train

Rollout = Callable[[list[int], list[ScenarioParams]], list[EpisodeResult]]


# ---------------------------------------------------------------- utility and pairs
def gated_utility(J: np.ndarray, feasible: np.ndarray, attacker_fault: np.ndarray, min_ttc: np.ndarray,
                  shaping: float = 0.0, fault_gate: bool = True) -> np.ndarray:
    """u = -J + shaping * (1 - min_ttc / horizon); -inf where infeasible (the script broke the
    kinematic limits, or -- with the fault gate -- the crash was the attacker's fault)."""
    u = -np.asarray(J, dtype=float) + shaping * (1 - np.minimum(min_ttc, TTC_HORIZON_S) / TTC_HORIZON_S)
    bad = ~np.asarray(feasible, bool) | (np.asarray(attacker_fault, bool) & fault_gate)
    return np.where(bad, -np.inf, u)


def utility(result: EpisodeResult, shaping: float = 0.0, fault_gate: bool = True) -> float:
    """The attacker's utility of one episode (see `gated_utility`). Without the fault gate every
    crash counts against the defender, whoever caused it (the ablation)."""
    attacker_fault = result.crashed and result.collision is not None and result.collision.fault == "attacker"
    J = result.reward if fault_gate else defender_return(result.crashed, result.mean_speed, result.distance_m,
                                                         result.duration_s)
    return float(gated_utility(np.array(J), np.array(result.attack_feasible), np.array(attacker_fault),
                               np.array(result.min_ttc), shaping, fault_gate))


# ---------------------------------------------------------------- the attacker and its rounds
# ---------------------------------------------------------------- the trainer and its rounds
class RoundReport(BaseModel):
    round: int
    groups: int
    episodes: int
    pairs: int
    infeasible_share: float
    mean_utility: float  # over feasible draws
    shaping: float
    dpo: DpoReport | None = None
    frozen: bool = False


class Adv0Attacker(Adv0Sampler):
    """The learning attacker: the sampler's `propose` / `draw`, plus `update` from a round's
    results (grouped by their shared seed) with DPO and a replay of recent rounds' pairs."""

    def __init__(self, reference: ReferencePrior, config: AttackerConfig | None = None, context_dim: int = CONTEXT_DIM):
        super().__init__(reference, config, context_dim)
        self.replay: list[tuple[np.ndarray, Pairs]] = []  # per round: (its contexts, its pairs)
        self.optimiser: Adam | Sgd = (Sgd(self.config.lr) if self.config.optimiser == "sgd"
                                      else Adam(self.policy.p, self.config.lr))

    def shaping_weight(self) -> float:
        return self.config.shaping * self.config.shaping_decay**self.round

    def group_utilities(self, context: np.ndarray, z: np.ndarray, results: Sequence[EpisodeResult]) -> np.ndarray:
        w = self.shaping_weight()
        return np.array([utility(r, w, self.config.fault_gate) for r in results])

    def update(self, results: Sequence[EpisodeResult], contexts: Mapping[int, np.ndarray]) -> RoundReport:
        """One round: pairs within each seed's group, DPO on the last `replay_rounds` rounds' pairs."""
        groups: dict[int, list[EpisodeResult]] = {}
        for r in results:
            if r.attack is not None and r.attack.manoeuvre in self.reference.manoeuvres:
                groups.setdefault(r.seed, []).append(r)
        missing = [s for s in groups if s not in contexts]
        if missing:
            raise ValueError(f"attacker update: no context for seeds {missing[:5]}; pass contexts={{seed: vector}}")
        seeds = sorted(groups)
        ctx = np.array([contexts[s] for s in seeds]) if seeds else np.zeros((0, self.policy.p["W1"].shape[1]))
        parts, us = [], []
        for i, s in enumerate(seeds):
            z = as_indices([r.attack for r in groups[s] if r.attack is not None], self.reference.manoeuvres)
            u = self.group_utilities(ctx[i], z, groups[s])
            us.append(u)
            parts.append(build_pairs(z, u, i, self.config.margin, self.config.labels))
        pairs = concat_pairs(parts)
        u_all = np.concatenate(us) if us else np.zeros(0)
        report = RoundReport(round=self.round, groups=len(seeds), episodes=len(u_all), pairs=len(pairs),
                             infeasible_share=float(np.mean(np.isinf(u_all))) if len(u_all) else 0.0,
                             mean_utility=float(np.mean(u_all[np.isfinite(u_all)])) if np.isfinite(u_all).any() else float("nan"),
                             shaping=self.shaping_weight(), frozen=self.frozen)
        if self.frozen:
            return report
        self.replay = (self.replay + [(ctx, pairs)])[-self.config.replay_rounds:]
        all_ctx, all_pairs, offset = [], [], 0
        for c, p in self.replay:
            all_ctx.append(c)
            all_pairs.append(Pairs(ctx=p.ctx + offset, win=p.win, lose=p.lose, target=p.target))
            offset += len(c)
        cfg = self.config
        report.dpo = dpo_train(self.policy, self.reference, np.concatenate(all_ctx) if offset else ctx,
                               concat_pairs(all_pairs), cfg.tau, cfg.dpo_steps, cfg.lr,
                               cfg.kl_max if cfg.use_reference else float("inf"), cfg.use_reference, self.optimiser)
        self.round += 1
        return report


def iterate(attacker: Adv0Attacker, seeds: Sequence[int], contexts: Mapping[int, np.ndarray], rollout: Rollout,
            rng: np.random.Generator) -> RoundReport:
    """One round against the current defender: a group per seed (K policy draws + reference draws),
    every draw of a group rolled out on that seed by `rollout(seeds, zs)` (paired lists), then
    `update`."""
    flat_seeds, flat_z = [], []
    for s in seeds:
        group = attacker.propose(contexts[s], rng)
        flat_seeds += [s] * len(group)
        flat_z += group
    return attacker.update(rollout(flat_seeds, flat_z), contexts)
