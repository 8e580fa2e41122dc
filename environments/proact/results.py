"""Official metrics from any results file in the release format (labels already present), so
published results can be re-aggregated with the same code that scores our own runs."""

from __future__ import annotations

from typing import Any

from corpora.proactbench import TRIGGER_TYPES
from environments.proact.metrics import LABELS
from harness.records import SampleRecord


def label_of_stored(tp: dict[str, Any]) -> str | None:
    res = tp.get("evaluation_result")
    if not isinstance(res, dict):
        return None
    if res.get("status") == "EVALUATED" and res.get("score") in ("PASS", "PARTIAL", "FAIL"):
        return res["score"]
    return res.get("status") if res.get("status") in ("SKIPPED", "ERROR") else None


def as_records(rows: list[dict[str, Any]]) -> list[SampleRecord]:
    """Each labelled row as a scored sample, so the suite's own metric code applies unchanged."""
    records = []
    for row in rows:
        triggers = [{"turn": tp["turn"], "type": tp["evaluation_rubric"]["type"], "label": label}
                    for tp in row["trigger_points"] if (label := label_of_stored(tp))]
        records.append(SampleRecord(sample_id=row["unique_id_eval"], epoch=0, seed=0, status="ok", started="",
                                    duration_s=0.0, output=row, scores={"triggers": triggers}))
    return records


def recount(row: dict[str, Any]) -> dict[str, dict[str, int]]:
    counts = {t: {lab: 0 for lab in LABELS if lab != "ERROR"} for t in TRIGGER_TYPES}
    for tp in row["trigger_points"]:
        label = label_of_stored(tp)
        if label in counts[tp["evaluation_rubric"]["type"]]:
            counts[tp["evaluation_rubric"]["type"]][label] += 1
    return counts


def trigger_stats_mismatches(rows: list[dict[str, Any]]) -> list[tuple[str, dict, dict]]:
    """Rows whose stored `trigger_stats` differ from the counts of their labels."""
    out = []
    for row in rows:
        stored = row.get("trigger_stats")
        if not isinstance(stored, dict):
            continue
        mine = recount(row)
        theirs = {t: {lab: stored.get(t, {}).get(lab, 0) for lab in mine[t]} for t in TRIGGER_TYPES}
        if mine != theirs:
            out.append((row["unique_id_eval"], theirs, mine))
    return out
