"""Min-sum belief propagation with memory, and Relay-BP, for binary syndrome decoding (numpy, batched).

Written here from the Relay-BP paper's description (Muller et al. 2025, "Improved belief propagation
is sufficient for real-time decoding of quantum memory"): memory BP mixes each variable's prior with
its previous marginal, Lambda_j(t) = (1 - gamma_j) Lambda_j(0) + gamma_j M_j(t - 1); a relay runs
several such legs, the first with one memory strength gamma0, each later one with strengths drawn
per variable from an interval that includes negative values ("disordered memory"), every leg
starting from the previous leg's final marginals; it stops once S legs have produced a correction
that reproduces the syndrome, and returns the lowest-weight one (weights: the prior LLRs of the
flipped bits). Ours: check-to-variable messages restart at zero on each leg. Plain min-sum BP is
one leg with gamma = 0.

Messages live on the Tanner graph's edges; shots are rows, and only the shots still iterating are
carried from one iteration to the next.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

BIG = np.float32(1e30)  # a padding edge's magnitude: never the minimum of a check's other messages
# Messages saturate here (as fixed-point min-sum does): unscaled min-sum magnitudes otherwise roughly
# double each iteration, and after ~100 iterations float rounding, not the prior, decides the signs.
CLIP = np.float32(64.0)


@dataclass(frozen=True)
class TannerGraph:
    """A parity-check matrix's edges, padded per check and per variable to the largest degree
    (the padding points at edge index `edges`, an extra slot)."""

    check: np.ndarray  # (m, max check degree) edge indices
    var: np.ndarray  # (n, max variable degree) edge indices
    edge_var: np.ndarray  # (edges,)
    pcm: np.ndarray  # (m, n) 0/1 float32, for syndromes

    @property
    def edges(self) -> int:
        return len(self.edge_var)


def tanner_graph(pcm: np.ndarray) -> TannerGraph:
    h = np.asarray(pcm)
    if h.ndim != 2 or not np.isin(h, (0, 1)).all():
        raise ValueError("pcm: a 2-D 0/1 parity-check matrix is needed")
    rows, cols = np.nonzero(h)
    edges = len(rows)

    def padded(owner: np.ndarray, count: int) -> np.ndarray:
        width = max(1, int(np.bincount(owner, minlength=count).max(initial=0)))
        table = np.full((count, width), edges, dtype=np.int64)
        order = np.argsort(owner, kind="stable")
        slot = np.arange(edges) - np.searchsorted(owner[order], owner[order])
        table[owner[order], slot] = order
        return table

    return TannerGraph(
        check=padded(rows, h.shape[0]), var=padded(cols, h.shape[1]), edge_var=cols, pcm=h.astype(np.float32)
    )


def syndrome(graph: TannerGraph, bits: np.ndarray) -> np.ndarray:
    return np.asarray((bits.astype(np.float32) @ graph.pcm.T) % 2 == 1)


def check_update(graph: TannerGraph, v2c: np.ndarray, flip: np.ndarray, alpha: float) -> np.ndarray:
    """Min-sum: each edge gets (-1)^s times the product of the other edges' signs times alpha times
    the smallest other magnitude, saturated at CLIP. `v2c` is (shots, edges + 1) with the padding
    slot at BIG; `flip` (shots, m) is the syndrome. Returns (shots, edges + 1), padding slot 0."""
    incoming = v2c[:, graph.check]  # (shots, m, degree)
    negative = incoming < 0
    odd = (negative.sum(axis=2) % 2 == 1) ^ flip  # the sign of the whole product, syndrome included
    magnitude = np.abs(incoming)
    smallest = magnitude.min(axis=2, keepdims=True)
    at_min = magnitude == smallest
    runner_up = np.where(at_min, BIG, magnitude).min(axis=2, keepdims=True)
    # A tie at the minimum: every edge's smallest other magnitude is the minimum itself.
    runner_up = np.where(at_min.sum(axis=2, keepdims=True) > 1, smallest, runner_up)
    others_min = np.minimum(np.where(at_min, runner_up, smallest) * alpha, CLIP)
    out = np.zeros_like(v2c)
    out[:, graph.check.reshape(-1)] = np.where(negative ^ odd[:, :, None], -others_min, others_min).reshape(
        len(v2c), -1
    )
    out[:, graph.edges] = 0.0
    return out


def run_leg(
    graph: TannerGraph,
    syndromes: np.ndarray,
    prior: np.ndarray,
    gamma: np.ndarray,
    start: np.ndarray,
    iterations: int,
    alpha: float = 1.0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One memory-BP leg for a batch. `start` (shots, n) is M(0), the marginals the memory first
    mixes in. Returns each shot's hard decision (shots, n) bool, its final marginals, and whether
    the decision reproduced the syndrome (each shot stops at its first such iteration)."""
    shots, n = start.shape
    decision, marginals = np.zeros((shots, n), dtype=bool), start.astype(np.float32)
    solved = np.zeros(shots, dtype=bool)
    live = np.arange(shots)
    flip = np.asarray(syndromes, dtype=bool)
    prior, gamma = prior.astype(np.float32), gamma.astype(np.float32)
    c2v = np.zeros((shots, graph.edges + 1), dtype=np.float32)
    memory = marginals.copy()
    for step in range(iterations):
        lam = (1.0 - gamma) * prior + gamma * memory
        total = lam + c2v[:, graph.var].sum(axis=2)
        v2c = np.empty_like(c2v)
        v2c[:, : graph.edges] = total[:, graph.edge_var] - c2v[:, : graph.edges]
        v2c[:, graph.edges] = BIG
        c2v = check_update(graph, v2c, flip[live], alpha)
        memory = lam + c2v[:, graph.var].sum(axis=2)
        guess = memory < 0
        done = (syndrome(graph, guess) == flip[live]).all(axis=1)
        last = step == iterations - 1
        out = slice(None) if last else done
        decision[live[out]], marginals[live[out]] = guess[out], memory[out]
        solved[live[done]] = True
        keep = ~done
        live, c2v, memory = live[keep], c2v[keep], memory[keep]
        if live.size == 0:
            break
    return decision, marginals, solved


