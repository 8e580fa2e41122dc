"""ProactBench metrics with the official names, pooled over triggers, bootstrapped over dialogues.

total = PASS + PARTIAL + FAIL (SKIPPED and ERROR excluded from the rates, but counted and
reported: the reference pipeline silently dropped failed calls; we never do).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypedDict

import numpy as np

from corpora.proact_types import LABELS, RELEASE_LABELS, RESULT_AGENTS, TRIGGER_TYPES, ResultRow, Verdict
from environments.proact.payloads import ProactScores
from harness.records import Metric, SampleRecord
from harness.stats import cohen_kappa, ratio_metric, resampled_metric

# (trigger type, label) -> column; keyed by plain strings: the records hold them as text
_COL: dict[tuple[str, str], int] = {(t, lab): i for i, (t, lab) in enumerate((t, lab) for t in TRIGGER_TYPES
                                                                            for lab in LABELS)}


def scores_of(record: SampleRecord) -> ProactScores:
    """A record's scores as the judge scorer's type (the records of every ProactBench suite that
    judges, and the rows of a results file, `results.as_records`)."""
    return ProactScores.model_validate(record.scores)


def trigger_labels(record: SampleRecord) -> list[tuple[str, str]]:
    """(type, label) per trigger of one dialogue record. A sample that failed as a whole has no
    trigger results: every trigger of it counts as ERROR via the `expected` list it stored."""
    scores = scores_of(record)
    if scores.triggers:
        return [(t.type, t.label) for t in scores.triggers]
    return [(t, "ERROR") for t in scores.expected_types]


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

        def total(c: np.ndarray, p: list[int] = p, pa: list[int] = pa, f: list[int] = f) -> np.ndarray:
            return np.asarray(c[p].sum(axis=0) + c[pa].sum(axis=0) + c[f].sum(axis=0))

        def passed(c: np.ndarray, p: list[int] = p) -> np.ndarray:
            return np.asarray(c[p].sum(axis=0))

        def partial(c: np.ndarray, pa: list[int] = pa) -> np.ndarray:
            return np.asarray(c[pa].sum(axis=0))

        def weighted(c: np.ndarray, p: list[int] = p, pa: list[int] = pa) -> np.ndarray:
            return np.asarray(c[p].sum(axis=0) + 0.5 * c[pa].sum(axis=0))

        out[f"proactivity_{name}_pass_rate"] = ratio_metric(counts, passed, total, seed=seed)
        out[f"proactivity_{name}_partial_rate"] = ratio_metric(counts, partial, total, seed=seed)
        out[f"proactivity_{name}_weighted_score"] = ratio_metric(counts, weighted, total, seed=seed)
    return out


AGREEMENT_LABELS = ("PASS", "PARTIAL", "FAIL")


def panel_agreement(records: list[SampleRecord], seed: int = 0) -> dict[str, Metric]:
    """With a panel of judges (`--judge-model a --judge-model b`, or a re-score that adds one):
    Cohen's kappa between the panel's first two judges per trigger type and overall, over the
    triggers both graded, with a bootstrap CI over dialogues -- the judge-swap effect the paper
    discusses, measured on the user's own transcripts. Empty without a panel."""
    index = {t: i for i, t in enumerate(TRIGGER_TYPES)}
    size = len(AGREEMENT_LABELS)
    by_dialogue: dict[str, np.ndarray] = {}
    for rec in records:
        for v in scores_of(rec).verdicts or []:  # format 1 kept no trigger type beside a verdict: none counted
            judges = v.evaluation_result.judges or []
            if len(judges) < 2:
                continue
            first, second = judges[0].score, judges[1].score
            if first in AGREEMENT_LABELS and second in AGREEMENT_LABELS:
                cell = by_dialogue.setdefault(rec.sample_id, np.zeros((len(TRIGGER_TYPES), size, size)))
                cell[index[v.type], AGREEMENT_LABELS.index(first), AGREEMENT_LABELS.index(second)] += 1
    if not by_dialogue:
        return {}
    units = np.stack(list(by_dialogue.values()))  # dialogue x type x first judge's label x second's
    def kappa_of(i: int | None) -> Callable[[np.ndarray], float | None]:  # one type's, or all types pooled (None)
        return lambda u: cohen_kappa(u.sum(axis=(0, 1)) if i is None else u[:, i].sum(axis=0))

    out = {f"judge_agreement_kappa_{t.lower()}": resampled_metric(units, kappa_of(i), seed=seed)
           for t, i in index.items()}
    out["judge_agreement_kappa_overall"] = resampled_metric(units, kappa_of(None), seed=seed)
    return out


