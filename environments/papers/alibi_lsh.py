"""Task `alibi_positional_lsh`: ALiBi attention as the expectation of random contiguous block masks
from a positional LSH, estimated by averaging K sampled masks blockwise in near-linear time (the
paper's method), against exact dense ALiBi and independent per-entry masks (baselines), on random
single-head attention problems (ours).

The LSH: between positions t and t+1 a cut falls with probability 1 - e^{-m}, independently, and
positions with no cut between them share a block. So P(i and j share a block) = e^{-m |i - j|} =
exp(B_ij), B the ALiBi bias of slope m: E[mask] = exp(B) exactly, hence E[(exp(S) o mask) V] =
(exp(S) o exp(B)) V, the unnormalised ALiBi attention, and each sample costs only the blocks'
own (causal) attention. The estimate of the output is the ratio of the averaged numerator and
denominator. `iid_mask` draws every entry independently with the same probability (unbiased too,
but dense: quadratic); `exact` is dense ALiBi. A windowed baseline is deliberately absent: it is
biased but more accurate per FLOP, which is not what the paper claims.

A cell (slope, seed) records the estimated outputs at K = 16, 64, 256 on a 256-token problem, the
seconds per estimate at n = 512..4096 (K = 4, best of 3), and 400 single-mask replications of a
fixed scalar projection of the unnormalised output; the scorer recomputes the exact output and
derives the relative spectral error, the log-log slopes and the z-score of the Monte Carlo mean.
"""

from __future__ import annotations

import math
import time
from typing import ClassVar, Literal

import numpy as np
from pydantic import Field

from environments.papers.base import CellResult, Claim, Condition, Departure, PaperOptions, PaperTask, describe_claim

SLOPES = {"m1/2": 0.5, "m1/16": 1 / 16}  # two ALiBi head slopes (8-head ALiBi uses 2^-1 .. 2^-8)
D_HEAD = 16
N_ERROR, KS = 256, (16, 64, 256)
N_TIMES, K_TIME, REPEATS = (512, 1024, 2048, 4096), 4, 3
N_BIAS, REPLICATIONS = 64, 400
Solver = Literal["lsh_blocks", "exact", "iid_mask"]


class Options(PaperOptions):
    solver: Solver = Field("lsh_blocks", description="lsh_blocks (the paper's method), exact, iid_mask (baselines)")


