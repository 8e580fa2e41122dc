"""Task `ptq_priced_bitalloc`: priced post-training quantisation (the paper's method) against
uniform bits, weight-MSE allocation and a diagonal-Hessian proxy, on a digits MLP (ours).

The price of quantising layer l with candidate c is rho = 1/2 Tr(H_l Sigma_l(c)): H_l the Fisher of
the cross-entropy with respect to the layer's output (pre-activation), exact for softmax
(J^T (diag p - p p^T) J averaged over calibration inputs), Sigma_l(c) the covariance of the
layer-output error the candidate's weights cause on the same inputs. Prices add over layers, so
the best configuration under a bit budget is an exact multiple-choice knapsack (a Pareto DP).
Baselines price with ||dW||^2 (weight MSE) or 1/2 sum E[a_i^2] H_jj dW_ij^2 (diagonal Gauss-Newton
proxy), or take the most bits that fit uniformly. The scorer measures test accuracy of the chosen
configuration and the Spearman correlation of a solver's prices with the true single-layer
cross-entropy increase on the test split.
"""

from __future__ import annotations

import time
import warnings
from functools import lru_cache
from itertools import product
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import Field

from environments.papers.base import CellResult, Claim, Condition, Departure, PaperOptions, PaperTask, describe_claim

BITS = (2, 3, 4, 8)
GRANULARITIES = ("tensor", "channel")
CANDIDATES = tuple(product(BITS, GRANULARITIES))
SCALE_BITS = 32  # one float scale per tensor or per output channel, counted in the budget
BUDGETS = {"2.5bits": 2.5, "3bits": 3.0}  # average bits per weight, scales included
HIDDEN = (64, 32)
N_TRAIN, N_CALIB = 1000, 300
Solver = Literal["priced", "uniform", "weight_mse", "diag_hessian"]


class Options(PaperOptions):
    solver: Solver = Field("priced", description="priced (the paper's method), uniform, weight_mse, diag_hessian (baselines)")


class Net:
    """A trained ReLU MLP as plain arrays: weights (in x out) and biases per layer."""

    def __init__(self, weights: list[np.ndarray], biases: list[np.ndarray]):
        self.weights, self.biases = weights, biases

    def forward(self, x: np.ndarray, weights: list[np.ndarray] | None = None) -> tuple[np.ndarray, list[np.ndarray], list[np.ndarray]]:
        """Logits, each layer's input activations and each layer's pre-activation output."""
        weights = weights or self.weights
        inputs, outputs, a = [], [], x
        for i, (w, b) in enumerate(zip(weights, self.biases)):
            inputs.append(a)
            z = a @ w + b
            outputs.append(z)
            a = np.maximum(z, 0.0) if i < len(weights) - 1 else z
        return a, inputs, outputs


def softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def cross_entropy(logits: np.ndarray, y: np.ndarray) -> float:
    p = softmax(logits)
    return float(-np.log(p[np.arange(y.size), y] + 1e-12).mean())


def accuracy(logits: np.ndarray, y: np.ndarray) -> float:
    return float((logits.argmax(axis=1) == y).mean())


