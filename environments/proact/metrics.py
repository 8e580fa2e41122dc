"""ProactBench metrics with the official names, pooled over triggers, bootstrapped over dialogues.

total = PASS + PARTIAL + FAIL (SKIPPED and ERROR excluded from the rates, but counted and
reported: the reference pipeline silently dropped failed calls; we never do).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from corpora.proactbench import TRIGGER_TYPES
from harness.records import Metric, SampleRecord
from harness.stats import ratio_metric

LABELS = ("PASS", "PARTIAL", "FAIL", "SKIPPED", "ERROR")
_COL = {(t, lab): i for i, (t, lab) in enumerate((t, lab) for t in TRIGGER_TYPES for lab in LABELS)}


def trigger_labels(record: SampleRecord) -> list[tuple[str, str]]:
    """(type, label) per trigger of one dialogue record. A sample that failed as a whole has no
    trigger results: every trigger of it counts as ERROR via the `expected` list it stored."""
    labels = record.scores.get("triggers")
    if labels:
        return [(t["type"], t["label"]) for t in labels]
    return [(t, "ERROR") for t in record.scores.get("expected_types", [])]


def count_matrix(records: list[SampleRecord]) -> tuple[np.ndarray, list[str]]:
    """One row per dialogue (epochs of a dialogue pooled: the dialogue is the independent unit)."""
    by_dialogue: dict[str, np.ndarray] = {}
    for rec in records:
        row = by_dialogue.setdefault(rec.sample_id, np.zeros(len(_COL)))
        for kind, label in trigger_labels(rec):
            row[_COL[(kind, label)]] += 1
    ids = list(by_dialogue)
    return (np.stack([by_dialogue[i] for i in ids]) if ids else np.zeros((0, len(_COL)))), ids


def proact_breakdowns(records: list[SampleRecord], seed: int = 0) -> dict[str, dict[str, Metric]]:
    """Overall weighted score per style and per persona category (CIs over that group's dialogues)."""
    groups: dict[str, dict[str, list[SampleRecord]]] = {"style": {}, "category": {}}
    for rec in records:
        style, category = rec.output.get("style_combination_index"), rec.output.get("category_key")
        if style is not None:
            groups["style"].setdefault(str(style), []).append(rec)
        if category is not None:
            groups["category"].setdefault(str(category), []).append(rec)
    out: dict[str, dict[str, Metric]] = {}
    for by, members in groups.items():
        keys = sorted(members, key=lambda k: (len(k), k))
        out[by] = {k: proact_metrics(members[k], seed=seed)["proactivity_overall_weighted_score"] for k in keys}
    return out


def _cols(types: tuple[str, ...], label: str) -> list[int]:
    return [_COL[(t, label)] for t in types]


def proact_metrics(records: list[SampleRecord], seed: int = 0) -> dict[str, Metric]:
    counts, _ = count_matrix(records)
    out: dict[str, Metric] = {}
    groups = {t.lower(): (t,) for t in TRIGGER_TYPES} | {"overall": TRIGGER_TYPES}
    for name, types in groups.items():
        p, pa, f = _cols(types, "PASS"), _cols(types, "PARTIAL"), _cols(types, "FAIL")

        def total(c, p=p, pa=pa, f=f):
            return c[p].sum(axis=0) + c[pa].sum(axis=0) + c[f].sum(axis=0)

        out[f"proactivity_{name}_pass_rate"] = ratio_metric(counts, lambda c, p=p: c[p].sum(axis=0), total, seed=seed)
        out[f"proactivity_{name}_partial_rate"] = ratio_metric(counts, lambda c, pa=pa: c[pa].sum(axis=0), total, seed=seed)
        out[f"proactivity_{name}_weighted_score"] = ratio_metric(
            counts, lambda c, p=p, pa=pa: c[p].sum(axis=0) + 0.5 * c[pa].sum(axis=0), total, seed=seed
        )
    return out


def proact_counts(records: list[SampleRecord]) -> dict[str, int]:
    counts, ids = count_matrix(records)
    totals = counts.sum(axis=0) if len(ids) else np.zeros(len(_COL))
    out = {"dialogues": len(ids)}
    for label in LABELS:
        out[f"triggers_{label.lower()}"] = int(sum(totals[_COL[(t, label)]] for t in TRIGGER_TYPES))
    # Verdicts whose evidence is not a quote of the graded reply: flagged on the trigger and
    # counted here, a cheap check on the judge.
    out["verdicts_evidence_not_found"] = sum(
        tp.get("evaluation_result", {}).get("evidence_verbatim") is False
        for r in records for tp in r.output.get("trigger_points", [])
    )
    return out


def official_metrics(records: list[SampleRecord]) -> dict[str, Any]:
    """The reference pipeline's metrics file layout (`eval/...` names, pooled counts)."""
    counts, ids = count_matrix(records)
    totals = counts.sum(axis=0) if len(ids) else np.zeros(len(_COL))
    agg = {t: {lab: int(totals[_COL[(t, lab)]]) for lab in LABELS} for t in TRIGGER_TYPES}
    metrics: dict[str, Any] = {}

    def rates(stats: list[dict[str, int]]) -> tuple[float | None, float | None, float | None, int]:
        p = sum(s["PASS"] for s in stats)
        pa = sum(s["PARTIAL"] for s in stats)
        tot = p + pa + sum(s["FAIL"] for s in stats)
        if not tot:
            return None, None, None, 0
        return p / tot, pa / tot, (p + 0.5 * pa) / tot, tot

    for t in TRIGGER_TYPES:
        pr, par, ws, tot = rates([agg[t]])
        key = t.lower()
        metrics |= {f"eval/proactivity_{key}_pass_rate": pr, f"eval/proactivity_{key}_partial_rate": par,
                    f"eval/proactivity_{key}_weighted_score": ws, f"eval/proactivity_{key}_total": tot}
    pr, _, ws, _ = rates(list(agg.values()))
    metrics |= {"eval/proactivity_overall_pass_rate": pr, "eval/proactivity_overall_weighted_score": ws,
                "eval/proactivity_total_dialogues": len(ids)}
    token_usage: dict[str, Any] = {}
    for role in ("assistant", "judge"):
        pt = sum(r.usage[role].prompt_tokens for r in records if role in r.usage)
        ct = sum(r.usage[role].completion_tokens for r in records if role in r.usage)
        calls = sum(r.usage[role].calls for r in records if role in r.usage)
        n = max(len(ids), 1)
        token_usage[role] = {"prompt_tokens": pt, "completion_tokens": ct, "calls": calls,
                             "mean_prompt_tokens_per_dialogue": pt / n, "mean_completion_tokens_per_dialogue": ct / n}
    return {"aggregate_trigger_stats": agg, "metrics": metrics, "token_usage": token_usage}
