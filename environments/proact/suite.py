"""Suite `proact`: ProactBench's offline protocol over a corpus in the official format.

One sample = one dialogue (the independent unit). For each trigger point: rebuild the curated
history up to the trigger turn, regenerate that turn with the model under test, and have the
judge grade it against the Planner-authored rubric.
"""

from __future__ import annotations

import asyncio
from typing import Any

from environments.proact.metrics import official_metrics, proact_breakdowns, proact_counts, proact_metrics
from environments.proact.corpus_suite import CorpusSuite
from environments.proact.judging import judge_reply, label_of
from environments.proact.protocol import ASSISTANT_CONFIG, history_messages
from harness.providers.base import ModelError
from harness.records import Metric, SampleRecord
from harness.suite import Sample, SampleContext, SampleOutcome

IDENTITY_FIELDS = ("blueprint_id", "scenario_id", "unique_id_eval", "uuid", "category_key",
                   "style_combination_index", "num_turns_completed")


class ProactOfflineSuite(CorpusSuite):
    name = "proact"
    version = "1.0.0"
    roles = ("assistant", "judge")
    headline_metric = "proactivity_overall_weighted_score"
    description = "ProactBench offline protocol: regenerate each trigger turn, judge against its rubric"

    async def run_sample(self, sample: Sample, ctx: SampleContext) -> SampleOutcome:
        row = sample.data
        triggers = sorted(row["trigger_points"], key=lambda tp: tp["turn"])
        results = await asyncio.gather(*(self._run_trigger(row, tp, ctx) for tp in triggers))
        by_turn = {t["turn"]: t for t in row["turn_records"]}
        stats = {t: {lab: 0 for lab in ("PASS", "PARTIAL", "FAIL", "SKIPPED", "ERROR")}
                 for t in ("EMERGENT", "CRITICAL", "RECOVERY")}
        labels, errors, turn_records = [], [], []
        for tp, res in zip(triggers, results):
            kind = tp["evaluation_rubric"]["type"]
            stats[kind][res["label"]] += 1
            labels.append({"turn": tp["turn"], "type": kind, "label": res["label"]})
            if res.get("error"):
                errors.append(f"turn {tp['turn']}: {res['error']}")
            turn_records.append({
                "turn": tp["turn"],
                "user_message": by_turn[tp["turn"]]["user_message"],
                "assistant_response": res.get("reply"),
                "original_assistant_response": by_turn[tp["turn"]]["assistant_response"],
            })
        output = {k: row[k] for k in IDENTITY_FIELDS if k in row}
        output |= {
            "source_evaluated_model": row.get("evaluated_model"),
            "num_trigger_points": len(triggers),
            "trigger_stats": stats,
            "trigger_points": [
                {"turn": tp["turn"], "evaluation_rubric": tp["evaluation_rubric"], "evaluation_result": res["result"]}
                for tp, res in zip(triggers, results)
            ],
            "turn_records": turn_records,
            "token_usage": {role: u.model_dump() for role, u in sorted(ctx.usage.items())},
        }
        scores = {"triggers": labels, "expected_types": [tp["evaluation_rubric"]["type"] for tp in triggers]}
        return SampleOutcome(output=output, scores=scores, errors=errors)

    async def _run_trigger(self, row: dict[str, Any], tp: dict[str, Any], ctx: SampleContext) -> dict[str, Any]:
        rubric = tp["evaluation_rubric"]
        history = history_messages(row, tp["turn"])
        try:
            reply = (await ctx.generate("assistant", history, ASSISTANT_CONFIG)).text
        except ModelError as exc:
            return {"label": "ERROR", "error": f"assistant: {exc}",
                    "result": {"status": "ERROR", "error": f"assistant: {exc}"}}
        result = await judge_reply(ctx, rubric, history, reply)
        out = {"label": label_of(result), "reply": reply, "result": result}
        if result["status"] == "ERROR":
            out["error"] = result.get("error") or result.get("rationale")
        return out

    def scores_on_failure(self, sample: Sample) -> dict[str, Any]:
        return {"triggers": [], "expected_types": [tp["evaluation_rubric"]["type"] for tp in sample.data["trigger_points"]]}

    def metrics(self, records: list[SampleRecord], seed: int = 0) -> dict[str, Metric]:
        return proact_metrics(records, seed=seed)

    def breakdowns(self, records: list[SampleRecord], seed: int = 0) -> dict[str, dict[str, Metric]]:
        return proact_breakdowns(records, seed=seed)

    def counts(self, records: list[SampleRecord]) -> dict[str, int]:
        return proact_counts(records)

    def official_summary(self, records: list[SampleRecord]) -> dict[str, Any]:
        return official_metrics(records)
