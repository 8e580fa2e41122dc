"""`fedforest_shift`'s data and trees: five synthetic clients under IID, covariate and concept
shift, the agreed bins, the federated builder (clients send histograms, the server sums them and
splits), the centralised binned builder it must equal, prediction, and the scikit-learn baselines.
The task, its claim and its scorer live in `fedforest.py`; exact CART and communication in
`fedforest_exact.py`.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import numpy as np

N_CLIENTS, N_PER_CLIENT, N_TRAIN = 5, 600, 400  # per client: 400 train, 200 test
N_FEATURES, N_BINS = 8, 32
TREES, MAX_DEPTH, MIN_LEAF, MTRY = 30, 10, 5, 3
LABEL_NOISE = 0.1
SETTINGS = ("iid", "covariate", "concept")
Node = tuple[
    int, int, int, int, tuple[float, float]
]  # feature (-1: client split), threshold bin or client, left, right, class weights
# An exact CART tree's node (fedforest_exact.py): as Node, with a raw threshold value for the bin.
ExactNode = tuple[int, float, int, int, tuple[float, float]]


class Client:
    """One client's data (never leaves the client in the method: only histograms do)."""

    def __init__(self, x: np.ndarray, y: np.ndarray):
        self.x_train, self.y_train = x[:N_TRAIN], y[:N_TRAIN]
        self.x_test, self.y_test = x[N_TRAIN:], y[N_TRAIN:]


def nonlinear_rule(x: np.ndarray) -> np.ndarray:
    return np.asarray(x[:, 0] + x[:, 1] * x[:, 2] + np.sin(2 * x[:, 3]) - 0.5 * x[:, 4] ** 2 + 0.5)


@lru_cache(maxsize=32)
def federation(setting: str, seed: int) -> tuple[Client, ...]:
    """Five clients. iid: one distribution; covariate: each client's inputs shifted by its own mean,
    same labelling rule; concept: same inputs, each client labels by its own random direction."""
    if setting not in SETTINGS:
        raise ValueError(f"unknown setting {setting!r}: choose one of {', '.join(SETTINGS)}")
    rng = np.random.default_rng([seed, SETTINGS.index(setting)])
    clients = []
    for _ in range(N_CLIENTS):
        shift = rng.normal(scale=1.0, size=N_FEATURES) if setting == "covariate" else np.zeros(N_FEATURES)
        x = rng.normal(size=(N_PER_CLIENT, N_FEATURES)) + shift
        if setting == "concept":
            direction = rng.normal(size=4)
            logit = x[:, :4] @ (direction / np.linalg.norm(direction)) * 2 + 0.5 * np.sin(2 * x[:, 4])
        else:
            logit = nonlinear_rule(x)
        y = (logit + rng.normal(scale=0.3, size=N_PER_CLIENT) > 0).astype(int)
        y = np.where(rng.random(N_PER_CLIENT) < LABEL_NOISE, 1 - y, y)
        clients.append(Client(x, y))
    return tuple(clients)


def check_clients(clients: tuple[Client, ...]) -> None:
    """A federation needs rows at every client: an empty one has no quantile sketch to send."""
    for k, c in enumerate(clients):
        if len(c.y_train) == 0:
            raise ValueError(
                f"client {k} has no training rows: every client of the federation needs at least one "
                f"row (drop client {k} or give it data)"
            )


def agreed_edges(clients: tuple[Client, ...]) -> np.ndarray:
    """(N_BINS - 1, features) bin edges: the mean of the clients' quantile sketches."""
    check_clients(clients)
    qs = np.linspace(0, 1, N_BINS + 1)[1:-1]
    return np.asarray(np.mean([np.quantile(c.x_train, qs, axis=0) for c in clients], axis=0))


