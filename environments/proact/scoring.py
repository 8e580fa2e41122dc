"""ProactBench's judge as a scorer: grade each trigger turn's reply in a transcript against its
rubric (one judge or a panel, `judging.py`). The offline and the live suite share it; so does
`harness score`, which re-judges any run's transcripts with another judge.

A trigger whose reply is missing (the model under test failed on it) is an ERROR label, never a
dropped trigger: dropping it would shrink the denominator.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from pydantic import JsonValue

from corpora.proact_types import LABELS, TRIGGER_TYPES, TriggerPoint, TurnRecord, Verdict
from environments.proact.judge_prompts import HARNESS_JUDGE, JudgeSettings
from environments.proact.judging import judge_reply
from environments.proact.payloads import ProactScores, TriggerLabel, TriggerVerdict
from environments.proact.protocol import history_messages
from harness.records import SampleRecord
from harness.suite import SampleContext


def trigger_stats(labels: list[TriggerLabel]) -> dict[str, dict[str, int]]:
    stats: dict[str, dict[str, int]] = {t: {lab: 0 for lab in LABELS} for t in TRIGGER_TYPES}
    for lab in labels:
        stats[lab.type][lab.label] += 1
    return stats


# What a transcript holds for one trigger turn: (the reply, why there is none).
Reply = tuple[str | None, str | None]


async def judge_trigger(ctx: SampleContext, history: Sequence[TurnRecord], tp: TriggerPoint, reply: Reply,
                        settings: JudgeSettings = HARNESS_JUDGE) -> Verdict:
    """One trigger's verdict (`evaluation_result`) for the reply the transcript holds."""
    text, error = reply
    if text is None:
        return Verdict(status="ERROR", error=error or "no reply in the transcript")
    return await judge_reply(ctx, tp.evaluation_rubric, history_messages(history, tp.turn), text,
                             turn=tp.turn, settings=settings)


async def judge_transcript(ctx: SampleContext, history: Sequence[TurnRecord], triggers: Sequence[TriggerPoint],
                           replies: dict[int, Reply],
                           settings: JudgeSettings = HARNESS_JUDGE) -> tuple[ProactScores, list[str]]:
    """Scores for a set of triggers: `triggers` (turn, type, label), `verdicts` (turn, type,
    evaluation_result), `trigger_stats`, and one error line per trigger the judge could not grade
    (a missing reply is the solver's error, already recorded).
    `history` is the turns each judge sees (the curated corpus row's offline, the live dialogue's
    own live); `replies` maps a turn to its reply (or why there is none); `settings` is the
    judge's prompt and generation settings (the project's own by default)."""
    results = await asyncio.gather(*(
        judge_trigger(ctx, history, tp, replies.get(tp.turn, (None, None)), settings) for tp in triggers))
    labels, verdicts, errors = [], [], []
    for tp, res in zip(triggers, results):
        kind = tp.evaluation_rubric.type
        labels.append(TriggerLabel(turn=tp.turn, type=kind, label=res.label))
        verdicts.append(TriggerVerdict(turn=tp.turn, type=kind, evaluation_result=res))
        if res.label == "ERROR" and replies.get(tp.turn, (None, None))[0] is not None:
            errors.append(f"turn {tp.turn}: {res.error or res.rationale}")
    return ProactScores(triggers=labels, verdicts=verdicts, trigger_stats=trigger_stats(labels)), errors


USAGE_NAMES = {"user": "user_agent"}  # the release names the simulated user `user_agent`


def release_row(record: SampleRecord) -> dict[str, JsonValue]:
    """A scored record as a row of the official release format: the transcript, each trigger's
    `evaluation_result` from the scorer's verdicts, `trigger_stats`, and `token_usage` from the
    record's usage (stored once, on the record). Records of format 1 already hold the verdicts."""
    row = dict(record.output)
    verdicts = {v["turn"]: v["evaluation_result"] for v in record.scores.get("verdicts", [])}
    triggers = []
    for tp in row.get("trigger_points", []):
        entry = {k: v for k, v in tp.items() if k != "assistant_error"}
        if tp["turn"] in verdicts:
            entry["evaluation_result"] = verdicts[tp["turn"]]
        triggers.append(entry)
    row["trigger_points"] = triggers
    if "trigger_stats" in record.scores:
        row["trigger_stats"] = record.scores["trigger_stats"]
    if record.usage:
        row["token_usage"] = {USAGE_NAMES.get(role, role): u.model_dump() for role, u in sorted(record.usage.items())}
    return row
