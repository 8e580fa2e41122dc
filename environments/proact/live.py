"""Suite `proact-live`: ProactBench's three-agent loop run live against the model under test.

One sample = one (blueprint, style) pair = one dialogue, the independent unit. The Planner and
the User Agent drive up to ten turns (`environments.proact.dialogue_loop`), the Assistant under test answers
every turn, and the Judge grades the trigger turns against the rubric the Planner committed
before the Assistant answered. The output is a row in the official release format, so the
offline suite's metrics, exports and corpus checks read it unchanged.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from pydantic import Field, JsonValue

from corpora.proact_blueprints import Blueprint, load_blueprints
from corpora.proact_types import Rubric, TurnRecord
from environments.proact.dialogue_loop import PlannerView, Roles, UserView, build, make_schedule, run_dialogue
from environments.proact.judge_prompts import HARNESS_JUDGE
from environments.proact.live_prompts import (
    PLANNER_CONFIG,
    USER_CONFIG,
    assistant_messages,
    parse_planner,
    planner_decode_schema,
    planner_fallback,
    planner_messages,
    user_fallback,
    user_messages,
)
from environments.proact.loop_records import LoopVerdict, Plan, TriggerRubric
from environments.proact.metrics import (
    official_metrics,
    panel_agreement,
    proact_breakdowns,
    proact_counts,
    proact_metrics,
)
from environments.proact.payloads import LiveFallbacks, LiveProtocol, LiveScores, LiveTranscript, LiveTrigger, TriggerLabel
from environments.proact.protocol import ASSISTANT_CONFIG
from environments.proact.reference import judge_settings
from environments.proact.scoring import Reply, judge_transcript
from environments.proact.styles import COMBINATIONS, mnemonic, style_card
from environments.proact.suite import JudgePromptOptions
from harness.messages import ChatMessage
from harness.records import Metric, SampleRecord
from harness.structured import reply_text
from harness.suite import FunctionScorer, Sample, SampleContext, Score, Scorer, Suite, Transcript

STYLE_STRIDE = 7  # coprime with 24: consecutive samples get styles far apart in the table


def sample_order(blueprints: list[Blueprint]) -> list[tuple[Blueprint, int]]:
    """Every (blueprint, style) pair once, ordered so that any prefix spreads over blueprints,
    categories and styles: blueprints round-robin over categories, and round r gives blueprint
    b the style ((b + r) * 7) mod 24 + 1 -- the first min(B, 24) samples all differ in both."""
    by_cat: dict[str, list[Blueprint]] = {}
    for bp in blueprints:
        by_cat.setdefault(bp["category_key"], []).append(bp)
    queues = list(by_cat.values())
    mixed = [q[i] for i in range(max(map(len, queues))) for q in queues if i < len(q)]
    n = len(COMBINATIONS)
    return [(bp, (b + r) * STYLE_STRIDE % n + 1) for r in range(n) for b, bp in enumerate(mixed)]


def row_blueprint_id(blueprint: Blueprint, style: int) -> str:
    return f"{blueprint['blueprint_id']}_{mnemonic(style)}"


class LiveOptions(JudgePromptOptions):
    """The defaults are the protocol's; the knobs exist so a test can run the embedded model in
    every role within minutes. Results differ with them, so they are hashed into the run and
    recorded in every row's `protocol`."""

    planner_max_tokens: int = Field(PLANNER_CONFIG.max_tokens, ge=16, description="max new tokens per Planner call")
    user_max_tokens: int = Field(USER_CONFIG.max_tokens, ge=16, description="max new tokens per User Agent call")
    planner_attempts: int = Field(3, ge=1, le=10, description="Planner attempts per turn before the scripted fallback")
    user_attempts: int = Field(3, ge=1, le=10, description="User Agent attempts per turn before the scripted fallback")


@dataclass(frozen=True)
class LiveSample:
    """One (blueprint, style) pair; the blueprint as its file holds it (checked by its schema:
    `corpora.proact_blueprints`), the style an index into the 24 combinations."""

    blueprint: Blueprint
    style: int


