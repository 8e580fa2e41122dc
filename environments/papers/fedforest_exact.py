"""`fedforest_shift` against exact, unbinned centralised CART, and what each solver communicates.

Exact CART here is the centralised reference the abstract's "closely approximates the centralized
split" refers to: the pooled raw features, every threshold between two distinct values, the same
Poisson bootstrap weights, feature draws (by node id) and client-indicator candidates as the
federated forest. Two comparisons:
- node by node (`compare_to_exact`): at every node the federated tree could have split, the exact
  best split of the same pooled rows and features: is it the same feature (or client), and what
  share of the exact split's Gini decrease the federated split loses (>= 0 exactly: every binned
  split is one of the exact candidates);
- forest against forest: an `exact_cart` arm grows the whole exact forest.
Communication (`comm_cost`) is counted in bytes and rounds per tree of the forest built.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from environments.papers import fedforest_trees as _ff  # TREES read at call time (tests shrink it)
from environments.papers.fedforest_trees import (
    MAX_DEPTH,
    MIN_LEAF,
    MTRY,
    N_BINS,
    N_CLIENTS,
    N_FEATURES,
    Client,
    ExactNode,
    Node,
    agreed_edges,
    binned,
    bootstrap_weights,
    gini_impurity,
    node_features,
)

COUNT_BYTES = 4  # an int32 count (Poisson weights are integers), a float32 feature value or edge
SPLIT_BYTES = 12  # a split broadcast: node id, feature (or -1), threshold bin (or client)
NODE_BYTES = 16  # a shipped tree node: feature, threshold, class probability, right-child index


class Pooled:
    """The federation's training rows pooled (raw and binned), with one tree's bootstrap weights."""

    def __init__(self, clients: tuple[Client, ...], seed: int, tree: int):
        edges = agreed_edges(clients)
        self.x = np.concatenate([c.x_train for c in clients])
        self.xb = np.concatenate([binned(c.x_train, edges) for c in clients])
        self.y = np.concatenate([c.y_train for c in clients])
        self.client = np.concatenate([np.full(len(c.y_train), k) for k, c in enumerate(clients)])
        self.w = np.concatenate([bootstrap_weights(seed, tree, k, len(c.y_train)) for k, c in enumerate(clients)])
        self.n_clients = len(clients)

    def class_weights(self, m: np.ndarray) -> np.ndarray:
        return np.stack([self.w[m] * (self.y[m] == c) for c in (0, 1)], axis=1)


def parent_impurity(total: np.ndarray) -> float:
    return float((total.sum() - (total**2).sum() / total.sum()) / total.sum())


def exact_best(p: Pooled, m: np.ndarray, feats: np.ndarray, client_split: bool) -> tuple[int, float, float] | None:
    """The exact best split of rows m: (feature, threshold, impurity) or (-1, client, impurity);
    thresholds halfway between consecutive distinct values; first minimum wins ties (features in
    draw order, then clients); None when nothing lowers the impurity."""
    wy = p.class_weights(m)
    total = wy.sum(axis=0)
    best: tuple[int, float, float] | None = None
    for f in feats:
        order = np.argsort(p.x[m, f], kind="stable")
        xs, cum = p.x[m, f][order], np.cumsum(wy[order], axis=0)
        cut = np.nonzero(xs[:-1] < xs[1:])[0]
        if len(cut) == 0:
            continue
        imp = gini_impurity(cum[cut], total)
        i = int(np.argmin(imp))
        if np.isfinite(imp[i]) and (best is None or imp[i] < best[2]):
            best = (int(f), float((xs[cut[i]] + xs[cut[i] + 1]) / 2), float(imp[i]))
    if client_split:
        left = (p.client[m][None, :] == np.arange(p.n_clients)[:, None]).astype(float) @ wy
        imp = gini_impurity(left, total)
        i = int(np.argmin(imp))
        if np.isfinite(imp[i]) and (best is None or imp[i] < best[2]):
            best = (-1, float(i), float(imp[i]))
    if best is None or best[2] >= parent_impurity(total) - 1e-12:
        return None
    return best


def splittable(total: np.ndarray, depth: int) -> bool:
    return depth < MAX_DEPTH and total.sum() >= 2 * MIN_LEAF and total.min() > 0


def grow_exact(p: Pooled, tree_seed: tuple[int, int], client_split: bool = True) -> list[ExactNode]:
    """One exact CART tree on the pooled raw rows (rows of weight 0 left out), preorder."""
    nodes: list[ExactNode | None] = []

    def build(m: np.ndarray, depth: int) -> int:
        idx = len(nodes)
        nodes.append(None)
        total = p.class_weights(m).sum(axis=0)
        split = exact_best(p, m, node_features(tree_seed, idx), client_split) if splittable(total, depth) else None
        weights = (float(total[0]), float(total[1]))
        if split is None:
            nodes[idx] = (-2, 0, -1, -1, weights)
            return idx
        feature, value, _ = split
        go_left = p.client[m] == int(value) if feature == -1 else p.x[m, feature] <= value
        left = build(m[go_left], depth + 1)
        right = build(m[~go_left], depth + 1)
        nodes[idx] = (feature, int(value) if feature == -1 else value, left, right, weights)
        return idx

    build(np.nonzero(p.w > 0)[0], 0)
    return [n for n in nodes if n is not None]


def exact_forest(clients: tuple[Client, ...], seed: int) -> list[list[ExactNode]]:
    return [grow_exact(Pooled(clients, seed, tree), (seed, tree)) for tree in range(_ff.TREES)]


def compare_to_exact(forest: list[list[Node]], clients: tuple[Client, ...], seed: int) -> tuple[float, float]:
    """(split identity rate, mean impurity gap) of a federated forest against exact CART, over every
    node where a split was allowed (depth, size and purity): identical when exact CART on the same
    pooled rows and features picks the same feature (or the same client); the gap is the share of
    exact CART's Gini decrease the federated choice loses (1 when the federated tree stops there)."""
    same: list[bool] = []
    gaps: list[float] = []
    for tree, nodes in enumerate(forest):
        p = Pooled(clients, seed, tree)
        _compare_node(nodes, p, (seed, tree), 0, np.nonzero(p.w > 0)[0], 0, same, gaps)
    return (float(np.mean(same)) if same else 1.0), (float(np.mean(gaps)) if gaps else 0.0)


