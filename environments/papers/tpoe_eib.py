"""Task `tpoe_eib_synth_eeg`: an evidence-bottleneck EEG head (the paper's tPoE-EIB: hard-concrete
gates on channel x time evidence, a Gaussian expert per token, a tempered product of experts as the
posterior, a KL rate penalty) against an unconstrained head explained post hoc by gradient saliency
and integrated gradients, on synthetic EEG whose evidence locations are known (ours).

The data: 16 channels x 128 samples (8 segments of 16); background AR(1) noise plus a 10-cycle alpha
rhythm; every recording has one distractor spike (a spike with no slow wave) in a random token;
class 1 adds one spike-wave complex to 2 adjacent channels in one segment -- the evidence, exactly
those 2 tokens. The EIB head's explanation is each token's weight in the posterior (gate x mean
precision); the baselines explain the unconstrained head's class-1 logit per token. Audits on the
test recordings of class 1: localisation P@2 (the share of the top-2 tokens that are evidence),
deletion AUC (the solver's own model's class-1 probability as tokens are zeroed, most important
first; lower is more faithful) and insertion AUC (tokens restored into a zeroed recording; higher
is more faithful). The data, the heads, their training and attributions live in `tpoe_eib_model.py`.
"""

from __future__ import annotations

import time
from typing import ClassVar, Literal

import numpy as np
from pydantic import Field

from environments.papers.base import CellResult, Claim, Condition, PaperOptions, PaperTask, describe_claim
from environments.papers.tpoe_eib_model import (
    CHANNELS, N_TEST, N_TRAIN, SAMPLES, SEGMENT, SEGMENTS, explain, predict_proba, recordings,
)

DELETION_CHUNK = 8  # tokens removed per point of the deletion / insertion curves
SETTINGS = ("spike_wave",)
Solver = Literal["tpoe_eib", "saliency", "integrated_gradients"]


class Options(PaperOptions):
    solver: Solver = Field("tpoe_eib", description="tpoe_eib (the paper's method), saliency, integrated_gradients "
                                                   "(post-hoc explanations of the unconstrained head)")


def token_mask(x: np.ndarray, tokens: np.ndarray) -> np.ndarray:
    """x with the given tokens (a bool (n, C, SEGMENTS) array) kept and every other token zeroed."""
    return x * np.repeat(tokens, SEGMENT, axis=-1).astype(x.dtype)


def precision_at_2(attribution: np.ndarray, evidence: np.ndarray) -> float:
    """Mean over recordings of the share of the 2 highest-attributed tokens that are evidence."""
    flat = attribution.reshape(len(attribution), -1)
    top = np.argsort(-flat, axis=1, kind="stable")[:, :2]
    return float(np.take_along_axis(evidence.reshape(len(evidence), -1), top, axis=1).mean())


def curve_orders(attribution: np.ndarray) -> np.ndarray:
    """Token indices per recording, most important first (ties by index, so a pure function)."""
    return np.argsort(-attribution.reshape(len(attribution), -1), axis=1, kind="stable")


def deletion_insertion(prob_fn, x: np.ndarray, attribution: np.ndarray) -> tuple[float, float]:
    """(deletion AUC, insertion AUC) of class-1 probability, tokens removed / restored in
    DELETION_CHUNK steps, most important first; AUC by the trapezoid rule over the fraction moved."""
    order = curve_orders(attribution)
    n, total = len(x), CHANNELS * SEGMENTS
    points = list(range(0, total + 1, DELETION_CHUNK))
    deletion, insertion = [], []
    for k in points:
        moved = np.zeros((n, total), dtype=bool)
        np.put_along_axis(moved, order[:, :k], True, axis=1)
        moved = moved.reshape(n, CHANNELS, SEGMENTS)
        deletion.append(prob_fn(token_mask(x, ~moved)).mean())
        insertion.append(prob_fn(token_mask(x, moved)).mean())
    frac = np.asarray(points) / total
    return float(np.trapezoid(deletion, frac)), float(np.trapezoid(insertion, frac))