def prior_llr(n: int, error_rate: float | np.ndarray) -> np.ndarray:
    """Each variable's prior log-likelihood ratio: one rate for all, or one per variable (a
    detector error model's mechanisms)."""
    rate = np.broadcast_to(np.asarray(error_rate, dtype=np.float64), (n,))
    if not ((rate > 0.0) & (rate < 0.5)).all():
        raise ValueError(f"error_rate {error_rate!r}: use probabilities in (0, 0.5)")
    return np.log((1.0 - rate) / rate)


def min_sum_bp(
    graph: TannerGraph, syndromes: np.ndarray, error_rate: float | np.ndarray, iterations: int = 100, alpha: float = 1.0
) -> tuple[np.ndarray, np.ndarray]:
    """Plain min-sum BP (no memory): (corrections, solved) for (shots, m) syndromes."""
    prior = prior_llr(graph.pcm.shape[1], error_rate)
    start = np.broadcast_to(prior, (len(syndromes), len(prior))).copy()
    decision, _, solved = run_leg(
        graph, np.asarray(syndromes, dtype=bool), prior, np.zeros_like(prior), start, iterations, alpha
    )
    return decision, solved


@dataclass(frozen=True)
class RelayConfig:
    """The paper's knobs: first-leg memory gamma0 and its iterations, later legs' iterations and
    the interval their per-variable strengths are drawn from, the most legs, and S (solutions to
    collect before stopping; 1 = stop at the first)."""

    gamma0: float = 0.125
    first_iterations: int = 80
    leg_iterations: int = 60
    gamma_range: tuple[float, float] = (-0.24, 0.66)
    legs: int = 100
    solutions: int = 5
    alpha: float = 1.0

    def __post_init__(self) -> None:
        if min(self.first_iterations, self.leg_iterations, self.legs, self.solutions) < 1:
            raise ValueError("RelayConfig: iterations, legs and solutions must be >= 1")
        if self.gamma_range[0] > self.gamma_range[1]:
            raise ValueError(f"RelayConfig.gamma_range {self.gamma_range}: give (low, high) with low <= high")


def relay_bp(
    graph: TannerGraph,
    syndromes: np.ndarray,
    error_rate: float | np.ndarray,
    seed: int,
    config: RelayConfig = RelayConfig(),
) -> tuple[np.ndarray, np.ndarray]:
    """Relay-BP: (corrections, solved) for (shots, m) syndromes. A shot's correction is its
    lowest-weight solution found; a shot with none keeps its last leg's hard decision (solved False)."""
    syndromes = np.asarray(syndromes, dtype=bool)
    rng = np.random.default_rng(seed)
    n = int(graph.pcm.shape[1])
    prior = prior_llr(n, error_rate)
    shots = len(syndromes)
    best, best_weight = np.zeros((shots, n), dtype=bool), np.full(shots, np.inf)
    found = np.zeros(shots, dtype=np.int64)
    marginals = np.broadcast_to(prior, (shots, n)).astype(np.float32)
    last = np.zeros((shots, n), dtype=bool)
    for leg in range(config.legs):
        going = np.flatnonzero(found < config.solutions)
        if going.size == 0:
            break
        gamma = np.full(n, config.gamma0) if leg == 0 else rng.uniform(*config.gamma_range, size=n)
        iterations = config.first_iterations if leg == 0 else config.leg_iterations
        decision, marginals[going], solved = run_leg(
            graph, syndromes[going], prior, gamma, marginals[going], iterations, config.alpha
        )
        last[going] = decision
        weight = np.where(decision, prior, 0.0).sum(axis=1)
        better = solved & (weight < best_weight[going])
        best[going[better]], best_weight[going[better]] = decision[better], weight[better]
        found[going] += solved
    solved_any = found > 0
    return np.where(solved_any[:, None], best, last), solved_any
