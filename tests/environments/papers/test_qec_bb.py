"""The bivariate-bicycle half of qec_precision_pyramid: the code, the noise, BP-OSD, min-sum BP and
Relay-BP on exact invariants and tiny cells."""

from __future__ import annotations

import numpy as np
import pytest
from ldpc import BpDecoder, mod2

from environments.papers import qec_bb
from environments.papers.qec_relay_bp import RelayConfig, min_sum_bp, relay_bp, syndrome, tanner_graph

QUICK_RELAY = RelayConfig(first_iterations=30, leg_iterations=20, legs=8, solutions=3)


@pytest.mark.parametrize(("name", "n", "k"), [("bb72", 72, 12), ("bb144", 144, 12)])
def test_bb_codes_are_css_codes_with_the_stated_n_and_k(name, n, k):
    hx, hz = qec_bb.bb_code(name)
    assert not ((hx.astype(np.int64) @ hz.T.astype(np.int64)) % 2).any()  # H_X H_Z^T = 0 mod 2
    assert qec_bb.code_parameters(name) == (n, k)
    assert qec_bb.gf2_rank(hx) == mod2.rank(hx) and qec_bb.gf2_rank(hz) == mod2.rank(hz)  # ldpc agrees
    # Every check has weight 6 and every qubit sits in 3 checks of each type (A, B: three monomials each).
    assert set(hx.sum(axis=1)) == set(hz.sum(axis=1)) == {6} and set(hx.sum(axis=0)) == set(hz.sum(axis=0)) == {3}


def test_gf2_kernel_is_a_basis_of_the_null_space():
    hx, _ = qec_bb.bb_code("bb72")
    kernel = qec_bb.gf2_kernel(hx)
    assert kernel.shape == (72 - qec_bb.gf2_rank(hx), 72)
    assert not ((kernel.astype(np.int64) @ hx.T) % 2).any() and qec_bb.gf2_rank(kernel) == len(kernel)


def test_logical_test_accepts_stabilisers_and_flags_a_logical():
    hx, hz = qec_bb.bb_code("bb72")
    zero = np.zeros((1, 72), dtype=bool)
    stabiliser = hx[[0, 5]].sum(axis=0, keepdims=True) % 2 == 1  # X stabilisers as an X residual
    assert not qec_bb.failures("bb72", 0.0, 1, 0, stabiliser, zero)[0].any()
    # A vector of ker(H_Z) outside rowspace(H_X) is a logical X: no syndrome, yet a failure.
    kernel = qec_bb.gf2_kernel(hz)
    logical = next(v for v in kernel if qec_bb.gf2_rank(np.vstack([hx, v])) > qec_bb.gf2_rank(hx))
    failed, unsatisfied = qec_bb.failures("bb72", 0.0, 1, 0, logical[None, :] == 1, zero)
    assert failed.all() and not unsatisfied.any()


def test_depolarising_sampler_is_seeded_and_has_the_stated_rates():
    ex, ez = qec_bb.depolarising(72, 0.3, 4000, seed=3)
    again = qec_bb.depolarising(72, 0.3, 4000, seed=3)
    assert (ex == again[0]).all() and (ez == again[1]).all() and (ex != qec_bb.depolarising(72, 0.3, 4000, 4)[0]).any()
    y = (ex & ez).mean()
    assert abs(ex.mean() - 0.2) < 0.005 and abs(ez.mean() - 0.2) < 0.005 and abs(y - 0.1) < 0.004
    with pytest.raises(ValueError, match="depolarising rate"):
        qec_bb.depolarising(72, 0.9, 1, 0)


@pytest.mark.parametrize("decoder", ["minsum_bp", "relay_bp", "bposd"])
def test_zero_syndrome_decodes_to_zero_and_every_single_error_is_corrected(decoder):
    hx, hz = qec_bb.bb_code("bb72")
    singles = np.vstack([np.zeros((1, 72), dtype=bool), np.eye(72, dtype=bool)])
    for pcm in (hz, hx):  # both sectors
        syndromes = (singles.astype(np.int64) @ pcm.T) % 2 == 1
        assert (qec_bb.decode(decoder, pcm, syndromes, 0.02, seed=0) == singles).all()


def test_relay_bp_reports_success_only_with_the_syndrome_reproduced():
    _, hz = qec_bb.bb_code("bb72")
    graph = tanner_graph(hz)
    rng = np.random.default_rng(0)
    errors = rng.random((150, 72)) < 0.08  # dense errors: many shots fail to converge somewhere
    syndromes = syndrome(graph, errors)
    for corrections, solved in (
        relay_bp(graph, syndromes, 0.05, seed=1, config=QUICK_RELAY),
        min_sum_bp(graph, syndromes, 0.05, iterations=20),
    ):
        assert (syndrome(graph, corrections)[solved] == syndromes[solved]).all()
        assert not (syndrome(graph, corrections)[~solved] == syndromes[~solved]).all(axis=1).any()
    plain = min_sum_bp(graph, syndromes, 0.05, iterations=20)[1]
    assert relay_bp(graph, syndromes, 0.05, seed=1, config=QUICK_RELAY)[1].sum() > plain.sum()


