"""Task `plugin_fractional_threshold`: the F-score / Jaccard-optimal threshold as a fixed point
estimated from unlabelled data (the paper's method) against a validation-tuned threshold and 0.5,
on a synthetic logistic model (ours).

The optimal classifier thresholds the regression function eta(x) = P(y=1 | x) at delta*, the unique
root of delta = F(delta) / 2 (F1; Jaccard: delta = J(delta) / (1 + J(delta)), the same point since
J = F / (2 - F)). With plug-in estimates, F(delta) = 2 E[eta 1{eta > delta}] / (E[eta] +
P(eta > delta)) needs no labels: eta_hat (a logistic regression fitted on the n_l labelled points)
and unlabelled inputs. h(delta) = delta (S + #{eta_hat > delta}) - sum_{eta_hat > delta} eta_hat is
continuous, piecewise linear and strictly increasing, so its root is found exactly, segment by
segment. All solvers share the fitted model; only the threshold differs. The scorer measures the
expected F1 and Jaccard on a large test sample with the true eta as soft labels, and the excess
over the Bayes-optimal classifier (true eta at its own fixed point).
"""

from __future__ import annotations

import time
from functools import lru_cache
from typing import ClassVar, Literal

import numpy as np
from pydantic import Field

from environments.papers.base import (
    CellResult,
    Claim,
    Condition,
    Departure,
    PaperOptions,
    PaperTask,
    SeedPlan,
    describe_claim,
)

DIM = 10
WEIGHTS = np.linspace(1.0, 0.1, DIM) * (2.5 / np.linalg.norm(np.linspace(1.0, 0.1, DIM)))  # ||w|| = 2.5
BIAS = -2.0  # about 22% positives
N_LABELLED = (200, 1000, 5000)  # nested: each seed's first n_l labelled points
N_UNLABELLED, N_TEST, FOLDS = 20_000, 100_000, 5
SIZES = tuple(f"nl{n}" for n in N_LABELLED)
Solver = Literal["fixed_point", "validation", "half"]


class Options(PaperOptions):
    solver: Solver = Field("fixed_point", description="fixed_point (the paper's method), validation, half (baselines)")
    seeds: int = Field(20, ge=1, le=500, description="seeds (samples = seeds, seeds 0..N-1); cells are cheap")


def true_eta(x: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-(x @ WEIGHTS + BIAS)))


@lru_cache(maxsize=4)
def cell_data(seed: int) -> dict[str, np.ndarray]:
    """The seed's labelled, unlabelled and test inputs (x ~ N(0, I)), and the labelled y ~ Bernoulli(eta)."""
    rng = np.random.default_rng(seed)
    x_lab = rng.standard_normal((max(N_LABELLED), DIM))
    y_lab = (rng.random(len(x_lab)) < true_eta(x_lab)).astype(int)
    return {
        "x_lab": x_lab,
        "y_lab": y_lab,
        "x_unl": rng.standard_normal((N_UNLABELLED, DIM)),
        "x_test": rng.standard_normal((N_TEST, DIM)),
    }


def fixed_point(eta: np.ndarray) -> float:
    """The exact root of delta = F(delta) / 2 under the empirical measure with soft labels eta:
    with the top k scores above delta, h(delta) = delta (S + k) - C_k (C_k their sum), so the root
    on that segment is C_k / (S + k); exactly one segment holds its own root."""
    desc = np.sort(np.asarray(eta, dtype=float))[::-1]
    k = np.arange(len(desc) + 1)
    roots = np.concatenate([[0.0], np.cumsum(desc)]) / (desc.sum() + k)
    upper = np.concatenate([[np.inf], desc])  # delta < the k-th score keeps it above
    lower = np.concatenate([desc, [-np.inf]])  # delta >= the (k+1)-th score drops it
    inside = np.nonzero((roots >= lower) & (roots < upper))[0]
    if inside.size == 0:
        raise ValueError("no segment holds the fixed point: the scores must lie in [0, 1]")
    return float(roots[inside[0]])


def expected_scores(eta: np.ndarray, predicted: np.ndarray) -> tuple[float, float]:
    """F1 and Jaccard of a 0/1 prediction in expectation over y ~ Bernoulli(eta)'s soft counts."""
    tp, pos, pred = float(eta @ predicted), float(eta.sum()), float(predicted.sum())
    return 2 * tp / (pos + pred), tp / (pos + pred - tp)


