"""Labelled synthetic ProactBench results files, shaped like the release's per-model files and
carrying each deviation seen in them, plus an independent computation of the metrics file the
reference pipeline would publish for them.

`synthetic_release(rng)` returns the JSONL rows to write and the truth: for every row, the
(type, label) of each trigger the file lists, and the tokens per agent. The expected metrics are
computed here from that truth with plain arithmetic, not with the harness' code.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import JsonValue

TYPES = ("EMERGENT", "CRITICAL", "RECOVERY")
GRADES = ("PASS", "PARTIAL", "FAIL")


@dataclass
class Truth:
    labels: list[tuple[str, str]] = field(default_factory=list)  # listed triggers: (type, label)
    usage: dict[str, tuple[int, int, int]] = field(default_factory=dict)  # agent -> prompt, completion, calls
    dropped: int = 0  # triggers left out of the row (their model call counted)


# Which rows carry which deviation (row index -> tag); every tag is one the release shows or
# the reference code can produce.
DEVIATION_ROWS = {
    0: "int id, model name, first row without EMERGENT (a dropped trigger)",
    3: "int id",
    4: "dropped trigger (trigger, trigger_stats type and turn record absent; assistant call counted)",
    6: "null evaluation_result (judge failed: SKIPPED)",
    7: "status SKIPPED",
    9: "trigger_stats disagree with the labels",
    10: "source_results_path missing",
    11: "token_usage without judge",
    12: "repeats row 2's key",
    13: "extra top-level key",
}


def _rubric(kind: str, i: int) -> dict[str, str]:
    return {"type": kind, "pass_criteria": f"pass {kind} {i}", "partial_criteria": f"partial {kind} {i}",
            "fail_criteria": f"fail {kind} {i}"}


def _verdict(label: str, i: int) -> dict[str, JsonValue]:
    return {"status": "EVALUATED", "score": label, "rationale": f"graded {label} ({i})", "evidence": f"quote {i}"}


def synthetic_release(rng: random.Random, n_rows: int = 24, tracked_assistant: bool = True
                      ) -> tuple[list[dict[str, JsonValue]], list[Truth]]:
    rows, truths = [], []
    for r in range(n_rows):
        # Trigger layout: EMERGENT on turn 1, one or two CRITICAL, usually a RECOVERY.
        slots = [("EMERGENT", 1), ("CRITICAL", 4)] + ([("CRITICAL", 6)] if rng.random() < 0.4 else []) \
            + ([("RECOVERY", 8)] if rng.random() < 0.85 or r == 0 else [])
        drop = {0} if r in (0, 4) else set()  # row 0 loses its EMERGENT: the file's type order starts at CRITICAL
        truth = Truth(dropped=len(drop))
        blueprint, style, uuid = f"BP_SYN_{r:02d}_X", 1 + r % 24, f"{r:032x}"
        triggers, turn_records = [], []
        for i, (kind, turn) in enumerate(slots):
            if i in drop:
                continue
            label = rng.choice(GRADES)
            verdict: dict[str, JsonValue] | None = _verdict(label, i)
            if r == 6 and kind == "CRITICAL" and turn == 4:
                verdict, label = None, "SKIPPED"
            if r == 7 and kind == "EMERGENT":
                verdict, label = {"status": "SKIPPED", "score": None, "rationale": "no verdict", "evidence": None}, "SKIPPED"
            triggers.append({"turn": turn, "evaluation_rubric": _rubric(kind, r), "evaluation_result": verdict})
            turn_records.append({"turn": turn, "user_message": f"user {r}.{turn}", "assistant_response": f"reply {r}.{turn}",
                                 "original_assistant_response": f"curated {r}.{turn}"})
            truth.labels.append((kind, label))
        stats: dict[str, dict[str, int]] = {}
        for kind, label in truth.labels:
            stats.setdefault(kind, {"PASS": 0, "PARTIAL": 0, "FAIL": 0, "SKIPPED": 0})[label] += 1
        if r == 9:
            stats["CRITICAL"]["PASS"] += 2  # the stored counts lie; the labels are the truth
        a_calls = len(slots) if tracked_assistant else 0
        usage = {"assistant": (rng.randint(900, 9000) if tracked_assistant else 0,
                               rng.randint(100, 4000) if tracked_assistant else 0, a_calls),
                 "judge": (rng.randint(3000, 20000), rng.randint(300, 2500),
                           sum(tp["evaluation_result"] is not None for tp in triggers))}
        token_usage = {agent: {"prompt_tokens": p, "completion_tokens": c, "calls": n} for agent, (p, c, n) in usage.items()}
        if r == 11:
            del token_usage["judge"]
            usage = {"assistant": usage["assistant"]}
        truth.usage = usage
        uid: Any = f"{blueprint}__style{style}__{uuid}"
        if r in (0, 3):
            uid = r  # the row's position, as in the local-vLLM files
        row = {"blueprint_id": blueprint, "scenario_id": f"SYN_{r:02d}", "unique_id_eval": uid, "uuid": uuid,
               "category_key": ("professional_persona", "arts_persona")[r % 2], "style_combination_index": style,
               "evaluated_model": "Syn-7B" if r in (0, 3) else "local_model", "source_evaluated_model": "gemini-2.5-pro",
               "num_trigger_points": len(triggers), "trigger_stats": stats, "trigger_points": triggers,
               "turn_records": turn_records, "token_usage": token_usage,
               "source_results_path": "dataset/final_dialogues.jsonl"}
        if r == 10:
            del row["source_results_path"]
        if r == 12:
            row.update({k: rows[2][k] for k in ("blueprint_id", "style_combination_index", "uuid", "unique_id_eval")})
        if r == 13:
            row["num_turns_completed"] = 9
        rows.append(row)
        truths.append(truth)
    return rows, truths


def write_jsonl(path: Path, rows: list[dict[str, JsonValue]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def expected_metrics(truths: list[Truth]) -> dict[str, JsonValue]:
    """The metrics file as the reference pipeline writes it, from the truth alone."""
    order: list[str] = []
    counts: dict[str, dict[str, int]] = {}
    for truth in truths:
        for kind, label in truth.labels:
            if kind not in counts:
                order.append(kind)
                counts[kind] = {"PASS": 0, "PARTIAL": 0, "FAIL": 0, "SKIPPED": 0}
            counts[kind][label] += 1
    metrics: dict[str, JsonValue] = {}
    pooled = {"PASS": 0, "PARTIAL": 0, "FAIL": 0}
    for kind in order:
        c = counts[kind]
        total = c["PASS"] + c["PARTIAL"] + c["FAIL"]
        for lab in pooled:
            pooled[lab] += c[lab]
        name = kind.lower()
        metrics[f"eval/proactivity_{name}_pass_rate"] = c["PASS"] / total
        metrics[f"eval/proactivity_{name}_partial_rate"] = c["PARTIAL"] / total
        metrics[f"eval/proactivity_{name}_weighted_score"] = (c["PASS"] + 0.5 * c["PARTIAL"]) / total
        metrics[f"eval/proactivity_{name}_total"] = float(total)
    total = sum(pooled.values())
    metrics["eval/proactivity_overall_pass_rate"] = pooled["PASS"] / total
    metrics["eval/proactivity_overall_weighted_score"] = (pooled["PASS"] + 0.5 * pooled["PARTIAL"]) / total
    metrics["eval/proactivity_total_dialogues"] = float(len(truths))
    token_usage = {}
    for agent in ("assistant", "judge"):
        p = sum(t.usage.get(agent, (0, 0, 0))[0] for t in truths)
        c = sum(t.usage.get(agent, (0, 0, 0))[1] for t in truths)
        n = sum(t.usage.get(agent, (0, 0, 0))[2] for t in truths)
        token_usage[agent] = {"mean_prompt_tokens_per_conversation": p / len(truths),
                              "mean_completion_tokens_per_conversation": c / len(truths),
                              "mean_calls_per_conversation": n / len(truths),
                              "total_prompt_tokens": p, "total_completion_tokens": c}
    return {"aggregate_trigger_stats": {k: counts[k] for k in order}, "metrics": metrics, "token_usage": token_usage}
