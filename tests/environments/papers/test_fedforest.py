"""fedforest_shift: the federated trees are exactly the centralised binned builder's (the paper's
split identity), the split search is the Gini optimum, client-indicator splits route by client,
and one cell scores through the suite contract (a tampered forest loses its agreement)."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from environments.papers import fedforest
from environments.papers.fedforest import (
    MIN_LEAF, N_BINS, SETTINGS, FedForestTask, central_forest, choose_split, federated_forest, federation, gini_impurity,
    predict_tree,
)
from harness.suite import SampleContext


@pytest.fixture
def few_trees(monkeypatch):
    monkeypatch.setattr(fedforest, "TREES", 3)


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
    sample = [s for s in suite.load_samples(None) if s.data["setting"] == "concept"][0]
    outcome = asyncio.run(suite.run_sample(sample, SampleContext({}, 0, {})))
    assert outcome.scores["split_agreement"] == 1.0 and 0.6 < outcome.scores["accuracy"] <= 1.0
    assert outcome.scores["client_splits"] > 0  # concept shift: the forest personalises
    result = suite.solve_cell("concept", 0, "fedforest")
    assert result.answer == outcome.output["answer"]  # deterministic
    result.answer["forest"][0][0][1] += 1  # move the root's threshold
    assert suite.score_cell(result)["split_agreement"] == pytest.approx(2 / 3)
    local = suite.score_cell(suite.solve_cell("concept", 0, "local_only"))
    assert local["split_agreement"] is None and 0.5 < local["accuracy"] <= 1.0
