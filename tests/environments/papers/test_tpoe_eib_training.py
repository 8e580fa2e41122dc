"""tpoe_eib_synth_eeg training: on a trivially separable configuration (loud evidence) the trained EIB
head on a briefly pretrained, frozen backbone beats chance with its gates open on the evidence, closing its open gates lowers its class-1
probability (the gate-causality audit's positive control), and the annealed penalty schedule is exact.
Regression for the collapse where the rate and L0 penalties, at full weight from step 0, closed
every hard-concrete gate for good and left the head at chance. Imports torch: run under
`flock /tmp/harness-torch.lock`."""

from __future__ import annotations

import numpy as np
import pytest

from environments.papers import tpoe_eib_backbone, tpoe_eib_model
from environments.papers.tpoe_eib import audits, balanced_accuracy
from environments.papers.tpoe_eib_model import explain, penalty_weight, predict_proba, recordings, trained_model


def test_the_penalties_are_off_during_the_warm_up_then_ramp_to_full_weight():
    steps = 800
    assert [penalty_weight(s, steps) for s in (0, 399, 400)] == [0.0, 0.0, 0.0]
    assert penalty_weight(500, steps) == pytest.approx(0.5)
    assert [penalty_weight(s, steps) for s in (600, 799)] == [1.0, 1.0]


@pytest.fixture
def loud(monkeypatch):
    monkeypatch.setattr(tpoe_eib_model, "N_TRAIN", 256)
    monkeypatch.setattr(tpoe_eib_model, "N_TEST", 64)
    monkeypatch.setattr(tpoe_eib_model, "AMPLITUDE", 4.0)
    monkeypatch.setattr(tpoe_eib_model, "TRAIN_STEPS", 240)
    monkeypatch.setattr(tpoe_eib_backbone, "PRETRAIN_RECORDINGS", 256)  # a briefly pretrained backbone
    monkeypatch.setattr(tpoe_eib_backbone, "PRETRAIN_HELD_OUT", 32)
    monkeypatch.setattr(tpoe_eib_backbone, "CACHE_DIR", None)  # no disk cache in tests
    monkeypatch.setattr(tpoe_eib_backbone, "PRETRAIN_STEPS", 100)
    tpoe_eib_model.trained_model.cache_clear()
    tpoe_eib_backbone.pretrained.cache_clear()
    yield
    tpoe_eib_model.trained_model.cache_clear()
    tpoe_eib_backbone.pretrained.cache_clear()


def test_on_loud_evidence_the_eib_head_beats_chance_with_its_gates_on_the_evidence(loud):
    x, y, evidence, _ = recordings(0, "test")
    accuracy = balanced_accuracy(y, (predict_proba("tpoe_eib", 0, x) > 0.5).astype(int))
    weight = explain("tpoe_eib", 0, x[y == 1])  # gate x mean precision per token
    assert accuracy >= 0.8, f"balanced accuracy {accuracy:.3f}: the head did not learn"
    assert np.isfinite(weight).all()
    assert weight[evidence[y == 1]].mean() > 5 * weight[~evidence[y == 1]].mean()  # collapsed gates: 0 > 0
    model = trained_model(0, "eib")
    audit = audits(model.net, model.readout, x, y, 0, backbone=model.backbone)
    assert audit["gate_causal_drop"] > 0, audit  # closing the open gates removes class-1 probability
    assert audit["closed_gate_leak"] == 0.0, audit  # and a closed gate is an exact cut
