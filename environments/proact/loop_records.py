"""What ProactBench's live loop (`environments.proact.dialogue_loop`) reads and writes.

TypedDicts, not classes: the blueprint arrives as its JSON row (`corpora.proact_blueprints`),
and everything the loop writes -- orders, rubrics, turn records, verdicts -- goes into the
release's row as is (`environments.proact.live` reads the records into `TurnRecord`s), so these
are the shapes of those JSON objects. The LangGraph state that carries them is in the loop.
"""

from __future__ import annotations

from typing import NotRequired, TypedDict

from corpora.proact_blueprints import Anchor


class PlannerBrief(TypedDict):
    """The blueprint's planning fields: what the Planner may see (no persona, no style)."""
    hidden_goal: str
    explicit_request: str
    implicit_anchors: list[Anchor]
    ideal_trajectory: list[str]
    done_signal: str


def planner_brief(blueprint: PlannerBrief) -> PlannerBrief:
    """Only the planning fields of a blueprint: a whole blueprint row also holds the persona."""
    return {"hidden_goal": blueprint["hidden_goal"], "explicit_request": blueprint["explicit_request"],
            "implicit_anchors": blueprint["implicit_anchors"], "ideal_trajectory": blueprint["ideal_trajectory"],
            "done_signal": blueprint["done_signal"]}


class Order(TypedDict):
    """The Planner's tactical order for the user's next message."""
    intent: str
    content_payload: list[str]
    behavioral_directive: str


class Criteria(TypedDict):
    """The rubric text the Planner writes on a trigger turn."""
    pass_criteria: str
    partial_criteria: str
    fail_criteria: str


class Plan(TypedDict):
    """The Planner's parsed answer (or the template's)."""
    tactical_order: Order
    evaluation_rubric: Criteria | None


class TriggerRubric(Criteria):
    """A trigger's rubric as recorded: the criteria and the type the schedule fixed."""
    type: str


class StateAudit(TypedDict):
    current_turn: int
    previous_trigger_count: int
    is_max_reached: bool


class AnchorOrder(TypedDict):
    id: str
    forced: bool
    reason: str | None


class PlannerRecord(TypedDict):
    """A turn's `planner` record: the release's Planner state plus the loop's own account."""
    state_audit: StateAudit
    is_trigger_point: bool
    stop_conversation: bool
    evaluation_rubric: TriggerRubric | None
    tactical_order: Order
    revealed_anchor_ids: list[str]
    anchor_order: AnchorOrder | None
    say_done: bool
    planner_fallback: bool
    planner_attempts: int
    planner_problems: list[str]
    order_patches: list[str]
    protocol_notes: list[str]


class UserAgentRecord(TypedDict):
    fallback: bool
    attempts: int
    problems: list[str]


class LoopTurnRecord(TypedDict):
    """A finished turn, in the release's turn_records shape (plus the User Agent's account)."""
    turn: int
    planner: PlannerRecord
    user_message: str
    assistant_response: str
    user_agent: UserAgentRecord


class LoopVerdict(TypedDict):
    """What the judge role returns for a trigger (an `evaluation_result`); ERROR when the
    assistant failed on the trigger turn."""
    status: str
    score: NotRequired[str | None]
    error: NotRequired[str]


class LoopTrigger(TypedDict):
    turn: int
    evaluation_rubric: TriggerRubric | None  # set on every trigger turn
    evaluation_result: LoopVerdict
