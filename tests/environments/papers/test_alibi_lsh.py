"""alibi_positional_lsh: E[block mask] = exp(ALiBi bias) exactly (every cut pattern enumerated) and
within Monte Carlo error; the blockwise computation equals the dense masked one; its expectation
over masks is exactly the unnormalised ALiBi attention (unbiased); cells are pure functions of the
seed apart from the measured seconds; bad options and answers are rejected."""

from __future__ import annotations

import asyncio
import math
from itertools import product

import numpy as np
import pytest

from environments.papers import alibi_lsh
from environments.papers.alibi_lsh import (
    AlibiLSHTask, alibi_bias, block_ids, blockwise_terms, dense_terms, estimate, problem, sample_cuts,
)
from environments.papers.base import CellResult
from harness.errors import HarnessError
from harness.suite import SampleContext, parse_options


def patterns(n: int, slope: float):
    """Every cut pattern of n positions with its probability."""
    p_cut = -math.expm1(-slope)
    for bits in product((False, True), repeat=n - 1):
        cuts = np.array(bits)
        yield cuts, p_cut ** cuts.sum() * (1 - p_cut) ** (n - 1 - cuts.sum())


def same_block(cuts: np.ndarray) -> np.ndarray:
    ids = block_ids(cuts)
    return (ids[..., :, None] == ids[..., None, :]).astype(float)


@pytest.mark.parametrize("slope", [0.5, 1 / 16, 2.0])
def test_expected_mask_is_exp_alibi_exactly(slope):
    n = 9
    expected = sum(p * same_block(cuts) for cuts, p in patterns(n, slope))
    gap = np.abs(np.arange(n)[:, None] - np.arange(n)[None, :])
    assert np.abs(expected - np.exp(-slope * gap)).max() < 1e-12
    assert np.array_equal(np.tril(np.exp(alibi_bias(n, slope))), np.tril(np.exp(-slope * gap)))


def test_mean_of_sampled_masks_is_exp_alibi_within_three_sigma():
    n, count, slope = 16, 4000, 0.25
    masks = same_block(sample_cuts(n, slope, count, np.random.default_rng(0)))
    p = np.exp(-slope * np.abs(np.arange(n)[:, None] - np.arange(n)[None, :]))
    lower = np.tril_indices(n, -1)
    z = (masks.mean(axis=0) - p)[lower] / np.sqrt(p * (1 - p) / count)[lower]
    assert np.abs(z).max() <= 4.3  # 3 sigma family-wise over the 120 entries (Bonferroni)
    total = masks[:, lower[0], lower[1]].sum(axis=1)  # one scalar per mask: its summed entries
    assert abs(total.mean() - p[lower].sum()) <= 3 * total.std(ddof=1) / math.sqrt(count)


def test_blockwise_equals_dense_for_any_mask():
    q, k, v = problem(70, 0, 0)
    rng = np.random.default_rng(1)
    cases = list(sample_cuts(70, 0.3, 4, rng)) + [np.zeros(69, bool), np.ones(69, bool)]
    for cuts in cases:
        num, den = blockwise_terms(q, k, v, cuts)
        dnum, dden = dense_terms(q, k, v, same_block(cuts))
        assert np.abs(num - dnum).max() < 1e-10 and np.abs(den - dden).max() < 1e-10


def test_blockwise_estimator_is_unbiased_exactly():
    n, slope = 7, 0.4
    q, k, v = problem(n, 2, 0)
    num, den = np.zeros_like(v), np.zeros(n)
    for cuts, p in patterns(n, slope):
        a, b = blockwise_terms(q, k, v, cuts)
        num, den = num + p * a, den + p * b
    tnum, tden = dense_terms(q, k, v, np.exp(alibi_bias(n, slope)))
    assert np.abs(num - tnum).max() < 1e-12 and np.abs(den - tden).max() < 1e-12


def test_one_cell_through_the_suite_contract_is_deterministic(monkeypatch):
    monkeypatch.setattr(alibi_lsh, "N_TIMES", (64, 128, 256))  # the timing loop is not under test here
    monkeypatch.setattr(alibi_lsh, "REPLICATIONS", 50)
    monkeypatch.setattr(alibi_lsh, "KS", (4, 8, 16))
    suite = AlibiLSHTask(AlibiLSHTask.Options(seeds=1))
    sample = suite.load_samples(None)[1]
    assert sample.id == "m1/16/seed000" and suite.roles == ()
    first = asyncio.run(suite.run_sample(sample, SampleContext({}, 0, {})))
    again = asyncio.run(suite.run_sample(sample, SampleContext({}, 0, {})))
    assert not first.errors
    for key in ("outputs", "replications"):
        assert first.output["answer"][key] == again.output["answer"][key]
    s = first.scores
    assert 0 < s["error_k16"] < s["error_k4"] < 1 and -1.0 < s["error_slope"] < 0
    assert s["bias_abs_z"] is not None and len(first.output["answer"]["seconds"]) == 3
    exact = AlibiLSHTask().score_cell(AlibiLSHTask().solve_cell("m1/2", 0, "exact"))
    assert exact["error_k16"] == 0.0 and exact["error_slope"] is None and exact["bias_abs_z"] is None


def test_estimates_are_pure_functions_of_the_rng():
    q, k, v = problem(40, 0, 0)
    for solver in ("lsh_blocks", "iid_mask"):
        a = estimate(solver, q, k, v, 0.5, 3, np.random.default_rng(5))
        b = estimate(solver, q, k, v, 0.5, 3, np.random.default_rng(5))
        assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])


def test_bad_options_and_answers_are_rejected():
    with pytest.raises(HarnessError, match="solver=window.*lsh_blocks"):
        parse_options("papers.alibi_positional_lsh", AlibiLSHTask.Options, {"solver": "window"})
    bad = CellResult(solver="exact", setting="m1/2", seed=0, wall_s=0.0,
                     answer={"outputs": [[[0.0]]], "seconds": [1.0, 2.0], "replications": None})
    with pytest.raises(ValueError, match="must be 3 arrays of shape"):
        AlibiLSHTask().score_cell(bad)
