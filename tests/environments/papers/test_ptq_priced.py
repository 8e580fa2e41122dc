"""ptq_priced_bitalloc: the knapsack is exact (brute force agrees) and refuses a budget below the
smallest configuration; unknown formats are refused by option name; every quantiser keeps its grid;
an equivalent transformation leaves the layer output unchanged before quantisation; the Fisher
factor is the real Jacobian's (finite differences); the method never reads labels; one cell scores
through the suite contract. A random untrained CNN stands in for the trained one (no training here)."""

from __future__ import annotations

import asyncio
from itertools import product

import numpy as np
import pytest
from pydantic import ValidationError

from environments.papers import ptq_priced
from environments.papers.ptq_cnn import CNN, KERNEL, LAYERS, _logits_from, fisher_factors, forward, layer_forward
from environments.papers.ptq_priced import PtqPricedTask, knapsack
from environments.papers.ptq_quant import (
    FP4_E2M1,
    Candidate,
    candidates,
    cost_bits,
    effective_weight,
    nf4_levels,
    quantise,
    rotation,
    smoothing,
)
from harness.suite import SampleContext

torch = pytest.importorskip("torch")


def random_cnn(seed: int) -> CNN:
    rng = np.random.default_rng(seed)
    shapes = [(cin * (KERNEL * KERNEL if kind == "conv" else 1), cout) for kind, cin, cout, _ in LAYERS]
    return CNN(
        [rng.normal(size=s) * (2.0 / s[0]) ** 0.5 for s in shapes], [rng.normal(size=s[1]) * 0.1 for s in shapes]
    )


def test_knapsack_is_exact_against_brute_force():
    rng = np.random.default_rng(0)
    for _ in range(30):
        prices = rng.random((3, 5)).tolist()
        costs = rng.integers(1, 20, size=(3, 5)).tolist()
        budget = float(rng.integers(10, 45))
        fits = [c for c in product(range(5), repeat=3) if sum(costs[i][k] for i, k in enumerate(c)) <= budget]
        if not fits:
            with pytest.raises(ValueError, match="below the smallest configuration"):
                knapsack(prices, costs, budget)
            continue
        best = min(sum(prices[i][k] for i, k in enumerate(c)) for c in fits)
        choice = knapsack(prices, costs, budget)
        assert sum(costs[i][k] for i, k in enumerate(choice)) <= budget
        assert abs(sum(prices[i][k] for i, k in enumerate(choice)) - best) < 1e-12


def test_a_budget_below_the_smallest_configuration_is_one_clear_error():
    costs = [[10, 4], [7, 3]]
    with pytest.raises(ValueError, match=r"budget of 6 bits is below the smallest configuration \(7 bits\)"):
        knapsack([[0.0, 1.0], [0.0, 1.0]], costs, 6)
    assert knapsack([[0.0, 1.0], [0.0, 1.0]], costs, 7) == [1, 1]


def test_unknown_formats_and_transforms_are_refused_by_option_name():
    with pytest.raises(ValidationError, match="option formats: unknown format 'int5'; choose from int2"):
        PtqPricedTask.Options(formats=("int4", "int5"))
    with pytest.raises(ValidationError, match="option transforms: unknown transform 'hadamard'"):
        PtqPricedTask.Options(transforms=("hadamard",))
    with pytest.raises(ValueError, match="option formats: no formats given"):
        candidates(formats=())
    assert len(candidates()) == 9 * 2 * 3


def test_every_quantiser_keeps_its_grid():
    w = np.random.default_rng(1).normal(size=(40, 5))
    for fmt, levels in (("int2", 3), ("int3", 7), ("int4", 15), ("fp4", 15), ("nf4", 16), ("km2", 4), ("km3", 8)):
        for gran in ("tensor", "channel"):
            q = quantise(w, fmt, gran)
            for group in q.T if gran == "channel" else [q.ravel()]:
                assert len(np.unique(np.round(group, 12))) <= levels
            if not fmt.startswith("km"):  # grids put the group's peak on their largest level
                peak = np.abs(w).max(axis=0) if gran == "channel" else np.abs(w).max()
                assert np.allclose(np.abs(q).max(axis=0 if gran == "channel" else None), peak)
    q = quantise(w, "fp4", "tensor") / (np.abs(w).max() / 6.0)
    assert np.allclose(np.min(np.abs(np.abs(q).ravel()[:, None] - FP4_E2M1[None, :]), axis=1), 0)
    assert nf4_levels()[0] == -1.0 and nf4_levels()[-1] == 1.0 and 0.0 in nf4_levels() and len(nf4_levels()) == 16
    one = np.array([[0.1], [0.1], [0.9], [1.0]])
    assert np.allclose(quantise(one, "km2", "tensor"), one)  # 3 distinct values, 4 centroids: exact


