"""fedforest_shift: the federated trees are exactly the centralised binned builder's (aggregated
histograms give the binned split exactly), the split search is the Gini optimum, client-indicator
splits route by client, exact CART is the brute-force optimum and binning can only lose impurity
against it, a client with no rows is one clear error, communication is counted as described, and one
cell scores through the suite contract (a tampered forest loses its agreement)."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from environments.papers import fedforest_trees
from environments.papers.fedforest import (
    MIN_LEAF,
    MTRY,
    N_BINS,
    SETTINGS,
    CentralStats,
    Client,
    FederatedStats,
    FedForestTask,
    agreed_edges,
    binned,
    bootstrap_weights,
    central_forest,
    choose_split,
    federated_forest,
    federated_forest_of,
    federation,
    gini_impurity,
    predict_tree,
)
from environments.papers.fedforest_exact import Pooled, comm_cost, compare_to_exact, exact_best, exact_forest
from harness.suite import SampleContext


@pytest.fixture
def few_trees(monkeypatch):
    monkeypatch.setattr(fedforest_trees, "TREES", 3)


@pytest.mark.parametrize("setting", SETTINGS)
def test_federated_trees_are_identical_to_the_central_binned_builder(few_trees, setting):
    for client_split in (True, False):
        fed = federated_forest(setting, 1, client_split)
        assert len(fed) == 3 and all(len(tree) > 10 for tree in fed)
        assert fed == central_forest(setting, 1, client_split)
    assert fed != federated_forest(setting, 2, False)  # a different seed grows different trees


def test_split_search_finds_the_gini_optimum_by_brute_force():
    rng = np.random.default_rng(0)
    feats = np.array([4, 1, 6])
    for _ in range(20):
        left = rng.integers(0, 30, size=(3, N_BINS - 1, 2)).astype(float)
        left = np.cumsum(left, axis=1)  # cumulative, as thresholds sweep the bins
        total = left[0, -1] + rng.integers(1, 20, size=2)
        total = np.maximum(total, left[:, -1].max(axis=0))
        best = None
        for f in range(3):
            for t in range(N_BINS - 1):
                l, r = left[f, t], total - left[f, t]
                if l.sum() < MIN_LEAF or r.sum() < MIN_LEAF:
                    continue
                imp = sum(s.sum() * (1 - ((s / s.sum()) ** 2).sum()) for s in (l, r)) / total.sum()
                if best is None or imp < best[0] - 1e-12:
                    best = (imp, int(feats[f]), t)
        parent = 1 - ((total / total.sum()) ** 2).sum()
        got = choose_split(left, None, total, feats)
        if best is None or best[0] >= parent - 1e-12:
            assert got is None
        else:
            assert got == (best[1], best[2])
            assert abs(float(gini_impurity(left[feats.tolist().index(got[0]), got[1]], total)) - best[0]) < 1e-12


def test_client_indicator_split_is_chosen_when_clients_disagree_and_routes_by_client():
    total = np.array([50.0, 50.0])
    left_bins = np.full((3, N_BINS - 1, 2), 25.0)  # no feature separates anything
    left_clients = np.array([[50.0, 0.0], [0, 10], [0, 10], [0, 10], [0, 20]])
    assert choose_split(left_bins, left_clients, total, np.array([0, 1, 2])) == (-1, 0)
    tree = [(-1, 0, 1, 2, (50.0, 50.0)), (-2, 0, -1, -1, (50.0, 0.0)), (-2, 0, -1, -1, (0.0, 50.0))]
    xb = np.zeros((4, 8), dtype=int)
    assert predict_tree(tree, xb, client=0).tolist() == [0.0] * 4
    assert predict_tree(tree, xb, client=3).tolist() == [1.0] * 4


def test_shift_regimes_differ_as_described():
    iid, cov, con = (federation(s, 0) for s in SETTINGS)
    means = lambda clients: np.array([c.x_train.mean(axis=0) for c in clients])  # noqa: E731
    assert np.abs(means(iid)).max() < 0.2 and np.abs(means(cov)).max() > 0.5
    assert np.abs(means(con)).max() < 0.2
    assert np.array_equal(federation("iid", 0)[0].y_train, iid[0].y_train)  # a pure function of the seed


def test_one_cell_scores_through_the_suite_contract_and_tampering_is_caught(few_trees):
    suite = FedForestTask(FedForestTask.Options(solver="fedforest", seeds=1))
    sample = [s for s in suite.load_samples(None) if s.data.setting == "concept"][0]
    outcome = asyncio.run(suite.run_sample(sample, SampleContext({}, 0, {})))
    assert outcome.scores["split_agreement"] == 1.0 and 0.6 < outcome.scores["accuracy"] <= 1.0
    assert outcome.scores["client_splits"] > 0  # concept shift: the forest personalises
    result = suite.solve_cell("concept", 0, "fedforest")
    assert result.answer == outcome.output["answer"]  # deterministic
    result.answer["forest"][0][0][1] += 1  # move the root's threshold
    assert suite.score_cell(result)["split_agreement"] == pytest.approx(2 / 3)
    local = suite.score_cell(suite.solve_cell("concept", 0, "local_only"))
    assert local["split_agreement"] is None and 0.5 < local["accuracy"] <= 1.0
    assert local["bytes_per_tree"] == 0.0 and outcome.scores["bytes_per_tree"] > 0
    assert 0.0 <= outcome.scores["impurity_gap"] <= 1.0 and 0.0 <= outcome.scores["split_identity"] <= 1.0


def test_aggregated_histograms_give_the_binned_split_exactly():
    """The server's sum of client histograms equals the pooled counts, so it picks the pooled split."""
    clients = federation("covariate", 3)
    edges = agreed_edges(clients)
    parts = [
        (binned(c.x_train, edges), c.y_train, bootstrap_weights(3, 0, k, len(c.y_train))) for k, c in enumerate(clients)
    ]
    central = CentralStats(
        np.concatenate([p[0] for p in parts]),
        np.concatenate([p[1] for p in parts]),
        np.concatenate([p[2] for p in parts]),
        np.repeat(np.arange(len(parts)), len(parts[0][1])),
    )
    fed = FederatedStats(parts)
    for feats in (np.array([0, 3, 7]), np.array([5, 1, 2])):
        got, want = fed.counts(fed.root(), feats), central.counts(central.root(), feats)
        for a, b in zip(got, want):
            assert np.array_equal(a, b)
        assert choose_split(got[0], got[1], got[2], feats) == choose_split(want[0], want[1], want[2], feats)


