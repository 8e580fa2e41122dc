"""sbkan_aniso_rates: the B-spline basis against scipy's; the MCMC sampler against the exactly
enumerated spike-and-slab posterior of the linear-in-basis model (knot count, inclusion, mean);
pruned edges contribute exactly nothing and the posterior prunes an irrelevant input; theory
exponents and the oracle's knots; the scorer on draws of known distance; bad options and answers
rejected. numpy/scipy only (no torch)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.interpolate import BSpline

from environments.papers.base import CellResult
from environments.papers.sbkan import BASE_SIZES, N_TEST, SBKANTask, data, oracle_intervals, target, theory_exponent
from environments.papers.sbkan_model import SBKAN, Prior, active_edges, bspline_basis, exact_linear_posterior
from harness.errors import HarnessError
from harness.suite import parse_options


def test_bspline_basis_equals_scipy_and_its_derivative_the_finite_difference():
    t = np.random.default_rng(0).random(40)
    for m in (1, 4, 9):
        reference = BSpline.design_matrix(t, np.arange(-3, m + 4) / m, 3).toarray()
        assert np.abs(bspline_basis(t, m) - reference).max() < 1e-12
        slope = (bspline_basis(t + 1e-6, m) - bspline_basis(t - 1e-6, m)) / 2e-6
        assert np.abs(bspline_basis(t, m, derivative=True) - slope).max() < 1e-6


def test_sampler_matches_the_enumerated_posterior_of_the_linear_model():
    rng = np.random.default_rng(1)
    x = rng.random((40, 2))
    y = 0.25 * np.sin(2 * np.pi * x[:, 0]) + 0.3 * rng.standard_normal(40)
    prior = Prior(linear=True, grid=(1, 2, 3))
    x_eval = rng.random((5, 2))
    exact = exact_linear_posterior(prior, x, y, x_eval)
    # the posterior is not degenerate: the knot count and x2's edge are both uncertain
    assert exact["p_m"].max() < 0.7 and 0.05 < exact["p_z"][1] < 0.5
    model = SBKAN(prior, x, y)
    state = model.initial_state(rng, m=2)
    knots, included, means = [], [], []
    for sweep in range(900):
        model.sweep(state, rng)
        if sweep >= 100:
            knots.append(state.m[0])
            included.append(state.z[0].copy())
            means.append(model.predict_at(state, x_eval))
    assert state.stats["inner_accepted"] == state.stats["inner_tried"]  # the exact conditional: always accepted
    # Monte Carlo tolerances: the indicator chain switches x2's edge rarely (~3% of births are
    # accepted), so 800 sweeps carry ~25 visits; a 4000-sweep run gave P(z2) 0.136 against 0.125.
    p_m = np.array([np.mean(np.array(knots) == m) for m in prior.grid])
    assert np.abs(p_m - exact["p_m"]).max() < 0.08
    assert np.abs(np.mean(included, 0) - exact["p_z"]).max() < 0.12
    assert np.abs(np.mean(means, 0) - exact["mean_f"]).max() < 0.04


def test_a_pruned_edge_contributes_exactly_nothing_and_an_irrelevant_input_is_pruned():
    rng = np.random.default_rng(2)
    x = rng.random((60, 2))
    y = np.sin(2 * np.pi * x[:, 0]) + 0.3 * rng.standard_normal(60)
    model = SBKAN(Prior(hidden=2, grid=(2, 4)), x, y)
    state = model.initial_state(rng, m=4)
    state.a = rng.standard_normal(state.a.shape)
    before = model.predict_at(state, x)
    dropped = state.c.pop((1, 1))
    state.z[1, 1] = False
    assert not np.array_equal(model.predict_at(state, x), before)  # the edge mattered
    state.c[(1, 1)], state.z[1, 1] = 100 * dropped, True
    state.w[1] = False  # its hidden unit's outer edge is out: the whole unit is pruned
    with_big_edge = model.predict_at(state, x)
    state.c.pop((1, 1))
    assert np.array_equal(model.predict_at(state, x), with_big_edge)
    assert active_edges(state) == 2
    # the linear model on y = sin(2 pi x1) + noise: the posterior drops x2's edge
    linear = SBKAN(Prior(linear=True, grid=(2, 4)), x, y)
    state = linear.initial_state(rng, m=4)
    kept = []
    for _ in range(120):
        linear.sweep(state, rng)
        kept.append(state.z[0].copy())
    kept_share = np.mean(kept[20:], 0)
    assert kept_share[0] == 1.0 and kept_share[1] < 0.2


def test_theory_exponents_oracle_knots_and_target_scale():
    assert theory_exponent("aniso_rough") == pytest.approx(0.375 / 1.75)  # s~ = (1/0.5 + 1/1.5)^-1 = 3/8
    assert theory_exponent("aniso_smooth") == pytest.approx((4 / 3) / (11 / 3))
    assert theory_exponent("compositional") == pytest.approx(1 / 3)
    assert oracle_intervals("aniso_rough", 1024) == (round(1024 ** (3 / 7)), round(1024 ** (1 / 7)))
    x = np.random.default_rng(5).random((50_000, 2))
    for setting in ("aniso_rough", "aniso_smooth", "compositional"):
        assert np.std(target(setting, x)) == pytest.approx(1.0, abs=0.03)


def test_scorer_recovers_a_known_contraction_exponent():
    truth = target("aniso_rough", data("aniso_rough", 0, BASE_SIZES[0])[2])
    signs = np.random.default_rng(3).choice([-1.0, 1.0], size=(4, N_TEST))
    # each draw's L2 distance is exactly 0.5 n^-0.25
    runs = [
        {
            "predictions": (truth + 0.5 * n**-0.25 * signs).tolist(),
            "pruned_share": 0.5,
            "knots": 8.0,
            "accept_inner": 0.5,
            "accept_size": 0.1,
        }
        for n in BASE_SIZES
    ]
    result = CellResult(
        solver="sbkan", setting="aniso_rough", seed=0, wall_s=0.0, answer={"sizes": list(BASE_SIZES), "runs": runs}
    )
    scores = SBKANTask().score_cell(result)
    assert scores["exponent"] == pytest.approx(0.25, abs=1e-9)
    assert scores["log_l2_nmax"] == pytest.approx(math.log(0.5 * BASE_SIZES[-1] ** -0.25))
    assert scores["mass_outside"] == 0.0 and scores["pruned_share"] == 0.5
    result.answer["runs"] = runs[:2]
    with pytest.raises(ValueError, match="one run per size"):
        SBKANTask().score_cell(result)


def test_bad_options_are_one_clear_error():
    with pytest.raises(HarnessError, match="solver=gp.*sbkan"):
        parse_options("papers.sbkan_aniso_rates", SBKANTask.Options, {"solver": "gp"})
    with pytest.raises(HarnessError, match="scale"):
        parse_options("papers.sbkan_aniso_rates", SBKANTask.Options, {"scale": 0})
    with pytest.raises(ValueError, match="fixed_m"):
        Prior(fixed_m=(4,))
    with pytest.raises(ValueError, match="grid"):
        Prior(grid=(4, 2))