def binned(x: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Bin index 0..N_BINS-1 per feature; a threshold t sends bin <= t left."""
    return np.stack([np.searchsorted(edges[:, f], x[:, f], side="left") for f in range(x.shape[1])], axis=1)


def bootstrap_weights(seed: int, tree: int, client: int, n: int) -> np.ndarray:
    """Poisson(1) weights, drawn by each client for itself (integers, so counts stay exact)."""
    return np.random.default_rng([seed, tree, client, 7]).poisson(1.0, size=n).astype(float)


def node_features(tree_seed: tuple[int, int], node: int) -> np.ndarray:
    """The node's random feature subset: a function of (seed, tree, node id) only."""
    return np.random.default_rng([*tree_seed, node]).choice(N_FEATURES, size=MTRY, replace=False)


def gini_impurity(left: np.ndarray, total: np.ndarray) -> np.ndarray:
    """Weighted Gini impurity of each candidate split; `left` (..., 2) class weights, `total` (2,).
    Candidates leaving fewer than MIN_LEAF weight on a side are +inf."""
    right = total - left
    n_left, n_right = left.sum(-1), right.sum(-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        g_left = n_left - (left**2).sum(-1) / n_left
        g_right = n_right - (right**2).sum(-1) / n_right
    out = (g_left + g_right) / total.sum()
    return np.where((n_left >= MIN_LEAF) & (n_right >= MIN_LEAF), out, np.inf)


def choose_split(
    left_bins: np.ndarray, left_clients: np.ndarray | None, total: np.ndarray, feats: np.ndarray
) -> tuple[int, int] | None:
    """The best (feature, threshold) or (-1, client) from the candidates' left class weights;
    first minimum wins ties; None when nothing lowers the node's impurity."""
    scores = gini_impurity(left_bins, total).ravel()  # (MTRY * (N_BINS - 1),)
    if left_clients is not None:
        scores = np.concatenate([scores, gini_impurity(left_clients, total)])
    parent = (total.sum() - (total**2).sum() / total.sum()) / total.sum()
    best = int(np.argmin(scores))
    if not np.isfinite(scores[best]) or scores[best] >= parent - 1e-12:
        return None
    n_bin = left_bins.shape[0] * left_bins.shape[1]
    if best >= n_bin:
        return -1, best - n_bin
    return int(feats[best // (N_BINS - 1)]), best % (N_BINS - 1)


def grow(tree_seed: tuple[int, int], node_stats: Any, client_split: bool) -> list[Node]:
    """Grow one tree preorder. `node_stats(members, feats)` returns (left weights per bin threshold
    (MTRY, N_BINS-1, 2), left weights per client (N_CLIENTS, 2), class totals (2,)) and the
    children's members for a split -- the only thing that differs between federated and central."""
    nodes: list[Node | None] = []

    def build(members: Any, depth: int) -> int:
        idx = len(nodes)
        nodes.append(None)
        feats = node_features(tree_seed, idx)
        left_bins, left_clients, total = node_stats.counts(members, feats)
        split = None
        if depth < MAX_DEPTH and total.sum() >= 2 * MIN_LEAF and total.min() > 0:
            split = choose_split(left_bins, left_clients if client_split else None, total, feats)
        if split is None:
            nodes[idx] = (-2, 0, -1, -1, (float(total[0]), float(total[1])))
            return idx
        go_left, go_right = node_stats.partition(members, *split)
        left = build(go_left, depth + 1)
        right = build(go_right, depth + 1)
        nodes[idx] = (split[0], split[1], left, right, (float(total[0]), float(total[1])))
        return idx

    build(node_stats.root(), 0)
    return [n for n in nodes if n is not None]


class FederatedStats:
    """The method's view: each client computes its node histogram; the server only sums them."""

    def __init__(self, parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]]):
        self.parts = parts  # per client: binned x, y, bootstrap weights

    def root(self) -> list[np.ndarray]:
        return [np.arange(len(y)) for _, y, _ in self.parts]

    def counts(self, members: list[np.ndarray], feats: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        hist = np.zeros((MTRY, N_BINS, 2))
        per_client = np.zeros((len(self.parts), 2))
        for k, ((xb, y, w), m) in enumerate(zip(self.parts, members)):
            flat = (np.arange(MTRY)[None, :] * N_BINS + xb[m][:, feats]) * 2 + y[m][:, None]
            hist += np.bincount(flat.ravel(), weights=np.repeat(w[m], MTRY), minlength=MTRY * N_BINS * 2).reshape(
                MTRY, N_BINS, 2
            )
            per_client[k] = np.bincount(y[m], weights=w[m], minlength=2)
        total = per_client.sum(axis=0)
        return np.cumsum(hist, axis=1)[:, :-1], per_client, total

    def partition(
        self, members: list[np.ndarray], feature: int, value: int
    ) -> tuple[list[np.ndarray], list[np.ndarray]]:
        if feature == -1:
            empty = np.arange(0)
            return (
                [m if k == value else empty for k, m in enumerate(members)],
                [empty if k == value else m for k, m in enumerate(members)],
            )
        lefts = [m[xb[m, feature] <= value] for (xb, _, _), m in zip(self.parts, members)]
        rights = [m[xb[m, feature] > value] for (xb, _, _), m in zip(self.parts, members)]
        return lefts, rights


class CentralStats:
    """The reference: pooled binned data, counts by direct masks (no histograms summed)."""

    def __init__(self, xb: np.ndarray, y: np.ndarray, w: np.ndarray, client: np.ndarray):
        self.xb, self.y, self.w, self.client = xb, y, w, client

    def root(self) -> np.ndarray:
        return np.arange(len(self.y))

    def counts(self, m: np.ndarray, feats: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        wy = np.stack([self.w[m] * (self.y[m] == c) for c in (0, 1)], axis=1)
        thresholds = np.arange(N_BINS - 1)
        left_bins = np.stack([(self.xb[m, f][:, None] <= thresholds[None, :]).T.astype(float) @ wy for f in feats])
        left_clients = (self.client[m][None, :] == np.arange(N_CLIENTS)[:, None]).astype(float) @ wy
        return left_bins, left_clients, wy.sum(axis=0)

    def partition(self, m: np.ndarray, feature: int, value: int) -> tuple[np.ndarray, np.ndarray]:
        go_left = self.client[m] == value if feature == -1 else self.xb[m, feature] <= value
        return m[go_left], m[~go_left]


def federated_forest(setting: str, seed: int, client_split: bool = True) -> list[list[Node]]:
    return federated_forest_of(federation(setting, seed), seed, client_split)


def federated_forest_of(clients: tuple[Client, ...], seed: int, client_split: bool = True) -> list[list[Node]]:
    """The method on any federation: the clients send histograms, the server sums and splits."""
    edges = agreed_edges(clients)
    forest = []
    for tree in range(TREES):
        parts = [
            (binned(c.x_train, edges), c.y_train, bootstrap_weights(seed, tree, k, len(c.y_train)))
            for k, c in enumerate(clients)
        ]
        forest.append(grow((seed, tree), FederatedStats(parts), client_split))
    return forest


def central_forest(setting: str, seed: int, client_split: bool = True) -> list[list[Node]]:
    """The centralised binned builder on the pooled data, same edges, weights and feature draws."""
    clients = federation(setting, seed)
    edges = agreed_edges(clients)
    xb = np.concatenate([binned(c.x_train, edges) for c in clients])
    y = np.concatenate([c.y_train for c in clients])
    client = np.repeat(np.arange(N_CLIENTS), N_TRAIN)
    forest = []
    for tree in range(TREES):
        w = np.concatenate([bootstrap_weights(seed, tree, k, N_TRAIN) for k in range(N_CLIENTS)])
        forest.append(grow((seed, tree), CentralStats(xb, y, w, client), client_split))
    return forest


def predict_tree(nodes: Sequence[ExactNode], xb: np.ndarray, client: int) -> np.ndarray:
    """P(y = 1) per row of one client's inputs: binned for a histogram tree (`Node`), raw for an
    exact tree (`ExactNode`)."""
    out = np.empty(len(xb))

    def route(idx: int, rows: np.ndarray) -> None:
        feature, value, left, right, weights = nodes[idx]
        if feature == -2:
            out[rows] = weights[1] / (weights[0] + weights[1])
            return
        go_left = np.full(len(rows), client == value) if feature == -1 else xb[rows, feature] <= value
        route(left, rows[go_left])
        route(right, rows[~go_left])

    route(0, np.arange(len(xb)))
    return out


def sklearn_forest(seed: int) -> Any:
    from sklearn.ensemble import RandomForestClassifier

    return RandomForestClassifier(
        n_estimators=TREES,
        max_depth=MAX_DEPTH,
        min_samples_leaf=MIN_LEAF,
        max_features=MTRY,
        random_state=seed,
        n_jobs=1,
    )


def baseline_predictions(setting: str, seed: int, solver: str) -> tuple[list[list[int]], int]:
    """Each client's test predictions under a scikit-learn baseline, and the node count of the
    forests it fits (what averaging local forests ships)."""
    clients = federation(setting, seed)
    onehot = np.eye(N_CLIENTS)
    if solver in ("pooled_rf", "pooled_id"):
        with_id = solver == "pooled_id"

        def feats(k: int, x: np.ndarray) -> np.ndarray:
            return np.hstack([x, np.repeat(onehot[k : k + 1], len(x), axis=0)]) if with_id else x

        model = sklearn_forest(seed).fit(
            np.concatenate([feats(k, c.x_train) for k, c in enumerate(clients)]),
            np.concatenate([c.y_train for c in clients]),
        )
        return [model.predict(feats(k, c.x_test)).tolist() for k, c in enumerate(clients)], forest_nodes(model)
    local = [sklearn_forest(seed).fit(c.x_train, c.y_train) for c in clients]
    nodes = sum(forest_nodes(m) for m in local)
    if solver == "local_only":
        return [model.predict(c.x_test).tolist() for model, c in zip(local, clients)], nodes
    return [
        (np.mean([m.predict_proba(c.x_test)[:, 1] for m in local], axis=0) > 0.5).astype(int).tolist() for c in clients
    ], nodes  # averaged_local


def forest_nodes(model: Any) -> int:
    return int(sum(t.tree_.node_count for t in model.estimators_))


def forest_predictions(forest: list[list[Node]], setting: str, seed: int) -> list[list[int]]:
    clients = federation(setting, seed)
    edges = agreed_edges(clients)
    return [
        (np.mean([predict_tree(t, binned(c.x_test, edges), k) for t in forest], axis=0) > 0.5).astype(int).tolist()
        for k, c in enumerate(clients)
    ]
