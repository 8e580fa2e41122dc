"""Task `sbkan_aniso_rates`: does the posterior of a sparse Bayesian KAN (B-spline edges,
spike-and-slab edge priors, a hyperprior on the number of knot intervals; `sbkan_model.py`)
contract at the anisotropic minimax rate, adapting to the unknown smoothness as well as a model
tuned with the smoothness known?

Settings (ours): regression on [0, 1]^2 with N(0, 0.3^2) noise, the target normalised to unit
variance. `aniso_rough`: f = W_0.5(x1) W_1.5(x2); `aniso_smooth`: f = W_2(x1) W_4(x2), with
W_s(t) = sum_{k<8} 2^{-ks} cos(2^k pi t) (Hoelder smoothness s in its coordinate; products of them
lie in the anisotropic Hoelder-Besov ball of smoothness (s1, s2)); `compositional`: f = g(W_1(x1)/c1
+ W_2(x2)/c2), g(v) = sin(1.5 v) (an additive inner layer of smoothness (1, 2) inside a smooth outer
function). Per seed and n in SIZES the sampler runs BURN + KEEP sweeps; the posterior draws are
evaluated on N_TEST fresh test points.

Metrics per cell: `exponent` (minus the log-log slope of the posterior mean L2 distance
E[||f - f0||_2 | data] against n: the contraction exponent), `exponent_gap` (minus the theory
exponent), `l2_n*` (the posterior mean L2 distance at each n), `log_l2_nmax`, `mass_outside` (the
posterior mass, at the largest n, outside the ball of radius 2 d_min (n / n_min)^{-theory}, d_min
the posterior mean distance at the smallest n: a ball shrinking at the minimax rate),
`pruned_share` (posterior mean share of the d x hidden inner edges that do not reach the output
at the largest n), `knots` (posterior mean interval count at the largest n, coordinate 1),
`accept_inner` (the Gauss-Newton move's acceptance rate).
"""

from __future__ import annotations

import math
import time
from functools import lru_cache
from typing import ClassVar, Literal

import numpy as np
from pydantic import Field
from threadpoolctl import threadpool_limits

from environments.papers.base import CellResult, Claim, Condition, Departure, PaperOptions, PaperTask, describe_claim
from environments.papers.sbkan_model import SBKAN, Prior, active_edges

SMOOTHNESS = {"aniso_rough": (0.5, 1.5), "aniso_smooth": (2.0, 4.0), "compositional": (1.0, 2.0)}
BASE_SIZES = (128, 256, 512, 1024)
N_TEST, NOISE, BURN, KEEP, DRAWS, HIDDEN = 512, 0.3, 40, 40, 20, 2
INNER_STEP, SIZE_NEWTON, STARTS = 3.3, 2, 3
MARGIN, ORACLE_FACTOR, PRUNED_MIN = 0.1, 1.5, 0.2
Solver = Literal["sbkan", "oracle"]


def effective(s: tuple[float, ...]) -> float:
    return 1 / sum(1 / v for v in s)


def theory_exponent(setting: str) -> float:
    """The minimax L2 exponent: s~/(2 s~ + 1) over the anisotropic class; for the composition
    the worst layer's, here the inner layer's rougher coordinate (dimension 1 per edge):
    s1/(2 s1 + 1) with the smooth outer function (Schmidt-Hieber's effective smoothness)."""
    s = SMOOTHNESS[setting]
    rate = min(s) if setting == "compositional" else effective(s)
    return rate / (2 * rate + 1)


def oracle_intervals(setting: str, n: int) -> tuple[int, ...]:
    """The oracle's knot intervals per coordinate: m_p = n^{s~ / (s_p (2 s~ + 1))} (bias s_p-th
    power of 1/m_p equal across coordinates and to the variance; constant 1), rounded; for the
    composition each inner edge's univariate rate, n^{1 / (2 s_p + 1)}."""
    s = SMOOTHNESS[setting]
    if setting == "compositional":
        powers = [1 / (2 * v + 1) for v in s]
    else:
        powers = [effective(s) / (v * (2 * effective(s) + 1)) for v in s]
    return tuple(max(1, round(n**a)) for a in powers)


def weierstrass(t: np.ndarray, s: float) -> np.ndarray:
    k = np.arange(8)
    return np.asarray((2.0 ** (-k * s) * np.cos(np.pi * 2.0**k * t[..., None])).sum(axis=-1))


