"""ggtddip_cine_phantom: the phantom and the Cartesian sampling are exact (every frame samples
SIDE / R whole lines, the centre always), the measurement operator's adjoint is exact and
zero filling a fully sampled noise-free k-space returns the image, the rank-4 tangent is an
orthogonal projector, the gate opens and closes where stated (and a fully open gate is TD-DIP),
the noise estimate is calibrated, and one cell scores through the suite contract. The learned prior:
its Jacobian tangent is an orthonormal basis whose projector splits the update into a tangent and an
innovation orthogonal to it (exact), the diffusion-only sampler's output keeps the measured lines, a
checkpoint for another image size is one error naming the option, an unknown setting or arm is one
error. Tiny untrained denoisers and 2-3 DIP steps keep it fast; run under
`flock /tmp/harness-torch.lock` (it imports torch)."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from pydantic import ValidationError

from environments.papers import ggtddip
from environments.papers import ggtddip_model as gm
from environments.papers import ggtddip_prior as gp
from environments.papers.ggtddip import GGTDDIPTask, Shaper, cell_data, reconstruct, split_update
from harness.suite import SampleContext


@pytest.fixture(scope="module")
def tiny_prior():
    """An untrained denoiser: the invariants below hold for any network."""
    gp.torch_single_thread().manual_seed(0)
    return gp.Prior(net=gp.denoiser_network(width=4).eval(), anatomy="cardiac", side=gm.SIDE, device="cpu")


def test_phantom_is_exact_piecewise_constant_and_only_the_heart_moves():
    frames = gm.phantom(0)
    assert frames.shape == (gm.FRAMES, gm.SIDE, gm.SIDE)
    assert set(np.unique(frames)) == {0.0, gm.BODY, gm.MYO, gm.BLOOD, gm.SPOT}
    assert (frames[:, 0, 0] == 0).all() and (frames[:, gm.SIDE // 2, 2] == gm.BODY).all()
    moving = (frames != frames[0]).any(axis=0)
    assert 0 < moving.sum() < 0.2 * gm.SIDE**2  # only the heart's ring moves, the rest is static
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
    in_span = gm.from_casorati(rng.normal(size=(gm.SIDE**2, gm.RANK)) @ basis.T)
    assert np.allclose(gm.tangent_projection(in_span, basis), in_span, atol=1e-12)


def test_gate_opens_above_the_noise_floor_and_an_open_gate_is_tddip(tiny_prior):
    assert gm.gate(1e9, 100, 0.05) == pytest.approx(1.0) and gm.gate(2 * 100 * 0.05**2, 100, 0.05) == 0.0
    assert gm.gate(4 * 100 * 0.05**2, 100, 0.05) == pytest.approx(0.5) and gm.gate(0.0, 100, 0.05) == 0.0
    rng = np.random.default_rng(5)
    x, grad = (rng.normal(size=(gm.FRAMES, gm.SIDE, gm.SIDE)) for _ in range(2))
    assert np.allclose(Shaper("gated", tiny_prior, 0)(x, grad, 1.0), grad, atol=1e-12)  # gate 1: TD-DIP
    closed = Shaper("gated", tiny_prior, 0)  # gate 0: the tangent part alone
    shaped = closed(x, grad, 0.0)
    assert np.allclose(shaped, gp.project(grad, closed.basis), atol=1e-12)
    assert np.allclose(
        Shaper("gated_svd", None, 0)(x, grad, 0.0), gm.tangent_projection(grad, gm.temporal_basis(x)), atol=1e-12
    )
    assert np.array_equal(Shaper("tddip", None, 0)(x, grad, 0.3), grad)


def test_jacobian_tangent_is_orthonormal_and_the_innovation_is_orthogonal_to_it(tiny_prior):
    rng = np.random.default_rng(6)
    frames = gm.phantom(0)[:3]
    basis = gp.jacobian_tangent(tiny_prior, frames, 0.1, 4, 2, rng.normal(size=(3, gm.SIDE**2, 4)))
    assert basis.shape == (3, gm.SIDE**2, 4)
    assert np.allclose(np.einsum("tnk,tnl->tkl", basis, basis), np.eye(4)[None], atol=1e-12)
    grad, other = (rng.normal(size=frames.shape) for _ in range(2))
    tangent, innovation = split_update(grad, basis)
    assert np.allclose(tangent + innovation, grad, atol=1e-12)
    assert abs(np.vdot(tangent, innovation)) < 1e-9 * np.vdot(grad, grad)  # the exact invariant
    assert np.allclose(gp.project(tangent, basis), tangent, atol=1e-12)  # idempotent
    assert np.allclose(gp.project(innovation, basis), 0, atol=1e-12)
    assert abs(np.vdot(gp.project(grad, basis), other) - np.vdot(grad, gp.project(other, basis))) < 1e-9
    # the basis spans J Q: one more iteration from it changes the span only as the power method does
    torch = gp.torch_single_thread()
    x = torch.as_tensor(frames[:1], dtype=torch.float32)[:, None]
    v = torch.as_tensor(basis[0, :, 0].reshape(1, 1, gm.SIDE, gm.SIDE), dtype=torch.float32)
    _, jv = torch.func.jvp(lambda z: tiny_prior.net(z, torch.full((1,), 0.1)), (x,), (v,))
    eps = 1e-3  # the JVP agrees with a finite difference of the denoiser: the tangent is the denoiser's
    fd = (tiny_prior.net(x + eps * v, torch.full((1,), 0.1)) - tiny_prior.net(x - eps * v, torch.full((1,), 0.1))) / (
        2 * eps
    )
    assert torch.allclose(jv, fd.detach(), atol=2e-3 * float(jv.abs().max()) + 1e-5)


def test_diffusion_only_output_keeps_the_measured_lines(tiny_prior):
    _, mask, kspace = cell_data("R8", 0)
    frames = gp.ddnm_reconstruct(tiny_prior, kspace, mask, 0, steps=3)
    assert frames.shape == (gm.FRAMES, gm.SIDE, gm.SIDE) and np.isfinite(frames).all()
    # every x0 is pulled onto the measurements (a step-1 gradient step; exact projection for complex
    # images, A^H A's real part for real ones): the output fits the data far better than the blank image
    residual = np.linalg.norm(gm.forward(frames, mask) - kspace)
    assert residual < 0.3 * np.linalg.norm(kspace)
    assert np.array_equal(frames, gp.ddnm_reconstruct(tiny_prior, kspace, mask, 0, steps=3))  # seeded


def test_a_checkpoint_for_another_image_size_is_one_error_naming_the_option(tmp_path, tiny_prior, monkeypatch):
    small = tmp_path / "prior32.pt"
    gp.save_prior(tiny_prior.net, "cardiac", 32, small)
    with pytest.raises(
        ValueError, match=r"prior_checkpoint: the checkpoint .* trained on 32x32 images, this task's frames are 48x48"
    ):
        gp.load_prior(small, "prior_checkpoint")
    with pytest.raises(ValueError, match="prior_checkpoint: no checkpoint"):
        gp.load_prior(tmp_path / "missing.pt", "prior_checkpoint")
    (tmp_path / "junk.pt").write_text("not a checkpoint")
    with pytest.raises(ValueError, match="prior_checkpoint: .* is not a ggtddip prior checkpoint"):
        gp.load_prior(tmp_path / "junk.pt", "prior_checkpoint")
    good = tmp_path / "prior48.pt"
    gp.save_prior(tiny_prior.net, "cardiac", gm.SIDE, good)
    loaded = gp.load_prior(good, "prior_checkpoint")
    x = gm.phantom(1)[:2]
    assert np.array_equal(loaded.denoise(x, 0.2), tiny_prior.denoise(x, 0.2))
    suite = GGTDDIPTask(GGTDDIPTask.Options(solver="additive", seeds=1, prior_checkpoint=str(small)))
    with pytest.raises(ValueError, match="prior_checkpoint"):
        suite.solve_cell("R4", 0, "additive")


def test_unknown_setting_or_arm_is_one_clear_error():
    with pytest.raises(ValueError, match=r"setting must be one of \('R4', 'R8', 'R8_mismatch', 'R8_ood'\), got 'R6'"):
        cell_data("R6", 0)
    with pytest.raises(ValidationError, match="solver"):
        GGTDDIPTask.Options(solver="dps")
    _, mask, kspace = cell_data("R4", 0)
    with pytest.raises(ValueError, match="solver must be one of .*got 'dps'"):
        reconstruct("dps", kspace, mask, 0)
    with pytest.raises(ValueError, match="needs a prior"):
        reconstruct("gated", kspace, mask, 0)
    with pytest.raises(ValueError, match="anatomy must be 'cardiac' or 'head'"):
        gm.training_sequence("knee", np.random.default_rng(0))


def test_the_ood_frames_and_training_families_are_what_they_say():
    ood, base = gm.phantom_ood(0), gm.phantom(0)
    assert not (ood == gm.BLOOD).any() and (ood == gm.OOD_BLOOD).any() and (ood == gm.OOD_LESION).any()
    assert np.array_equal(ood == gm.OOD_BLOOD, base == gm.BLOOD)  # the same pool, dark
    rng = np.random.default_rng(0)
    cardiac, head = gm.training_sequence("cardiac", rng), gm.training_sequence("head", rng)
    assert cardiac.shape == head.shape == (gm.FRAMES, gm.SIDE, gm.SIDE)
    assert (cardiac != cardiac[0]).any() and (head != head[0]).any()  # both move
    frames = gm.training_frames("cardiac", 2, 0)
    assert frames.dtype == np.float32 and frames.shape == (2 * gm.FRAMES, gm.SIDE, gm.SIDE)
    assert not any(np.array_equal(frames[: gm.FRAMES], gm.phantom(s)) for s in range(5))  # no test sequence in it


def test_noise_estimate_is_calibrated_on_pure_noise():
    mask = gm.sampling_mask(4, 0)
    noise_only = gm.measure(np.zeros((gm.FRAMES, gm.SIDE, gm.SIDE)), mask, 7)
    assert gm.noise_level(noise_only, mask) == pytest.approx(gm.SIGMA, rel=0.08)


def test_one_cell_scores_through_the_suite_contract(monkeypatch, tiny_prior):
    monkeypatch.setattr(ggtddip, "DIP_ITERS", 3)
    monkeypatch.setattr(ggtddip, "TANGENT_WARMUP", 1)
    monkeypatch.setattr(
        ggtddip.GGTDDIPTask,
        "prior_for",
        lambda self, setting, solver: tiny_prior if solver in ("gated", "additive", "diffusion") else None,
    )
    suite = GGTDDIPTask(GGTDDIPTask.Options(solver="gated", seeds=1))
    samples = suite.load_samples(None)
    assert [s.id for s in samples] == ["R4/seed000", "R8/seed000", "R8_mismatch/seed000", "R8_ood/seed000"]
    outcome = asyncio.run(suite.run_sample(samples[1], SampleContext({}, 0, {})))
    assert not outcome.errors and set(outcome.scores) == {"psnr", "nmse", "final_gate"}
    assert 0.0 <= outcome.scores["final_gate"] <= 1.0 and outcome.scores["nmse"] > 0
    assert (
        suite.solve_cell("R8", 0, "gated").answer == suite.solve_cell("R8", 0, "gated").answer
    )  # a function of the seed
    zf = suite.solve_cell("R4", 0, "zero_filled")
    assert suite.score_cell(zf)["final_gate"] is None and zf.answer["prior"] is None
    assert suite.score_cell(suite.solve_cell("R4", 0, "view_sharing"))["psnr"] > suite.score_cell(zf)["psnr"]
    with pytest.raises(ValueError, match="frames must be"):
        suite.score_cell(zf.model_copy(update={"answer": {"frames": [[0.0]]}}))


def test_the_criterion_names_every_comparison_of_the_claim():
    claim = GGTDDIPTask.claim
    pairs = {(c.setting, c.versus, c.versus_setting) for c in claim.conditions}
    for setting in ggtddip.SETTINGS:
        for baseline in ("tddip", "additive", "diffusion"):
            assert (setting, baseline, None) in pairs
    assert ("R8", "tddip", "R4") in pairs
    assert {("R8_mismatch", b, "R8") for b in ("additive", "diffusion")} <= pairs
    assert {("R8_ood", b, "R8") for b in ("additive", "diffusion")} <= pairs
    assert all(c.arm == "gated" for c in claim.conditions) and claim.plan.looks[-1] >= 5


def test_a_prior_is_trained_once_cached_by_its_key_and_loaded_from_the_cache(tmp_path, monkeypatch):
    monkeypatch.setattr(gp, "WIDTH", 4)
    monkeypatch.setattr(gp, "TRAIN_STEPS", 2)
    monkeypatch.setattr(gp, "SEQUENCES", 1)
    monkeypatch.setattr(gp, "_LOADED", {})
    prior = gp.get_prior("head", str(tmp_path))
    path = gp.cache_path(str(tmp_path), "head", 1)
    assert path.exists() and prior.anatomy == "head" and prior.side == gm.SIDE
    monkeypatch.setattr(gp, "_LOADED", {})
    monkeypatch.setattr(gp, "train_prior", lambda *a, **k: pytest.fail("a cached prior was trained again"))
    again = gp.get_prior("head", str(tmp_path))
    x = gm.phantom(0)[:2]
    assert np.array_equal(again.denoise(x, 0.3), prior.denoise(x, 0.3))
    assert gp.cache_path(str(tmp_path), "cardiac", 1) != path != gp.cache_path(str(tmp_path), "head", 2)
