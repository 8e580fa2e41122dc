"""ts_faithful_eval_mb: Mueller-Brown's published stationary points have the right energies and
Hessian signatures, the faithful checker accepts the true saddle and rejects a minimum, a
second-order saddle, a saddle of another reaction and a point off the saddle, CI-NEB on the clean
surface converges to the known saddles, entries are pure functions of their seed, and a tiny cell
scores through the suite contract."""

from __future__ import annotations

import asyncio

import numpy as np
import pydantic
import pytest

from environments.papers import ts_faithful
from environments.papers.ts_faithful import TSFaithfulTask, make_entry
from environments.papers.ts_surface import (
    MINIMA,
    SADDLES,
    Surface,
    climbing_image_neb,
    egh,
    faithful_check,
    negative_modes,
    newton_stationary,
)
from harness.suite import SampleContext

CLEAN = Surface()
PUBLISHED_ENERGY = {"A": -146.70, "B": -108.17, "C": -80.77, "AC": -40.66, "CB": -72.25}


def stationary(name):
    return newton_stationary(CLEAN, np.array({**MINIMA, **SADDLES}[name]))[0]


@pytest.mark.parametrize("name", ["A", "B", "C", "AC", "CB"])
def test_published_stationary_points_and_their_hessian_signatures(name):
    point, converged = newton_stationary(CLEAN, np.array({**MINIMA, **SADDLES}[name]))
    assert converged and np.linalg.norm(point - np.array({**MINIMA, **SADDLES}[name])) < 1e-3
    assert abs(egh(CLEAN, point)[0][0] - PUBLISHED_ENERGY[name]) < 0.01
    assert negative_modes(CLEAN, point) == (1 if name in SADDLES else 0)


def test_analytic_gradient_and_hessian_match_finite_differences():
    bumpy = Surface(heights=[5.0, -3.0], centres=[(0.1, 0.9), (-0.4, 0.3)], widths=[0.15, 0.2])
    p, eps = np.array([-0.2, 0.7]), 1e-6
    _, g, h = egh(bumpy, p)
    for i, e in enumerate(np.eye(2)):
        up, down = egh(bumpy, p + eps * e), egh(bumpy, p - eps * e)
        assert abs((up[0][0] - down[0][0]) / (2 * eps) - g[0, i]) < 1e-4
        assert np.allclose((up[1][0] - down[1][0]) / (2 * eps), h[0][:, i], atol=1e-3)


@pytest.mark.parametrize(("saddle", "reactant", "product"), [("AC", "A", "C"), ("CB", "B", "C")])
def test_checker_accepts_the_true_saddle_and_rejects_implausible_points(saddle, reactant, product):
    r, p, ts = stationary(reactant), stationary(product), stationary(saddle)
    assert faithful_check(CLEAN, ts, r, p) == (True, "first-order saddle connecting the intended minima")
    assert faithful_check(CLEAN, r, r, p) == (False, "0 negative Hessian eigenvalues")
    other = stationary("CB" if saddle == "AC" else "AC")
    assert faithful_check(CLEAN, other, r, p) == (False, "steepest-descent paths reach other minima")
    stable = np.linalg.eigh(egh(CLEAN, ts)[2][0])[1][:, 1]
    assert not faithful_check(CLEAN, ts + 0.15 * stable, r, p)[0]
    assert not faithful_check(CLEAN, np.array([np.nan, 0.0]), r, p)[0]


def test_checker_rejects_a_second_order_saddle():
    hill = Surface(heights=[40.0], centres=[(-1.2, 0.2)], widths=[0.1])
    top, converged = newton_stationary(hill, np.array([-1.2, 0.2]))
    assert converged and negative_modes(hill, top) == 2
    assert faithful_check(hill, top, stationary("A"), stationary("C")) == (False, "2 negative Hessian eigenvalues")


@pytest.mark.parametrize(("saddle", "reactant", "product"), [("AC", "A", "C"), ("CB", "C", "B")])
def test_climbing_image_neb_converges_to_the_known_saddle(saddle, reactant, product):
    point, iterations = climbing_image_neb(CLEAN, stationary(reactant), stationary(product))
    assert iterations < 4000 and np.linalg.norm(point - np.array(SADDLES[saddle])) < 1e-3


def test_entries_are_pure_functions_of_their_seed():
    first = make_entry(7, 0)
    assert first == make_entry(7, 0) and first != make_entry(7, 1)
    ts, r, p = (np.array(x) for x in (first.true_ts, first.reactant, first.product))
    assert faithful_check(first.surface, ts, r, p)[0]


@pytest.fixture
def tiny(monkeypatch):
    monkeypatch.setattr(ts_faithful, "ENTRIES", 4)
    monkeypatch.setattr(ts_faithful, "TRAIN_ENTRIES", 8)
    for cached in (
        ts_faithful.cell_entries,
        ts_faithful.training_split,
        ts_faithful.trained_mlp,
        ts_faithful.label_checks,
    ):
        cached.cache_clear()
    yield
    for cached in (
        ts_faithful.cell_entries,
        ts_faithful.training_split,
        ts_faithful.trained_mlp,
        ts_faithful.label_checks,
    ):
        cached.cache_clear()


def test_a_tiny_cell_scores_through_the_suite_contract(tiny):
    suite = TSFaithfulTask(TSFaithfulTask.Options(solver="knn", seeds=1))
    sample = suite.load_samples(None)[0]
    outcome = asyncio.run(suite.run_sample(sample, SampleContext({}, 0, {})))
    entries = ts_faithful.cell_entries("mb_bumps", 0)
    knn = np.array(outcome.output["answer"]["predicted_ts"])
    assert knn.shape == (4, 2) and 0.0 <= outcome.scores["validity"] <= 1.0
    labels = np.array([e.label for e in entries])
    assert outcome.scores["rmsd"] == pytest.approx(np.linalg.norm(knn - labels, axis=1).mean())
    # every implausible label is flagged and every true one accepted, whichever solver is scored
    kinds = [kind for kind, _ in ts_faithful.label_checks("mb_bumps", 0)]
    assert all(ok == (kind == "true") for kind, ok in ts_faithful.label_checks("mb_bumps", 0)) and kinds
    oracle = suite.score_cell(
        ts_faithful.CellResult(
            solver="knn",
            setting="mb_bumps",
            seed=0,
            answer={"predicted_ts": [list(e.true_ts) for e in entries]},
            wall_s=0.0,
        )
    )
    assert oracle["validity"] == 1.0 and oracle["true_distance"] == 0.0 and oracle["rank_tau"] is None


def test_bad_options_and_answers_are_rejected(tiny):
    with pytest.raises(pydantic.ValidationError, match="solver"):
        TSFaithfulTask.Options(solver="react_ot")
    with pytest.raises(ValueError, match="unknown setting 'lj7'"):
        TSFaithfulTask().solve_cell("lj7", 0, "midpoint")
    bad = ts_faithful.CellResult(
        solver="midpoint", setting="mb_bumps", seed=0, answer={"predicted_ts": [[0.0, 0.0]]}, wall_s=0.0
    )
    with pytest.raises(ValueError, match="expected \\(4, 2\\)"):
        TSFaithfulTask().score_cell(bad)
