"""tpoe_eib_synth_eeg's backbone: pretrained on other tasks' EEG (no spike-wave), frozen for the heads
(no gradient reaches it, its parameters stay bit for bit), while the fine-tuned baseline trains its own
copy; a checkpoint of another shape is one error naming the option. Imports torch: run under
`flock /tmp/harness-torch.lock`."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from environments.papers import tpoe_eib_backbone, tpoe_eib_model
from environments.papers.tpoe_eib_backbone import (
    EVENTS,
    backbone_class,
    event_shape,
    fingerprint,
    load_backbone,
    pretrained,
    pretraining_recordings,
    save_backbone,
)
from environments.papers.tpoe_eib_model import SEGMENT, eib_forward, recordings, spike_wave, trained_model


@pytest.fixture
def tiny(monkeypatch):
    for module, name, value in (
        (tpoe_eib_model, "N_TRAIN", 48),
        (tpoe_eib_model, "N_TEST", 16),
        (tpoe_eib_model, "TRAIN_STEPS", 6),
        (tpoe_eib_backbone, "PRETRAIN_RECORDINGS", 32),
        (tpoe_eib_backbone, "PRETRAIN_HELD_OUT", 8),
        (tpoe_eib_backbone, "PRETRAIN_STEPS", 3),
        (tpoe_eib_backbone, "CACHE_DIR", None),  # no disk cache in tests
    ):
        monkeypatch.setattr(module, name, value)
    tpoe_eib_model.trained_model.cache_clear()
    pretrained.cache_clear()
    yield
    tpoe_eib_model.trained_model.cache_clear()
    pretrained.cache_clear()


def test_the_pretraining_corpus_holds_other_events_only():
    rng = np.random.default_rng(0)
    assert "spike_wave" not in EVENTS
    for kind in EVENTS:
        wave, _ = event_shape(kind, rng)
        assert wave.shape == (SEGMENT,) and not np.allclose(wave, spike_wave())
    with pytest.raises(ValueError, match="unknown pretraining event 'spike_wave'"):
        event_shape("spike_wave", rng)
    assert np.array_equal(pretraining_recordings(1, 4), pretraining_recordings(1, 4))


def test_the_frozen_backbone_gets_no_gradient_and_the_fine_tuned_copy_moves(tiny):
    backbone, info = pretrained(2)
    before = fingerprint(backbone)
    assert set(info) == {"masked_mse", "token_variance", "masked_r2"}
    # the EIB head's loss taken through the frozen backbone: gradients reach the head, none the backbone
    net, readout = tpoe_eib_model.build(torch, 2 * tpoe_eib_model.K + 1, tpoe_eib_model.WIDTH), torch.nn.Linear(4, 1)
    x = torch.from_numpy(recordings(2, "train")[0][:8])
    eib_forward(net, readout, x, torch.Generator().manual_seed(0), backbone=backbone)["logit"].sum().backward()
    assert all(p.grad is None for p in backbone.parameters())
    assert all(p.grad is not None for p in net.parameters())
    for kind in ("eib", "plain", "probe"):
        assert trained_model(2, kind).backbone is backbone  # the heads read the very pretrained backbone
    tuned = trained_model(2, "fine_tuned").backbone
    assert tuned is not backbone and fingerprint(tuned) != before  # fine-tuning moved its own copy
    assert fingerprint(backbone) == before  # and left the shared one bit for bit
    with pytest.raises(ValueError, match="unknown model 'gradcam'"):
        trained_model(2, "gradcam")


def test_a_backbone_checkpoint_of_another_shape_is_one_error_naming_the_option(tiny, tmp_path, monkeypatch):
    good = tmp_path / "good.pt"
    save_backbone(pretrained(3)[0], good)
    assert fingerprint(load_backbone(str(good))) == fingerprint(pretrained(3)[0])
    monkeypatch.setattr(tpoe_eib_model, "WIDTH", 8)  # a backbone of another width
    monkeypatch.setattr(tpoe_eib_backbone, "WIDTH", 8)
    other = tmp_path / "other.pt"
    save_backbone(backbone_class()(), other)
    monkeypatch.undo()
    with pytest.raises(ValueError, match="backbone_checkpoint .*other.pt.* does not fit the backbone"):
        load_backbone(str(other))
    with pytest.raises(ValueError, match="backbone_checkpoint .*missing.pt.* is not a file"):
        load_backbone(str(tmp_path / "missing.pt"))
