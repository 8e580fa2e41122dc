"""Official metrics from any results file in the release format (labels already present), so
published results are re-aggregated with the same code that scores our own runs, and a
metrics file can be checked field by field against another (`harness proact metrics --expect`).

Reading the file, and what counts as a deviation from the release's layout, is
`corpora.proact_results`; here each row becomes a scored sample, and the reference layout is
`environments.proact.metrics.official_metrics`.
"""

from __future__ import annotations

import math
from typing import Any, NotRequired, TypedDict

from corpora.proact_results import ResultsFile
from corpora.proact_types import ResultRow
from environments.proact.metrics import OfficialMetrics, official_metrics
from environments.proact.payloads import ProactScores, TriggerLabel
from harness.providers.base import Usage
from harness.records import SampleRecord
from harness.suite import dump_payload

FLOAT_TOLERANCE = 1e-12


class ReleaseMetrics(TypedDict):
    """A released `*_metrics.json`: its three keys; ours add `error_trigger_stats` beside them
    where some trigger is an ERROR."""
    aggregate_trigger_stats: dict[str, dict[str, int]]
    metrics: dict[str, float | None]
    token_usage: dict[str, dict[str, float]]
    error_trigger_stats: NotRequired[dict[str, int]]


def row_labels(row: ResultRow) -> list[TriggerLabel]:
    """(turn, type, label) of each trigger, in the row's order. No verdict: SKIPPED, as the
    reference pipeline counts it."""
    return [TriggerLabel(turn=tp.turn, type=tp.evaluation_rubric.type,
                         label=tp.evaluation_result.label if tp.evaluation_result is not None else "SKIPPED")
            for tp in row.trigger_points]


def as_records(results: ResultsFile) -> list[SampleRecord]:
    """Each row as a scored sample (one epoch, its key as the id, its token_usage as usage), so
    the suite's own metric code applies unchanged. No row is left out."""
    return [
        SampleRecord(sample_id=key, epoch=0, seed=0, status="ok", started="", duration_s=0.0,
                     output=row.model_dump(exclude_none=True), scores=dump_payload(ProactScores(triggers=row_labels(row))),
                     usage={agent: Usage(prompt_tokens=u.prompt_tokens, completion_tokens=u.completion_tokens,
                                         calls=u.calls) for agent, u in row.token_usage.items()})
        for key, row in zip(results.keys, results.rows)
    ]


def release_layout(official: OfficialMetrics) -> ReleaseMetrics:
    """`official_metrics` output as a released metrics file holds it: the three published keys,
    plus `error_trigger_stats` only where some trigger is an ERROR (never in a released file)."""
    out: ReleaseMetrics = {"aggregate_trigger_stats": official["aggregate_trigger_stats"],
                           "metrics": official["metrics"], "token_usage": official["token_usage"]}
    if any(official["error_trigger_stats"].values()):
        out["error_trigger_stats"] = official["error_trigger_stats"]
    return out


def _same(ours: Any, theirs: Any) -> bool:
    if isinstance(theirs, bool) or isinstance(ours, bool):
        return type(ours) is type(theirs) and ours == theirs
    if isinstance(theirs, float) and isinstance(ours, float):
        return ours == theirs or abs(ours - theirs) <= FLOAT_TOLERANCE or (math.isnan(ours) and math.isnan(theirs))
    return type(ours) is type(theirs) and ours == theirs


def _show(value: Any) -> str:
    return f"{value!r} ({type(value).__name__})" if isinstance(value, (int, float)) and not isinstance(value, bool) \
        else repr(value)


def differences(ours: Any, expected: Any, path: str = "", top: bool = True) -> list[str]:
    """Field-by-field differences of `ours` from `expected`, in the expected file's order:
    missing or extra keys, values of another type (201 is not 201.0), numbers further apart than
    1e-12. At the top level, keys only we write (`error_trigger_stats`) are not differences."""
    if isinstance(expected, dict) and isinstance(ours, dict):
        out = []
        for key, value in expected.items():
            where = f"{path}.{key}" if path else str(key)
            if key not in ours:
                out.append(f"`{where}` is missing (expected {_show(value)})")
            else:
                out += differences(ours[key], value, where, top=False)
        if not top:
            out += [f"`{path}.{key}` is not in the expected file (ours: {_show(ours[key])})"
                    for key in ours if key not in expected]
        return out
    if isinstance(expected, list) and isinstance(ours, list):
        if len(ours) != len(expected):
            return [f"`{path}` has {len(ours)} items, expected {len(expected)}"]
        return [d for i, (a, b) in enumerate(zip(ours, expected)) for d in differences(a, b, f"{path}[{i}]", top=False)]
    if not _same(ours, expected):
        return [f"`{path}` is {_show(ours)}, expected {_show(expected)}"]
    return []


def order_notes(ours: Any, expected: Any, path: str = "") -> list[str]:
    """Where both hold the same keys in another order (JSON does not care; a diff of the text does)."""
    if not (isinstance(ours, dict) and isinstance(expected, dict)):
        return []
    out = []
    if set(ours) == set(expected) and list(ours) != list(expected):
        out.append(f"`{path or '(top)'}` keys are in another order: ours {list(ours)}, expected {list(expected)}")
    for key in expected:
        if key in ours:
            out += order_notes(ours[key], expected[key], f"{path}.{key}" if path else str(key))
    return out


def count_fields(value: Any) -> int:
    """How many scalar fields a metrics file holds (what `--expect` compared)."""
    if isinstance(value, dict):
        return sum(count_fields(v) for v in value.values())
    if isinstance(value, list):
        return sum(count_fields(v) for v in value)
    return 1


def release_metrics(results: ResultsFile) -> tuple[list[SampleRecord], OfficialMetrics]:
    """The records of a results file and its metrics in the released layout."""
    records = as_records(results)
    return records, official_metrics(records)