def test_relay_keeps_the_lowest_weight_solution_and_is_seeded():
    _, hz = qec_bb.bb_code("bb72")
    graph = tanner_graph(hz)
    errors = np.random.default_rng(5).random((100, 72)) < 0.06
    syndromes = syndrome(graph, errors)
    one = relay_bp(graph, syndromes, 0.04, seed=2, config=RelayConfig(legs=8, solutions=1))
    three = relay_bp(graph, syndromes, 0.04, seed=2, config=RelayConfig(legs=8, solutions=3))
    both = one[1] & three[1]
    # The first solution is among the three collected, so the kept one is never heavier.
    assert (three[0][both].sum(axis=1) <= one[0][both].sum(axis=1)).all()
    again = relay_bp(graph, syndromes, 0.04, seed=2, config=RelayConfig(legs=8, solutions=3))
    assert (again[0] == three[0]).all()


def test_min_sum_matches_ldpc_min_sum_exactly_where_both_converge():
    _, hz = qec_bb.bb_code("bb72")
    graph = tanner_graph(hz)
    errors = np.random.default_rng(7).random((200, 72)) < 0.03
    syndromes = syndrome(graph, errors)
    ours, solved = min_sum_bp(graph, syndromes, 0.02, iterations=30)
    reference = BpDecoder(
        hz, error_rate=0.02, max_iter=30, bp_method="minimum_sum", ms_scaling_factor=1.0, schedule="parallel"
    )
    theirs, converged = [], []
    for s in syndromes:
        theirs.append(reference.decode(s.astype(np.uint8)))
        converged.append(reference.converge)
    both = solved & np.array(converged)
    assert both.sum() > 150 and (ours[both] == np.array(theirs, dtype=bool)[both]).all()
    assert (solved != np.array(converged)).mean() < 0.05  # float32 here, double there: rare stragglers


def test_bad_relay_config_and_decoder_are_rejected():
    with pytest.raises(ValueError, match="gamma_range"):
        RelayConfig(gamma_range=(0.5, -0.5))
    with pytest.raises(ValueError, match="unknown BB decoder 'mwpm'"):
        qec_bb.decode("mwpm", np.eye(2, dtype=np.uint8), np.zeros((1, 2), dtype=bool), 0.1, 0)
    with pytest.raises(ValueError, match="unknown BB code"):
        qec_bb.bb_code("bb288")


def inserted_error_syndrome(pauli: str, qubit: int) -> tuple[np.ndarray, np.ndarray]:
    """stim's detectors and observables for one deterministic Pauli error on one data qubit."""
    import stim

    text = str(qec_bb.memory_circuit("bb72", 0.03)).replace(
        "DEPOLARIZE1(0.03)", f"{pauli}_ERROR(1) {qubit}\nDEPOLARIZE1(0)"
    )
    det, obs = stim.Circuit(text).compile_detector_sampler(seed=0).sample(1, separate_observables=True)
    return det[0], obs[0]


@pytest.mark.parametrize(("pauli", "qubit"), [("X", 0), ("Z", 5), ("Y", 40), ("X", 71)])
def test_the_bb_circuit_syndrome_layout_is_our_sector_syndromes(pauli, qubit):
    hx, hz = qec_bb.bb_code("bb72")
    ex = np.zeros(72, dtype=np.int64)
    ez = np.zeros(72, dtype=np.int64)
    ex[qubit], ez[qubit] = pauli in "XY", pauli in "ZY"
    det, obs = inserted_error_syndrome(pauli, qubit)
    assert np.array_equal(det, np.concatenate([(hz @ ex) % 2, (hx @ ez) % 2]).astype(bool))  # Z checks, then X checks
    assert np.array_equal(obs, ((qec_bb.logical_z_basis("bb72").astype(np.int64) @ ex) % 2).astype(bool))


def test_z_logicals_of_a_rank_deficient_code_are_independent_and_commute_with_the_x_checks():
    hx, hz = qec_bb.bb_code("bb72")
    assert qec_bb.gf2_rank(hx) == qec_bb.gf2_rank(hz) == 30 < len(hx)  # 36 checks of rank 30: not full rank
    logicals = qec_bb.logical_z_basis("bb72").astype(np.int64)
    assert logicals.shape == (12, 72) and not ((logicals @ hx.T) % 2).any()
    assert qec_bb.gf2_rank(np.vstack([hz, logicals])) == 30 + 12  # none is a Z stabiliser, all independent


@pytest.mark.parametrize("decoder", ["relay_bp", "bposd", "minsum_bp"])
def test_circuit_decoders_predict_every_single_mechanism_and_the_zero_syndrome(decoder, monkeypatch):
    monkeypatch.setattr(qec_bb, "RELAY", QUICK_RELAY)
    h, lo, probs = qec_bb.circuit_model("bb72", 0.03)
    assert h.shape == (72, 216) and lo.shape == (12, 216) and np.allclose(probs, 0.01, rtol=0.02)
    syndromes = np.vstack([np.zeros((1, 72), dtype=bool), h.T[::7] == 1])
    expected = np.vstack([np.zeros((1, 12), dtype=bool), lo.T[::7] == 1])
    assert np.array_equal(qec_bb.decode_circuit(decoder, "bb72", 0.03, syndromes, seed=0), expected)