def _compare_node(
    nodes: list[Node],
    p: Pooled,
    tree_seed: tuple[int, int],
    idx: int,
    m: np.ndarray,
    depth: int,
    same: list[bool],
    gaps: list[float],
) -> None:
    feature, value, left, right, _ = nodes[idx]
    wy = p.class_weights(m)
    total = wy.sum(axis=0)
    go = None if feature == -2 else (p.client[m] == value if feature == -1 else p.xb[m, feature] <= value)
    if splittable(total, depth):
        exact = exact_best(p, m, node_features(tree_seed, idx), True)
        if exact is not None:
            if go is None:  # the federated tree stopped where exact CART splits
                same.append(False)
                gaps.append(1.0)
            else:
                mine = float(gini_impurity(wy[go].sum(axis=0), total))
                same.append(exact[0] == feature and (feature != -1 or int(exact[1]) == value))
                gaps.append((mine - exact[2]) / (parent_impurity(total) - exact[2]))
    if go is not None:
        _compare_node(nodes, p, tree_seed, left, m[go], depth + 1, same, gaps)
        _compare_node(nodes, p, tree_seed, right, m[~go], depth + 1, same, gaps)


def tree_levels(nodes: list[Node]) -> int:
    def depth(idx: int) -> int:
        feature, _, left, right, _ = nodes[idx]
        return 1 if feature == -2 else 1 + max(depth(left), depth(right))

    return depth(0)


def histogram_messages(nodes: list[Node], clients: tuple[Client, ...], seed: int, tree: int) -> int:
    """(client, node) pairs where the client holds positive weight: each sends one histogram."""
    edges = agreed_edges(clients)
    count = 0
    for k, c in enumerate(clients):
        xb, w = binned(c.x_train, edges), bootstrap_weights(seed, tree, k, len(c.y_train))
        count += _messages(nodes, xb, w, k, 0, np.arange(len(c.y_train)))
    return count


def _messages(nodes: list[Node], xb: np.ndarray, w: np.ndarray, client: int, idx: int, rows: np.ndarray) -> int:
    if w[rows].sum() <= 0:
        return 0
    feature, value, left, right, _ = nodes[idx]
    if feature == -2:
        return 1
    go = np.full(len(rows), client == value) if feature == -1 else xb[rows, feature] <= value
    return 1 + _messages(nodes, xb, w, client, left, rows[go]) + _messages(nodes, xb, w, client, right, rows[~go])


def comm_cost(solver: str, answer: dict[str, Any], clients: tuple[Client, ...], seed: int) -> tuple[float, float]:
    """(bytes, rounds) per tree of the forest the solver builds at the server.
    fedforest: the quantile sketches up and edges down once, then per tree and level one round:
    split broadcasts down, one (features x bins x classes + class totals) histogram up per client
    holding weight at the node. Shipping the data (pooled_rf, exact_cart; pooled_id adds the
    client id): every training row once, one round. averaged_local: every local tree's nodes once,
    one round. local_only: nothing."""
    n_clients = len(clients)
    rows = sum(len(c.y_train) for c in clients)
    if solver == "fedforest":
        forest = answer["forest"]
        setup = 2 * n_clients * (N_BINS - 1) * N_FEATURES * COUNT_BYTES
        hist_bytes = (MTRY * N_BINS * 2 + 2) * COUNT_BYTES
        total, rounds = float(setup), 1.0
        for tree, raw in enumerate(forest):
            nodes = [(int(n[0]), int(n[1]), int(n[2]), int(n[3]), (float(n[4]), float(n[5]))) for n in raw]
            splits = sum(1 for n in nodes if n[0] != -2)
            total += histogram_messages(nodes, clients, seed, tree) * hist_bytes + splits * n_clients * SPLIT_BYTES
            rounds += tree_levels(nodes)
        return total / len(forest), rounds / len(forest)
    if solver in ("pooled_rf", "exact_cart", "pooled_id"):
        per_row = (N_FEATURES + 1 + (solver == "pooled_id")) * COUNT_BYTES
        return rows * per_row / _ff.TREES, 1.0 / _ff.TREES
    if solver == "averaged_local":
        return answer["model_nodes"] * NODE_BYTES / _ff.TREES, 1.0 / _ff.TREES
    if solver == "local_only":
        return 0.0, 0.0
    raise ValueError(f"no communication model for solver {solver!r}")


__all__ = ["N_CLIENTS", "Pooled", "comm_cost", "compare_to_exact", "exact_best", "exact_forest", "grow_exact"]
