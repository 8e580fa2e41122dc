"""Typed ProactBench payloads: the one home of the trigger types and labels, and pydantic models
of a corpus row (`final_dialogues.jsonl`) and of a row of the release's per-model results files
(`dataset/eval/{model}_proactivity_bench_results.jsonl`).

The `Literal` aliases are the source of truth; every tuple below is derived from them, and other
modules import the tuples from here rather than spelling the labels out again.

The models describe what the files hold, including the fields our own judge adds to a verdict.
They are lenient where the release is (extra keys are kept, informational parts such as the
curation Planner's state are loose) and typed where the protocol depends on a value (trigger
type, turn, label). Corpus files are still checked by the stricter JSON schema in
`corpora.proactbench` first, which gives `file:line` errors; these models are the typed view.
"""

from __future__ import annotations

from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, JsonValue, SerializerFunctionWrapHandler, model_serializer

TriggerType = Literal["EMERGENT", "CRITICAL", "RECOVERY"]
Grade = Literal["PASS", "PARTIAL", "FAIL"]  # what a judge may answer
Status = Literal["EVALUATED", "SKIPPED", "ERROR"]  # a verdict's status; ERROR is ours (failed call)
ReleaseLabel = Literal[Grade, Literal["SKIPPED"]]  # the labels the release counts per type
Label = Literal[ReleaseLabel, Literal["ERROR"]]  # a trigger's label in our metrics

TRIGGER_TYPES: tuple[TriggerType, ...] = get_args(TriggerType)
GRADES: tuple[Grade, ...] = get_args(Grade)
STATUSES: tuple[Status, ...] = get_args(Status)
RELEASE_LABELS: tuple[ReleaseLabel, ...] = get_args(ReleaseLabel)
LABELS: tuple[Label, ...] = get_args(Label)

# The release's per-model results layout: top-level fields, in the order the files write them.
RESULT_FIELDS = ("blueprint_id", "scenario_id", "unique_id_eval", "uuid", "category_key", "style_combination_index",
                 "evaluated_model", "source_evaluated_model", "num_trigger_points", "trigger_stats", "trigger_points",
                 "turn_records", "token_usage", "source_results_path")
RESULT_AGENTS = ("assistant", "judge")  # the agents a results row's token_usage names


class Loose(BaseModel):
    """Keeps keys the model does not name (a file's extra fields survive a round trip), and dumps
    only the fields it was given: a row read and written back, or a record built and read again,
    holds the keys it held, not every optional field as null (a run recorded through these models
    holds the same JSON values as one recorded from plain dicts before them; only the order of
    keys may differ: named fields first)."""

    model_config = ConfigDict(extra="allow")

    @model_serializer(mode="wrap")
    def _as_given(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        given = self.model_fields_set | set(self.__pydantic_extra__ or {})
        return {k: v for k, v in handler(self).items() if k in given}


class Rubric(Loose):
    """The Planner-authored rubric of one trigger, frozen at curation time."""

    type: TriggerType
    pass_criteria: str
    partial_criteria: str
    fail_criteria: str


class Verdict(Loose):
    """A trigger's `evaluation_result`. The release holds status, score, rationale and evidence;
    our judge adds whether the evidence is a verbatim quote, attempts and model, and a panel adds
    its votes and each judge's own verdict. `error` is set on our failed calls (status ERROR)."""

    status: Status
    score: Grade | None = None
    rationale: str | None = None
    evidence: str | None = None
    evidence_verbatim: bool | None = Field(None, description="ours: the evidence is quoted from the reply")
    judge_attempts: int | None = Field(None, description="ours: answers asked of the judge until one parsed")
    model: str | None = Field(None, description="ours: the judge model")
    error: str | None = Field(None, description="ours: why the call failed (status ERROR)")
    votes: dict[str, int] | None = Field(None, description="ours: a panel's votes per grade")
    judges: list[Verdict] | None = Field(None, description="ours: each panel judge's own verdict")

    @property
    def label(self) -> Label:
        """PASS / PARTIAL / FAIL for a graded verdict, else SKIPPED or ERROR."""
        if self.status == "EVALUATED" and self.score is not None:
            return self.score
        return "ERROR" if self.status == "ERROR" else "SKIPPED"


class TriggerPoint(Loose):
    turn: int = Field(ge=1)
    evaluation_rubric: Rubric
    evaluation_result: Verdict | None = None


class StateAudit(Loose):
    current_turn: int | None = None
    previous_trigger_count: int | None = None
    is_max_reached: bool | None = None


class TacticalOrder(Loose):
    intent: str | None = None
    content_payload: list[Any] | None = None
    behavioral_directive: str | None = None


class PlannerState(Loose):
    """The curation Planner's record of one turn: informational, never used to score."""

    state_audit: StateAudit | None = None
    is_trigger_point: bool | None = None
    stop_conversation: bool | None = None
    evaluation_rubric: dict[str, JsonValue] | None = None
    tactical_order: TacticalOrder | None = None


class TurnRecord(Loose):
    """One curated turn of a corpus dialogue."""

    turn: int = Field(ge=1)
    user_message: str
    assistant_response: str
    planner: PlannerState | None = None


class ResultTurnRecord(Loose):
    """One regenerated trigger turn of a results row: the model's reply beside the curated one.
    Our own rows keep a trigger whose call failed, with no reply and the `error`."""

    turn: int = Field(ge=1)
    user_message: str | None = None
    assistant_response: str | None = None
    original_assistant_response: str | None = None
    error: str | None = None


class AgentUsage(Loose):
    prompt_tokens: int = Field(0, ge=0)
    completion_tokens: int = Field(0, ge=0)
    calls: int = Field(0, ge=0)


class CorpusRow(Loose):
    """A curated dialogue of `final_dialogues.jsonl` (labels optional: some copies carry the
    curation-time `evaluation_result` and a row-level `trigger_stats`)."""

    blueprint_id: str
    scenario_id: str
    unique_id_eval: str
    uuid: str | None = None
    category_key: str
    style_combination_index: int = Field(ge=1, le=24)
    evaluated_model: str
    num_turns_completed: int = Field(ge=1)
    trigger_points: list[TriggerPoint] = Field(min_length=1)
    turn_records: list[TurnRecord] = Field(min_length=1)
    token_usage: dict[str, AgentUsage] | None = None
    trigger_stats: dict[str, dict[str, int]] | None = None


class ResultRow(Loose):
    """A row of a per-model results file, typed as leniently as the released files need: every
    identity field may be absent, `unique_id_eval` may be the row's position (an integer)
    instead of the composite key, and a trigger may have no verdict."""

    blueprint_id: str | None = None
    scenario_id: str | None = None
    unique_id_eval: str | int | None = None
    uuid: str | None = None
    category_key: str | None = None
    style_combination_index: int | None = None
    evaluated_model: str | None = None
    source_evaluated_model: str | None = None
    num_trigger_points: int | None = None
    trigger_stats: dict[str, dict[str, int]] | None = None
    trigger_points: list[TriggerPoint]
    turn_records: list[ResultTurnRecord] = Field(default_factory=list)
    token_usage: dict[str, AgentUsage] = Field(default_factory=dict)
    source_results_path: str | None = None

    def composite_id(self) -> str | None:
        """`{blueprint_id}__style{index}__{uuid}`, when the row holds all three."""
        if self.blueprint_id and self.style_combination_index is not None and self.uuid:
            return f"{self.blueprint_id}__style{self.style_combination_index}__{self.uuid}"
        return None
