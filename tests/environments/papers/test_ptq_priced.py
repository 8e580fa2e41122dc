"""ptq_priced_bitalloc: the knapsack is exact (brute force agrees), the Fisher's Jacobian is the
real one (finite differences), quantisation keeps its grid, the method never reads labels, and one
seed's cell scores through the suite contract."""

from __future__ import annotations

import asyncio
from itertools import product

import numpy as np
import pytest

from environments.papers import ptq_priced
from environments.papers.ptq_priced import (
    CANDIDATES, Net, PtqPricedTask, knapsack, output_fisher, price_table, quantise, softmax, trained,
)
from harness.suite import SampleContext


def test_knapsack_is_exact_against_brute_force():
    rng = np.random.default_rng(0)
    for _ in range(30):
        prices = rng.random((3, 5)).tolist()
        costs = rng.integers(1, 20, size=(3, 5)).tolist()
        budget = float(rng.integers(10, 45))
        fits = [c for c in product(range(5), repeat=3) if sum(costs[i][k] for i, k in enumerate(c)) <= budget]
        if not fits:
            with pytest.raises(ValueError, match="no configuration fits"):
                knapsack(prices, costs, budget)
            continue
        best = min(sum(prices[i][k] for i, k in enumerate(c)) for c in fits)
        choice = knapsack(prices, costs, budget)
        assert sum(costs[i][k] for i, k in enumerate(choice)) <= budget
        assert abs(sum(prices[i][k] for i, k in enumerate(choice)) - best) < 1e-12


def test_quantise_keeps_its_grid():
    w = np.random.default_rng(1).normal(size=(6, 4))
    for bits, gran in CANDIDATES:
        q = quantise(w, bits, gran)
        cols = q.T if gran == "channel" else [q.ravel()]
        for col in cols:
            assert len(np.unique(np.round(col, 12))) <= 2 ** bits - 1
        peak = np.abs(w).max(axis=0) if gran == "channel" else np.abs(w).max()
        assert np.allclose(np.abs(q).max(axis=0 if gran == "channel" else None), peak)  # the peak is on the grid


def test_output_fisher_uses_the_true_jacobian():
    rng = np.random.default_rng(2)
    net = Net([rng.normal(size=(5, 4)), rng.normal(size=(4, 3)), rng.normal(size=(3, 3))],
              [rng.normal(size=4), rng.normal(size=3), rng.normal(size=3)])
    x = rng.normal(size=(1, 5))
    logits, inputs, outputs = net.forward(x)
    p = softmax(logits)[0]
    fisher = np.diag(p) - np.outer(p, p)
    # Jacobian of the logits w.r.t. layer 0's output, by central differences
    def logits_from(z0):
        a = np.maximum(z0, 0)
        a = np.maximum(a @ net.weights[1] + net.biases[1], 0)
        return a @ net.weights[2] + net.biases[2]
    eps = 1e-6
    jac = np.stack([(logits_from(outputs[0] + eps * e) - logits_from(outputs[0] - eps * e))[0] / (2 * eps)
                    for e in np.eye(4)], axis=1)
    assert np.allclose(output_fisher(net, x)[0], jac.T @ fisher @ jac, atol=1e-6)
    assert np.allclose(output_fisher(net, x)[2], fisher, atol=1e-12)


@pytest.fixture(scope="module")
def seed0():
    return trained(0)


def test_the_method_never_reads_labels(seed0, monkeypatch):
    net, (x_calib, y_calib), test, train = seed0
    poisoned = (net, (x_calib, np.full_like(y_calib, -1)), (test[0] * np.nan, test[1]), (train[0] * np.nan, train[1]))
    monkeypatch.setattr(ptq_priced, "trained", lambda seed: poisoned)
    clean = price_table(net, x_calib, "priced")
    result = PtqPricedTask().solve_cell("2.5bits", 0, "priced")
    assert result.answer["prices"] == clean  # no NaN from test/train data, no change from labels


def test_one_cell_scores_through_the_suite_contract(seed0):
    suite = PtqPricedTask(PtqPricedTask.Options(solver="priced", seeds=1))
    sample = suite.load_samples(None)[0]
    outcome = asyncio.run(suite.run_sample(sample, SampleContext({}, 0, {})))
    scores, answer = outcome.scores, outcome.output["answer"]
    assert answer["cost_bits"] <= answer["budget_bits"] and scores["bits_per_weight"] <= 2.5
    assert scores["fp_accuracy"] > 0.9 and 0.0 <= scores["accuracy"] <= scores["fp_accuracy"] + 0.02
    assert -1.0 <= scores["spearman"] <= 1.0
    uniform = PtqPricedTask().solve_cell("2.5bits", 0, "uniform").answer
    assert len({tuple(a) for a in uniform["allocation"]}) == 1 and uniform["prices"] is None
