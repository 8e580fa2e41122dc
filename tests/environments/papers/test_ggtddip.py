"""ggtddip_cine_phantom: the phantom and the Cartesian sampling are exact (every frame samples
SIDE / R whole lines, the centre always), the measurement operator's adjoint is exact and
zero filling a fully sampled noise-free k-space returns the image, the rank-4 tangent is an
orthogonal projector, the gate opens and closes where stated (and a fully open gate is TD-DIP),
the noise estimate is calibrated, and one cell scores through the suite contract. Tiny DIP budgets
keep it fast; run under `flock /tmp/torch.lock` (it imports torch)."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from pydantic import ValidationError

from environments.papers import ggtddip
from environments.papers import ggtddip_model as gm
from environments.papers.ggtddip import GGTDDIPTask, cell_data, reconstruct, shaped_gradient
from harness.suite import SampleContext


def test_phantom_is_exact_piecewise_constant_and_only_the_heart_moves():
    frames = gm.phantom(0)
    assert frames.shape == (gm.FRAMES, gm.SIDE, gm.SIDE)
    assert set(np.unique(frames)) == {0.0, gm.BODY, gm.MYO, gm.BLOOD, gm.SPOT}
    assert (frames[:, 0, 0] == 0).all() and (frames[:, gm.SIDE // 2, 2] == gm.BODY).all()
    moving = (frames != frames[0]).any(axis=0)
    assert 0 < moving.sum() < 0.2 * gm.SIDE ** 2  # only the heart's ring moves, the rest is static
    blood = (frames == gm.BLOOD).sum(axis=(1, 2))
    assert blood.max() > 1.5 * blood.min()  # the pool contracts and relaxes over the cycle
    assert np.array_equal(frames, gm.phantom(0)) and not np.array_equal(frames, gm.phantom(1))


@pytest.mark.parametrize("acceleration", [4, 8])
def test_sampling_mask_samples_exactly_side_over_r_whole_lines_per_frame(acceleration):
    mask = gm.sampling_mask(acceleration, 0)
    assert mask.shape == (gm.FRAMES, gm.SIDE)
    assert (mask.sum(axis=1) == gm.SIDE // acceleration).all()
    assert gm.SIDE / mask.sum(axis=1).mean() == acceleration  # R = fully sampled lines / sampled lines
    assert mask[:, 0].all()  # ky = 0 in every frame
    assert len({row.tobytes() for row in mask}) > gm.FRAMES // 2  # the random lines change frame to frame
    kspace = gm.forward(np.random.default_rng(0).normal(size=(gm.FRAMES, gm.SIDE, gm.SIDE)), mask)
    assert (kspace[~mask] == 0).all()  # whole phase-encode lines: every kx of an unsampled ky is zero
    with pytest.raises(ValueError, match="acceleration must divide 48"):
        gm.sampling_mask(5, 0)


def test_zero_filled_of_fully_sampled_noise_free_kspace_is_the_image_and_the_adjoint_is_exact():
    frames = gm.phantom(2)
    full = np.ones((gm.FRAMES, gm.SIDE), dtype=bool)
    assert np.abs(gm.zero_filled(gm.measure(frames, full, 0, sigma=0.0), full) - frames).max() < 1e-12
    assert gm.psnr(frames, frames) == float("inf")
    rng = np.random.default_rng(3)
    mask = gm.sampling_mask(4, 3)
    x = rng.normal(size=frames.shape)
    y = (rng.normal(size=frames.shape) + 1j * rng.normal(size=frames.shape)) * mask[:, :, None]
    assert abs(np.vdot(gm.forward(x, mask), y).real - np.vdot(x, gm.adjoint(y, mask))) < 1e-9


def test_rank4_tangent_is_an_orthogonal_projector():
    rng = np.random.default_rng(4)
    basis = gm.temporal_basis(gm.phantom(0))
    assert basis.shape == (gm.FRAMES, gm.RANK) and np.allclose(basis.T @ basis, np.eye(gm.RANK), atol=1e-12)
    d, e = (rng.normal(size=(gm.FRAMES, gm.SIDE, gm.SIDE)) for _ in range(2))
    pd, pe = gm.tangent_projection(d, basis), gm.tangent_projection(e, basis)
    assert np.allclose(gm.tangent_projection(pd, basis), pd, atol=1e-12)  # idempotent
    assert abs(np.vdot(pd, e) - np.vdot(d, pe)) < 1e-9  # self-adjoint
    assert abs(np.vdot(pd, d - pd)) < 1e-9  # the residual is orthogonal to the tangent part
    in_span = gm.from_casorati(rng.normal(size=(gm.SIDE ** 2, gm.RANK)) @ basis.T)
    assert np.allclose(gm.tangent_projection(in_span, basis), in_span, atol=1e-12)


def test_gate_opens_above_the_noise_floor_and_an_open_gate_is_tddip():
    assert gm.gate(1e9, 100, 0.05) == pytest.approx(1.0) and gm.gate(2 * 100 * 0.05 ** 2, 100, 0.05) == 0.0
    assert gm.gate(4 * 100 * 0.05 ** 2, 100, 0.05) == pytest.approx(0.5) and gm.gate(0.0, 100, 0.05) == 0.0
    rng = np.random.default_rng(5)
    x, grad = (rng.normal(size=(gm.FRAMES, gm.SIDE, gm.SIDE)) for _ in range(2))
    assert np.allclose(shaped_gradient("gated", x, grad, 1.0, 100, 0.0), grad, atol=1e-12)  # gate 1: TD-DIP
    closed = shaped_gradient("gated", x, grad, 1.0, 100, 1.0)  # gate 0: the tangent part alone
    assert np.allclose(closed, gm.tangent_projection(grad, gm.temporal_basis(x)), atol=1e-12)


def test_noise_estimate_is_calibrated_on_pure_noise():
    mask = gm.sampling_mask(4, 0)
    noise_only = gm.measure(np.zeros((gm.FRAMES, gm.SIDE, gm.SIDE)), mask, 7)
    assert gm.noise_level(noise_only, mask) == pytest.approx(gm.SIGMA, rel=0.08)


def test_one_cell_scores_through_the_suite_contract(monkeypatch):
    monkeypatch.setattr(ggtddip, "DIP_ITERS", 3)
    suite = GGTDDIPTask(GGTDDIPTask.Options(solver="gated", seeds=1))
    samples = suite.load_samples(None)
    assert [s.id for s in samples] == ["R4/seed000", "R8/seed000"]
    outcome = asyncio.run(suite.run_sample(samples[1], SampleContext({}, 0, {})))
    assert not outcome.errors and set(outcome.scores) == {"psnr", "nmse", "final_gate"}
    assert 0.0 <= outcome.scores["final_gate"] <= 1.0 and outcome.scores["nmse"] > 0
    assert suite.solve_cell("R8", 0, "gated").answer == suite.solve_cell("R8", 0, "gated").answer  # a function of the seed
    _, mask, kspace = cell_data("R4", 0)
    zf = suite.solve_cell("R4", 0, "zero_filled")
    assert suite.score_cell(zf)["final_gate"] is None
    assert suite.score_cell(suite.solve_cell("R4", 0, "view_sharing"))["psnr"] > suite.score_cell(zf)["psnr"]
    with pytest.raises(ValueError, match="frames must be"):
        suite.score_cell(zf.model_copy(update={"answer": {"frames": [[0.0]]}}))
    with pytest.raises(ValidationError):
        GGTDDIPTask.Options(solver="diffusion")
    with pytest.raises(ValueError, match="solver must be one of"):
        reconstruct("diffusion", kspace, mask, 0)
    with pytest.raises(ValueError, match="setting must be one of"):
        cell_data("R6", 0)