def verdicts(record: SampleRecord) -> list[Verdict]:
    """Each trigger's verdict: the scorer's (format 2), or the transcript's own (format 1 kept the
    verdicts in the output, in the release row's `trigger_points`; so does a results file's row)."""
    scores = scores_of(record)
    if scores.verdicts is not None:
        return [v.evaluation_result for v in scores.verdicts]
    if "trigger_points" not in record.output:  # a sample that failed as a whole
        return []
    return [tp.evaluation_result for tp in ResultRow.model_validate(record.output).trigger_points
            if tp.evaluation_result is not None]


def proact_counts(records: list[SampleRecord]) -> dict[str, int]:
    counts, ids = count_matrix(records)
    totals = counts.sum(axis=0) if len(ids) else np.zeros(len(_COL))
    out = {"dialogues": len(ids)}
    for label in LABELS:
        out[f"triggers_{label.lower()}"] = int(sum(totals[_COL[(t, label)]] for t in TRIGGER_TYPES))
    # Verdicts whose evidence is not a quote of the graded reply: flagged on the trigger and
    # counted here, a cheap check on the judge.
    out["verdicts_evidence_not_found"] = sum(v.evidence_verbatim is False for r in records for v in verdicts(r))
    return out


class OfficialMetrics(TypedDict):
    """The reference pipeline's metrics file (`*_metrics.json`) and our `error_trigger_stats`: a
    TypedDict, not a model, because it is written as is and its layout is the release's."""
    aggregate_trigger_stats: dict[str, dict[str, int]]  # type -> label -> count
    metrics: dict[str, float | None]  # `eval/proactivity_...` -> value
    token_usage: dict[str, dict[str, float]]  # agent -> totals and means per conversation
    error_trigger_stats: dict[str, int]  # type -> ERROR count (ours)


def official_metrics(records: list[SampleRecord]) -> OfficialMetrics:
    """The reference pipeline's metrics file, in its layout, plus `error_trigger_stats`.

    As the released `*_metrics.json` files compute it (checked against all 16): types in the
    order they first appear; per type PASS/PARTIAL/FAIL/SKIPPED summed over dialogues; `total` =
    PASS + PARTIAL + FAIL as a float; pass rate PASS/total, partial rate PARTIAL/total, weighted
    score (PASS + 0.5 PARTIAL)/total (None where total is 0); the overall figures pool every
    trigger; `total_dialogues` a float. Token usage per agent (`assistant`, `judge`, then any
    other role): totals, and means per conversation = total / number of conversations (records).

    ERROR (our failed calls, which the reference pipeline drops) is in none of those: it is
    counted per type under the separate key `error_trigger_stats`.
    """
    agg: dict[str, dict[str, int]] = {}
    errors: dict[str, int] = {}
    dialogues: set[str] = set()
    for rec in records:
        dialogues.add(rec.sample_id)
        for kind, label in trigger_labels(rec):
            stats = agg.setdefault(kind, dict.fromkeys(RELEASE_LABELS, 0))
            errors.setdefault(kind, 0)
            if label == "ERROR":
                errors[kind] += 1
            else:
                stats[label] += 1

    def rates(stats: list[dict[str, int]]) -> tuple[float | None, float | None, float | None, float]:
        p = sum(s["PASS"] for s in stats)
        pa = sum(s["PARTIAL"] for s in stats)
        tot = p + pa + sum(s["FAIL"] for s in stats)
        if not tot:
            return None, None, None, 0.0
        return p / tot, pa / tot, (p + 0.5 * pa) / tot, float(tot)

    metrics: dict[str, float | None] = {}
    for kind, stats in agg.items():
        pr, par, ws, tot = rates([stats])
        key = kind.lower()
        metrics |= {f"eval/proactivity_{key}_pass_rate": pr, f"eval/proactivity_{key}_partial_rate": par,
                    f"eval/proactivity_{key}_weighted_score": ws, f"eval/proactivity_{key}_total": tot}
    pr, _, ws, _ = rates(list(agg.values()))
    metrics |= {"eval/proactivity_overall_pass_rate": pr, "eval/proactivity_overall_weighted_score": ws,
                "eval/proactivity_total_dialogues": float(len(dialogues))}

    roles = list(dict.fromkeys([*RESULT_AGENTS, *(role for rec in records for role in rec.usage)]))
    n = len(records)
    token_usage: dict[str, dict[str, float]] = {}
    for role in roles:
        used = [rec.usage[role] for rec in records if role in rec.usage]
        pt, ct = sum(u.prompt_tokens for u in used), sum(u.completion_tokens for u in used)
        calls = sum(u.calls for u in used)
        token_usage[role] = {"mean_prompt_tokens_per_conversation": pt / n if n else 0.0,
                             "mean_completion_tokens_per_conversation": ct / n if n else 0.0,
                             "mean_calls_per_conversation": calls / n if n else 0.0,
                             "total_prompt_tokens": pt, "total_completion_tokens": ct}
    return {"aggregate_trigger_stats": agg, "metrics": metrics, "token_usage": token_usage,
            "error_trigger_stats": errors}
