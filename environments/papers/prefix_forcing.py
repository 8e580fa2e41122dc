"""Task `prefix_linear_forcing`: a prefix that forces a reachable target output, found by solving
a linear system (the paper's method), against gradient prefix tuning (baseline), on a toy decoder
(ours).

The decoder: token + position embeddings, 2 attention-only layers of 4 heads with a residual
stream, an unembedding. A prefix is P key/value pairs per head and layer, visible to every
position. With the prefix keys fixed (and layer 1's prefix fixed), the attention weights of layer 2
do not depend on layer 2's prefix values, so the logits at every position are affine in those
values: logits[t] = c[t] + sum_h sum_p alpha_h[t, p] * (v_hp Wo_h W_U). Forcing the logits of
the last T positions is the least-squares solve of that stacked system; a target is flagged
unreachable when the solve leaves a residual. The scorer checks every answer with the real
forward pass, never with the linear map.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import lru_cache
from typing import ClassVar, Literal

import numpy as np
from pydantic import Field

from environments.papers.base import CellResult, Claim, Condition, Departure, PaperOptions, PaperTask, describe_claim

VOCAB, D_MODEL, HEADS, D_HEAD, LAYERS, SEQ = 32, 16, 4, 4, 2, 8
FORCED = 3  # the last T positions' logits are the target
TARGETS = 10  # reachable targets per cell, and as many unreachable ones
FORCE_TOL = 1e-4  # max |logit error| for "forced" (the criterion's figure)
RESIDUAL_TOL = 1e-6  # the solve's relative residual above which a target is flagged unreachable
GRAD_STEPS, GRAD_LR = 300, 0.05
PREFIX_LENGTHS = {"prefix8": 8, "prefix2": 2}
Solver = Literal["linear", "gradient"]


class Options(PaperOptions):
    solver: Solver = Field("linear", description="linear (the paper's method: least squares), gradient (baseline: Adam prefix tuning)")


@dataclass(frozen=True)
class Decoder:
    emb: np.ndarray  # (V, d)
    pos: np.ndarray  # (n, d)
    wq: np.ndarray  # (L, H, d, dh)
    wk: np.ndarray
    wv: np.ndarray
    wo: np.ndarray  # (L, H, dh, d)
    unembed: np.ndarray  # (d, V)
    prefix_keys: np.ndarray  # (L, H, P, dh), fixed random
    layer1_values: np.ndarray  # (H, P, dh), fixed random


def make_decoder(seed: int, prefix: int) -> Decoder:
    rng = np.random.default_rng([seed, prefix])
    g = lambda *shape: rng.normal(size=shape) / np.sqrt(shape[-2] if len(shape) > 1 else 1)  # noqa: E731
    return Decoder(emb=rng.normal(size=(VOCAB, D_MODEL)), pos=rng.normal(size=(SEQ, D_MODEL)) * 0.5,
                   wq=g(LAYERS, HEADS, D_MODEL, D_HEAD), wk=g(LAYERS, HEADS, D_MODEL, D_HEAD),
                   wv=g(LAYERS, HEADS, D_MODEL, D_HEAD), wo=g(LAYERS, HEADS, D_HEAD, D_MODEL),
                   unembed=g(D_MODEL, VOCAB), prefix_keys=rng.normal(size=(LAYERS, HEADS, prefix, D_HEAD)),
                   layer1_values=rng.normal(size=(HEADS, prefix, D_HEAD)))


def forward(dec: Decoder, tokens: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Logits (n, V) with layer 2's prefix values `values` (H, P, dh); and layer 2's attention
    weights on the prefix (H, n, P)."""
    h = dec.emb[tokens] + dec.pos
    n, prefix = len(tokens), dec.prefix_keys.shape[2]
    visible = np.concatenate([np.ones((n, prefix), bool), np.tril(np.ones((n, n), bool))], axis=1)
    weights = np.zeros((HEADS, n, prefix))
    for layer in range(LAYERS):
        prefix_values = dec.layer1_values if layer == 0 else values
        update = np.zeros_like(h)
        for head in range(HEADS):
            q = h @ dec.wq[layer, head]
            k = np.concatenate([dec.prefix_keys[layer, head], h @ dec.wk[layer, head]])
            v = np.concatenate([prefix_values[head], h @ dec.wv[layer, head]])
            s = np.where(visible, q @ k.T / np.sqrt(D_HEAD), -np.inf)
            a = np.exp(s - s.max(axis=1, keepdims=True))
            a /= a.sum(axis=1, keepdims=True)
            if layer == LAYERS - 1:
                weights[head] = a[:, :prefix]
            update += (a @ v) @ dec.wo[layer, head]
        h = h + update
    return h @ dec.unembed, weights


