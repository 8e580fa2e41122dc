"""plugin_fractional_threshold: the fixed point solves delta = F(delta)/2 (and the Jaccard form)
exactly and is the threshold of best F1 among all thresholds; on the true model with many
unlabelled points it is the population oracle threshold (computed by integration); the suite's
cells are pure functions of the seed; bad options and answers are rejected."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from scipy import integrate, optimize, stats

from environments.papers.base import CellResult
from environments.papers.plugin_threshold import (
    BIAS, WEIGHTS, PluginThresholdTask, expected_scores, fit, fixed_point, predict, true_eta,
)
from harness.errors import HarnessError
from harness.suite import SampleContext, parse_options


def test_fixed_point_solves_its_equation_and_is_the_best_threshold():
    rng = np.random.default_rng(0)
    for eta in (rng.beta(0.5, 2, size=500), rng.random(37), np.array([0.9, 0.9, 0.2, 0.2, 0.6])):
        delta = fixed_point(eta)
        f1, jac = expected_scores(eta, (eta > delta).astype(float))
        assert delta == pytest.approx(f1 / 2, abs=1e-12)          # delta = F(delta) / 2
        assert delta == pytest.approx(jac / (1 + jac), abs=1e-12)  # delta = J(delta) / (1 + J(delta))
        candidates = np.concatenate([[-1.0], np.unique(eta)])       # every distinct classifier eta > t
        best = max(expected_scores(eta, (eta > t).astype(float))[0] for t in candidates)
        assert f1 == pytest.approx(best, abs=1e-12)


def population_f1(delta: float) -> float:
    """F1 of eta > delta under x ~ N(0, I): eta = sigmoid(z), z ~ N(BIAS, ||w||^2), by quadrature."""
    sd = float(np.linalg.norm(WEIGHTS))
    cut = BIAS + sd * 8 if delta >= 1 else float(np.log(delta / (1 - delta))) if delta > 0 else BIAS - sd * 8

    def pdf(z: float) -> float:
        return float(stats.norm.pdf(z, BIAS, sd))

    def sig(z: float) -> float:
        return 1 / (1 + np.exp(-z))

    mean_eta = integrate.quad(lambda z: sig(z) * pdf(z), BIAS - 12 * sd, BIAS + 12 * sd)[0]
    tp = integrate.quad(lambda z: sig(z) * pdf(z), cut, BIAS + 12 * sd)[0]
    return 2 * tp / (mean_eta + float(stats.norm.sf(cut, BIAS, sd)))


def test_fixed_point_on_the_true_model_is_the_oracle_threshold_in_the_large_n_limit():
    oracle = optimize.minimize_scalar(lambda d: -population_f1(d), bounds=(0.05, 0.95), method="bounded",
                                      options={"xatol": 1e-8})
    assert oracle.x == pytest.approx(population_f1(oracle.x) / 2, abs=1e-5)  # the population fixed point
    x = np.random.default_rng(1).standard_normal((400_000, len(WEIGHTS)))
    assert fixed_point(true_eta(x)) == pytest.approx(oracle.x, abs=3e-3)


def test_one_cell_through_the_suite_contract_is_deterministic():
    suite = PluginThresholdTask(PluginThresholdTask.Options(seeds=1))
    sample = suite.load_samples(None)[0]
    assert sample.id == "logistic/seed000" and suite.roles == () and suite.seeds == 1
    first = asyncio.run(suite.run_sample(sample, SampleContext({}, 0, {})))
    again = asyncio.run(suite.run_sample(sample, SampleContext({}, 0, {})))
    assert not first.errors and first.output["answer"] == again.output["answer"]
    s = first.scores
    assert 0.3 < s["oracle_threshold"] < 0.4 and all(-0.01 < s[f"excess_f1_nl{n}"] < 0.2 for n in (200, 1000, 5000))
    half = PluginThresholdTask().solve_cell("logistic", 0, "half")
    assert [m["threshold"] for m in half.answer["models"]] == [0.5] * 3
    assert [m["coef"] for m in half.answer["models"]] == [m["coef"] for m in first.output["answer"]["models"]]


def test_bad_options_and_answers_are_rejected():
    with pytest.raises(HarnessError, match="solver=oracle.*fixed_point"):
        parse_options("papers.plugin_fractional_threshold", PluginThresholdTask.Options, {"solver": "oracle"})
    bad = CellResult(solver="half", setting="logistic", seed=0, wall_s=0.0, answer={"models": []})
    with pytest.raises(ValueError, match="one model per n_labelled"):
        PluginThresholdTask().score_cell(bad)


def test_the_plug_in_fit_is_the_penalised_maximum_likelihood():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((300, len(WEIGHTS)))
    y = (rng.random(300) < true_eta(x)).astype(float)
    coef, intercept = fit(x, y)
    p = predict(x, coef, intercept)
    assert np.abs(x.T @ (p - y) + coef).max() < 1e-9 and abs((p - y).sum()) < 1e-9  # the gradient vanishes