class ProactLiveSuite(Suite[LiveSample, LiveTranscript, LiveScores]):
    name = "proact-live"
    version = "1.0.0"
    headline_metric = "proactivity_overall_weighted_score"
    description = "ProactBench live: Planner and User Agent drive a dialogue with the model under test; judge the triggers"
    Options = LiveOptions
    options: LiveOptions
    transcript_type = LiveTranscript
    scores_type = LiveScores

    def __init__(self, options: LiveOptions | None = None) -> None:
        super().__init__(options)
        self.planner_config = PLANNER_CONFIG.merged(max_tokens=self.options.planner_max_tokens)
        self.user_config = USER_CONFIG.merged(max_tokens=self.options.user_max_tokens)
        self.planner_attempts, self.user_attempts = self.options.planner_attempts, self.options.user_attempts
        # The judge reads the options' prompt with the project's generation settings (no `preset` here).
        self.judge = judge_settings(self.options.judge_prompt_in_use(), "harness", HARNESS_JUDGE)
        self._identity: dict[str | None, dict[str, JsonValue]] = {}

    @property
    def solver_roles(self) -> tuple[str, ...]:
        return ("assistant", "planner", "user")

    # ------------------------------------------------------------ samples
    def load_samples(self, corpus: str | None) -> list[Sample[LiveSample]]:
        blueprints, identity = load_blueprints(corpus)
        self._identity[corpus] = identity
        return [Sample(id=f"{row_blueprint_id(bp, style)}__style{style}", data=LiveSample(bp, style))
                for bp, style in sample_order(blueprints)]

    def corpus_identity(self, corpus: str | None) -> dict[str, JsonValue]:
        if corpus not in self._identity:
            self.load_samples(corpus)
        return {**self._identity[corpus], "judge_prompt": self.judge.prompt.identity()}

    # ------------------------------------------------------------ one dialogue
    def _roles(self, ctx: SampleContext, blueprint: Blueprint, style: int) -> Roles:
        persona, card = blueprint["persona"], style_card(style)

        async def plan(view: PlannerView, attempt: int) -> Plan:
            trigger = view.directive.trigger is not None
            config = self.planner_config.merged(seed=ctx.seed + attempt, json_schema=planner_decode_schema(trigger))
            return parse_planner(reply_text(await ctx.generate("planner", planner_messages(view), config)), trigger)

        async def speak(view: UserView, attempt: int) -> str:
            messages = user_messages(persona, card, view.order, view.conversation, view.feedback)
            return (await ctx.generate("user", messages, self.user_config.merged(seed=ctx.seed + attempt))).text

        async def answer(history: list[ChatMessage]) -> str:
            return (await ctx.generate("assistant", assistant_messages(history), ASSISTANT_CONFIG)).text

        async def judge(rubric: TriggerRubric | None, history: list[ChatMessage], reply: str) -> LoopVerdict:
            # Judging is the scorer's step (after the dialogue): the loop only marks the trigger.
            return {"status": "PENDING"}

        return Roles(plan=plan, plan_fallback=planner_fallback, speak=speak, speak_fallback=user_fallback,
                     answer=answer, judge=judge)

    async def solve(self, sample: Sample[LiveSample], ctx: SampleContext) -> Transcript:
        bp, style = sample.data.blueprint, sample.data.style
        schedule = make_schedule(bp["blueprint_id"], [a["id"] for a in bp["implicit_anchors"]])
        graph = build(bp, schedule, self._roles(ctx, bp, style),
                      planner_attempts=self.planner_attempts, user_attempts=self.user_attempts)
        final = await run_dialogue(graph)

        triggers = []
        for tp in sorted(final["triggers"], key=lambda tp: tp["turn"]):
            trigger = LiveTrigger(turn=tp["turn"], evaluation_rubric=Rubric.model_validate(tp["evaluation_rubric"]))
            if tp["evaluation_result"].get("status") == "ERROR":  # the assistant failed on this turn
                trigger.assistant_error = tp["evaluation_result"].get("error")
            triggers.append(trigger)
        records = final["records"]
        reached = {tp.turn for tp in triggers}
        errors = [final["failed"]] if final["failed"] else []
        # A scheduled trigger that never happened (the dialogue broke off, or a RECOVERY was
        # withheld) is an error; the scorer counts it as an ERROR label.
        errors += [f"turn {turn}: scheduled {kind} trigger did not take place"
                   for turn, kind in sorted(schedule.triggers.items()) if turn not in reached]
        fallbacks = LiveFallbacks(planner=sum(r["planner"]["planner_fallback"] for r in records),
                                  user=sum(r["user_agent"]["fallback"] for r in records))
        row_bp = row_blueprint_id(bp, style)
        uuid = hashlib.sha256(f"{sample.id}:{ctx.seed}".encode()).hexdigest()[:32]
        output = LiveTranscript(
            blueprint_id=row_bp, scenario_id=bp["scenario_id"], unique_id_eval=f"{row_bp}__style{style}__{uuid}",
            uuid=uuid, category_key=bp["category_key"], style_combination_index=style,
            evaluated_model=ctx.models["assistant"].name, num_turns_completed=len(records),
            trigger_points=triggers, turn_records=[TurnRecord.model_validate(r) for r in records], fallbacks=fallbacks,
            protocol=LiveProtocol(
                scheduled_triggers={str(t): k for t, k in sorted(schedule.triggers.items())},
                scheduled_done_turn=schedule.done_turn, done_turn=final["done_turn"],
                anchor_due=schedule.anchor_due, revealed_anchor_ids=final["revealed"],
                planner_max_tokens=self.planner_config.max_tokens, user_max_tokens=self.user_config.max_tokens,
                planner_attempts=self.planner_attempts, user_attempts=self.user_attempts,
            ),
        )
        return Transcript(output=output, errors=errors)

    # ------------------------------------------------------------ scoring
    def scorers(self) -> dict[str, Scorer[LiveTranscript]]:
        return {"judge": FunctionScorer("judge", self._judge, roles=("judge",),
                                        description="the ProactBench judge on each trigger turn of the live dialogue")}

    async def _judge(self, sample: Sample[LiveSample], transcript: LiveTranscript, ctx: SampleContext) -> Score:
        """Judge every trigger that took place, against the dialogue as it happened (the assistant's
        own earlier replies are its history); a scheduled trigger that did not happen is ERROR."""
        triggers = transcript.trigger_points
        replies: dict[int, Reply] = {r.turn: (r.assistant_response, None) for r in transcript.turn_records}
        for tp in triggers:
            if "assistant_error" in tp.model_fields_set:  # recorded (its message may be null)
                replies[tp.turn] = (None, tp.assistant_error)
        judged, errors = await judge_transcript(ctx, transcript.turn_records, triggers, replies, self.judge)
        scheduled = {int(t): k for t, k in transcript.protocol.scheduled_triggers.items()}
        reached = {tp.turn for tp in triggers}
        missed = [TriggerLabel(turn=t, type=k, label="ERROR") for t, k in scheduled.items() if t not in reached]
        scores = LiveScores(triggers=sorted(judged.triggers + missed, key=lambda lab: lab.turn), verdicts=judged.verdicts,
                            trigger_stats=judged.trigger_stats, expected_types=[k for _, k in sorted(scheduled.items())],
                            planner_fallbacks=transcript.fallbacks.planner, user_fallbacks=transcript.fallbacks.user)
        return Score(values=scores, errors=errors)

    # ------------------------------------------------------------ metrics (the offline suite's)
    def scores_on_failure(self, sample: Sample[LiveSample]) -> dict[str, JsonValue]:
        bp = sample.data.blueprint
        schedule = make_schedule(bp["blueprint_id"], [a["id"] for a in bp["implicit_anchors"]])
        return {"triggers": [], "expected_types": [k for _, k in sorted(schedule.triggers.items())]}

    def metrics(self, records: list[SampleRecord], seed: int = 0) -> dict[str, Metric]:
        return proact_metrics(records, seed=seed) | panel_agreement(records, seed=seed)

    def breakdowns(self, records: list[SampleRecord], seed: int = 0) -> dict[str, dict[str, Metric]]:
        return proact_breakdowns(records, seed=seed)

    def counts(self, records: list[SampleRecord]) -> dict[str, int]:
        counts = proact_counts(records)
        scores = [self.read_scores(r.scores) for r in records]
        counts["planner_fallbacks"] = sum(s.planner_fallbacks or 0 for s in scores)
        counts["user_fallbacks"] = sum(s.user_fallbacks or 0 for s in scores)
        return counts

    def official_summary(self, records: list[SampleRecord]) -> dict[str, Any]:
        return dict(official_metrics(records))  # the harness writes it to the run's summary as is
