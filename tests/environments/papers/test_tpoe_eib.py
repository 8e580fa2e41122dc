"""tpoe_eib_synth_eeg: the synthetic EEG puts its evidence exactly at the stated channels and
segment, the tempered product of Gaussian experts equals its closed form, a closed gate removes its
expert's influence exactly, the KL rate is zero when the posterior is the prior, the audits are exact
on known attributions, and a tiny cell is a pure function of its seed. Imports torch: run under
`flock /tmp/torch.lock`."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from pydantic import ValidationError

from environments.papers import tpoe_eib, tpoe_eib_model
from environments.papers.tpoe_eib import TPoEEIBTask, deletion_insertion, precision_at_2
from environments.papers.tpoe_eib_model import (
    AMPLITUDE, CHANNELS, PRIOR_PRECISION, SEGMENT, SEGMENTS, TAU, hard_concrete, kl_rate, recordings, spike_only,
    spike_wave, tempered_poe,
)


@pytest.fixture
def small(monkeypatch):
    monkeypatch.setattr(tpoe_eib_model, "N_TRAIN", 64)
    monkeypatch.setattr(tpoe_eib_model, "N_TEST", 24)


def test_the_evidence_is_exactly_at_the_stated_channels_and_segment(small):
    x, y, evidence, clean = recordings(3, "train")
    assert np.array_equal(x, recordings(3, "train")[0]) and not np.array_equal(x, recordings(4, "train")[0])
    assert np.all(evidence[y == 0].sum(axis=(1, 2)) == 0)
    for i in np.flatnonzero(y == 1):
        channels, segments = np.nonzero(evidence[i])
        assert len(channels) == 2 and channels[1] == channels[0] + 1 and segments[0] == segments[1]
    by_token = clean.reshape(len(x), CHANNELS, SEGMENTS, SEGMENT)
    for i in range(len(x)):
        touched = np.abs(by_token[i]).sum(-1) > 0
        others = touched & ~evidence[i]
        assert others.sum() <= 1  # the single distractor, unless it fell on an evidence token
        for c, s in zip(*np.nonzero(others)):
            assert np.allclose(by_token[i, c, s], AMPLITUDE * spike_only())
        for c, s in zip(*np.nonzero(evidence[i])):
            wave = AMPLITUDE * spike_wave()
            assert np.allclose(by_token[i, c, s], wave) or (others.sum() == 0 and np.allclose(by_token[i, c, s], wave + AMPLITUDE * spike_only()))


def gaussian_logpdf(u, mean, precision):
    return (0.5 * torch.log(precision / (2 * np.pi)) - 0.5 * precision * (u - mean) ** 2).sum(-1)


def test_the_tempered_product_of_experts_equals_its_closed_form():
    g = torch.Generator().manual_seed(0)
    mu = torch.randn(6, 3, generator=g, dtype=torch.float64)
    lam = torch.rand(6, 3, generator=g, dtype=torch.float64) + 0.2
    gate = torch.tensor([1.0, 0.0, 0.3, 1.0, 0.7, 0.0], dtype=torch.float64)
    mean, precision = tempered_poe(mu, lam, gate)
    u = torch.randn(50, 3, generator=g, dtype=torch.float64)
    product = sum(gate[i] / TAU * gaussian_logpdf(u, mu[i], lam[i]) for i in range(6))
    product = product + gaussian_logpdf(u, torch.zeros(3, dtype=torch.float64), torch.full((3,), PRIOR_PRECISION, dtype=torch.float64))
    gap = product - gaussian_logpdf(u, mean, precision)  # log densities differ by the normaliser only
    assert float(gap.max() - gap.min()) < 1e-10


def test_a_closed_gate_removes_its_experts_influence_exactly():
    g = torch.Generator().manual_seed(1)
    mu, lam = torch.randn(2, 5, 4, generator=g), torch.rand(2, 5, 4, generator=g) + 0.1
    gate = torch.tensor([[1.0, 0.4, 0.0, 0.9, 0.0], [0.0, 1.0, 1.0, 0.2, 0.0]])
    base = tempered_poe(mu, lam, gate)
    wild_mu, wild_lam = mu.clone(), lam.clone()
    wild_mu[gate == 0], wild_lam[gate == 0] = 1e6, 1e6
    wild = tempered_poe(wild_mu, wild_lam, gate)
    assert all(torch.equal(a, b) for a, b in zip(base, wild))  # bit for bit
    dropped = tempered_poe(mu[0, [0, 1, 3]], lam[0, [0, 1, 3]], gate[0, [0, 1, 3]])
    assert all(torch.allclose(a[0], b, atol=1e-6) for a, b in zip(base, dropped))
    assert float(hard_concrete(torch.tensor([-10.0]), None)) == 0.0  # test-time gates reach exact zeros
    assert float(hard_concrete(torch.tensor([10.0]), None)) == 1.0


def test_the_kl_rate_is_zero_exactly_when_the_posterior_is_the_prior():
    mu, lam = torch.randn(3, 8, 4), torch.rand(3, 8, 4) + 0.1
    mean, precision = tempered_poe(mu, lam, torch.zeros(3, 8))
    assert torch.equal(mean, torch.zeros(3, 4)) and torch.equal(precision, torch.full((3, 4), PRIOR_PRECISION))
    assert torch.equal(kl_rate(mean, precision), torch.zeros(3))
    assert torch.all(kl_rate(*tempered_poe(mu, lam, torch.ones(3, 8))) > 0)


def test_the_audits_are_exact_on_known_attributions():
    rng = np.random.default_rng(0)
    evidence = np.zeros((4, CHANNELS, SEGMENTS), dtype=bool)
    evidence[np.arange(4), [0, 3, 5, 14], [1, 7, 0, 2]] = True
    evidence[np.arange(4), [1, 4, 6, 15], [1, 7, 0, 2]] = True
    assert precision_at_2(evidence.astype(float), evidence) == 1.0
    assert precision_at_2(1.0 - evidence, evidence) == 0.0
    x = rng.normal(size=(4, CHANNELS, SEGMENTS * SEGMENT)).astype(np.float32) + 5.0
    kept = lambda xs: np.all(np.abs(xs.reshape(4, CHANNELS, SEGMENTS, SEGMENT)).sum(-1)[evidence].reshape(4, 2) > 0, axis=1).astype(float)  # noqa: E731
    deletion, insertion = deletion_insertion(kept, x, evidence.astype(float) + 0.01 * rng.random(evidence.shape))
    step = tpoe_eib.DELETION_CHUNK / (CHANNELS * SEGMENTS)
    assert deletion == pytest.approx(step / 2) and insertion == pytest.approx(1 - step / 2)


def test_a_tiny_cell_is_a_pure_function_of_its_seed_and_scores_through_the_contract(small, monkeypatch):
    monkeypatch.setattr(tpoe_eib_model, "TRAIN_STEPS", 8)
    monkeypatch.setattr(tpoe_eib_model, "IG_STEPS", 2)
    tpoe_eib_model.trained_head.cache_clear()
    try:
        task = TPoEEIBTask()
        for solver in task.solvers:
            first = task.solve_cell("spike_wave", 5, solver)
            tpoe_eib_model.trained_head.cache_clear()
            assert task.solve_cell("spike_wave", 5, solver).answer == first.answer
            scores = task.score_cell(first)
            assert set(scores) == set(task.metric_names)
            assert 0 <= scores["p_at_2"] <= 1 and 0 <= scores["deletion_auc"] <= 1 and 0 <= scores["balanced_accuracy"] <= 1
        with pytest.raises(ValueError, match="token attribution"):
            task.score_cell(first.model_copy(update={"answer": {**first.answer, "attribution": [[0.0]]}}))
        with pytest.raises(ValidationError, match="solver"):
            TPoEEIBTask.Options(solver="gradcam")
        with pytest.raises(ValueError, match="unknown split 'val'"):
            recordings(0, "val")
    finally:
        tpoe_eib_model.trained_head.cache_clear()
