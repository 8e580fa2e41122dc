"""Task `ggtddip_cine_phantom`: dynamic MRI from undersampled Cartesian k-space with a time-dependent
deep image prior whose every update is split into a tangent part (the prior's geometry) and an
orthogonal, measurement-driven part scaled by a self-calibrated gate (the paper's method,
Geometry-Gated TD-DIP), against plain TD-DIP, the additive hybrid (TD-DIP + a prior term), k-t
low-rank SVT, view sharing and zero filling, at accelerations R = 4 and R = 8 (ours).

Ours: the analytic cine phantom and k-t sampling in `ggtddip_model.py`; the "diffusion prior" is
stood in for by the rank-4 temporal structure of the image sequence: its tangent at the current
estimate is the rank-4 temporal subspace of the Casorati matrix (P_T D = D V V^T), and its
denoiser, used by the additive hybrid, is the rank-4 truncation. The gate opens the orthogonal
part by how far the data residual is above the noise floor, with sigma estimated from k-space.
All three DIP solvers share the network, the latent, the initialisation and the iteration count;
they differ only in how the image-space gradient is shaped before it is back-propagated.
"""

from __future__ import annotations

import time
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import Field
from threadpoolctl import threadpool_limits

from environments.papers import ggtddip_model as gm
from environments.papers.base import CellResult, Claim, Condition, Departure, PaperOptions, PaperTask, describe_claim

SETTINGS = ("R4", "R8")
DIP_ITERS, DIP_LR, WIDTH, PRIOR_WEIGHT = 150, 1e-2, 16, 1.0
Solver = Literal["gated", "tddip", "additive", "kt_svt", "view_sharing", "zero_filled"]


class Options(PaperOptions):
    solver: Solver = Field("gated", description="gated (the paper's method: geometry-gated TD-DIP), tddip, additive "
                                                "(TD-DIP + prior term), kt_svt, view_sharing, zero_filled (baselines)")
    seeds: int = Field(5, ge=1, le=500, description="seeds per setting (samples = settings x seeds)")


def acceleration(setting: str) -> int:
    if setting not in SETTINGS:
        raise ValueError(f"setting must be one of {SETTINGS}, got {setting!r}")
    return int(setting[1:])


def cell_data(setting: str, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(truth frames, sampling mask, noisy sampled k-space) of a cell."""
    truth = gm.phantom(seed)
    mask = gm.sampling_mask(acceleration(setting), seed)
    return truth, mask, gm.measure(truth, mask, seed)


def torch_single_thread() -> Any:
    import torch

    # One thread: tiny tensors, and threads fighting over 2 shared cores only slow each other.
    torch.set_num_threads(1)
    return torch


def dip_network(seed: int) -> Any:
    """TD-DIP's generator: frame t -> a point on the unit circle (the cine cycle's manifold) -> MLP
    mapping -> 16x6x6 -> three (upsample x2, 3x3 conv, ReLU) stages (widths 16, 16, 8) -> 1x48x48."""
    torch = torch_single_thread()
    nn = torch.nn
    torch.manual_seed(seed)
    stages: list[Any] = []
    for width_in, width_out in ((WIDTH, WIDTH), (WIDTH, WIDTH), (WIDTH, WIDTH // 2)):  # the 48x48 stage is half as wide: it costs most
        stages += [nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False),
                   nn.Conv2d(width_in, width_out, 3, padding=1), nn.ReLU()]
    return nn.Sequential(nn.Linear(2, 32), nn.ReLU(), nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, WIDTH * 36),
                         nn.Unflatten(1, (WIDTH, 6, 6)), *stages, nn.Conv2d(WIDTH // 2, 1, 1))


def shaped_gradient(solver: str, x: np.ndarray, grad: np.ndarray, residual_energy: float, measured: int,
                    sigma_hat: float) -> np.ndarray:
    """The image-space update direction each DIP solver back-propagates: TD-DIP the data gradient;
    additive adds the prior's pull toward its rank-4 denoising; gated keeps the tangent part and
    scales the orthogonal part by the noise-level gate."""
    if solver == "tddip":
        return grad
    basis = gm.temporal_basis(x)
    if solver == "additive":
        return grad + PRIOR_WEIGHT * (x - gm.tangent_projection(x, basis))  # x - D(x), D = rank-4 truncation
    if solver == "gated":
        tangent = gm.tangent_projection(grad, basis)
        return tangent + gm.gate(residual_energy, measured, sigma_hat) * (grad - tangent)
    raise ValueError(f"not a DIP solver: {solver!r}")


def dip_reconstruct(solver: str, kspace: np.ndarray, mask: np.ndarray, seed: int) -> tuple[np.ndarray, list[float]]:
    """Fit the generator to the measurements for DIP_ITERS Adam steps on the shaped gradient of
    1/2 ||A x - y||^2; returns the frames and the gate's trace (empty unless gated)."""
    torch = torch_single_thread()
    net = dip_network(seed)
    opt = torch.optim.Adam(net.parameters(), lr=DIP_LR)
    angle = 2 * np.pi * np.arange(gm.FRAMES) / gm.FRAMES
    latent = torch.tensor(np.stack([np.cos(angle), np.sin(angle)], 1), dtype=torch.float32)
    sigma_hat, measured = gm.noise_level(kspace, mask), int(mask.sum()) * gm.SIDE
    gates: list[float] = []
    for _ in range(DIP_ITERS):
        out = net(latent)[:, 0]
        x = out.detach().double().numpy()
        residual = gm.forward(x, mask) - kspace
        grad = gm.adjoint(residual, mask)
        energy = float((np.abs(residual) ** 2).sum())
        shaped = shaped_gradient(solver, x, grad, energy, measured, sigma_hat)
        if solver == "gated":
            gates.append(gm.gate(energy, measured, sigma_hat))
        opt.zero_grad()
        out.backward(torch.tensor(shaped, dtype=torch.float32))
        opt.step()
    with torch.no_grad():
        return net(latent)[:, 0].double().numpy(), gates


