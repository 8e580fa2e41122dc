"""prodg_digits_prototypes: the method never touches the data (only the frozen classifier), leaves
the classifier unchanged, the BN-statistics loss vanishes exactly on matching statistics, the
metrics are exact on known prototypes, and one cell scores through the suite contract. Tiny
training budgets keep it fast; run under `flock /tmp/torch.lock` (it imports torch)."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from environments.papers import prodg
from environments.papers.prodg import (
    CLASSES, BNStatLoss, ProDGTask, digits_split, frozen_classifier, prototype_metrics,
)
from harness.suite import SampleContext

SEED = 11  # a seed no other test trains a classifier for (the classifier is cached per seed)


@pytest.fixture
def tiny(monkeypatch):
    for name, value in (("CLF_EPOCHS", 2), ("GEN_STEPS", 15), ("DIRECT_STEPS", 15), ("PROTO_SAMPLES", 8)):
        monkeypatch.setattr(prodg, name, value)
    frozen_classifier.cache_clear()
    yield frozen_classifier(SEED)
    frozen_classifier.cache_clear()


def state_of(model):
    return {k: v.clone() for k, v in model.state_dict().items()}


def test_the_method_never_touches_the_data_and_leaves_the_classifier_frozen(tiny, monkeypatch):
    import torch

    before = state_of(tiny)
    clean = ProDGTask().solve_cell("digits", SEED, "prodg").answer

    def no_data(seed):
        raise AssertionError("a data-free solver read the digits")

    monkeypatch.setattr(prodg, "digits_split", no_data)
    for solver in ("prodg", "activation_max", "deep_inversion"):
        result = ProDGTask().solve_cell("digits", SEED, solver)
        assert np.asarray(result.answer["prototypes"]).shape == (CLASSES, 8, 8)
    assert ProDGTask().solve_cell("digits", SEED, "prodg").answer == clean  # deterministic, and data-free
    with pytest.raises(AssertionError, match="read the digits"):
        ProDGTask().solve_cell("digits", SEED, "class_mean")  # the oracle does read it: the guard bites
    after = state_of(tiny)
    assert all(torch.equal(before[k], after[k]) for k in before)  # weights and BN running stats untouched
    assert not any(m._forward_hooks for m in tiny.modules())  # no hooks left on the shared model


def test_bn_statistics_loss_is_zero_exactly_when_the_batch_matches_the_running_statistics():
    import torch

    bn = torch.nn.BatchNorm2d(3).eval()
    x = torch.randn(16, 3, 4, 4, generator=torch.Generator().manual_seed(0))
    bn.running_mean.copy_(x.mean(dim=(0, 2, 3)))
    bn.running_var.copy_(x.var(dim=(0, 2, 3), unbiased=False))
    loss = BNStatLoss(bn)
    bn(x)
    assert float(loss.take()) < 1e-10
    bn(x + 1.0)  # every channel mean off by exactly 1
    assert abs(float(loss.take()) - 3.0) < 1e-5
    loss.close()
    assert not bn._forward_hooks


def test_metrics_are_exact_on_known_prototypes():
    _, _, x_test, y_test = digits_split(0)
    truth = np.stack([x_test[y_test == k].mean(axis=0) for k in range(CLASSES)])
    onehot = np.eye(CLASSES)
    nearest = ((x_test.reshape(len(x_test), 1, -1) - truth.reshape(1, CLASSES, -1)) ** 2).sum(2).argmin(1)
    scores = prototype_metrics(truth, onehot, x_test, y_test, predicted=nearest)
    assert scores == {"confidence": 1.0, "correlation": pytest.approx(1.0, abs=1e-6), "fidelity": 1.0}
    flipped = prototype_metrics(1.0 - truth, onehot * 0.5, x_test, y_test, predicted=nearest)
    assert flipped["correlation"] == pytest.approx(-1.0, abs=1e-6) and flipped["confidence"] == 0.5


def test_one_cell_scores_through_the_suite_contract(tiny):
    suite = ProDGTask(ProDGTask.Options(solver="activation_max", seeds=SEED + 1))
    sample = suite.load_samples(None)[SEED]
    outcome = asyncio.run(suite.run_sample(sample, SampleContext({}, SEED, {})))
    scores = outcome.scores
    assert set(scores) == {"correlation", "fidelity", "confidence", "classifier_accuracy"}
    assert 0.0 <= scores["fidelity"] <= 1.0 and -1.0 <= scores["correlation"] <= 1.0
    assert 0.5 < scores["classifier_accuracy"] <= 1.0
    with pytest.raises(ValueError, match="prototypes must be 10 finite 8x8"):
        suite.score_cell(suite.solve_cell("digits", SEED, "class_mean").model_copy(update={"answer": {"prototypes": [[0.0]]}}))
