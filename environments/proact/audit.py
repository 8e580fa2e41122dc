"""Suite `proact-audit`: an independent model checks that every rubric of a dialogue is
achievable from what the user had disclosed by that trigger turn. `harness corpus build` keeps
only dialogues that pass, so a new corpus never asks an assistant to read minds.
"""

from __future__ import annotations

import asyncio

import jsonschema
import numpy as np

from pydantic import BaseModel, JsonValue

from corpora.proact_types import CorpusRow, Rubric, TriggerPoint
from environments.proact.corpus_suite import CorpusSuite
from environments.proact.payloads import AuditScores, AuditTranscript, RubricAudit
from environments.proact.protocol import history_messages, json_objects, render_conversation
from harness.messages import ChatMessage
from harness.providers.base import GenerateConfig
from harness.records import Metric, SampleRecord
from harness.stats import ratio_metric
from harness.structured import Attempt, ReplyProblem, bounded, reply_text, retry_reply
from harness.suite import FunctionScorer, Sample, SampleContext, Score, Scorer, Transcript

AUDIT_ATTEMPTS = 3
AUDIT_SCHEMA: dict[str, JsonValue] = {
    "type": "object",
    "required": ["achievable", "reason"],
    "properties": {"achievable": {"type": "boolean"}, "reason": {"type": "string", "minLength": 1}},
}
_VALIDATOR = jsonschema.Draft202012Validator(AUDIT_SCHEMA)
# The auditor's decoding is held to its schema (no other keys, a one-sentence reason).
AUDIT_DECODE_SCHEMA = {**bounded(AUDIT_SCHEMA, 300), "additionalProperties": False}
AUDIT_CONFIG = GenerateConfig(temperature=0.0, max_tokens=256, json_schema=AUDIT_DECODE_SCHEMA)


def audit_messages(rubric: Rubric, history: list[ChatMessage]) -> list[ChatMessage]:
    """The auditor sees what the assistant would see at that turn, and the rubric's PASS bar."""
    convo = render_conversation(history)
    text = (
        "You audit a benchmark item. Below is a conversation up to the user's latest message, and the "
        "criterion an assistant's next reply must meet to PASS. Decide whether a careful assistant could "
        "meet it using only what the user has disclosed so far (no mind reading, no facts the user never gave).\n\n"
        f"=== Conversation ===\n{convo}\n\n=== PASS criterion ({rubric.type}) ===\n{rubric.pass_criteria}\n\n"
        'Answer with one JSON object and nothing else: {"achievable": true | false, "reason": "<one sentence>"}'
    )
    return [{"role": "user", "content": text}]


class AuditAnswer(BaseModel):
    """The auditor's answer (checked against AUDIT_SCHEMA first, which says why one is refused)."""

    achievable: bool
    reason: str


def parse_audit(text: str) -> AuditAnswer | None:
    for obj, problem in json_objects(text):
        if problem is None and isinstance(obj, dict) and not list(_VALIDATOR.iter_errors(obj)):
            return AuditAnswer(achievable=obj["achievable"], reason=obj["reason"])
    return None


class ProactAuditSuite(CorpusSuite[AuditTranscript, AuditScores]):
    name = "proact-audit"
    version = "1.0.0"
    headline_metric = "audit_pass_rate"
    description = "Audit: is each rubric achievable from what was disclosed by its trigger turn?"
    transcript_type = AuditTranscript
    scores_type = AuditScores

    @property
    def solver_roles(self) -> tuple[str, ...]:
        return ()  # the dialogue is the transcript; the auditor is the scorer

    async def solve(self, sample: Sample[CorpusRow], ctx: SampleContext) -> Transcript:
        return Transcript(output=AuditTranscript(unique_id_eval=sample.data.unique_id_eval,
                                                 turns=[tp.turn for tp in sample.data.trigger_points]))

    def scorers(self) -> dict[str, Scorer[AuditTranscript]]:
        return {"audit": FunctionScorer("audit", self._audit, roles=("judge",),
                                        description="an independent model audits each rubric (the `judge` role names it)")}

    async def _audit(self, sample: Sample[CorpusRow], transcript: AuditTranscript, ctx: SampleContext) -> Score:
        row = sample.data

        async def audit(tp: TriggerPoint) -> RubricAudit:
            prompt = audit_messages(tp.evaluation_rubric, history_messages(row.turn_records, tp.turn))

            async def ask(attempt: int, tried: list[Attempt]) -> AuditAnswer:
                config = AUDIT_CONFIG.merged(seed=ctx.seed + attempt, temperature=0.0 if attempt == 0 else 0.7)
                parsed = parse_audit(reply_text(await ctx.generate("judge", prompt, config)))
                if parsed is None:
                    raise ReplyProblem("invalid", "no JSON object with achievable (true/false) and reason")
                return parsed

            answer = await retry_reply(ask, AUDIT_ATTEMPTS)
            if answer.error is not None:
                return RubricAudit(turn=tp.turn, verdict="ERROR", reason=answer.error)
            if answer.value is None:
                return RubricAudit(turn=tp.turn, verdict="UNPARSED", reason=f"no valid answer in {AUDIT_ATTEMPTS} attempts",
                                   failure_kind=answer.failure)
            verdict = "ACHIEVABLE" if answer.value.achievable else "NOT_ACHIEVABLE"
            return RubricAudit(turn=tp.turn, verdict=verdict, reason=answer.value.reason)

        audits = await asyncio.gather(*(audit(tp) for tp in sorted(row.trigger_points, key=lambda t: t.turn)))
        accepted = all(a.verdict == "ACHIEVABLE" for a in audits)
        errors = [f"turn {a.turn}: {a.reason}" for a in audits if a.verdict == "ERROR"]
        return Score(values=AuditScores(unique_id_eval=row.unique_id_eval, audits=list(audits), accepted=accepted),
                     errors=errors)

    def metrics(self, records: list[SampleRecord], seed: int = 0) -> dict[str, Metric]:
        accepted = [self.read_scores(r.scores).accepted for r in records]
        per_dialogue = np.array([[1.0 if a else 0.0, 1.0] for a in accepted]).reshape(-1, 2)
        return {"audit_pass_rate": ratio_metric(per_dialogue, lambda c: c[0], lambda c: c[1], seed=seed)}