def fit(x: np.ndarray, y: np.ndarray, steps: int = 25) -> tuple[np.ndarray, float]:
    """L2-penalised logistic regression (scikit-learn's objective at C = 1: 1/2 ||coef||^2 plus the
    summed log-loss, intercept unpenalised) by Newton's method. Eleven parameters: a dozen exact
    Newton steps converge, and importing scikit-learn costs more than every fit of a check."""
    design = np.hstack([x, np.ones((len(x), 1))])
    penalty = np.eye(design.shape[1])
    penalty[-1, -1] = 0.0
    beta = np.zeros(design.shape[1])
    for _ in range(steps):
        p = 1 / (1 + np.exp(-(design @ beta)))
        grad = design.T @ (p - y) + penalty @ beta
        hess = (design * (p * (1 - p))[:, None]).T @ design + penalty
        step = np.linalg.solve(hess, grad)
        beta -= step
        if np.abs(step).max() < 1e-12:
            break
    return beta[:-1], float(beta[-1])


def predict(x: np.ndarray, coef: np.ndarray, intercept: float) -> np.ndarray:
    return np.asarray(1 / (1 + np.exp(-(x @ coef + intercept))))


def validation_threshold(x: np.ndarray, y: np.ndarray, seed: int) -> float:
    """The threshold of best empirical F1 on out-of-fold (cross-fitted) probabilities of the labelled
    data: F1 at the top k is 2 TP_k / (P + k); the threshold sits midway below the k-th score."""
    folds = np.random.default_rng([seed, 1]).permutation(len(y)) % FOLDS
    scores = np.empty(len(y))
    for f in range(FOLDS):
        coef, intercept = fit(x[folds != f], y[folds != f])
        scores[folds == f] = predict(x[folds == f], coef, intercept)
    order = np.argsort(-scores)
    f1 = 2 * np.cumsum(y[order]) / (y.sum() + np.arange(1, len(y) + 1))
    k = int(f1.argmax())
    below = scores[order[k + 1]] if k + 1 < len(y) else 0.0
    return float((scores[order[k]] + below) / 2)


