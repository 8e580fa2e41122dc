"""ts_faithful_eval_mb's amendment (issue 43 item 6): the 3-D coupled surface's analytic derivatives,
its saddles found by Newton (zero gradient, exactly one negative Hessian eigenvalue, the lifted 2-D
saddle), the faithful checker there (accepts the saddle, rejects a minimum and a point off the
sheet), CI-NEB there, and the panel's rank statistics and equilibrium pull on hand-built inputs."""

from __future__ import annotations

import numpy as np
import pytest

from environments.papers import ts_faithful
from environments.papers.ts_coupled import CoupledSurface
from environments.papers.ts_faithful import PANEL, TSFaithfulTask, along_path, lifted, make_entry, rank_disagreement
from environments.papers.ts_surface import (
    GRAD_TOL,
    MINIMA,
    SADDLES,
    Surface,
    climbing_image_neb,
    egh,
    faithful_check,
    negative_modes,
    newton_stationary,
)

COUPLED = CoupledSurface()
BUMPY = CoupledSurface(base=Surface(heights=[5.0, -3.0], centres=[(0.1, 0.9), (-0.4, 0.3)], widths=[0.15, 0.2]))


def stationary3d(name):
    flat = newton_stationary(Surface(), np.array({**MINIMA, **SADDLES}[name]))[0]
    return COUPLED.lift(flat)


def test_coupled_gradient_and_hessian_match_finite_differences():
    p, eps = np.array([-0.2, 0.7, 0.35]), 1e-6
    _, g, h = egh(BUMPY, p)
    for i, e in enumerate(np.eye(3)):
        up, down = egh(BUMPY, p + eps * e), egh(BUMPY, p - eps * e)
        assert abs((up[0][0] - down[0][0]) / (2 * eps) - g[0, i]) < 1e-4
        assert np.allclose((up[1][0] - down[1][0]) / (2 * eps), h[0][:, i], atol=1e-3)


@pytest.mark.parametrize("name", ["AC", "CB"])
def test_newton_finds_a_first_order_saddle_on_the_coupled_surface(name):
    start = stationary3d(name) + np.array([0.01, -0.01, 0.05])  # off the sheet and off the saddle
    saddle, converged = newton_stationary(COUPLED, start)
    assert converged and np.linalg.norm(egh(COUPLED, saddle)[1][0]) < GRAD_TOL
    assert (np.linalg.eigvalsh(egh(COUPLED, saddle)[2][0]) < 0).sum() == 1
    assert np.linalg.norm(saddle - stationary3d(name)) < 1e-6  # the 2-D saddle, lifted onto the sheet


def test_lifted_minima_are_minima_and_are_rejected_as_transition_states():
    r, p, ts = stationary3d("A"), stationary3d("C"), stationary3d("AC")
    for m in (r, p, stationary3d("B")):
        assert np.linalg.norm(egh(COUPLED, m)[1][0]) < GRAD_TOL and negative_modes(COUPLED, m) == 0
    assert faithful_check(COUPLED, ts, r, p) == (True, "first-order saddle connecting the intended minima")
    assert faithful_check(COUPLED, r, r, p) == (False, "0 negative Hessian eigenvalues")
    assert faithful_check(COUPLED, ts + np.array([0.0, 0.0, 0.1]), r, p)[0] is False  # off the sheet
    assert faithful_check(COUPLED, ts[:2], r, p) == (False, "not a finite 3-d point")
    assert faithful_check(COUPLED, stationary3d("CB"), r, p) == (False, "steepest-descent paths reach other minima")


def test_climbing_image_neb_finds_the_lifted_saddle():
    point, iterations = climbing_image_neb(COUPLED, stationary3d("C"), stationary3d("B"))
    assert iterations < 4000 and np.linalg.norm(point - stationary3d("CB")) < 2e-3


def test_a_lifted_entry_keeps_its_saddle_valid():
    entry = lifted(make_entry(7, 0))
    ts, r, p = (np.array(x) for x in (entry.true_ts, entry.reactant, entry.product))
    assert len(ts) == 3 and faithful_check(entry.surface, ts, r, p)[0]


def test_rank_disagreement_on_hand_built_panels():
    agree = {n: {"rmsd": 0.1 * i, "validity": 1.0 - 0.1 * i} for i, n in enumerate(PANEL)}
    assert rank_disagreement(agree) == {"rank_tau": pytest.approx(1.0), "rmsd_best_invalid": 0.0}
    reverse = {n: {"rmsd": 0.1 * i, "validity": 0.1 * i} for i, n in enumerate(PANEL)}
    assert rank_disagreement(reverse) == {"rank_tau": pytest.approx(-1.0), "rmsd_best_invalid": 1.0}
    flat = {n: {"rmsd": 0.1 * i, "validity": 0.0} for i, n in enumerate(PANEL)}
    assert rank_disagreement(flat) == {"rank_tau": 0.0, "rmsd_best_invalid": 1.0}


def test_along_path_is_one_on_the_reaction_coordinate_and_zero_across_it():
    entry = make_entry(7, 0)
    ts = np.array(entry.true_ts)
    vecs = np.linalg.eigh(egh(entry.surface, ts)[2][0])[1]
    assert along_path((entry,), (ts + 0.05 * vecs[:, 0])[None]) == pytest.approx(1.0)
    assert along_path((entry,), (ts - 0.05 * vecs[:, 1])[None]) == pytest.approx(0.0, abs=1e-12)
    assert along_path((entry,), ts[None]) is None  # no error, no direction


@pytest.fixture
def tiny(monkeypatch):
    monkeypatch.setattr(ts_faithful, "ENTRIES", 2)
    monkeypatch.setattr(ts_faithful, "TRAIN_ENTRIES", 8)
    cached = (ts_faithful.cell_entries, ts_faithful.training_split, ts_faithful.trained_mlp, ts_faithful.label_checks)
    for c in cached:
        c.cache_clear()
    yield
    for c in cached:
        c.cache_clear()


def test_synthetic_predictors_and_a_bad_panel(tiny):
    task = TSFaithfulTask()
    entries = ts_faithful.cell_entries("mb3d_coupled", 0)
    biased = np.array(task.solve_cell("mb3d_coupled", 0, "eq_biased").answer["predicted_ts"])
    for e, b in zip(entries, biased):  # exactly EQ_PULL of the way to the nearer minimum
        gap = np.linalg.norm(ts_faithful.nearer_minimum(e) - np.array(e.true_ts))
        assert np.linalg.norm(b - np.array(e.true_ts)) == pytest.approx(ts_faithful.EQ_PULL * gap)
    scores = task.score_cell(task.solve_cell("mb3d_coupled", 0, "eq_biased"))
    # the straight line to a minimum leaves the saddle's eigenvector as the path curves: a share, not 1
    assert 0.0 <= scores["along_path"] <= 1.0 and scores["rank_tau"] is None
    bad = ts_faithful.CellResult(
        solver="panel", setting="mb3d_coupled", seed=0, answer={"panel": {"cineb": []}}, wall_s=0.0
    )
    with pytest.raises(ValueError, match="expected one list of points for each of"):
        task.score_cell(bad)
    flat = ts_faithful.CellResult(
        solver="midpoint", setting="mb3d_coupled", seed=0, answer={"predicted_ts": [[0.0, 0.0]] * 2}, wall_s=0.0
    )
    with pytest.raises(ValueError, match="expected \\(2, 3\\)"):
        task.score_cell(flat)