def test_storage_cost_counts_codes_scales_codebooks_and_smoothing():
    assert cost_bits((9, 16), Candidate("int4", "tensor", "none"), 1) == 4 * 144 + 16
    assert cost_bits((9, 16), Candidate("int4", "channel", "rotate"), 1) == 4 * 144 + 16 * 16
    assert cost_bits((288, 64), Candidate("km3", "channel", "smooth"), 32) == 3 * 288 * 64 + 64 * 8 * 16 + 32 * 16


@pytest.mark.parametrize("layer", range(len(LAYERS)))
def test_a_rotation_or_smoothing_leaves_the_layer_output_unchanged_before_quantisation(layer, monkeypatch):
    import torch.nn.functional as F

    net = random_cnn(3)
    w = net.weights[layer]
    kind, cin, _, stride = LAYERS[layer]
    rng = np.random.default_rng(4)
    a = rng.normal(size=(3, cin, 8, 8)) if kind == "conv" else rng.normal(size=(3, cin))
    at = torch.from_numpy(a)
    z = layer_forward(layer, at, torch.from_numpy(w), None).reshape(3, -1)
    rows = F.unfold(at, KERNEL, padding=1, stride=stride).transpose(1, 2) if kind == "conv" else at[:, None, :]
    q = rotation(w.shape[0], 11)
    s = smoothing(np.abs(rng.normal(size=cin)) + 0.1, net.rows_per_channel(layer))
    rotated = (rows @ torch.from_numpy(q)) @ torch.from_numpy(q.T @ w)  # (a Q)(Q^T W)
    smoothed = (rows / torch.from_numpy(s)) @ torch.from_numpy(s[:, None] * w)  # (a / s)(diag(s) W)
    for out in (rotated, smoothed):
        assert torch.allclose(out.transpose(1, 2).reshape(3, -1), z, atol=1e-10)
    assert np.allclose(q @ q.T, np.eye(len(q)), atol=1e-12)
    # and the effective weight under a lossless quantiser is W itself, for every transform
    monkeypatch.setattr("environments.papers.ptq_quant.quantise", lambda m, fmt, gran: m)
    for transform in ("none", "rotate", "smooth"):
        assert np.allclose(effective_weight(w, Candidate("int4", "tensor", transform), q, s), w, atol=1e-12)


def test_the_fisher_factor_is_the_true_jacobians():
    net = random_cnn(5)
    x = np.random.default_rng(6).random((2, 64))
    factors = fisher_factors(net, x)
    ws = [torch.from_numpy(w) for w in net.weights]
    bs = [torch.from_numpy(b) for b in net.biases]
    with torch.no_grad():
        _, _, outputs = forward(ws, bs, torch.from_numpy(x.reshape(-1, 1, 8, 8)))
    p = torch.softmax(outputs[-1], dim=1).numpy()
    fisher = [np.diag(pn) - np.outer(pn, pn) for pn in p]
    # last layer: J = I, so H = mean(diag p - p p^T) exactly
    g = factors[-1]
    assert np.allclose(g.T @ g / 2, np.mean(fisher, axis=0), atol=1e-12)
    # layer 2 (conv 32->64): Jacobian by central differences through the layers above, sample 0
    z = outputs[2][:1]
    eps, cols = 1e-6, [0, 17, 300, 1023]
    jac = np.stack(
        [
            ((_logits_from(2, z + eps * e, ws, bs) - _logits_from(2, z - eps * e, ws, bs)) / (2 * eps))[0].numpy()
            for e in (torch.nn.functional.one_hot(torch.tensor(c), 1024).double().reshape(z.shape) for c in cols)
        ],
        axis=1,
    )
    g0 = factors[2][:10][:, cols]  # sample 0's rows
    assert np.allclose(g0.T @ g0, jac.T @ fisher[0] @ jac, atol=1e-7)


