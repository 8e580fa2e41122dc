"""qec_precision_pyramid: MWPM corrects every single fault (d=3), the quantisers keep their grids,
the hand-written gradients are the true ones, the bit-op and latency accounting on a hand-computed
network, the registered architectures' low-bit share, early stopping, and a tiny cell through the
suite contract (a pure function of its seed that never reads the test flips)."""

from __future__ import annotations

import asyncio

import numpy as np
import pydantic
import pytest

from environments.papers import qec_hardware, qec_neural, qec_pyramid
from environments.papers.qec_neural import binarise, forward, gradients, quantise_activation
from environments.papers.qec_pyramid import (
    QECPyramidTask,
    Setting,
    circuit,
    classical_predictions,
    pack,
    unpack,
    wilson,
)
from harness.suite import SampleContext


def single_faults(dem):
    """(detector syndrome, observable flips) of every error mechanism of a detector error model."""
    for inst in dem.flattened():
        if inst.type != "error":
            continue
        syndrome, flips = np.zeros(dem.num_detectors, dtype=bool), np.zeros(dem.num_observables, dtype=bool)
        for t in inst.targets_copy():
            if t.is_relative_detector_id():
                syndrome[t.val] ^= True
            elif t.is_logical_observable_id():
                flips[t.val] ^= True
        yield syndrome, flips


def test_mwpm_corrects_every_single_fault_of_the_distance_3_code():
    faults = list(single_faults(circuit("d3_p006").detector_error_model(decompose_errors=True)))
    assert len(faults) > 100 and any(f.any() for _, f in faults)
    syndromes = np.array([s for s, _ in faults])
    assert np.array_equal(classical_predictions("d3_p006", 0, "mwpm", syndromes), np.array([f for _, f in faults]))


@pytest.mark.parametrize("bits", [1, 2, 4, 8])
def test_activation_quantiser_grid(bits):
    q = quantise_activation(np.linspace(-3, 3, 20_001), bits)
    n = 2**bits
    grid = (2 * np.arange(n) + 1 - n) / (n - 1)
    assert np.array_equal(np.unique(q), grid) and np.all(np.diff(q) >= 0)
    assert np.array_equal(quantise_activation(grid, bits), grid)


def test_one_bit_is_sign_and_weights_are_plus_minus_the_mean_magnitude():
    x = np.random.default_rng(0).normal(size=1000)
    x[:5] = 0.0
    assert np.array_equal(quantise_activation(x, 1), np.where(x >= 0, 1.0, -1.0))
    w = np.random.default_rng(1).normal(size=(7, 5))
    assert np.allclose(np.abs(binarise(w)), np.abs(w).mean(axis=0, keepdims=True))
    assert np.array_equal(np.sign(binarise(w)), np.where(w >= 0, 1.0, -1.0))


def test_gradients_of_a_two_output_float_network_match_finite_differences():
    rng = np.random.default_rng(2)
    params = [(rng.normal(0, 0.3, (4, 3)), rng.normal(0, 0.1, 3)), (rng.normal(0, 0.3, (3, 2)), rng.normal(0, 0.1, 2))]
    x, y = rng.normal(size=(6, 4)), rng.integers(0, 2, (6, 2)).astype(float)
    grads = gradients(params, x, y, (None,), False)
    eps = 1e-6
    for layer in range(2):
        for j in range(2):
            flat = params[layer][j].ravel()
            for k in range(flat.size):
                flat[k] += eps
                up = qec_neural.loss(params, x, y, (None,), False)
                flat[k] -= 2 * eps
                down = qec_neural.loss(params, x, y, (None,), False)
                flat[k] += eps
                assert abs((up - down) / (2 * eps) - grads[layer][j].ravel()[k]) < 1e-6


def test_bit_ops_share_and_latency_of_a_hand_computed_network():
    # 3 detector bits -> 4 units (2-bit) -> 2 units (8-bit) -> 1 output, binary weights.
    layers = qec_hardware.stages(3, (4, 2), 1, (2, 8))
    assert [s.bit_ops for s in layers] == [3 * 4 * 1, 4 * 2 * 2, 2 * 1 * 8]
    assert qec_hardware.low_bit_share(layers) == pytest.approx(28 / 44)
    # LUT trees ceil(log6 3) = 1 and ceil(log6 8) = 2, an adder tree ceil(log2 2) + 1 = 2; +1 each.
    assert [s.cycles for s in layers] == [2, 3, 3] and qec_hardware.latency_ns(layers) == 8 * qec_hardware.CLOCK_NS
    floating = qec_hardware.stages(3, (4, 2), 1, (None, None))
    assert floating[0].bit_ops == 3 * 4 * 32 and qec_hardware.low_bit_share(floating) == 0.0
    with pytest.raises(ValueError, match="activation bits"):
        qec_hardware.stages(3, (4, 2), 1, (2,))


@pytest.mark.parametrize("setting", list(qec_pyramid.SETTINGS))
def test_the_registered_pyramids_put_over_99_percent_of_bit_ops_in_low_bit_stages(setting):
    share = {s: qec_pyramid.hardware(setting, s)["low_bit_share"] for s in ("pyramid", "int8", "int2")}
    assert share["pyramid"] > 0.99 and share["int2"] == 1.0 and share["int8"] < 0.2
    assert qec_pyramid.hardware(setting, "pyramid")["latency_model_ns"] < 1000