@lru_cache(maxsize=8)
def trained(seed: int) -> tuple[Net, tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """The seed's split (train, calibration inside train, test) and its trained MLP."""
    from sklearn.datasets import load_digits
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.neural_network import MLPClassifier
    from threadpoolctl import threadpool_limits

    x, y = load_digits(return_X_y=True)
    x = x / 16.0
    order = np.random.default_rng(seed).permutation(len(y))
    train, test = order[:N_TRAIN], order[N_TRAIN:]
    clf = MLPClassifier(hidden_layer_sizes=HIDDEN, max_iter=300, random_state=seed)
    # One BLAS thread: the matrices are small, and threads fighting over 2 shared cores made
    # training 5x slower than single-threaded.
    with warnings.catch_warnings(), threadpool_limits(1):
        warnings.simplefilter("ignore", ConvergenceWarning)
        clf.fit(x[train], y[train])
    net = Net([w.copy() for w in clf.coefs_], [b.copy() for b in clf.intercepts_])
    calib = train[:N_CALIB]
    return net, (x[calib], y[calib]), (x[test], y[test]), (x[train], y[train])


def quantise(w: np.ndarray, bits: int, granularity: str) -> np.ndarray:
    """Symmetric uniform quantisation, one scale per tensor or per output channel (column)."""
    qmax = 2 ** (bits - 1) - 1
    peak = np.abs(w).max(axis=0, keepdims=True) if granularity == "channel" else np.abs(w).max()
    scale = np.where(peak > 0, peak / qmax, 1.0)
    return np.clip(np.round(w / scale), -qmax, qmax) * scale


def cost_bits(w: np.ndarray, bits: int, granularity: str) -> int:
    return bits * w.size + SCALE_BITS * (w.shape[1] if granularity == "channel" else 1)


def output_fisher(net: Net, x: np.ndarray) -> list[np.ndarray]:
    """H_l = E_x[J_l^T (diag p - p p^T) J_l], J_l the Jacobian of the logits w.r.t. layer l's output."""
    logits, _, outputs = net.forward(x)
    p = softmax(logits)
    fisher = np.einsum("ni,ij->nij", p, np.eye(p.shape[1])) - np.einsum("ni,nj->nij", p, p)
    jac = np.broadcast_to(np.eye(p.shape[1]), (len(x), p.shape[1], p.shape[1]))
    hs = [np.einsum("nki,nkl,nlj->ij", jac, fisher, jac) / len(x)]
    for layer in range(len(net.weights) - 1, 0, -1):  # back through layer's weights and the ReLU below
        jac = np.einsum("nkj,ij->nki", jac, net.weights[layer]) * (outputs[layer - 1] > 0)[:, None, :]
        hs.insert(0, np.einsum("nki,nkl,nlj->ij", jac, fisher, jac) / len(x))
    return hs


def price_table(net: Net, x_calib: np.ndarray, solver: str) -> list[list[float]]:
    """prices[layer][candidate] under the solver's pricing rule."""
    _, inputs, _ = net.forward(x_calib)
    hs = output_fisher(net, x_calib) if solver in ("priced", "diag_hessian") else None
    table = []
    for layer, w in enumerate(net.weights):
        row = []
        for bits, gran in CANDIDATES:
            dw = quantise(w, bits, gran) - w
            if solver == "weight_mse":
                row.append(float((dw ** 2).sum()))
            elif solver == "priced":  # 1/2 Tr(H Sigma), Sigma = E[dz dz^T], dz = a dW
                dz = inputs[layer] @ dw
                row.append(0.5 * float(np.einsum("ni,ij,nj->", dz, hs[layer], dz)) / len(x_calib))
            else:  # diagonal proxy: 1/2 sum_ij E[a_i^2] H_jj dW_ij^2
                a2 = (inputs[layer] ** 2).mean(axis=0)
                row.append(0.5 * float((a2[:, None] * np.diag(hs[layer])[None, :] * dw ** 2).sum()))
        table.append(row)
    return table


def knapsack(prices: list[list[float]], costs: list[list[int]], budget: float) -> list[int]:
    """Exact multiple-choice knapsack: one candidate per layer, total cost <= budget, least total
    price. Keeps the Pareto front of (cost, price) over the layers so far (prices add, so a
    dominated partial choice can never complete to the optimum)."""
    front: list[tuple[int, float, tuple[int, ...]]] = [(0, 0.0, ())]
    for layer_prices, layer_costs in zip(prices, costs):
        states = sorted((c + lc, p + lp, ch + (k,)) for c, p, ch in front
                        for k, (lp, lc) in enumerate(zip(layer_prices, layer_costs)) if c + lc <= budget)
        front, best = [], float("inf")
        for state in states:
            if state[1] < best:
                front.append(state)
                best = state[1]
    if not front:
        raise ValueError(f"no configuration fits the budget of {budget:g} bits")
    return list(min(front, key=lambda s: s[1])[2])


def uniform_choice(costs: list[list[int]], budget: float) -> list[int]:
    """The most bits every layer can have at once (per-channel first at equal bits)."""
    order = sorted(range(len(CANDIDATES)), key=lambda k: (CANDIDATES[k][0], CANDIDATES[k][1] == "channel"), reverse=True)
    for k in order:
        if sum(layer[k] for layer in costs) <= budget:
            return [k] * len(costs)
    raise ValueError(f"no uniform configuration fits the budget of {budget:g} bits")


def layer_costs(net: Net) -> list[list[int]]:
    return [[cost_bits(w, b, g) for b, g in CANDIDATES] for w in net.weights]


def budget_bits(net: Net, setting: str) -> float:
    return BUDGETS[setting] * sum(w.size for w in net.weights)


class PtqPricedTask(PaperTask):
    task = "ptq_priced_bitalloc"
    name = "papers.ptq_priced_bitalloc"
    version = "0.1.0"
    headline_metric = "accuracy@2.5bits"
    Options = Options
    solvers = ("priced", "uniform", "weight_mse", "diag_hessian")
    settings = tuple(BUDGETS)
    metric_names = ("accuracy", "spearman", "bits_per_weight", "fp_accuracy")
    claim: ClassVar[Claim] = Claim(
        id=name, arms=solvers, settings=settings,
        sentence="Priced PTQ: choose quantisation configurations by a price, half the trace of curvature times the "
                 "layer-output error covariance; budgeted selection",
        setting="sklearn MLP 64-64-32-10 on load_digits (1000 train, 300 of them calibration, 797 test); "
                "candidates 2/3/4/8 bits x per-tensor/per-channel symmetric; budgets 2.5 and 3 bits per weight "
                "with 32-bit scales counted; exact knapsack over the 3 layers",
        conditions=[Condition(metric="spearman", setting="2.5bits", solver="priced", op=">=", threshold=0.8)]
        + [Condition(metric="accuracy", setting="2.5bits", solver="priced", versus=b, op=">=", threshold=0.05)
           for b in ("uniform", "weight_mse", "diag_hessian")],
        departures=[
            Departure(paper="proposes the price and budgeted selection (the summary gives no comparison or numbers)",
                      ours="test PAPER_TASKS.md's reading: the price predicts degradation (Spearman >= 0.8 with the "
                           "true single-layer test cross-entropy increase) and its selection beats uniform bits, "
                           "weight-MSE and diagonal-Hessian allocation by >= 5 points of accuracy at 2.5 bits per "
                           "weight",
                      why="only the abstract is known (PAPERS.md), and a check needs a comparison and a margin",
                      effect="the verdict rests on our margin and budget: at 3 bits the priced selection beats "
                             "weight-MSE by +0.28 and the diagonal Hessian by +0.04; at 2.5 bits it ties them"),
            Departure(paper="quantises networks the summary does not name (presumably far larger)",
                      ours="quantise a scikit-learn MLP 64-64-32-10 on load_digits: 3 weight layers, 8 candidates "
                           "each",
                      why="exact Fisher and exact knapsack are feasible; CPU budget",
                      effect="with three layers the configuration space is tiny and the three knapsack pricers "
                             "mostly pick the same configuration at 2.5 bits, so the margins vanish (the failed and "
                             "undecided conditions); in deep networks, where prices disagree more, the gaps may be "
                             "larger"),
            Departure(paper="counts a budget in bits (what is counted is not in the summary)",
                      ours="count each 32-bit quantisation scale in the budget",
                      why="our choice: scales are real storage",
                      effect="scales make per-channel candidates expensive in 64-unit layers and narrow the options "
                             "at 2.5 bits, the budget the criterion reads"),
            Departure(paper="uses a curvature H (how it is estimated at scale is not in the summary)",
                      ours="use the exact Fisher of the cross-entropy with respect to each layer's pre-activation "
                           "output, and Sigma exactly from 300 unlabelled calibration inputs",
                      why="feasible at width 64",
                      effect="an exact H favours the method over the approximations a large model needs"),
            Departure(paper="chooses among quantisation configurations (the candidate set is not in the summary)",
                      ours="offer round-to-nearest symmetric uniform weight quantisation only: 2/3/4/8 bits x "
                           "per-tensor or per-channel, biases in float, no activation quantisation, no "
                           "error-correcting rounding (GPTQ-like)",
                      why="PAPER_TASKS.md's candidates",
                      effect="the price is tested on weight-only round-to-nearest grids; the Spearman condition "
                             "reads single-layer perturbations only, so the additivity of prices over layers is "
                             "tested only through the selections"),
        ],
    )
    description = describe_claim(task, claim, solvers)

    def solve_cell(self, setting: str, seed: int, solver: str) -> CellResult:
        t0 = time.perf_counter()
        net, (x_calib, _), _, _ = trained(seed)  # the method sees calibration inputs only, never labels
        costs, budget = layer_costs(net), budget_bits(net, setting)
        prices = None if solver == "uniform" else price_table(net, x_calib, solver)
        choice = uniform_choice(costs, budget) if prices is None else knapsack(prices, costs, budget)
        answer: dict[str, Any] = {"allocation": [list(CANDIDATES[k]) for k in choice], "prices": prices,
                                  "cost_bits": sum(costs[i][k] for i, k in enumerate(choice)), "budget_bits": budget}
        return CellResult(solver=solver, setting=setting, seed=seed, answer=answer, wall_s=round(time.perf_counter() - t0, 4))

    def score_cell(self, result: CellResult) -> dict[str, float | None]:
        from scipy.stats import spearmanr

        net, _, (x_test, y_test), _ = trained(result.seed)
        answer = result.answer
        if answer["cost_bits"] > answer["budget_bits"]:
            raise ValueError(f"allocation costs {answer['cost_bits']} bits, over the budget of {answer['budget_bits']:g}")
        weights = [quantise(w, int(b), str(g)) for w, (b, g) in zip(net.weights, answer["allocation"])]
        logits_fp = net.forward(x_test)[0]
        spearman = None
        if answer["prices"] is not None:
            base = cross_entropy(logits_fp, y_test)
            true = [cross_entropy(net.forward(x_test, [quantise(w, b, g) if i == layer else w
                                                      for i, w in enumerate(net.weights)])[0], y_test) - base
                    for layer in range(len(net.weights)) for b, g in CANDIDATES]
            spearman = float(spearmanr(np.ravel(answer["prices"]), true).statistic)
        return {"accuracy": accuracy(net.forward(x_test, weights)[0], y_test), "spearman": spearman,
                "bits_per_weight": answer["cost_bits"] / sum(w.size for w in net.weights),
                "fp_accuracy": accuracy(logits_fp, y_test)}