def test_a_client_with_no_rows_is_one_clear_error():
    clients = list(federation("iid", 0))
    clients[2] = Client(np.zeros((0, clients[0].x_train.shape[1])), np.zeros(0, dtype=int))
    with pytest.raises(ValueError, match="client 2 has no training rows"):
        federated_forest_of(tuple(clients), 0)


def test_exact_cart_split_is_the_brute_force_optimum_and_binning_only_loses(few_trees):
    clients = federation("iid", 4)
    p = Pooled(clients, 4, 0)
    rng = np.random.default_rng(1)
    for _ in range(5):
        m = np.sort(rng.choice(np.nonzero(p.w > 0)[0], size=60, replace=False))
        feats = rng.choice(p.x.shape[1], size=MTRY, replace=False)
        best = exact_best(p, m, feats, client_split=False)
        wy = p.class_weights(m)
        brute = min(
            float(gini_impurity(wy[p.x[m, f] <= t].sum(axis=0), wy.sum(axis=0)))
            for f in feats
            for t in np.unique(p.x[m, f])
        )
        assert best is not None and best[2] == pytest.approx(brute, abs=1e-12)
        go = p.x[m, best[0]] <= best[1]
        assert float(gini_impurity(wy[go].sum(axis=0), wy.sum(axis=0))) == pytest.approx(best[2], abs=1e-12)
    identity, gap = compare_to_exact(federated_forest("iid", 4), clients, 4)
    assert 0.5 < identity <= 1.0 and 0.0 <= gap < 0.5
    exact = exact_forest(clients, 4)
    assert compare_to_exact(exact, clients, 4) != (identity, gap) or identity == 1.0  # a different forest


def test_communication_is_counted_as_described(few_trees):
    clients = federation("iid", 0)
    leaf = [[-2, 0, -1, -1, 1.0, 1.0]]
    per_tree, rounds = comm_cost("fedforest", {"forest": [leaf] * 3}, clients, 0)
    setup = 2 * 5 * (N_BINS - 1) * 8 * 4
    assert per_tree == pytest.approx(setup / 3 + 5 * (MTRY * N_BINS * 2 + 2) * 4) and rounds == pytest.approx(4 / 3)
    ship, one = comm_cost("pooled_rf", {}, clients, 0)
    assert ship == 5 * 400 * 9 * 4 / 3 and one == pytest.approx(1 / 3)
    assert comm_cost("averaged_local", {"model_nodes": 30}, clients, 0)[0] == 30 * 16 / 3
    assert comm_cost("local_only", {}, clients, 0) == (0.0, 0.0)


def test_the_abstracts_own_verdict_leaves_our_conditions_out():
    from types import SimpleNamespace

    from environments.papers.fedforest import ABSTRACT_CONDITIONS, OUR_CONDITIONS, abstract_verdict

    conditions = FedForestTask.claim.conditions
    assert conditions == ABSTRACT_CONDITIONS + OUR_CONDITIONS
    assert not {c.text() for c in OUR_CONDITIONS} & {c.text() for c in ABSTRACT_CONDITIONS}
    ours_fail = [
        SimpleNamespace(condition=c.text(), outcome="fails" if c in OUR_CONDITIONS else "holds") for c in conditions
    ]
    assert abstract_verdict(SimpleNamespace(conditions=ours_fail))[0] == "reproduced"
    one_of_its_own = [
        SimpleNamespace(condition=r.condition, outcome="undecided" if i == 4 else r.outcome)
        for i, r in enumerate(ours_fail)
    ]
    assert abstract_verdict(SimpleNamespace(conditions=one_of_its_own))[0] == "inconclusive"
    with pytest.raises(ValueError, match="not computed under this criterion"):
        abstract_verdict(SimpleNamespace(conditions=ours_fail[5:]))