def test_training_stops_on_the_validation_rule_and_keeps_the_best_epoch():
    rng = np.random.default_rng(3)
    x = rng.integers(0, 2, (4096, 6)).astype(np.float32)
    y = (x[:, :1] != x[:, 1:2]).astype(np.float32)  # XOR of two inputs
    start = qec_neural.initial((6, 16, 8, 1), np.random.default_rng(4))
    trained = qec_neural.train((x, y), (x[:1024], y[:1024]), (None, None), False, 40, 1e-2, 0, start)
    assert trained.converged and trained.epochs < 40
    assert trained.valid_loss == pytest.approx(qec_neural.loss(trained.params, x[:1024], y[:1024], (None, None), False))
    capped = qec_neural.train((x, y), (x[:1024], y[:1024]), (None, None), False, 1, 1e-2, 0, start)
    assert capped.epochs == 1 and not capped.converged


def test_wilson_interval_and_packing():
    low, high = wilson(24, 1000)
    assert abs(low - 0.01614) < 1e-4 and abs(high - 0.03553) < 1e-4
    bits = np.random.default_rng(3).integers(0, 2, (101, 3)).astype(bool)
    assert np.array_equal(unpack(pack(bits), (101, 3)), bits)


@pytest.fixture
def tiny(monkeypatch):
    monkeypatch.setattr(
        qec_pyramid,
        "SETTINGS",
        {
            "d3_p006": Setting("surface", 3, 0.006, (8, 8, 4, 2), 2048, 4000),
            "d5_p006": Setting("surface", 5, 0.006, (8, 8, 4, 2), 2048, 2000),
            "bb72_p03": Setting("bb72", 6, 0.03, (8, 8, 4, 4), 2048, 60),
        },
    )
    monkeypatch.setattr(qec_pyramid, "N_VALID", 1024)
    monkeypatch.setattr(qec_pyramid, "LATENCY_SYNDROMES", 2)
    monkeypatch.setattr(qec_pyramid, "BUDGET", qec_neural.Budget(float_epochs=1, qat_epochs=1))
    for cached in (qec_pyramid.float_decoder, qec_pyramid.held_out_shots):
        cached.cache_clear()
    yield
    for cached in (qec_pyramid.float_decoder, qec_pyramid.held_out_shots):
        cached.cache_clear()


def test_a_tiny_cell_is_a_pure_function_of_its_seed(tiny):
    suite = QECPyramidTask(QECPyramidTask.Options(solver="pyramid", seeds=1))
    first = asyncio.run(suite.run_sample(suite.load_samples(None)[0], SampleContext({}, 0, {})))
    qec_pyramid.float_decoder.cache_clear()
    assert first.output["answer"] == QECPyramidTask().solve_cell("d3_p006", 0, "pyramid").answer
    assert first.output["answer"] != QECPyramidTask().solve_cell("d3_p006", 1, "pyramid").answer
    scores = first.scores
    assert scores["ler_low"] <= scores["ler"] <= scores["ler_high"] and scores["low_bit_share"] > 0.5
    assert scores["epochs"] == 1 and scores["cpu_latency_us"] is None
    mwpm = QECPyramidTask().score_cell(QECPyramidTask().solve_cell("d3_p006", 0, "mwpm"))
    assert 0.0 < mwpm["ler"] < 0.1 and mwpm["cpu_latency_us"] > 0 and mwpm["bit_ops"] is None
    # A BB decoder on the BB setting: 12 observables, scored; MWPM there and Relay-BP on the surface code: not applicable.
    relay = QECPyramidTask().score_cell(QECPyramidTask().solve_cell("bb72_p03", 0, "relay_bp"))
    assert 0.0 <= relay["ler"] < 0.2
    assert QECPyramidTask().solve_cell("bb72_p03", 0, "mwpm").answer == {"applicable": False}
    skipped = QECPyramidTask().solve_cell("d3_p006", 0, "relay_bp")
    assert skipped.answer == {"applicable": False} and set(QECPyramidTask().score_cell(skipped).values()) == {None}


def test_the_decoders_never_read_the_test_flips(tiny, monkeypatch):
    clean = QECPyramidTask().solve_cell("d3_p006", 0, "int2").answer
    real_shots = qec_pyramid.shots

    def flipped_test_labels(setting, seed, split, n):
        det, obs = real_shots(setting, seed, split, n)
        return det, (~obs if split == "test" else obs)

    monkeypatch.setattr(qec_pyramid, "shots", flipped_test_labels)
    qec_pyramid.held_out_shots.cache_clear()
    qec_pyramid.float_decoder.cache_clear()
    assert QECPyramidTask().solve_cell("d3_p006", 0, "int2").answer == clean


def test_bad_options_and_settings_are_rejected():
    with pytest.raises(pydantic.ValidationError, match="solver"):
        QECPyramidTask.Options(solver="union_find")
    with pytest.raises(ValueError, match="unknown setting 'd7'"):
        QECPyramidTask().solve_cell("d7", 0, "mwpm")
    with pytest.raises(ValueError, match="activation bits"):
        forward(qec_neural.initial((3, 4, 1), np.random.default_rng(0)), np.zeros((1, 3)), (2, 4), True)
