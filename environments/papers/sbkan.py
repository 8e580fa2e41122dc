"""Task `sbkan_aniso_rates`: a sparse Bayesian KAN (spike-and-slab variational posterior over its
edges; the paper's method) against a point-estimate KAN and an MLP, on an anisotropic
Weierstrass-type regression target (ours): does the fitted L2-error rate in n match the
anisotropic minimax rate n^{-s~/(2 s~ + 1)}, s~ = (sum_i 1/s_i)^{-1}?

Target: f(x) = W_{s1}(x1) W_{s2}(x2) on [0, 1]^2, W_s(t) = sum_{k<8} 2^{-k s} cos(2^k pi t), which
has Hoelder smoothness s_i in coordinate i; normalised to unit variance, observed with N(0, 0.3^2)
noise. The KAN: 2 -> 6 -> 1, each edge phi(t) = b silu(t) + sum_g c_g exp(-((t - g) / h)^2) on 10
grid points, hidden outputs squashed by tanh. The method puts a spike-and-slab prior on each
edge (inclusion ~ Bernoulli(0.3), coefficients ~ N(0, 1) when included) and fits a mean-field
variational posterior (relaxed-Bernoulli gates, Gaussian coefficients) by the ELBO; it predicts
with the median-probability model. Torch, one thread, full batch.
"""

from __future__ import annotations

import math
import time
from functools import lru_cache
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import Field

from environments.papers.base import CellResult, Claim, Condition, Departure, PaperOptions, PaperTask, describe_claim

SMOOTHNESS = (1.0, 3.0)
EFFECTIVE = 1 / sum(1 / s for s in SMOOTHNESS)  # 0.75
THEORY_SLOPE = -EFFECTIVE / (2 * EFFECTIVE + 1)  # -0.3: log L2 error against log n
BAND = 0.1
SIZES = (256, 512, 1024, 2048, 4096)
N_TEST, NOISE, STEPS, LR = 4096, 0.3, 600, 0.02
HIDDEN, GRID, PRIOR_INCLUSION = 6, 10, 0.3
Solver = Literal["sbkan", "kan", "mlp"]


class Options(PaperOptions):
    solver: Solver = Field("sbkan", description="sbkan (the paper's method), kan, mlp (baselines)")
    seeds: int = Field(5, ge=1, le=500, description="seeds (each fits 5 sample sizes; ~1 min per seed and solver here)")


def weierstrass(t: np.ndarray, s: float) -> np.ndarray:
    k = np.arange(8)
    return (2.0 ** (-k * s) * np.cos(np.pi * 2.0 ** k * t[..., None])).sum(axis=-1)


def target(x: np.ndarray) -> np.ndarray:
    raw = weierstrass(x[:, 0], SMOOTHNESS[0]) * weierstrass(x[:, 1], SMOOTHNESS[1])
    return raw / TARGET_SD


TARGET_SD = float(np.std(weierstrass(np.random.default_rng(0).random(200_000), SMOOTHNESS[0])
                         * weierstrass(np.random.default_rng(1).random(200_000), SMOOTHNESS[1])))