def linear_system(dec: Decoder, tokens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(A, c): the forced logits (flattened) = A @ vec(values) + c, exactly."""
    prefix = dec.prefix_keys.shape[2]
    zero = np.zeros((HEADS, prefix, D_HEAD))
    logits, weights = forward(dec, tokens, zero)
    readout = np.einsum("hkd,dv->hkv", dec.wo[LAYERS - 1], dec.unembed)  # (H, dh, V)
    a = np.einsum("htp,hkv->tvhpk", weights[:, -FORCED:], readout)  # (T, V, H, P, dh)
    return a.reshape(FORCED * VOCAB, -1), logits[-FORCED:].ravel()


@lru_cache(maxsize=16)
def problems(seed: int, prefix: int) -> tuple[Decoder, list[tuple[np.ndarray, np.ndarray, bool]]]:
    """The cell's decoder and its targets: (tokens, target logits (T, V), reachable). Reachable ones
    are what a hidden teacher prefix produces; unreachable ones add a component orthogonal to the
    range of that input's system (so no prefix value can produce it)."""
    dec = make_decoder(seed, prefix)
    rng = np.random.default_rng([seed, prefix, 1])
    out = []
    for i in range(2 * TARGETS):
        tokens = rng.integers(0, VOCAB, size=SEQ)
        teacher = rng.normal(size=(HEADS, prefix, D_HEAD))
        target = forward(dec, tokens, teacher)[0][-FORCED:]
        reachable = i < TARGETS
        if not reachable:
            a, _ = linear_system(dec, tokens)
            u, s, _ = np.linalg.svd(a, full_matrices=False)
            basis = u[:, s > s[0] * 1e-10]
            r = rng.normal(size=a.shape[0])
            r -= basis @ (basis.T @ r)
            target = target + (r / np.linalg.norm(r) * np.linalg.norm(target)).reshape(target.shape)
        out.append((tokens, target, reachable))
    return dec, out


def solve_linear(dec: Decoder, tokens: np.ndarray, target: np.ndarray) -> tuple[np.ndarray, bool]:
    a, c = linear_system(dec, tokens)
    b = target.ravel() - c
    x, *_ = np.linalg.lstsq(a, b, rcond=None)
    residual = np.linalg.norm(a @ x - b) / max(np.linalg.norm(b), 1e-12)
    return x.reshape(HEADS, -1, D_HEAD), bool(residual > RESIDUAL_TOL)


def solve_gradient(dec: Decoder, tokens: np.ndarray, target: np.ndarray) -> tuple[np.ndarray, bool]:
    """Adam on 1/2 ||forced logits - target||^2 over layer 2's prefix values. The gradient is
    exact: the loss is quadratic in the values, and the residual comes from the real forward."""
    a, _ = linear_system(dec, tokens)
    x = np.zeros(a.shape[1])
    m, v = np.zeros_like(x), np.zeros_like(x)
    shape = (HEADS, -1, D_HEAD)
    for step in range(1, GRAD_STEPS + 1):
        residual = forward(dec, tokens, x.reshape(shape))[0][-FORCED:].ravel() - target.ravel()
        grad = a.T @ residual
        m = 0.9 * m + 0.1 * grad
        v = 0.999 * v + 0.001 * grad ** 2
        x -= GRAD_LR * (m / (1 - 0.9 ** step)) / (np.sqrt(v / (1 - 0.999 ** step)) + 1e-8)
    error = np.abs(forward(dec, tokens, x.reshape(shape))[0][-FORCED:] - target).max()
    return x.reshape(shape), bool(error > FORCE_TOL)


class PrefixForcingTask(PaperTask):
    task = "prefix_linear_forcing"
    name = "papers.prefix_linear_forcing"
    version = "0.1.0"
    headline_metric = "forced_rate@prefix8"
    Options = Options
    solvers = ("linear", "gradient")
    settings = tuple(PREFIX_LENGTHS)
    metric_names = ("forced_rate", "max_logit_error", "flag_rate", "false_flag_rate", "max_seconds")
    lower_is_better = frozenset({"max_logit_error", "false_flag_rate", "max_seconds"})
    claim: ClassVar[Claim] = Claim(
        id=name, arms=solvers, settings=settings,
        sentence="Prefix expressiveness: if a target output is in the model's range, a prefix that forces it exists "
                 "and is computed by solving linear systems",
        setting=f"random toy decoder (vocab {VOCAB}, d {D_MODEL}, {LAYERS} attention-only layers x {HEADS} heads, "
                f"no LayerNorm/MLP), sequences of {SEQ}, the last {FORCED} positions' logits forced; fixed random "
                f"prefix keys and layer-1 prefix, layer-2 prefix values solved; {TARGETS} reachable (teacher prefix) "
                f"and {TARGETS} unreachable (orthogonal to the range) targets per seed; prefix lengths 8 and 2",
        conditions=[c for s in PREFIX_LENGTHS for c in (
            Condition(metric="forced_rate", setting=s, solver="linear", op=">=", threshold=1.0, stat="min"),
            Condition(metric="max_logit_error", setting=s, solver="linear", op="<=", threshold=FORCE_TOL, stat="max"),
            Condition(metric="max_seconds", setting=s, solver="linear", op="<=", threshold=1.0, stat="max"),
            Condition(metric="flag_rate", setting=s, solver="linear", op=">=", threshold=0.95))],
        note="the gradient baseline is context: the paper's claim is existence and the linear solve, not a margin",
        departures=[
            Departure(paper="is about prefixes of transformer models (the summary names none)",
                      ours="use a random, untrained toy decoder: vocabulary 32, width 16, 2 attention-only layers of "
                           "4 heads, residual stream, no LayerNorm and no MLP -- not a real transformer stack",
                      why="without LayerNorm or MLPs after layer 2 the logits are exactly affine in layer 2's prefix "
                          "values, so the linear solve is exact and checkable to 1e-10 with the real forward pass",
                      effect="the linear structure holds by construction, so 'reproduced' shows that the algebra and "
                             "our solver are right, not that a real stack (LayerNorm, MLPs, later layers reading the "
                             "forced values) is forced by linear systems: there the map is not affine and the result "
                             "rests on the paper's own reduction"),
            Departure(paper="computes the prefix by solving linear systems (the summary does not say which parts of "
                            "the prefix are unknowns)",
                      ours="fix the prefix keys of both layers and layer 1's prefix at random and solve only for "
                           "layer 2's prefix values (one least-squares system per input; prefix lengths 8 and 2)",
                      why="that is what makes the forced logits affine",
                      effect="the range tested is that of one layer's values under fixed keys, smaller than a whole "
                             "prefix's; 'in range' is defined by our system, not by the paper's notion of "
                             "reachability"),
            Departure(paper="forces targets that are in the model's range",
                      ours="take reachable targets as the outputs of a hidden teacher prefix with the same fixed "
                           "keys (in range by construction) and unreachable ones as a teacher output plus a "
                           "component orthogonal to the system's range; 10 of each per seed, the logits of the last "
                           "3 of 8 positions",
                      why="exact ground truth for reachability",
                      effect="every reachable target is exactly solvable and every unreachable one leaves a residual "
                             "far above the 1e-6 flag, so the conditions test numerical exactness and the flag, not "
                             "hard or natural targets (text continuations, near the range's boundary)"),
            Departure(paper="gives no sizes or timings in the summary",
                      ours="bound the slowest solve at 1 s per target at this toy size",
                      why="PAPER_TASKS.md's bound",
                      effect="the timing condition says nothing about the cost at real model sizes"),
            Departure(paper="compares with no baseline in the summary",
                      ours="run gradient prefix tuning (300 Adam steps, lr 0.05) as context, outside the criterion",
                      why="PAPER_TASKS.md's baseline; the claim is existence and the linear solve, not a margin",
                      effect="none on the verdict; the baseline's failure (0% forced) depends on our step budget and "
                             "learning rate"),
        ],
    )
    description = describe_claim(task, claim, solvers)

    def solve_cell(self, setting: str, seed: int, solver: str) -> CellResult:
        t_all = time.perf_counter()
        dec, targets = problems(seed, PREFIX_LENGTHS[setting])
        solve = solve_linear if solver == "linear" else solve_gradient
        answers = []
        for tokens, target, _ in targets:
            t0 = time.perf_counter()
            values, flagged = solve(dec, tokens, target)
            answers.append({"values": values.ravel().tolist(), "flagged": flagged,
                            "seconds": time.perf_counter() - t0})
        return CellResult(solver=solver, setting=setting, seed=seed, answer={"targets": answers},
                          wall_s=round(time.perf_counter() - t_all, 4))

    def score_cell(self, result: CellResult) -> dict[str, float | None]:
        prefix = PREFIX_LENGTHS[result.setting]
        dec, targets = problems(result.seed, prefix)
        errors, flags, false_flags = [], [], []
        for (tokens, target, reachable), answer in zip(targets, result.answer["targets"], strict=True):
            if reachable:
                values = np.asarray(answer["values"]).reshape(HEADS, prefix, D_HEAD)
                errors.append(float(np.abs(forward(dec, tokens, values)[0][-FORCED:] - target).max()))
                false_flags.append(answer["flagged"])
            else:
                flags.append(answer["flagged"])
        return {"forced_rate": float(np.mean([e < FORCE_TOL for e in errors])), "max_logit_error": max(errors),
                "flag_rate": float(np.mean(flags)), "false_flag_rate": float(np.mean(false_flags)),
                "max_seconds": max(a["seconds"] for a in result.answer["targets"])}
