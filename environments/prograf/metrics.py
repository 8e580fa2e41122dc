"""ProGraf's metrics, with bootstrap CIs over tasks (the independent unit).

- pass_rate: share of tasks whose every critical verification point passed.
- point_rate: points passed / points checked, pooled (a gated point counts as failed).
- per category (`pass_rate/geometry`, `point_rate/geometry`, ...) and per component, over the
  tasks that have it (a component of a task passes when all its points pass:
  `component_pass_rate/resistor`; and its pooled point rate `component_point_rate/resistor`).
- format_error_rate: share of tasks whose output could not be read (rejected input, render error,
  no output).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from pydantic import TypeAdapter
from typing_extensions import Required, TypedDict  # pydantic validates a typing.TypedDict only from Python 3.12

from environments.prograf.task import CATEGORIES
from harness.records import Metric, SampleRecord
from harness.stats import ratio_metric

UNREADABLE = ("rejected_input", "render_error", "no_output")


class PointScore(TypedDict, total=False):
    """One verification point as a sample's scores record it: the verifier's `PointResult` without
    its None and default fields, so a record holds only what the point says. Keys in the model's
    order: `suite.point_score` validates into this order, and records have always held it."""

    id: Required[str]
    kind: Required[str]
    component: Required[str]
    passed: Required[bool]
    measured: Any  # what the check measured: a number, a text, a list -- whatever it reports
    reason: Required[str]
    pattern: str  # on failure: one of `check.verify.PATTERNS`
    gated: bool  # not checked: a point it depends on failed
    critical: bool  # only when False (not part of the pass rule)


class CodeScores(TypedDict, total=False):
    """A code suite's scores (`prograf`, `prograf-loop`): the verdict and every point
    (`suite.point_summary`), or for a sample with no code to verify `passed` False, `pattern`
    `no_output` and every point failed (`suite.no_output_scores`); the loop adds `calls`."""

    passed: Required[bool]
    point_rate: float
    format: str
    error: str | None
    notes: list[str]
    rendered: bool
    pattern: str | None  # the failure pattern of unreadable output (rejected_input, render_error, no_output)
    points: Required[list[PointScore]]
    category: str
    calls: int  # prograf-loop: generator calls spent


# The metrics read records through it: a record's scores are the JSON that `CodeScores` describes.
SCORES = TypeAdapter(CodeScores)
POINT = TypeAdapter(PointScore)


def _scores(records: list[SampleRecord]) -> list[CodeScores]:
    return [SCORES.validate_python(r.scores) for r in records if r.scores and "points" in r.scores]


def ratio_cells(cells: list[list[float]], seed: int) -> Metric:
    """A ratio metric over [numerator, denominator] cells, one per task (bootstrap over tasks)."""
    arr = np.asarray(cells, dtype=float).reshape(-1, 2)
    return ratio_metric(arr, lambda c: c[0], lambda c: c[1], seed=seed)


def prograf_metrics(records: list[SampleRecord], seed: int = 0) -> dict[str, Metric]:
    scores = _scores(records)
    out = {"pass_rate": ratio_cells([[float(s["passed"]), 1.0] for s in scores], seed),
           "point_rate": ratio_cells([[sum(p["passed"] for p in s["points"]), len(s["points"])] for s in scores], seed),
           "format_error_rate": ratio_cells([[float(s.get("pattern") in UNREADABLE), 1.0] for s in scores], seed)}
    for cat in CATEGORIES:
        rows = [s for s in scores if s.get("category") == cat]
        if rows:
            out[f"pass_rate/{cat}"] = ratio_cells([[float(s["passed"]), 1.0] for s in rows], seed)
            out[f"point_rate/{cat}"] = ratio_cells([[sum(p["passed"] for p in s["points"]), len(s["points"])] for s in rows], seed)
    components = sorted({p["component"] for s in scores for p in s["points"]})
    for comp in components:
        task_cells: list[list[float]] = []
        point_cells: list[list[float]] = []
        for s in scores:  # over the tasks that have this component (n = how many)
            mine = [p for p in s["points"] if p["component"] == comp]
            if mine:
                task_cells.append([float(all(p["passed"] for p in mine)), 1.0])
                point_cells.append([sum(p["passed"] for p in mine), len(mine)])
        out[f"component_pass_rate/{comp}"] = ratio_cells(task_cells, seed)
        out[f"component_point_rate/{comp}"] = ratio_cells(point_cells, seed)
    return out


def prograf_breakdowns(records: list[SampleRecord], seed: int = 0) -> dict[str, dict[str, Metric]]:
    metrics = prograf_metrics(records, seed)
    return {"category": {k.split("/", 1)[1]: v for k, v in metrics.items() if k.startswith("pass_rate/")},
            "component": {k.split("/", 1)[1]: v for k, v in metrics.items() if k.startswith("component_pass_rate/")}}


def prograf_counts(records: list[SampleRecord]) -> dict[str, int]:
    scores = _scores(records)
    counts = {"tasks": len(scores), "passed": sum(bool(s["passed"]) for s in scores)}
    for pattern in UNREADABLE:
        counts[pattern] = sum(s.get("pattern") == pattern for s in scores)
    failed = [p for s in scores for p in s["points"] if not p["passed"] and not p.get("gated")]
    for p in failed:
        key = f"failed_points/{p['pattern']}"
        counts[key] = counts.get(key, 0) + 1
    return counts
