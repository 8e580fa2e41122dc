"""prefix_linear_forcing: the logits are exactly affine in layer 2's prefix values (the fact the
method rests on), the linear solve forces teacher targets and flags unreachable ones, checked by
the real forward pass; the suite's cells and options."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from environments.papers.prefix_forcing import (
    D_HEAD, FORCED, HEADS, PrefixForcingTask, forward, linear_system, make_decoder, problems, solve_gradient, solve_linear,
)
from harness.errors import HarnessError
from harness.suite import SampleContext, parse_options


def test_logits_are_affine_in_the_layer2_prefix_values_and_the_system_is_exact():
    dec = make_decoder(3, 4)
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, 32, size=8)
    v1, v2 = rng.normal(size=(2, HEADS, 4, D_HEAD))
    mix = forward(dec, tokens, 0.3 * v1 + 0.7 * v2)[0]
    assert np.allclose(mix, 0.3 * forward(dec, tokens, v1)[0] + 0.7 * forward(dec, tokens, v2)[0], atol=1e-10)
    a, c = linear_system(dec, tokens)
    assert np.allclose(a @ v1.ravel() + c, forward(dec, tokens, v1)[0][-FORCED:].ravel(), atol=1e-10)


def test_linear_solve_forces_reachable_targets_and_flags_unreachable_ones():
    dec, targets = problems(1, 8)
    for tokens, target, reachable in targets[:2] + targets[-2:]:
        values, flagged = solve_linear(dec, tokens, target)
        error = np.abs(forward(dec, tokens, values)[0][-FORCED:] - target).max()
        assert flagged != reachable
        assert (error < 1e-8) == reachable


def test_gradient_baseline_gets_closer_but_not_to_the_tolerance():
    dec, targets = problems(1, 2)
    tokens, target, _ = targets[0]
    values, flagged = solve_gradient(dec, tokens, target)
    start = np.abs(forward(dec, tokens, np.zeros_like(values))[0][-FORCED:] - target).max()
    error = np.abs(forward(dec, tokens, values)[0][-FORCED:] - target).max()
    assert error < start and flagged == (error > 1e-4)


def test_one_cell_through_the_suite_contract_is_deterministic():
    suite = PrefixForcingTask(PrefixForcingTask.Options(seeds=1))
    sample = suite.load_samples(None)[1]
    assert sample.id == "prefix2/seed000" and len(suite.load_samples(None)) == 2
    first = asyncio.run(suite.run_sample(sample, SampleContext({}, 0, {})))
    again = asyncio.run(suite.run_sample(sample, SampleContext({}, 0, {})))
    assert first.scores["forced_rate"] == 1.0 and first.scores["flag_rate"] == 1.0
    assert first.scores["false_flag_rate"] == 0.0 and first.scores["max_logit_error"] < 1e-8
    assert first.output["answer"]["targets"][0]["values"] == again.output["answer"]["targets"][0]["values"]
    assert suite.roles == () and "CRITERION (ours" in suite.description


def test_unknown_solver_is_one_clear_error():
    with pytest.raises(HarnessError, match="solver=adam.*linear"):
        parse_options("papers.prefix_linear_forcing", PrefixForcingTask.Options, {"solver": "adam"})