def reconstruct(solver: str, kspace: np.ndarray, mask: np.ndarray, seed: int) -> tuple[np.ndarray, list[float]]:
    """The solver's frames from the sampled k-space and the mask alone."""
    if solver in ("gated", "tddip", "additive"):
        return dip_reconstruct(solver, kspace, mask, seed)
    if solver == "kt_svt":
        return gm.kt_svt(kspace, mask), []
    if solver == "view_sharing":
        return gm.view_sharing(kspace, mask), []
    if solver == "zero_filled":
        return gm.zero_filled(kspace, mask), []
    raise ValueError(f"solver must be one of gated, tddip, additive, kt_svt, view_sharing, zero_filled, got {solver!r}")


class GGTDDIPTask(PaperTask):
    task = "ggtddip_cine_phantom"
    name = "papers.ggtddip_cine_phantom"
    version = "0.1.0"
    headline_metric = "psnr@R8"
    Options = Options
    solvers = ("gated", "tddip", "additive", "kt_svt", "view_sharing", "zero_filled")
    settings = SETTINGS
    metric_names = ("psnr", "nmse", "final_gate")
    lower_is_better = frozenset({"nmse"})
    claim: ClassVar[Claim] = Claim(
        id=name, arms=solvers, settings=settings,
        sentence="Geometry-Gated TD-DIP: dynamic MRI from undersampled k-space, each deep-image-prior update split "
                 "into a part consistent with a diffusion prior (tangent) and a measurement-driven part (orthogonal) "
                 "whose size a self-calibrated gate controls",
        setting=f"analytic cine phantom {gm.SIDE}x{gm.SIDE}, {gm.FRAMES} frames (body, two static spots, a "
                f"contracting heart), Cartesian k-t sampling (central lines + random lines per frame) at R = 4 and 8, "
                f"complex noise sigma {gm.SIGMA}; TD-DIP: circle latent -> MLP -> 3-stage conv decoder (width {WIDTH}), "
                f"{DIP_ITERS} Adam steps; prior tangent = rank-{gm.RANK} temporal subspace of the Casorati matrix, gate "
                f"= 1 - noise energy / residual energy with sigma estimated from outer k-space",
        conditions=[Condition(metric="psnr", setting=s, solver="gated", versus=b, op=">=", threshold=0.0)
                   for s in SETTINGS for b in ("tddip", "additive")]
        + [Condition(metric="psnr", setting="R8", versus_setting="R4", solver="gated", versus="tddip", op=">=",
                     threshold=0.0)],
        note="'larger at R=8 than R=4' is the last condition: the gain over TD-DIP at R8 minus the gain at R4, "
             "paired by seed. The prior-only reference is kt_svt (the same rank structure as a convex prior)",
        departures=[
            Departure(paper="is summarised (PAPERS.md) by its method only; PAPER_TASKS.md states the claim as: beats "
                            "diffusion-only, TD-DIP-only and additive hybrids, most at high acceleration or with a "
                            "mismatched prior",
                      ours="test that reading: PSNR(gated) >= PSNR(TD-DIP) and >= PSNR(additive hybrid) at R = 4 and "
                           "8, and the gain over TD-DIP larger at R = 8, all with margin 0",
                      why="only the abstract is known (PAPERS.md), and a check needs a comparison and a margin",
                      effect="the verdict is on PAPER_TASKS.md's reading with no margin; the paper's reported gains "
                             "are not known"),
            Departure(paper="uses a diffusion prior (a learned generative model) whose geometry gives the tangent",
                      ours="stand in with a rank-4 temporal subspace: the tangent at the current estimate is the "
                           "span of its Casorati matrix's top 4 temporal singular vectors (P_T D = D V V^T), the "
                           "additive hybrid's denoiser is the rank-4 truncation, and the prior-only reference is k-t "
                           "SVT (a convex low-rank prior), not a diffusion sampler",
                      why="no pretrained diffusion model and no MRI training data here; CPU budget",
                      effect="our tangent is computed from the estimate itself and carries no outside knowledge of "
                             "anatomy, so the split can only re-weight the estimate's own dominant temporal "
                             "components and should add little over TD-DIP: a miss (gated below TD-DIP at R8 on this "
                             "machine) may say more about the stand-in than about the method, and a pass would not "
                             "show a diffusion prior's benefit"),
            Departure(paper="claims the largest gain with a mismatched prior",
                      ours="have no mismatched-prior setting: the stand-in is fitted to the very estimate it "
                           "projects, so it cannot be mismatched",
                      why="a mismatch needs a prior learned on other data, which we do not have",
                      effect="that half of the claim is untested: neither verdict speaks to it"),
            Departure(paper="reconstructs dynamic MRI (the summary names no data; presumably measured cine k-space)",
                      ours="use an analytic 48x48 phantom of 16 frames (piecewise constant, only the heart moves), "
                           "real-valued images, one coil, orthonormal FFT, simulated complex noise sigma 0.05, "
                           "Cartesian k-t sampling at R = 4 and 8 only",
                      why="no downloads; a known ground truth; CPU budget",
                      effect="a piecewise-constant phantom is nearly low rank, which favours k-t SVT (it beats every "
                             "DIP at R4) and leaves a low-rank tangent little to correct; real anatomy, coils and "
                             "higher accelerations could change the ordering either way, and two accelerations make "
                             "the trend condition a single difference"),
            Departure(paper="runs its DIP to its own stopping point and gate rule (neither in the summary)",
                      ours="run 150 Adam steps of a small DIP (decoder widths 16, 16, 8) for every DIP solver, with "
                           "the gate gamma = clip(1 - 2 m sigma_hat^2 / ||A x - y||^2, 0, 1), sigma_hat from the MAD "
                           "of outer k-space",
                      why="time budget (~2.5 min a cell); a gate from the noise level, as PAPER_TASKS.md sets it",
                      effect="the DIPs are not converged (below k-t SVT at R4) and another gate rule would open and "
                             "close at other times (ours ended at 0.20 at R4, 0.37 at R8), so the gain could differ "
                             "in either direction"),
            Departure(paper="reports image quality by metrics the summary does not name",
                      ours="decide on PSNR over the whole sequence only (NMSE reported)",
                      why="the headline metric of PAPER_TASKS.md",
                      effect="PSNR over the sequence is dominated by static regions; a gain confined to the moving "
                             "heart or visible only in SSIM would be missed"),
        ],
    )
    description = describe_claim(task, claim, solvers)

    def solve_cell(self, setting: str, seed: int, solver: str) -> CellResult:
        t0 = time.perf_counter()
        _, mask, kspace = cell_data(setting, seed)  # the solver gets the measurements, never the phantom
        with threadpool_limits(limits=1):  # BLAS threads on 2 shared cores slow the small SVDs ~25x
            frames, gates = reconstruct(solver, kspace, mask, seed)
        answer = {"frames": frames.astype(np.float32).round(5).tolist(), "final_gate": gates[-1] if gates else None}
        return CellResult(solver=solver, setting=setting, seed=seed, answer=answer, wall_s=round(time.perf_counter() - t0, 4))

    def score_cell(self, result: CellResult) -> dict[str, float | None]:
        truth, _, _ = cell_data(result.setting, result.seed)
        frames = np.asarray(result.answer["frames"], dtype=float)
        if frames.shape != truth.shape or not np.isfinite(frames).all():
            raise ValueError(f"frames must be {truth.shape} finite values, got shape {frames.shape}")
        nmse = float(((frames - truth) ** 2).sum() / (truth ** 2).sum())
        return {"psnr": gm.psnr(frames, truth), "nmse": nmse, "final_gate": result.answer.get("final_gate")}