def problem(n: int, seed: int, tag: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Random queries, keys (scores ~ N(0, 1)) and values for an n-token head."""
    rng = np.random.default_rng([seed, tag, n])
    q, k = rng.standard_normal((2, n, D_HEAD)) / D_HEAD**0.25
    return q, k, rng.standard_normal((n, D_HEAD))


def alibi_bias(n: int, slope: float) -> np.ndarray:
    """B_ij = -m (i - j) for j <= i (causal); -inf above the diagonal."""
    gap = np.arange(n)[:, None] - np.arange(n)[None, :]
    return np.where(gap >= 0, -slope * gap, -np.inf)


def sample_cuts(n: int, slope: float, count: int, rng: np.random.Generator) -> np.ndarray:
    """count x (n - 1) cuts: True between positions t and t + 1 with probability 1 - e^{-m}."""
    return rng.random((count, n - 1)) < -math.expm1(-slope)


def block_ids(cuts: np.ndarray) -> np.ndarray:
    return np.concatenate([np.zeros(cuts.shape[:-1] + (1,), dtype=np.int64), np.cumsum(cuts, axis=-1)], axis=-1)


def dense_terms(q: np.ndarray, k: np.ndarray, v: np.ndarray, weight: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Numerator (exp(S) o weight) V and denominator (exp(S) o weight) 1 for a causal weight matrix."""
    a = np.exp(q @ k.T) * np.tril(weight)
    return a @ v, a.sum(axis=1)


def blockwise_terms(q: np.ndarray, k: np.ndarray, v: np.ndarray, cuts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The same numerator and denominator for one block mask, computed block by block: blocks of
    length in (L/2, L] are padded to L and done as one batched matmul per power of two L, so the
    work is about n times twice the mean block length, not n^2."""
    n = len(q)
    starts = np.concatenate([[0], np.nonzero(cuts)[0] + 1])
    lengths = np.diff(np.concatenate([starts, [n]]))
    num, den = np.zeros_like(v), np.zeros(n)
    size = 1
    while size < 2 * lengths.max():
        pick = (lengths > size // 2) & (lengths <= size)
        if pick.any():
            offsets = np.arange(size)
            idx = np.minimum(starts[pick, None] + offsets, n - 1)
            keep = offsets[None, :] < lengths[pick, None]
            causal = keep[:, None, :] & np.tril(np.ones((size, size), dtype=bool))[None]
            a = np.exp(q[idx] @ k[idx].transpose(0, 2, 1)) * causal
            rows = idx[keep]
            num[rows] = (a @ v[idx])[keep]
            den[rows] = a.sum(axis=2)[keep]
        size *= 2
    return num, den


def estimate(
    solver: str, q: np.ndarray, k: np.ndarray, v: np.ndarray, slope: float, samples: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Averaged numerator and denominator of `samples` masks (exact: the true ones)."""
    n = len(q)
    if solver == "exact":
        return dense_terms(q, k, v, np.exp(alibi_bias(n, slope)))
    num, den = np.zeros_like(v), np.zeros(n)
    if solver == "lsh_blocks":
        for cuts in sample_cuts(n, slope, samples, rng):
            a, b = blockwise_terms(q, k, v, cuts)
            num, den = num + a, den + b
    else:  # exp(S) once; each sample draws and applies a dense n x n mask
        p = np.exp(alibi_bias(n, slope))
        scores = np.exp(q @ k.T)
        for _ in range(samples):
            a = scores * (rng.random((n, n)) < p)
            num, den = num + a @ v, den + a.sum(axis=1)
    return num / samples, den / samples


def output(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    return np.asarray(num / np.maximum(den, 1e-300)[:, None])


def projection(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng([seed, 3])
    return rng.standard_normal(n), rng.standard_normal(D_HEAD)


def loglog_slope(x: list[float] | tuple[float, ...], y: list[float]) -> float:
    return float(np.polyfit(np.log(np.asarray(x, dtype=float)), np.log(np.asarray(y, dtype=float)), 1)[0])


class AlibiLSHTask(PaperTask[Options]):
    task = "alibi_positional_lsh"
    name = "papers.alibi_positional_lsh"
    version = "0.1.0"
    headline_metric = "error_slope@m1/16"
    Options = Options
    solvers = ("lsh_blocks", "exact", "iid_mask")
    settings = tuple(SLOPES)
    metric_names = ("error_slope", "time_slope", "bias_abs_z") + tuple(f"error_k{k}" for k in KS) + ("seconds_n2048",)
    lower_is_better = frozenset({"bias_abs_z", "seconds_n2048"} | {f"error_k{k}" for k in KS})
    claim: ClassVar[Claim] = Claim(
        id=name,
        arms=solvers,
        settings=settings,
        sentence="ALiBi via positional LSH: ALiBi's bias is the expectation of random contiguous block-diagonal "
        "masks; averaging sampled masks approximates ALiBi attention in near-linear time",
        setting=f"one causal head, d = {D_HEAD}, random q/k (scores ~ N(0, 1)) and v; ALiBi slopes 1/2 and 1/16; "
        f"relative spectral error of the output at K = {KS} masks (n = {N_ERROR}); seconds per estimate at "
        f"n = {N_TIMES} with K = {K_TIME} (best of {REPEATS}; the dense baselines to 2048); unbiasedness: {REPLICATIONS} single-mask "
        f"replications of a fixed projection u' ((exp(S) o mask) V) w at n = {N_BIAS}",
        conditions=[
            c
            for s in SLOPES
            for c in (
                Condition(metric="error_slope", setting=s, solver="lsh_blocks", op=">=", threshold=-0.6),
                Condition(metric="error_slope", setting=s, solver="lsh_blocks", op="<=", threshold=-0.4),
                Condition(metric="time_slope", setting=s, solver="lsh_blocks", op="<=", threshold=1.2),
                Condition(metric="bias_abs_z", setting=s, solver="lsh_blocks", op="<=", threshold=3.0, stat="max"),
            )
        ],
        note="error_slope: log-log slope of the relative spectral error of the output against K (Monte Carlo "
        "predicts -1/2); time_slope: log-log slope of seconds against n; bias_abs_z: |mean - exact| / "
        "standard error over the replications, the worst seed decides. No windowed baseline (see the module)",
        departures=[
            Departure(
                paper="approximates ALiBi attention in transformer models (the summary names no model, data or task)",
                ours="use one synthetic causal head (d = 16, Gaussian q, k and v, scores ~ N(0, 1)); no "
                "trained model and no downstream metric such as perplexity",
                why="CPU budget; the identity and the estimator are properties of the attention operator, "
                "testable on any inputs",
                effect="the Monte Carlo error slope hardly depends on the inputs, so the verdict is about the "
                "estimator, not about whether K masks are enough for a model's quality; peaked trained "
                "attention could change the error's level (no condition reads it), not its slope",
            ),
            Departure(
                paper="states an expectation identity and near-linear time, with no metric or tolerance in the summary",
                ours="decide by three conditions of our own (PAPER_TASKS.md's): the log-log slope of the "
                "output's relative spectral error against K in [-0.6, -0.4], the log-log slope of seconds "
                "against n <= 1.2, and |z| <= 3 for the mean of single-mask replications on every seed",
                why="only the abstract is known (PAPERS.md), and a check needs a comparison and a margin",
                effect="any unbiased finite-variance Monte Carlo estimate has slope near -1/2, so the error "
                "condition checks the estimator's statistics rather than approximation quality; the "
                "band's width (ours) decides between inconclusive and reproduced (the -0.6 side was "
                "undecided at 5 seeds)",
            ),
            Departure(
                paper="makes the averaged mask unbiased for exp(ALiBi bias)",
                ours="test unbiasedness on the unnormalised numerator (a fixed projection of (exp(S) o mask) "
                "V, 400 single-mask replications at n = 64); the output is a ratio of two averages, "
                "biased at finite K",
                why="the normalised output has no unbiased single-mask estimate",
                effect="the bias condition holds by construction (the expectation is also tested exactly), so "
                "it can fail only through a bug; the ratio's finite-K bias is folded into the error "
                "slope",
            ),
            Departure(
                paper="claims near-linear time (context lengths and hardware not in the summary)",
                ours="time numpy on a shared 2-core CPU at n = 512..4096 with K = 4, best of 3, blocks "
                "bucketed by power-of-two length; the dense baselines only to n = 2048",
                why="CPU budget (the dense baselines take minutes a cell here)",
                effect="at these n fixed per-call overheads flatten the slope (favouring the <= 1.2 condition) "
                "and machine load adds noise; behaviour at long contexts on accelerators is untested",
            ),
            Departure(
                paper="may compare with other efficient-attention methods (the summary names none)",
                ours="compare only with exact dense ALiBi and independent per-entry masks, and leave out a "
                "windowed baseline on purpose",
                why="PAPER_TASKS.md: a windowed ALiBi is biased but more accurate per FLOP, which is not what "
                "the paper claims",
                effect="the verdict says whether the estimator has the stated properties, not that it beats "
                "alternatives; a windowed baseline would beat it on accuracy per FLOP here",
            ),
        ],
    )
    description = describe_claim(task, claim, solvers)

    def solve_cell(self, setting: str, seed: int, solver: str) -> CellResult:
        t0 = time.perf_counter()
        slope = SLOPES[setting]
        rng = np.random.default_rng([seed, 7])
        q, k, v = problem(N_ERROR, seed, 0)
        outputs = []
        for count in KS:  # fresh masks per K (not nested): each error is an independent draw
            outputs.append(output(*estimate(solver, q, k, v, slope, count, rng)).tolist())
        seconds = []
        # The dense baselines stop at n = 2048: their n = 4096 cells cost minutes on a shared
        # 2-core machine, and their timing is context (the criterion times the method only).
        for n in N_TIMES if solver == "lsh_blocks" else N_TIMES[:-1]:
            qt, kt, vt = problem(n, seed, 1)
            best = math.inf
            for _ in range(REPEATS):
                start = time.perf_counter()
                estimate(solver, qt, kt, vt, slope, K_TIME, rng)
                best = min(best, time.perf_counter() - start)
            seconds.append(best)
        replications = None
        if solver != "exact":
            qb, kb, vb = problem(N_BIAS, seed, 2)
            u, w = projection(N_BIAS, seed)
            replications = [float(u @ estimate(solver, qb, kb, vb, slope, 1, rng)[0] @ w) for _ in range(REPLICATIONS)]
        return CellResult(
            solver=solver,
            setting=setting,
            seed=seed,
            wall_s=round(time.perf_counter() - t0, 4),
            answer={"outputs": outputs, "seconds": seconds, "replications": replications},
        )

    def score_cell(self, result: CellResult) -> dict[str, float | None]:
        slope, seed, answer = SLOPES[result.setting], result.seed, result.answer
        outputs = [np.asarray(o, dtype=float) for o in answer["outputs"]]
        if len(outputs) != len(KS) or any(o.shape != (N_ERROR, D_HEAD) for o in outputs):
            raise ValueError(f"answer['outputs'] must be {len(KS)} arrays of shape ({N_ERROR}, {D_HEAD})")
        q, k, v = problem(N_ERROR, seed, 0)
        truth = output(*estimate("exact", q, k, v, slope, 1, np.random.default_rng(0)))
        errors = [float(np.linalg.norm(o - truth, 2) / np.linalg.norm(truth, 2)) for o in outputs]
        scores: dict[str, float | None] = {f"error_k{c}": e for c, e in zip(KS, errors)}
        scores["error_slope"] = loglog_slope(KS, errors) if min(errors) > 0 else None
        seconds = answer["seconds"]
        if not 2 <= len(seconds) <= len(N_TIMES):
            raise ValueError(f"answer['seconds'] must time the first 2..{len(N_TIMES)} of n = {N_TIMES}")
        scores["time_slope"] = loglog_slope(N_TIMES[: len(seconds)], seconds)
        scores["seconds_n2048"] = float(seconds[2]) if len(seconds) > 2 else None
        scores["bias_abs_z"] = None
        if answer["replications"] is not None:
            qb, kb, vb = problem(N_BIAS, seed, 2)
            u, w = projection(N_BIAS, seed)
            exact = float(u @ dense_terms(qb, kb, vb, np.exp(alibi_bias(N_BIAS, slope)))[0] @ w)
            reps = np.asarray(answer["replications"], dtype=float)
            scores["bias_abs_z"] = float(abs(reps.mean() - exact) / (reps.std(ddof=1) / math.sqrt(reps.size)))
        return scores