@pytest.fixture()
def tiny_split(monkeypatch):
    """A random CNN and small calibration/test splits in place of the trained seed (no training)."""
    rng = np.random.default_rng(7)
    net = random_cnn(8)
    split = (net, (rng.random((24, 64)), rng.integers(0, 10, 24)), (rng.random((40, 64)), rng.integers(0, 10, 40)))
    monkeypatch.setattr(ptq_priced, "trained", lambda seed: split)
    caches = (ptq_priced.effective_weights, ptq_priced.calibration, ptq_priced.true_increase)
    for cached in caches:
        cached.cache_clear()
    yield split
    for cached in caches:
        cached.cache_clear()


def test_the_method_never_reads_labels_or_test_data(tiny_split, monkeypatch):
    opts = {"formats": ("int2", "nf4"), "transforms": ("none", "rotate")}
    clean = PtqPricedTask(PtqPricedTask.Options(**opts)).solve_cell("2.5bits", 0, "priced").answer
    net, (xc, yc), (xt, yt) = tiny_split
    poisoned = (net, (xc, np.full_like(yc, -1)), (xt * np.nan, yt))
    monkeypatch.setattr(ptq_priced, "trained", lambda seed: poisoned)
    for cached in (ptq_priced.effective_weights, ptq_priced.calibration):
        cached.cache_clear()
    again = PtqPricedTask(PtqPricedTask.Options(**opts)).solve_cell("2.5bits", 0, "priced").answer
    assert again["prices"] == clean["prices"] and again["choice"] == clean["choice"]


def test_one_cell_scores_through_the_suite_contract(tiny_split):
    opts = {"formats": ("int2", "fp4", "km2"), "transforms": ("none", "smooth"), "seeds": 1}
    suite = PtqPricedTask(PtqPricedTask.Options(solver="priced", **opts))
    sample = suite.load_samples(None)[0]
    outcome = asyncio.run(suite.run_sample(sample, SampleContext({}, 0, {})))
    scores, answer = outcome.scores, outcome.output["answer"]
    assert answer["cost_bits"] <= answer["budget_bits"] and scores["bits_per_weight"] <= 2.5
    assert -1.0 <= scores["spearman"] <= 1.0 and 0.0 <= scores["beyond_int_share"] <= 1.0
    n_cands = len(suite.candidate_set())
    assert np.shape(answer["prices"]) == (len(LAYERS), n_cands)
    uniform = PtqPricedTask(PtqPricedTask.Options(solver="uniform", **opts)).solve_cell("2.5bits", 0, "uniform").answer
    assert len(set(uniform["allocation"])) == 1 and uniform["prices"] is None


def test_the_reduced_scores_are_the_price_with_h_reduced(tiny_split, monkeypatch):
    """With H = I the price is the reconstruction score; with H diagonal, the diagonal score."""
    opts = {"formats": ("int3", "km2"), "transforms": ("none", "rotate")}
    eff = ptq_priced.effective_weights(0, PtqPricedTask(PtqPricedTask.Options(**opts)).candidate_set())
    inputs, hs = ptq_priced.calibration(0)
    monkeypatch.setattr(ptq_priced, "calibration", lambda seed: (inputs, [np.eye(len(h)) for h in hs]))
    assert np.allclose(ptq_priced.price_table(0, eff, "priced"), ptq_priced.price_table(0, eff, "recon"))
    monkeypatch.setattr(ptq_priced, "calibration", lambda seed: (inputs, [np.diag(np.diag(h)) for h in hs]))
    assert np.allclose(ptq_priced.price_table(0, eff, "priced"), ptq_priced.price_table(0, eff, "diag_hessian"))
    assert not np.allclose(np.diag(np.diag(hs[2])), hs[2])  # the real H is not diagonal: the reduction loses