class PluginThresholdTask(PaperTask[Options]):
    task = "plugin_fractional_threshold"
    name = "papers.plugin_fractional_threshold"
    version = "0.1.0"
    headline_metric = "excess_f1_nl200@logistic"
    Options = Options
    solvers = ("fixed_point", "validation", "half")
    settings = ("logistic",)
    metric_names = (
        tuple(f"excess_f1_{s}" for s in SIZES)
        + tuple(f"excess_jaccard_{s}" for s in SIZES)
        + tuple(f"threshold_{s}" for s in SIZES)
        + ("f1_drop_small", "f1_drop_large", "oracle_threshold")
    )
    lower_is_better = frozenset(n for n in metric_names if n.startswith("excess_"))
    claim: ClassVar[Claim] = Claim(
        id=name,
        arms=solvers,
        settings=settings,
        plan=SeedPlan(looks=(20,)),
        sentence="Plug-in classifiers for F-score/Jaccard: the optimal classifier thresholds the regression "
        "function; the threshold is a fixed point computable from unlabeled data",
        setting=f"x ~ N(0, I_{DIM}), eta = sigmoid(w.x - 2), ||w|| = 2.5 (~22% positives); logistic regression "
        f"fitted on n_l = 200/1000/5000 labelled points (nested), {N_UNLABELLED} unlabelled for the fixed "
        f"point, {N_TEST} test points scored with the true eta as soft labels; validation = best F1 on "
        f"{FOLDS}-fold out-of-fold probabilities; half = 0.5; 20 seeds",
        conditions=[
            Condition(
                metric=f"excess_f1_{s}",
                setting="logistic",
                solver="fixed_point",
                versus="validation",
                op="<=",
                threshold=0.0,
            )
            for s in SIZES
        ]
        + [
            Condition(metric=m, setting="logistic", solver="fixed_point", op=">=", threshold=0.0)
            for m in ("f1_drop_small", "f1_drop_large")
        ],
        note="excess = Bayes F1 - the solver's F1 (lower is better); f1_drop_small = excess at 200 - at 1000, "
        "f1_drop_large = excess at 1000 - at 5000 (excess falls with n)",
        departures=[
            Departure(
                paper="states a characterisation of the optimal classifier and that its threshold is "
                "computable from unlabelled data (no comparison in the summary)",
                ours="test PAPER_TASKS.md's reading: the plug-in fixed point has lower excess F1 than a "
                "validation-tuned threshold at every labelled size n_l (paired by seed, interval below "
                "0), and its excess falls with n_l",
                why="only the abstract is known (PAPERS.md), and a check needs a comparison and a margin",
                effect="a theory claim is checked as a finite-sample comparison with one baseline: "
                "'reproduced' means the fixed point wins here, not that the paper's consistency or "
                "rates hold",
            ),
            Departure(
                paper="states its result for any distribution and any regression estimate the theory allows",
                ours="use one synthetic model: x ~ N(0, I_10), eta = sigmoid(w.x - 2) with ||w|| = 2.5 (~22% "
                "positives), estimated by L2-penalised logistic regression (well specified); 20000 "
                "unlabelled and 100000 test points",
                why="exact Bayes F1 needs the true eta",
                effect="a well-specified, calibrated eta_hat favours any plug-in rule; with a misspecified or "
                "miscalibrated eta_hat the fixed point inherits the error and the validation threshold, "
                "which reads labels, may win",
            ),
            Departure(
                paper="covers both the F-score and the Jaccard index",
                ours="score the expected F1 on the test points with the true eta as soft labels and decide on "
                "F1 only; Jaccard is reported, and its optimum is the same point (delta = J / (1 + J))",
                why="soft labels remove label noise from the comparison; the two optima coincide",
                effect="Jaccard adds no separate test; soft-label scoring lowers the variance, so small "
                "differences decide",
            ),
            Departure(
                paper="compares with baselines the summary does not name",
                ours="compare with a 5-fold validation-tuned threshold and 0.5 only (no cost-sensitive or "
                "ERM-based F-measure methods)",
                why="PAPER_TASKS.md's baselines",
                effect="the verdict is relative to validation tuning only",
            ),
        ],
    )
    description = describe_claim(task, claim, solvers)

    def solve_cell(self, setting: str, seed: int, solver: str) -> CellResult:
        t0 = time.perf_counter()
        data = cell_data(seed)
        models = []
        for n in N_LABELLED:
            x, y = data["x_lab"][:n], data["y_lab"][:n]
            coef, intercept = fit(x, y)
            if solver == "fixed_point":  # unlabelled inputs and the fitted model only
                threshold = fixed_point(predict(data["x_unl"], coef, intercept))
            elif solver == "validation":
                threshold = validation_threshold(x, y, seed)
            else:
                threshold = 0.5
            models.append({"n_labelled": n, "coef": coef.tolist(), "intercept": intercept, "threshold": threshold})
        return CellResult(
            solver=solver,
            setting=setting,
            seed=seed,
            answer={"models": models},
            wall_s=round(time.perf_counter() - t0, 4),
        )

    def score_cell(self, result: CellResult) -> dict[str, float | None]:
        models = result.answer["models"]
        if [m.get("n_labelled") for m in models] != list(N_LABELLED):
            raise ValueError(f"answer must hold one model per n_labelled {N_LABELLED}, in that order")
        x_test = cell_data(result.seed)["x_test"]
        eta = true_eta(x_test)
        delta_star = fixed_point(eta)
        best_f1, best_j = expected_scores(eta, (eta > delta_star).astype(float))
        scores: dict[str, float | None] = {"oracle_threshold": delta_star}
        for size, m in zip(SIZES, models):
            predicted = predict(x_test, np.asarray(m["coef"]), float(m["intercept"])) > float(m["threshold"])
            f1, jac = expected_scores(eta, predicted.astype(float))
            scores.update(
                {
                    f"excess_f1_{size}": best_f1 - f1,
                    f"excess_jaccard_{size}": best_j - jac,
                    f"threshold_{size}": float(m["threshold"]),
                }
            )
        scores["f1_drop_small"] = scores["excess_f1_nl200"] - scores["excess_f1_nl1000"]  # type: ignore[operator]
        scores["f1_drop_large"] = scores["excess_f1_nl1000"] - scores["excess_f1_nl5000"]  # type: ignore[operator]
        return scores
