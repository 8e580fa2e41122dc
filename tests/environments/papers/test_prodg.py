"""prodg_digits_prototypes: the method is built from the frozen classifier's weights alone (the data
loader can raise and it runs unchanged; the same weights give the same prototypes, other weights
other ones) and leaves the classifier unchanged; the BN-statistics loss vanishes exactly on matching
statistics; the nearest-prototype explanation, the class mean and the class medoid are exact on
cases built for them; one cell scores through the suite contract. Tiny training budgets keep it
fast; run under `flock /tmp/harness-torch.lock` (it imports torch)."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from environments.papers import prodg_model as pm
from environments.papers.prodg import ProDGTask
from environments.papers.prodg_model import (
    CLASSES,
    SIDE,
    BNStatLoss,
    class_mean_prototypes,
    class_medoid_prototypes,
    digits_split,
    frozen_classifier,
    nearest_prototype_agreement,
    prototype_metrics,
)
from harness.suite import SampleContext

SEED = 11  # a seed no other test trains a classifier for (the classifier is cached per seed)
TINY = (("CLF_EPOCHS", 1), ("GEN_STEPS", 4), ("GEN_BATCH", 8), ("DIRECT_STEPS", 4), ("DI_PER_CLASS", 2),
        ("PROTO_SAMPLES", 4))  # fmt: skip


@pytest.fixture
def tiny(monkeypatch):
    for name, value in TINY:
        monkeypatch.setattr(pm, name, value)
    frozen_classifier.cache_clear()
    yield frozen_classifier(SEED)
    frozen_classifier.cache_clear()


def state_of(model):
    return {k: v.clone() for k, v in model.state_dict().items()}


def test_the_data_free_arms_read_only_the_frozen_weights_and_leave_them_unchanged(tiny, monkeypatch):
    import copy

    import torch

    before = state_of(tiny)
    clean = ProDGTask().solve_cell("digits16", SEED, "prodg").answer

    def no_data(seed):
        raise AssertionError("a data-free solver read the digits")

    monkeypatch.setattr(pm, "digits_split", no_data)
    for solver in ("prodg", "activation_max", "deep_inversion"):
        result = ProDGTask().solve_cell("digits16", SEED, solver)
        assert np.asarray(result.answer["prototypes"]).shape == (CLASSES, SIDE, SIDE)
    assert ProDGTask().solve_cell("digits16", SEED, "prodg").answer == clean  # deterministic, and data-free
    for oracle in ("class_mean", "class_medoid"):  # the data-based arms do read it: the guard bites
        with pytest.raises(AssertionError, match="read the digits"):
            ProDGTask().solve_cell("digits16", SEED, oracle)
    after = state_of(tiny)
    assert all(torch.equal(before[k], after[k]) for k in before)  # weights and BN running stats untouched
    assert not any(m._forward_hooks for m in tiny.modules())  # no hooks left on the shared model
    # The generator is a function of the weights: a copy gives the same prototypes, other weights others.
    same = pm.prodg_prototypes(copy.deepcopy(tiny), SEED)
    np.testing.assert_allclose(same, clean["prototypes"], atol=1e-6)  # the answer is rounded to 6 decimals
    other = copy.deepcopy(tiny)
    other[-1].weight.mul_(-1.0)  # flip the read-out: every class's evidence reversed
    assert not np.allclose(pm.prodg_prototypes(other, SEED), same, atol=1e-4)


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


def test_nearest_prototype_explanation_agrees_exactly_on_a_built_case():
    rng = np.random.default_rng(0)
    protos = 10.0 * np.eye(CLASSES, 32)  # class k's prototype far out on axis k
    classes = np.arange(200) % CLASSES
    query = protos[classes] + rng.normal(0, 0.5, (200, 32))  # each query close to its own class's prototype
    assert nearest_prototype_agreement(query, protos, classes) == 1.0
    disagree = classes.copy()
    disagree[:30] = (disagree[:30] + 1) % CLASSES  # the "classifier" predicts another class on 30 of 200
    assert nearest_prototype_agreement(query, protos, disagree) == 170 / 200


def test_class_mean_is_numpys_mean_and_the_medoid_is_the_most_central_real_member():
    x_train, y_train, _, _ = digits_split(0)
    assert x_train.shape[1:] == (SIDE, SIDE) and 0.0 <= x_train.min() and x_train.max() <= 1.0
    means = class_mean_prototypes(x_train, y_train)
    for k in range(CLASSES):
        assert np.array_equal(means[k], np.mean(x_train[y_train == k], axis=0))
    # Features on a line: class k's members sit at 0, 1, 2, 3, 10 (plus 100 k); the summed
    # distances are 16, 13, 12, 13, 40, so the medoid is the member at 2.
    y = np.repeat(np.arange(CLASSES), 5)
    feats = (np.tile([0.0, 1.0, 2.0, 3.0, 10.0], CLASSES) + 100.0 * y)[:, None]
    images = np.arange(len(y), dtype=np.float32)[:, None, None] * np.ones((1, SIDE, SIDE), np.float32)
    medoids = class_medoid_prototypes(images, y, feats)
    assert [float(m[0, 0]) for m in medoids] == [5.0 * k + 2 for k in range(CLASSES)]


def test_metrics_are_exact_on_known_prototypes():
    _, _, x_test, y_test = digits_split(0)
    truth = np.stack([x_test[y_test == k].mean(axis=0) for k in range(CLASSES)])
    onehot = np.eye(CLASSES)
    flat = x_test.reshape(len(x_test), -1).astype(np.float64)
    nearest = ((flat[:, None, :] - truth.reshape(1, CLASSES, -1)) ** 2).sum(2).argmin(1)
    scores = prototype_metrics(truth, onehot, x_test, y_test, nearest, feat_protos=truth, feat_test=x_test)
    assert scores == {"explanation_agreement": 1.0, "fidelity": 1.0, "confidence": 1.0,
                      "correlation": pytest.approx(1.0, abs=1e-6)}  # fmt: skip
    flipped = prototype_metrics(1.0 - truth, onehot * 0.5, x_test, y_test, nearest, feat_protos=truth, feat_test=x_test)
    assert flipped["correlation"] == pytest.approx(-1.0, abs=1e-6) and flipped["confidence"] == 0.5
    assert flipped["explanation_agreement"] == 1.0  # the explanation reads the features, not the pixels


def test_one_cell_scores_through_the_suite_contract(tiny):
    suite = ProDGTask(ProDGTask.Options(solver="class_medoid", seeds=SEED + 1))
    sample = suite.load_samples(None)[SEED]
    outcome = asyncio.run(suite.run_sample(sample, SampleContext({}, SEED, {})))
    scores = outcome.scores
    assert set(scores) == {"explanation_agreement", "fidelity", "confidence", "correlation", "classifier_accuracy"}
    assert all(0.0 <= scores[m] <= 1.0 for m in ("explanation_agreement", "fidelity", "confidence"))
    assert 0.1 < scores["classifier_accuracy"] <= 1.0
    with pytest.raises(ValueError, match="prototypes must be 10 finite 16x16"):
        bad = suite.solve_cell("digits16", SEED, "class_mean").model_copy(update={"answer": {"prototypes": [[0.0]]}})
        suite.score_cell(bad)
