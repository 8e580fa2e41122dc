"""qec_precision_pyramid: MWPM on the detector error model corrects every single fault (d=3), the
activation quantisers keep their grids (1 bit is exactly sign), binarised weights take two values per
unit, the hand-written gradients are the float network's true ones, and a tiny cell is a pure
function of its seed through the suite contract."""

from __future__ import annotations

import asyncio

import numpy as np
import pydantic
import pytest

from environments.papers import qec_pyramid
from environments.papers.qec_pyramid import (
    QECPyramidTask, binarise, forward, gradients, memory_circuit, mwpm_predictions, pack, quantise_activation, unpack,
    wilson,
)
from harness.suite import SampleContext


def single_faults():
    """(detector syndrome, observable flip) of every error mechanism of the circuit's model."""
    dem = memory_circuit().detector_error_model(decompose_errors=True)
    for inst in dem.flattened():
        if inst.type != "error":
            continue
        syndrome, flip = np.zeros(dem.num_detectors, dtype=bool), False
        for t in inst.targets_copy():
            if t.is_relative_detector_id():
                syndrome[t.val] ^= True
            elif t.is_logical_observable_id():
                flip ^= True
        yield syndrome, flip


def test_mwpm_corrects_every_single_fault_of_the_distance_3_code():
    faults = list(single_faults())
    assert len(faults) > 100 and any(flip for _, flip in faults)  # data-qubit flips that cross the logical
    syndromes = np.array([s for s, _ in faults])
    flips = np.array([f for _, f in faults])
    assert np.array_equal(mwpm_predictions(syndromes), flips)
    assert not mwpm_predictions(np.zeros((1, syndromes.shape[1])))[0]  # no syndrome, no correction


@pytest.mark.parametrize("bits", [1, 2, 4, 8])
def test_activation_quantiser_grid(bits):
    x = np.linspace(-3, 3, 200_001).astype(np.float64)
    q = quantise_activation(x, bits)
    n = 2 ** bits
    grid = (2 * np.arange(n) + 1 - n) / (n - 1)
    assert np.array_equal(np.unique(q), grid)  # exactly 2^bits levels, ends at -1 and 1
    assert np.all(np.diff(q) >= 0)  # monotone
    assert np.array_equal(quantise_activation(grid, bits), grid)  # the grid is fixed


def test_one_bit_activation_is_exactly_sign():
    x = np.random.default_rng(0).normal(size=10_000)
    x[:5] = 0.0
    assert np.array_equal(quantise_activation(x, 1), np.where(x >= 0, 1.0, -1.0))
    assert np.array_equal(quantise_activation(x, None), np.clip(x, -1, 1))


def test_binarised_weights_are_plus_minus_the_mean_magnitude():
    w = np.random.default_rng(1).normal(size=(7, 5))
    b = binarise(w)
    assert np.array_equal(np.sign(b), np.where(w >= 0, 1.0, -1.0))
    assert np.allclose(np.abs(b), np.abs(w).mean(axis=0, keepdims=True))


def test_gradients_of_the_float_network_match_finite_differences():
    rng = np.random.default_rng(2)
    params = [(rng.normal(0, 0.3, (4, 3)), rng.normal(0, 0.1, 3)), (rng.normal(0, 0.3, (3, 1)), rng.normal(0, 0.1, 1))]
    x, y = rng.normal(size=(6, 4)), rng.integers(0, 2, 6).astype(float)
    bits = (None,)

    def loss(ps):
        logit = forward(ps, x, bits, False)[0]
        return float(np.mean(np.logaddexp(0, logit) - y * logit))

    grads = gradients(params, x, y, bits, False)
    eps = 1e-6
    for layer in range(2):
        for j in range(2):
            flat = params[layer][j].ravel()
            for k in range(flat.size):
                flat[k] += eps
                up = loss(params)
                flat[k] -= 2 * eps
                down = loss(params)
                flat[k] += eps
                assert abs((up - down) / (2 * eps) - grads[layer][j].ravel()[k]) < 1e-6


def test_wilson_interval_and_packing():
    low, high = wilson(24, 1000)
    assert low < 0.024 < high and abs(low - 0.01614) < 1e-4 and abs(high - 0.03553) < 1e-4
    bits = np.random.default_rng(3).integers(0, 2, 1001).astype(bool)
    assert np.array_equal(unpack(pack(bits), 1001), bits)


@pytest.fixture
def tiny(monkeypatch):
    monkeypatch.setattr(qec_pyramid, "N_TRAIN", 4096)
    monkeypatch.setattr(qec_pyramid, "N_TEST", 20_000)
    monkeypatch.setattr(qec_pyramid, "HIDDEN", (16, 16, 16))
    qec_pyramid.float_decoder.cache_clear()
    qec_pyramid.held_out_shots.cache_clear()
    yield
    qec_pyramid.float_decoder.cache_clear()
    qec_pyramid.held_out_shots.cache_clear()


def test_a_tiny_cell_is_a_pure_function_of_its_seed(tiny):
    suite = QECPyramidTask(QECPyramidTask.Options(solver="pyramid", seeds=1))
    sample = suite.load_samples(None)[0]
    first = asyncio.run(suite.run_sample(sample, SampleContext({}, 0, {})))
    qec_pyramid.float_decoder.cache_clear()
    again = QECPyramidTask().solve_cell("d3_p006", 0, "pyramid")
    assert first.output["answer"] == again.answer
    assert first.output["answer"] != QECPyramidTask().solve_cell("d3_p006", 1, "pyramid").answer
    scores = first.scores
    assert scores["ler_low"] <= scores["ler"] <= scores["ler_high"] and 0.01 < scores["mwpm_ler"] < 0.04
    mwpm = QECPyramidTask().score_cell(QECPyramidTask().solve_cell("d3_p006", 0, "mwpm"))
    assert mwpm["ler"] == mwpm["mwpm_ler"] and mwpm["ler_over_mwpm"] == 1.0


def test_bad_options_and_settings_are_rejected():
    with pytest.raises(pydantic.ValidationError, match="solver"):
        QECPyramidTask.Options(solver="union_find")
    with pytest.raises(ValueError, match="unknown setting 'd5'"):
        QECPyramidTask().solve_cell("d5", 0, "mwpm")


def test_the_decoders_never_read_the_test_flips(tiny, monkeypatch):
    clean = QECPyramidTask().solve_cell("d3_p006", 0, "int2").answer
    real_shots = qec_pyramid.shots

    def flipped_test_labels(seed, split, n):
        det, obs = real_shots(seed, split, n)
        return det, (~obs if split == "test" else obs)

    monkeypatch.setattr(qec_pyramid, "shots", flipped_test_labels)
    qec_pyramid.held_out_shots.cache_clear()
    qec_pyramid.float_decoder.cache_clear()
    assert QECPyramidTask().solve_cell("d3_p006", 0, "int2").answer == clean
