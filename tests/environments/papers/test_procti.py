"""procti_synth_imputation: the missingness generators make exactly the stated patterns, no solver
sees what is behind the mask (garbage there gives the same imputation), the prototype bank is a
k-means fixed point of the training series and is built without the test data, retrieval reads
only observed entries, the errors are exact, and one cell scores through the suite contract.
Tiny training budgets keep it fast; run under `flock /tmp/torch.lock` (it imports torch)."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from pydantic import ValidationError

from environments.papers import procti_model as pm
from environments.papers.procti import SETTINGS, ProCTITask, cell_data, impute, imputation_errors
from harness.suite import SampleContext

SEED = 3


@pytest.fixture
def tiny(monkeypatch):
    for name, value in (("N_TRAIN", 48), ("N_TEST", 6), ("TRAIN_STEPS", 5), ("DIFF_STEPS", 8), ("N_SAMPLES", 2)):
        monkeypatch.setattr(pm, name, value)
    pm.train_imputer.cache_clear()
    yield
    pm.train_imputer.cache_clear()


def test_missingness_generators_make_exactly_the_stated_patterns():
    rng = np.random.default_rng(0)
    random = pm.missing_mask("random", 200, rng)
    assert (random.sum(axis=(1, 2)) == pm.CHANNELS * pm.LENGTH // 2).all()  # exactly half of every series
    assert random.any(axis=0).all() and (~random).any(axis=0).all()  # any entry may be hidden or seen
    attribute = pm.missing_mask("attribute", 50, rng)
    per_channel = attribute.sum(axis=2)
    assert set(np.unique(per_channel)) == {0, pm.LENGTH}  # a channel is wholly observed or wholly missing
    assert ((per_channel == 0).sum(axis=1) == pm.ATTR_MISSING).all()
    with pytest.raises(ValueError, match="pattern must be 'random' or 'attribute'"):
        pm.missing_mask("blocks", 2, rng)  # type: ignore[arg-type]
    for setting in SETTINGS:  # a cell's mask is a function of its seed
        assert np.array_equal(cell_data(setting, 1)[1], cell_data(setting, 1)[1])


@pytest.mark.parametrize("solver", ProCTITask.solvers)
def test_no_solver_sees_the_hidden_values(tiny, solver):
    truth, mask = cell_data("attribute" if solver in ("knn", "procti") else "random", SEED)
    with_nan = impute(solver, np.where(mask, truth, np.nan), mask, SEED)
    with_garbage = impute(solver, np.where(mask, truth, 1e6), mask, SEED)
    assert np.array_equal(with_nan, with_garbage)  # also: deterministic per seed
    assert np.array_equal(with_nan[mask], truth[mask]) and np.isfinite(with_nan).all()
    assert np.abs(with_nan[~mask]).max() < 100  # the garbage did not leak into the imputation


def test_prototype_bank_is_a_kmeans_fixed_point_of_the_training_series_only(tiny, monkeypatch):
    real = pm.regime_series

    def train_only(seed, split):
        assert split == "train", "the bank or the imputer read the test series"
        return real(seed, split)

    monkeypatch.setattr(pm, "regime_series", train_only)
    model = pm.train_imputer(SEED, use_prototypes=True)
    train = real(SEED, "train")
    z = ((train - model.mean) / model.std).reshape(len(train), -1)
    bank = model.bank.reshape(pm.BANK_SIZE, -1)
    nearest = ((z[:, None] - bank[None]) ** 2).sum(-1).argmin(1)
    for m in np.unique(nearest):
        assert np.allclose(bank[m], z[nearest == m].mean(0), atol=1e-12)
    assert pm.train_imputer(SEED, use_prototypes=False).bank is None


def test_retrieval_reads_only_observed_entries_and_averages_the_top3():
    rng = np.random.default_rng(1)
    bank = rng.normal(size=(pm.BANK_SIZE, pm.CHANNELS, pm.LENGTH))
    values = bank[[4, 9]] + 0.01 * rng.normal(size=(2, pm.CHANNELS, pm.LENGTH))
    mask = pm.missing_mask("attribute", 2, rng)
    got = pm.retrieve(values, mask, bank)
    assert np.array_equal(got, pm.retrieve(np.where(mask, values, -1e6), mask, bank))
    # the nearest prototype carries the most weight, and the result is a convex mix of the top 3
    assert np.abs(got - bank[[4, 9]]).mean() < np.abs(got - bank[[9, 4]]).mean()
    same = np.repeat(bank[:1], pm.BANK_SIZE, axis=0)
    assert np.allclose(pm.retrieve(values, mask, same), bank[0], atol=1e-12)


def test_errors_are_exact_on_known_imputations():
    truth = np.zeros((1, 2, 4))
    mask = np.array([[[True, False, True, False], [True, True, True, True]]])
    imputed = truth.copy()
    imputed[0, 0, 1], imputed[0, 0, 3], imputed[0, 1, 0] = 1.0, -3.0, 50.0  # the observed error is not counted
    scores = imputation_errors(imputed, truth, mask)
    assert scores["mae"] == 2.0 and scores["rmse"] == pytest.approx(5 ** 0.5) and scores["log_mae"] == pytest.approx(np.log(2))


def test_one_cell_scores_through_the_suite_contract(tiny):
    suite = ProCTITask(ProCTITask.Options(solver="procti", seeds=1))
    samples = suite.load_samples(None)
    assert [s.id for s in samples] == ["random/seed000", "attribute/seed000"]
    outcome = asyncio.run(suite.run_sample(samples[1], SampleContext({}, 0, {})))
    assert not outcome.errors and set(outcome.scores) == {"mae", "rmse", "log_mae"}
    assert 0 < outcome.scores["mae"] < 5
    result = suite.solve_cell("attribute", 0, "mean")
    with pytest.raises(ValueError, match="imputed must be"):
        suite.score_cell(result.model_copy(update={"answer": {"imputed": [[0.0]]}}))
    with pytest.raises(ValidationError):
        ProCTITask.Options(solver="csdi")
    with pytest.raises(ValueError, match="solver must be one of"):
        impute("csdi", *cell_data("random", 0), 0)
