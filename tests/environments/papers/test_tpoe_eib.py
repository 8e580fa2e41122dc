"""tpoe_eib_synth_eeg: the synthetic EEG puts its evidence exactly at the stated channels and
segment, the tempered product of Gaussian experts equals its closed form, a closed gate removes its
expert's influence exactly, the KL rate is zero when the posterior is the prior, the audits are exact
on known attributions, the gate-causality and integration audits are exact on a hand-built head with
known gates and experts, and a tiny cell is a pure function of its seed (the audits None for the
post-hoc baselines). Imports torch: run under `flock /tmp/torch.lock`."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from pydantic import ValidationError

from environments.papers import tpoe_eib, tpoe_eib_backbone, tpoe_eib_model
from environments.papers.tpoe_eib import (
    AUDIT_METRICS,
    TPoEEIBTask,
    closed_gate_leak,
    closed_token_input_leak,
    deletion_insertion,
    disagreement_entropy_corr,
    expert_drop,
    gate_causal_drop,
    precision_at_2,
    reliance_prior_accuracy,
)
from environments.papers.tpoe_eib_model import (
    AMPLITUDE,
    CHANNELS,
    PRIOR_PRECISION,
    SAMPLES,
    SEGMENT,
    SEGMENTS,
    TAU,
    build,
    eib_forward,
    hard_concrete,
    head_from_state,
    head_state,
    kl_rate,
    recordings,
    spike_only,
    spike_wave,
    tempered_poe,
    trained_model,
)


@pytest.fixture
def small(monkeypatch):
    monkeypatch.setattr(tpoe_eib_model, "N_TRAIN", 64)
    monkeypatch.setattr(tpoe_eib_model, "N_TEST", 24)
    monkeypatch.setattr(tpoe_eib_backbone, "PRETRAIN_RECORDINGS", 32)
    monkeypatch.setattr(tpoe_eib_backbone, "PRETRAIN_HELD_OUT", 8)
    monkeypatch.setattr(tpoe_eib_backbone, "CACHE_DIR", None)  # no disk cache in tests
    monkeypatch.setattr(tpoe_eib_backbone, "PRETRAIN_STEPS", 4)
    tpoe_eib_model.trained_model.cache_clear()
    tpoe_eib_backbone.pretrained.cache_clear()
    yield
    tpoe_eib_model.trained_model.cache_clear()
    tpoe_eib_backbone.pretrained.cache_clear()


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
            assert np.allclose(by_token[i, c, s], wave) or (
                others.sum() == 0 and np.allclose(by_token[i, c, s], wave + AMPLITUDE * spike_only())
            )


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
    product = product + gaussian_logpdf(
        u, torch.zeros(3, dtype=torch.float64), torch.full((3,), PRIOR_PRECISION, dtype=torch.float64)
    )
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
    kept = lambda xs: np.all(
        np.abs(xs.reshape(4, CHANNELS, SEGMENTS, SEGMENT)).sum(-1)[evidence].reshape(4, 2) > 0, axis=1
    ).astype(float)  # noqa: E731
    deletion, insertion = deletion_insertion(kept, x, evidence.astype(float) + 0.01 * rng.random(evidence.shape))
    step = tpoe_eib.DELETION_CHUNK / (CHANNELS * SEGMENTS)
    assert deletion == pytest.approx(step / 2) and insertion == pytest.approx(1 - step / 2)


def test_a_tiny_cell_is_a_pure_function_of_its_seed_and_scores_through_the_contract(small, monkeypatch):
    monkeypatch.setattr(tpoe_eib_model, "TRAIN_STEPS", 8)
    monkeypatch.setattr(tpoe_eib_model, "IG_STEPS", 2)
    task = TPoEEIBTask()
    for solver in task.solvers:
        first = task.solve_cell("spike_wave", 5, solver)
        tpoe_eib_model.trained_model.cache_clear()
        tpoe_eib_backbone.pretrained.cache_clear()
        assert task.solve_cell("spike_wave", 5, solver).answer == first.answer
        scores = task.score_cell(first)
        assert set(scores) == set(task.metric_names)
        assert 0 <= scores["p_at_2"] <= 1 and 0 <= scores["deletion_auc"] <= 1 and 0 <= scores["balanced_accuracy"] <= 1
        if solver == "tpoe_eib":
            assert all(
                isinstance(scores[m], float)
                for m in ("gate_causal_drop", "expert_drop_top", "expert_drop_random", "expert_drop_gap")
            )
            assert scores["reliance_prior_accuracy"] == 0.5
            assert scores["closed_gate_leak"] in (None, 0.0)
            assert isinstance(scores["backbone_masked_r2"], float)  # the pretraining's held-out reconstruction
            # the record survives JSON bit for bit and is the head that was trained
            net, readout = head_from_state(json.loads(json.dumps(first.answer["head"])))
            assert head_state(net, readout) == first.answer["head"]
            x = torch.from_numpy(recordings(5, "test")[0])
            model = trained_model(5, "eib")
            trained = eib_forward(model.net, model.readout, x, None, backbone=model.backbone)["logit"]
            assert torch.equal(eib_forward(net, readout, x, None, backbone=model.backbone)["logit"], trained)
            eib = first
        else:
            assert "head" not in first.answer
            assert all(scores[m] is None for m in AUDIT_METRICS)  # no gates, experts or posterior
    with pytest.raises(ValueError, match="trained head"):
        task.score_cell(eib.model_copy(update={"answer": {k: v for k, v in eib.answer.items() if k != "head"}}))
    with pytest.raises(ValueError, match="does not fit"):
        task.score_cell(eib.model_copy(update={"answer": {**eib.answer, "head": {"net": {}, "readout": {}}}}))
    with pytest.raises(ValueError, match="token attribution"):
        task.score_cell(first.model_copy(update={"answer": {**first.answer, "attribution": [[0.0]]}}))
    with pytest.raises(ValidationError, match="solver"):
        TPoEEIBTask.Options(solver="gradcam")
    with pytest.raises(ValueError, match="not the one rebuilt"):
        task.score_cell(
            eib.model_copy(update={"answer": {**eib.answer, "backbone": {"checkpoint": None, "fingerprint": "0" * 16}}})
        )
    with pytest.raises(ValueError, match="unknown split 'val'"):
        recordings(0, "val")
    with pytest.raises(ValueError, match="unknown solver 'gradcam'"):
        tpoe_eib_model.kind_for("gradcam")


# A hand-built EIB head whose token network copies a token's first 9 samples to its output: samples
# 0-3 are the expert's mean, 4-7 its raw precision (lambda = softplus + 1e-3), 8 its gate logit
# (+-20: the test-time gate is exactly 1 or 0). Read-out: the class-1 logit = mean[0] + BIAS.
BIAS, OPEN, SHUT = -0.5, 20.0, -20.0


def hand_built_head():
    net, readout = build(torch, 9), torch.nn.Linear(4, 1)
    with torch.no_grad():
        for layer in (net[0], net[2], net[4]):
            layer.weight.zero_()
            layer.bias.zero_()
        net[0].weight[:16, :16] = torch.eye(16)  # relu(s) and relu(-s): their difference is s exactly
        net[0].weight[16:, :16] = -torch.eye(16)
        net[2].weight.copy_(torch.eye(32))
        net[4].weight[:, :9] = torch.eye(9)
        net[4].weight[:, 16:25] = -torch.eye(9)
        readout.weight.copy_(torch.tensor([[1.0, 0.0, 0.0, 0.0]]))
        readout.bias.fill_(BIAS)
    return lambda xs, **kw: eib_forward(net, readout, xs, None, **kw)


def hand_built_recordings(experts):
    """experts: per recording a list of ((channel, segment), mean[0], raw precision, gate logit); every
    other token is shut (gate logit SHUT) with zero mean."""
    x = np.zeros((len(experts), CHANNELS, SAMPLES), dtype=np.float32)
    x[:, :, 8::SEGMENT] = SHUT
    for i, chosen in enumerate(experts):
        for (c, s), mean0, raw, logit in chosen:
            token = np.zeros(SEGMENT, dtype=np.float32)
            token[0], token[4:8], token[8] = mean0, raw, logit
            x[i, c, s * SEGMENT : (s + 1) * SEGMENT] = token
    return torch.from_numpy(x)


def softplus(r):
    return float(np.log1p(np.exp(r))) + 1e-3


def expected_logit(open_experts):
    """The class-1 logit in float64 from (mean[0], raw precision) of the open (gate 1) experts."""
    weights = [softplus(raw) / TAU for _, raw in open_experts]
    return sum(w * m for w, (m, _) in zip(weights, open_experts)) / (PRIOR_PRECISION + sum(weights)) + BIAS


def test_closed_gates_leak_exactly_nothing_and_closing_every_gate_gives_the_priors_prediction():
    forward = hand_built_head()
    x = hand_built_recordings(
        [
            [((0, 0), 2.0, 3.0, OPEN), ((5, 3), -1.0, 20.0, SHUT), ((7, 7), 30.0, 1.0, SHUT)],
            [((2, 1), 0.5, 0.0, OPEN), ((3, 1), 4.0, 2.0, OPEN)],
            [((9, 4), 1.0, 1.0, SHUT)],
        ]
    )
    with torch.no_grad():
        base = forward(x)
        assert int((base["gate"] == 1).sum()) == 3 and int((base["gate"] == 0).sum()) == 3 * CHANNELS * SEGMENTS - 3
        assert closed_gate_leak(forward, x, np.random.default_rng(0)) == 0.0  # exactly
        # the perturbation reached the closed tokens (left to themselves, their gates would open)
        noisy = torch.from_numpy(np.random.default_rng(0).normal(scale=10.0, size=tuple(x.shape)).astype(np.float32))
        assert int((forward(noisy)["gate"] > 0).sum()) > 100

        # a path around the gates (here the recording's mean sample added to the posterior) is caught
        def leaky(xs, **kw):
            out = dict(forward(xs, **kw))
            out["mean"] = out["mean"] + 1e-3 * out["features"].mean((1, 2, 3))[:, None]
            return out

        assert closed_gate_leak(leaky, x, np.random.default_rng(0)) > 1e-4
        # with no backbone the head reads the raw samples: the raw-input cut is exact too
        assert closed_token_input_leak(forward, x, np.random.default_rng(0)) == 0.0
        closed = forward(x, gate=torch.zeros_like(base["gate"]))
        assert torch.equal(closed["mean"], torch.zeros(3, 4)) and torch.equal(closed["logit"], torch.full((3,), BIAS))
    expected = [expected_logit([(2.0, 3.0)]), expected_logit([(0.5, 0.0), (4.0, 2.0)]), BIAS]
    assert base["logit"].numpy() == pytest.approx(expected, rel=1e-6)
    sigmoid = lambda v: 1 / (1 + np.exp(-np.asarray(v)))  # noqa: E731
    drop = gate_causal_drop(forward, x)
    assert drop == pytest.approx(float(np.mean(sigmoid(expected) - sigmoid(BIAS))), rel=1e-5)
    assert gate_causal_drop(forward, x[2:]) == 0.0  # nothing open: nothing to close
    assert (
        closed_gate_leak(
            forward,
            hand_built_recordings([[((c, s), 1.0, 1.0, OPEN) for c in range(CHANNELS) for s in range(SEGMENTS)]]),
            np.random.default_rng(0),
        )
        is None
    )


def test_expert_drop_on_a_known_configuration():
    forward = hand_built_head()
    # recording 0: a precise expert (weight ~10) and a vague one (~2.5), both for class 1, and a shut one
    # with an extreme mean; recording 1: one open expert; recording 2: none open
    x = hand_built_recordings(
        [
            [((4, 2), 1.0, 20.0, OPEN), ((0, 0), 1.0, 5.0, OPEN), ((1, 0), -50.0, 30.0, SHUT)],
            [((6, 6), 3.0, 2.0, OPEN)],
            [((6, 6), 3.0, 2.0, SHUT)],
        ]
    )
    with torch.no_grad():
        top, random, pick = expert_drop(forward, x, np.random.default_rng(1))
    full = expected_logit([(1.0, 5.0), (1.0, 20.0)])
    without_precise, without_vague = full - expected_logit([(1.0, 5.0)]), full - expected_logit([(1.0, 20.0)])
    assert without_precise > without_vague > 0
    precise, vague = 4 * SEGMENTS + 2, 0 * SEGMENTS + 0  # token index = channel x SEGMENTS + segment; the
    # precise expert comes second, so "the first open token" is not the most-weighted
    assert top[0] == pytest.approx(without_precise, rel=1e-5)  # the most-weighted expert is the precise one
    assert random[0] == pytest.approx({precise: without_precise, vague: without_vague}[int(pick[0])], rel=1e-5)
    single = expected_logit([(3.0, 2.0)]) - BIAS  # dropping the only open expert leaves the prior
    assert top[1] == pytest.approx(single, rel=1e-5) and random[1] == top[1] and pick[1] == 6 * SEGMENTS + 6
    assert np.isnan(top[2]) and np.isnan(random[2]) and pick[2] == -1
    picks = {int(expert_drop(forward, x[:1], np.random.default_rng(s))[2][0]) for s in range(12)}
    assert picks == {precise, vague}  # the random expert is drawn among the open ones only


def test_the_read_out_on_the_prior_is_at_chance_where_the_posterior_is_perfect():
    forward = hand_built_head()
    y = np.array([1, 0, 1, 0, 0])
    x = hand_built_recordings(
        [[((i % CHANNELS, i % SEGMENTS), 3.0, 2.0, OPEN if label else SHUT)] for i, label in enumerate(y)]
    )
    with torch.no_grad():
        posterior_prediction = (torch.sigmoid(forward(x)["logit"]) > 0.5).numpy().astype(int)
        assert np.array_equal(posterior_prediction, y)  # the posterior read-out is perfect
        assert reliance_prior_accuracy(forward, x, y) == 0.5  # exactly: one class for every recording


def test_expert_disagreement_is_the_rank_correlation_of_the_spread_and_the_posterior_entropy():
    # 4 recordings with 2 open experts whose means lie d apart and whose posterior is vaguer as d grows,
    # plus one with a single open expert (no spread: left out, though its entropy would break the order)
    d = np.array([0.5, 1.0, 2.0, 3.0])
    mu = np.zeros((5, 3, 2))
    mu[:4, 1, 0] = d
    gate = np.array([[1.0, 1.0, 0.0]] * 4 + [[1.0, 0.0, 0.0]])
    precision = np.array([[4.0, 4.0], [3.0, 3.0], [2.0, 2.5], [1.5, 1.5], [100.0, 100.0]])
    mu[4, 0] = 7.0
    assert disagreement_entropy_corr(mu, gate, precision) == pytest.approx(1.0)
    assert disagreement_entropy_corr(mu, gate, precision[[3, 2, 1, 0, 4]]) == pytest.approx(-1.0)
    # gate-weighted: the far expert of the d = 3 recording barely open (0.01) puts its spread (0.044)
    # second lowest after 0.031 (d = 0.5; the others d^2 / 8 = 0.125, 0.5): ranks (0, 2, 3, 1) against
    # (0, 1, 2, 3), Spearman 1 - 6 x 6 / (4 x 15) = 0.4 (unweighted it would stay 1)
    faint = gate.copy()
    faint[3, 1] = 0.01
    assert disagreement_entropy_corr(mu, faint, precision) == pytest.approx(0.4)
    assert disagreement_entropy_corr(mu[:2], gate[:2], precision[:2]) is None  # fewer than 3 recordings
