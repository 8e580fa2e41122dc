"""The bivariate-bicycle half of qec_precision_pyramid: the code, the noise, BP-OSD, min-sum BP and
Relay-BP on exact invariants and tiny cells."""

from __future__ import annotations

import numpy as np
import pytest
from ldpc import BpDecoder, mod2

from environments.papers import qec_bb, qec_pyramid
from environments.papers.qec_pyramid import QECPyramidTask
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
    for corrections, solved in (relay_bp(graph, syndromes, 0.05, seed=1, config=QUICK_RELAY),
                                min_sum_bp(graph, syndromes, 0.05, iterations=20)):
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
    reference = BpDecoder(hz, error_rate=0.02, max_iter=30, bp_method="minimum_sum", ms_scaling_factor=1.0,
                          schedule="parallel")
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


@pytest.fixture
def tiny_bb(monkeypatch):
    monkeypatch.setattr(qec_pyramid, "BB_SHOTS", 150)
    monkeypatch.setattr(qec_bb, "RELAY", QUICK_RELAY)
    qec_bb.bposd_corrections.cache_clear()
    yield
    qec_bb.bposd_corrections.cache_clear()


def test_a_tiny_bb_cell_is_a_pure_function_of_its_seed_and_scored_from_its_record(tiny_bb):
    task = QECPyramidTask()
    first = task.solve_cell("bb72_p05", 0, "relay_bp")
    assert first.answer == task.solve_cell("bb72_p05", 0, "relay_bp").answer
    assert first.answer != task.solve_cell("bb72_p05", 1, "relay_bp").answer
    scores = task.score_cell(first)
    assert scores["ler_low"] <= scores["ler"] <= scores["ler_high"] and scores["unsatisfied"] <= scores["ler"]
    assert scores["ler_over_mwpm"] is None and scores["mwpm_ler"] is None
    bposd = task.score_cell(task.solve_cell("bb72_p05", 0, "bposd"))
    assert bposd["ler_over_bposd"] == 1.0 and bposd["unsatisfied"] == 0.0
    # The other half's solvers record "not applicable" and score None everywhere.
    skipped = task.solve_cell("bb72_p05", 0, "pyramid")
    assert skipped.answer == {"applicable": False} and set(task.score_cell(skipped).values()) == {None}
    assert task.solve_cell("d3_p006", 0, "relay_bp").answer == {"applicable": False}
