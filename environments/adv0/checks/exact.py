"""Exact reconstruction of the attacker's optimum on a world whose whole scenario space can be
enumerated (the toy world; `toy_checks.py`): the gated return, q*(z) ~ p0(z) exp(-J(z)/tau), the
soft value V_tau = -tau log E_p0[exp(-J/tau)] (<= E_p0[J]), exact KL, and the best factorised
approximation of q* (`factorised_projection`, the floor a per-factor policy can reach).

May import: numpy, `environments.adv0.policies.attacker` (the factor sizes and the joint of per-factor logs).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from environments.adv0.policies.attacker import factor_sizes, joint_from_factors

J_INFEASIBLE = 2.0  # the gated return of an infeasible draw: above any reachable J (<= 1), so it always loses


def gated_return(J: np.ndarray, feasible: np.ndarray, attacker_fault: np.ndarray) -> np.ndarray:
    """The defender's return as the attacker scores it: J_INFEASIBLE for infeasible draws."""
    return np.where(np.asarray(feasible, bool) & ~np.asarray(attacker_fault, bool), J, J_INFEASIBLE)


def optimal_log_q(J_gated: np.ndarray, log_p0: np.ndarray, tau: float) -> np.ndarray:
    """log q*(z) = log p0(z) - J(z)/tau - log Z, over the last axis (the whole space)."""
    x = log_p0 - np.asarray(J_gated) / tau
    return x - np.logaddexp.reduce(x, axis=-1, keepdims=True)


def soft_value(J_gated: np.ndarray, log_p0: np.ndarray, tau: float) -> np.ndarray:
    """V_tau = -tau log E_p0[exp(-J/tau)] (<= E_p0[J] by Jensen), over the last axis."""
    return np.asarray(-tau * np.logaddexp.reduce(log_p0 - np.asarray(J_gated) / tau, axis=-1))


def expected_return(J_gated: np.ndarray, log_p: np.ndarray) -> np.ndarray:
    return np.asarray(np.sum(np.exp(log_p) * J_gated, axis=-1))


def kl_divergence(log_q: np.ndarray, log_p: np.ndarray) -> np.ndarray:
    """Exact KL(q || p) over the last axis."""
    return np.asarray(np.sum(np.exp(log_q) * (log_q - log_p), axis=-1))


def factorised_projection(log_target: np.ndarray, sizes: tuple[int, ...] | None = None, iters: int = 200,
                          start: Sequence[np.ndarray] | None = None) -> np.ndarray:
    """A factorised q minimising KL(q || target) by coordinate ascent (mean field) from `start`
    (per-factor log-probs), or the better of starts at the target's marginals and at uniform.
    KL(q || target) is not convex in q: from p0 it finds the projection a local learner started at
    p0 can reach; from the marginals, usually the global floor of any per-factor policy."""
    sizes = sizes or factor_sizes()
    T = np.asarray(log_target).reshape(sizes)
    axes = range(len(sizes))
    marg = [np.log(np.exp(T).sum(axis=tuple(a for a in axes if a != f)) + 1e-300) for f in axes]
    starts = [list(start)] if start is not None else [marg, [np.full(n, -np.log(n)) for n in sizes]]
    best, best_kl = None, np.inf
    for init in starts:
        q = [s - np.logaddexp.reduce(s) for s in init]
        for _ in range(iters):
            for f in axes:
                e = _expect_except(T, q, f)
                q[f] = e - np.logaddexp.reduce(e)
        joint = joint_from_factors(q)
        kl = float(kl_divergence(joint, np.asarray(log_target).ravel()))
        if kl < best_kl:
            best, best_kl = joint, kl
    assert best is not None
    return best


def _expect_except(T: np.ndarray, q: list[np.ndarray], f: int) -> np.ndarray:
    """E_{q_-f}[T] as a function of factor f's value."""
    letters = "abcdefghij"[:T.ndim]
    ops, subs = [T], [letters]
    for g in range(T.ndim):
        if g != f:
            ops.append(np.exp(q[g]))
            subs.append(letters[g])
    return np.asarray(np.einsum(",".join(subs) + "->" + letters[f], *ops))
