"""bai_posterior_tracking: the oracle weights and T* of known instances (Garivier & Kaufmann's
table), the oracle's equalising property, the GLR statistic's closed form against the likelihood
ratio itself, runs that are pure functions of their seed, and the suite's options and scorer."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from environments.papers.bai_model import Rewards, glr, kl, oracle, run_bandit
from environments.papers.bai_tracking import BAITrackingTask, characteristic_time
from environments.papers.base import CellResult
from harness.errors import HarnessError
from harness.suite import SampleContext, parse_options


def test_oracle_weights_and_characteristic_time_of_known_instances():
    w, _ = oracle(np.array([0.5, 0.45, 0.43, 0.4]))
    assert np.array_equal(np.round(w[0], 3), [0.417, 0.390, 0.136, 0.057])
    w, _ = oracle(np.array([0.3, 0.21, 0.2, 0.19, 0.18]))
    assert np.array_equal(np.round(w[0], 3), [0.336, 0.251, 0.177, 0.132, 0.104])
    assert round(characteristic_time(np.array([0.7, 0.5, 0.4, 0.3])), 1) == 57.8


def cost(w: np.ndarray, mu: np.ndarray) -> np.ndarray:
    """(w_1 + w_a) I_{w_1/(w_1+w_a)}(mu_1, mu_a) per challenger a (arm 0 the best)."""
    m = (w[0] * mu[0] + w[1:] * mu[1:]) / (w[0] + w[1:])
    return w[0] * kl(mu[0], m) + w[1:] * kl(mu[1:], m)


def test_oracle_equalises_the_challengers_and_is_the_max_min():
    rng = np.random.default_rng(0)
    mus = np.sort(rng.uniform(0.05, 0.95, size=(50, 4)), axis=1)[:, ::-1].copy()
    w, t_star = oracle(mus)
    precise, t_precise = oracle(mus, outer=60, inner=20)
    assert np.abs(w - precise).max() < 1e-7 and np.abs(t_star / t_precise - 1).max() < 1e-7
    for wi, mu, ti in zip(w[:5], mus[:5], t_star[:5]):
        assert np.allclose(cost(wi, mu), 1 / ti, rtol=1e-8)  # every challenger costs exactly 1/T*
        other = rng.dirichlet(np.ones(4), size=2000)  # no allocation does better in the worst case
        assert max(cost(o, mu).min() for o in other) <= 1 / ti + 1e-12


def test_glr_is_the_log_likelihood_ratio():
    rng = np.random.default_rng(1)
    n = rng.integers(1, 60, size=(40, 4))
    s = rng.binomial(n, 0.5)
    z, best = glr(n, s)

    def loglik(succ, pulls, p):
        p = np.clip(p, 1e-300, 1 - 1e-16)
        return succ * np.log(p) + (pulls - succ) * np.log1p(-p)

    for i in range(len(n)):
        mean, a = s[i] / n[i], best[i]
        free = loglik(s[i], n[i], mean).sum()
        ratios = []
        for b in range(4):  # the constrained MLE pools a and b; the others keep their means
            if b == a:
                continue
            p = mean.copy()
            p[[a, b]] = (s[i, a] + s[i, b]) / (n[i, a] + n[i, b])
            ratios.append(free - loglik(s[i], n[i], p).sum())
        assert a == int(np.argmax(mean)) and z[i] == pytest.approx(min(ratios), abs=1e-9)


def test_runs_are_pure_functions_of_the_seed():
    mu = np.array([0.7, 0.5, 0.4, 0.3])
    first = run_bandit(mu, (0.5,), 4, 3, "posterior_tracking", 200)
    assert all(np.array_equal(x, y) for x, y in zip(first, run_bandit(mu, (0.5,), 4, 3, "posterior_tracking", 200)))
    assert not np.array_equal(run_bandit(mu, (0.1,), 6, 3, "t3c", 2000)[0], run_bandit(mu, (0.1,), 6, 4, "t3c", 2000)[0])
    # every rule on a seed reads the same reward stacks, whatever order it pulls them in
    a, b = Rewards(mu, 3, 7), Rewards(mu, 3, 7)
    idx, arms = np.array([0, 1, 2]), np.array([2, 0, 1])
    early = a.pull(idx, arms, np.array([5, 5, 5]))
    b.pull(idx, arms, np.array([3000, 0, 0]))  # grows b's table first
    assert np.array_equal(early, b.pull(idx, arms, np.array([5, 5, 5])))


def test_stopping_times_are_ordered_by_delta_and_the_horizon_truncates():
    mu = np.array([0.7, 0.5, 0.4, 0.3])
    tau, rec = run_bandit(mu, (0.1, 0.01), 5, 0, "uniform", 20_000)
    assert (tau[:, 0] <= tau[:, 1]).all() and (tau >= 4).all() and set(rec.ravel()) <= {0, 1, 2, 3}
    tau, _ = run_bandit(mu, (0.1,), 5, 0, "uniform", 12)
    assert (tau == 12).all()


def test_one_cell_through_the_suite_contract_and_the_options():
    suite = BAITrackingTask(BAITrackingTask.Options(solver="t3c", seeds=1, runs=4))
    sample = suite.load_samples(None)[0]
    assert sample.id == "four_arms/seed000" and suite.roles == ()
    first = asyncio.run(suite.run_sample(sample, SampleContext({}, 0, {})))
    assert not first.errors
    scores = first.scores
    assert 0 <= scores["error_d1e-3"] <= 1 and scores["ratio_d1e-1"] > scores["ratio_d1e-3"] > 0
    assert scores["ratio_drop"] == pytest.approx(scores["ratio_d1e-1"] - scores["ratio_d1e-3"])
    with pytest.raises(HarnessError, match="solver=thompson.*posterior_tracking"):
        parse_options("papers.bai_posterior_tracking", BAITrackingTask.Options, {"solver": "thompson"})
    with pytest.raises(HarnessError, match="runs"):
        parse_options("papers.bai_posterior_tracking", BAITrackingTask.Options, {"runs": 0})
    result = CellResult.model_validate(first.output)
    result.answer["tau"] = result.answer["tau"][:2]
    with pytest.raises(ValueError, match="answer must hold 4 runs"):
        suite.score_cell(result)