def balanced_accuracy(y: np.ndarray, predicted: np.ndarray) -> float:
    return float(np.mean([np.mean(predicted[y == k] == k) for k in (0, 1)]))


class TPoEEIBTask(PaperTask):
    task = "tpoe_eib_synth_eeg"
    name = "papers.tpoe_eib_synth_eeg"
    version = "0.2.0"  # 0.2.0: the EIB penalties are annealed (0.1.0 collapsed to chance)
    headline_metric = "p_at_2@spike_wave"
    Options = Options
    solvers = ("tpoe_eib", "saliency", "integrated_gradients")
    settings = SETTINGS
    metric_names = ("p_at_2", "deletion_auc", "insertion_auc", "balanced_accuracy")
    lower_is_better = frozenset({"deletion_auc"})
    claim: ClassVar[Claim] = Claim(
        paper="an evidence-bottleneck head (gated channel x time evidence, Gaussian experts, tempered product of "
              "experts, KL rate penalty) keeps accuracy while being more faithful than post-hoc explanations",
        setting=f"synthetic EEG, {CHANNELS} channels x {SAMPLES} samples ({SEGMENTS} segments), AR(1) + alpha "
                f"background, a distractor spike in every recording, class 1 = a spike-wave complex on 2 adjacent "
                f"channels in one segment; {N_TRAIN} train / {N_TEST} test per seed; audits on class-1 test recordings",
        criterion=[
            Condition(metric="balanced_accuracy", setting="spike_wave", solver="tpoe_eib", versus="saliency",
                      op=">=", threshold=-0.02),
            *(Condition(metric="deletion_auc", setting="spike_wave", solver="tpoe_eib", versus=b, op="<=", threshold=0.0)
              for b in ("saliency", "integrated_gradients")),
            *(Condition(metric="insertion_auc", setting="spike_wave", solver="tpoe_eib", versus=b, op=">=", threshold=0.0)
              for b in ("saliency", "integrated_gradients")),
            *(Condition(metric="p_at_2", setting="spike_wave", solver="tpoe_eib", versus=b, op=">=", threshold=0.0)
              for b in ("saliency", "integrated_gradients")),
        ],
        note="saliency and integrated_gradients explain the same unconstrained head (their accuracy is the same)",
    )
    description = describe_claim(task, claim, solvers)

    def solve_cell(self, setting: str, seed: int, solver: str) -> CellResult:
        t0 = time.perf_counter()
        x, y, _, _ = recordings(seed, "test")
        prob = predict_proba(solver, seed, x)
        attribution = explain(solver, seed, x[y == 1])
        return CellResult(solver=solver, setting=setting, seed=seed,
                          answer={"predicted": (prob > 0.5).astype(int).tolist(),
                                  "attribution": attribution.round(6).tolist()},
                          wall_s=round(time.perf_counter() - t0, 4))

    def score_cell(self, result: CellResult) -> dict[str, float | None]:
        x, y, evidence, _ = recordings(result.seed, "test")
        predicted = np.asarray(result.answer.get("predicted"), dtype=float)
        attribution = np.asarray(result.answer.get("attribution"), dtype=float)
        positives = int((y == 1).sum())
        if predicted.shape != y.shape or attribution.shape != (positives, CHANNELS, SEGMENTS) or not np.isfinite(attribution).all():
            raise ValueError(f"answer must hold {len(y)} predictions and a finite ({positives}, {CHANNELS}, {SEGMENTS}) "
                             f"token attribution, got {predicted.shape} and {attribution.shape}")
        deletion, insertion = deletion_insertion(lambda xs: predict_proba(result.solver, result.seed, xs),
                                                 x[y == 1], attribution)
        return {"p_at_2": precision_at_2(attribution, evidence[y == 1]), "deletion_auc": deletion,
                "insertion_auc": insertion, "balanced_accuracy": balanced_accuracy(y, predicted)}
