"""CDWM's composite verifiable reward: one number in [0, 1] per episode, every part checked
against the environment (its evaluator and ledger), never against a judge model -- usable as a
training signal for a world model / agent and as a suite's scorer.

    reward = sum(w_i * c_i) / sum(w_i over the components that apply)

| component          | weight | value in [0, 1]                                                              |
|--------------------|--------|------------------------------------------------------------------------------|
| success            | 0.40   | the environment's task success                                               |
| delta_accuracy     | 0.30   | mean fact F1 of the world model's predictions vs the ledger (executed steps) |
| calibration        | 0.15   | 1 - Brier score of predicted confidence vs correctness (F1 >= 0.5)           |
| action_following   | 0.15   | replies that named a usable action the environment accepted / all replies   |

An episode without world-model predictions (the ReAct baseline, or a CDWM agent that only used
mask-determined actions) has no delta_accuracy or calibration; the remaining weights are
renormalised, and `components` says which applied. An unrequired irreversible change caps the
reward at `IRREVERSIBLE_CAP`: succeeding by breaking something must not look like success.
"""

from __future__ import annotations

from pydantic import BaseModel

from environments.cdwm.episode import EpisodeScores, EpisodeTranscript
from environments.cdwm.metrics import episode_scores

WEIGHTS = {"success": 0.40, "delta_accuracy": 0.30, "calibration": 0.15, "action_following": 0.15}
IRREVERSIBLE_CAP = 0.25


class Score(BaseModel):
    """The design's scorer result: a value, a label, why, and the parts (the components that
    applied, their weights, and whether the irreversible cap was applied)."""

    value: float
    label: str
    explanation: str
    components: dict[str, float]
    weights: dict[str, float]
    capped: bool


def reward_components(scores: EpisodeScores) -> dict[str, float]:
    """The components that apply to an episode's scores (as `metrics.episode_scores` writes them)."""
    out = {"success": scores.success}
    preds = scores.predictions
    if preds:
        out["delta_accuracy"] = sum(p.f1 for p in preds) / len(preds)
        out["calibration"] = 1.0 - sum((p.confidence - p.correct) ** 2 for p in preds) / len(preds)
    replies = scores.policy_replies
    if replies:
        accepted = replies - scores.policy_invalid - scores.invalid_steps
        out["action_following"] = max(0.0, accepted / replies)
    return out


def composite_reward(scores: EpisodeScores, weights: dict[str, float] | None = None) -> Score:
    weights = weights or WEIGHTS
    bad = [k for k in weights if k not in WEIGHTS]
    if bad:
        raise ValueError(f"reward weights {bad}: unknown components; use {', '.join(WEIGHTS)}")
    parts = {k: v for k, v in reward_components(scores).items() if weights.get(k, 0) > 0}
    total_w = sum(weights[k] for k in parts)
    value = sum(weights[k] * v for k, v in parts.items()) / total_w if total_w else 0.0
    capped = bool(scores.unrequired_irreversible)
    if capped:
        value = min(value, IRREVERSIBLE_CAP)
    value = min(1.0, max(0.0, value))
    label = "SUCCESS" if scores.success >= 1.0 and not capped else "IRREVERSIBLE" if capped else "FAIL"
    explanation = ", ".join(f"{k}={v:.2f}" for k, v in parts.items()) + (" (capped: unrequired irreversible change)" if capped else "")
    return Score(value=value, label=label, explanation=explanation, components=parts,
                 weights={k: weights[k] for k in parts}, capped=capped)


class CompositeRewardScorer:
    """The reward as a scorer: `score(sample, trajectory)` where the trajectory is a CDWM sample's
    transcript or already its scores."""

    def __init__(self, weights: dict[str, float] | None = None):
        self.weights = weights

    def score(self, sample: object, trajectory: EpisodeTranscript | EpisodeScores) -> Score:
        if isinstance(trajectory, EpisodeTranscript):
            t = trajectory
            trajectory = episode_scores(t.steps, t.evaluation, t.tokens, t.ended_by or "", t.unstepped_invalid)
        return composite_reward(trajectory, self.weights)
