"""Mind2Web's metrics (Deng et al., 2023, with the definitions of its evaluation code):

- element accuracy: the chosen element is one of the step's `pos_candidates` (by backend_node_id);
- operation F1: token-level F1 between the predicted and the gold "OP value" strings (lower-cased,
  split on whitespace, as sets, punctuation-only tokens dropped; two empty strings agree);
- step success: the element is right and the operation F1 is exactly 1;
- task success: every step of the task succeeded.

The first three are averaged over a task's steps, then over tasks (the "macro" figures the paper
reports); a step the agent never answered (its episode ended early) counts 0, as the official code
pads missing predictions. Tasks are the independent unit: CIs resample tasks. The `_micro`
variants pool steps over tasks instead.
"""

from __future__ import annotations

import string
from collections.abc import Sequence
from typing import NotRequired, TypedDict

import numpy as np
from pydantic import BaseModel

from environments.mind2web.mindact import RoundRecord
from harness.records import Metric
from harness.stats import ratio_metric


def _tokens(text: str) -> set[str]:
    return {t for t in text.lower().strip().split() if t not in string.punctuation}


def operation_f1(predicted: str, gold: str) -> float:
    """Token-level F1 of two "OP value" strings, as Mind2Web computes it."""
    p, g = _tokens(predicted), _tokens(gold)
    if not p and not g:
        return 1.0
    hit = len(p & g)
    if not hit:
        return 0.0
    precision, recall = hit / len(p), hit / len(g)
    return 2 * precision * recall / (precision + recall)


def op_string(op: str, value: str) -> str:
    """The "OP value" string both sides are scored on (CLICK has no value)."""
    return f"{op.upper()} {value}".strip() if op.upper() != "CLICK" else "CLICK"


class StepScores(TypedDict):
    """One gold step's three scores (`step_result`)."""

    element_correct: float
    operation_f1: float
    step_success: float


class StepRecord(StepScores):
    """One gold step as `evaluate()["step_results"]` records it: its scores, the action scored and
    the gold one, and whether the action was irreversible (without being the target)."""

    action: str
    gold: str
    irreversible: bool
    unrequired_irreversible: bool
    # protocol=mindact: the element the questions chose, and the questions with their cost
    winner: NotRequired[str | None]
    questions: NotRequired[int]
    rounds: NotRequired[list[RoundRecord]]
    target_survived: NotRequired[list[bool]]
    calls: NotRequired[int]
    tokens: NotRequired[int]


class TaskScores(TypedDict):
    """A task's Mind2Web figures (`task_scores`), the fields of `Mind2WebStepMetrics` it fills."""

    element_accuracy: float
    operation_f1: float
    step_success_rate: float
    task_success: float
    gold_steps: int
    answered_steps: int


def step_result(element: str | None, op: str | None, value: str, pos_ids: set[str], gold_op: str,
                gold_value: str) -> StepScores:
    """One step's three scores; `element` None (no usable prediction) scores 0 on each."""
    if element is None or op is None:
        return {"element_correct": 0.0, "operation_f1": 0.0, "step_success": 0.0}
    correct = float(element in pos_ids)
    f1 = operation_f1(op_string(op, value), op_string(gold_op, gold_value))
    return {"element_correct": correct, "operation_f1": f1, "step_success": float(correct == 1.0 and f1 == 1.0)}


def task_scores(steps: Sequence[StepScores], n_steps: int) -> TaskScores:
    """A task's scores from its answered steps; the unanswered rest (up to `n_steps`) count 0."""
    unanswered: StepScores = {"element_correct": 0.0, "operation_f1": 0.0, "step_success": 0.0}
    padded = list(steps[:n_steps]) + [unanswered] * (n_steps - len(steps))
    n = max(1, n_steps)
    return {
        "element_accuracy": sum(s["element_correct"] for s in padded) / n,
        "operation_f1": sum(s["operation_f1"] for s in padded) / n,
        "step_success_rate": sum(s["step_success"] for s in padded) / n,
        "task_success": float(n_steps > 0 and all(s["step_success"] == 1.0 for s in padded)),
        "gold_steps": n_steps,
        "answered_steps": min(len(steps), n_steps),
    }


class MindActSummary(BaseModel):
    """A task's MindAct figures (`env.mindact_summary`): questions asked, the model calls and
    tokens they cost, steps left with no prediction, and recall at question r."""

    group_size: int
    order: str
    questions: int = 0
    calls: int = 0
    tokens: int = 0
    no_prediction_steps: int = 0
    recall_at_question: list[float] = []


class Mind2WebStepMetrics(BaseModel):
    """Mind2Web's figures for one task (`metrics.task_scores`, plus the ranker's recall)."""

    element_accuracy: float = 0.0
    operation_f1: float = 0.0
    step_success_rate: float = 0.0
    task_success: float = 0.0
    gold_steps: int | None = None  # None: not a Mind2Web task's scores (left out of its metrics)
    answered_steps: int = 0
    candidate_recall: float = 0.0
    split: str = ""
    mindact: MindActSummary | None = None  # protocol=mindact only


MACRO = ("element_accuracy", "operation_f1", "step_success_rate")


def mind2web_metrics(scores: Sequence[Mind2WebStepMetrics], seed: int = 0) -> dict[str, Metric]:
    """Macro (per task, then over tasks) and micro (pooled steps) figures with CIs over tasks."""
    tasks = [s for s in scores if s.gold_steps is not None]
    if not tasks:
        return {}
    rows = np.array([[getattr(s, k) for k in MACRO] + [s.task_success, 1.0]
                     + [getattr(s, k) * (s.gold_steps or 0) for k in MACRO] + [s.gold_steps or 0]
                     + [s.candidate_recall * (s.gold_steps or 0)]
                     for s in tasks], dtype=float)

    def ratio(num: int, den: int) -> Metric:
        return ratio_metric(rows, lambda t: t[num], lambda t: t[den], seed=seed)

    out = {name: ratio(i, 4) for i, name in enumerate(MACRO)}
    out["task_success_rate"] = ratio(3, 4)
    out |= {f"{name}_micro": ratio(5 + i, 8) for i, name in enumerate(MACRO)}
    out["candidate_recall"] = ratio(9, 8)  # share of steps whose target was among the candidates shown
    return out