@lru_cache(maxsize=4)
def data(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The seed's largest training set (each n uses its first n points) and the test inputs."""
    rng = np.random.default_rng(seed)
    x = rng.random((max(SIZES), 2))
    return x, target(x) + NOISE * rng.standard_normal(len(x)), rng.random((N_TEST, 2))


def make_model(solver: str) -> Any:
    import torch
    from torch import nn

    class KANLayer(nn.Module):
        """Edges in x out; phi_e(t) = b_e silu(t) + sum_g c_eg rbf_g(t); an optional gate per edge."""

        def __init__(self, fan_in: int, fan_out: int, bayes: bool):
            super().__init__()
            self.register_buffer("grid", torch.linspace(-1.5, 1.5, GRID))
            self.width = 3.0 / (GRID - 1)
            self.mu = nn.Parameter(0.1 * torch.randn(fan_in, fan_out, GRID + 1))
            self.bayes = bayes
            if bayes:
                self.log_sd = nn.Parameter(torch.full((fan_in, fan_out, GRID + 1), -4.0))
                self.gate_logit = nn.Parameter(torch.full((fan_in, fan_out), 2.0))

        def features(self, t: torch.Tensor) -> torch.Tensor:
            rbf = torch.exp(-((t[..., None] - self.grid) / self.width) ** 2)
            return torch.cat([torch.nn.functional.silu(t)[..., None], rbf], dim=-1)  # (batch, in, G+1)

        def forward(self, t: torch.Tensor, sample: bool) -> torch.Tensor:
            coef, gate = self.mu, None
            if self.bayes and sample:
                coef = self.mu + torch.exp(self.log_sd) * torch.randn_like(self.mu)
                u = torch.rand_like(self.gate_logit).clamp(1e-6, 1 - 1e-6)
                gate = torch.sigmoid((self.gate_logit + torch.log(u) - torch.log1p(-u)) / 0.5)  # relaxed Bernoulli
            elif self.bayes:
                gate = (self.gate_logit > 0).float()  # the median-probability model
            weights = coef if gate is None else coef * gate[..., None]
            return torch.einsum("big,iog->bo", self.features(t), weights)

        def kl(self) -> torch.Tensor:
            gamma = torch.sigmoid(self.gate_logit)
            pi = PRIOR_INCLUSION
            kl_gate = gamma * torch.log(gamma / pi + 1e-12) + (1 - gamma) * torch.log((1 - gamma) / (1 - pi) + 1e-12)
            var = torch.exp(2 * self.log_sd)
            kl_slab = 0.5 * (var + self.mu ** 2 - 1 - 2 * self.log_sd).sum(dim=-1)
            return (kl_gate + gamma * kl_slab).sum()

    class KAN(nn.Module):
        def __init__(self, bayes: bool):
            super().__init__()
            self.first, self.second, self.bayes = KANLayer(2, HIDDEN, bayes), KANLayer(HIDDEN, 1, bayes), bayes

        def forward(self, x: torch.Tensor, sample: bool = False) -> torch.Tensor:
            return self.second(torch.tanh(self.first(2 * x - 1, sample)), sample)[:, 0]

        def kl(self) -> torch.Tensor:
            return self.first.kl() + self.second.kl()

    class MLP(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.net = nn.Sequential(nn.Linear(2, 32), nn.Tanh(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 1))
            self.bayes = False

        def forward(self, x: torch.Tensor, sample: bool = False) -> torch.Tensor:
            return self.net(2 * x - 1)[:, 0]

    return MLP() if solver == "mlp" else KAN(bayes=solver == "sbkan")


def fit_and_predict(solver: str, x: np.ndarray, y: np.ndarray, x_test: np.ndarray, seed: int) -> tuple[np.ndarray, float | None]:
    """Train on (x, y); predictions on x_test and (method only) the share of edges kept."""
    import torch

    torch.set_num_threads(1)  # tiny tensors on 2 shared cores: threads only fight
    torch.manual_seed(seed)
    model = make_model(solver)
    opt = torch.optim.Adam(model.parameters(), lr=LR)
    xt, yt = torch.tensor(x, dtype=torch.float32), torch.tensor(y, dtype=torch.float32)
    for _ in range(STEPS):
        opt.zero_grad()
        resid = yt - model(xt, sample=model.bayes)
        loss = (resid ** 2).sum() / (2 * NOISE ** 2)  # the Gaussian negative log-likelihood
        if model.bayes:
            loss = loss + model.kl()
        (loss / len(x)).backward()
        opt.step()
    with torch.no_grad():
        pred = model(torch.tensor(x_test, dtype=torch.float32)).numpy().astype(float)
        kept = None
        if model.bayes:
            gates = torch.cat([model.first.gate_logit.ravel(), model.second.gate_logit.ravel()])
            kept = float((gates > 0).float().mean())
    return pred, kept


def loglog_slope(x: tuple[int, ...], y: list[float]) -> float:
    return float(np.polyfit(np.log(np.asarray(x, dtype=float)), np.log(np.asarray(y, dtype=float)), 1)[0])


class SBKANTask(PaperTask):
    task = "sbkan_aniso_rates"
    name = "papers.sbkan_aniso_rates"
    version = "0.1.0"
    headline_metric = "slope@weierstrass"
    Options = Options
    solvers = ("sbkan", "kan", "mlp")
    settings = ("weierstrass",)
    metric_names = ("slope", "slope_gap") + tuple(f"l2_n{n}" for n in SIZES) + ("edges_kept",)
    lower_is_better = frozenset(f"l2_n{n}" for n in SIZES)
    claim: ClassVar[Claim] = Claim(
        id=name, arms=solvers, settings=settings,
        sentence="Sparse Bayesian KANs: near-minimax posterior contraction over anisotropic Besov spaces with "
                 "spike-and-slab priors; rate set by the anisotropic smoothness",
        setting=f"f = W_1(x1) W_3(x2) (Weierstrass-type, Hoelder smoothness {SMOOTHNESS}, s~ = {EFFECTIVE:g}), "
                f"unit variance, noise sd {NOISE}; n = {SIZES}; KAN 2-{HIDDEN}-1 with {GRID}-point RBF edges; "
                f"{STEPS} full-batch Adam steps (lr {LR}); L2 error on {N_TEST} test points; theory slope "
                f"{THEORY_SLOPE:.2f}",
        conditions=[Condition(metric="slope", setting="weierstrass", solver="sbkan", op=">=", threshold=THEORY_SLOPE - BAND),
                   Condition(metric="slope", setting="weierstrass", solver="sbkan", op="<=", threshold=THEORY_SLOPE + BAND)],
        note=f"slope = fitted log-log slope of the test L2 error against n; band = theory +- {BAND}. "
             "Pre-asymptotic sizes: a miss is a legitimate result",
        departures=[
            Departure(paper="builds KANs from B-spline edge functions",
                      ours="use 10 Gaussian RBFs on a fixed grid plus b silu(t) per edge (KAN 2-6-1, hidden outputs "
                           "through tanh), the same at every n",
                      why="a simpler basis to write and fit in torch on CPU (our choice)",
                      effect="the rate depends on the basis' approximation power and on refining it as n grows; a "
                             "fixed 10-point RBF grid has an approximation floor that flattens the error curve at "
                             "large n (sbkan's error flattens at ~0.13 from n = 1024) and pushes the slope toward 0: "
                             "against the claim"),
            Departure(paper="proves posterior contraction: the posterior's mass concentrates around the truth at the "
                            "rate",
                      ours="fit a mean-field variational posterior (relaxed-Bernoulli gates, Gaussian coefficients) "
                           "and measure the log-log slope of the test L2 error of one point estimate (the "
                           "median-probability model with coefficient means) over n = 256..4096",
                      why="sampling the exact posterior is beyond the CPU budget; an error slope is measurable",
                      effect="a point estimate's error rate need not equal the posterior's contraction rate, a "
                             "variational posterior may contract at another rate than the exact one, and "
                             "optimisation error (600 Adam steps at every n) enters the slope: a miss says little "
                             "about the theorem and a pass would not prove it"),
            Departure(paper="relies on spike-and-slab priors whose sparsity adapts to the anisotropic smoothness",
                      ours="put a spike-and-slab prior on whole edges (inclusion Bernoulli(0.3)), but the fitted "
                           "posterior keeps every edge: the sparsity prior prunes nothing (edges_kept = 1.0 at n = "
                           "4096)",
                      why="the ELBO at these n prefers every edge (not tuned)",
                      effect="the method acts as a regularised dense KAN; the mechanism the paper credits for the "
                             "rate is inactive, so no measured rate can be attributed to sparsity"),
            Departure(paper="proves rates over anisotropic Besov spaces, set by the anisotropic smoothness",
                      ours="use one target, f = W_1(x1) W_3(x2) (Weierstrass-type, Hoelder smoothness 1 and 3), one "
                           "theory slope -0.3, band +- 0.1 (ours), n up to 4096, 3 seeds",
                      why="CPU budget; PAPER_TASKS.md gives no band",
                      effect="'set by the anisotropic smoothness' needs several smoothness pairs to test, so only "
                             "one slope is checked; 'near-minimax' allows log factors the band ignores; at these n "
                             "the slope is pre-asymptotic (the least-squares KAN's -0.50 is faster than the minimax "
                             "rate), so the band can be hit or missed by the range of n alone"),
        ],
    )
    description = describe_claim(task, claim, solvers)

    def solve_cell(self, setting: str, seed: int, solver: str) -> CellResult:
        t0 = time.perf_counter()
        x, y, x_test = data(seed)
        preds, kept = [], []
        for n in SIZES:
            pred, k = fit_and_predict(solver, x[:n], y[:n], x_test, seed)
            preds.append(pred.tolist())
            kept.append(k)
        return CellResult(solver=solver, setting=setting, seed=seed, wall_s=round(time.perf_counter() - t0, 4),
                          answer={"predictions": preds, "edges_kept": kept})

    def score_cell(self, result: CellResult) -> dict[str, float | None]:
        preds = [np.asarray(p, dtype=float) for p in result.answer["predictions"]]
        if len(preds) != len(SIZES) or any(p.shape != (N_TEST,) for p in preds):
            raise ValueError(f"answer['predictions'] must be {len(SIZES)} arrays of {N_TEST} test predictions")
        truth = target(data(result.seed)[2])
        errors = [float(math.sqrt(np.mean((p - truth) ** 2))) for p in preds]
        slope = loglog_slope(SIZES, errors)
        kept = result.answer["edges_kept"][-1]
        return {"slope": slope, "slope_gap": slope - THEORY_SLOPE, **{f"l2_n{n}": e for n, e in zip(SIZES, errors)},
                "edges_kept": None if kept is None else float(kept)}