def raw_target(setting: str, x: np.ndarray) -> np.ndarray:
    s1, s2 = SMOOTHNESS[setting]
    if setting == "compositional":
        inner = weierstrass(x[:, 0], s1) / _scale(s1) + weierstrass(x[:, 1], s2) / _scale(s2)
        return np.sin(1.5 * inner)
    return np.asarray(weierstrass(x[:, 0], s1) * weierstrass(x[:, 1], s2))


@lru_cache(maxsize=8)
def _scale(s: float) -> float:
    return float(np.std(weierstrass(np.linspace(0, 1, 100_001), s)))


@lru_cache(maxsize=8)
def _normaliser(setting: str) -> tuple[float, float]:
    raw = raw_target(setting, np.random.default_rng(0).random((200_000, 2)))
    return float(raw.mean()), float(raw.std())


def target(setting: str, x: np.ndarray) -> np.ndarray:
    mean, sd = _normaliser(setting)
    return (raw_target(setting, x) - mean) / sd


def sizes(scale: int) -> tuple[int, ...]:
    return tuple(n * scale for n in BASE_SIZES)


def data(setting: str, seed: int, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The training set of n points for (setting, seed, n), and the seed's test inputs."""
    rng = np.random.default_rng([seed, list(SMOOTHNESS).index(setting)])
    x = rng.random((n, 2))
    y = target(setting, x) + NOISE * rng.standard_normal(n)
    x_test = np.random.default_rng([seed, 99]).random((N_TEST, 2))
    return x, y, x_test


def posterior_draws(setting: str, solver: str, seed: int, n: int) -> dict[str, object]:
    """Run the chain at one n: the thinned draws' test predictions and the chain's summaries."""
    x, y, x_test = data(setting, seed, n)
    prior = Prior(
        noise=NOISE,
        fixed_m=oracle_intervals(setting, n) if solver == "oracle" else None,
        inner_step=INNER_STEP,
        size_newton=SIZE_NEWTON,
        hidden=HIDDEN,
    )
    model = SBKAN(prior, x, y)
    rng = np.random.default_rng([seed, n, 7])
    starts = []
    for r in range(STARTS):  # the best of a few Gauss-Newton warm starts: the KAN's posterior has many modes
        state = model.initial_state(rng, units=1 if r == 0 else None)  # one sparse start, the others dense
        model.warm_start(state, rng)
        starts.append((model.log_collapsed(state), r, state))
    state = max(starts)[2]
    state.stats.clear()
    preds, pruned, knots = [], [], []
    thin = KEEP // DRAWS
    for sweep in range(BURN + KEEP):
        model.sweep(state, rng)
        if sweep >= BURN and (sweep - BURN) % thin == 0:
            preds.append(np.round(model.predict_at(state, x_test), 5).tolist())
            pruned.append(1 - active_edges(state) / (prior.units * prior.d))
            knots.append(state.m[0])
    stats = state.stats
    return {
        "predictions": preds,
        "pruned_share": float(np.mean(pruned)),
        "knots": float(np.mean(knots)),
        "accept_inner": stats.get("inner_accepted", 0) / max(1, stats.get("inner_tried", 0)),
        "accept_size": stats.get("size_accepted", 0) / max(1, stats.get("size_tried", 0)),
    }


class Options(PaperOptions):
    solver: Solver = Field(
        "sbkan",
        description="sbkan (the paper's method: hyperprior on the knot count), "
        "oracle (knots per coordinate set from the true smoothness)",
    )
    scale: int = Field(
        1,
        ge=1,
        le=64,
        description="multiplies every sample size n (1: the registered check's "
        "n = 256..2048; the paper's asymptotics need far larger n)",
    )


def log_log_exponent(ns: tuple[int, ...], distances: list[float]) -> float:
    slope = np.polyfit(np.log(np.asarray(ns, dtype=float)), np.log(np.asarray(distances, dtype=float)), 1)[0]
    return float(-slope)


class SBKANTask(PaperTask[Options]):
    task = "sbkan_aniso_rates"
    name = "papers.sbkan_aniso_rates"
    version = "0.2.0"
    headline_metric = "exponent@aniso_rough"
    Options = Options
    solvers = ("sbkan", "oracle")
    settings = tuple(SMOOTHNESS)
    metric_names = (
        ("exponent", "exponent_gap")
        + tuple(f"l2_n{n}" for n in BASE_SIZES)
        + ("log_l2_nmax", "mass_outside", "pruned_share", "knots", "accept_inner", "accept_size")
    )
    lower_is_better = frozenset({*(f"l2_n{n}" for n in BASE_SIZES), "log_l2_nmax", "mass_outside"})
    claim: ClassVar[Claim] = Claim(
        id=name,
        arms=solvers,
        settings=settings,
        sentence="Sparse Bayesian KANs with spike-and-slab priors attain near-minimax posterior contraction over "
        "anisotropic Besov spaces; a hyperprior on one model-size parameter adapts to unknown smoothness; "
        "spline edge functions at fixed depth; the results extend to compositional targets",
        setting=f"regression on [0,1]^2, noise sd {NOISE} (known), unit-variance targets: aniso_rough W_0.5(x1) "
        f"W_1.5(x2) (theory exponent {theory_exponent('aniso_rough'):.3f}), aniso_smooth W_2(x1) W_4(x2) "
        f"({theory_exponent('aniso_smooth'):.3f}), compositional sin(1.5 (W_1(x1)/c1 + W_2(x2)/c2)) "
        f"({theory_exponent('compositional'):.3f}); n = {BASE_SIZES}; KAN 2-{HIDDEN}-1, cubic B-spline edges "
        f"(inner: m uniform intervals, outer on sigmoid(h): 8), spike-and-slab per edge (inclusion 0.5, "
        f"slab N(0, 1) inner / N(0, 4) outer), hyperprior pi(m) ~ exp(-0.05 m log(m + 1)) on m in "
        f"{{1,2,4,...,32}}; MCMC {BURN} burn-in + {KEEP} sweeps after the best of {STARTS} Gauss-Newton "
        f"warm starts, {DRAWS} draws kept; posterior mean L2 distance on {N_TEST} test points",
        conditions=[
            *[
                Condition(
                    metric="exponent",
                    setting=s,
                    arm="sbkan",
                    op=op,
                    threshold=round(theory_exponent(s) + sign * MARGIN, 6),
                )
                for s in SMOOTHNESS
                for op, sign in ((">=", -1), ("<=", 1))
            ],
            *[
                Condition(
                    metric="log_l2_nmax",
                    setting=s,
                    arm="sbkan",
                    versus="oracle",
                    op="<=",
                    threshold=round(math.log(ORACLE_FACTOR), 6),
                )
                for s in SMOOTHNESS
            ],
            Condition(metric="pruned_share", setting="compositional", arm="sbkan", op=">=", threshold=PRUNED_MIN),
        ],
        protocol={
            "sizes": ",".join(map(str, BASE_SIZES)),
            "burn": BURN,
            "keep": KEEP,
            "draws": DRAWS,
            "n_test": N_TEST,
            "noise": NOISE,
            "hidden": HIDDEN,
            "m_out": 8,
            "size_penalty": 0.05,
            "starts": STARTS,
            "grid": "1,2,4,8,16,32",
            "inclusion": 0.5,
            "inner_step": INNER_STEP,
            "size_newton": SIZE_NEWTON,
        },
        note=f"exponent = minus the fitted log-log slope of the posterior mean L2 distance against n; the band is "
        f"theory +- {MARGIN} (ours); adaptive within a factor {ORACLE_FACTOR} of the oracle's posterior mean "
        f"distance at the largest n (ours); pruned_share >= {PRUNED_MIN} on the compositional target, whose "
        "truth needs one of the two hidden units (ours). Pre-asymptotic sizes: a miss is a legitimate result",
        departures=[
            Departure(
                paper="proves posterior contraction asymptotically in n for the exact posterior",
                ours=f"measure the posterior mean L2 distance at n = {BASE_SIZES} from short MCMC chains "
                f"({BURN} burn-in + {KEEP} sweeps from a Gauss-Newton warm start; the sampler is exact "
                "in distribution and is checked against the enumerated posterior of the linear-in-basis "
                "model, but convergence of the short KAN chains is not proven), and fit the exponent "
                "over a factor 8 in n",
                why="the check must fit 15 minutes on 2 shared CPU cores",
                effect="pre-asymptotic sizes and unconverged chains can move the fitted exponent either way; "
                "a chain stuck near its warm start understates the posterior spread (the mass "
                "outside the ball) more than the distance",
            ),
            Departure(
                paper="treats anisotropic Besov balls (worst case over the class)",
                ours="use one function per setting: products of lacunary Weierstrass-type series (Hoelder "
                "smoothness s_i in coordinate i) and one composition of them",
                why="a worst case over a class cannot be sampled; lacunary series sit at the edge of their "
                "smoothness class (their level-k coefficients are exactly 2^{-ks})",
                effect="a product is easier than a generic member of the class: its best rate is the "
                "rougher coordinate's univariate one, s1/(2 s1 + 1) (0.25 and 0.4 here against the "
                "anisotropic 0.214 and 0.364), inside the band",
            ),
            Departure(
                paper="states the rate; 'near-minimax' and 'adapts' carry no numeric tolerance",
                ours=f"band theory +- {MARGIN} on the exponent, adaptive within a factor {ORACLE_FACTOR} of "
                f"the oracle, pruned share >= {PRUNED_MIN} (all ours); the oracle's knots use the "
                "theoretical formula with constant 1",
                why="a check needs thresholds; none is in the abstract",
                effect="different margins can change the verdict; the oracle with constant 1 is not the "
                "best-tuned fixed model, so the adaptive one can even beat it",
            ),
            Departure(
                paper="the network's depth is fixed; its width, outer edges and noise level follow the theory",
                ours=f"KAN 2-{HIDDEN}-1 with 8 fixed outer intervals on sigmoid(h), known noise sd, inclusion "
                "probability 0.5 without its own hyperprior, uniform (not clamped) knots, the knot count "
                "on a dyadic grid; each chain starts from the best (outer layer integrated out) of "
                f"{STARTS} Gauss-Newton warm starts, one with a single hidden unit",
                why="small enough to sample here; the model-size hyperprior is on the inner knot count, "
                "where the anisotropic smoothness enters",
                effect="a too-coarse outer layer or too few units set an approximation floor that flattens "
                "the error curve (against the claim)",
            ),
        ],
    )
    description = describe_claim(task, claim, solvers)

    @property
    def scale(self) -> int:
        return int(self.options.scale)

    def solve_cell(self, setting: str, seed: int, solver: str) -> CellResult:
        t0 = time.perf_counter()
        with threadpool_limits(1):  # small matrices on shared cores: BLAS threads only fight
            runs = [posterior_draws(setting, solver, seed, n) for n in sizes(self.scale)]
        return CellResult(
            solver=solver,
            setting=setting,
            seed=seed,
            wall_s=round(time.perf_counter() - t0, 4),
            answer={"sizes": list(sizes(self.scale)), "runs": runs},
        )

    def score_cell(self, result: CellResult) -> dict[str, float | None]:
        ns = tuple(int(n) for n in result.answer["sizes"])
        runs = result.answer["runs"]
        if len(ns) < 2 or len(runs) != len(ns):
            raise ValueError(f"answer: needs one run per size (>= 2 sizes); got {len(runs)} runs for sizes {ns}")
        truth = target(result.setting, data(result.setting, result.seed, ns[0])[2])
        per_n = []
        for run in runs:
            draws = np.asarray(run["predictions"], dtype=float)
            if draws.ndim != 2 or draws.shape[1] != N_TEST:
                raise ValueError(f"answer: each run's predictions must be draws x {N_TEST} test values")
            per_n.append(np.sqrt(((draws - truth) ** 2).mean(axis=1)))  # L2 distance of each draw
        means = [float(d.mean()) for d in per_n]
        theory = theory_exponent(result.setting)
        exponent = log_log_exponent(ns, means)
        radius = 2 * means[0] * (ns[-1] / ns[0]) ** (-theory)
        last = runs[-1]
        return {
            "exponent": exponent,
            "exponent_gap": exponent - theory,
            **{f"l2_n{n}": d for n, d in zip(BASE_SIZES, means)},
            "log_l2_nmax": math.log(means[-1]),
            "mass_outside": float((per_n[-1] > radius).mean()),
            "pruned_share": float(last["pruned_share"]),
            "knots": float(last["knots"]),
            "accept_inner": float(np.mean([r["accept_inner"] for r in runs])),
            "accept_size": float(np.mean([r["accept_size"] for r in runs])),
        }
