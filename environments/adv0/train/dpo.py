"""ADV-0's preference learning: preference pairs within a group of draws rolled out on one shared
seed (`build_pairs`), and DPO against the frozen reference prior with a KL stop (`dpo_train`).

- Pairs: infeasible vs feasible (target 1 for the feasible draw), and feasible pairs over
  `margin`. Targets are `soft` (Bradley-Terry, sigma(u_w - u_l), ties included) or `hard` (1,
  SAGE's rule). With soft targets and beta = tau, DPO's fixed point is exactly
  q*(z) ~ p0(z) exp(u(z)/tau) on feasible z for a policy class that holds q*.
- DPO (full batch, plain SGD by default, its optimiser state kept across rounds): a step that would
  take the mean exact KL(q || p0) over the round's contexts past `kl_max` is undone and the round
  ends (the KL stop).

May import: numpy, pydantic, `environments.adv0.sim.scenario`, `environments.adv0.policies.attacker`
(the policy and the prior it trains).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

import numpy as np
from pydantic import BaseModel

from environments.adv0.policies.attacker import AttackerPolicy, ReferencePrior
from environments.adv0.sim.scenario import FACTOR_NAMES


# ---------------------------------------------------------------- pairs
class Pairs(BaseModel):
    """Preference pairs: `ctx` indexes the contexts array they were drawn for."""

    model_config = {"arbitrary_types_allowed": True}
    ctx: np.ndarray
    win: np.ndarray
    lose: np.ndarray
    target: np.ndarray

    @classmethod
    def empty(cls, n_factors: int = len(FACTOR_NAMES)) -> "Pairs":
        z = np.zeros((0, n_factors), dtype=np.int64)
        return cls(ctx=np.zeros(0, dtype=np.int64), win=z, lose=z.copy(), target=np.zeros(0))

    def __len__(self) -> int:
        return len(self.target)


def build_pairs(
    z_idx: np.ndarray, u: np.ndarray, ctx: int = 0, margin: float = 0.0, labels: Literal["soft", "hard"] = "soft"
) -> Pairs:
    """All pairs of one group (draws on one shared seed): infeasible (u = -inf) vs feasible always,
    target 1 for the feasible draw; feasible pairs with a utility gap above `margin` (hard targets:
    1) or at least `margin` (soft targets: sigma(u_w - u_l), ties included -- their 0.5 holds
    h(w) = h(l), without which h drifts freely along every direction the utility ignores). Two
    infeasible draws make no pair; identical draws none either."""
    z, u = np.asarray(z_idx), np.asarray(u, dtype=float)
    i, j = np.triu_indices(len(u), k=1)
    w = np.where(u[i] >= u[j], i, j)
    lo = np.where(u[i] >= u[j], j, i)
    with np.errstate(invalid="ignore"):
        gap = u[w] - u[lo]  # +inf when only the loser is infeasible, nan when both are
    infeasible_loser = np.isinf(u[lo]) & np.isfinite(u[w])
    both_feasible = np.isfinite(u[w]) & np.isfinite(u[lo])
    if labels == "hard":
        keep = infeasible_loser | (both_feasible & (gap > margin))
        target = np.ones(len(w))
    else:
        keep = infeasible_loser | (both_feasible & (gap >= margin))
        target = np.where(infeasible_loser, 1.0, 1 / (1 + np.exp(-np.where(both_feasible, gap, 0.0))))
    if len(w):
        keep &= np.any(z[w] != z[lo], axis=1)
    n_f = z.shape[1] if z.ndim == 2 else len(FACTOR_NAMES)
    if not keep.any():
        return Pairs.empty(n_f)
    return Pairs(
        ctx=np.full(int(keep.sum()), ctx, dtype=np.int64), win=z[w[keep]], lose=z[lo[keep]], target=target[keep]
    )


def concat_pairs(parts: Sequence[Pairs]) -> Pairs:
    parts = [p for p in parts if len(p)]
    if not parts:
        return Pairs.empty()
    return Pairs(
        ctx=np.concatenate([p.ctx for p in parts]),
        win=np.concatenate([p.win for p in parts]),
        lose=np.concatenate([p.lose for p in parts]),
        target=np.concatenate([p.target for p in parts]),
    )


# ---------------------------------------------------------------- DPO
class DpoReport(BaseModel):
    steps: int
    loss_start: float
    loss_end: float
    kl: float  # mean exact KL(q || p0) over the contexts after the round
    kl_stopped: bool  # the KL budget ended the round early


def preference_loss(
    diff: np.ndarray, target: np.ndarray, beta: float, weights: np.ndarray | None = None
) -> tuple[float, np.ndarray]:
    """The DPO loss shared by both attackers: the binary cross-entropy of sigma(beta * diff) against
    the (soft) target, where diff is the winner's minus the loser's log-ratio to the reference,
    summed over pairs with `weights` (default 1 / pairs: the mean); returns it and dL/d diff per pair."""
    m = beta * np.asarray(diff, dtype=float)
    target = np.asarray(target, dtype=float)
    w = np.full(len(target), 1 / len(target)) if weights is None else np.asarray(weights, dtype=float)
    loss = float(np.sum(w * (target * np.logaddexp(0, -m) + (1 - target) * np.logaddexp(0, m))))
    return loss, (1 / (1 + np.exp(-m)) - target) * beta * w


def dpo_loss_and_grads(
    policy: AttackerPolicy,
    reference: ReferencePrior,
    contexts: np.ndarray,
    pairs: Pairs,
    beta: float,
    use_reference: bool = True,
) -> tuple[float, dict[str, np.ndarray]]:
    """Mean DPO loss over the pairs (soft targets: binary cross-entropy on sigma(beta * margin)) and
    its exact gradient. The margin is beta * [(log q(w) - log q(l)) - (log p0(w) - log p0(l))]; q's
    normaliser cancels within a context, so it is a difference of head logits."""
    h, logits = policy._forward(contexts)
    n_f = len(logits)
    diff = sum(
        (logits[f][pairs.ctx, pairs.win[:, f]] - logits[f][pairs.ctx, pairs.lose[:, f]] for f in range(n_f)),
        start=np.zeros(len(pairs)),
    )
    if use_reference:
        diff = diff - (reference.log_prob(pairs.win) - reference.log_prob(pairs.lose))
    loss, g = preference_loss(diff, pairs.target, beta)
    grads: dict[str, np.ndarray] = {}
    dh = np.zeros_like(h)
    for f in range(n_f):
        G = np.zeros_like(logits[f])
        np.add.at(G, (pairs.ctx, pairs.win[:, f]), g)
        np.add.at(G, (pairs.ctx, pairs.lose[:, f]), -g)
        grads[f"W2_{f}"] = G.T @ h
        grads[f"b2_{f}"] = G.sum(axis=0)
        dh += G @ policy.p[f"W2_{f}"]
    pre = dh * (1 - h**2)
    grads["W1"] = pre.T @ np.atleast_2d(contexts)
    grads["b1"] = pre.sum(axis=0)
    return loss, grads


class Adam:
    """Adam's moment estimates, kept across rounds: iterated DPO is one long stochastic optimisation
    whose every round adds a fresh on-policy batch, not a new fit to a small sample."""

    def __init__(self, params: Mapping[str, np.ndarray], lr: float):
        self.lr, self.t = lr, 0
        self.m1 = {k: np.zeros_like(v) for k, v in params.items()}
        self.m2 = {k: np.zeros_like(v) for k, v in params.items()}

    def step(self, params: dict[str, np.ndarray], grads: Mapping[str, np.ndarray]) -> None:
        self.t += 1
        for k, g in grads.items():
            self.m1[k] = 0.9 * self.m1[k] + 0.1 * g
            self.m2[k] = 0.999 * self.m2[k] + 0.001 * g**2
            params[k] -= self.lr * (self.m1[k] / (1 - 0.9**self.t)) / (np.sqrt(self.m2[k] / (1 - 0.999**self.t)) + 1e-8)


class Sgd:
    """Plain gradient steps: noise in a round's small batch averages out over rounds instead of
    being normalised into full-size steps (Adam's failure mode on near-0.5 soft targets)."""

    def __init__(self, lr: float):
        self.lr, self.t = lr, 0

    def step(self, params: dict[str, np.ndarray], grads: Mapping[str, np.ndarray]) -> None:
        self.t += 1
        for k, g in grads.items():
            params[k] -= self.lr * g


def dpo_train(
    policy: AttackerPolicy,
    reference: ReferencePrior,
    contexts: np.ndarray,
    pairs: Pairs,
    beta: float,
    steps: int = 100,
    lr: float = 3.0,
    kl_max: float = float("inf"),
    use_reference: bool = True,
    optimiser: Adam | Sgd | None = None,
) -> DpoReport:
    """Full-batch steps on the DPO loss (`optimiser`, default `Sgd(lr)`, carries its state across calls); a step
    that takes the mean KL(q || p0) over `contexts` past `kl_max` is undone and training stops
    (the KL stop)."""
    contexts = np.atleast_2d(contexts)
    if len(pairs) == 0:
        kl = float(policy.kl_to(reference, contexts).mean())
        return DpoReport(steps=0, loss_start=float("nan"), loss_end=float("nan"), kl=kl, kl_stopped=False)
    opt = optimiser or Sgd(lr)
    loss0 = loss = float("nan")
    stopped, done = False, 0
    for step in range(1, steps + 1):
        loss, grads = dpo_loss_and_grads(policy, reference, contexts, pairs, beta, use_reference)
        if step == 1:
            loss0 = loss
        before = {k: v.copy() for k, v in policy.p.items()}
        opt.step(policy.p, grads)
        if np.isfinite(kl_max) and policy.kl_to(reference, contexts).mean() > kl_max:
            policy.p = before
            stopped = True
            break
        done = step
    kl = float(policy.kl_to(reference, contexts).mean())
    return DpoReport(steps=done, loss_start=loss0, loss_end=loss, kl=kl, kl_stopped=stopped)
