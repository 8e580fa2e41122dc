"""The adapter benchmark's draw (`kernels/preft/workload.py`): every adapter used, the popularity
law, seeded Poisson arrivals. numpy only: no model, no torch."""

from __future__ import annotations

import collections

import numpy as np
import pytest

from preft.workload import draw_workload, popularity_weights


@pytest.mark.parametrize("popularity", ["uniform", "zipf"])
@pytest.mark.parametrize("count,requests", [(1, 2), (8, 16), (512, 1024), (64, 1000)])
def test_every_adapter_is_used_and_the_count_is_exact(popularity, count, requests):
    work = draw_workload(count, requests, popularity=popularity, seed=3)
    assert len(work.adapters) == len(work.arrivals) == requests
    assert set(work.adapters) == set(range(count)) and work.distinct() == count
    assert work.arrivals == [0.0] * requests


def test_fewer_than_two_per_adapter_is_one_clear_error():
    with pytest.raises(ValueError, match=r"at least 2 x A = 1024 requests \(e.g. --requests 1024\)"):
        draw_workload(512, 64)


@pytest.mark.parametrize("kwargs,match", [
    ({"popularity": "pareto"}, "--popularity 'pareto'"), ({"arrival": "burst"}, "--arrival 'burst'"),
    ({"arrival": "poisson"}, "needs --rate > 0"), ({"arrival": "poisson", "rate": 0.0}, "needs --rate > 0"),
    ({"popularity": "zipf", "zipf_s": 0.0}, "--zipf-s"),
])
def test_bad_options_name_the_option(kwargs, match):
    with pytest.raises(ValueError, match=match):
        draw_workload(4, 8, **kwargs)


def test_the_draw_is_a_pure_function_of_the_seed():
    a = draw_workload(64, 300, popularity="zipf", arrival="poisson", rate=5.0, seed=11)
    b = draw_workload(64, 300, popularity="zipf", arrival="poisson", rate=5.0, seed=11)
    c = draw_workload(64, 300, popularity="zipf", arrival="poisson", rate=5.0, seed=12)
    assert a == b and a.adapters != c.adapters and a.arrivals != c.arrivals


def test_each_once_block_is_spread_over_the_run():
    # Not the first A requests in adapter order: the whole order is shuffled.
    work = draw_workload(32, 64, seed=0)
    assert work.adapters[:32] != list(range(32)) and len(set(work.adapters[:32])) < 32


def test_zipf_weights_and_skew():
    w = popularity_weights(4, "zipf", 1.0)
    np.testing.assert_allclose(w, np.array([1, 1 / 2, 1 / 3, 1 / 4]) / (25 / 12))
    np.testing.assert_allclose(popularity_weights(5, "uniform"), [0.2] * 5)
    # Beyond the each-once block the counts follow the law: adapter k - 1 drawn about w_k * extra times.
    count, requests = 16, 200_016
    counts = collections.Counter(draw_workload(count, requests, popularity="zipf", zipf_s=1.1, seed=0).adapters)
    extra = np.array([counts[k] - 1 for k in range(count)]) / (requests - count)
    np.testing.assert_allclose(extra, popularity_weights(count, "zipf", 1.1), atol=0.004)
    assert counts[0] > 4 * counts[count - 1]  # 16 ** 1.1 = 21: the head dwarfs the tail
    uniform = collections.Counter(draw_workload(count, requests, seed=0).adapters)
    assert max(uniform.values()) < 1.05 * min(uniform.values())


def test_poisson_arrivals_have_the_rate_and_are_increasing():
    work = draw_workload(8, 20_000, arrival="poisson", rate=4.0, seed=5)
    gaps = np.diff([0.0, *work.arrivals])
    assert (gaps > 0).all()
    assert abs(gaps.mean() - 0.25) < 0.01 and abs(gaps.std() - 0.25) < 0.01  # exponential: std = mean
    first = np.random.default_rng(5)  # the documented stream: permutation, choice, shuffle, then the gaps
    first.permutation(8)
    first.choice(8, size=20_000 - 8, p=popularity_weights(8, "uniform"))
    first.shuffle(np.zeros(20_000))
    np.testing.assert_allclose(work.arrivals[:3], np.cumsum(first.exponential(0.25, size=3)))
