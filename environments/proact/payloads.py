"""What ProactBench's suites record, as types: each suite's transcript and scores (its
`transcript_type` / `scores_type`, validated once by the runner on the solve and the re-score path
alike), so the solvers, scorers and metrics work on objects.

The corpus row, the results row and their parts (rubric, verdict, trigger, turn) are
`corpora.proact_types`; the models here are built of them. All are `Loose`: a record keeps keys
the model does not name and dumps only the fields it was given, so a run recorded before these
types (dicts) reads back and re-scores, and a run recorded now holds the same JSON.

- `proact` (offline): the transcript is a results row without verdicts (`ResultRow`: identity,
  the rubric of each trigger, the regenerated reply beside the curated one); records of format 1
  also carry the verdicts and `trigger_stats` there. Scores: `ProactScores`.
- `proact-live`: `LiveTranscript` (the whole dialogue in the release's row layout, with the loop's
  fallbacks and protocol), scores `LiveScores`.
- `proact-judge`: `StoredReplies`, scores `AgreementScores` (stored label beside the judge's).
- `proact-audit`: `AuditTranscript`, scores `AuditScores`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from corpora.proact_types import Grade, Label, Loose, TriggerPoint, TriggerType, TurnRecord, Verdict


# ---------------------------------------------------------------------- the judge scorer's values
class TriggerLabel(Loose):
    """One trigger's label, what the metrics count."""

    turn: int
    type: TriggerType
    label: Label


class TriggerVerdict(Loose):
    """One trigger's verdict (`evaluation_result`) as the scorer wrote it."""

    turn: int
    type: TriggerType
    evaluation_result: Verdict


class ProactScores(Loose):
    """The judge scorer's values. A sample that failed as a whole has no `triggers`: its
    `expected_types` count as ERROR labels. Records of format 1 have no `verdicts` (the
    transcript held them)."""

    triggers: list[TriggerLabel] = Field(default_factory=list)
    verdicts: list[TriggerVerdict] | None = None
    trigger_stats: dict[str, dict[str, int]] | None = None
    expected_types: list[TriggerType] = Field(default_factory=list)


# ---------------------------------------------------------------------- proact-live
class LiveTrigger(TriggerPoint):
    """A trigger that took place; `assistant_error` when the model under test failed on it."""

    assistant_error: str | None = None


class LiveFallbacks(Loose):
    planner: int = Field(ge=0)
    user: int = Field(ge=0)


class LiveProtocol(Loose):
    """The dialogue's structure (fixed by code from the blueprint) and the loop's settings."""

    scheduled_triggers: dict[str, TriggerType]  # turn (as text: a JSON key) -> type
    scheduled_done_turn: int | None = None
    done_turn: int | None = None
    anchor_due: dict[str, int] | None = None
    revealed_anchor_ids: list[str] | None = None
    planner_max_tokens: int | None = None
    user_max_tokens: int | None = None
    planner_attempts: int | None = None
    user_attempts: int | None = None


class LiveTranscript(Loose):
    """A live dialogue as a row of the release format, plus the loop's record of itself."""

    blueprint_id: str
    scenario_id: str
    unique_id_eval: str
    uuid: str
    category_key: str
    style_combination_index: int
    evaluated_model: str
    num_turns_completed: int
    trigger_points: list[LiveTrigger]
    turn_records: list[TurnRecord]
    fallbacks: LiveFallbacks
    protocol: LiveProtocol


class LiveScores(ProactScores):
    planner_fallbacks: int | None = None
    user_fallbacks: int | None = None


# ---------------------------------------------------------------------- proact-judge
class StoredReply(Loose):
    """A curated reply to grade again, with the label stored for it at curation time."""

    turn: int
    assistant_response: str
    stored: Grade


class StoredReplies(Loose):
    unique_id_eval: str
    turn_records: list[StoredReply]


class LabelPair(Loose):
    turn: int
    type: TriggerType
    reference: Grade
    predicted: Label


class AgreementScores(ProactScores):
    pairs: list[LabelPair] = Field(default_factory=list)


# ---------------------------------------------------------------------- proact-audit
class AuditTranscript(Loose):
    unique_id_eval: str
    turns: list[int]


class RubricAudit(Loose):
    turn: int
    verdict: Literal["ACHIEVABLE", "NOT_ACHIEVABLE", "UNPARSED", "ERROR"]
    reason: str
    failure_kind: str | None = None


class AuditScores(Loose):
    """Empty for a sample that failed as a whole: not accepted."""

    unique_id_eval: str | None = None
    audits: list[RubricAudit] = Field(default_factory=list)
    accepted: bool = False

